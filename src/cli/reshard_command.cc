// rsc reshard STREAM --shards N (SPEC RS1, docs/cli.md): asks the coordinator for a new
// generation of the stream's layout, then waits and shows progress until every group with a
// live member reads every child shard (--no-wait returns at once).

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/group_format.h"
#include "core/metadata.h"
#include "core/protocol_json.h"

namespace rsc::cli {
namespace {

// The newest generation's shard count, if it is not RETIRED.
std::optional<size_t> NewestShardCount(const StreamView& view) {
  if (view.layout.generations.empty()) return std::nullopt;
  const Generation& g = view.layout.generations.back();
  if (g.state == GenerationState::kRetired) return std::nullopt;
  return g.shards.size();
}

// A reshard whose reply was lost (UNKNOWN_RESULT, from the transport or the coordinator)
// judged from the stream read afterwards, against the newest generation read before it was
// sent: still at the revision it named → not applied (the revision check makes sending it
// again safe); a newer generation than before, with the requested count → applied (by this
// request or an identical one: either way it is done); the same newest generation as before
// but a later revision → not applied, and sending it again would be refused (the layout moved
// on: a reshard to the count the stream already had must not be taken as done because
// something else moved the revision); otherwise unknown.
enum class Judged { kApplied, kNotApplied, kOvertaken, kUnknown };
Judged JudgeLostReshard(int64_t expected, int32_t newest_before, int32_t shards,
                        const StreamView& after) {
  if (after.revision == expected) return Judged::kNotApplied;
  if (after.revision < expected || after.layout.generations.empty()) return Judged::kUnknown;
  const int32_t newest_after = after.layout.generations.back().generation;
  if (newest_after > newest_before && NewestShardCount(after) == static_cast<size_t>(shards)) {
    return Judged::kApplied;
  }
  if (newest_after == newest_before) return Judged::kOvertaken;
  return Judged::kUnknown;
}

int32_t NewestGeneration(const StreamView& view) {
  return view.layout.generations.empty() ? 0 : view.layout.generations.back().generation;
}

// POST …/reshard with the given layout revision, or (none given) with the current one,
// read again and retried once on REVISION_CONFLICT as WithRevision does for groups. Without
// a given revision, a stream whose newest generation already has `shards` shards is left
// alone (*already set): re-running a reshard whose reply was lost must not start another
// one. The stream is read before every send (its newest generation then); a lost reply is
// judged from a fresh read of the stream (JudgeLostReshard).
CallOutcome SendReshard(Context& ctx, const std::string& stream, int32_t shards,
                        std::optional<int64_t> expected, bool* already) {
  *already = false;
  for (int attempt = 0;; ++attempt) {
    ReshardRequest req;
    req.shard_count = shards;
    StreamView before;
    if (CallOutcome read = ReadStream(ctx, stream, &before); !read.ok()) return read;
    if (expected) {
      req.expected_layout_revision = *expected;
    } else {
      if (NewestShardCount(before) == static_cast<size_t>(shards)) {
        *already = true;
        return ReadStream(ctx, stream, &before);  // the view the POST would have answered
      }
      req.expected_layout_revision = before.revision;
    }
    // Revision-checked: a replay after a lost reply is refused, not applied twice.
    CallOutcome call = ctx.admin->Call("POST", StreamPath(stream) + "/reshard",
                                       SerializeReshardRequest(req), Replay::kUnsafe);
    if (call.code == "UNKNOWN_RESULT" && attempt == 0) {
      StreamView after;
      CallOutcome read = ReadStream(ctx, stream, &after);
      if (!read.ok()) return call;
      switch (
          JudgeLostReshard(req.expected_layout_revision, NewestGeneration(before), shards, after)) {
        case Judged::kApplied:
          *ctx.err << "rsc: the reshard's reply was lost; the stream shows it applied "
                      "(layout revision "
                   << after.revision << ")\n";
          return read;
        case Judged::kNotApplied:
          *ctx.err << "rsc: the reshard's reply was lost and it was not applied; sending it "
                      "again\n";
          continue;
        case Judged::kOvertaken: {
          CallOutcome refused;
          refused.exit_code = kExitRevisionConflict;
          refused.code = "REVISION_CONFLICT";
          refused.endpoint = read.endpoint;
          refused.message = fmt::format(
              "REVISION_CONFLICT: the reshard's reply was lost and it was not applied: the "
              "stream has no new "
              "generation, and its layout moved on to revision {} (expected {}); read it "
              "with 'rsc stream {}' and run the reshard again",
              after.revision, req.expected_layout_revision, stream);
          return refused;
        }
        case Judged::kUnknown:
          return call;
      }
    }
    if (expected || call.code != "REVISION_CONFLICT" || attempt == 1) return call;
    *ctx.err << "rsc: layout revision " << req.expected_layout_revision
             << " was overtaken (REVISION_CONFLICT); re-reading the stream and retrying once\n";
  }
}

// The views of the stream's groups. A group deleted meanwhile is skipped (it holds nothing
// back); any other failure to read one is a line in *unreadable, and the wait goes on.
std::vector<GroupView> ReadGroups(Context& ctx, const StreamView& stream, std::string* unreadable) {
  std::vector<GroupView> views;
  for (const std::string& g : stream.layout.groups) {
    CallOutcome call =
        ctx.admin->Call("GET", GroupPath(stream.layout.stream, g), "", Replay::kSafe);
    if (!call.ok()) {
      if (call.code != "GROUP_NOT_FOUND") *unreadable += "  " + g + ": " + call.message + "\n";
      continue;
    }
    Result<GroupView> v = ParseGroupView(call.body);
    if (!v.ok()) {
      *unreadable += "  " + g + ": malformed view: " + v.error().message + "\n";
      continue;
    }
    views.push_back(std::move(*v));
  }
  return views;
}

struct Opts {
  std::string stream;
  int32_t shards = 0;
  int64_t revision_value = 0;
  CLI::Option* revision_opt = nullptr;
  bool no_wait = false;
  int64_t wait_timeout_s = 600;
  int64_t poll_ms = 500;
};

int Run(Context& ctx, const Opts& o) {
  std::optional<int64_t> expected;
  if (o.revision_opt->count() > 0) expected = o.revision_value;
  bool already = false;
  CallOutcome sent = SendReshard(ctx, o.stream, o.shards, expected, &already);
  if (!sent.ok()) return Fail(ctx, sent);
  Result<StreamView> answered = ParseStreamView(sent.body);
  if (!answered.ok() || answered->layout.generations.empty()) {
    *ctx.err << "rsc: malformed stream view from " << sent.endpoint << "\n";
    return kExitServerError;
  }
  // The answer shows the layout with the new generation, the newest one.
  const int32_t generation = answered->layout.generations.back().generation;
  if (!ctx.json && already) {
    *ctx.out << o.stream << " already has " << o.shards << " shards in generation " << generation
             << ": nothing sent (pass --expected-layout-revision to reshard to the same count "
                "anyway, e.g. to spread the shards over new cluster masters)\n"
             << std::flush;
  } else if (!ctx.json) {
    *ctx.out << "resharding " << o.stream << " to " << o.shards << " shards: generation "
             << generation << "\n"
             << std::flush;
  }
  if (o.no_wait) {
    if (ctx.json) *ctx.out << sent.body << "\n";
    return kExitOk;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_timeout_s);
  std::string last_shown;
  for (;;) {
    StreamView view;
    CallOutcome read = ReadStream(ctx, o.stream, &view);
    ReshardProgress p;
    if (read.ok()) {
      // A group view that cannot be read (a coordinator restarting, Redis failing over)
      // leaves the wait undecided, never "done".
      std::string unreadable;
      std::vector<GroupView> views = ReadGroups(ctx, view, &unreadable);
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      p = DescribeReshardProgress(view, generation, views, now_ms);
      if (!unreadable.empty()) {
        p.done = false;
        p.text += unreadable;
      }
    } else {
      // Not fatal while waiting: the reshard goes on in the coordinators; retried until the
      // deadline.
      p.text = "stream view not readable: " + read.message + "\n";
    }
    if (!ctx.json && p.text != last_shown) {
      *ctx.out << p.text << std::flush;  // only what changed: a log, not a redrawn screen
      last_shown = p.text;
    }
    if (p.done) {
      if (ctx.json) {
        *ctx.out << read.body << "\n";
      } else if (p.superseded) {
        *ctx.out << "done: generation " << generation
                 << " was superseded by a later reshard; its groups went on to that one\n";
      } else {
        *ctx.out << "done: every group with a live member reads the " << o.shards
                 << " shards of generation " << generation << "\n";
      }
      return kExitOk;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      *ctx.err << "rsc: reshard: still in progress after " << o.wait_timeout_s
               << " s; it goes on without us (rsc stream " << o.stream << ", rsc describe)\n";
      if (ctx.json) *ctx.err << p.text;
      return kExitTimedOut;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
}

}  // namespace

void AddReshardCommand(CLI::App& app, Command* selected) {
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "reshard", "Change a stream's shard count (POST /v1/streams/{P}/reshard), then wait");
  cmd->add_option("STREAM", o->stream, "Stream prefix P (every group of it follows)")->required();
  cmd->add_option("--shards", o->shards, "New shard count, grow or shrink")
      ->required()
      ->check(CLI::Range(int32_t{1}, kMaxShards));
  o->revision_opt = cmd->add_option("--expected-layout-revision", o->revision_value,
                                    "Refuse unless the stream's layout is at this revision");
  cmd->add_flag("--no-wait", o->no_wait, "Return once the new generation is recorded");
  cmd->add_option("--wait-timeout", o->wait_timeout_s,
                  "Seconds to wait for every group with a live member to read the new shards")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
  cmd->add_option("--poll-ms", o->poll_ms, "Progress poll interval")
      ->check(CLI::Range(int64_t{50}, int64_t{60000}))
      ->capture_default_str();
  cmd->callback([selected, o] { *selected = [o](Context& ctx) { return Run(ctx, *o); }; });
}

}  // namespace rsc::cli
