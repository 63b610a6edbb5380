#pragma once
// Facts about one stored aggregate that a heartbeat would otherwise find by scanning every
// shard: each member's shard sets (ShardsOf) and taken shards, the earliest moment anything
// per shard falls due (a revoke past the rebalance timeout, a taken shard's release), and
// whether the stream was ever resharded. A steady heartbeat (decide.cc) then costs
// O(its own shards) instead of O(all shards): the scans were the part of a heartbeat's cost
// that grew with the group's shard count (issue 14, docs/performance.md).
//
// An index describes exactly one GroupMetadata object, which must outlive it. Decisions
// use it only when deciding on that very object (compared by address): a copy, a
// decision's next state or a mutant's rewritten state is never read through it, they take
// the scans. Every heartbeat of the core tests is decided both ways and compared
// (CoreHarness::Heartbeat, tests/core/core_harness.h); the property test checks the
// index's contents against the scans (tests/core/properties_test.cc).

#include <cstdint>
#include <limits>
#include <vector>

#include "core/decide.h"
#include "core/metadata.h"

namespace rsc {

struct GroupIndex {
  struct PerMember {
    MemberShards shards;         // as ShardsOf(source, member), ascending ids
    std::vector<int32_t> taken;  // shards taken from the member (C8), ascending ids
  };
  const GroupMetadata* source = nullptr;
  std::vector<PerMember> members;  // parallel to source->members
  // Earliest revokeSince + rebalanceTimeoutMs and takenMs release time over all shards;
  // the maximum when nothing is pending. Nothing per shard is due strictly before it.
  TimeMs next_due_ms = std::numeric_limits<TimeMs>::max();
  bool resharded = false;  // some shard is of a generation above 0 (D2)

  // The entry of `mem` (an element of source->members), or nullptr for any other object.
  const PerMember* For(const GroupMetadata& m, const Member& mem) const;
};

GroupIndex BuildGroupIndex(const GroupMetadata& m);

// `env_index` if it describes `m` itself, else nullptr.
inline const GroupIndex* IndexOf(const GroupIndex* env_index, const GroupMetadata& m) {
  return env_index != nullptr && env_index->source == &m ? env_index : nullptr;
}

}  // namespace rsc
