// create, list, describe, stream, config, delete, fence (docs/protocol.md §7.3).

#include <unistd.h>

#include <array>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/group_format.h"
#include "core/protocol_json.h"

namespace rsc::cli {
namespace {

// --<field> options of the config object (docs/protocol.md §7.1), shared by create and
// config. Only the fields given on the command line are sent.
struct ConfigFlags {
  std::array<int64_t, 6> values{};
  std::array<CLI::Option*, 6> options{};

  void Add(CLI::App* cmd) {
    static constexpr std::array<const char*, 6> kNames = {
        "--heartbeat-interval-ms", "--member-lease-ms",  "--assignment-lease-ms",
        "--rebalance-timeout-ms",  "--routing-lease-ms", "--routing-refresh-ms"};
    for (size_t i = 0; i < kNames.size(); ++i) {
      options[i] = cmd->add_option(kNames[i], values[i], "Config field (ms)");
    }
  }
  GroupConfigPatch Patch() const {
    GroupConfigPatch p;
    std::array<std::optional<int64_t>*, 6> fields = {
        &p.heartbeat_interval_ms, &p.member_lease_ms,  &p.assignment_lease_ms,
        &p.rebalance_timeout_ms,  &p.routing_lease_ms, &p.routing_refresh_ms};
    for (size_t i = 0; i < fields.size(); ++i) {
      if (options[i]->count() > 0) *fields[i] = values[i];
    }
    return p;
  }
};

struct GroupArgs {
  std::string stream;
  std::string group;
  void Add(CLI::App* cmd) {
    cmd->add_option("STREAM", stream, "Stream prefix P")->required();
    cmd->add_option("GROUP", group, "Consumer group G")->required();
  }
  std::string Name() const { return stream + "/" + group; }
};

void Println(Context& ctx, const std::string& body) {
  *ctx.out << body;
  if (body.empty() || body.back() != '\n') *ctx.out << "\n";
}

// Prints a group view answer: as sent with --json, else `headline` and the tables.
int PrintView(Context& ctx, const CallOutcome& call, const std::string& headline) {
  if (ctx.json) {
    Println(ctx, call.body);
    return kExitOk;
  }
  Result<GroupView> view = ParseGroupView(call.body);
  if (!view.ok()) {
    *ctx.err << "rsc: malformed group view from " << call.endpoint << ": " << view.error().message
             << "\n";
    return kExitServerError;
  }
  if (!headline.empty()) *ctx.out << headline << "\n\n";
  *ctx.out << FormatGroupView(*view);
  return kExitOk;
}

// Sets *selected when `cmd` is chosen; `run` is called later with the Context.
void OnSelect(CLI::App* cmd, Command* selected, Command run) {
  cmd->callback([selected, run = std::move(run)] { *selected = run; });
}

void AddCreate(CLI::App& app, Command* selected) {
  struct Opts {
    GroupArgs g;
    int32_t shards = 0;
    ConfigFlags config;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("create", "Create a group (POST /v1/groups)");
  o->g.Add(cmd);
  cmd->add_option("--shards", o->shards,
                  "Shard count (1..4096); required for a new stream, else the stream's");
  o->config.Add(cmd);
  OnSelect(cmd, selected, [o](Context& ctx) {
    CreateGroupRequest req;
    req.stream = o->g.stream;
    req.group = o->g.group;
    req.shard_count = o->shards;
    // Missing fields take the documented defaults, which GroupConfig{} holds.
    req.config = o->config.Patch().ApplyTo(GroupConfig{});
    CallOutcome call =
        ctx.admin->Call("POST", "/v1/groups", SerializeCreateGroupRequest(req), Replay::kUnsafe);
    if (!call.ok()) return Fail(ctx, call);
    return PrintView(ctx, call, "created group " + o->g.Name());
  });
}

void AddList(CLI::App& app, Command* selected) {
  CLI::App* cmd = app.add_subcommand("list", "List groups (GET /v1/groups)");
  OnSelect(cmd, selected, [](Context& ctx) {
    CallOutcome call = ctx.admin->Call("GET", "/v1/groups", "", Replay::kSafe);
    if (!call.ok()) return Fail(ctx, call);
    if (ctx.json) {
      Println(ctx, call.body);
      return static_cast<int>(kExitOk);
    }
    Result<std::vector<GroupKey>> groups = ParseGroupList(call.body);
    if (!groups.ok()) {
      *ctx.err << "rsc: malformed group list: " << groups.error().message << "\n";
      return static_cast<int>(kExitServerError);
    }
    *ctx.out << FormatGroupList(*groups);
    return static_cast<int>(kExitOk);
  });
}

void AddDescribe(CLI::App& app, Command* selected) {
  auto o = std::make_shared<GroupArgs>();
  CLI::App* cmd = app.add_subcommand("describe", "Show a group, its members and shards");
  o->Add(cmd);
  OnSelect(cmd, selected, [o](Context& ctx) {
    CallOutcome call = ctx.admin->Call("GET", GroupPath(o->stream, o->group), "", Replay::kSafe);
    if (!call.ok()) return Fail(ctx, call);
    return PrintView(ctx, call, "");
  });
}

// PATCH /v1/streams/{P} with the routing values given (SPEC D4), at `expected` or, none
// given, at the revision just read (one retry on REVISION_CONFLICT, as WithRevision).
CallOutcome PatchStream(Context& ctx, const std::string& stream, PatchStreamRequest req,
                        std::optional<int64_t> expected) {
  for (int attempt = 0;; ++attempt) {
    if (expected) {
      req.expected_layout_revision = *expected;
    } else {
      StreamView view;
      if (CallOutcome read = ReadStream(ctx, stream, &view); !read.ok()) return read;
      req.expected_layout_revision = view.revision;
    }
    // Revision-checked: a replay after a lost reply is refused, not applied twice.
    CallOutcome call = ctx.admin->Call("PATCH", StreamPath(stream),
                                       SerializePatchStreamRequest(req), Replay::kUnsafe);
    if (expected || call.code != "REVISION_CONFLICT" || attempt == 1) return call;
    *ctx.err << "rsc: layout revision " << req.expected_layout_revision
             << " was overtaken (REVISION_CONFLICT); re-reading the stream and retrying once\n";
  }
}

void AddStream(CLI::App& app, Command* selected) {
  struct Opts {
    std::string stream;
    int64_t lease = 0, refresh = 0, revision = 0;
    CLI::Option *lease_opt = nullptr, *refresh_opt = nullptr, *revision_opt = nullptr;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "stream", "Show a stream's layout: groups, generations; change its routing lease");
  cmd->add_option("STREAM", o->stream, "Stream prefix P")->required();
  o->lease_opt = cmd->add_option("--routing-lease-ms", o->lease,
                                 "Set the stream's routing lease (PATCH /v1/streams/{P})");
  o->refresh_opt = cmd->add_option("--routing-refresh-ms", o->refresh,
                                   "Set the stream's routing refresh interval");
  o->revision_opt = cmd->add_option("--expected-revision", o->revision,
                                    "With a change: refuse unless the layout is at this revision");
  OnSelect(cmd, selected, [o](Context& ctx) {
    const bool change = o->lease_opt->count() > 0 || o->refresh_opt->count() > 0;
    if (!change && o->revision_opt->count() > 0) {
      *ctx.err << "rsc: stream: --expected-revision needs --routing-lease-ms or "
                  "--routing-refresh-ms\n";
      return static_cast<int>(kExitUsage);
    }
    CallOutcome call;
    if (change) {
      PatchStreamRequest req;
      if (o->lease_opt->count() > 0) req.routing_lease_ms = o->lease;
      if (o->refresh_opt->count() > 0) req.routing_refresh_ms = o->refresh;
      std::optional<int64_t> expected;
      if (o->revision_opt->count() > 0) expected = o->revision;
      call = PatchStream(ctx, o->stream, req, expected);
    } else {
      call =
          ctx.admin->Call("GET", "/v1/streams/" + EncodePathSegment(o->stream), "", Replay::kSafe);
    }
    if (!call.ok()) return Fail(ctx, call);
    if (ctx.json) {
      Println(ctx, call.body);
      return static_cast<int>(kExitOk);
    }
    Result<StreamView> view = ParseStreamView(call.body);
    if (!view.ok()) {
      *ctx.err << "rsc: malformed stream view from " << call.endpoint << ": "
               << view.error().message << "\n";
      return static_cast<int>(kExitServerError);
    }
    if (change) *ctx.out << "updated the routing of stream " << o->stream << "\n";
    *ctx.out << FormatStreamView(*view);
    return static_cast<int>(kExitOk);
  });
}

// config is a PATCH with an expected revision.
int RunPatch(Context& ctx, const GroupArgs& g, std::optional<int64_t> expected, PatchGroupBody body,
             const std::string& headline) {
  const std::string path = GroupPath(g.stream, g.group);
  CallOutcome call = WithRevision(ctx, g.stream, g.group, expected, [&](int64_t revision) {
    body.expected_revision = revision;
    // Revision-checked: a replay after a lost reply is refused with REVISION_CONFLICT
    // rather than applied twice, but the user still needs to know the result is unknown.
    return ctx.admin->Call("PATCH", path, SerializePatchGroupBody(body), Replay::kUnsafe);
  });
  if (!call.ok()) return Fail(ctx, call);
  return PrintView(ctx, call, headline);
}

void AddConfig(CLI::App& app, Command* selected) {
  struct Opts {
    GroupArgs g;
    ConfigFlags config;
    int64_t revision_value = 0;
    CLI::Option* revision_opt = nullptr;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("config", "Change config fields (PATCH config)");
  o->g.Add(cmd);
  o->config.Add(cmd);
  o->revision_opt = cmd->add_option("--expected-revision", o->revision_value,
                                    "Refuse unless the group is at this revision");
  OnSelect(cmd, selected, [o](Context& ctx) {
    PatchGroupBody body;
    body.config = o->config.Patch();
    if (body.config->Empty()) {
      *ctx.err << "rsc: config: give at least one --<field> (see rsc config --help)\n";
      return static_cast<int>(kExitUsage);
    }
    std::optional<int64_t> expected;
    if (o->revision_opt->count() > 0) expected = o->revision_value;
    return RunPatch(ctx, o->g, expected, body, "updated the config of " + o->g.Name());
  });
}

// Deleting a group stops every consumer and producer of it at lease end: a person at a
// terminal confirms, a script says --yes.
bool Confirm(Context& ctx, const GroupArgs& g) {
  if (::isatty(STDIN_FILENO) == 0) {
    *ctx.err << "rsc: delete: stdin is not a terminal; pass --yes to delete " << g.Name() << "\n";
    return false;
  }
  *ctx.err << "Delete group " << g.Name()
           << "? Its consumers and producers stop at lease end. [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  if (answer == "y" || answer == "Y" || answer == "yes") return true;
  *ctx.err << "rsc: delete: not confirmed\n";
  return false;
}

void AddDelete(CLI::App& app, Command* selected) {
  struct Opts {
    GroupArgs g;
    bool yes = false;
    int64_t revision_value = 0;
    CLI::Option* revision_opt = nullptr;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("delete", "Delete a group (DELETE, revision-checked)");
  o->g.Add(cmd);
  cmd->add_flag("--yes,-y", o->yes, "Do not ask for confirmation (required in scripts)");
  o->revision_opt = cmd->add_option("--expected-revision", o->revision_value,
                                    "Refuse unless the group is at this revision");
  OnSelect(cmd, selected, [o](Context& ctx) {
    if (!o->yes && !Confirm(ctx, o->g)) return static_cast<int>(kExitUsage);
    std::optional<int64_t> expected;
    if (o->revision_opt->count() > 0) expected = o->revision_value;
    const std::string path = GroupPath(o->g.stream, o->g.group);
    CallOutcome call = WithRevision(ctx, o->g.stream, o->g.group, expected, [&](int64_t rev) {
      return ctx.admin->Call("DELETE", path + "?expectedRevision=" + std::to_string(rev), "",
                             Replay::kUnsafe);
    });
    if (!call.ok()) return Fail(ctx, call);
    if (ctx.json) {
      Println(ctx, call.body);
    } else {
      *ctx.out << "deleted group " << o->g.Name() << "\n";
    }
    return static_cast<int>(kExitOk);
  });
}

void AddFence(CLI::App& app, Command* selected) {
  struct Opts {
    GroupArgs g;
    std::string member;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("fence", "Fence a member: its heartbeats are refused");
  o->g.Add(cmd);
  cmd->add_option("MEMBER_ID", o->member, "Member to fence")->required();
  OnSelect(cmd, selected, [o](Context& ctx) {
    const std::string path =
        GroupPath(o->g.stream, o->g.group) + "/members/" + EncodePathSegment(o->member) + "/fence";
    // Not replayed after a lost reply: fencing a fenced member changes nothing, but the
    // member may have rejoined (unfenced, at epoch + 1) in between, and a replay would fence
    // it again (docs/protocol.md §9). A lost reply is an unknown result.
    CallOutcome call = ctx.admin->Call("POST", path, "", Replay::kUnsafe);
    if (!call.ok()) return Fail(ctx, call);
    return PrintView(ctx, call, "fenced member " + o->member + " of " + o->g.Name());
  });
}

}  // namespace

void AddGroupCommands(CLI::App& app, Command* selected) {
  AddCreate(app, selected);
  AddList(app, selected);
  AddDescribe(app, selected);
  AddStream(app, selected);
  AddConfig(app, selected);
  AddDelete(app, selected);
  AddFence(app, selected);
}

}  // namespace rsc::cli
