#include "sim/sim_consumer.h"

#include <fmt/format.h>

#include <limits>

#include "core/protocol_json.h"

namespace rsc::sim {

namespace {

client::ConsumerCoreOptions CoreOptions(Services& env, const ConsumerParams& p,
                                        const ConsumerSlot& slot, const std::string& member) {
  client::ConsumerCoreOptions o;
  o.member_id = MemberId(member);
  o.instance_id = slot.instance_id;
  o.endpoint_count = p.endpoint_count;
  if (slot.version_store) {
    o.initial_metadata_version = slot.stored.metadata_version;
    o.initial_lineage = slot.stored.lineage;
  }
  o.backoff_initial_ms = p.backoff_initial_ms;
  o.backoff_max_ms = p.backoff_max_ms;
  o.jitter_seed = env.world().rng().Seed();
  return o;
}

bool IsConnError(const StreamReply& r) { return r.error.rfind(kConnError, 0) == 0; }

// consumer_reader.h kIdleForeignCheck: how often an idle live shard checks for entries
// another consumer name holds (local monotonic time).
constexpr TimeMs kIdleForeignCheckMs = 1000;

}  // namespace

SimConsumer::SimConsumer(Services& env, const ConsumerParams& params, ConsumerSlot& slot)
    : env_(env),
      p_(params),
      slot_(slot),
      name_(fmt::format("{}#{}", slot.node, ++slot.incarnations)),
      member_(fmt::format("c{}-{}", slot.index, slot.incarnations)),
      base_path_(fmt::format("/v1/groups/{}/{}", params.group.stream, params.group.group)),
      offset_(env.world().rng().Uniform(0, 1'000'000)),
      core_(CoreOptions(env, params, slot, member_)) {}

TimeMs SimConsumer::LocalNow() const { return env_.world().now() + offset_; }

int SimConsumer::Endpoint(int index) const {
  // Each process lists the coordinator endpoints in its own order (as a deployment that
  // shuffles them, or a load balancer, would): not every consumer starts on replica 0.
  return (index + slot_.endpoint_offset) % p_.endpoint_count;
}

HistEvent SimConsumer::Event(HistKind kind) const {
  HistEvent e;
  e.kind = kind;
  e.proc = name_;
  e.member = member_;
  return e;
}

SimConsumer::Cause SimConsumer::LeaseCause() const {
  const auto end = core_.lease_end();
  return end && LocalNow() >= *end ? Cause::kLeaseEnd : Cause::kOther;
}

bool SimConsumer::MayProcess() const {
  // consumer.cc MayProcess: the lease has not ended (for any shard, draining included).
  const auto end = core_.lease_end();
  return end && LocalNow() < *end;
}

void SimConsumer::Start() {
  HistEvent e = Event(HistKind::kStart);
  e.detail = slot_.instance_id;
  env_.world().Emit(std::move(e));
  Apply(core_.Start(LocalNow()), Cause::kOther);
}

void SimConsumer::Crash(const std::string& why) {
  if (dead_) return;
  dead_ = true;
  env_.redis().DropBlockedReadsOf(member_);  // its connections close with it
  HistEvent e = Event(HistKind::kCrash);
  e.detail = why;
  env_.world().Emit(std::move(e));
}

void SimConsumer::Shutdown() {
  if (dead_ || shutting_down_) return;
  shutting_down_ = true;
  Apply(core_.Shutdown(LocalNow()), LeaseCause());
  env_.world().After(p_.shutdown_timeout_ms, [this] {
    if (dead_) return;
    // The leave was not confirmed in time (coordinator down): give up, abandon what is
    // left; the member expires on its own.
    exiting_ = true;
    for (auto& [id, r] : readers_) {
      if (!r->done) Abandon(*r, "shutdown");
    }
    Exit();
  });
}

void SimConsumer::JumpClock(TimeMs forward_ms) {
  if (dead_ || forward_ms <= 0) return;
  offset_ += forward_ms;
  env_.world().Fault("skew",
                     fmt::format("{} monotonic clock jumps {} ms forward", name_, forward_ms));
  Apply(core_.Tick(LocalNow()), LeaseCause());
}

void SimConsumer::Exit() {
  if (dead_) return;
  for (auto& [id, r] : readers_) {
    if (!r->done) return;  // waits for running handlers / commands (Stop() joins readers)
  }
  dead_ = true;
  env_.world().Emit(Event(HistKind::kStop));
}

std::vector<int32_t> SimConsumer::HeldShards() const {
  std::vector<int32_t> out;
  for (const auto& [id, r] : readers_) {
    if (!r->done && r->acquired) out.push_back(r->shard);
  }
  return out;
}

// ── core plumbing ─────────────────────────────────────────────────────────────────

void SimConsumer::Apply(const client::ConsumerActions& a, Cause cause) {
  if (dead_) return;
  World& w = env_.world();
  for (int32_t s : a.abandon) {
    Reader* r = Current(s);
    if (!r) {
      // Nothing of it runs: confirm at once that the abandoned work has stopped.
      env_.world().After(0, [this, s] {
        if (!dead_) Apply(core_.OnShardDrained(s, LocalNow()), LeaseCause());
      });
      continue;
    }
    if (r->abandon) continue;
    if (cause == Cause::kLeaseEnd) {
      w.probes().Hit(r->drain ? "lease_expired_while_draining" : "lease_expired_while_reading");
    }
    Abandon(*r, cause == Cause::kFenced ? "fenced" : "abandoned");
  }
  for (int32_t s : a.stop) {
    Reader* r = Current(s);
    if (r && !r->drain && !r->abandon) {
      Drain(*r, "drained");  // also during a clean shutdown: it is reported REVOKED
    } else if (!r) {
      // No reader holds it (cannot happen with this runtime): nothing is in flight.
      env_.world().After(0, [this, s] {
        if (!dead_) Apply(core_.OnShardDrained(s, LocalNow()), LeaseCause());
      });
    }
  }
  for (int32_t s : a.start) {
    auto r = std::make_unique<Reader>();
    r->id = next_reader_++;
    r->shard = s;
    r->backoff_ms = 100;
    if (Reader* prev = Current(s)) r->predecessor = prev->id;
    const uint64_t id = r->id;
    current_[s] = id;
    readers_[id] = std::move(r);
    StepSoon(id);
  }
  if (a.version_changed && slot_.version_store) {
    slot_.stored = ObservedVersion{a.version_changed->metadata_version, a.version_changed->lineage};
  }
  if (a.send) SendHeartbeat(*a.send);
  if (a.left) {
    exiting_ = true;
    Exit();
  }
  AfterCoreEvent();
}

void SimConsumer::AfterCoreEvent() {
  if (dead_) return;
  const auto end = core_.lease_end();
  int64_t us = end ? GlobalUs(*end) : -1;
  if (!end) {
    // No lease any more (dropped after UNKNOWN_MEMBER_ID/FENCED): it ended now at the
    // latest. A negative lease end would read as "unbounded" (sim/checkers.h).
    const int64_t now_us = env_.world().now() * 1000;
    us = last_lease_us_ < 0 ? -1 : std::min(last_lease_us_, now_us);
  }
  if (us >= 0 && us != last_lease_us_) {
    last_lease_us_ = us;
    // Per window rather than member-wide (shard -1): a window whose work is being
    // abandoned keeps the lease it had — a renewal does not give an abandoned shard back
    // (the core never restarts it while its work is stopping), and a member-wide kLease
    // would extend it and, after a rollback, clear its mark (sim/checkers.h).
    for (const auto& [id, r] : readers_) {
      if (!r->acquired || r->done || r->abandon) continue;
      HistEvent e = Event(HistKind::kLease);
      e.shard = r->shard;
      e.lease_end_us = us;
      env_.world().Emit(std::move(e));
    }
  }
  ArmTimer();
}

void SimConsumer::ArmTimer() {
  const TimeMs next = core_.NextWakeupMs();
  if (next == std::numeric_limits<TimeMs>::max()) {
    timer_at_.reset();
    ++timer_gen_;
    return;
  }
  World& w = env_.world();
  const TimeMs at = std::max(w.now(), next - offset_);
  if (timer_at_ && *timer_at_ == at) return;
  timer_at_ = at;
  const uint64_t gen = ++timer_gen_;
  w.At(at, [this, gen] {
    if (dead_ || gen != timer_gen_) return;
    timer_at_.reset();
    World& w = env_.world();
    if (w.now() == same_ms_) {
      RSC_CHECK(++same_ms_ticks_ < 10000);  // a core that never makes progress
    } else {
      same_ms_ = w.now();
      same_ms_ticks_ = 0;
    }
    Apply(core_.Tick(LocalNow()), LeaseCause());
  });
}

void SimConsumer::SendHeartbeat(const client::SendHeartbeat& s) {
  World& w = env_.world();
  const uint64_t id = ++hb_seq_;
  hb_ = InFlightHeartbeat{id, w.now(), s.leave};
  HttpRequest req;
  req.method = "POST";
  if (s.leave) {
    // /leave carries the epoch we hold (K5); the core's request says -1.
    const int64_t held = core_.member_epoch();
    req.target = base_path_ + "/leave";
    req.body = SerializeLeaveRequest(LeaveRequest{held > 0 ? held : -1, s.request});
  } else {
    req.target = base_path_ + "/heartbeat";
    req.body = SerializeHeartbeatRequest(s.request);
  }
  env_.SendHttp(slot_.node, Endpoint(s.endpoint), std::move(req),
                [this, id](const HttpResponse& resp) {
                  if (!dead_) OnHeartbeatReply(id, resp);
                });
  w.After(p_.http_timeout_ms, [this, id] {
    if (!dead_) OnHeartbeatTimeout(id);
  });
}

void SimConsumer::EmitHeartbeat(TimeMs sent, const std::string& status, int64_t version,
                                const std::string& lineage, int64_t epoch, bool leave,
                                int64_t grant_ms, std::string assigned) {
  HistEvent e = Event(HistKind::kHeartbeat);
  e.sent_us = sent * 1000;
  e.grant_ms = grant_ms;
  e.assigned = std::move(assigned);
  e.status = status;
  e.version = version;
  e.lineage = lineage;
  e.epoch = epoch;
  if (leave) e.detail = "leave";
  env_.world().Emit(std::move(e));
}

void SimConsumer::OnHeartbeatReply(uint64_t id, const HttpResponse& resp) {
  if (!hb_ || hb_->id != id) return;  // late, duplicated, or already timed out
  const InFlightHeartbeat sent = *hb_;
  hb_.reset();
  World& w = env_.world();
  if (resp.status == 200) {
    Result<HeartbeatResponse> parsed = ParseHeartbeatResponse(resp.body);
    if (parsed.ok()) {
      // The grant as the coordinator made it (before any mutant tampers with the answer).
      EmitHeartbeat(sent.sent, std::string(HeartbeatStatusName(parsed->status)),
                    parsed->metadata_version, parsed->lineage, parsed->member_epoch, sent.leave,
                    parsed->assignment_lease_ms, ShardList(parsed->assigned_shards));
      w.mutant().OnHeartbeatAnswer(*parsed, sent.sent, w.now());
      if (parsed->status == HeartbeatStatus::kSyncMetadata) {
        w.probes().Hit("sync_metadata_delivered");
      }
      Cause cause = LeaseCause();
      if (cause == Cause::kOther && parsed->member_epoch == -1) cause = Cause::kFenced;
      Apply(core_.OnHeartbeatResponse(*parsed, LocalNow()), cause);
      return;
    }
  }
  ErrorCode code = ErrorCode::kUnknownResult;
  if (resp.status != 200 && resp.status != 0) {
    Result<ErrorBody> body = ParseErrorBody(resp.body);
    if (body.ok() && body->code) code = *body->code;
  }
  switch (code) {
    case ErrorCode::kLockTimeout:
      w.probes().Hit("lock_timeout_answered");
      break;
    case ErrorCode::kMetadataMissing:
      w.probes().Hit("metadata_missing_answered");
      break;
    case ErrorCode::kCoordinatorTerminating:
      w.probes().Hit("terminating_answered");
      break;
    default:
      break;
  }
  EmitHeartbeat(sent.sent, std::string(ErrorCodeName(code)), -1, "", -1, sent.leave);
  Cause cause = LeaseCause();
  if (cause == Cause::kOther &&
      (code == ErrorCode::kUnknownMemberId || code == ErrorCode::kFencedMemberEpoch)) {
    cause = Cause::kFenced;
  }
  Apply(core_.OnHeartbeatError(code, LocalNow()), cause);
}

void SimConsumer::OnHeartbeatTimeout(uint64_t id) {
  if (!hb_ || hb_->id != id) return;
  const InFlightHeartbeat sent = *hb_;
  hb_.reset();
  env_.world().probes().Hit("heartbeat_timed_out");
  EmitHeartbeat(sent.sent, std::string(ErrorCodeName(ErrorCode::kUnknownResult)), -1, "", -1,
                sent.leave);
  Apply(core_.OnHeartbeatError(ErrorCode::kUnknownResult, LocalNow()), LeaseCause());
}

// Shard → stream key comes from routing (C7: clients never compute it).
void SimConsumer::RequestRouting() {
  if (routing_in_flight_ || dead_) return;
  routing_in_flight_ = true;
  const uint64_t id = ++routing_seq_;
  HttpRequest req;
  req.method = "GET";
  req.target = base_path_ + "/routing?observedVersion=0";
  auto retry = [this] {
    env_.world().After(200, [this] {
      if (dead_) return;
      for (auto& [rid, r] : readers_) {
        if (!r->done && r->stage == Stage::kSetup && !streams_.count(r->shard)) {
          RequestRouting();
          return;
        }
      }
    });
  };
  env_.SendHttp(slot_.node, Endpoint(core_.endpoint()), std::move(req),
                [this, id, retry](const HttpResponse& resp) {
                  if (dead_ || !routing_in_flight_ || id != routing_seq_) return;
                  routing_in_flight_ = false;
                  Result<RoutingResponse> r = resp.status == 200
                                                  ? ParseRoutingResponse(resp.body)
                                                  : Result<RoutingResponse>(MakeError(
                                                        ErrorCode::kUnknownResult, "no routing"));
                  if (!r.ok()) {
                    retry();
                    return;
                  }
                  for (const RoutingShard& s : r->shards) streams_[s.id] = s.stream;
                  std::vector<uint64_t> waiting;
                  for (auto& [rid, rd] : readers_) {
                    if (!rd->done) waiting.push_back(rid);
                  }
                  for (uint64_t rid : waiting) Step(rid);
                });
  env_.world().After(p_.http_timeout_ms, [this, id, retry] {
    if (dead_ || !routing_in_flight_ || id != routing_seq_) return;
    routing_in_flight_ = false;
    retry();
  });
}

// ── readers ───────────────────────────────────────────────────────────────────────

SimConsumer::Reader* SimConsumer::Find(uint64_t id) {
  auto it = readers_.find(id);
  return it == readers_.end() ? nullptr : it->second.get();
}

SimConsumer::Reader* SimConsumer::Current(int32_t shard) {
  auto it = current_.find(shard);
  if (it == current_.end()) return nullptr;
  Reader* r = Find(it->second);
  return r && !r->done ? r : nullptr;
}

void SimConsumer::StepSoon(uint64_t id) {
  env_.world().After(0, [this, id] {
    if (!dead_) Step(id);
  });
}

void SimConsumer::Drain(Reader& r, const std::string& reason) {
  r.drain = true;
  r.release_reason = reason;
  if (r.sleeping) {
    r.sleeping = false;  // Pause() returns early on a drain
    ++r.sleep_gen;
  }
  StepSoon(r.id);
}

void SimConsumer::Abandon(Reader& r, const std::string& reason) {
  if (r.op_in_flight) env_.world().probes().Hit("abandoned_with_read_in_flight");
  r.abandon = true;
  r.release_reason = reason;
  const int64_t now_us = env_.world().now() * 1000;
  const auto end = core_.lease_end();
  // No lease any more (dropped by an UNKNOWN_MEMBER_ID/FENCED answer): the window's grant
  // ended with the last lease it had, not now.
  const int64_t last = last_lease_us_ < 0 ? now_us : std::min(last_lease_us_, now_us);
  r.abandoned_lease_us = end ? std::min(GlobalUs(*end), now_us) : last;
  r.batch.clear();  // no further handler calls, no XACK
  r.acks.clear();
  r.batch_active = false;
  r.foreign_check = false;
  if (r.sleeping) {
    r.sleeping = false;
    ++r.sleep_gen;
  }
  StepSoon(r.id);
}

void SimConsumer::Interrupt(Reader& r) {
  // consumer_reader.cc Process(): lease ended mid-batch — nothing more is handled or
  // XACKed; read our pending list again from the start.
  r.batch.clear();
  r.acks.clear();
  r.batch_active = false;
  r.foreign_check = false;
  r.stage = Stage::kPending;
  r.pending_cursor = StreamId{};
}

void SimConsumer::Failed(Reader& r, bool nogroup) {
  r.stage = Stage::kSetup;
  r.batch.clear();
  r.acks.clear();
  r.batch_active = false;
  r.foreign_check = false;
  if (!nogroup) {
    SleepReader(r, r.backoff_ms);
    r.backoff_ms = std::min<TimeMs>(r.backoff_ms * 2, 2000);
  }
}

void SimConsumer::SleepReader(Reader& r, TimeMs ms) {
  r.sleeping = true;
  const uint64_t gen = ++r.sleep_gen;
  const uint64_t id = r.id;
  env_.world().After(ms, [this, id, gen] {
    if (dead_) return;
    Reader* rd = Find(id);
    if (!rd || rd->sleep_gen != gen || !rd->sleeping) return;
    rd->sleeping = false;
    Step(id);
  });
}

void SimConsumer::Finish(Reader& r) {
  r.done = true;
  r.sleeping = false;
  const int32_t shard = r.shard;
  const uint64_t id = r.id;
  // Drained, or abandoned and now really stopped: either way the core is told (an
  // abandoned shard is reported DRAINING until then, consumer_core.h).
  const bool report = r.drain || r.abandon;
  if (r.acquired) {
    std::string detail = r.release_reason.empty() ? "drained" : r.release_reason;
    if (r.abandon) {
      // The window's grant ended at the abandon: a renewal that came while the abandoned
      // work was stopping does not give the shard back (it is never restarted from here).
      HistEvent l = Event(HistKind::kLease);
      l.shard = shard;
      l.lease_end_us = r.abandoned_lease_us;
      env_.world().Emit(std::move(l));
      // Already listed for revocation: the core reports it REVOKED once told it stopped.
      if (core_.StateOf(shard) == client::LocalShardState::kRevoked) detail = "revoked";
    }
    HistEvent e = Event(HistKind::kRelease);
    e.shard = shard;
    e.stream = streams_.count(shard) ? streams_[shard] : "";
    e.detail = detail;
    env_.world().Emit(std::move(e));
  }
  auto cur = current_.find(shard);
  if (cur != current_.end() && cur->second == id) current_.erase(cur);
  for (auto& [rid, other] : readers_) {
    if (!other->done && other->predecessor == id) StepSoon(rid);
  }
  if (report) {
    // The reader thread reports the drain (or its end); the runtime thread tells the core.
    const bool drained = !r.abandon;
    env_.world().After(0, [this, shard, drained] {
      if (dead_) return;
      if (drained) env_.world().probes().Hit("drain_completed");
      Apply(core_.OnShardDrained(shard, LocalNow()), LeaseCause());
    });
  }
  if (exiting_) Exit();
}

void SimConsumer::Send(Reader& r, RedisExec exec,
                       std::function<void(Reader&, const StreamReply&)> on_reply) {
  r.op_in_flight = true;
  const uint64_t seq = ++r.op_seq;
  const uint64_t id = r.id;
  env_.SendRedis(slot_.node, r.conn_epoch, std::move(exec),
                 [this, id, seq, on_reply = std::move(on_reply)](const StreamReply& reply) {
                   if (dead_) return;
                   Reader* rd = Find(id);
                   if (!rd || rd->done || rd->op_seq != seq || !rd->op_in_flight) return;
                   rd->op_in_flight = false;
                   if (IsConnError(reply)) rd->conn_epoch = 0;  // reconnect next time
                   if (!rd->abandon) on_reply(*rd, reply);
                   Step(id);
                 });
}

void SimConsumer::StartHandler(Reader& r, const StreamEntry& entry) {
  World& w = env_.world();
  r.handler_running = true;
  if (env_.CountDelivery(entry.key, entry.seq) > 0) w.probes().Hit("redelivery");
  HistEvent e = Event(HistKind::kDeliver);
  e.shard = r.shard;
  e.stream = streams_[r.shard];
  e.id = entry.id.str();
  e.key = entry.key;
  e.seq = entry.seq;
  e.attempt = 1;  // handlers succeed; attempts count per delivery in this process
  w.Emit(std::move(e));
  TimeMs d = w.rng().Uniform(p_.handler_min_ms, p_.handler_max_ms);
  if (w.buggify().Fire("consumer.slow_handler", 0.02, w.rng())) d += w.rng().Uniform(20, 60);
  // A handler that hangs for a while (a poison message, a stuck downstream): its shard
  // drains past the member lease, and maybe past the rebalance timeout.
  if (env_.in_fault_phase() && w.buggify().Fire("consumer.hung_handler", 0.0005, w.rng())) {
    w.probes().Hit("handler_hung");
    d += w.rng().Uniform(p_.member_lease_ms, p_.member_lease_ms + p_.rebalance_timeout_ms);
  }
  const uint64_t id = r.id;
  const StreamId entry_id = entry.id;
  w.After(d, [this, id, entry_id] {
    if (dead_) return;
    Reader* rd = Find(id);
    if (!rd) return;
    rd->handler_running = false;
    rd->acks.push_back(entry_id);
    Step(id);
  });
}

void SimConsumer::Step(uint64_t id) {
  Reader* rp = Find(id);
  if (dead_ || !rp || rp->done) return;
  Reader& r = *rp;
  for (;;) {
    if (r.op_in_flight || r.handler_running || r.sleeping) return;
    if (r.abandon) {
      Finish(r);
      return;
    }
    if (r.stage == Stage::kWaitPredecessor) {
      if (r.predecessor != 0) {
        Reader* prev = Find(r.predecessor);
        if (prev && !prev->done) return;  // stepped again when it finishes
      }
      if (r.drain) {
        Finish(r);  // nothing was read: drained at once
        return;
      }
      r.stage = Stage::kSetup;
      r.acquired = true;
      HistEvent e = Event(HistKind::kAcquire);
      e.shard = r.shard;
      e.stream = streams_.count(r.shard) ? streams_[r.shard] : "";
      e.epoch = core_.Status(LocalNow()).assignment_epoch;
      const auto end = core_.lease_end();
      e.lease_end_us = end ? GlobalUs(*end) : env_.world().now() * 1000;
      env_.world().Emit(std::move(e));
    }
    if (r.batch_active) {
      if (!r.batch.empty()) {
        if (!MayProcess()) {
          Interrupt(r);
          continue;
        }
        StreamEntry entry = std::move(r.batch.front());
        r.batch.pop_front();
        if (entry.key.empty() && entry.seq < 0) {  // trimmed while pending: just settle it
          r.acks.push_back(entry.id);
          continue;
        }
        StartHandler(r, entry);
        return;
      }
      r.batch_active = false;
      if (!r.acks.empty()) {
        if (MayProcess()) {
          const std::string stream = streams_[r.shard];
          const std::string group = p_.group.group;
          const std::vector<StreamId> ids = r.acks;
          Send(
              r,
              [stream, group, ids](SimRedis& redis, std::function<void(StreamReply)> done) {
                done(redis.Stream([&](Streams& s) { return XAck(s, stream, group, ids); }));
              },
              [this, ids](Reader& rd, const StreamReply& reply) {
                if (!reply.ok()) {
                  Interrupt(rd);  // entries stay pending: handled again (at least once)
                  return;
                }
                rd.acks.clear();
                for (const StreamId& aid : ids) {
                  HistEvent e = Event(HistKind::kAck);
                  e.shard = rd.shard;
                  e.stream = streams_[rd.shard];
                  e.id = aid.str();
                  env_.world().Emit(std::move(e));
                }
              });
          return;
        }
        r.acks.clear();
      }
    }
    const std::string consumer = member_;
    const std::string group = p_.group.group;
    if (r.foreign_check) {
      // consumer_reader.cc ForeignPending, right after a live read and before its batch is
      // handled (a drain waits for it, as there). Our own pending list holds only that
      // batch, so an entry of another consumer name below it can only come from a previous
      // owner's read that reached Redis after our takeover (here: a zombie holder's blocked
      // read in a rollback-excused overlap): claim it and re-read our pending list first,
      // so that everything is handled in stream order.
      if (!MayProcess()) {
        // The lease ended: Process() would stop before the first entry. The runtime still
        // sends its XPENDING; here it would be a read outside the lease, and it changes
        // nothing: with no batch the reader goes on reading (after the budget check).
        if (r.batch.empty()) {
          r.foreign_check = false;
        } else {
          Interrupt(r);
        }
        continue;
      }
      const std::string stream = streams_[r.shard];
      HistEvent e = Event(HistKind::kRead);
      e.shard = r.shard;
      e.stream = stream;
      e.detail = "xpending";
      env_.world().Emit(std::move(e));
      Send(
          r,
          [stream, group](SimRedis& redis, std::function<void(StreamReply)> done) {
            done(redis.Stream([&](Streams& s) { return XPending(s, stream, group, 1); }));
          },
          [this](Reader& rd, const StreamReply& reply) {
            rd.foreign_check = false;
            if (!reply.ok()) {
              Failed(rd, false);  // also NOGROUP: the runtime backs off before its setup
              return;
            }
            rd.last_foreign_check = LocalNow();
            if (!reply.pending.empty() && reply.pending.front().consumer != member_) {
              env_.world().probes().Hit("late_read_reclaimed");
              rd.batch.clear();  // stays in our pending list: read again after the claim
              rd.stage = Stage::kSetup;
              return;
            }
            if (!rd.batch.empty()) rd.batch_active = true;
          });
      return;
    }
    if (r.drain) {
      Finish(r);  // everything read was handled and XACKed (or left pending)
      return;
    }
    switch (r.stage) {
      case Stage::kWaitPredecessor:
        return;
      case Stage::kSetup: {
        auto it = streams_.find(r.shard);
        if (it == streams_.end()) {
          RequestRouting();
          return;  // stepped again when routing arrives
        }
        const std::string stream = it->second;
        Send(
            r,
            [stream, group](SimRedis& redis, std::function<void(StreamReply)> done) {
              done(redis.Stream([&](Streams& s) { return XGroupCreate(s, stream, group); }));
            },
            [this](Reader& rd, const StreamReply& reply) {
              if (!reply.ok() && reply.error.rfind("BUSYGROUP", 0) != 0) {
                Failed(rd, false);
                return;
              }
              rd.stage = Stage::kClaim;
              rd.claim_cursor = StreamId{};
            });
        return;
      }
      case Stage::kClaim: {
        // As consumer_reader.cc TakeOver: every XAUTOCLAIM page only inside the lease (C1).
        if (core_.ReadBudgetMs(r.shard, LocalNow()) <= 0) {
          SleepReader(r, 20);
          return;
        }
        const std::string stream = streams_[r.shard];
        const StreamId cursor = r.claim_cursor;
        const int count = p_.max_batch;
        const bool skip = env_.world().mutant().SkipsTakeover();  // MUTANT c7_skip_takeover
        HistEvent e = Event(HistKind::kRead);
        e.shard = r.shard;
        e.stream = stream;
        e.detail = "xautoclaim";
        env_.world().Emit(std::move(e));
        Send(
            r,
            [stream, group, consumer, cursor, count, skip](SimRedis& redis,
                                                           std::function<void(StreamReply)> done) {
              done(redis.Stream([&](Streams& s) {
                if (skip) return StreamOp{};  // an empty last page: nothing claimed
                return XAutoClaim(s, stream, group, consumer, cursor, count);
              }));
            },
            [this](Reader& rd, const StreamReply& reply) {
              if (!reply.ok()) {
                Failed(rd, reply.error.rfind("NOGROUP", 0) == 0);
                return;
              }
              if (!reply.ids.empty()) env_.world().probes().Hit("takeover_claimed_pending");
              rd.claim_cursor = reply.cursor;
              if (reply.cursor == StreamId{}) {
                rd.stage = Stage::kPending;
                rd.pending_cursor = StreamId{};
                rd.backoff_ms = 100;
              }
            });
        return;
      }
      case Stage::kPending:
      case Stage::kLive: {
        // C1/C4: ask before every read, and never block past the lease.
        const int64_t budget = core_.ReadBudgetMs(r.shard, LocalNow());
        if (budget <= 0) {
          SleepReader(r, 20);
          return;
        }
        const std::string stream = streams_[r.shard];
        const int count = p_.max_batch;
        const bool live = r.stage == Stage::kLive;
        HistEvent e = Event(HistKind::kRead);
        e.shard = r.shard;
        e.stream = stream;
        e.detail = live ? "xreadgroup>" : "xreadgroup-pending";
        env_.world().Emit(std::move(e));
        RedisExec exec;
        if (live) {
          const TimeMs block = std::max<TimeMs>(1, std::min<TimeMs>(p_.block_ms, budget));
          exec = [stream, group, consumer, count, block](SimRedis& redis,
                                                         std::function<void(StreamReply)> done) {
            redis.XReadGroupBlock(stream, group, consumer, count, block, std::move(done));
          };
        } else {
          const StreamId after = r.pending_cursor;
          exec = [stream, group, consumer, count, after](SimRedis& redis,
                                                         std::function<void(StreamReply)> done) {
            done(redis.Stream([&](Streams& s) {
              return XReadGroupPending(s, stream, group, consumer, after, count);
            }));
          };
        }
        Send(r, std::move(exec), [this, live](Reader& rd, const StreamReply& reply) {
          if (!reply.ok()) {
            Failed(rd, reply.error.rfind("NOGROUP", 0) == 0);
            return;
          }
          if (!live) {
            if (reply.entries.empty()) {
              rd.stage = Stage::kLive;
              rd.last_foreign_check = LocalNow();
              return;
            }
            rd.pending_cursor = reply.entries.back().id;
            rd.batch.assign(reply.entries.begin(), reply.entries.end());
            rd.batch_active = true;
            return;
          }
          // New entries are handled only after the foreign check (Step); an idle shard
          // checks too, now and then, so that nothing stays stranded while no entry comes.
          if (reply.entries.empty() && LocalNow() - rd.last_foreign_check < kIdleForeignCheckMs) {
            return;
          }
          rd.batch.assign(reply.entries.begin(), reply.entries.end());
          rd.foreign_check = true;
        });
        return;
      }
    }
  }
}

}  // namespace rsc::sim
