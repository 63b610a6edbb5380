#include "server/group_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>

#include "core/codec.h"
#include "core/layout_codec.h"
#include "core/stream_decide.h"

namespace rsc {

GroupService::GroupService(MetadataStore& store, Clock& clock, TokenSource& tokens,
                           ServiceObserver& observer, GroupServiceOptions options,
                           std::function<Status()> ready_probe)
    : store_(store),
      layouts_(store, clock, tokens, options.streams),
      decide_(options.decider != nullptr ? *options.decider : Decider::Real()),
      clock_(clock),
      tokens_(tokens),
      observer_(observer),
      options_(options),
      ready_probe_(std::move(ready_probe)),
      sync_(options.sync != nullptr ? *options.sync : SyncPort::Os()) {}

const Decider& Decider::Real() {
  static const Decider real;
  return real;
}

std::shared_ptr<SyncPort::Mutex> GroupService::MonitorFor(const GroupKey& key) {
  std::lock_guard<std::mutex> lock(monitors_mu_);
  auto& slot = monitors_[key.Tag()];
  if (!slot) slot = sync_.NewMutex();
  return slot;
}

namespace {

// Releases the Redis mutex on scope exit; a failed release is harmless (it expires).
class RedisLockGuard {
 public:
  RedisLockGuard(MetadataStore& store, const GroupKey& key, std::string token)
      : store_(store), key_(key), token_(std::move(token)) {}
  ~RedisLockGuard() { (void)store_.Unlock(key_, token_); }
  RedisLockGuard(const RedisLockGuard&) = delete;
  RedisLockGuard& operator=(const RedisLockGuard&) = delete;

 private:
  MetadataStore& store_;
  GroupKey key_;
  std::string token_;
};

Error ConflictExhausted(const GroupKey& key, int attempts) {
  return MakeError(ErrorCode::kLockTimeout,
                   fmt::format("group {}: metadata kept changing under {} attempts (revision "
                               "conflicts); retry with backoff",
                               key.Tag(), attempts));
}

// A removal holds only while the member's deadline is the one this decision loaded
// (LivenessUpdate::remove_if_at_most): the revision check alone cannot see a renewal made
// since, because liveness writes keep the revision.
void GuardRemovals(LivenessUpdate& u, const Liveness& loaded) {
  for (const std::string& id : u.remove) {
    auto it = loaded.deadline_ms.find(id);
    if (it != loaded.deadline_ms.end()) {
      u.remove_if_at_most[id] = it->second;
    } else if (loaded.complete) {
      u.remove_if_at_most[id] = kNoDeadline;
    }
  }
}

}  // namespace

template <class R, class F>
Result<R> GroupService::Mutate(const GroupKey& key, std::chrono::milliseconds wait, F&& decide,
                               bool* wrote, StoreRevision* revision_out) {
  if (wrote) *wrote = false;
  std::shared_ptr<SyncPort::Mutex> monitor = MonitorFor(key);
  std::unique_lock<SyncPort::Mutex> local(*monitor, std::defer_lock);
  if (wait.count() == 0) {
    if (!local.try_lock()) return MakeError(ErrorCode::kLockTimeout, "group busy");
  } else {
    local.lock();
  }
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    const auto t0 = std::chrono::steady_clock::now();
    auto token = store_.Lock(key, options_.lock_ttl, wait);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!token.ok()) return token.error();
    // A tick that finds the mutex busy is not a timeout: someone else is doing the work.
    if (wait.count() > 0) observer_.OnMutexWait(waited, token->has_value());
    if (!token->has_value()) {
      return MakeError(
          ErrorCode::kLockTimeout,
          fmt::format("group {}: mutex not acquired within {} ms", key.Tag(), wait.count()));
    }
    RedisLockGuard guard(store_, key, **token);
    const TimeMs now = clock_.NowMs();  // frozen for the whole decision
    auto loaded = store_.Load(key, now);
    if (!loaded.ok()) {
      observer_.OnLoadError(key, loaded.error());
      return loaded.error();
    }
    const std::shared_ptr<const GroupIndex> index = Remember(key, loaded->stamp, loaded->meta);
    // A key is drawn only for a group that has none yet (core/lineage_token.h).
    Env env{now, tokens_.NewToken(),
            loaded->meta->lineage_key.empty() ? tokens_.NewToken() : std::string(), index.get()};
    auto d = decide(*loaded->meta, loaded->liveness, env, loaded->revision);
    observer_.OnEvents(key, d.events);
    if (!d.next && d.liveness.empty()) {
      if (revision_out) *revision_out = loaded->revision;
      return std::move(d.response);
    }
    GuardRemovals(d.liveness, loaded->liveness);
    auto cas =
        store_.CompareAndSet(key, loaded->revision, d.next ? &*d.next : nullptr, d.liveness, now);
    if (!cas.ok()) {
      // Includes UNKNOWN_RESULT: the client retries, and because answers are views of
      // committed state (R3.3) the retry is safe whether or not this write landed.
      if (cas.error().code == ErrorCode::kUnknownResult) {
        return MakeError(ErrorCode::kRedisUnavailable,
                         "Redis did not confirm the write; retry: " + cas.error().message);
      }
      return cas.error();
    }
    if (!cas->applied) {
      observer_.OnRevisionConflict(key);
      continue;  // someone else wrote (or the key vanished): reload and decide again
    }
    if (wrote) *wrote = d.next.has_value();
    if (revision_out) *revision_out = cas->revision;
    if (d.next)
      Remember(key, cas->stamp, std::make_shared<const GroupMetadata>(std::move(*d.next)));
    return std::move(d.response);
  }
  return ConflictExhausted(key, options_.max_attempts);
}

struct GroupService::HeartbeatWaiter {
  HeartbeatRequest owned;       // HeartbeatAsync's copy (empty for the blocking Heartbeat)
  const HeartbeatRequest* req;  // &owned, or the blocking caller's request
  HeartbeatDone done;           // called once, with the answer, by the batch's leader
  std::function<void()> lead;   // a blocking caller's: wakes it to lead the next batch
};

struct GroupService::HeartbeatQueue {
  explicit HeartbeatQueue(SyncPort& sync) : mu(sync.NewMutex()) {}
  std::unique_ptr<SyncPort::Mutex> mu;
  std::deque<std::unique_ptr<HeartbeatWaiter>> waiting;  // guarded by mu
  bool leader = false;                                   // guarded by mu
};

std::shared_ptr<GroupService::HeartbeatQueue> GroupService::QueueFor(const GroupKey& key) {
  std::lock_guard<std::mutex> lock(monitors_mu_);
  auto& slot = queues_[key.Tag()];
  if (!slot) slot = std::make_shared<HeartbeatQueue>(sync_);
  return slot;
}

namespace {

// Applies a decision's liveness changes to the liveness the next decision in the same
// batch sees, so e.g. a member that joined earlier in the batch is not taken as expired.
void ApplyLiveness(Liveness& live, const LivenessUpdate& u) {
  for (const auto& id : u.remove) live.deadline_ms.erase(id);
  for (const auto& [id, dl] : u.set) live.deadline_ms[id] = dl;
}

void MergeLiveness(LivenessUpdate& into, const LivenessUpdate& u) {
  for (const auto& id : u.remove) {
    std::erase_if(into.set, [&](const auto& p) { return p.first == id; });
    if (std::find(into.remove.begin(), into.remove.end(), id) == into.remove.end()) {
      into.remove.push_back(id);
    }
  }
  for (const auto& [id, dl] : u.set) {
    std::erase(into.remove, id);
    std::erase_if(into.set, [&](const auto& p) { return p.first == id; });
    into.set.emplace_back(id, dl);
  }
}

}  // namespace

Decision<std::vector<Result<HeartbeatResponse>>> GroupService::DecideBatch(
    const GroupMetadata& stored, const Liveness& loaded_live, const Env& env,
    const std::vector<HeartbeatWaiter*>& batch) {
  using Batch = std::vector<Result<HeartbeatResponse>>;
  Decision<Batch> out{std::nullopt, {}, Batch{}, {}};
  const GroupMetadata* state = &stored;
  Liveness live = loaded_live;
  for (size_t i = 0; i < batch.size(); ++i) {
    // One fresh lineage token per decision: each committed version gets its own.
    // The index describes `stored` only; decisions ignore it once `state` is a next state.
    Env step{env.now_ms, i == 0 ? env.fresh_lineage : tokens_.NewToken(), env.fresh_key, env.index};
    auto d = decide_.Heartbeat(*state, live, *batch[i]->req, step);
    ApplyLiveness(live, d.liveness);
    MergeLiveness(out.liveness, d.liveness);
    out.events.insert(out.events.end(), d.events.begin(), d.events.end());
    out.response->push_back(std::move(d.response));
    if (d.next) {
      out.next = std::move(d.next);
      state = &*out.next;
    }
  }
  return out;
}

std::shared_ptr<const GroupIndex> GroupService::Remember(
    const GroupKey& key, const AggregateStamp& stamp, std::shared_ptr<const GroupMetadata> meta) {
  auto index = std::make_shared<const GroupIndex>(BuildGroupIndex(*meta));
  // Always the latest: every caller is inside Mutate, under the group's monitor, so calls
  // come in the order of the loads and writes. Not "only a higher revision": a group
  // deleted and created again, or a Redis that lost writes, goes back to a lower revision,
  // and a basis kept from before would have every steady batch refused from then on.
  std::lock_guard<std::mutex> lock(bases_mu_);
  bases_[key.Tag()] = Basis{stamp, std::move(meta), index};
  return index;
}

std::optional<GroupService::Basis> GroupService::BasisFor(const GroupKey& key) {
  std::lock_guard<std::mutex> lock(bases_mu_);
  auto it = bases_.find(key.Tag());
  if (it == bases_.end() || it->second.stamp.write_token.empty()) return std::nullopt;
  return it->second;
}

std::optional<std::vector<Result<HeartbeatResponse>>> GroupService::TrySteadyBatch(
    const GroupKey& key, const std::vector<HeartbeatWaiter*>& batch) {
  if (!options_.steady_path) return std::nullopt;
  std::optional<Basis> basis = BasisFor(key);
  if (!basis) return std::nullopt;
  const TimeMs now = clock_.NowMs();
  // What a Load returns when the liveness set has one deadline per member and none is due.
  const Liveness nothing_due{{}, false};
  Env env{now, tokens_.NewToken(), basis->meta->lineage_key.empty() ? tokens_.NewToken() : "",
          basis->index.get()};
  auto d = DecideBatch(*basis->meta, nothing_due, env, batch);
  if (d.next || !d.liveness.remove.empty()) return std::nullopt;  // not steady: locked path
  auto renewed =
      store_.RenewIfSteady(key, basis->stamp, basis->meta->members.size(), d.liveness.set, now);
  if (renewed.ok() && !*renewed) {
    observer_.OnSteadyRenewal(key, false);
    return std::nullopt;
  }
  std::vector<Result<HeartbeatResponse>> out;
  out.reserve(batch.size());
  if (!renewed.ok()) {
    // As in Mutate: an unconfirmed write is retried by the client; answers are views of
    // committed state, so the retry is safe whether or not this one landed.
    Error e = renewed.error();
    if (e.code == ErrorCode::kUnknownResult) {
      e = MakeError(ErrorCode::kRedisUnavailable,
                    "Redis did not confirm the write; retry: " + renewed.error().message);
    }
    for (size_t i = 0; i < batch.size(); ++i) out.emplace_back(e);
    return out;
  }
  observer_.OnSteadyRenewal(key, true);
  observer_.OnEvents(key, d.events);
  for (auto& r : *d.response) out.push_back(std::move(r));
  return out;
}

std::vector<Result<HeartbeatResponse>> GroupService::RunHeartbeatBatch(
    const GroupKey& key, const std::vector<HeartbeatWaiter*>& batch) {
  using Batch = std::vector<Result<HeartbeatResponse>>;
  std::optional<Batch> steady = TrySteadyBatch(key, batch);
  Result<Batch> r = steady ? Result<Batch>(std::move(*steady)) : Result<Batch>(Batch{});
  if (!steady) {
    r = Mutate<Batch>(key, options_.lock_wait,
                      [&](const GroupMetadata& stored, const Liveness& loaded_live, const Env& env,
                          StoreRevision) { return DecideBatch(stored, loaded_live, env, batch); });
  }
  std::vector<Result<HeartbeatResponse>> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    out.push_back(r.ok() ? std::move(r.value()[i]) : Result<HeartbeatResponse>(r.error()));
    const auto& res = out.back();
    observer_.OnHeartbeat(
        key, *batch[i]->req,
        res.ok() ? HeartbeatStatusName(res->status) : ErrorCodeName(res.error().code),
        batch.size());
  }
  return out;
}

Status GroupService::CheckReportedCompletions(const GroupKey& key,
                                              const std::vector<int32_t>& shards) {
  if (options_.streams == nullptr) return OkStatus();
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, store_.LoadLayout(key.stream));
  if (!stored) return OkStatus();
  const Layout& l = stored->layout;
  std::vector<ShardCompletion> done;
  for (int32_t id : shards) {
    for (const Generation& g : l.generations) {
      if (g.state != GenerationState::kSealed) continue;
      for (const LayoutShard& s : g.shards) {
        if (s.id != id) continue;
        RSC_ASSIGN_OR_RETURN(GroupProgress p, options_.streams->Progress(s.stream, key.group));
        // Only completions: a hint never reopens a parent (the ticks' re-checks do).
        if (p.Complete()) done.push_back({id, true});
      }
    }
  }
  if (done.empty()) return OkStatus();
  Status observed = OkStatus();
  auto r = Mutate<Unit>(
      key, options_.lock_wait,
      [&](const GroupMetadata& m, const Liveness& live, const Env& env, StoreRevision) {
        Result<bool> same = LayoutUnchanged(*stored, m);
        if (!same.ok() || !*same) {
          if (!same.ok()) observed = same.error();
          return Decision<Unit>{std::nullopt, {}, Unit{}, {}};  // writes nothing
        }
        return DecideLayoutTick(m, live, l, stored->revision.value(), done, env);
      });
  if (!observed.ok()) return observed;
  return r.ok() ? OkStatus() : Status(r.error());
}

void GroupService::HeartbeatAsync(const GroupKey& key, HeartbeatRequest req, HeartbeatDone done,
                                  const Spawn& spawn) {
  if (spawn && !req.completed_shards.empty()) {
    // Its RS3 check (Enqueue) reads Redis: all of it on the pool, as a plain call.
    return spawn([this, key, req = std::move(req), done = std::move(done)]() mutable {
      HeartbeatAsync(key, std::move(req), std::move(done), nullptr);
    });
  }
  auto w = std::make_unique<HeartbeatWaiter>();
  w->owned = std::move(req);
  w->req = &w->owned;
  w->done = std::move(done);
  std::shared_ptr<HeartbeatQueue> q = QueueFor(key);
  if (!Enqueue(key, *q, std::move(w))) return;
  if (!spawn) return LeadBatches(key, *q, /*hand_over=*/false);
  spawn([this, key, q] { LeadBatches(key, *q, /*hand_over=*/false); });
}

Result<HeartbeatResponse> GroupService::Heartbeat(const GroupKey& key,
                                                  const HeartbeatRequest& req) {
  // The queued path with callbacks that wake this caller: with its answer, or to lead
  // the next batch. The waiter points at the caller's own request (alive until the
  // answer is back), not a copy: the simulator's observers know a request by its address.
  struct Slot {
    std::unique_ptr<SyncPort::Mutex> mu;
    std::unique_ptr<SyncPort::CondVar> cv;
    std::optional<Result<HeartbeatResponse>> result;  // guarded by mu
    bool lead = false;                                // guarded by mu
  } slot{sync_.NewMutex(), sync_.NewCondVar(), std::nullopt};
  auto w = std::make_unique<HeartbeatWaiter>();
  w->req = &req;
  w->done = [&slot](Result<HeartbeatResponse> r) {
    std::lock_guard<SyncPort::Mutex> lock(*slot.mu);
    slot.result = std::move(r);
    slot.cv->NotifyAll();
  };
  w->lead = [&slot] {
    std::lock_guard<SyncPort::Mutex> lock(*slot.mu);
    slot.lead = true;
    slot.cv->NotifyAll();
  };
  std::shared_ptr<HeartbeatQueue> q = QueueFor(key);
  bool lead = Enqueue(key, *q, std::move(w));
  for (;;) {
    // A leader's first batch includes its own request, so it has its answer after it.
    if (lead) LeadBatches(key, *q, /*hand_over=*/true);
    std::unique_lock<SyncPort::Mutex> lock(*slot.mu);
    while (!slot.result && !slot.lead) slot.cv->Wait(*slot.mu);
    if (slot.result) return std::move(*slot.result);
    slot.lead = false;
    lead = true;
  }
}

bool GroupService::Enqueue(const GroupKey& key, HeartbeatQueue& q,
                           std::unique_ptr<HeartbeatWaiter> w) {
  if (!w->req->completed_shards.empty()) {
    // RS3: recorded before this heartbeat is answered, so its answer already hands the
    // children on. A failure only delays it to the next tick or hint.
    (void)CheckReportedCompletions(key, w->req->completed_shards);
  }
  size_t waiting = 0;
  {
    std::lock_guard<SyncPort::Mutex> lock(*q.mu);
    q.waiting.push_back(std::move(w));
    if (!q.leader) {
      q.leader = true;
      return true;
    }
    waiting = q.waiting.size();  // the leader takes it with its next batch
  }
  observer_.OnHeartbeatQueued(key, waiting);
  return false;
}

void GroupService::LeadBatches(const GroupKey& key, HeartbeatQueue& q, bool hand_over) {
  for (;;) {
    std::vector<std::unique_ptr<HeartbeatWaiter>> batch;
    {
      std::lock_guard<SyncPort::Mutex> lock(*q.mu);
      if (q.waiting.empty()) {
        q.leader = false;
        return;
      }
      while (!q.waiting.empty() && batch.size() < options_.max_heartbeat_batch) {
        batch.push_back(std::move(q.waiting.front()));
        q.waiting.pop_front();
      }
    }
    std::vector<HeartbeatWaiter*> view;
    view.reserve(batch.size());
    for (auto& b : batch) view.push_back(b.get());
    std::vector<Result<HeartbeatResponse>> answers;
    try {
      answers = RunHeartbeatBatch(key, view);
    } catch (const std::exception& e) {
      // Answered, not lost: a leader that left by an exception would leave the group's
      // queue with a leader no one is, and every later heartbeat of the group unanswered.
      spdlog::error("heartbeat batch of {} threw: {}", key.Tag(), e.what());
      answers.assign(batch.size(),
                     Result<HeartbeatResponse>(MakeError(ErrorCode::kInternal, "internal error")));
    }
    // Outside the queue's mutex: a callback takes its own locks (a blocking caller's
    // slot, an HTTP connection's strand). Each waiter is answered exactly once.
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->done(std::move(answers[i]));
    if (!hand_over) continue;
    // A blocking leader has its answer now and its caller waits for it: a blocking waiter
    // next in line leads from here (with its own request in its first batch). Requests
    // queued by HeartbeatAsync have no thread waiting, so this one goes on for them.
    std::lock_guard<SyncPort::Mutex> lock(*q.mu);
    if (q.waiting.empty()) {
      q.leader = false;
      return;
    }
    if (q.waiting.front()->lead) {
      q.waiting.front()->lead();
      return;
    }
  }
}

Result<RoutingResponse> GroupService::Routing(const GroupKey& key, int64_t observed_version,
                                              const std::string& lineage) {
  // No mutex: routing never writes (I3) and reads one atomic snapshot of the hash.
  RSC_RETURN_IF_ERROR(FailIfBehind(key.stream));  // RS6: never route to a sealed generation
  const TimeMs now = clock_.NowMs();
  auto loaded = store_.Load(key, now);
  if (!loaded.ok()) {
    observer_.OnLoadError(key, loaded.error());
    return loaded.error();
  }
  auto d = DecideRouting(*loaded->meta, observed_version, lineage, now);
  observer_.OnEvents(key, d.events);
  return std::move(d.response);
}

Result<GroupView> GroupService::CreateGroup(const CreateGroupRequest& req, RevisionChange* change) {
  const TimeMs now = clock_.NowMs();
  // Is this a create over a lost key (listed in the index, hash gone)? Then members of the
  // lost group may still read under their last leases, and the new group must not grant
  // their shards before those leases end (DecideCreate). The index lives in another slot
  // than the hash, so this look-up cannot share the create's script; the window between
  // the two only matters if another coordinator creates, grants and loses the same group
  // within it.
  CreateOver over = CreateOver::kNothing;
  if (IsValidStreamName(req.stream) && IsValidGroupName(req.group)) {
    auto prior = store_.Load(GroupKey{req.stream, req.group}, now);
    if (!prior.ok()) {
      const ErrorCode code = prior.error().code;
      if (code == ErrorCode::kMetadataMissing) {
        over = CreateOver::kLostKey;
      } else if (code == ErrorCode::kRedisUnavailable || code == ErrorCode::kUnknownResult) {
        return prior.error();
      }
    }
  }
  // D3: the group is registered in its stream's layout before its key exists, and takes
  // the layout's shard count. Bad names, counts and configs are refused before that.
  CreateGroupRequest create = req;
  std::optional<StoredLayout> layout;
  if (IsValidStreamName(req.stream) && IsValidGroupName(req.group)) {
    if (req.shard_count < 0 || req.shard_count > kMaxShards) {
      return MakeError(ErrorCode::kInvalidRequest,
                       fmt::format("shardCount must be between 1 and {}", kMaxShards));
    }
    RSC_RETURN_IF_ERROR(ValidateConfig(req.config));
    layout.emplace();
    RSC_ASSIGN_OR_RETURN(
        create.shard_count,
        layouts_.AddGroup(req.stream, req.group, req.shard_count, req.config, &*layout));
  }
  RSC_ASSIGN_OR_RETURN(
      GroupMetadata meta,
      DecideCreate(create, Env{now, tokens_.NewToken(), tokens_.NewToken()}, over));
  if (layout) {
    // RS5: a group created after a reshard reads every unretired generation, oldest first:
    // it takes the layout's shards (ids, keys) before its key is written.
    RSC_RETURN_IF_ERROR(AdoptLayoutInPlace(meta, layout->layout, layout->revision.value()));
  }
  RSC_ASSIGN_OR_RETURN(StoreRevision rev, store_.Create(meta, now));
  if (meta.round) {
    observer_.OnEvents(meta.key,
                       {Event{EventKind::kRoundStarted, "", -1,
                              fmt::format("round {}: created over a lost key", meta.round->id)}});
  }
  CreateShardGroups(meta);
  if (change) *change = RevisionChange{true, std::nullopt, rev.value(), meta.key};
  return MakeGroupView(meta, rev, Liveness{}, now);
}

void GroupService::CreateShardGroups(const GroupMetadata& meta) {
  if (options_.streams == nullptr) return;
  // SPEC D3: the group's consumer group on every shard it reads, from ID 0, keys created:
  // producers send XADD … NOMKSTREAM (a missing key is stale routing), so the keys must
  // exist before the first publish. Best effort: a failure leaves it to the readers (of a
  // stream never resharded) or to the stream tick, which create the same. Not the shards of
  // a generation still PREPARING: its keys come after the seals (SealAndActivate).
  for (const ShardState& sh : meta.shards) {
    if (sh.completed || sh.generation > meta.active_generation) continue;
    Status s = options_.streams->CreateConsumerGroup(sh.stream, meta.key.group);
    if (!s.ok()) {
      spdlog::warn("event=shard_group_create_failed group={} stream={} message=\"{}\"",
                   meta.key.Tag(), sh.stream, s.error().message);
      return;
    }
  }
}

Result<std::vector<GroupKey>> GroupService::ListGroups() { return store_.ListGroups(); }

Result<GroupView> GroupService::DescribeGroup(const GroupKey& key) {
  const TimeMs now = clock_.NowMs();
  auto loaded = store_.Load(key, now);
  if (!loaded.ok()) {
    observer_.OnLoadError(key, loaded.error());
    return loaded.error();
  }
  RSC_ASSIGN_OR_RETURN(Liveness live, store_.LoadAllLiveness(key));
  GroupView view = MakeGroupView(*loaded->meta, loaded->revision, live, now);
  FillBacklog(view);
  return view;
}

void GroupService::FillBacklog(GroupView& view) {
  if (options_.streams == nullptr || view.shards.empty()) return;
  std::vector<std::string> keys;
  keys.reserve(view.shards.size());
  for (const ShardView& s : view.shards) keys.push_back(s.stream);
  std::vector<Result<ShardBacklog>> backlogs = options_.streams->Backlogs(keys, view.group);
  for (size_t i = 0; i < view.shards.size() && i < backlogs.size(); ++i) {
    // Best effort: a shard Redis cannot tell about now keeps no figures (the view is still
    // the group's; an operator sees the gap rather than a made-up 0).
    if (!backlogs[i].ok() || !backlogs[i]->exists) continue;
    ShardView& s = view.shards[i];
    s.lag = backlogs[i]->lag;
    s.pending = backlogs[i]->pending;
    s.oldest_pending_ms = backlogs[i]->pending > 0 ? backlogs[i]->oldest_idle_ms : 0;
  }
}

Result<GroupView> GroupService::PatchGroup(const GroupKey& key, const PatchGroupRequest& req,
                                           RevisionChange* change) {
  RSC_RETURN_IF_ERROR(CheckPatchRequest(key, req));  // before the revision check: 400
  StoreRevision rev;
  bool revision_mismatch = false;
  auto r = Mutate<GroupView>(
      key, options_.lock_wait,
      [&](const GroupMetadata& m, const Liveness& l, const Env& env, StoreRevision loaded) {
        if (loaded.value() != req.expected_revision) {  // I4
          revision_mismatch = true;
          return Decision<GroupView>{
              std::nullopt,
              {},
              MakeError(ErrorCode::kRevisionConflict,
                        fmt::format("expectedRevision {} but the stored revision is {}",
                                    req.expected_revision, loaded.value())),
              {}};
        }
        return decide_.Patch(m, l, req, env);
      },
      nullptr, &rev);
  if (!r.ok()) return r;
  // The write was checked against expectedRevision (I4); `rev` is what it produced (the
  // same when the patch changed nothing). The view below may already be newer.
  if (change) *change = RevisionChange{true, req.expected_revision, rev.value(), key};
  return DescribeGroup(key);
}

Status GroupService::DeleteGroup(const GroupKey& key, int64_t expected_revision,
                                 RevisionChange* change) {
  std::shared_ptr<SyncPort::Mutex> monitor = MonitorFor(key);
  std::lock_guard<SyncPort::Mutex> local(*monitor);
  RSC_RETURN_IF_ERROR(store_.Delete(key, StoreRevision(expected_revision)));
  if (change) *change = RevisionChange{true, expected_revision, std::nullopt, key};
  // After the key is gone (D1). If this fails the layout keeps listing the group, which
  // is harmless until resharding waits on it; a create of the same name reuses the entry.
  if (Status s = layouts_.RemoveGroup(key.stream, key.group); !s.ok()) {
    observer_.OnLoadError(key, s.error());
  }
  return OkStatus();
}

Result<GroupView> GroupService::FenceMember(const GroupKey& key, const MemberId& member,
                                            RevisionChange* change) {
  StoreRevision before;
  StoreRevision after;
  auto r = Mutate<Unit>(
      key, options_.lock_wait,
      [&](const GroupMetadata& m, const Liveness& l, const Env& env, StoreRevision loaded) {
        before = loaded;  // a retry after a CAS conflict overwrites it with its own load
        return decide_.Fence(m, l, member, env);
      },
      nullptr, &after);
  if (!r.ok()) return r.error();
  if (change) *change = RevisionChange{true, before.value(), after.value(), key};
  return DescribeGroup(key);
}

Result<std::string> GroupService::ExportGroup(const GroupKey& key) {
  auto loaded = store_.Load(key, clock_.NowMs());
  if (!loaded.ok()) {
    observer_.OnLoadError(key, loaded.error());
    return loaded.error();
  }
  return EncodeExport(*loaded->meta, loaded->revision);
}

Result<GroupView> GroupService::RestoreGroup(std::string_view export_json, RevisionChange* change) {
  RSC_ASSIGN_OR_RETURN(ExportDoc doc, DecodeExport(export_json));
  const TimeMs now = clock_.NowMs();
  RSC_ASSIGN_OR_RETURN(GroupMetadata meta,
                       DecideRestore(doc.meta, Env{now, tokens_.NewToken(), tokens_.NewToken()}));
  // D3: a restored group is one of its stream's groups like a created one (registered
  // first), and takes the stream's layout as part of its write, as a create does: an export
  // from before a reshard fits if its shards are the stream's history
  // (CheckRestoreFitsLayout), keeps the state of the shards it had, gets the new
  // generations' shards waiting for their parents (RS3) and drops the dropped generations'.
  StoredLayout layout;
  RSC_RETURN_IF_ERROR(layouts_.AddGroup(meta.key.stream, meta.key.group, meta.shard_count,
                                        meta.config, &layout, &meta));
  RSC_RETURN_IF_ERROR(AdoptLayoutInPlace(meta, layout.layout, layout.revision.value()));
  std::shared_ptr<SyncPort::Mutex> monitor = MonitorFor(meta.key);
  std::lock_guard<SyncPort::Mutex> local(*monitor);
  RSC_ASSIGN_OR_RETURN(auto token, store_.Lock(meta.key, options_.lock_ttl, options_.lock_wait));
  if (!token) return MakeError(ErrorCode::kLockTimeout, "group mutex busy; retry the restore");
  RedisLockGuard guard(store_, meta.key, *token);
  RSC_ASSIGN_OR_RETURN(StoreRevision rev, store_.Restore(meta, now));
  // Committed: restore.lua continued one above the stored revision, or started at 1 over no
  // (readable) group. Reported now, before the seeding below can fail.
  if (change) {
    *change = RevisionChange{
        true, rev.value() > 1 ? std::optional<int64_t>(rev.value() - 1) : std::nullopt, rev.value(),
        meta.key};
  }
  // The restore replaced the liveness set; give every restored member a full lease to
  // resync (the restore's correction round keeps everyone from starting new reads until
  // then), instead of expiring them all on the next load.
  LivenessUpdate seed;
  Liveness live;
  for (const Member& mem : meta.members) {
    seed.set.emplace_back(mem.id.str(), now + meta.config.member_lease_ms);
    live.deadline_ms[mem.id.str()] = now + meta.config.member_lease_ms;
  }
  if (!seed.empty()) {
    RSC_ASSIGN_OR_RETURN(CasOutcome cas, store_.CompareAndSet(meta.key, rev, nullptr, seed, now));
    if (!cas.applied) {
      return MakeError(ErrorCode::kLockTimeout,
                       "group changed during the restore; inspect it and retry");
    }
  }
  CreateShardGroups(meta);
  return MakeGroupView(meta, rev, live, now);
}

Result<StreamView> GroupService::DescribeStream(const std::string& stream) {
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, layouts_.Load(stream));
  if (!stored) {
    return MakeError(ErrorCode::kStreamNotFound,
                     fmt::format("stream '{}' has no layout and no groups", stream));
  }
  return StreamView{stored->revision.value(), std::move(stored->layout)};
}

Result<RoutingResponse> GroupService::StreamRouting(const std::string& stream,
                                                    int64_t observed_version,
                                                    const std::string& lineage) {
  // No group mutex and no group write (I3). Only a v1 stream's first layout read writes:
  // its generation 0, once, as any layout read does (LayoutService::Load).
  RSC_RETURN_IF_ERROR(FailIfBehind(stream));  // RS6: never route to a sealed generation
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, layouts_.Load(stream));
  if (!stored) {
    return MakeError(ErrorCode::kStreamNotFound,
                     fmt::format("stream '{}' has no layout and no groups", stream));
  }
  Decision<RoutingResponse> d = DecideStreamRouting(*stored, observed_version, lineage);
  observer_.OnEvents(GroupKey{stream, ""}, d.events);
  return std::move(d.response);
}

Result<StreamView> GroupService::PatchStream(const std::string& stream,
                                             const PatchStreamRequest& req,
                                             RevisionChange* change) {
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, layouts_.Load(stream));
  if (!stored) {
    return MakeError(ErrorCode::kStreamNotFound,
                     fmt::format("stream '{}' has no layout and no groups", stream));
  }
  if (stored->revision.value() != req.expected_layout_revision) {
    return MakeError(ErrorCode::kRevisionConflict,
                     fmt::format("expectedLayoutRevision {} but the layout is at revision {}",
                                 req.expected_layout_revision, stored->revision.value()));
  }
  RSC_ASSIGN_OR_RETURN(std::optional<Layout> next,
                       DecidePatchStream(stored->layout, req, tokens_.NewToken()));
  int64_t after = stored->revision.value();
  if (next) {
    auto cas = store_.CompareAndSetLayout(stream, stored->revision, *next, clock_.NowMs());
    if (!cas.ok()) return cas.error();
    if (!cas->applied) {
      return MakeError(ErrorCode::kRevisionConflict,
                       fmt::format("the layout moved to revision {} meanwhile; re-read it",
                                   cas->revision.value()));
    }
    after = cas->revision.value();
  }
  // Checked against expectedLayoutRevision; before == after when nothing changed.
  if (change) {
    *change = RevisionChange{true, req.expected_layout_revision, after, GroupKey{stream, ""}};
  }
  return DescribeStream(stream);
}

Status GroupService::CheckClientsSupportLayouts(const Layout& l, int64_t* longest_lease_ms) {
  const TimeMs now = clock_.NowMs();
  *longest_lease_ms = std::min(l.routing_lease_ms, kMaxDurationMs);
  for (const std::string& group : l.groups) {
    const GroupKey key{l.stream, group};
    auto loaded = store_.Load(key, now);
    if (!loaded.ok()) {
      if (loaded.error().code == ErrorCode::kGroupNotFound) continue;  // listed, never created
      return loaded.error();
    }
    // Producers given a group route by its routing, with its lease (5.1).
    *longest_lease_ms = std::max(*longest_lease_ms,
                                 std::min(loaded->meta->config.routing_lease_ms, kMaxDurationMs));
    RSC_ASSIGN_OR_RETURN(Liveness live, store_.LoadAllLiveness(key));
    for (const Member& m : loaded->meta->members) {
      auto it = live.deadline_ms.find(m.id.str());
      const bool live_member = it != live.deadline_ms.end() && it->second > now;
      if (live_member && !m.fenced && !m.layout_v2) {
        return MakeError(ErrorCode::kClientsTooOld,
                         fmt::format("member {} of group {} does not implement layout-v2 "
                                     "(SPEC D5): it would hand seal entries to its application "
                                     "and never complete a parent; upgrade it first",
                                     m.id.str(), group));
      }
    }
  }
  return OkStatus();
}

Result<StreamView> GroupService::Reshard(const std::string& stream, int64_t expected_revision,
                                         int32_t shard_count, RevisionChange* change) {
  if (options_.streams == nullptr) {
    return MakeError(ErrorCode::kInvalidRequest, "this coordinator cannot reshard");
  }
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, layouts_.Load(stream));
  if (!stored) {
    return MakeError(ErrorCode::kStreamNotFound,
                     fmt::format("stream '{}' has no layout and no groups", stream));
  }
  if (stored->revision.value() != expected_revision) {
    return MakeError(ErrorCode::kRevisionConflict,
                     fmt::format("expectedLayoutRevision {} but the layout is at revision {}",
                                 expected_revision, stored->revision.value()));
  }
  int64_t longest_lease_ms = 0;
  RSC_RETURN_IF_ERROR(CheckClientsSupportLayouts(stored->layout, &longest_lease_ms));
  // RS6: a layout behind its streams would reuse ids and keys its lost generation wrote.
  RSC_ASSIGN_OR_RETURN(bool rolled, CheckBehind(*stored));
  if (rolled) {
    return MakeError(ErrorCode::kRevisionConflict,
                     fmt::format("stream '{}': the layout was found behind its streams and "
                                 "rolled forward to an interrupted reshard (RS6); re-read it",
                                 stream));
  }
  RSC_RETURN_IF_ERROR(FailIfBehind(stream));
  RSC_ASSIGN_OR_RETURN(SlotPlacement placement, layouts_.Placement());
  RSC_ASSIGN_OR_RETURN(Layout next,
                       DecideReshard(stored->layout, shard_count, placement, tokens_.NewToken()));
  // RS2's routing-lease wait (core/layout.h Generation::prepared_ms): recorded now, so a
  // later PATCH of a lease neither shortens nor lengthens it.
  next.generations.back().prepared_ms = std::max<int64_t>(clock_.NowMs(), 1);
  next.generations.back().routing_wait_ms = longest_lease_ms + kPrepareMarginMs;
  auto cas = store_.CompareAndSetLayout(stream, stored->revision, next, clock_.NowMs());
  if (!cas.ok()) return cas.error();
  if (!cas->applied) {
    return MakeError(ErrorCode::kRevisionConflict,
                     fmt::format("the layout moved to revision {} meanwhile; re-read it",
                                 cas->revision.value()));
  }
  // The reshard's own write; the view answered below comes after a stream tick.
  if (change) {
    *change = RevisionChange{true, expected_revision, cas->revision.value(), GroupKey{stream, ""}};
  }
  observer_.OnEvents(GroupKey{stream, ""},
                     {Event{EventKind::kLayoutAdopted, "", -1,
                            fmt::format("reshard_started: generation {} of {} shards",
                                        next.generations.back().generation, shard_count)}});
  // Moves it on at once where it can (re-seals, a wait already over) rather than at the next
  // tick; a failure here is retried there. The new generation itself waits a routing lease.
  (void)StreamTick(stream);
  return DescribeStream(stream);
}

Status GroupService::PrepareGeneration(const Layout& l) {
  bool preparing = false;
  for (const Generation& g : l.generations) {
    preparing = preparing || g.state == GenerationState::kPreparing;
  }
  if (!preparing) return OkStatus();
  for (const Generation& g : l.generations) {
    if (g.state == GenerationState::kRetired) continue;
    // D3: every group's consumer group exists on every shard of the stream before producers
    // write a new one, so lag is defined and completion (RS3) is judged on a group that
    // exists (at ID 0: nothing written before is skipped; an existing one is kept).
    for (const LayoutShard& s : g.shards) {
      for (const std::string& group : l.groups) {
        RSC_RETURN_IF_ERROR(options_.streams->CreateConsumerGroup(s.stream, group));
      }
    }
  }
  return OkStatus();
}

Result<std::vector<ShardCompletion>> GroupService::Completions(const Layout& l,
                                                               const std::string& group,
                                                               bool* all_complete_oldest) {
  std::vector<ShardCompletion> out;
  *all_complete_oldest = false;
  bool first_sealed = true;
  for (const Generation& g : l.generations) {
    if (g.state != GenerationState::kSealed) continue;
    bool all = true;
    std::vector<std::string> keys;
    keys.reserve(g.shards.size());
    for (const LayoutShard& s : g.shards) keys.push_back(s.stream);
    std::vector<Result<GroupProgress>> progress = options_.streams->Progresses(keys, group);
    for (size_t i = 0; i < g.shards.size(); ++i) {
      if (!progress[i].ok()) return progress[i].error();
      out.push_back({g.shards[i].id, progress[i]->Complete()});
      all = all && progress[i]->Complete();
    }
    if (first_sealed) *all_complete_oldest = all;
    first_sealed = false;
  }
  return out;
}

Status GroupService::SealAndActivate(const StoredLayout& stored) {
  const Layout& l = stored.layout;
  const Generation* prepared = nullptr;
  for (const Generation& g : l.generations) {
    if (g.state == GenerationState::kPreparing) prepared = &g;
  }
  // `preparing`: the reshard moves on in this pass (its routing-lease wait is over). Until
  // then producers go on writing the ACTIVE generation; SEALED ones are still re-sealed.
  bool preparing = prepared != nullptr;
  if (prepared != nullptr) {
    switch (DecideRoutingWait(l, *prepared, clock_.NowMs())) {
      case RoutingWait::kReady:
        break;
      case RoutingWait::kWaiting:
        preparing = false;
        break;
      case RoutingWait::kRestamp: {
        preparing = false;
        spdlog::warn(
            "event=reshard_wait_restamped stream={} generation={} prepared_at_ms={} now_ms={} "
            "message=\"stamped by a clock ahead of this coordinator's (or this clock went "
            "back): the routing-lease wait starts again from now\"",
            l.stream, prepared->generation, prepared->prepared_ms, clock_.NowMs());
        Layout next = DecideRestampPrepared(l, clock_.NowMs(), tokens_.NewToken());
        auto cas = store_.CompareAndSetLayout(l.stream, stored.revision, next, clock_.NowMs());
        if (!cas.ok()) return cas.error();
        return OkStatus();  // applied or not, the next pass re-reads it
      }
    }
  }
  if (preparing) {
    // RS2: nothing is sealed before the PREPARING layout survives a failover of its master
    // (a replica acknowledged it). Otherwise a failover could bring back the layout without
    // the new generation while the seals, on other masters of a cluster, stay: the ACTIVE
    // generation sealed, no generation to move to, every producer refused.
    RSC_ASSIGN_OR_RETURN(bool confirmed,
                         store_.ConfirmLayout(l.stream, stored.revision, clock_.NowMs()));
    if (!confirmed) return OkStatus();  // the layout moved on: the next pass re-reads it
  }
  for (const Generation& g : l.generations) {
    // RS2: the ACTIVE generation is sealed before the next one is activated; SEALED ones are
    // sealed again every pass (a failover can lose a seal; writing it is idempotent).
    const bool seal =
        g.state == GenerationState::kSealed || (g.state == GenerationState::kActive && preparing);
    if (!seal) continue;
    // RS6: each seal names the generation after it, so a layout rolled back past this
    // reshard can be written forward from any one of them.
    std::string successor;
    for (const Generation& after : l.generations) {
      if (after.generation == g.generation + 1) {
        successor = EncodeSuccessor(l.stream, after).value_or("");
      }
    }
    for (const LayoutShard& s : g.shards) {
      RSC_ASSIGN_OR_RETURN(bool wrote, options_.streams->Seal(s.stream, g.generation, successor));
      if (wrote && g.state == GenerationState::kSealed) {
        observer_.OnEvents(GroupKey{l.stream, ""},
                           {Event{EventKind::kParentResealed, "", s.id,
                                  "seal missing (lost to a failover?): sealed again"}});
      }
    }
  }
  if (!preparing) return OkStatus();
  // The new generation's keys are created only now, every seal written: a Redis rolled
  // back to before this point (a snapshot restore, a failover) has none of them, so a
  // producer that saw the generation ACTIVE and still routes to it is refused (`XADD …
  // NOMKSTREAM`, D3) and refreshes, rather than writing keys read after the entries it
  // then writes to the unsealed parents (per-key order, RS4). Past this point every seal
  // is there, and parents refuse it.
  RSC_RETURN_IF_ERROR(PrepareGeneration(l));
  std::optional<Layout> next = DecideActivate(l, tokens_.NewToken());
  if (!next) return OkStatus();
  auto cas = store_.CompareAndSetLayout(l.stream, stored.revision, *next, clock_.NowMs());
  if (!cas.ok()) return cas.error();
  return OkStatus();  // a conflict: another coordinator moved it; the next pass re-reads
}

Result<bool> GroupService::LayoutUnchanged(const StoredLayout& stored, const GroupMetadata& m) {
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> again, store_.LoadLayout(stored.layout.stream));
  if (again && again->revision == stored.revision && again->layout == stored.layout) return true;
  observer_.OnEvents(
      m.key, {Event{EventKind::kLayoutAdoptionDeferred, "", -1,
                    fmt::format("the layout (revision {}) read before group {} was loaded is not "
                                "the one Redis holds since: nothing written from it, the next "
                                "pass reads it again",
                                stored.revision.value(), m.key.Tag())}});
  return false;
}

Result<bool> GroupService::CheckBehind(const StoredLayout& stored) {
  const Layout& l = stored.layout;
  const Generation* active = l.Active();
  auto clear = [&] {
    std::lock_guard<std::mutex> lock(behind_mu_);
    behind_.erase(l.stream);
  };
  if (options_.streams == nullptr || active == nullptr || active != &l.generations.back()) {
    clear();  // a PREPARING generation: the reshard itself is under way, nothing is behind
    return false;
  }
  std::vector<std::string> keys;
  keys.reserve(active->shards.size() + 1);
  for (const LayoutShard& s : active->shards) keys.push_back(s.stream);
  const int64_t next_id = int64_t{active->shards.back().id} + 1;
  if (next_id <= INT32_MAX) {
    RSC_ASSIGN_OR_RETURN(SlotPlacement placement, layouts_.Placement());
    keys.push_back(ChooseShardKeys(l.stream, {static_cast<int32_t>(next_id)}, placement).front());
  }
  std::vector<Result<StreamTop>> read = options_.streams->Tops(keys);
  std::vector<StreamTop> tops;
  tops.reserve(read.size());
  for (Result<StreamTop>& t : read) {
    if (!t.ok()) return t.error();
    tops.push_back(std::move(*t));
  }
  StreamTop above;
  if (tops.size() > active->shards.size()) {
    above = tops.back();
    tops.pop_back();
  }
  BehindDecision d = DecideLayoutBehind(l, tops, above, tokens_.NewToken());
  if (d.roll_forward) {
    auto cas =
        store_.CompareAndSetLayout(l.stream, stored.revision, *d.roll_forward, clock_.NowMs());
    if (!cas.ok()) return cas.error();
    if (!cas->applied) return false;  // moved on meanwhile: the next pass looks again
    clear();
    observer_.OnEvents(
        GroupKey{l.stream, ""},
        {Event{EventKind::kLayoutRolledForward, "", -1,
               fmt::format("the ACTIVE generation {} was found sealed: generation {} written "
                           "back from its seals (PREPARING; sealed and activated next)",
                           active->generation, d.roll_forward->generations.back().generation)}});
    return true;
  }
  if (!d.behind) {
    clear();
    RSC_RETURN_IF_ERROR(RecreateMissingKeys(stored, *active, tops));
    return false;
  }
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(behind_mu_);
    std::string& reason = behind_[l.stream];
    changed = reason != *d.behind;
    reason = *d.behind;
  }
  if (changed) {  // logged and counted once per finding, not every tick
    observer_.OnEvents(GroupKey{l.stream, ""},
                       {Event{EventKind::kLayoutBehind, "", -1, *d.behind}});
  }
  return false;
}

Status GroupService::RecreateMissingKeys(const StoredLayout& stored, const Generation& active,
                                         const std::vector<StreamTop>& tops) {
  // Readers of a resharded stream never create keys (C9 (f)); producers send NOMKSTREAM.
  // So a key of the ACTIVE generation that is gone (an operator's DEL, a best-effort group
  // creation that failed) is created here, with every group's consumer group. The keys were
  // created before the generation was activated, and on one server a rollback that loses
  // them loses the activation too — but the layout was read before the tops: a rollback
  // between the two reads (a snapshot restore to where this generation was still
  // PREPARING) shows its keys missing to a layout that says ACTIVE. Creating them then
  // would let a producer still routed there write a child while its parents are open
  // (RS4; found by the simulator, seed 15524999770511949606). So the layout is read again
  // after the tops, and only a layout still the same is acted on.
  const Layout& l = stored.layout;
  if ((l.generations.size() < 2 && active.generation == 0) || l.groups.empty()) return OkStatus();
  bool missing = false;
  for (size_t i = 0; i < tops.size() && i < active.shards.size(); ++i) {
    missing = missing || !tops[i].exists;
  }
  if (!missing) return OkStatus();
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> again, store_.LoadLayout(l.stream));
  if (!again || again->revision != stored.revision || again->layout != l) {
    observer_.OnEvents(
        GroupKey{l.stream, ""},
        {Event{EventKind::kShardKeyRecreateDeferred, "", -1,
               fmt::format("a key of the ACTIVE generation {} was missing, but the layout "
                           "(revision {}) moved on while it was read: nothing created, the "
                           "next pass reads it again",
                           active.generation, stored.revision.value())}});
    return OkStatus();
  }
  for (size_t i = 0; i < tops.size() && i < active.shards.size(); ++i) {
    if (tops[i].exists) continue;
    const LayoutShard& s = active.shards[i];
    for (const std::string& group : l.groups) {
      RSC_RETURN_IF_ERROR(options_.streams->CreateConsumerGroup(s.stream, group));
    }
    observer_.OnEvents(GroupKey{l.stream, ""},
                       {Event{EventKind::kShardKeyRecreated, "", s.id,
                              fmt::format("key '{}' of the ACTIVE generation {} was missing: "
                                          "created with its groups (runbook 7a)",
                                          s.stream, active.generation)}});
  }
  return OkStatus();
}

Status GroupService::FailIfBehind(const std::string& stream) {
  std::lock_guard<std::mutex> lock(behind_mu_);
  auto it = behind_.find(stream);
  if (it == behind_.end()) return OkStatus();
  return MakeError(ErrorCode::kMetadataUnreadable, it->second);
}

Result<bool> GroupService::DeleteRetired(const StoredLayout& stored) {
  const Layout& l = stored.layout;
  const int64_t retention = std::max(options_.retired_retention_ms, l.routing_lease_ms);
  RetiredWork work = DecideRetiredWork(l, clock_.NowMs(), retention, tokens_.NewToken());
  if (work.stamp) {
    auto cas = store_.CompareAndSetLayout(l.stream, stored.revision, *work.stamp, clock_.NowMs());
    if (!cas.ok()) return cas.error();
    return true;
  }
  if (!work.drop) return false;
  for (const LayoutShard& s : work.drop->shards) {
    RSC_ASSIGN_OR_RETURN(bool emptied,
                         options_.streams->TrimSealed(s.stream, work.drop->generation));
    if (!emptied) {
      // Written after its seal was lost (a rollback the layout did not see): only an operator
      // can tell what those entries are. The generation stays in the layout until then.
      {
        std::lock_guard<std::mutex> lock(kept_mu_);
        if (!kept_reported_.insert(s.stream).second) return false;
      }
      observer_.OnEvents(GroupKey{l.stream, ""},
                         {Event{EventKind::kRetiredKeyKept, "", s.id,
                                fmt::format("retired key '{}' does not end with its seal: kept "
                                            "(runbook 7a)",
                                            s.stream)}});
      return false;
    }
  }
  std::optional<Layout> next = DecideDropRetired(l, work.drop->generation, tokens_.NewToken());
  if (!next) return false;
  auto cas = store_.CompareAndSetLayout(l.stream, stored.revision, *next, clock_.NowMs());
  if (!cas.ok()) return cas.error();
  if (cas->applied) {
    observer_.OnEvents(GroupKey{l.stream, ""},
                       {Event{EventKind::kGenerationDeleted, "", -1,
                              fmt::format("generation {}: {} keys emptied (tombstones kept), "
                                          "retired {} ms before",
                                          work.drop->generation, work.drop->shards.size(),
                                          clock_.NowMs() - work.drop->retired_ms)}});
  }
  return true;
}

Status GroupService::StreamTick(const std::string& stream) {
  RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, store_.LoadLayout(stream));
  if (!stored) return OkStatus();
  if (stored->layout.generations.size() > 1 && options_.streams != nullptr &&
      stored->layout.generations.front().state == GenerationState::kRetired) {
    // A failure here must not hold the rest of the pass back (prepare, seal, activate,
    // adopt, retire): logged, and tried again next pass.
    Result<bool> wrote = DeleteRetired(*stored);
    if (!wrote.ok()) {
      spdlog::warn("event=retired_cleanup_failed stream={} message=\"{}\"", stream,
                   wrote.error().message);
    } else if (*wrote) {
      RSC_ASSIGN_OR_RETURN(stored, store_.LoadLayout(stream));
      if (!stored) return OkStatus();
    }
  }
  if (options_.streams != nullptr) {
    // A failed check (Redis down, or a coordinator user without `xinfo|stream` after an
    // upgrade) must not hold the reshard back: logged, and the pass goes on as before RS6.
    Result<bool> rolled = CheckBehind(*stored);
    if (!rolled.ok()) {
      spdlog::warn("event=layout_check_failed stream={} message=\"{}\"", stream,
                   rolled.error().message);
    } else if (*rolled) {
      RSC_ASSIGN_OR_RETURN(stored, store_.LoadLayout(stream));
      if (!stored) return OkStatus();
    }
  }
  if (stored->layout.generations.size() > 1 && options_.streams != nullptr) {
    RSC_RETURN_IF_ERROR(SealAndActivate(*stored));
    // Re-read: an activation just written is adopted by the groups in this same pass, so
    // routing moves to the new generation at once.
    RSC_ASSIGN_OR_RETURN(stored, store_.LoadLayout(stream));
    if (!stored) return OkStatus();
  }
  const Layout& l = stored->layout;
  bool any_sealed = false;
  for (const Generation& g : l.generations) {
    any_sealed = any_sealed || g.state == GenerationState::kSealed;
  }
  if (any_sealed && options_.streams == nullptr) return OkStatus();
  bool oldest_complete_everywhere = true;
  int64_t incomplete = 0;
  for (const std::string& group : l.groups) {
    const GroupKey key{stream, group};
    std::vector<ShardCompletion> done;
    bool complete = false;
    if (any_sealed) {
      RSC_ASSIGN_OR_RETURN(done, Completions(l, group, &complete));
    }
    oldest_complete_everywhere = oldest_complete_everywhere && complete;
    auto loaded = store_.Load(key, clock_.NowMs());
    if (!loaded.ok()) {
      if (loaded.error().code == ErrorCode::kGroupNotFound) continue;
      return loaded.error();
    }
    for (const ShardCompletion& c : done) incomplete += c.complete ? 0 : 1;
    if (loaded->meta->layout_revision == stored->revision.value() && done.empty()) continue;
    // The completions applied are observed again under the group's mutex: the ones above
    // may be older than a completion a member's hint recorded meanwhile
    // (CheckReportedCompletions), and applying them would reopen that parent for nothing
    // (its children drained). Under the mutex nothing is recorded between the observation
    // and the write, so an incomplete shard found there really regressed.
    Status observed = OkStatus();
    auto r = Mutate<Unit>(
        key, std::chrono::milliseconds(0),
        [&](const GroupMetadata& m, const Liveness& live, const Env& env, StoreRevision) {
          std::vector<ShardCompletion> now_done;
          if (any_sealed) {
            bool unused = false;
            Result<std::vector<ShardCompletion>> c = Completions(l, group, &unused);
            if (!c.ok()) {
              observed = c.error();
              return Decision<Unit>{std::nullopt, {}, Unit{}, {}};  // writes nothing
            }
            now_done = std::move(*c);
          }
          Result<bool> same = LayoutUnchanged(*stored, m);
          if (!same.ok() || !*same) {
            if (!same.ok()) observed = same.error();
            return Decision<Unit>{std::nullopt, {}, Unit{}, {}};  // writes nothing
          }
          return DecideLayoutTick(m, live, l, stored->revision.value(), now_done, env);
        });
    if (!observed.ok()) return observed;
    if (!r.ok() && r.error().code != ErrorCode::kLockTimeout) return r.error();
  }
  observer_.OnStreamState(stream, incomplete);
  if (!any_sealed || !oldest_complete_everywhere) return OkStatus();
  // RS5: the oldest sealed generation, read to its end by every group, retires.
  for (const Generation& g : l.generations) {
    if (g.state != GenerationState::kSealed) continue;
    if (std::optional<Layout> next =
            DecideRetire(l, g.generation, clock_.NowMs(), tokens_.NewToken())) {
      auto cas = store_.CompareAndSetLayout(stream, stored->revision, *next, clock_.NowMs());
      if (!cas.ok()) return cas.error();
    }
    break;
  }
  return OkStatus();
}

Status GroupService::Ready() { return ready_probe_ ? ready_probe_() : OkStatus(); }

Result<bool> GroupService::Tick(const GroupKey& key) {
  bool wrote = false;
  auto r = Mutate<Unit>(
      key, std::chrono::milliseconds(0),
      [&](const GroupMetadata& m, const Liveness& l, const Env& env, StoreRevision) {
        return decide_.Tick(m, l, env);
      },
      &wrote);
  if (!r.ok()) return r.error();
  observer_.OnTick(key, wrote);
  // Once per tick, the full liveness map for the member-age and revoking gauges.
  const TimeMs now = clock_.NowMs();
  auto loaded = store_.Load(key, now);
  auto live = store_.LoadAllLiveness(key);
  if (loaded.ok() && live.ok()) {
    observer_.OnGroupState(key, *loaded->meta, *live, now);
    if (options_.streams != nullptr) {
      // O1: lag and pending per shard for the gauges, every tick (pipelined per node).
      GroupView view = MakeGroupView(*loaded->meta, loaded->revision, *live, now);
      FillBacklog(view);
      observer_.OnGroupBacklog(key, view.shards);
    }
  }
  return wrote;
}

}  // namespace rsc
