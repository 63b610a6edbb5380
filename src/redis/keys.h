#pragma once
// Redis key layout (SPEC R2.1, R2.2, R2.7). Every key of one group carries the hash tag
// {P:G}, so one Lua script can touch them all, also in Redis Cluster. The index set is
// the only cross-group key; it is never touched in the same script as a group's keys.

#include <optional>
#include <string>
#include <string_view>

#include "core/types.h"

namespace rsc::redis {

inline constexpr std::string_view kKeyPrefix = "redis-stream:coord:";
inline constexpr std::string_view kIndexKey = "redis-stream:coord:groups";
// SCAN pattern matching every group's metadata hash (index rebuild, R2.2).
inline constexpr std::string_view kMetadataKeyPattern = "redis-stream:coord:*:metadata";

// redis-stream:coord:{P:G}:metadata — the hash (aggregate, revision, versions, ...).
std::string MetadataKey(const GroupKey& key);
// redis-stream:coord:{P:G}:liveness — sorted set member id -> heartbeat deadline (ms).
std::string LivenessKey(const GroupKey& key);
// redis-stream:coord:{P:G}:lock — the group mutex (SET NX PX).
std::string LockKey(const GroupKey& key);

// redis-stream:coord:{P}:layout — a stream's layout hash (SPEC D1; the one key tagged by
// the stream alone).
std::string LayoutKey(const std::string& stream);

// "P:G" as stored in the index set. G never contains ':' (R2.4), so the split is at the
// last ':'; P may contain ':'. Returns nullopt for anything that is not such a pair.
std::optional<GroupKey> ParseIndexMember(std::string_view member);
// Inverse of MetadataKey; nullopt if `key` is not a metadata key.
std::optional<GroupKey> ParseMetadataKey(std::string_view key);

}  // namespace rsc::redis
