#pragma once
// Sticky, balanced target assignment (SPEC K3).

#include <string>
#include <vector>

#include "core/metadata.h"

namespace rsc {

// Returns the target owner of every shard given the eligible members (sorted ids).
// Balanced: each member gets floor(N/M) or ceil(N/M) shards. Sticky: a member keeps as
// many of its current targets (or, for shards without a target, shards it owns) as its
// quota allows; members that already hold more get the larger quotas. Deterministic:
// ties break by member id, free shards go to members in id order, ascending shard id.
std::vector<std::string> ComputeTargets(const std::vector<ShardState>& shards,
                                        const std::vector<std::string>& eligible);

}  // namespace rsc
