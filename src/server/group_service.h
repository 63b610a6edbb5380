#pragma once
// GroupService: the shell around the pure core (SPEC R3.1). Every mutating workflow is
//   local per-group monitor → Redis mutex → load → Decide*(…, now) → CAS → respond
// and a CAS conflict (another replica wrote first, or the mutex expired mid-section)
// restarts the whole cycle from a fresh load; it never overwrites (R2.6).
//
// Thread safety: all methods may be called concurrently from worker threads. Calls for
// one group are serialized in-process by a per-group monitor (the seed's "local monitor
// before the shutdown gate and the Redis mutex"), so replicas contend only across
// processes. The monitor and the heartbeat queue's wait are a SyncPort's (core/sync.h):
// OS primitives in production, parking fibers in the simulator's workers.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/clock.h"
#include "core/decide.h"
#include "core/group_index.h"
#include "core/store.h"
#include "core/stream_admin.h"
#include "core/sync.h"
#include "server/coordinator_api.h"
#include "server/layout_service.h"

namespace rsc {

// What the service reports for logs and metrics. Default implementations do nothing.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  virtual void OnEvents(const GroupKey&, const std::vector<Event>&) {}
  // Once per heartbeat answered, by the thread that decided its batch (of `batch_size`
  // heartbeats decided under one write), in batch order, right after the batch's write.
  // `status` is a HeartbeatStatusName or an ErrorCodeName.
  virtual void OnHeartbeat(const GroupKey&, const HeartbeatRequest& /*req*/,
                           std::string_view /*status*/, size_t /*batch_size*/) {}
  virtual void OnMutexWait(double /*seconds*/, bool /*acquired*/) {}
  virtual void OnRevisionConflict(const GroupKey&) {}
  // A batch of steady heartbeats committed by RenewIfSteady (true), or refused by it and
  // sent down the locked path (false).
  virtual void OnSteadyRenewal(const GroupKey&, bool /*applied*/) {}
  // A heartbeat queued behind the batch a leader is deciding; `waiting` counts it.
  virtual void OnHeartbeatQueued(const GroupKey&, size_t /*waiting*/) {}
  virtual void OnLoadError(const GroupKey&, const Error&) {}
  // Once per tick per group, with the full liveness map.
  virtual void OnGroupState(const GroupKey&, const GroupMetadata&, const Liveness&,
                            TimeMs /*now*/) {}
  virtual void OnTick(const GroupKey&, bool /*wrote*/) {}
  // Once per stream tick of a stream with a layout: (group, sealed shard) pairs not read to
  // their end yet (RS3), 0 when no generation is sealed.
  virtual void OnStreamState(const std::string& /*stream*/, int64_t /*parents_incomplete*/) {}
  // Once per tick per group where Redis backlogs are read: the group's shards with their
  // lag, pending and oldest pending age (O1).
  virtual void OnGroupBacklog(const GroupKey&, const std::vector<ShardView>& /*shards*/) {}
};

// The pure core's mutating decisions as GroupService calls them. Production uses
// Decider::Real(); the simulator substitutes deliberately broken deciders (sim/mutants.h)
// that its checkers must catch — the mutant lives outside the product's files, as a
// replacement object, instead of an #if inside the core.
class Decider {
 public:
  virtual ~Decider() = default;
  virtual Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                                const HeartbeatRequest& req, const Env& env) const {
    return DecideHeartbeat(stored, live, req, env);
  }
  virtual Decision<Unit> Tick(const GroupMetadata& stored, const Liveness& live,
                              const Env& env) const {
    return DecideTick(stored, live, env);
  }
  virtual Decision<GroupView> Patch(const GroupMetadata& stored, const Liveness& live,
                                    const PatchGroupRequest& req, const Env& env) const {
    return DecidePatch(stored, live, req, env);
  }
  virtual Decision<Unit> Fence(const GroupMetadata& stored, const Liveness& live,
                               const MemberId& member, const Env& env) const {
    return DecideFence(stored, live, member, env);
  }
  static const Decider& Real();
};

struct GroupServiceOptions {
  std::chrono::milliseconds lock_ttl{2000};
  std::chrono::milliseconds lock_wait{1500};
  int max_attempts = 5;              // CAS conflicts retried before answering LOCK_TIMEOUT
  size_t max_heartbeat_batch = 256;  // heartbeats decided under one load + CAS
  // The steady path (TrySteadyBatch). Off: every batch takes the locked cycle (what the
  // benchmarks compare it with; the answers are the same either way).
  bool steady_path = true;
  const Decider* decider = nullptr;  // nullptr: Decider::Real(); must outlive the service
  // Shard-stream operations for resharding; nullptr: reshards are refused. Must outlive the
  // service.
  StreamAdmin* streams = nullptr;
  // RS5: a RETIRED generation's keys are deleted this long after it retired (at least the
  // stream's routingLeaseMs: a producer told the old routing before the seal stops using it
  // by then, and its XADD NOMKSTREAM to a deleted key is answered nil, stale routing).
  int64_t retired_retention_ms = 3'600'000;
  // Where the group monitors and the heartbeat queue block (core/sync.h); nullptr:
  // SyncPort::Os(). Must outlive the service.
  SyncPort* sync = nullptr;
};

class GroupService : public CoordinatorApi {
 public:
  GroupService(MetadataStore& store, Clock& clock, TokenSource& tokens, ServiceObserver& observer,
               GroupServiceOptions options, std::function<Status()> ready_probe);

  Result<HeartbeatResponse> Heartbeat(const GroupKey& key, const HeartbeatRequest& req) override;
  // Queues the heartbeat for the group's next batch and returns; `done` runs once with the
  // answer, on the thread that leads that batch. If none was leading, this call leads
  // until the queue is empty: on this thread, or with `spawn` on the thread it spawns (as
  // does the RS3 check of a request that reports completed shards: it reads Redis).
  // Requests waiting for a batch hold no thread.
  void HeartbeatAsync(const GroupKey& key, HeartbeatRequest req, HeartbeatDone done,
                      const Spawn& spawn = nullptr) override;
  Result<RoutingResponse> Routing(const GroupKey& key, int64_t observed_version,
                                  const std::string& lineage) override;
  Result<GroupView> CreateGroup(const CreateGroupRequest& req, RevisionChange* change) override;
  Result<std::vector<GroupKey>> ListGroups() override;
  Result<GroupView> DescribeGroup(const GroupKey& key) override;
  Result<GroupView> PatchGroup(const GroupKey& key, const PatchGroupRequest& req,
                               RevisionChange* change) override;
  Status DeleteGroup(const GroupKey& key, int64_t expected_revision,
                     RevisionChange* change) override;
  Result<GroupView> FenceMember(const GroupKey& key, const MemberId& member,
                                RevisionChange* change) override;
  Result<std::string> ExportGroup(const GroupKey& key) override;
  Result<GroupView> RestoreGroup(std::string_view export_json, RevisionChange* change) override;
  Result<StreamView> DescribeStream(const std::string& stream) override;
  Result<RoutingResponse> StreamRouting(const std::string& stream, int64_t observed_version,
                                        const std::string& lineage) override;
  Result<StreamView> PatchStream(const std::string& stream, const PatchStreamRequest& req,
                                 RevisionChange* change) override;
  Result<StreamView> Reshard(const std::string& stream, int64_t expected_revision,
                             int32_t shard_count, RevisionChange* change) override;
  Status Ready() override;

  // One maintenance pass over a group (expiry, fencing, round completion). Does not
  // wait for the mutex: if another request or replica holds it, that one applies the
  // same time-driven transitions. Returns whether it wrote.
  Result<bool> Tick(const GroupKey& key);

  // One resharding pass over a stream (docs/design/resharding.md): seals the ACTIVE
  // generation, then creates the PREPARING one's keys and consumer groups and activates it,
  // re-seals sealed ones, creates a missing key of a resharded stream's ACTIVE generation,
  // lets every group adopt the layout and record which sealed shards it has read to their
  // end (checked in Redis), retires a generation complete for
  // every group, empties a retired one's keys to tombstones after the retention. Does nothing
  // (one layout read)
  // for a stream with one generation whose groups adopted it. Any coordinator may run it; every
  // step is idempotent.
  Status StreamTick(const std::string& stream);

 private:
  std::shared_ptr<SyncPort::Mutex> MonitorFor(const GroupKey& key);
  // O1: lag, pending and the oldest pending entry's idle time of every shard in the view,
  // read from Redis (best effort: a shard that cannot be read keeps none).
  void FillBacklog(GroupView& view);

  // Group commit for heartbeats: concurrent heartbeats of one group queue up, and one
  // thread (the leader) decides them in order against one load and commits them with one
  // CAS. Every response is derived from a state contained in that write (its version and
  // lineage are in the committed history), so R3.2 holds per request.
  struct HeartbeatWaiter;
  struct HeartbeatQueue;
  std::shared_ptr<HeartbeatQueue> QueueFor(const GroupKey& key);
  // Queues `w` (after the RS3 completion check of its request); true: no one was leading,
  // and the caller now leads (LeadBatches).
  bool Enqueue(const GroupKey& key, HeartbeatQueue& q, std::unique_ptr<HeartbeatWaiter> w);
  // Takes batches off the queue and answers them until it is empty. `hand_over` (a blocking
  // caller, whose own answer came with its first batch): after each batch, a blocking
  // waiter first in line is woken to lead instead, so no caller waits behind others' batches.
  void LeadBatches(const GroupKey& key, HeartbeatQueue& q, bool hand_over);
  // Decides the batch in one locked section; the answers, in batch order. Answers no
  // waiter: LeadBatches does, once the batch is decided.
  std::vector<Result<HeartbeatResponse>> RunHeartbeatBatch(
      const GroupKey& key, const std::vector<HeartbeatWaiter*>& batch);
  // Decides the batch in order against one state: each decision sees the ones before it.
  Decision<std::vector<Result<HeartbeatResponse>>> DecideBatch(
      const GroupMetadata& stored, const Liveness& loaded_live, const Env& env,
      const std::vector<HeartbeatWaiter*>& batch);

  // The steady path (issue 14): the batch decided against the aggregate this process last
  // loaded or wrote and the liveness a Load returns when nothing is due, then committed by
  // one RenewIfSteady (store.h), which refuses unless a locked Load would have returned
  // exactly that and no section runs: the locked cycle at one instant, in one round trip
  // instead of four (lock, load, CAS, unlock). nullopt: not applicable or refused, take the
  // locked path.
  struct Basis {
    AggregateStamp stamp;
    std::shared_ptr<const GroupMetadata> meta;
    // Built once from *meta (core/group_index.h), so a steady heartbeat does not scan every
    // shard of the group; the decision also uses it for a locked cycle that loaded *meta.
    std::shared_ptr<const GroupIndex> index;
  };
  std::optional<std::vector<Result<HeartbeatResponse>>> TrySteadyBatch(
      const GroupKey& key, const std::vector<HeartbeatWaiter*>& batch);
  // Returns the index it built for `meta`.
  std::shared_ptr<const GroupIndex> Remember(const GroupKey& key, const AggregateStamp& stamp,
                                             std::shared_ptr<const GroupMetadata> meta);
  std::optional<Basis> BasisFor(const GroupKey& key);

  // The R3.1 cycle. `decide` maps (stored, liveness, env, revision) to a Decision<R>.
  // `wait` is how long to wait for the Redis mutex.
  template <class R, class F>
  Result<R> Mutate(const GroupKey& key, std::chrono::milliseconds wait, F&& decide,
                   bool* wrote = nullptr, StoreRevision* revision_out = nullptr);

  // The CLIENTS_TOO_OLD gate (D5): a live member of a group of `l` without layout-v2.
  // Also the longest routing lease producers of the stream may hold (the layout's and every
  // group's, capped at the longest a config may set): RS2's routing-lease wait.
  Status CheckClientsSupportLayouts(const Layout& l, int64_t* longest_lease_ms);
  // StreamTick's steps.
  Status PrepareGeneration(const Layout& l);
  Result<std::vector<ShardCompletion>> Completions(const Layout& l, const std::string& group,
                                                   bool* all_complete_oldest);
  Status SealAndActivate(const StoredLayout& stored);
  // Reads the layout `stored` was read from again, from inside a Mutate of group `m`
  // (after its load): false, with a layout_adoption_deferred event, when Redis no longer
  // holds that revision with that content. The group is then not written from the older
  // read: a rollback (snapshot restore, failover) between the layout read and the group's
  // load would have it adopt a generation, or record completions, of a layout Redis lost,
  // which no later pass can roll forward (simulator seed 82 of the Seed12 search, found
  // with issue 14's heartbeat queue: a completion hint's mutex wait spanned a restore).
  Result<bool> LayoutUnchanged(const StoredLayout& stored, const GroupMetadata& m);
  // CheckBehind's last step on a layout in step with its streams: a missing key of the
  // ACTIVE generation of a resharded stream is created (readers do not create those), once
  // the layout read again is still `stored` (tops read after a rollback the layout read
  // before it did not see would otherwise create a child the rolled-back layout has not
  // sealed the parents of).
  Status RecreateMissingKeys(const StoredLayout& stored, const Generation& active,
                             const std::vector<StreamTop>& tops);
  // RS6: reads the ends of the ACTIVE generation's keys (and the key after the highest id)
  // and, when the layout is behind them, writes it forward from a seal's `rsc-next`
  // (returns true) or records the stream as behind (routing fails closed, FailIfBehind).
  Result<bool> CheckBehind(const StoredLayout& stored);
  // METADATA_UNREADABLE with the reason while this process's last check found `stream`
  // behind its streams and could not roll it forward.
  Status FailIfBehind(const std::string& stream);
  // RS5: stamps retirement times, deletes the keys of a generation retired longer than the
  // retention and drops it from the layout. Returns whether it wrote the layout.
  Result<bool> DeleteRetired(const StoredLayout& stored);
  // D3: the group's consumer group (and the key) on each of its unfinished shards.
  void CreateShardGroups(const GroupMetadata& meta);
  // RS3: a heartbeat's completedShards hint. Checks each named shard of a SEALED generation
  // in Redis and records the completed ones in the group before the heartbeat is decided.
  Status CheckReportedCompletions(const GroupKey& key, const std::vector<int32_t>& shards);

  MetadataStore& store_;
  LayoutService layouts_;
  const Decider& decide_;
  Clock& clock_;
  TokenSource& tokens_;
  ServiceObserver& observer_;
  const GroupServiceOptions options_;
  std::function<Status()> ready_probe_;
  SyncPort& sync_;

  std::mutex bases_mu_;
  std::unordered_map<std::string, Basis> bases_;  // by Tag(); guarded by bases_mu_

  // Held only to find or add an entry (never across a Redis call): a std::mutex.
  std::mutex monitors_mu_;
  std::unordered_map<std::string, std::shared_ptr<SyncPort::Mutex>> monitors_;  // by Tag()
  std::unordered_map<std::string, std::shared_ptr<HeartbeatQueue>> queues_;     // by Tag()
  // Retired keys reported kept (retired_key_kept): once per key and process, not every tick.
  std::mutex kept_mu_;
  std::unordered_set<std::string> kept_reported_;
  // RS6: streams whose layout the last check found behind, with the reason (by stream).
  std::mutex behind_mu_;
  std::unordered_map<std::string, std::string> behind_;
};

}  // namespace rsc
