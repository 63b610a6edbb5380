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

// A simulated stream entry as the reader core and the handler see it (fields).
client::ReaderEntry ToEntry(const StreamEntry& e) {
  client::ReaderEntry out;
  out.id = e.id.str();
  if (e.key.empty() && e.seq < 0) {  // trimmed while pending: listed by its id only
    out.deleted = true;
    return out;
  }
  out.fields = {{"key", e.key}, {"seq", std::to_string(e.seq)}, {"producer", e.producer}};
  return out;
}

std::string FieldOf(const StreamFields& fields, std::string_view name) {
  for (const auto& [f, v] : fields) {
    if (f == name) return v;
  }
  return {};
}

StreamId ParseId(const std::string& id) {
  if (id == "0") return StreamId{};
  std::optional<StreamId> parsed = StreamId::Parse(id);
  RSC_CHECK(parsed.has_value());
  return *parsed;
}

std::vector<StreamId> ParseIds(const std::vector<std::string>& ids) {
  std::vector<StreamId> out;
  out.reserve(ids.size());
  for (const std::string& id : ids) out.push_back(ParseId(id));
  return out;
}

// The simulated Redis's reply to a reader command, as the library's Redis port parses it.
client::ReaderReply ToReply(const StreamReply& r) {
  using Kind = client::ReaderReply::Kind;
  if (!r.ok())
    return client::ReaderReply::Error(IsConnError(r) ? Kind::kTransport : Kind::kError, r.error);
  client::ReaderReply out;
  for (const StreamEntry& e : r.entries) out.entries.push_back(ToEntry(e));
  out.cursor = r.cursor.str();
  out.count = r.count;
  if (!r.ids.empty()) out.count = static_cast<int64_t>(r.ids.size());
  for (const PendingRow& row : r.pending) {
    out.ids.push_back(row.id.str());
    if (!out.lowest_owner) out.lowest_owner = row.consumer;
  }
  return out;
}

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
    if (!r->done && r->core->acquired()) out.push_back(r->shard);
  }
  return out;
}

// ── core plumbing ─────────────────────────────────────────────────────────────────

void SimConsumer::Apply(const client::ConsumerActions& a, Cause cause) {
  if (dead_) return;
  World& w = env_.world();
  for (int32_t s : a.abandon) {
    unrouted_.erase(s);
    Reader* r = Current(s);
    if (!r) {
      // Nothing of it runs: confirm at once that the abandoned work has stopped.
      env_.world().After(0, [this, s] {
        if (!dead_) Apply(core_.OnShardDrained(s, LocalNow()), LeaseCause());
      });
      continue;
    }
    if (r->core->abandoned()) continue;
    if (cause == Cause::kLeaseEnd) {
      w.probes().Hit(r->core->drain_requested() ? "lease_expired_while_draining"
                                                : "lease_expired_while_reading");
    }
    Abandon(*r, cause == Cause::kFenced ? "fenced" : "abandoned");
  }
  for (int32_t s : a.stop) {
    Reader* r = Current(s);
    if (r && !r->core->drain_requested() && !r->core->abandoned()) {
      Drain(*r);  // also during a clean shutdown: it is reported REVOKED
    } else if (!r) {
      unrouted_.erase(s);  // never read: nothing is in flight
      env_.world().After(0, [this, s] {
        if (!dead_) Apply(core_.OnShardDrained(s, LocalNow()), LeaseCause());
      });
    }
  }
  for (int32_t s : a.start) {
    if (streams_.count(s) != 0) {
      StartReader(s);
    } else {
      unrouted_.insert(s);  // started once its stream key is known (consumer.cc does so)
      RequestRouting();
    }
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
  const int64_t now_us = env_.world().now() * 1000;
  if (end) {
    last_lease_us_ = GlobalUs(*end);
  } else if (last_lease_us_ >= 0) {
    // No lease any more (dropped after UNKNOWN_MEMBER_ID/FENCED): it ended now at the
    // latest. A negative lease end would read as "unbounded" (sim/checkers.h).
    last_lease_us_ = std::min(last_lease_us_, now_us);
  }
  // Per window rather than member-wide (shard -1): a window whose work is being abandoned
  // keeps the lease it had — a renewal does not give an abandoned shard back (the core never
  // restarts it while its work is stopping), and a member-wide kLease would extend it and,
  // after a rollback, clear its mark (sim/checkers.h). A shard taken from us (C8) has its own
  // lease, which renewals do not extend.
  for (const auto& [id, r] : readers_) {
    if (!r->core->acquired() || r->done || r->core->abandoned()) continue;
    const auto own = core_.LeaseEndOf(r->shard);
    const int64_t us =
        own ? GlobalUs(*own) : (last_lease_us_ < 0 ? -1 : std::min(last_lease_us_, now_us));
    if (us < 0 || us == r->lease_us) continue;
    r->lease_us = us;
    HistEvent e = Event(HistKind::kLease);
    e.shard = r->shard;
    e.lease_end_us = us;
    env_.world().Emit(std::move(e));
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
      if (!dead_ && !unrouted_.empty()) RequestRouting();
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
                  for (auto it = unrouted_.begin(); it != unrouted_.end();) {
                    if (streams_.count(*it) == 0) {
                      ++it;
                      continue;
                    }
                    StartReader(*it);
                    it = unrouted_.erase(it);
                  }
                  if (!unrouted_.empty()) retry();  // a growing group: not routed yet
                });
  env_.world().After(p_.http_timeout_ms, [this, id, retry] {
    if (dead_ || !routing_in_flight_ || id != routing_seq_) return;
    routing_in_flight_ = false;
    retry();
  });
}

// ── readers: the library's ReaderCore over the simulated ports ──────────────────────

int64_t SimConsumer::Reader::ReadBudgetMs(int32_t s) {
  return owner->core_.ReadBudgetMs(s, owner->LocalNow());
}

bool SimConsumer::Reader::MayProcess(int32_t s) {
  return owner->core_.MayProcess(s, owner->LocalNow());
}

TimeMs SimConsumer::Reader::NowMs() { return owner->LocalNow(); }

void SimConsumer::Reader::OnHandlerGaveUp(int32_t /*s*/, const std::string& error) {
  // Simulated handlers never fail, so the kStop policy never gives up.
  RSC_CHECK(false && "a simulated handler gave up");
  (void)error;
}

void SimConsumer::Reader::Observe(ConsumerEvent event) { owner->Observe(*this, event); }

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

void SimConsumer::StartReader(int32_t shard) {
  auto r = std::make_unique<Reader>();
  r->owner = this;
  r->id = next_reader_++;
  r->shard = shard;
  if (Reader* prev = Current(shard)) r->predecessor = prev->id;
  client::ReaderCoreConfig config;
  config.shard = shard;
  config.stream = streams_.at(shard);
  config.group = p_.group.group;
  config.consumer_name = member_;
  config.max_batch = p_.max_batch;
  config.block_ms = p_.block_ms;
  config.observe = true;
  r->core =
      env_.world().mutant().MakeReader(std::move(config), r.get(), &stats_, r->predecessor != 0);
  const uint64_t id = r->id;
  current_[shard] = id;
  readers_[id] = std::move(r);
  StepSoon(id);
}

void SimConsumer::StepSoon(uint64_t id) {
  env_.world().After(0, [this, id] {
    if (!dead_) Step(id);
  });
}

void SimConsumer::CancelSleep(Reader& r) {
  if (!r.sleeping) return;
  r.sleeping = false;  // the runtime's Pause() returns early on a drain or an abandon
  ++r.sleep_gen;
  r.core->OnWake();
}

void SimConsumer::Drain(Reader& r) {
  World& w = env_.world();
  // A poison message met at the worst moment: the shard is asked to move and the handler
  // call in flight, or the next one of the batch being finished, hangs past the rebalance
  // timeout, so the shard is taken from this member (C8).
  if (env_.in_fault_phase() && w.buggify().Fire("consumer.stuck_drain", 0.5, w.rng())) {
    r.hang_in_drain = true;
    if (r.handler_running) r.hang_until = w.now() + StuckForMs();
  }
  r.core->Drain();
  CancelSleep(r);
  StepSoon(r.id);
}

void SimConsumer::Abandon(Reader& r, const std::string& reason) {
  if (r.op_in_flight) env_.world().probes().Hit("abandoned_with_read_in_flight");
  r.core->Abandon(reason);
  const int64_t now_us = env_.world().now() * 1000;
  const auto end = core_.LeaseEndOf(r.shard);
  // No lease any more (dropped by an UNKNOWN_MEMBER_ID/FENCED answer): the window's grant
  // ended with the last lease it had, not now.
  const int64_t last = last_lease_us_ < 0 ? now_us : std::min(last_lease_us_, now_us);
  r.abandoned_lease_us = end ? std::min(GlobalUs(*end), now_us) : last;
  CancelSleep(r);
  StepSoon(r.id);
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
    rd->core->OnWake();
    Step(id);
  });
}

void SimConsumer::Observe(Reader& r, const ConsumerEvent& event) {
  World& w = env_.world();
  HistEvent e;
  switch (event.kind) {
    case ConsumerEventKind::kAcquire: {
      e = Event(HistKind::kAcquire);
      e.epoch = core_.Status(LocalNow()).assignment_epoch;
      const auto end = core_.LeaseEndOf(r.shard);
      e.lease_end_us = end ? GlobalUs(*end) : w.now() * 1000;
      r.lease_us = e.lease_end_us;
      break;
    }
    case ConsumerEventKind::kRead:
      e = Event(HistKind::kRead);
      e.detail = event.detail;
      break;
    case ConsumerEventKind::kDeliver:
      e = Event(HistKind::kDeliver);
      e.id = event.id;
      e.key = FieldOf(event.fields, "key");
      e.seq = std::stoll(FieldOf(event.fields, "seq"));
      e.attempt = event.attempt;
      break;
    case ConsumerEventKind::kAck:
      e = Event(HistKind::kAck);
      e.id = event.id;
      break;
    case ConsumerEventKind::kRelease: {
      std::string detail = event.detail;
      if (r.core->abandoned()) {
        // The window's grant ended at the abandon: a renewal that came while the abandoned
        // work was stopping does not give the shard back (it is never restarted from here).
        HistEvent l = Event(HistKind::kLease);
        l.shard = r.shard;
        l.lease_end_us = r.abandoned_lease_us;
        w.Emit(std::move(l));
        // Already listed for revocation: the core reports it REVOKED once told it stopped.
        if (core_.StateOf(r.shard) == client::LocalShardState::kRevoked) detail = "revoked";
      }
      e = Event(HistKind::kRelease);
      e.detail = std::move(detail);
      break;
    }
    default:
      return;
  }
  e.shard = r.shard;
  e.stream = event.stream;
  w.Emit(std::move(e));
}

void SimConsumer::Finish(Reader& r, bool drained) {
  r.done = true;
  r.sleeping = false;
  const int32_t shard = r.shard;
  const uint64_t id = r.id;
  auto cur = current_.find(shard);
  if (cur != current_.end() && cur->second == id) current_.erase(cur);
  for (auto& [rid, other] : readers_) {
    if (!other->done && other->predecessor == id) StepSoon(rid);
  }
  // Drained, or abandoned and now really stopped: either way the core is told (an
  // abandoned shard is reported DRAINING until then, consumer_core.h). The reader thread
  // reports the drain (or its end); the runtime thread tells the core.
  env_.world().After(0, [this, shard, drained] {
    if (dead_) return;
    if (drained) env_.world().probes().Hit("drain_completed");
    Apply(core_.OnShardDrained(shard, LocalNow()), LeaseCause());
  });
  if (exiting_) Exit();
}

void SimConsumer::SendCommand(Reader& r, const client::ReaderCommand& command) {
  using client::ReaderCommandKind;
  const std::string stream = r.core->config().stream;
  const std::string group = p_.group.group;
  const std::string consumer = member_;
  RedisExec exec;
  switch (command.kind) {
    case ReaderCommandKind::kCreateGroup:
      exec = [stream, group](SimRedis& redis, std::function<void(StreamReply)> done) {
        done(redis.Stream([&](Streams& s) { return XGroupCreate(s, stream, group); }));
      };
      break;
    case ReaderCommandKind::kAutoClaim: {
      const StreamId cursor = ParseId(command.cursor);
      const int count = command.count;
      const bool skip = env_.world().mutant().SkipsTakeover();  // MUTANT c7_skip_takeover
      exec = [stream, group, consumer, cursor, count, skip](SimRedis& redis,
                                                            std::function<void(StreamReply)> done) {
        done(redis.Stream([&](Streams& s) {
          if (skip) return StreamOp{};  // an empty last page: nothing claimed
          return XAutoClaim(s, stream, group, consumer, cursor, count);
        }));
      };
      break;
    }
    case ReaderCommandKind::kReadPending: {
      const StreamId after = ParseId(command.cursor);
      const int count = command.count;
      exec = [stream, group, consumer, count, after](SimRedis& redis,
                                                     std::function<void(StreamReply)> done) {
        done(redis.Stream([&](Streams& s) {
          return XReadGroupPending(s, stream, group, consumer, after, count);
        }));
      };
      break;
    }
    case ReaderCommandKind::kReadLive: {
      const int count = command.count;
      const TimeMs block = command.block_ms;
      exec = [stream, group, consumer, count, block](SimRedis& redis,
                                                     std::function<void(StreamReply)> done) {
        redis.XReadGroupBlock(stream, group, consumer, count, block, std::move(done));
      };
      break;
    }
    case ReaderCommandKind::kCheckForeign:
      exec = [stream, group](SimRedis& redis, std::function<void(StreamReply)> done) {
        done(redis.Stream([&](Streams& s) { return XPending(s, stream, group, 1); }));
      };
      break;
    case ReaderCommandKind::kAck: {
      const std::vector<StreamId> ids = ParseIds(command.ids);
      exec = [stream, group, ids](SimRedis& redis, std::function<void(StreamReply)> done) {
        done(redis.Stream([&](Streams& s) { return XAck(s, stream, group, ids); }));
      };
      break;
    }
    case ReaderCommandKind::kPendingPage:
    case ReaderCommandKind::kClaim:
    case ReaderCommandKind::kDeadLetter:
      // The simulated Redis knows XAUTOCLAIM and simulated handlers never fail.
      RSC_CHECK(false && "a reader command the simulated Redis does not model");
      return;
  }
  r.op_in_flight = true;
  const uint64_t seq = ++r.op_seq;
  const uint64_t id = r.id;
  const ReaderCommandKind kind = command.kind;
  env_.SendRedis(slot_.node, r.conn_epoch, std::move(exec),
                 [this, id, seq, kind](const StreamReply& reply) {
                   if (dead_) return;
                   Reader* rd = Find(id);
                   if (!rd || rd->done || rd->op_seq != seq || !rd->op_in_flight) return;
                   rd->op_in_flight = false;
                   if (IsConnError(reply)) rd->conn_epoch = 0;  // reconnect next time
                   World& w = env_.world();
                   if (kind == client::ReaderCommandKind::kAutoClaim && !reply.ids.empty()) {
                     w.probes().Hit("takeover_claimed_pending");
                   }
                   if (kind == client::ReaderCommandKind::kCheckForeign && reply.ok() &&
                       !reply.pending.empty() && reply.pending.front().consumer != member_ &&
                       !rd->core->abandoned()) {
                     w.probes().Hit("late_read_reclaimed");
                   }
                   rd->core->OnReply(ToReply(reply));
                   Step(id);
                 });
}

void SimConsumer::StartHandler(Reader& r, const Message& message) {
  World& w = env_.world();
  r.handler_running = true;
  const std::string key = FieldOf(message.fields, "key");
  const int64_t seq = std::stoll(FieldOf(message.fields, "seq"));
  if (env_.CountDelivery(key, seq) > 0) w.probes().Hit("redelivery");
  TimeMs d = w.rng().Uniform(p_.handler_min_ms, p_.handler_max_ms);
  if (w.buggify().Fire("consumer.slow_handler", 0.02, w.rng())) d += w.rng().Uniform(20, 60);
  // A handler that hangs for a while (a poison message, a stuck downstream): its shard
  // drains past the member lease, and maybe past the rebalance timeout.
  if (env_.in_fault_phase() && w.buggify().Fire("consumer.hung_handler", 0.002, w.rng())) {
    w.probes().Hit("handler_hung");
    d += w.rng().Uniform(p_.member_lease_ms, p_.member_lease_ms + p_.rebalance_timeout_ms);
  }
  r.hang_until = 0;
  if (r.hang_in_drain && r.core->drain_requested()) {
    r.hang_in_drain = false;
    r.hang_until = w.now() + StuckForMs();
  }
  const uint64_t id = r.id;
  w.After(d, [this, id] { OnHandlerReturned(id); });
}

TimeMs SimConsumer::StuckForMs() {
  World& w = env_.world();
  w.probes().Hit("handler_hung");
  return p_.rebalance_timeout_ms + w.rng().Uniform(p_.member_lease_ms / 2, 2 * p_.member_lease_ms);
}

void SimConsumer::OnHandlerReturned(uint64_t id) {
  if (dead_) return;
  Reader* rd = Find(id);
  if (!rd) return;
  if (rd->hang_until > env_.world().now()) {  // hung when its shard was asked to drain
    env_.world().At(rd->hang_until, [this, id] { OnHandlerReturned(id); });
    return;
  }
  rd->handler_running = false;
  rd->core->OnHandled(HandlerResult::Ok());
  Step(id);
}

void SimConsumer::Step(uint64_t id) {
  Reader* rp = Find(id);
  if (dead_ || !rp || rp->done) return;
  Reader& r = *rp;
  for (;;) {
    if (r.op_in_flight || r.handler_running || r.sleeping) return;
    client::ReaderAction a = r.core->Next();
    switch (a.kind) {
      case client::ReaderAction::Kind::kIdle:
        if (r.core->waiting_for_predecessor()) {
          Reader* prev = r.predecessor != 0 ? Find(r.predecessor) : nullptr;
          if (!prev || prev->done) {
            r.core->OnPredecessorFinished();
            continue;
          }
        }
        return;  // stepped again when the predecessor finishes, or on a drain/abandon
      case client::ReaderAction::Kind::kSleep:
        SleepReader(r, a.sleep_ms);
        return;
      case client::ReaderAction::Kind::kCommand:
        SendCommand(r, a.command);
        return;
      case client::ReaderAction::Kind::kDeliver:
        StartHandler(r, a.message);
        return;
      case client::ReaderAction::Kind::kFinished:
        Finish(r, a.drained);
        return;
    }
  }
}

}  // namespace rsc::sim
