#include "cli/group_format.h"

#include <algorithm>
#include <map>
#include <set>

#include "cli/table.h"

namespace rsc::cli {
namespace {

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string FormatConfig(const GroupConfig& c) {
  return "heartbeatIntervalMs=" + std::to_string(c.heartbeat_interval_ms) +
         " memberLeaseMs=" + std::to_string(c.member_lease_ms) +
         " assignmentLeaseMs=" + std::to_string(c.assignment_lease_ms) +
         " rebalanceTimeoutMs=" + std::to_string(c.rebalance_timeout_ms) +
         " routingLeaseMs=" + std::to_string(c.routing_lease_ms) +
         " routingRefreshMs=" + std::to_string(c.routing_refresh_ms);
}

std::string FormatRound(const std::optional<CorrectionRound>& round) {
  if (!round) return "none";
  std::string synced;
  for (const MemberId& m : round->synced) synced += (synced.empty() ? "" : ",") + m.str();
  std::string s = "#" + std::to_string(round->id) + " since version " +
                  std::to_string(round->started_version.value()) + ", synced [" + synced + "], " +
                  std::to_string(round->blockers.size()) + " blocker(s)";
  for (const Blocker& b : round->blockers) {
    s += "; shard " + std::to_string(b.shard.value()) + " held by " + b.member.str();
    if (b.until_ms != 0) s += " until " + std::to_string(b.until_ms);
  }
  return s;
}

std::string MemberFlags(const MemberView& m) {
  std::string flags;
  if (m.fenced) flags += "fenced";
  if (m.leaving) flags += std::string(flags.empty() ? "" : ",") + "leaving";
  return OrDash(flags);
}

}  // namespace

std::string FormatShardSet(const std::vector<int32_t>& shards) {
  if (shards.empty()) return "-";
  std::string out;
  size_t i = 0;
  while (i < shards.size()) {
    size_t j = i;
    while (j + 1 < shards.size() && shards[j + 1] == shards[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(shards[i]);
    if (j > i) out += "-" + std::to_string(shards[j]);
    i = j + 1;
  }
  return out;
}

std::string FormatLeaseMs(int64_t ms) {
  if (ms <= 0) return "0s";
  std::string frac = std::to_string(ms % 1000);
  frac.insert(0, 3 - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return std::to_string(ms / 1000) + (frac.empty() ? "" : "." + frac) + "s";
}

namespace {

// After a reshard (SPEC RS3): what the group has read of each generation, and what the
// waiting shards wait for.
std::string FormatGenerations(const GroupView& v) {
  Table t({"GENERATION", "SHARDS", "COMPLETED", "STATE"});
  for (const GroupGenerationView& g : v.generations) {
    std::string state;
    if (g.completed.size() == g.shards.size()) {
      state = "completed (read to the seal)";
    } else if (!g.waiting_for.empty()) {
      state = "waiting for " + FormatShardSet(g.waiting_for);
    } else {
      state = "reading";
    }
    t.AddRow({std::to_string(g.generation), FormatShardSet(g.shards), FormatShardSet(g.completed),
              state});
  }
  return t.Render();
}

}  // namespace

std::string FormatGroupView(const GroupView& v) {
  Table header;
  header.AddRow({"group:", v.stream + "/" + v.group});
  header.AddRow({"revision:", std::to_string(v.revision)});
  header.AddRow({"metadata version:", std::to_string(v.metadata_version)});
  header.AddRow({"lineage:", OrDash(v.lineage)});
  header.AddRow({"assignment epoch:", std::to_string(v.assignment_epoch)});
  header.AddRow({"shard count:", std::to_string(v.shard_count)});
  header.AddRow({"correction round:", FormatRound(v.correction_round)});
  header.AddRow({"config:", FormatConfig(v.config)});

  Table members(
      {"MEMBER", "EPOCH", "INSTANCE", "ASSIGNED", "PENDING", "REVOKING", "LEASE", "FLAGS"});
  for (const MemberView& m : v.members) {
    members.AddRow({m.member_id, std::to_string(m.member_epoch), OrDash(m.instance_id),
                    FormatShardSet(m.assigned_shards), FormatShardSet(m.pending_shards),
                    FormatShardSet(m.revoking_shards), FormatLeaseMs(m.lease_remaining_ms),
                    MemberFlags(m)});
  }

  // SPEC O1: state, owner and the backlog per shard ("-": Redis could not tell).
  auto figure = [](const std::optional<int64_t>& n) { return n ? std::to_string(*n) : "-"; };
  Table shards({"SHARD", "GEN", "STREAM KEY", "STATE", "OWNER", "TARGET", "LAG", "PENDING",
                "OLDEST PENDING"});
  for (const ShardView& s : v.shards) {
    std::string state = s.state;
    if (!s.waiting_for.empty()) state += " (" + FormatShardSet(s.waiting_for) + ")";
    shards.AddRow({std::to_string(s.id), std::to_string(s.generation), s.stream, state,
                   OrDash(s.owner), s.owner == s.target ? "" : OrDash(s.target), figure(s.lag),
                   figure(s.pending),
                   s.oldest_pending_ms ? FormatLeaseMs(*s.oldest_pending_ms) : "-"});
  }

  std::string out = header.Render() + "\n";
  out += members.empty() ? "members: none\n" : members.Render();
  out += "\n" + shards.Render();
  if (v.generations.size() > 1) out += "\n" + FormatGenerations(v);
  if (!v.taken_shards.empty()) {
    // A stuck shard taken from its owner (docs/protocol.md C8; runbook "a handler is stuck").
    Table taken({"TAKEN SHARD", "FROM", "TAKEN AT (ms)", "RELEASED AT (ms)"});
    for (const TakenShardView& t : v.taken_shards) {
      taken.AddRow({std::to_string(t.shard), t.member, std::to_string(t.taken_ms),
                    std::to_string(t.release_at_ms)});
    }
    out += "\n" + taken.Render();
  }
  return out;
}

std::string FormatStreamView(const StreamView& view) {
  const Layout& l = view.layout;
  std::string groups;
  for (const std::string& g : l.groups) groups += (groups.empty() ? "" : ", ") + g;
  Table head;
  head.AddRow({"stream:", l.stream});
  head.AddRow({"revision:", std::to_string(view.revision)});
  head.AddRow({"version:", std::to_string(l.version)});
  head.AddRow({"groups:", groups.empty() ? "none" : groups});
  head.AddRow({"routing:", "routingLeaseMs=" + std::to_string(l.routing_lease_ms) +
                               " routingRefreshMs=" + std::to_string(l.routing_refresh_ms)});
  Table gens({"GENERATION", "STATE", "SHARDS", "IDS", "KEYS"});
  for (const Generation& g : l.generations) {
    std::vector<int32_t> ids;
    for (const LayoutShard& s : g.shards) ids.push_back(s.id);
    std::string keys = g.shards.front().stream;
    if (g.shards.size() > 1) keys += " … " + g.shards.back().stream;
    gens.AddRow({std::to_string(g.generation), std::string(GenerationStateName(g.state)),
                 std::to_string(g.shards.size()), FormatShardSet(ids), keys});
  }
  return head.Render() + "\n" + gens.Render();
}

namespace {

bool HasLiveMember(const GroupView& v) {
  return std::any_of(v.members.begin(), v.members.end(),
                     [](const MemberView& m) { return m.lease_remaining_ms > 0 && !m.fenced; });
}

// One group's line; sets *ready when the group reads every child or has no live member.
std::string GroupProgress(const GroupView& v, int32_t generation, bool* ready) {
  const std::string name = v.group + ":";
  const bool live = HasLiveMember(v);
  const GroupGenerationView* children = nullptr;
  size_t parents = 0, completed = 0;
  for (const GroupGenerationView& g : v.generations) {
    if (g.generation == generation) children = &g;
    if (g.generation < generation) {
      parents += g.shards.size();
      completed += g.completed.size();
    }
  }
  if (children == nullptr) {
    *ready = !live;
    return name + " has not adopted generation " + std::to_string(generation) + " yet" +
           (live ? "" : " (no live member: not waited for)");
  }
  std::set<int32_t> read;
  for (const MemberView& m : v.members)
    read.insert(m.assigned_shards.begin(), m.assigned_shards.end());
  size_t reading = 0;
  for (int32_t s : children->shards) reading += read.count(s);
  std::string line = name + " parents completed " + std::to_string(completed) + "/" +
                     std::to_string(parents) + ", children read " + std::to_string(reading) + "/" +
                     std::to_string(children->shards.size());
  if (!children->waiting_for.empty()) {
    line += ", waiting for " + FormatShardSet(children->waiting_for);
  }
  if (!live) line += " (no live member: not waited for)";
  *ready = !live || (children->waiting_for.empty() && reading == children->shards.size());
  return line;
}

}  // namespace

ReshardProgress DescribeReshardProgress(const StreamView& stream, int32_t generation,
                                        const std::vector<GroupView>& views, int64_t now_ms) {
  ReshardProgress p;
  const Generation* gen = nullptr;
  for (const Generation& g : stream.layout.generations) {
    if (g.generation == generation) gen = &g;
  }
  if (gen == nullptr) {
    // Dropped: it was retired (read to its end by every group) and emptied since.
    p.text = "generation " + std::to_string(generation) +
             " is not in the layout any more: superseded, retired and emptied\n";
    p.done = true;
    p.superseded = true;
    return p;
  }
  if (gen->state == GenerationState::kSealed || gen->state == GenerationState::kRetired) {
    // A later reshard took over: its children are what the groups go on to.
    p.text = "generation " + std::to_string(generation) + ": " +
             std::string(GenerationStateName(gen->state)) + ", superseded by generation " +
             std::to_string(stream.layout.generations.back().generation) +
             " (a later reshard; rsc stream " + stream.layout.stream + ")\n";
    p.done = true;
    p.superseded = true;
    return p;
  }
  p.text = "generation " + std::to_string(generation) + " (" + std::to_string(gen->shards.size()) +
           " shards): " + std::string(GenerationStateName(gen->state));
  if (gen->state == GenerationState::kPreparing) {
    if (DecideRoutingWait(stream.layout, *gen, now_ms) != RoutingWait::kReady) {
      // RS2's routing-lease wait (core/layout.h Generation::prepared_ms). Static text: the
      // progress is printed only when it changes.
      p.text +=
          " (waiting out producers' routing lease: the shards of the generation before "
          "it are sealed " +
          std::to_string(RoutingWaitMs(stream.layout, *gen)) + " ms after it began)\n";
    } else {
      p.text += " (sealing the shards of the generation before it)\n";
    }
    return p;
  }
  p.text += "\n";
  bool all_ready = true;
  for (const GroupView& v : views) {
    bool ready = false;
    p.text += "  " + GroupProgress(v, generation, &ready) + "\n";
    all_ready = all_ready && ready;
  }
  p.done = all_ready;
  return p;
}

std::string FormatGroupList(const std::vector<GroupKey>& groups) {
  if (groups.empty()) return "no groups\n";
  Table t({"STREAM", "GROUP"});
  for (const GroupKey& g : groups) t.AddRow({g.stream, g.group});
  return t.Render();
}

}  // namespace rsc::cli
