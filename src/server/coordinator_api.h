#pragma once
// The coordinator's operations as the HTTP layer sees them. GroupService (group_service.h)
// implements it over MetadataStore + the pure core; HTTP handlers (api.h) only parse,
// validate, call one method and serialize. Every method may be called concurrently from
// worker threads and may block on Redis.
//
// The admin mutations also report what they committed (`change`, may be null), for the
// audit trail (SPEC O4, server/audit.h): exactly the revision the write was checked
// against and the one it produced, which a view read afterwards cannot tell (a heartbeat
// or tick may have written since). A mutation reports its change as soon as it is
// committed, so a request whose later step fails (a re-read of the view, a restore's
// liveness seeding) answers an error AND reports the committed change.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/protocol.h"
#include "core/result.h"

namespace rsc {

// What an admin mutation committed. `before`/`after`: the group's storeRevision (R2.1), or
// the stream layout's revision for a reshard; unset where there is none: before a create
// (and before a restore over no readable group), after a delete. A mutation that wrote
// nothing (a patch to the current values, a fence of a fenced member) has before == after.
struct RevisionChange {
  bool committed = false;  // false: nothing was committed (refused, failed, unknown result)
  std::optional<int64_t> before;
  std::optional<int64_t> after;
  GroupKey group;  // the group a restore wrote (named by its document)
};

class CoordinatorApi {
 public:
  virtual ~CoordinatorApi() = default;
  // POST /v1/groups/{P}/{G}/heartbeat (join: epoch 0, leave: epoch -1).
  virtual Result<HeartbeatResponse> Heartbeat(const GroupKey& key, const HeartbeatRequest& req) = 0;
  // The same, answered through `done` (exactly once, maybe on another thread, maybe before
  // this returns), so the caller need not hold a thread while the heartbeat waits for its
  // batch. With `spawn`, the call itself never blocks: any work that may (Redis) runs in a
  // function handed to `spawn`, which runs it on some other thread (the HTTP server's
  // worker pool); without it, such work runs on the calling thread. The default answers
  // with Heartbeat(), through `spawn` when given.
  using HeartbeatDone = std::function<void(Result<HeartbeatResponse>)>;
  using Spawn = std::function<void(std::function<void()>)>;
  virtual void HeartbeatAsync(const GroupKey& key, HeartbeatRequest req, HeartbeatDone done,
                              const Spawn& spawn = nullptr) {
    if (!spawn) return done(Heartbeat(key, req));
    spawn([this, key, req = std::move(req), done = std::move(done)] { done(Heartbeat(key, req)); });
  }
  // GET /v1/groups/{P}/{G}/routing?observedVersion=N&lineage=L
  virtual Result<RoutingResponse> Routing(const GroupKey& key, int64_t observed_version,
                                          const std::string& lineage) = 0;
  // POST /v1/groups -> 201
  virtual Result<GroupView> CreateGroup(const CreateGroupRequest& req, RevisionChange* change) = 0;
  // GET /v1/groups
  virtual Result<std::vector<GroupKey>> ListGroups() = 0;
  // GET /v1/groups/{P}/{G}
  virtual Result<GroupView> DescribeGroup(const GroupKey& key) = 0;
  // PATCH /v1/groups/{P}/{G}
  virtual Result<GroupView> PatchGroup(const GroupKey& key, const PatchGroupRequest& req,
                                       RevisionChange* change) = 0;
  // DELETE /v1/groups/{P}/{G}?expectedRevision=N
  virtual Status DeleteGroup(const GroupKey& key, int64_t expected_revision,
                             RevisionChange* change) = 0;
  // POST /v1/groups/{P}/{G}/members/{id}/fence
  virtual Result<GroupView> FenceMember(const GroupKey& key, const MemberId& member,
                                        RevisionChange* change) = 0;
  // GET /v1/groups/{P}/{G}/export -> the export document (codec.h EncodeExport)
  virtual Result<std::string> ExportGroup(const GroupKey& key) = 0;
  // POST /v1/groups/restore with an export document
  virtual Result<GroupView> RestoreGroup(std::string_view export_json, RevisionChange* change) = 0;
  // GET /v1/streams/{P} (SPEC D4). The default answers 404 (test doubles).
  virtual Result<StreamView> DescribeStream(const std::string& stream) {
    return MakeError(ErrorCode::kStreamNotFound, "stream '" + stream + "' not found");
  }
  // GET /v1/streams/{P}/routing (SPEC D4). The default answers 404 (test doubles).
  virtual Result<RoutingResponse> StreamRouting(const std::string& stream,
                                                int64_t /*observed_version*/,
                                                const std::string& /*lineage*/) {
    return MakeError(ErrorCode::kStreamNotFound, "stream '" + stream + "' not found");
  }
  // PATCH /v1/streams/{P} (SPEC D4). The default answers 404 (test doubles).
  virtual Result<StreamView> PatchStream(const std::string& stream,
                                         const PatchStreamRequest& /*req*/,
                                         RevisionChange* /*change*/) {
    return MakeError(ErrorCode::kStreamNotFound, "stream '" + stream + "' not found");
  }
  // POST /v1/streams/{P}/reshard (SPEC RS1). The default refuses (test doubles).
  virtual Result<StreamView> Reshard(const std::string& stream, int64_t /*expected_revision*/,
                                     int32_t /*shard_count*/, RevisionChange* /*change*/) {
    return MakeError(ErrorCode::kStreamNotFound, "stream '" + stream + "' not found");
  }
  // /readyz: Redis reachable and compatible (not terminating is checked by the server).
  virtual Status Ready() = 0;
};

}  // namespace rsc
