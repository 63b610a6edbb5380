#pragma once
// Wire-level request and response types of the coordinator API (SPEC §4.1, §5.1, §9).
// JSON forms live in protocol_json.h; field names there are exactly SPEC's.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/metadata.h"

namespace rsc {

enum class RevokeState { kDraining, kRevoked };

struct RevokingReport {
  int32_t shard = 0;
  RevokeState state = RevokeState::kDraining;
  bool operator==(const RevokingReport&) const = default;
};

// memberEpoch: 0 = join, -1 = leave, otherwise the epoch the member holds.
// The client feature of per-shard leases for draining shards (docs/protocol.md C8): a shard
// it keeps draining past rebalanceTimeoutMs is taken from it alone, not the whole member.
inline constexpr const char* kFeatureShardLease = "shard-lease";
// The client implements SPEC §13 (D5): seal entries are never handed to the application and
// completed sealed shards are reported in completedShards.
inline constexpr const char* kFeatureLayoutV2 = "layout-v2";

struct HeartbeatRequest {
  MemberId member_id;
  int64_t member_epoch = 0;
  std::string instance_id;
  int64_t assignment_epoch = 0;
  int64_t metadata_version = 0;  // highest version the client process observed (C5)
  std::string lineage;           // token that came with it
  std::vector<int32_t> owned_shards;
  std::vector<RevokingReport> revoking_shards;
  // For a leave (member_epoch -1) sent to /leave: the epoch the member says it holds, so
  // a zombie's leave is fenced like its heartbeats (K5). 0 = not given, not checked.
  int64_t leave_epoch = 0;
  // Protocol features the client implements (docs/protocol.md §3.1): "shard-lease" (C8).
  // Unknown names are ignored; sorted and unique after parsing.
  std::vector<std::string> features;
  // RS3 (feature "layout-v2"): sealed shards this member has read to their end (the seal
  // entry XACKed). A hint that makes the coordinator check them in Redis before answering;
  // repeated until an answer no longer lists the shard. Sorted and unique after parsing.
  std::vector<int32_t> completed_shards;
  bool operator==(const HeartbeatRequest&) const = default;
};

struct RoutingShard {
  int32_t id = 0;
  std::string stream;
  bool operator==(const RoutingShard&) const = default;
};

enum class HeartbeatStatus { kOk, kRevokePending, kDrain, kSyncMetadata };
std::string_view HeartbeatStatusName(HeartbeatStatus s);

struct HeartbeatResponse {
  HeartbeatStatus status = HeartbeatStatus::kOk;
  MemberId member_id;
  int64_t member_epoch = 0;
  int64_t assignment_epoch = 0;
  int64_t metadata_version = 0;
  std::string lineage;
  std::vector<int32_t> assigned_shards;
  std::vector<int32_t> pending_shards;
  std::vector<int32_t> revoke_shards;
  // Shards taken from this member (stuck past rebalanceTimeoutMs, C8): this answer renews
  // no grant on them, whatever other list also names them. Omitted from the JSON when empty.
  std::vector<int32_t> taken_shards;
  // SPEC D2: the Redis key of every shard named above whose key is not the generation-0 one
  // ({P:id}); ascending id. Omitted from the JSON when empty (a stream never resharded).
  std::vector<RoutingShard> streams;
  int64_t heartbeat_interval_ms = 0;
  int64_t assignment_lease_ms = 0;
  bool operator==(const HeartbeatResponse&) const = default;
};

inline constexpr const char* kRoutingHashName = "jump-xxh64";

struct RoutingResponse {
  int64_t metadata_version = 0;
  std::string lineage;
  int32_t shard_count = 0;
  std::vector<RoutingShard> shards;
  std::string hash = kRoutingHashName;
  int64_t routing_lease_ms = 0;
  int64_t refresh_interval_ms = 0;
  bool sync = false;
  // SPEC D4: the layout generation these shards are, and the layout revision the group had
  // adopted (0: none yet). Informational for clients; routing is by `shards`.
  int32_t generation = 0;
  int64_t layout_revision = 0;
  bool operator==(const RoutingResponse&) const = default;
};

struct CreateGroupRequest {
  std::string stream;
  std::string group;
  int32_t shard_count = 0;
  GroupConfig config;
};

struct PatchGroupRequest {
  int64_t expected_revision = 0;
  std::optional<int32_t> shard_count;
  std::optional<GroupConfig> config;
};

struct MemberView {
  std::string member_id;
  int64_t member_epoch = 0;
  std::string instance_id;
  std::vector<int32_t> assigned_shards;
  std::vector<int32_t> pending_shards;
  std::vector<int32_t> revoking_shards;
  int64_t lease_remaining_ms = 0;
  bool leaving = false;
  bool fenced = false;
};

// GET /v1/groups/{P}/{G}. `revision` is the store revision (for expectedRevision).
// A shard taken from its owner (C8), as the group view shows it.
struct TakenShardView {
  int32_t shard = 0;
  std::string member;
  int64_t taken_ms = 0;
  int64_t release_at_ms = 0;
  bool operator==(const TakenShardView&) const = default;
};

// One generation of the stream as this group sees it (SPEC RS3): its shards, those the group
// has read to their seal ("completed"), and the shards of earlier generations the group has
// not completed yet, which this generation's shards wait for (empty: they can be assigned).
struct GroupGenerationView {
  int32_t generation = 0;
  std::vector<int32_t> shards;
  std::vector<int32_t> completed;
  std::vector<int32_t> waiting_for;
  bool operator==(const GroupGenerationView&) const = default;
};

// One shard of a group in its view (SPEC O1): every shard the group holds, oldest generation
// first. `state`: ASSIGNED (an owner reads it), UNASSIGNED (no owner; `target` may name the
// member it goes to), DRAINING (its owner must release it to `target`), WAITING_PARENTS (a
// child whose parents are not all read to their end: `waiting_for`), COMPLETED (a sealed
// shard read to its end). The backlog figures are Redis's, read when the view is made;
// absent when they could not be read (or the Redis version has no lag).
struct ShardView {
  int32_t id = 0;
  std::string stream;
  int32_t generation = 0;
  std::string owner;
  std::string target;
  std::string state;
  std::vector<int32_t> waiting_for;
  std::optional<int64_t> lag;                // XINFO GROUPS lag of consumer group G
  std::optional<int64_t> pending;            // its pending entries (PEL size)
  std::optional<int64_t> oldest_pending_ms;  // idle time of the oldest pending entry
  bool operator==(const ShardView&) const = default;
};

struct GroupView {
  std::string stream;
  std::string group;
  int64_t revision = 0;
  int64_t metadata_version = 0;
  std::string lineage;
  int64_t assignment_epoch = 0;
  int32_t shard_count = 0;
  GroupConfig config;
  std::vector<MemberView> members;
  std::optional<CorrectionRound> correction_round;
  std::vector<ShardView> shards;                 // every shard, oldest generation first
  std::vector<TakenShardView> taken_shards;      // "takenShards", omitted when empty
  std::vector<GroupGenerationView> generations;  // oldest first; absent before layouts
};

// POST /v1/streams/{P}/reshard (SPEC RS1).
struct ReshardRequest {
  int64_t expected_layout_revision = 0;
  int32_t shard_count = 0;
};

// PATCH /v1/streams/{P} (SPEC D4): the layout's routing lease and refresh interval, which
// the stream's routing answers carry. At least one of the two.
struct PatchStreamRequest {
  int64_t expected_layout_revision = 0;
  std::optional<int64_t> routing_lease_ms;
  std::optional<int64_t> routing_refresh_ms;
  bool operator==(const PatchStreamRequest&) const = default;
};

// GET /v1/streams/{P} (SPEC D4): the stream's layout and the revision of its hash.
struct StreamView {
  int64_t revision = 0;
  Layout layout;
};

// Name rules of SPEC R2.4, and no name made only of dots: names are URL path segments, and
// proxies, curl and browsers rewrite `.` and `..` segments (RFC 3986 dot-segment removal),
// so such a group could be created but never reached again.
bool IsValidGroupName(std::string_view g);
bool IsValidStreamName(std::string_view p);
// Member and instance ids: [A-Za-z0-9._:-]{1,128}, not only dots (defined in
// protocol_json.cc; a member id is a path segment of the fence route).
bool IsValidMemberId(std::string_view id);
bool IsOnlyDots(std::string_view s);

}  // namespace rsc
