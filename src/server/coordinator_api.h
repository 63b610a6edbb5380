#pragma once
// The coordinator's operations as the HTTP layer sees them. GroupService (group_service.h)
// implements it over MetadataStore + the pure core; HTTP handlers (api.h) only parse,
// validate, call one method and serialize. Every method may be called concurrently from
// worker threads and may block on Redis.

#include <string>
#include <string_view>
#include <vector>

#include "core/protocol.h"
#include "core/result.h"

namespace rsc {

class CoordinatorApi {
 public:
  virtual ~CoordinatorApi() = default;
  // POST /v1/groups/{P}/{G}/heartbeat (join: epoch 0, leave: epoch -1).
  virtual Result<HeartbeatResponse> Heartbeat(const GroupKey& key, const HeartbeatRequest& req) = 0;
  // GET /v1/groups/{P}/{G}/routing?observedVersion=N&lineage=L
  virtual Result<RoutingResponse> Routing(const GroupKey& key, int64_t observed_version,
                                          const std::string& lineage) = 0;
  // POST /v1/groups -> 201
  virtual Result<GroupView> CreateGroup(const CreateGroupRequest& req) = 0;
  // GET /v1/groups
  virtual Result<std::vector<GroupKey>> ListGroups() = 0;
  // GET /v1/groups/{P}/{G}
  virtual Result<GroupView> DescribeGroup(const GroupKey& key) = 0;
  // PATCH /v1/groups/{P}/{G}
  virtual Result<GroupView> PatchGroup(const GroupKey& key, const PatchGroupRequest& req) = 0;
  // DELETE /v1/groups/{P}/{G}?expectedRevision=N
  virtual Status DeleteGroup(const GroupKey& key, int64_t expected_revision) = 0;
  // POST /v1/groups/{P}/{G}/members/{id}/fence
  virtual Result<GroupView> FenceMember(const GroupKey& key, const MemberId& member) = 0;
  // GET /v1/groups/{P}/{G}/export -> the export document (codec.h EncodeExport)
  virtual Result<std::string> ExportGroup(const GroupKey& key) = 0;
  // POST /v1/groups/restore with an export document
  virtual Result<GroupView> RestoreGroup(std::string_view export_json) = 0;
  // GET /v1/streams/{P} (SPEC D4). The default answers 404 (test doubles).
  virtual Result<StreamView> DescribeStream(const std::string& stream) {
    return MakeError(ErrorCode::kStreamNotFound, "stream '" + stream + "' not found");
  }
  // POST /v1/streams/{P}/reshard (SPEC RS1). The default refuses (test doubles).
  virtual Result<StreamView> Reshard(const std::string& stream, int64_t /*expected_revision*/,
                                     int32_t /*shard_count*/) {
    return MakeError(ErrorCode::kStreamNotFound, "stream '" + stream + "' not found");
  }
  // /readyz: Redis reachable and compatible (not terminating is checked by the server).
  virtual Status Ready() = 0;
};

}  // namespace rsc
