#include "sim/sim_coordinator.h"

#include <fmt/format.h>
#include <xxhash.h>

#include "core/protocol_json.h"
#include "server/tick_loop.h"

namespace rsc::sim {

namespace {

std::string Digest(const std::string& s) {
  return fmt::format("{:016x}", XXH64(s.data(), s.size(), 0));
}

bool DecidedError(ErrorCode code) {
  // Errors that say something about the stored state (as opposed to "could not decide").
  return code != ErrorCode::kRedisUnavailable && code != ErrorCode::kLockTimeout &&
         code != ErrorCode::kUnknownResult && code != ErrorCode::kCoordinatorTerminating &&
         code != ErrorCode::kInternal;
}

}  // namespace

// ── the MetadataStore the real GroupService runs on ─────────────────────────────────
// It is also the coordinator's StreamAdmin (resharding): the same calls over the same
// simulated connection.
class SimCoordinator::Store : public MetadataStore, public StreamAdmin {
 public:
  explicit Store(SimCoordinator& c) : c_(c) {}

  // What the last decision of the current request was based on (kDecision). One per
  // worker: each worker's calls are those of the request it runs.
  struct Basis {
    bool valid = false;
    int64_t stored_version = -1;  // after its write, if it wrote (M10)
    int64_t revision = -1;
    // The aggregate the decision started from (the load, or the steady path's cached one):
    // in a batch, an answer decided before any decision of the batch wrote derives from it.
    int64_t loaded_version = -1;
    int64_t loaded_revision = -1;
    static Basis Loaded(int64_t version, int64_t revision) {
      return Basis{true, version, revision, version, revision};
    }
  };
  void ResetBasis() { mine() = Basis{}; }
  const Basis& basis() { return mine(); }
  // The mutex tokens it believes it holds (one per group whose section runs).
  const std::vector<std::string>& holding() const { return holding_; }
  void ForgetHolding() { holding_.clear(); }
  // The member an operator fence in progress on this worker is about ("" otherwise).
  void set_fencing(std::string member) { fencing() = std::move(member); }

  Result<StoredGroup> Load(const GroupKey& key, TimeMs now_ms) override {
    auto r = Call<StoredGroup>([&] { return redis().Load(key, now_ms); }, true);
    if (r.ok()) {
      See(key, r->stamp, r->meta);
      mine() = Basis::Loaded(r->meta->version.value(), r->revision.value());
    } else {
      mine().valid = false;
    }
    return r;
  }

  Result<CasOutcome> CompareAndSet(const GroupKey& key, StoreRevision expected,
                                   const GroupMetadata* next, const LivenessUpdate& liveness,
                                   TimeMs now_ms) override {
    World& w = world();
    if (CrashedBeforeWrite(0.01, "before its CAS")) {
      w.probes().Hit("coord_crashed_before_cas");
      return Dead();
    }
    StallBeforeWrite();
    const bool lose_reply =
        !c_.crashed_ && w.buggify().Fire("coord.cas_unknown_result", 0.02, w.rng());
    bool executed = false;
    auto r = Call<CasOutcome>(
        [&] {
          executed = true;
          auto cas = redis().CompareAndSet(c_.name_, key, expected, next, liveness, now_ms);
          if (cas.ok() && cas->applied && next != nullptr && !fencing().empty()) {
            // The operator's fence is committed now: say so before anyone acts on it (S2).
            w.Fault("fence", "operator fence committed by " + c_.name_, fencing());
          }
          return cas;
        },
        true, lose_reply);
    if (lose_reply && executed) w.probes().Hit("cas_unknown_result");
    if (r.ok() && !r->applied && next != nullptr && w.mutant().AnswersBeforeCas()) {
      // MUTANT r32_answer_before_cas (sim/mutants.h): the conflict is ignored and the
      // decision answered as if it had been written.
      r = CasOutcome{true, StoreRevision(expected.value() + 1)};
    }
    Basis& basis = mine();
    if (!r.ok() || !r->applied) {
      basis.valid = false;
      return r;
    }
    basis.revision = r->revision.value();
    if (next != nullptr) {
      basis.stored_version = next->version.value();  // M10: after the write
      See(key, r->stamp, std::make_shared<const GroupMetadata>(*next));
    }
    if (w.buggify().Fire("coord.crash_after_cas", 0.01, w.rng())) {
      w.probes().Hit("coord_crashed_after_cas");
      c_.Crash("after its CAS, before answering");
      return Dead();
    }
    return r;
  }

  // The steady heartbeat's write (store.h), a CAS in effect: the CAS's faults — a crash
  // before it, a pause between the decision and the write, a lost reply.
  Result<bool> RenewIfSteady(const GroupKey& key, const AggregateStamp& stamp, size_t members,
                             const std::vector<std::pair<std::string, TimeMs>>& set,
                             TimeMs now_ms) override {
    World& w = world();
    if (CrashedBeforeWrite(0.005, "before its steady renewal")) return Dead();
    if (StallBeforeWrite()) w.probes().Hit("steady_renewal_after_stall");
    const bool lose_reply =
        !c_.crashed_ && w.buggify().Fire("coord.cas_unknown_result", 0.01, w.rng());
    auto r = Call<bool>([&] { return redis().RenewIfSteady(key, stamp, members, set, now_ms); },
                        true, lose_reply);
    if (r.ok()) w.probes().Hit(*r ? "steady_renewal" : "steady_renewal_refused");
    if (r.ok() && !*r && w.mutant().RenewsUnchecked()) r = true;  // MUTANT (sim/mutants.h)
    // The answers derive from the aggregate the stamp names: the one this coordinator last
    // loaded or wrote (the service's cache is fed by the same calls).
    std::shared_ptr<const GroupMetadata> meta = r.ok() && *r ? Seen(key, stamp) : nullptr;
    if (meta) {
      mine() = Basis::Loaded(meta->version.value(), stamp.revision.value());
    } else {
      mine().valid = false;
    }
    return r;
  }

  Result<StoreRevision> Create(const GroupMetadata& meta, TimeMs now_ms) override {
    return Call<StoreRevision>([&] { return redis().Create(c_.name_, meta, now_ms); }, true);
  }
  Result<StoreRevision> Restore(const GroupMetadata& meta, TimeMs now_ms) override {
    return Call<StoreRevision>([&] { return redis().Restore(c_.name_, meta, now_ms); }, true);
  }
  Status Delete(const GroupKey& key, StoreRevision expected) override {
    return Call<Unit>([&] { return redis().Delete(key, expected); }, true);
  }
  Result<std::vector<GroupKey>> ListGroups() override {
    return Call<std::vector<GroupKey>>([&] { return redis().ListGroups(); }, false);
  }
  Result<Liveness> LoadAllLiveness(const GroupKey& key) override {
    return Call<Liveness>([&] { return redis().LoadAllLiveness(key); }, false);
  }
  Result<std::optional<StoredLayout>> LoadLayout(const std::string& stream) override {
    return Call<std::optional<StoredLayout>>([&] { return redis().LoadLayout(stream); }, false);
  }
  Result<CasOutcome> CompareAndSetLayout(const std::string& stream, StoreRevision expected,
                                         const Layout& next, TimeMs now_ms) override {
    return Call<CasOutcome>(
        [&] { return redis().CompareAndSetLayout(stream, expected, next, now_ms); }, true);
  }
  // RS2's barrier as RedisStore runs it: a write while the layout is at `revision`, then
  // WAIT for the replica (the simulated Redis always has one).
  Result<bool> ConfirmLayout(const std::string& stream, StoreRevision revision, TimeMs) override {
    Written w;
    auto r = Call<bool>(
        [&] {
          auto l = redis().LoadLayout(stream);
          if (!l.ok()) return Result<bool>(l.error());
          w = Written::Now(redis(), world());
          return Result<bool>(l->has_value() && (*l)->revision == revision);
        },
        false);  // EVAL with the body in production: never NOSCRIPT
    if (!r.ok() || !*r) return r;
    RSC_RETURN_IF_ERROR(AwaitReplica(
        w, fmt::format("layout of stream '{}' (revision {})", stream, revision.value())));
    return true;
  }

  // ── StreamAdmin ──
  Status CreateConsumerGroup(const std::string& key, const std::string& group) override {
    return Call<Unit>([&] { return redis().CreateConsumerGroup(key, group); }, false);
  }
  // As RedisStreamAdmin::Seal: a written seal is acknowledged by the replica (WAIT) before
  // it counts (RS2); a refused one (already sealed) is answered whatever WAIT says.
  Result<bool> Seal(const std::string& key, int32_t generation,
                    const std::string& successor) override {
    Written w;
    auto r = Call<bool>(
        [&] {
          auto sealed = redis().Seal(key, generation, successor);
          w = Written::Now(redis(), world());
          return sealed;
        },
        true);
    if (!r.ok() || !*r) return r;
    RSC_RETURN_IF_ERROR(AwaitReplica(w, fmt::format("seal of {}", key)));
    return true;
  }
  // One round trip for the batch (production pipelines them per node).
  std::vector<Result<StreamTop>> Tops(const std::vector<std::string>& keys) override {
    auto r = Call<std::vector<StreamTop>>([&] { return redis().Tops(keys); }, false);
    std::vector<Result<StreamTop>> out;
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (r.ok()) {
        out.push_back((*r)[i]);
      } else {
        out.push_back(r.error());
      }
    }
    return out;
  }
  Result<GroupProgress> Progress(const std::string& key, const std::string& group) override {
    return Call<GroupProgress>([&] { return redis().Progress(key, group); }, false);
  }
  Result<bool> TrimSealed(const std::string& key, int32_t) override {
    return Call<bool>([&] { return redis().TrimSealed(key); }, true);
  }
  // D2 on the simulated cluster: its masters and the slots each serves, read like any other
  // call (CLUSTER SLOTS), so a generation's keys put each master's shards in one slot
  // (core/shard_keys.h) as in production. One server: none, without a call (the production
  // executor knows its mode).
  Result<SlotPlacement> Placement() override {
    SimCluster* cluster = c_.ctx_.cluster;
    if (cluster == nullptr) return SlotPlacement{};
    return Call<SlotPlacement>([&] { return Result<SlotPlacement>(cluster->Placement()); }, false);
  }

  // SET NX PX, polled with a short jittered backoff until `wait` (like RedisStore::Lock).
  Result<std::optional<std::string>> Lock(const GroupKey& key, std::chrono::milliseconds ttl,
                                          std::chrono::milliseconds wait) override {
    World& w = world();
    const TimeMs start = w.now();
    TimeMs backoff = 1;
    for (;;) {
      auto r = Call<std::optional<std::string>>([&] { return redis().TryLock(c_.name_, key, ttl); },
                                                false);
      if (!r.ok()) return r;
      if (r->has_value()) {
        holding_.push_back(**r);
        HistEvent e;
        e.kind = HistKind::kMutexEnter;
        e.proc = c_.name_;
        c_.Emit(std::move(e));
        if (w.buggify().Fire("coord.crash_after_lock", 0.005, w.rng())) {
          c_.Crash("holding the mutex");
          return Dead();
        }
        return r;
      }
      const TimeMs waited = w.now() - start;
      if (wait.count() == 0 || waited >= wait.count()) return r;
      c_.Sleep(std::min<TimeMs>(backoff + w.rng().Uniform(0, backoff), wait.count() - waited));
      backoff = std::min<TimeMs>(backoff * 2, 50);
      if (c_.crashed_) return Dead();
    }
  }

  Status Unlock(const GroupKey& key, const std::string& token) override {
    if (c_.crashed_) return Dead();  // the dead do not unlock: the mutex waits for its TTL
    if (auto it = std::find(holding_.begin(), holding_.end(), token); it != holding_.end()) {
      holding_.erase(it);
      HistEvent e;
      e.kind = HistKind::kMutexExit;
      e.proc = c_.name_;
      e.detail = "unlock";
      c_.Emit(std::move(e));
    }
    return Call<Unit>([&] { return redis().Unlock(key, token); }, true);
  }

 private:
  World& world() { return *c_.ctx_.world; }
  SimRedis& redis() { return *c_.ctx_.redis; }
  Basis& mine() {
    const size_t i = c_.Me().index;
    if (bases_.size() <= i) bases_.resize(i + 1);
    return bases_[i];
  }
  std::string& fencing() {
    const size_t i = c_.Me().index;
    if (fencing_.size() <= i) fencing_.resize(i + 1);
    return fencing_[i];
  }
  static Error Dead() { return MakeError(ErrorCode::kRedisUnavailable, "the process is dead"); }

  // One request/reply to Redis. `scripted`: an EVALSHA (NOSCRIPT after a flush costs a
  // reload round trip). `lose_reply`: the call executes but its reply never comes back.
  template <class T, class Op>
  Result<T> Call(Op&& op, bool scripted, bool lose_reply = false) {
    World& w = world();
    Network& net = *c_.ctx_.net;
    auto down = [](const std::string& why) {
      return Result<T>(MakeError(ErrorCode::kRedisUnavailable, why));
    };
    if (c_.crashed_) return Dead();
    if (net.Cut(c_.node_, "redis") || !redis().up()) {
      c_.Sleep(w.rng().Uniform(1, 300));  // refused, or a connect timeout
      return down("cannot connect to redis (simulated partition or restart)");
    }
    const uint64_t epoch = redis().epoch();
    c_.Sleep(net.RedisLatency());
    if (w.buggify().Fire("coord.redis_slow", 0.01, w.rng())) c_.Sleep(w.rng().Uniform(200, 3000));
    if (c_.crashed_) return Dead();
    if (redis().epoch() != epoch || !redis().up()) return down("connection reset by redis");
    if (scripted && redis().TakeScriptReload()) {
      w.probes().Hit("noscript_reload");
      c_.Sleep(net.RedisLatency() + net.RedisLatency());  // NOSCRIPT, SCRIPT LOAD, retry
      if (c_.crashed_) return Dead();
      if (w.buggify().Fire("redis.noscript_reload_fails", 0.5, w.rng())) {
        redis().FlushScripts();  // the SCRIPT LOAD never arrived
        return down("connection lost while reloading a script after NOSCRIPT");
      }
      if (redis().epoch() != epoch || !redis().up()) return down("connection reset by redis");
    }
    Result<T> r = op();
    if (lose_reply) {
      c_.Sleep(c_.ctx_.redis_timeout_ms);
      return Result<T>(MakeError(ErrorCode::kUnknownResult, "no reply from redis in time"));
    }
    c_.Sleep(net.RedisLatency());
    if (c_.crashed_) return Dead();
    return r;
  }

  // Where a write landed: its replication offset, the connection's epoch, the time.
  struct Written {
    uint64_t offset = 0;
    uint64_t epoch = 0;
    TimeMs at = 0;
    static Written Now(SimRedis& r, World& w) { return {r.write_offset(), r.epoch(), w.now()}; }
  };
  // `WAIT 1 <kReplicaWaitMs>` pipelined right after the write `w` (executor.cc
  // RunAcknowledged): the reply comes when the replica has applied the write, or at the
  // timeout. Not acknowledged, or the connection reset meanwhile: REDIS_UNAVAILABLE, as
  // production answers.
  Status AwaitReplica(const Written& w, const std::string& what) {
    World& wd = world();
    if (redis().epoch() != w.epoch) {
      return MakeError(ErrorCode::kRedisUnavailable, "connection reset by redis (WAIT)");
    }
    const TimeMs acked_at = redis().AcknowledgedAt(w.offset);
    const TimeMs reply_at = std::min(acked_at, w.at + kReplicaWaitMs);
    if (reply_at > wd.now()) {
      c_.Sleep(reply_at - wd.now() + c_.ctx_.net->RedisLatency());
      if (c_.crashed_) return Dead();
      if (redis().epoch() != w.epoch) {
        return MakeError(ErrorCode::kRedisUnavailable, "connection reset by redis (WAIT)");
      }
    }
    if (acked_at > w.at + kReplicaWaitMs) {
      wd.probes().Hit("replica_wait_timed_out");
      return MakeError(
          ErrorCode::kRedisUnavailable,
          fmt::format("{}: the replica did not acknowledge it within {} ms (WAIT, RS2)", what,
                      kReplicaWaitMs));
    }
    return OkStatus();
  }
  // Production's default for both waits (RedisStoreOptions::replica_wait, the stream
  // admin's seal_wait).
  static constexpr TimeMs kReplicaWaitMs = 1000;

  // BUGGIFY coord.crash_before_cas: the process dies right before a metadata write.
  bool CrashedBeforeWrite(double p, const char* when) {
    World& w = world();
    if (c_.crashed_ || !w.buggify().Fire("coord.crash_before_cas", p, w.rng())) return false;
    c_.Crash(when);
    return true;
  }
  // A pause armed by the chaos driver, taken between a decision and its write (the classic
  // GC pause): the others may write meanwhile. True when it paused.
  bool StallBeforeWrite() {
    if (c_.stall_ms_ <= 0) return false;
    const TimeMs stall = c_.stall_ms_;
    c_.stall_ms_ = 0;
    c_.Sleep(stall);
    return true;
  }

  static bool SameAggregate(const AggregateStamp& a, const AggregateStamp& b) {
    return a.revision == b.revision && a.write_token == b.write_token &&
           a.aggregate_len == b.aggregate_len;
  }
  // The aggregates of a group this coordinator loaded or wrote lately, by stamp: with several
  // workers, replies come back in another order than Redis served them (a slow load of an
  // older aggregate may return after a newer write), so "the last seen" is not the one the
  // service cached; the stamp names it.
  static constexpr size_t kSeenKept = 16;
  void See(const GroupKey& key, const AggregateStamp& stamp,
           std::shared_ptr<const GroupMetadata> meta) {
    auto& kept = seen_[key.Tag()];
    // Distinct aggregates only: loads of an unchanged aggregate do not push older ones out.
    std::erase_if(kept, [&](const auto& e) { return SameAggregate(e.first, stamp); });
    kept.emplace_back(stamp, std::move(meta));
    if (kept.size() > kSeenKept) kept.pop_front();
  }
  std::shared_ptr<const GroupMetadata> Seen(const GroupKey& key, const AggregateStamp& stamp) {
    auto it = seen_.find(key.Tag());
    if (it == seen_.end()) return nullptr;
    for (auto s = it->second.rbegin(); s != it->second.rend(); ++s) {
      if (!SameAggregate(s->first, stamp)) continue;
      if (s != it->second.rbegin()) world().probes().Hit("steady_basis_seen_earlier");
      return s->second;
    }
    return nullptr;
  }

  SimCoordinator& c_;
  std::vector<Basis> bases_;  // by worker
  // By group: the aggregates this coordinator loaded or wrote lately, with their stamps.
  std::map<std::string, std::deque<std::pair<AggregateStamp, std::shared_ptr<const GroupMetadata>>>>
      seen_;
  std::vector<std::string> holding_;  // the mutex tokens it believes it holds
  std::vector<std::string> fencing_;  // by worker
};

// ── what each heartbeat's decision saw ────────────────────────────────────────────
// The facts a kDecision carries about the state its answer derives from (S7, S11, S12),
// taken when the heartbeat is decided: in a batch, the state the decisions before it left
// (and its own write), not the batch's final state. Wraps the decider in force (the real
// one or a mutant).
class SimCoordinator::RecordingDecider : public Decider {
 public:
  struct Facts {
    int64_t stored_version = -1;
    std::string owned, blocked, absent;
    int64_t in_round = -1;
    bool any_absent = false;
  };
  explicit RecordingDecider(const Decider& inner) : inner_(inner) {}

  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    auto d = inner_.Heartbeat(stored, live, req, env);
    facts_[&req] = Of(d.next ? *d.next : stored, req, env.now_ms);  // the latest attempt
    return d;
  }
  Decision<Unit> Tick(const GroupMetadata& stored, const Liveness& live,
                      const Env& env) const override {
    return inner_.Tick(stored, live, env);
  }
  Decision<GroupView> Patch(const GroupMetadata& stored, const Liveness& live,
                            const PatchGroupRequest& req, const Env& env) const override {
    return inner_.Patch(stored, live, req, env);
  }
  Decision<Unit> Fence(const GroupMetadata& stored, const Liveness& live, const MemberId& member,
                       const Env& env) const override {
    return inner_.Fence(stored, live, member, env);
  }

  // The facts of `req`'s last decision, removed (nullopt: it was not decided).
  std::optional<Facts> Take(const HeartbeatRequest* req) {
    auto it = facts_.find(req);
    if (it == facts_.end()) return std::nullopt;
    Facts f = std::move(it->second);
    facts_.erase(it);
    return f;
  }
  void Forget(const HeartbeatRequest* req) { facts_.erase(req); }

 private:
  static Facts Of(const GroupMetadata& m, const HeartbeatRequest& req, TimeMs now) {
    Facts f;
    f.stored_version = m.version.value();
    std::vector<int32_t> owned, blocked, absent;
    for (const ShardState& sh : m.shards) {
      if (sh.owner == req.member_id.str()) owned.push_back(sh.id);
    }
    for (int32_t s : Claimed(req)) {
      if (m.FindShard(s) == nullptr) absent.push_back(s);
    }
    if (m.round) {
      for (const Blocker& b : m.round->blockers) {
        if (b.member == req.member_id) blocked.push_back(b.shard.value());
      }
    }
    f.any_absent = !absent.empty();
    f.owned = ShardList(owned);
    f.blocked = ShardList(blocked);
    f.absent = ShardList(absent);
    // An unproven claim is no evidence and blocks nothing (S12 does not judge it).
    const bool unproven =
        CheckClientVersion(m, req.metadata_version, req.lineage, now) == VersionCheck::kUnproven;
    f.in_round = unproven ? -1 : (m.round ? 1 : 0);
    return f;
  }

 public:
  // The request's ownedShards and DRAINING shards, sorted.
  static std::vector<int32_t> Claimed(const HeartbeatRequest& req) {
    std::vector<int32_t> claimed = req.owned_shards;
    for (const RevokingReport& rr : req.revoking_shards) {
      if (rr.state == RevokeState::kDraining) claimed.push_back(rr.shard);
    }
    std::sort(claimed.begin(), claimed.end());
    return claimed;
  }

 private:
  const Decider& inner_;
  mutable std::map<const HeartbeatRequest*, Facts> facts_;
};

// ── service events → probes ───────────────────────────────────────────────────────
class SimCoordinator::Observer : public ServiceObserver {
 public:
  explicit Observer(SimCoordinator& c) : c_(c), w_(*c.ctx_.world) {}
  void OnEvents(const GroupKey&, const std::vector<Event>& events) override {
    for (const Event& e : events) {
      switch (e.kind) {
        case EventKind::kRoundEnded:
          w_.probes().Hit("round_ended");
          if (c_.Me().in_heartbeat) w_.probes().Hit("round_ended_by_heartbeat");
          break;
        case EventKind::kRoundStarted:
          if (e.detail.ends_with("created over a lost key")) {
            w_.probes().Hit("created_over_lost_key");
          }
          break;
        case EventKind::kStaleRevokeIgnored:
          if (e.detail == "older than its revoke") w_.probes().Hit("stale_revoke_ignored");
          break;
        case EventKind::kBlockerRecorded:
          w_.probes().Hit("blocker_recorded");
          break;
        case EventKind::kParentCompleted:
          w_.probes().Hit("parent_completed");
          break;
        case EventKind::kParentReopened:
          w_.probes().Hit("parent_reopened");
          break;
        case EventKind::kGenerationDeleted:
          w_.probes().Hit("generation_deleted");
          break;
        case EventKind::kLayoutRolledForward:
          w_.probes().Hit("layout_rolled_forward");
          break;
        case EventKind::kLayoutBehind:
          w_.probes().Hit("layout_found_behind");
          break;
        case EventKind::kShardKeyRecreated:
          // The simulation deletes no stream key, and on its one server a rollback that
          // loses a generation's keys loses its activation too: a key the tick finds
          // missing and creates is a layout read ahead of the Redis it then wrote (seed
          // 15524999770511949606 let a producer write a child before its parents were
          // sealed). Judged here rather than left to a rare S4.
          w_.probes().Hit("shard_key_recreated");
          w_.Fail(Violation{"RS2",
                            fmt::format("{} created key {} of the ACTIVE generation, which was "
                                        "missing: on one server only a layout read ahead of "
                                        "its streams finds that ({})",
                                        c_.name(), e.shard, e.detail),
                            w_.now() * 1000, 0});
          break;
        case EventKind::kShardKeyRecreateDeferred:
          w_.probes().Hit("shard_key_recreate_deferred");
          break;
        case EventKind::kLayoutAdoptionDeferred:
          w_.probes().Hit("layout_adoption_deferred");
          break;
        case EventKind::kShardTaken:
          w_.probes().Hit("shard_taken");
          break;
        case EventKind::kShardReleased:
          if (e.detail == "taken shard released") w_.probes().Hit("taken_shard_released");
          break;
        case EventKind::kStaticMemberReplaced:
          w_.probes().Hit("static_member_replaced");
          break;
        case EventKind::kMemberExpired:
          w_.probes().Hit("member_expired");
          break;
        case EventKind::kMemberFenced:
          w_.probes().Hit("member_fenced");
          break;
        default:
          break;
      }
    }
  }
  void OnRevisionConflict(const GroupKey&) override { w_.probes().Hit("cas_conflict"); }

  // Called by the worker that decided `req`'s batch, right after its write: what the answer
  // derives from, for the request's own worker to record (SimCoordinator::Recorder).
  struct Answer {
    bool valid = false;  // decided on a load or write that succeeded
    int64_t stored_version = -1;
    int64_t revision = -1;
    std::optional<RecordingDecider::Facts> facts;
  };
  void OnHeartbeat(const GroupKey&, const HeartbeatRequest& req, std::string_view,
                   size_t batch_size) override {
    const auto& b = c_.store_->basis();
    Answer a{b.valid, b.stored_version, b.revision, c_.decider_->Take(&req)};
    if (a.facts) {
      // Decided on the state the batch started from (no decision before it wrote): that
      // state's revision, even when a later decision of the batch wrote.
      a.stored_version = a.facts->stored_version;
      if (a.stored_version == b.loaded_version && a.revision != b.loaded_revision) {
        w_.probes().Hit("batch_answer_before_write");
        a.revision = b.loaded_revision;
      }
    }
    if (batch_size > 1) w_.probes().Hit("heartbeat_batch");
    answers_[&req] = std::move(a);
  }
  Answer TakeAnswer(const HeartbeatRequest* req) {
    auto it = answers_.find(req);
    if (it == answers_.end()) return Answer{};
    Answer a = std::move(it->second);
    answers_.erase(it);
    return a;
  }
  void Forget(const HeartbeatRequest* req) { answers_.erase(req); }

 private:
  SimCoordinator& c_;
  World& w_;
  std::map<const HeartbeatRequest*, Answer> answers_;
};

// ── CoordinatorApi decorator: records the answers the Api is about to send ───────────
class SimCoordinator::Recorder : public CoordinatorApi {
 public:
  Recorder(SimCoordinator& c, GroupService& s) : c_(c), s_(s) {}

  Result<HeartbeatResponse> Heartbeat(const GroupKey& key, const HeartbeatRequest& req) override {
    // A request's address may be an earlier one's: nothing of that one may be taken as ours.
    c_.decider_->Forget(&req);
    c_.observer_->Forget(&req);
    SimCoordinator::Worker& me = c_.Me();
    me.in_heartbeat = true;
    Result<HeartbeatResponse> r = s_.Heartbeat(key, req);
    me.in_heartbeat = false;
    // Whichever worker decided it (maybe another one, for the whole batch).
    const Observer::Answer answer = c_.observer_->TakeAnswer(&req);
    c_.decider_->Forget(&req);
    if (c_.crashed_ || c_.exited_) return r;
    World& w = *c_.ctx_.world;
    if (r.ok() && req.member_epoch == -1 && r->status == HeartbeatStatus::kSyncMetadata) {
      w.probes().Hit("leave_answered_sync");
    }
    if (r.ok() && req.member_epoch == 0) {
      for (const RevokingReport& rr : req.revoking_shards) {
        if (rr.state == RevokeState::kDraining &&
            std::find(r->assigned_shards.begin(), r->assigned_shards.end(), rr.shard) !=
                r->assigned_shards.end()) {
          w.probes().Hit("rejoin_regained_draining_shard");
        }
      }
    }
    HistEvent e;
    e.kind = HistKind::kDecision;
    e.proc = c_.name_;
    e.member = req.member_id.str();
    e.detail = req.member_epoch == -1 ? "leave" : "heartbeat";
    e.req_version = req.metadata_version;
    e.req_lineage = req.lineage;
    e.req_epoch = req.member_epoch;
    e.req_digest = Digest(SerializeHeartbeatRequest(req));
    e.claimed = ShardList(RecordingDecider::Claimed(req));
    const bool decided = r.ok() || DecidedError(r.error().code);
    if (decided && answer.valid) {
      e.stored_version = answer.stored_version;
      e.revision = answer.revision;
    }
    if (r.ok() && answer.valid && answer.facts) {
      // What the state the answer derives from says of this member (S11/S12 oracle data).
      const RecordingDecider::Facts& f = *answer.facts;
      if (f.any_absent) w.probes().Hit("absent_shard_claimed");
      e.absent = f.absent;
      e.owned = f.owned;
      e.blocked = f.blocked;
      e.in_round = f.in_round;
    }
    if (r.ok()) {
      e.status = std::string(HeartbeatStatusName(r->status));
      e.version = r->metadata_version;
      e.lineage = r->lineage;
      e.epoch = r->member_epoch;
      e.assigned = ShardList(r->assigned_shards);
      e.revoked = ShardList(r->revoke_shards);
      e.resp_digest = Digest(SerializeHeartbeatResponse(*r));
    } else {
      e.status = std::string(ErrorCodeName(r.error().code));
      e.resp_digest = "error:" + e.status;
    }
    c_.Emit(std::move(e));
    return r;
  }

  Result<RoutingResponse> Routing(const GroupKey& key, int64_t observed_version,
                                  const std::string& lineage) override {
    c_.store_->ResetBasis();
    Result<RoutingResponse> r = s_.Routing(key, observed_version, lineage);
    if (c_.crashed_ || c_.exited_) return r;
    HistEvent e;
    e.kind = HistKind::kDecision;
    e.proc = c_.name_;
    e.detail = "routing";
    e.req_version = observed_version;
    e.req_lineage = lineage;
    e.req_digest = Digest(fmt::format("{}|{}", observed_version, lineage));
    const auto& basis = c_.store_->basis();
    if (r.ok() && basis.valid) {
      e.stored_version = basis.stored_version;
      e.revision = basis.revision;
    }
    if (r.ok()) {
      e.status = r->sync ? "SYNC_METADATA" : "OK";
      e.version = r->metadata_version;
      e.lineage = r->lineage;
      e.resp_digest = Digest(SerializeRoutingResponse(*r));
    } else {
      e.status = std::string(ErrorCodeName(r.error().code));
      e.resp_digest = "error:" + e.status;
    }
    c_.Emit(std::move(e));
    return r;
  }

  Result<GroupView> CreateGroup(const CreateGroupRequest& req, RevisionChange* change) override {
    return s_.CreateGroup(req, change);
  }
  Result<std::vector<GroupKey>> ListGroups() override { return s_.ListGroups(); }
  Result<GroupView> DescribeGroup(const GroupKey& key) override { return s_.DescribeGroup(key); }
  Result<GroupView> PatchGroup(const GroupKey& key, const PatchGroupRequest& req,
                               RevisionChange* change) override {
    return s_.PatchGroup(key, req, change);
  }
  Status DeleteGroup(const GroupKey& key, int64_t expected_revision,
                     RevisionChange* change) override {
    return s_.DeleteGroup(key, expected_revision, change);
  }
  Result<GroupView> FenceMember(const GroupKey& key, const MemberId& member,
                                RevisionChange* change) override {
    c_.store_->set_fencing(member.str());
    Result<GroupView> r = s_.FenceMember(key, member, change);
    c_.store_->set_fencing("");
    return r;
  }
  Result<std::string> ExportGroup(const GroupKey& key) override { return s_.ExportGroup(key); }
  Result<GroupView> RestoreGroup(std::string_view export_json, RevisionChange* change) override {
    return s_.RestoreGroup(export_json, change);
  }
  // The stream's routing (D4) is not a group decision: no kDecision (S8 judges the group's
  // answers after its key was deleted; the layout lives on). Producers record what they got.
  Result<RoutingResponse> StreamRouting(const std::string& stream, int64_t observed_version,
                                        const std::string& lineage) override {
    c_.store_->ResetBasis();
    return s_.StreamRouting(stream, observed_version, lineage);
  }
  Result<StreamView> PatchStream(const std::string& stream, const PatchStreamRequest& req,
                                 RevisionChange* change) override {
    return s_.PatchStream(stream, req, change);
  }
  Result<StreamView> DescribeStream(const std::string& stream) override {
    return s_.DescribeStream(stream);
  }
  Result<StreamView> Reshard(const std::string& stream, int64_t expected_revision,
                             int32_t shard_count, RevisionChange* change) override {
    return s_.Reshard(stream, expected_revision, shard_count, change);
  }
  Status Ready() override { return s_.Ready(); }

 private:
  SimCoordinator& c_;
  GroupService& s_;
};

// ── the process ────────────────────────────────────────────────────────────────────

SimCoordinator::SimCoordinator(CoordContext& ctx, int slot, int incarnation, TimeMs skew_ms)
    : ctx_(ctx),
      slot_(slot),
      node_(fmt::format("coord-{}", slot)),
      name_(fmt::format("coord-{}#{}", slot, incarnation)),
      skew_ms_(skew_ms),
      clock_(*this),
      tokens_(*ctx.world) {
  store_ = std::make_unique<Store>(*this);
  observer_ = std::make_unique<Observer>(*this);
  sync_ = std::make_unique<FiberSync>(*ctx.world, "monitor_waited");
  tick_sync_ = std::make_unique<FiberSync>(*ctx.world, nullptr);
  tick_pass_ = tick_sync_->NewMutex();
  decider_ = std::make_unique<RecordingDecider>(
      ctx.service.decider != nullptr ? *ctx.service.decider : Decider::Real());
  GroupServiceOptions service = ctx.service;
  service.streams = store_.get();  // as in production: a coordinator can always reshard
  service.sync = sync_.get();
  service.decider = decider_.get();
  service_ = std::make_unique<GroupService>(*store_, clock_, tokens_, *observer_, service,
                                            [] { return OkStatus(); });
  recorder_ = std::make_unique<Recorder>(*this, *service_);
  metrics_ = std::make_unique<Metrics>();
  api_ = std::make_unique<Api>(*recorder_, gate_, *metrics_);
  for (int i = 0; i < std::max(1, ctx.workers); ++i) {
    auto w = std::make_unique<Worker>();
    w->index = workers_.size();
    Worker* raw = w.get();
    w->fiber = std::make_unique<Fiber>([this, raw] { WorkerMain(*raw); });
    workers_.push_back(std::move(w));
  }
  HistEvent e;
  e.kind = HistKind::kStart;
  e.proc = name_;
  Emit(std::move(e));
  ScheduleTick();
}

SimCoordinator::~SimCoordinator() { Teardown(); }

void SimCoordinator::Emit(HistEvent e) { ctx_.world->Emit(std::move(e)); }

SimCoordinator::Worker& SimCoordinator::Me() {
  Fiber* f = Fiber::Current();
  for (auto& w : workers_) {
    if (w->fiber.get() == f) return *w;
  }
  RSC_CHECK(false);  // called off this process's worker fibers
  return *workers_.front();
}

int SimCoordinator::BusyWorkers() const {
  int n = 0;
  for (const auto& w : workers_) n += w->idle || w->fiber->finished() ? 0 : 1;
  return n;
}

bool SimCoordinator::busy() const { return alive() && BusyWorkers() > 0; }

void SimCoordinator::Sleep(TimeMs ms) { ctx_.world->Sleep(*Me().fiber, ms); }

void SimCoordinator::WorkerMain(Worker& w) {
  w.idle = false;  // it was "idle" only until this first Resume
  for (;;) {
    if (exit_requested_) return;
    if (queue_.empty()) {
      w.idle = true;
      w.fiber->Yield();
      w.idle = false;
      continue;
    }
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    job();
    MaybeExit();
  }
}

void SimCoordinator::Wake() {
  // Scheduler side: idle workers take what is queued, in worker order; each runs until it
  // parks in a call (then the next one takes the next job) or finds the queue empty. After
  // an exit every idle worker is resumed, to return.
  for (auto& w : workers_) {
    if (!exit_requested_ && queue_.empty()) return;
    if (w->idle && !w->fiber->finished()) w->fiber->Resume();
  }
}

void SimCoordinator::Receive(HttpCall call) {
  if (!alive()) return;
  queue_.push_back([this, call = std::move(call)] {
    const HttpResponse resp = api_->Handle(call.request);
    if (crashed_ || exited_) return;  // died meanwhile: nothing is sent
    call.reply(resp);
  });
  Wake();
}

void SimCoordinator::ScheduleTick() {
  ctx_.world->After(ctx_.tick_interval_ms, [this] {
    if (!alive()) return;
    if (!terminating_ && !tick_queued_) {
      tick_queued_ = true;
      queue_.push_back([this] {
        // One pass at a time, as production's tick thread runs them: a pass queued while a
        // longer one runs on another worker waits for it, then runs (with one worker it ran
        // right after it anyway). Until it runs no other pass is queued, so a slow pass
        // holds up at most one worker besides its own.
        std::lock_guard<SyncPort::Mutex> one_pass(*tick_pass_);
        tick_queued_ = false;
        RunTick();
      });
      Wake();
    }
    ScheduleTick();
  });
}

void SimCoordinator::RunTick() {
  // The production pass (server/tick_loop.h): stream ticks, then one mutex + CAS cycle per
  // group (no waiting).
  (void)TickPass(*service_, [this] { return crashed_ || terminating_; });
}

void SimCoordinator::Terminate() {
  if (!alive() || terminating_) return;
  terminating_ = true;
  gate_.BeginTerminate();
  ctx_.world->After(ctx_.grace_ms, [this] {
    if (alive()) Exit();  // the grace period is over: the process exits regardless
  });
  if (BusyWorkers() == 0 && queue_.empty()) Exit();
}

void SimCoordinator::MaybeExit() {
  // Called by a worker that finished a job: the process exits once nothing is queued and no
  // other worker is inside a request (production's shutdown waits for in-flight requests).
  if (terminating_ && queue_.empty() && alive() && BusyWorkers() <= 1) Exit();
}

void SimCoordinator::Exit() {
  exited_ = true;
  exit_requested_ = true;
  if (!store_->holding().empty()) {
    // Only a forced exit can leave with the mutex held; it expires by TTL.
    for (const std::string& token : store_->holding()) ctx_.redis->EndSection(token);
    store_->ForgetHolding();
    HistEvent m;
    m.kind = HistKind::kMutexExit;
    m.proc = name_;
    m.detail = "exit";
    Emit(std::move(m));
  }
  HistEvent e;
  e.kind = HistKind::kStop;
  e.proc = name_;
  Emit(std::move(e));
  ctx_.on_exit(slot_);
  ctx_.world->After(0, [this] { Wake(); });  // lets an idle worker return
}

void SimCoordinator::Crash(const std::string& why) {
  if (crashed_ || exited_) return;
  crashed_ = true;
  exit_requested_ = true;
  queue_.clear();
  if (!store_->holding().empty()) {
    ctx_.world->probes().Hit("coord_crashed_holding_mutex");
    for (const std::string& token : store_->holding()) ctx_.redis->EndSection(token);
    store_->ForgetHolding();
    HistEvent m;
    m.kind = HistKind::kMutexExit;
    m.proc = name_;
    m.detail = "crash";
    Emit(std::move(m));
  }
  HistEvent e;
  e.kind = HistKind::kCrash;
  e.proc = name_;
  e.detail = why;
  Emit(std::move(e));
  ctx_.on_exit(slot_);
  ctx_.world->After(0, [this] { Wake(); });
}

void SimCoordinator::Teardown() {
  // No events from here on: the run is over. Every worker is resumed in turn until it
  // returns: one parked on a monitor or the heartbeat queue goes on once the worker
  // holding it unwinds (its wait re-checks, sim/fiber_sync.h).
  crashed_ = true;
  exit_requested_ = true;
  queue_.clear();
  for (bool running = true; running;) {
    running = false;
    for (auto& w : workers_) {
      if (w->fiber->finished()) continue;
      running = true;
      w->fiber->Resume();
    }
  }
}

}  // namespace rsc::sim
