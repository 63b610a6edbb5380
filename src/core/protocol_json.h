#pragma once
// JSON forms of the coordinator API (SPEC §4.1, §5.1, §9): parsing and validation of
// request bodies, serialization of responses, and the reverse directions for clients,
// the CLI and round-trip tests. Field names are exactly SPEC's (camelCase).
//
// Contract for every Parse* function: it never throws and never aborts, whatever the
// input (malformed JSON, invalid UTF-8, nesting deeper than kMaxJsonDepth, numbers that
// overflow int64, wrong types). A request parser's only failure is
// Error{kInvalidRequest, message} where the message names the field path and what was
// wrong, e.g. `ownedShards[2]: duplicate shard 7`. Unknown fields are ignored (forward
// compatibility); `null` counts as absent for optional fields. Duplicate object keys are
// not detected: the last one wins (Boost.JSON behaviour).
//
// Response parsers (for clients) fail with kInternal ("malformed response ...") since a
// bad answer is the server's fault, not the caller's.
//
// Pure functions, no I/O, no shared state: safe to call from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/metadata.h"
#include "core/protocol.h"
#include "core/result.h"

namespace rsc {

// Limits of the wire format.
inline constexpr int32_t kMaxShardCount = kMaxShards;  // shardCount is 1..kMaxShards (metadata.h)
// Shard ids are unique per stream across generations (SPEC D2): later generations take ids
// above every id used before, so an id may exceed the largest shard count.
inline constexpr int64_t kMaxShardId = INT32_MAX;
inline constexpr size_t kMaxReportedShards = 65536;  // entries per shard array
inline constexpr size_t kMaxIdLength = 128;          // memberId, instanceId
inline constexpr size_t kMaxLineageLength = 64;      // lineage tokens
inline constexpr int64_t kMaxConfigMs = 2147483647;  // config values are 1..2^31-1 ms
inline constexpr unsigned kMaxJsonDepth = 64;        // deeper documents are rejected

// memberId / instanceId syntax: [A-Za-z0-9._:-]{1,128}.
bool IsValidMemberId(std::string_view id);

// ── Requests ─────────────────────────────────────────────────────────────────────

// POST /v1/groups/{P}/{G}/heartbeat. memberId and memberEpoch are required; the shard
// arrays come back sorted ascending (they are sets: I1 compares them as such). A shard
// may appear once across ownedShards and revokingShards together. Shard ids must lie in
// [0, kMaxShardCount); whether they exist in the group is the service's check.
Result<HeartbeatRequest> ParseHeartbeatRequest(std::string_view body);
std::string SerializeHeartbeatRequest(const HeartbeatRequest& req);

// POST /v1/groups/{P}/{G}/leave {memberId, memberEpoch}. The other heartbeat fields
// (ownedShards, revokingShards, versions) are accepted as in a heartbeat, so a leave can
// carry the state of a drain in progress. `heartbeat` is what the service receives: the
// same report with memberEpoch -1 (SPEC §4.1: leave == heartbeat with epoch -1).
struct LeaveRequest {
  int64_t member_epoch = 0;  // the epoch the member claims to hold (>= -1)
  HeartbeatRequest heartbeat;
};
Result<LeaveRequest> ParseLeaveRequest(std::string_view body);
std::string SerializeLeaveRequest(const LeaveRequest& req);

// The `config` object of create and patch: every field optional.
struct GroupConfigPatch {
  std::optional<int64_t> heartbeat_interval_ms;
  std::optional<int64_t> member_lease_ms;
  std::optional<int64_t> assignment_lease_ms;
  std::optional<int64_t> rebalance_timeout_ms;
  std::optional<int64_t> routing_lease_ms;
  std::optional<int64_t> routing_refresh_ms;
  bool operator==(const GroupConfigPatch&) const = default;

  bool Empty() const;
  bool Complete() const;  // every field present: the base config does not matter
  GroupConfig ApplyTo(GroupConfig base) const;
  static GroupConfigPatch Full(const GroupConfig& c);
};

// POST /v1/groups {stream, group, shardCount, config?}. Names follow R2.4; the config is
// completed from GroupConfig's defaults and checked with ValidateConfig.
Result<CreateGroupRequest> ParseCreateGroupRequest(std::string_view body);
std::string SerializeCreateGroupRequest(const CreateGroupRequest& req);

// PATCH /v1/groups/{P}/{G} {expectedRevision, shardCount?, config?}. A partial config
// only means something relative to the group's current config, so parsing keeps it
// partial; ResolvePatch merges it onto the config stored at `expectedRevision` (safe:
// the service refuses the patch if the revision moved, SPEC I4) and validates the result.
// A patch that changes nothing (neither shardCount nor any config field) is rejected.
struct PatchGroupBody {
  int64_t expected_revision = 0;
  std::optional<int32_t> shard_count;
  std::optional<GroupConfigPatch> config;
  bool operator==(const PatchGroupBody&) const = default;
};
Result<PatchGroupBody> ParsePatchGroupBody(std::string_view body);
std::string SerializePatchGroupBody(const PatchGroupBody& body);
Result<PatchGroupRequest> ResolvePatch(const PatchGroupBody& body, const GroupConfig& current);

// ── Responses ────────────────────────────────────────────────────────────────────

std::string SerializeHeartbeatResponse(const HeartbeatResponse& resp);
Result<HeartbeatResponse> ParseHeartbeatResponse(std::string_view body);

std::string SerializeRoutingResponse(const RoutingResponse& resp);
Result<RoutingResponse> ParseRoutingResponse(std::string_view body);

// The group view of GET /v1/groups/{P}/{G} (and of create/patch/fence/restore).
std::string SerializeGroupView(const GroupView& view);
Result<GroupView> ParseGroupView(std::string_view body);

// GET /v1/groups: {"groups": [{"stream": P, "group": G}, ...]}.
std::string SerializeGroupList(const std::vector<GroupKey>& groups);
Result<ReshardRequest> ParseReshardRequest(std::string_view body);
std::string SerializeReshardRequest(const ReshardRequest& req);
// PATCH /v1/streams/{P} {expectedLayoutRevision, routingLeaseMs?, routingRefreshMs?}.
// Unknown fields are ignored, as in every request body; one of the two values is required.
Result<PatchStreamRequest> ParsePatchStreamRequest(std::string_view body);
std::string SerializePatchStreamRequest(const PatchStreamRequest& req);
// GET /v1/streams/{P}: the layout's fields (layout_codec.h) plus "revision".
std::string SerializeStreamView(const StreamView& view);
Result<StreamView> ParseStreamView(std::string_view body);
Result<std::vector<GroupKey>> ParseGroupList(std::string_view body);

// DELETE /v1/groups/{P}/{G}: {"stream": P, "group": G, "deleted": true}.
std::string SerializeDeleted(const GroupKey& key);

// Error body {"error": CODE, "message": "..."}.
std::string SerializeError(const Error& error);
struct ErrorBody {
  std::string error;  // the code name as sent
  std::string message;
  std::optional<ErrorCode> code;  // nullopt: a code this build does not know
};
Result<ErrorBody> ParseErrorBody(std::string_view body);
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);

// The config object as it appears in views and requests.
std::string SerializeGroupConfig(const GroupConfig& config);

}  // namespace rsc
