// Fuzzes the request parsers of core/protocol_json.h. Beyond "no crash, no sanitizer
// report", every accepted request must satisfy the documented contract and survive a
// serialize → parse round trip unchanged.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "core/protocol_json.h"

namespace {

using namespace rsc;

void CheckHeartbeat(const HeartbeatRequest& r) {
  RSC_CHECK(IsValidMemberId(r.member_id.str()));
  RSC_CHECK(r.instance_id.empty() || IsValidMemberId(r.instance_id));
  RSC_CHECK(r.member_epoch >= -1);
  RSC_CHECK(r.assignment_epoch >= 0 && r.metadata_version >= 0);
  RSC_CHECK(r.lineage.size() <= kMaxLineageLength);
  int32_t prev = -1;
  for (int32_t s : r.owned_shards) {
    RSC_CHECK(s > prev && s < kMaxShardCount);  // sorted, unique, in range
    prev = s;
  }
  prev = -1;
  for (const RevokingReport& rep : r.revoking_shards) {
    RSC_CHECK(rep.shard > prev && rep.shard < kMaxShardCount);
    prev = rep.shard;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);

  if (auto r = ParseHeartbeatRequest(in); r.ok()) {
    CheckHeartbeat(*r);
    auto again = ParseHeartbeatRequest(SerializeHeartbeatRequest(*r));
    RSC_CHECK(again.ok() && *again == *r);
  } else {
    RSC_CHECK(r.error().code == ErrorCode::kInvalidRequest && !r.error().message.empty());
  }

  if (auto r = ParseLeaveRequest(in); r.ok()) {
    CheckHeartbeat(r->heartbeat);
    RSC_CHECK(r->heartbeat.member_epoch == -1 && r->member_epoch >= -1);
    auto again = ParseLeaveRequest(SerializeLeaveRequest(*r));
    RSC_CHECK(again.ok() && again->heartbeat == r->heartbeat &&
              again->member_epoch == r->member_epoch);
  }

  if (auto r = ParseCreateGroupRequest(in); r.ok()) {
    RSC_CHECK(IsValidStreamName(r->stream) && IsValidGroupName(r->group));
    // 0: not given, the group adopts its stream's layout (SPEC D3).
    RSC_CHECK(r->shard_count >= 0 && r->shard_count <= kMaxShardCount);
    RSC_CHECK(ValidateConfig(r->config).ok());
    auto again = ParseCreateGroupRequest(SerializeCreateGroupRequest(*r));
    RSC_CHECK(again.ok() && again->stream == r->stream && again->group == r->group &&
              again->shard_count == r->shard_count && again->config == r->config);
  } else {
    RSC_CHECK(r.error().code == ErrorCode::kInvalidRequest);
  }

  if (auto r = ParsePatchGroupBody(in); r.ok()) {
    RSC_CHECK(r->expected_revision >= 0);
    RSC_CHECK(r->shard_count || r->config);
    auto again = ParsePatchGroupBody(SerializePatchGroupBody(*r));
    RSC_CHECK(again.ok() && *again == *r);
    auto resolved = ResolvePatch(*r, GroupConfig{});
    if (resolved.ok() && resolved->config) RSC_CHECK(ValidateConfig(*resolved->config).ok());
  }

  if (auto r = ParseReshardRequest(in); r.ok()) {
    RSC_CHECK(r->expected_layout_revision >= 1);
    RSC_CHECK(r->shard_count >= 1 && r->shard_count <= kMaxShardCount);
    auto again = ParseReshardRequest(SerializeReshardRequest(*r));
    RSC_CHECK(again.ok() && again->expected_layout_revision == r->expected_layout_revision &&
              again->shard_count == r->shard_count);
  } else {
    RSC_CHECK(r.error().code == ErrorCode::kInvalidRequest && !r.error().message.empty());
  }

  if (auto r = ParsePatchStreamRequest(in); r.ok()) {
    RSC_CHECK(r->expected_layout_revision >= 1);
    RSC_CHECK(r->routing_lease_ms || r->routing_refresh_ms);  // a patch changes something
    auto again = ParsePatchStreamRequest(SerializePatchStreamRequest(*r));
    RSC_CHECK(again.ok() && *again == *r);
  } else {
    RSC_CHECK(r.error().code == ErrorCode::kInvalidRequest && !r.error().message.empty());
  }
  return 0;
}
