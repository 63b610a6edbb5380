#include "cli/group_format.h"

#include <map>

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
  // The view lists shards per member; the shards table wants the reverse. A shard a member
  // must release (revoking) is still read by it, and pending is where it goes next.
  std::map<int32_t, std::string> owner, target;
  for (const MemberView& m : v.members) {
    members.AddRow({m.member_id, std::to_string(m.member_epoch), OrDash(m.instance_id),
                    FormatShardSet(m.assigned_shards), FormatShardSet(m.pending_shards),
                    FormatShardSet(m.revoking_shards), FormatLeaseMs(m.lease_remaining_ms),
                    MemberFlags(m)});
    for (int32_t s : m.assigned_shards) owner[s] = target[s] = m.member_id;
    for (int32_t s : m.revoking_shards) owner[s] = m.member_id;
    for (int32_t s : m.pending_shards) target[s] = m.member_id;
  }

  Table shards({"SHARD", "STREAM KEY", "OWNER", "TARGET"});
  for (const RoutingShard& s : v.shards) {
    const std::string& o = owner[s.id];
    const std::string& t = target[s.id];
    shards.AddRow({std::to_string(s.id), s.stream, OrDash(o), o == t ? "" : OrDash(t)});
  }

  std::string out = header.Render() + "\n";
  out += members.empty() ? "members: none\n" : members.Render();
  out += "\n" + shards.Render();
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

std::string FormatGroupList(const std::vector<GroupKey>& groups) {
  if (groups.empty()) return "no groups\n";
  Table t({"STREAM", "GROUP"});
  for (const GroupKey& g : groups) t.AddRow({g.stream, g.group});
  return t.Render();
}

}  // namespace rsc::cli
