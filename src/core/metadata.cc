#include "core/metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace rsc {

namespace {
// Counters and times within the ranges metadata.h gives, so no decision's arithmetic on
// them overflows (a restore with metadataVersion 2^63-2 once aborted every coordinator
// that decided for its group). Each message names the field.
Status CheckBounds(const GroupMetadata& m) {
  auto bad = [](std::string msg) -> Status {
    return MakeError(ErrorCode::kMetadataUnreadable, std::move(msg));
  };
  auto counter = [&](std::string_view field, int64_t v, int64_t min) -> Status {
    if (v < min || v > kMaxCounter) {
      return bad(fmt::format("{} {} is outside [{}, {}]", field, v, min, kMaxCounter));
    }
    return OkStatus();
  };
  auto time = [&](std::string_view field, int64_t v) -> Status {
    if (v < 0 || v > kMaxTimeMs) {
      return bad(
          fmt::format("{} {} is outside [0, {}] (ms since the epoch)", field, v, kMaxTimeMs));
    }
    return OkStatus();
  };
  RSC_RETURN_IF_ERROR(counter("metadataVersion", m.version.value(), 1));
  RSC_RETURN_IF_ERROR(counter("assignmentEpoch", m.assignment_epoch.value(), 0));
  RSC_RETURN_IF_ERROR(counter("roundsStarted", m.rounds_started, 0));
  RSC_RETURN_IF_ERROR(time("createdMs", m.created_ms));
  RSC_RETURN_IF_ERROR(time("lineageKeySinceMs", m.lineage_key_since_ms));
  if (!m.lineage_key.empty() && (m.lineage_key.size() < 16 || m.lineage_key.size() > 64)) {
    return bad(
        fmt::format("lineageKey must be empty or 16..64 characters, has {}", m.lineage_key.size()));
  }
  RSC_RETURN_IF_ERROR(time("updatedMs", m.updated_ms));
  for (size_t i = 0; i < m.lineage_history.size(); ++i) {
    RSC_RETURN_IF_ERROR(counter(fmt::format("lineageHistory[{}] version", i),
                                m.lineage_history[i].version.value(), 1));
  }
  for (size_t i = 0; i < m.shards.size(); ++i) {
    RSC_RETURN_IF_ERROR(
        time(fmt::format("shards[{}].revokeSinceMs", i), m.shards[i].revoke_since_ms));
    RSC_RETURN_IF_ERROR(time(fmt::format("shards[{}].takenMs", i), m.shards[i].taken_ms));
    RSC_RETURN_IF_ERROR(time(fmt::format("shards[{}].releaseAtMs", i), m.shards[i].release_at_ms));
  }
  for (size_t i = 0; i < m.members.size(); ++i) {
    RSC_RETURN_IF_ERROR(
        counter(fmt::format("members[{}].epoch", i), m.members[i].epoch.value(), 1));
    RSC_RETURN_IF_ERROR(time(fmt::format("members[{}].joinedMs", i), m.members[i].joined_ms));
  }
  for (size_t i = 0; i < m.tombstones.size(); ++i) {
    RSC_RETURN_IF_ERROR(
        counter(fmt::format("tombstones[{}].epoch", i), m.tombstones[i].epoch.value(), 0));
    RSC_RETURN_IF_ERROR(time(fmt::format("tombstones[{}].atMs", i), m.tombstones[i].at_ms));
  }
  if (m.round) {
    RSC_RETURN_IF_ERROR(counter("correctionRound.id", m.round->id, 0));
    if (m.round->id > m.rounds_started) {
      return bad(
          fmt::format("correctionRound.id {} > roundsStarted {}", m.round->id, m.rounds_started));
    }
    RSC_RETURN_IF_ERROR(time("correctionRound.startedMs", m.round->started_ms));
    const int64_t sv = m.round->started_version.value();
    if (sv < 0 || sv > m.version.value()) {
      return bad(
          fmt::format("correctionRound.startedVersion {} is outside [0, metadataVersion]", sv));
    }
    for (size_t i = 0; i < m.round->blockers.size(); ++i) {
      const Blocker& b = m.round->blockers[i];
      RSC_RETURN_IF_ERROR(time(fmt::format("correctionRound.blockers[{}].untilMs", i), b.until_ms));
      if (b.since_version < 0) {
        return bad(
            fmt::format("correctionRound.blockers[{}].sinceVersion {} < 0", i, b.since_version));
      }
    }
  }
  for (size_t i = 0; i < m.shards.size(); ++i) {
    if (m.shards[i].revoke_version < 0) {
      return bad(fmt::format("shards[{}].revokeVersion {} < 0", i, m.shards[i].revoke_version));
    }
  }
  return OkStatus();
}
}  // namespace

Status ValidateConfig(const GroupConfig& c) {
  auto bad = [](std::string msg) -> Status { return MakeError(ErrorCode::kInvalidRequest, msg); };
  struct Field {
    const char* name;
    int64_t value;
  };
  for (const Field& f : {Field{"heartbeatIntervalMs", c.heartbeat_interval_ms},
                         Field{"memberLeaseMs", c.member_lease_ms},
                         Field{"assignmentLeaseMs", c.assignment_lease_ms},
                         Field{"rebalanceTimeoutMs", c.rebalance_timeout_ms},
                         Field{"routingLeaseMs", c.routing_lease_ms},
                         Field{"routingRefreshMs", c.routing_refresh_ms}}) {
    if (f.value < kMinDurationMs || f.value > kMaxDurationMs) {
      return bad(fmt::format("config.{} must be between {} and {} ms, got {}", f.name,
                             kMinDurationMs, kMaxDurationMs, f.value));
    }
  }
  // K2: a member the coordinator expires must already have stopped reading.
  if (c.assignment_lease_ms > c.member_lease_ms - kMinLeaseMarginMs) {
    return bad(fmt::format(
        "config.assignmentLeaseMs ({}) must be at most memberLeaseMs ({}) minus the {} ms "
        "safety margin (SPEC K2)",
        c.assignment_lease_ms, c.member_lease_ms, kMinLeaseMarginMs));
  }
  // At least two heartbeats fit in a lease, so one lost response does not stop a consumer.
  if (c.heartbeat_interval_ms * 2 > c.assignment_lease_ms) {
    return bad(fmt::format(
        "config.heartbeatIntervalMs ({}) must be at most half of assignmentLeaseMs ({})",
        c.heartbeat_interval_ms, c.assignment_lease_ms));
  }
  // Fencing a member that drains too long releases its revoking shards at once; that is
  // safe only if by then any heartbeat it made successfully carried the DRAIN.
  if (c.rebalance_timeout_ms < c.member_lease_ms) {
    return bad(fmt::format("config.rebalanceTimeoutMs ({}) must be at least memberLeaseMs ({})",
                           c.rebalance_timeout_ms, c.member_lease_ms));
  }
  if (c.routing_refresh_ms >= c.routing_lease_ms) {
    return bad(fmt::format("config.routingRefreshMs ({}) must be below routingLeaseMs ({})",
                           c.routing_refresh_ms, c.routing_lease_ms));
  }
  return OkStatus();
}

const Member* GroupMetadata::FindMember(const MemberId& id) const {
  auto it = std::lower_bound(members.begin(), members.end(), id,
                             [](const Member& m, const MemberId& k) { return m.id < k; });
  return (it != members.end() && it->id == id) ? &*it : nullptr;
}

Member* GroupMetadata::FindMember(const MemberId& id) {
  return const_cast<Member*>(std::as_const(*this).FindMember(id));
}

const Tombstone* GroupMetadata::FindTombstone(const MemberId& id) const {
  for (const Tombstone& t : tombstones) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

const ShardState* GroupMetadata::FindShard(int32_t id) const {
  auto it = std::lower_bound(shards.begin(), shards.end(), id,
                             [](const ShardState& s, int32_t k) { return s.id < k; });
  return it != shards.end() && it->id == id ? &*it : nullptr;
}

ShardState* GroupMetadata::FindShard(int32_t id) {
  return const_cast<ShardState*>(std::as_const(*this).FindShard(id));
}

bool GroupMetadata::Assignable(const ShardState& s) const {
  if (s.completed) return false;
  for (const ShardState& o : shards) {
    if (o.generation >= s.generation) break;  // ascending id orders generations too
    if (!o.completed) return false;
  }
  return true;
}

std::vector<bool> GroupMetadata::AssignableShards() const {
  std::vector<bool> out(shards.size());
  bool earlier_incomplete = false;  // some shard of a lower generation is not completed
  bool current_incomplete = false;  // ... of the generation being walked
  for (size_t i = 0; i < shards.size(); ++i) {
    if (i > 0 && shards[i].generation != shards[i - 1].generation) {
      earlier_incomplete = earlier_incomplete || current_incomplete;
      current_incomplete = false;
    }
    out[i] = !shards[i].completed && !earlier_incomplete;
    current_incomplete = current_incomplete || !shards[i].completed;
  }
  return out;
}

std::vector<const ShardState*> GroupMetadata::ActiveShards() const {
  std::vector<const ShardState*> out;
  for (const ShardState& s : shards) {
    if (s.generation == active_generation) out.push_back(&s);
  }
  return out;
}

std::string ShardStreamKey(const std::string& stream, int32_t shard) {
  return fmt::format("{{{}:{}}}", stream, shard);
}

Status CheckInvariants(const GroupMetadata& m) {
  auto bad = [](std::string msg) -> Status {
    return MakeError(ErrorCode::kMetadataUnreadable, std::move(msg));
  };
  if (m.shard_count < 1) return bad(fmt::format("shardCount {} < 1", m.shard_count));
  RSC_RETURN_IF_ERROR(CheckBounds(m));
  if (m.shards.size() > static_cast<size_t>(kMaxShardsPerGroup)) {
    return bad(fmt::format("{} shards, at most {}", m.shards.size(), kMaxShardsPerGroup));
  }
  if (m.layout_revision < 0 || m.layout_revision > kMaxCounter) {
    return bad(fmt::format("layoutRevision {} out of range", m.layout_revision));
  }
  int64_t active = 0;
  bool ordered = true;
  for (size_t i = 1; i < m.shards.size(); ++i) {
    ordered = ordered && m.shards[i - 1].id < m.shards[i].id &&
              m.shards[i - 1].generation <= m.shards[i].generation;
  }
  const std::vector<bool> assignable = ordered ? m.AssignableShards() : std::vector<bool>();
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardState& sh = m.shards[i];
    if (sh.id < 0 || (i > 0 && sh.id <= m.shards[i - 1].id)) {
      return bad(fmt::format("shards[{}] id {} is not ascending", i, sh.id));
    }
    // A generation above the active one is a PREPARING one, adopted before it is written.
    if (sh.generation < 0 || (i > 0 && sh.generation < m.shards[i - 1].generation)) {
      return bad(fmt::format("shard {} generation {} is out of order (active generation {})", sh.id,
                             sh.generation, m.active_generation));
    }
    if (sh.stream.empty()) return bad(fmt::format("shard {} has no stream key", sh.id));
    if (sh.generation == m.active_generation) ++active;
    // A completed shard's owner may still be draining it (it keeps it until REVOKED).
    if (sh.completed && (sh.generation >= m.active_generation || !sh.target.empty())) {
      return bad(fmt::format("shard {} is completed but active or targeted", sh.id));
    }
    if (ordered && !assignable[i] && !sh.owner.empty() && sh.owner == sh.target) {
      return bad(fmt::format("shard {} is granted before its parents completed (RS3)", sh.id));
    }
  }
  if (active != m.shard_count) {
    return bad(fmt::format("the active generation {} has {} shards, shardCount is {}",
                           m.active_generation, active, m.shard_count));
  }
  for (size_t i = 0; i < m.members.size(); ++i) {
    if (m.members[i].id.empty()) return bad("member with empty id");
    if (i > 0 && !(m.members[i - 1].id < m.members[i].id)) {
      return bad("members not sorted by id or duplicated: " + m.members[i].id.str());
    }
    if (m.members[i].epoch.value() < 1) return bad("member epoch < 1: " + m.members[i].id.str());
  }
  for (const ShardState& sh : m.shards) {
    const int32_t s = sh.id;
    if (!sh.owner.empty() && !m.FindMember(MemberId(sh.owner))) {
      return bad(fmt::format("shard {} owner {} is not a member", s, sh.owner));
    }
    if (!sh.target.empty()) {
      const Member* t = m.FindMember(MemberId(sh.target));
      if (!t) return bad(fmt::format("shard {} target {} is not a member", s, sh.target));
      if (t->fenced || t->leaving) {
        return bad(fmt::format("shard {} targets fenced/leaving member {}", s, sh.target));
      }
    }
    const bool revoking = !sh.owner.empty() && sh.owner != sh.target;
    if (revoking != (sh.revoke_since_ms != 0)) {
      return bad(fmt::format("shard {} revokeSinceMs inconsistent with owner/target", s));
    }
    if ((sh.taken_ms == 0) != (sh.release_at_ms == 0) ||
        (sh.taken_ms != 0 && (sh.owner.empty() || sh.release_at_ms <= sh.taken_ms))) {
      return bad(
          fmt::format("shard {} takenMs/releaseAtMs inconsistent (taken {}, release {}, "
                      "owner '{}')",
                      s, sh.taken_ms, sh.release_at_ms, sh.owner));
    }
    if ((!revoking && sh.revoke_version != 0) || sh.revoke_version > m.version.value()) {
      return bad(
          fmt::format("shard {} revokeVersion {} inconsistent with owner/target or "
                      "metadataVersion",
                      s, sh.revoke_version));
    }
  }
  if (m.lineage_history.empty() || m.lineage_history.size() > kLineageWindow) {
    return bad(fmt::format("lineageHistory size {} out of range", m.lineage_history.size()));
  }
  for (size_t i = 1; i < m.lineage_history.size(); ++i) {
    if (m.lineage_history[i].version.value() != m.lineage_history[i - 1].version.value() + 1) {
      return bad("lineageHistory versions are not contiguous");
    }
  }
  if (m.lineage_history.back().version != m.version ||
      m.lineage_history.back().token != m.lineage) {
    return bad("lineageHistory does not end with (metadataVersion, lineage)");
  }
  if (m.tombstones.size() > kTombstoneLimit) return bad("too many tombstones");
  for (const Tombstone& t : m.tombstones) {
    if (m.FindMember(t.id)) return bad("tombstone for a live member " + t.id.str());
  }
  if (m.round) {
    for (const Blocker& b : m.round->blockers) {
      if (m.FindShard(b.shard.value()) == nullptr) {
        return bad(fmt::format("blocker shard {} is not a shard of the group", b.shard.value()));
      }
      if (b.since_version > m.version.value()) {
        return bad(fmt::format("blocker sinceVersion {} > metadataVersion", b.since_version));
      }
    }
    if (!std::is_sorted(m.round->synced.begin(), m.round->synced.end())) {
      return bad("correctionRound.synced not sorted");
    }
  }
  return OkStatus();
}

}  // namespace rsc
