#include "core/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/layout_codec.h"
#include "core/protocol.h"

namespace rsc {

std::string_view GenerationStateName(GenerationState s) {
  switch (s) {
    case GenerationState::kPreparing:
      return "PREPARING";
    case GenerationState::kActive:
      return "ACTIVE";
    case GenerationState::kSealed:
      return "SEALED";
    case GenerationState::kRetired:
      return "RETIRED";
  }
  return "ACTIVE";
}

std::optional<GenerationState> ParseGenerationState(std::string_view s) {
  for (GenerationState g : {GenerationState::kPreparing, GenerationState::kActive,
                            GenerationState::kSealed, GenerationState::kRetired}) {
    if (GenerationStateName(g) == s) return g;
  }
  return std::nullopt;
}

const Generation* Layout::Active() const {
  for (const Generation& g : generations) {
    if (g.state == GenerationState::kActive) return &g;
  }
  return nullptr;
}

bool Layout::HasGroup(std::string_view group) const {
  return std::binary_search(groups.begin(), groups.end(), group);
}

Status CheckLayoutInvariants(const Layout& l) {
  auto bad = [](std::string msg) -> Status {
    return MakeError(ErrorCode::kMetadataUnreadable, "layout: " + msg);
  };
  if (!IsValidStreamName(l.stream)) return bad(fmt::format("stream '{}' is not valid", l.stream));
  if (l.version < 1 || l.version > kMaxCounter) {
    return bad(fmt::format("version {} out of range", l.version));
  }
  if (l.lineage.empty()) return bad("lineage is empty");
  if (l.routing_lease_ms < 1 || l.routing_refresh_ms < 1 ||
      l.routing_refresh_ms >= l.routing_lease_ms) {
    return bad(fmt::format("routingRefreshMs {} must be in [1, routingLeaseMs {})",
                           l.routing_refresh_ms, l.routing_lease_ms));
  }
  if (l.groups.size() > kMaxGroupsPerStream) {
    return bad(fmt::format("{} groups, at most {}", l.groups.size(), kMaxGroupsPerStream));
  }
  for (size_t i = 0; i < l.groups.size(); ++i) {
    if (!IsValidGroupName(l.groups[i])) {
      return bad(fmt::format("groups[{}] '{}' is not a valid group name", i, l.groups[i]));
    }
    if (i > 0 && !(l.groups[i - 1] < l.groups[i])) {
      return bad(fmt::format("groups are not sorted and unique at [{}]", i));
    }
  }
  if (l.generations.empty()) return bad("no generations");
  int active = 0;
  int64_t last_id = -1;
  std::set<std::string> keys;
  for (size_t i = 0; i < l.generations.size(); ++i) {
    const Generation& g = l.generations[i];
    if (g.generation < 0 || (i > 0 && g.generation <= l.generations[i - 1].generation)) {
      return bad(fmt::format("generations[{}] number {} is not ascending", i, g.generation));
    }
    if (g.shards.empty() || g.shards.size() > static_cast<size_t>(kMaxShards)) {
      return bad(fmt::format("generation {} has {} shards (1..{})", g.generation, g.shards.size(),
                             kMaxShards));
    }
    if (g.state == GenerationState::kActive) ++active;
    if ((g.prepared_ms != 0 || g.routing_wait_ms != 0) && g.state != GenerationState::kPreparing) {
      return bad(fmt::format("generation {} is {} but has a routing-lease wait (PREPARING only)",
                             g.generation, GenerationStateName(g.state)));
    }
    if (g.prepared_ms < 0 || g.prepared_ms > kMaxCounter || g.routing_wait_ms < 0 ||
        g.routing_wait_ms > kMaxRoutingWaitMs || (g.routing_wait_ms != 0 && g.prepared_ms == 0)) {
      return bad(fmt::format("generation {}: preparedAtMs {} / routingWaitMs {} out of range",
                             g.generation, g.prepared_ms, g.routing_wait_ms));
    }
    // Oldest first: RETIRED ones, SEALED ones, the ACTIVE one, at most one PREPARING.
    auto rank = [](GenerationState st) {
      switch (st) {
        case GenerationState::kRetired:
          return 0;
        case GenerationState::kSealed:
          return 1;
        case GenerationState::kActive:
          return 2;
        case GenerationState::kPreparing:
          return 3;
      }
      return 3;
    };
    if (i > 0 && (rank(g.state) < rank(l.generations[i - 1].state) ||
                  (g.state == GenerationState::kPreparing &&
                   l.generations[i - 1].state == GenerationState::kPreparing))) {
      return bad(
          fmt::format("generation {} is {} after a {} one (states go RETIRED, SEALED, "
                      "ACTIVE, PREPARING)",
                      g.generation, GenerationStateName(g.state),
                      GenerationStateName(l.generations[i - 1].state)));
    }
    for (const LayoutShard& s : g.shards) {
      if (s.id <= last_id) {
        return bad(
            fmt::format("generation {}: shard id {} is not above {} (ids are unique and "
                        "ascending across generations, D2)",
                        g.generation, s.id, last_id));
      }
      last_id = s.id;
      if (!IsShardKeyOf(l.stream, s.id, s.stream)) {
        return bad(
            fmt::format("shard {}: key '{}' is not a key of shard {} of stream '{}' "
                        "({{P:id}} or {{P:id.<tag>}}, D2)",
                        s.id, s.stream, s.id, l.stream));
      }
      if (!keys.insert(s.stream).second) {
        return bad(fmt::format("shard {}: key '{}' is used twice", s.id, s.stream));
      }
    }
  }
  if (active != 1) return bad(fmt::format("{} ACTIVE generations, exactly one expected", active));
  return OkStatus();
}

ExistingGroup DescribeExistingGroup(const GroupMetadata& m) {
  ExistingGroup e{m.key.group, m.shard_count, m.version.value(), m.config, {}, 0};
  for (const ShardState& s : m.shards) {
    e.newest_generation = std::max(e.newest_generation, s.generation);
    if (s.generation == 0) e.generation0.push_back({s.id, s.stream});
  }
  return e;
}

namespace {

// Generation 0's keys as the groups name them (a v1 group's are {P:s}); fails closed when
// the groups show a reshard (the lost layout cannot be rebuilt from them) or disagree.
Result<std::vector<LayoutShard>> KeysFromGroups(const std::string& stream, int32_t n,
                                                const std::vector<ExistingGroup>& groups) {
  std::vector<LayoutShard> shards;
  for (int32_t s = 0; s < n; ++s) shards.push_back({s, ""});
  for (const ExistingGroup& g : groups) {
    if (g.newest_generation > 0) {
      return MakeError(
          ErrorCode::kMetadataUnreadable,
          fmt::format("stream '{}' has no layout record, but group '{}' reads generation {}: the "
                      "stream was resharded and its layout was lost. Rebuilding generation 0 "
                      "from the groups could route producers to sealed keys; restore the layout "
                      "key (runbook: \"Stream layout lost\", RS6)",
                      stream, g.group, g.newest_generation));
    }
    for (const LayoutShard& s : g.generation0) {
      if (s.id < 0 || s.id >= n) continue;
      std::string& key = shards[static_cast<size_t>(s.id)].stream;
      if (!key.empty() && key != s.stream) {
        return MakeError(ErrorCode::kMetadataUnreadable,
                         fmt::format("stream '{}' has no layout record and its groups name "
                                     "different keys for shard {} ('{}', '{}'); restore the "
                                     "layout key (runbook: \"Stream layout lost\")",
                                     stream, s.id, key, s.stream));
      }
      key = s.stream;
    }
  }
  for (LayoutShard& s : shards) {
    if (s.stream.empty()) s.stream = ShardStreamKey(stream, s.id);
  }
  return shards;
}

}  // namespace

Result<Layout> DeriveGeneration0(const std::string& stream, int32_t shard_count,
                                 const GroupConfig& config,
                                 const std::vector<ExistingGroup>& groups,
                                 const SlotPlacement& placement, const std::string& fresh_lineage) {
  Layout l;
  l.stream = stream;
  l.lineage = fresh_lineage;
  l.routing_lease_ms = config.routing_lease_ms;
  l.routing_refresh_ms = config.routing_refresh_ms;
  int32_t n = groups.empty() ? shard_count : 0;
  int64_t top_version = 0;
  for (const ExistingGroup& g : groups) {
    n = std::max(n, g.shard_count);
    top_version = std::max(top_version, g.metadata_version);
    l.groups.push_back(g.group);
  }
  if (!groups.empty()) {
    l.routing_lease_ms = groups.front().config.routing_lease_ms;
    l.routing_refresh_ms = groups.front().config.routing_refresh_ms;
  }
  if (n < 1 || n > kMaxShards) {
    return MakeError(ErrorCode::kInvalidRequest,
                     n == 0 ? fmt::format("stream '{}' has no layout yet: shardCount is required "
                                          "to create its first group",
                                          stream)
                            : fmt::format("shardCount must be in [1, {}]", kMaxShards));
  }
  std::sort(l.groups.begin(), l.groups.end());
  l.groups.erase(std::unique(l.groups.begin(), l.groups.end()), l.groups.end());
  l.version = std::min(top_version + 1, kMaxCounter);
  Generation g0;
  g0.generation = 0;
  g0.state = GenerationState::kActive;
  if (groups.empty()) {
    std::vector<int32_t> ids;
    for (int32_t s = 0; s < n; ++s) ids.push_back(s);
    std::vector<std::string> keys = ChooseShardKeys(stream, ids, placement);
    for (int32_t s = 0; s < n; ++s)
      g0.shards.push_back({s, std::move(keys[static_cast<size_t>(s)])});
  } else {
    RSC_ASSIGN_OR_RETURN(g0.shards, KeysFromGroups(stream, n, groups));
  }
  l.generations.push_back(std::move(g0));
  RSC_RETURN_IF_ERROR(CheckLayoutInvariants(l));
  return l;
}

namespace {

Layout Bumped(const Layout& stored, const std::string& fresh_lineage) {
  Layout next = stored;
  next.version = std::min(stored.version + 1, kMaxCounter);
  next.lineage = fresh_lineage;
  return next;
}

std::string OtherGroups(const Layout& l, const std::string& group) {
  std::string out;
  for (const std::string& g : l.groups) {
    if (g == group) continue;
    if (!out.empty()) out += ", ";
    out += g;
  }
  return out;
}

}  // namespace

Result<std::optional<Layout>> DecideAddGroup(const Layout& stored, const std::string& group,
                                             int32_t shard_count, int32_t* shard_count_out,
                                             const std::string& fresh_lineage) {
  const Generation* active = stored.Active();
  RSC_CHECK(active != nullptr);
  const auto n = static_cast<int32_t>(active->shards.size());
  if (shard_count != 0 && shard_count != n) {
    return MakeError(ErrorCode::kLayoutMismatch,
                     fmt::format("stream '{}' has {} shards (its layout, shared by every group of "
                                 "the stream: {}); create the group without shardCount or with "
                                 "{} — one stream never has two layouts",
                                 stored.stream, n, OtherGroups(stored, group), n));
  }
  *shard_count_out = n;
  if (stored.HasGroup(group)) return std::optional<Layout>{};
  if (stored.groups.size() >= kMaxGroupsPerStream) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("stream '{}' already has {} groups (the maximum)", stored.stream,
                                 kMaxGroupsPerStream));
  }
  Layout next = Bumped(stored, fresh_lineage);
  next.groups.insert(std::lower_bound(next.groups.begin(), next.groups.end(), group), group);
  return std::optional<Layout>{std::move(next)};
}

Status CheckRestoreFitsLayout(const Layout& l, const GroupMetadata& restored) {
  const Generation* active = l.Active();
  RSC_CHECK(active != nullptr);
  const auto mismatch = [&](const std::string& what) {
    return Status(MakeError(
        ErrorCode::kLayoutMismatch,
        fmt::format("the export of group '{}' does not fit stream '{}' (layout generations {}"
                    " to {}, ACTIVE {}): {}; restore it under another stream, or delete the "
                    "stream's groups and its layout first",
                    restored.key.group, l.stream, l.generations.front().generation,
                    l.generations.back().generation, active->generation, what)));
  };
  if (restored.active_generation > active->generation) {
    return mismatch(fmt::format("its ACTIVE generation {} is newer than the layout's",
                                restored.active_generation));
  }
  for (const ShardState& sh : restored.shards) {
    const Generation* g = GenerationOf(l, sh.id);
    if (g == nullptr) {
      if (sh.generation < l.generations.front().generation) continue;  // dropped: retired
      return mismatch(
          fmt::format("shard {} (generation {}) is not in the layout", sh.id, sh.generation));
    }
    const auto it = std::find_if(g->shards.begin(), g->shards.end(),
                                 [&](const LayoutShard& ls) { return ls.id == sh.id; });
    if (g->generation != sh.generation || it == g->shards.end() || it->stream != sh.stream) {
      return mismatch(
          fmt::format("shard {} is generation {} with key {} in the export, "
                      "generation {} with key {} in the layout",
                      sh.id, sh.generation, sh.stream, g->generation,
                      it == g->shards.end() ? std::string("(none)") : it->stream));
    }
  }
  return OkStatus();
}

std::optional<Layout> DecideRemoveGroup(const Layout& stored, const std::string& group,
                                        const std::string& fresh_lineage) {
  if (!stored.HasGroup(group)) return std::nullopt;
  Layout next = Bumped(stored, fresh_lineage);
  next.groups.erase(std::lower_bound(next.groups.begin(), next.groups.end(), group));
  return next;
}

Result<Layout> DecideReshard(const Layout& stored, int32_t shard_count,
                             const SlotPlacement& placement, const std::string& fresh_lineage) {
  if (shard_count < 1 || shard_count > kMaxShards) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("shardCount must be between 1 and {}", kMaxShards));
  }
  size_t unretired = 0;
  for (const Generation& g : stored.generations) {
    if (g.state == GenerationState::kPreparing) {
      return MakeError(ErrorCode::kReshardInProgress,
                       fmt::format("stream '{}': generation {} is still PREPARING (its parents "
                                   "are being sealed); wait for it to become ACTIVE",
                                   stored.stream, g.generation));
    }
    if (g.state != GenerationState::kRetired) ++unretired;
  }
  if (unretired >= kMaxUnretiredGenerations) {
    return MakeError(ErrorCode::kReshardInProgress,
                     fmt::format("stream '{}' has {} generations not yet retired (at most {}): "
                                 "a group has not read the oldest to its end (see the stream "
                                 "view and the runbook)",
                                 stored.stream, unretired, kMaxUnretiredGenerations));
  }
  const Generation& last = stored.generations.back();
  int64_t next_id = last.shards.back().id + int64_t{1};
  if (next_id + shard_count > INT32_MAX) {
    return MakeError(ErrorCode::kInvalidRequest, "shard ids of this stream are exhausted");
  }
  Layout next = Bumped(stored, fresh_lineage);
  Generation g;
  g.generation = last.generation + 1;
  g.state = GenerationState::kPreparing;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < shard_count; ++i) ids.push_back(static_cast<int32_t>(next_id + i));
  std::vector<std::string> keys = ChooseShardKeys(stored.stream, ids, placement);
  for (size_t i = 0; i < ids.size(); ++i) g.shards.push_back({ids[i], std::move(keys[i])});
  next.generations.push_back(std::move(g));
  RSC_RETURN_IF_ERROR(CheckLayoutInvariants(next));
  return next;
}

int64_t RoutingWaitMs(const Layout& l, const Generation& g) {
  if (g.routing_wait_ms > 0) return g.routing_wait_ms;
  // Capped: a layout's lease is checked only to be positive.
  return std::min(l.routing_lease_ms, kMaxDurationMs) + kPrepareMarginMs;
}

RoutingWait DecideRoutingWait(const Layout& l, const Generation& g, int64_t now_ms) {
  if (g.prepared_ms == 0) return RoutingWait::kReady;  // rolled forward: its reshard waited
  const int64_t wait = RoutingWaitMs(l, g);
  if (g.prepared_ms > now_ms + kPrepareMarginMs) return RoutingWait::kRestamp;
  return now_ms >= g.prepared_ms + wait ? RoutingWait::kReady : RoutingWait::kWaiting;
}

Layout DecideRestampPrepared(const Layout& stored, int64_t now_ms,
                             const std::string& fresh_lineage) {
  Layout next = Bumped(stored, fresh_lineage);
  for (Generation& g : next.generations) {
    if (g.state == GenerationState::kPreparing) g.prepared_ms = std::max<int64_t>(now_ms, 1);
  }
  return next;
}

std::optional<Layout> DecideActivate(const Layout& stored, const std::string& fresh_lineage) {
  Layout next = Bumped(stored, fresh_lineage);
  bool found = false;
  for (Generation& g : next.generations) {
    if (g.state == GenerationState::kPreparing) found = true;
  }
  if (!found) return std::nullopt;
  for (Generation& g : next.generations) {
    if (g.state == GenerationState::kActive) {
      g.state = GenerationState::kSealed;
    } else if (g.state == GenerationState::kPreparing) {
      g.state = GenerationState::kActive;
      g.prepared_ms = 0;
      g.routing_wait_ms = 0;
    }
  }
  return next;
}

std::optional<Layout> DecideRetire(const Layout& stored, int32_t generation, int64_t now_ms,
                                   const std::string& fresh_lineage) {
  Layout next = Bumped(stored, fresh_lineage);
  for (Generation& g : next.generations) {
    if (g.state == GenerationState::kRetired) continue;
    // The oldest unretired generation only: generations retire in order (found by
    // fuzz/fuzz_layout.cc, which retires any generation; the stream tick never asked).
    if (g.generation != generation || g.state != GenerationState::kSealed) return std::nullopt;
    g.state = GenerationState::kRetired;
    g.retired_ms = std::max<int64_t>(now_ms, 1);
    return next;
  }
  return std::nullopt;
}

RetiredWork DecideRetiredWork(const Layout& stored, int64_t now_ms, int64_t retention_ms,
                              const std::string& fresh_lineage) {
  RetiredWork work;
  bool unstamped = false;
  for (const Generation& g : stored.generations) {
    if (g.state != GenerationState::kRetired) break;  // RETIRED ones come first
    if (g.retired_ms == 0) unstamped = true;
  }
  if (unstamped) {
    Layout next = Bumped(stored, fresh_lineage);
    for (Generation& g : next.generations) {
      if (g.state != GenerationState::kRetired) break;
      if (g.retired_ms == 0) g.retired_ms = std::max<int64_t>(now_ms, 1);
    }
    work.stamp = std::move(next);
    return work;
  }
  const Generation& oldest = stored.generations.front();
  if (oldest.state == GenerationState::kRetired && oldest.retired_ms + retention_ms <= now_ms) {
    work.drop = oldest;
  }
  return work;
}

std::optional<Layout> DecideDropRetired(const Layout& stored, int32_t generation,
                                        const std::string& fresh_lineage) {
  if (stored.generations.size() < 2) return std::nullopt;  // never the ACTIVE one
  const Generation& oldest = stored.generations.front();
  if (oldest.generation != generation || oldest.state != GenerationState::kRetired) {
    return std::nullopt;
  }
  Layout next = Bumped(stored, fresh_lineage);
  next.generations.erase(next.generations.begin());
  return next;
}

BehindDecision DecideLayoutBehind(const Layout& stored, const std::vector<StreamTop>& active_tops,
                                  const StreamTop& above, const std::string& fresh_lineage) {
  BehindDecision out;
  const Generation* active = stored.Active();
  if (active == nullptr || active != &stored.generations.back()) return out;  // PREPARING
  std::optional<std::string> successor;
  std::optional<std::string> sealed_without;  // a sealed shard whose seal names nothing
  for (size_t i = 0; i < active_tops.size() && i < active->shards.size(); ++i) {
    const StreamTop& t = active_tops[i];
    const LayoutShard& s = active->shards[i];
    if (!t.sealed) continue;
    if (t.seal_generation >= 0 && t.seal_generation != active->generation) {
      out.behind = fmt::format(
          "stream '{}': shard {} ('{}') of the ACTIVE generation {} is sealed as generation "
          "{}: the layout record is not this stream's (runbook 7e)",
          stored.stream, s.id, s.stream, active->generation, t.seal_generation);
      return out;
    }
    if (t.successor.empty()) {
      if (!sealed_without) sealed_without = fmt::format("shard {} ('{}')", s.id, s.stream);
      continue;
    }
    if (successor && *successor != t.successor) {
      out.behind = fmt::format(
          "stream '{}': the seals of generation {} name two different successors ('{}' and "
          "'{}'): not rolled forward (runbook 7e)",
          stored.stream, active->generation, *successor, t.successor);
      return out;
    }
    successor = t.successor;
  }
  if (!successor) {
    if (sealed_without) {
      out.behind = fmt::format(
          "stream '{}': {} of the ACTIVE generation {} is sealed, but the layout has no later "
          "generation and no seal names one: the layout record was rolled back past a "
          "reshard; producers are refused until it is restored (runbook 7e)",
          stored.stream, *sealed_without, active->generation);
    } else if (above.exists && above.length > 0) {
      out.behind = fmt::format(
          "stream '{}': the key after its highest shard id holds {} entries that no "
          "generation of the layout names: the layout record was rolled back past a reshard "
          "(runbook 7e)",
          stored.stream, above.length);
    }
    return out;
  }
  Result<Generation> next = DecodeSuccessor(stored.stream, *successor);
  if (!next.ok()) {
    out.behind = next.error().message + " (runbook 7e)";
    return out;
  }
  const int32_t highest = active->shards.back().id;
  if (next->generation != active->generation + 1 || next->shards.front().id <= highest) {
    out.behind = fmt::format(
        "stream '{}': the seals of generation {} name generation {} from shard id {}, which "
        "does not follow the layout (highest id {}): not rolled forward (runbook 7e)",
        stored.stream, active->generation, next->generation, next->shards.front().id, highest);
    return out;
  }
  Layout forward = Bumped(stored, fresh_lineage);
  forward.generations.push_back(std::move(*next));
  Status ok = CheckLayoutInvariants(forward);
  if (!ok.ok()) {
    out.behind = fmt::format(
        "stream '{}': rolling forward would break the layout: {} "
        "(runbook 7e)",
        stored.stream, ok.error().message);
    return out;
  }
  out.roll_forward = std::move(forward);
  return out;
}

const Generation* GenerationOf(const Layout& l, int32_t shard_id) {
  for (const Generation& g : l.generations) {
    if (!g.shards.empty() && shard_id >= g.shards.front().id && shard_id <= g.shards.back().id) {
      return &g;
    }
  }
  return nullptr;
}

}  // namespace rsc
