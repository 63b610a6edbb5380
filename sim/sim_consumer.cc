#include "sim/sim_consumer.h"

#include <fmt/format.h>

#include <limits>

#include "client/client_options.h"
#include "client/client_status.h"
#include "core/check.h"
#include "core/protocol_json.h"

namespace rsc::sim {

namespace {

// The options a simulated consumer process is configured with, written as an application
// writes them (include/rsc/consumer.h). The library's own checks pass them and its
// derivations make the runtime's options (client/client_options.h), as in Consumer::Create.
ConsumerOptions OptionsOf(const ConsumerParams& p, const ConsumerSlot& slot) {
  using std::chrono::milliseconds;
  ConsumerOptions o;
  o.coordinator_endpoints = SimCoordinatorEndpoints(p.endpoint_count);
  o.stream = p.group.stream;
  o.group = p.group.group;
  o.redis_url = kSimRedisUrl;
  o.instance_id = slot.instance_id;
  o.max_batch = p.max_batch;
  o.block = milliseconds(p.block_ms);
  o.http_timeout = milliseconds(p.http_timeout_ms);
  o.backoff_initial = milliseconds(p.backoff_initial_ms);
  o.backoff_max = milliseconds(p.backoff_max_ms);
  o.shutdown_timeout = milliseconds(p.shutdown_timeout_ms);
  o.on_event = [](const ConsumerEvent&) {};  // events reach the port's Observe
  client::CheckedEndpoints checked;
  const std::optional<std::string> error = client::CheckConsumerOptions(o, true, &checked);
  RequireValidOptions(error, "consumer");
  return o;
}

std::string FieldOf(const StreamFields& fields, std::string_view name) {
  for (const auto& [f, v] : fields) {
    if (f == name) return v;
  }
  return {};
}

}  // namespace

SimConsumer::SimConsumer(Services& env, const ConsumerParams& params, ConsumerSlot& slot)
    : env_(env),
      p_(params),
      slot_(slot),
      name_(fmt::format("{}#{}", slot.node, ++slot.incarnations)),
      member_(fmt::format("c{}-{}", slot.index, slot.incarnations)),
      offset_(env.world().rng().Uniform(0, 1'000'000)),
      options_(OptionsOf(params, slot)),
      runtime_(client::ConsumerRuntimeOptionsOf(options_, member_),
               client::ConsumerCoreOptionsOf(options_, member_, params.endpoint_count,
                                             slot.version_store ? slot.stored : ObservedVersion{},
                                             env.world().rng().Seed()),
               this, &stats_),
      node_(env, slot.node,
            [this](std::vector<client::ReaderAnswer>& answers) { OnReaderAnswers(answers); }) {
  node_.set_skip_takeover(env.world().mutant().SkipsTakeover());
}

TimeMs SimConsumer::LocalNow() const { return env_.world().now() + offset_; }

ConsumerStatus SimConsumer::Status() const {
  return client::ConsumerStatusOf(
      options_, runtime_, stats_, LocalNow(),
      client::ConsumerPortFacts{
          .started = true,
          .stopped = dead_ || runtime_.exited(),
          .member_id = member_,
          .coordinator_endpoint = fmt::format("coordinator-{}", Endpoint(runtime_.endpoint())),
          .threads = 0,  // one simulated process: no threads of its own
          .redis_connections = 2,
      });
}

TimeMs SimConsumer::NowMs(bool /*round_up*/) { return LocalNow(); }

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

void SimConsumer::Start() {
  HistEvent e = Event(HistKind::kStart);
  e.detail = slot_.instance_id;
  env_.world().Emit(std::move(e));
  runtime_.Start();
}

void SimConsumer::Crash(const std::string& why) {
  if (dead_) return;
  dead_ = true;
  env_.redis().DropBlockedReadsOf(member_);  // its connections close with it
  node_.Stop();  // and a read still on its way finds its connection closed
  HistEvent e = Event(HistKind::kCrash);
  e.detail = why;
  env_.world().Emit(std::move(e));
}

void SimConsumer::Shutdown() {
  if (dead_) return;
  runtime_.Shutdown();
}

void SimConsumer::JumpClock(TimeMs forward_ms) {
  if (dead_ || forward_ms <= 0) return;
  offset_ += forward_ms;
  ++clock_jumps_;
  env_.world().Fault("skew",
                     fmt::format("{} monotonic clock jumps {} ms forward", name_, forward_ms));
  runtime_.Tick();
}

std::vector<int32_t> SimConsumer::HeldShards() const {
  std::vector<int32_t> out;
  for (const client::ReaderInfo& r : runtime_.Readers()) {
    if (r.acquired) out.push_back(r.shard);
  }
  return out;
}

// ── after each input: history and the timer ─────────────────────────────────────────

void SimConsumer::AfterInput() {
  if (dead_) return;
  if (runtime_.exited()) {
    // Left (or gave up) and every reader finished: running handlers and commands were
    // waited for, as Stop() joins them.
    dead_ = true;
    node_.Stop();  // its connections close
    env_.world().Emit(Event(HistKind::kStop));
    return;
  }
  RecordLeases();
  ArmTimer();
}

// Per window rather than member-wide (shard -1): a window whose work is being abandoned
// keeps the lease it had — a renewal does not give an abandoned shard back (the runtime never
// restarts it while its work is stopping), and a member-wide kLease would extend it and,
// after a rollback, clear its mark (sim/checkers.h). A shard taken from us (C8) has its own
// lease, which renewals do not extend. A lease that was dropped (UNKNOWN_MEMBER_ID/FENCED)
// ended now at the latest; a negative lease end would read as "unbounded".
void SimConsumer::RecordLeases() {
  const int64_t now_us = env_.world().now() * 1000;
  if (const std::optional<TimeMs> end = runtime_.core().lease_end()) {
    last_lease_us_ = GlobalUs(*end);
  } else if (last_lease_us_ >= 0) {
    last_lease_us_ = std::min(last_lease_us_, now_us);
  }
  const int64_t current_us = last_lease_us_;
  for (const client::ReaderInfo& r : runtime_.Readers()) {
    if (!r.acquired || r.abandoned) continue;
    ReaderPort& port = ports_[r.id];
    const auto own = runtime_.core().LeaseEndOf(r.shard);
    const int64_t us = own ? GlobalUs(*own) : current_us;
    if (us < 0 || us == port.lease_us) continue;
    port.lease_us = us;
    HistEvent e = Event(HistKind::kLease);
    e.shard = r.shard;
    e.lease_end_us = us;
    env_.world().Emit(std::move(e));
  }
}

void SimConsumer::ArmTimer() {
  const TimeMs next = runtime_.NextWakeupMs();
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
      RSC_CHECK(++same_ms_ticks_ < 10000);  // a runtime that never makes progress
    } else {
      same_ms_ = w.now();
      same_ms_ticks_ = 0;
    }
    runtime_.Tick();
  });
}

// ── HTTP: the simulated network, with the client's timeout ─────────────────────────

void SimConsumer::Http(uint64_t call, const client::HttpCall& request) {
  const bool heartbeat = request.method == "POST";
  if (heartbeat) heartbeat_sent_ = env_.world().now();
  HttpRequest req;
  req.method = request.method;
  req.target = request.target;
  req.body = request.body;
  const int slot = Endpoint(request.endpoint);
  const std::string where = fmt::format("coordinator-{}", slot);
  http_in_flight_.insert(call);
  env_.SendHttp(slot_.node, slot, std::move(req), [this, call, where](const HttpResponse& resp) {
    if (dead_ || http_in_flight_.erase(call) == 0) return;  // late: already timed out
    runtime_.OnHttp(call, client::HttpOutcome{resp.status, resp.body,
                                              resp.status == 0 ? "connection failed" : "", where});
  });
  env_.world().After(p_.http_timeout_ms, [this, call, heartbeat, where] {
    if (dead_ || http_in_flight_.erase(call) == 0) return;
    if (heartbeat) env_.world().probes().Hit("heartbeat_timed_out");
    runtime_.OnHttp(call, client::HttpOutcome{0, "", "timed out", where});
  });
}

void SimConsumer::BeforeAnswer(HeartbeatResponse& answer, TimeMs sent_ms) {
  World& w = env_.world();
  w.mutant().OnHeartbeatAnswer(answer, GlobalUs(sent_ms) / 1000, w.now());
}

void SimConsumer::SaveVersion(const ObservedVersion& version) {
  if (slot_.version_store) slot_.stored = version;
}

// ── readers: commands against the simulated Redis, simulated handlers ──────────────

std::unique_ptr<client::ReaderCore> SimConsumer::MakeReader(client::ReaderCoreConfig config,
                                                            client::ReaderContext* context,
                                                            client::DeliveryStats* stats,
                                                            bool has_predecessor) {
  return env_.world().mutant().MakeReader(std::move(config), context, stats, has_predecessor);
}

void SimConsumer::ReaderStopping(uint64_t reader, bool abandon, client::AbandonCause cause) {
  World& w = env_.world();
  const std::optional<client::ReaderInfo> r = runtime_.Reader(reader);
  if (!r) return;
  ReaderPort& port = ports_[reader];
  // As consumer.cc: an abandoned reader's blocked read is cut at the socket, a drained one's
  // cut short by an unblock.
  node_.Cancel(reader, abandon);
  if (abandon) {
    // When its grant ended, in global time now (a later clock jump must not move it): its
    // shard's lease, or without one the member's last lease, never later than now.
    const int64_t now_us = w.now() * 1000;
    port.jumps_at_abandon = clock_jumps_;
    const std::optional<TimeMs> own = runtime_.core().LeaseEndOf(r->shard);
    port.abandon_lease_us = own                   ? std::min(GlobalUs(*own), now_us)
                            : last_lease_us_ >= 0 ? std::min(last_lease_us_, now_us)
                                                  : now_us;
    if (cause == client::AbandonCause::kLeaseEnd) {
      w.probes().Hit(r->draining ? "lease_expired_while_draining" : "lease_expired_while_reading");
    }
    if (r->command_in_flight) w.probes().Hit("abandoned_with_read_in_flight");
    return;
  }
  // A poison message met at the worst moment: the shard is asked to move and the handler
  // call in flight, or the next one of the batch being finished, hangs past the rebalance
  // timeout, so the shard is taken from this member (C8).
  if (env_.in_fault_phase() && w.buggify().Fire("consumer.stuck_drain", 0.5, w.rng())) {
    port.hang_in_drain = true;
    if (port.handler_running) port.hang_until = w.now() + StuckForMs();
  }
}

void SimConsumer::Redis(uint64_t reader, const client::ReaderCoreConfig& config,
                        const client::ReaderCommand& command) {
  ReaderPort& port = ports_[reader];
  port.kind = command.kind;
  port.checks = command.kind == client::ReaderCommandKind::kCheckForeign ||
                (command.kind == client::ReaderCommandKind::kReadLive && command.check_foreign);
  node_.Submit(reader, config, command);
}

void SimConsumer::OnReaderAnswers(std::vector<client::ReaderAnswer>& answers) {
  for (client::ReaderAnswer& a : answers) {
    if (dead_) return;
    const std::optional<client::ReaderInfo> r = runtime_.Reader(a.token);
    if (!r) continue;
    const ReaderPort& port = ports_[a.token];
    World& w = env_.world();
    if (port.kind == client::ReaderCommandKind::kAutoClaim && a.reply.ok() && a.reply.count > 0) {
      w.probes().Hit("takeover_claimed_pending");
    }
    const bool checked =
        port.kind == client::ReaderCommandKind::kCheckForeign ? a.reply.ok() : a.reply.checked;
    if (port.checks && checked && a.reply.lowest_owner && *a.reply.lowest_owner != member_ &&
        !r->abandoned) {
      w.probes().Hit("late_read_reclaimed");
    }
    if (port.kind == client::ReaderCommandKind::kReadLive && a.reply.checked &&
        !a.reply.entries.empty()) {
      w.probes().Hit("pipelined_read_checked");
    }
    // An entry stranded under our own name (an abandoned reader's cut read served before
    // the close reached Redis) found by the check and read again (reader_core.cc).
    const bool own = port.checks && checked && a.reply.lowest_owner == member_;
    const int64_t claims = stats_.foreign_claims.load();
    runtime_.OnRedisReply(a.token, std::move(a.reply));
    if (own && stats_.foreign_claims.load() > claims) w.probes().Hit("own_late_read_reclaimed");
  }
}

void SimConsumer::Handle(uint64_t reader, Message message) {
  World& w = env_.world();
  ReaderPort& port = ports_[reader];
  port.handler_running = true;
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
  port.hang_until = 0;
  const std::optional<client::ReaderInfo> r = runtime_.Reader(reader);
  if (port.hang_in_drain && r && r->draining) {
    port.hang_in_drain = false;
    port.hang_until = w.now() + StuckForMs();
  }
  w.After(d, [this, reader] { OnHandlerReturned(reader); });
}

TimeMs SimConsumer::StuckForMs() {
  World& w = env_.world();
  w.probes().Hit("handler_hung");
  return p_.rebalance_timeout_ms + w.rng().Uniform(p_.member_lease_ms / 2, 2 * p_.member_lease_ms);
}

void SimConsumer::OnHandlerReturned(uint64_t reader) {
  if (dead_) return;
  auto it = ports_.find(reader);
  if (it == ports_.end()) return;
  ReaderPort& port = it->second;
  if (port.hang_until > env_.world().now()) {  // hung when its shard was asked to drain
    env_.world().At(port.hang_until, [this, reader] { OnHandlerReturned(reader); });
    return;
  }
  port.handler_running = false;
  runtime_.OnHandled(reader, HandlerResult::Ok());
}

// ── history ──────────────────────────────────────────────────────────────────────

void SimConsumer::ObserveHeartbeat(const ConsumerEvent& event) {
  World& w = env_.world();
  const std::string& status = event.status;
  if (status == "SYNC_METADATA") w.probes().Hit("sync_metadata_delivered");
  if (status == ErrorCodeName(ErrorCode::kLockTimeout)) w.probes().Hit("lock_timeout_answered");
  if (status == ErrorCodeName(ErrorCode::kMetadataMissing)) {
    w.probes().Hit("metadata_missing_answered");
  }
  if (status == ErrorCodeName(ErrorCode::kCoordinatorTerminating)) {
    w.probes().Hit("terminating_answered");
  }
  HistEvent e = Event(HistKind::kHeartbeat);
  e.sent_us = heartbeat_sent_ * 1000;  // global, as sent (a later jump does not move it)
  e.grant_ms = event.granted_lease_ms;
  if (event.granted_lease_ms >= 0) e.assigned = ShardList(event.assigned_shards);
  e.status = status;
  e.version = event.metadata_version;
  e.lineage = event.lineage;
  e.epoch = event.member_epoch;
  if (event.detail == "leave") e.detail = "leave";
  w.Emit(std::move(e));
}

void SimConsumer::Observe(uint64_t reader, ConsumerEvent event) {
  if (dead_) return;
  World& w = env_.world();
  if (reader == 0) {
    // The runtime's member-wide and taken leases are recorded per window (RecordLeases).
    if (event.kind == ConsumerEventKind::kHeartbeat) ObserveHeartbeat(event);
    return;
  }
  const std::optional<client::ReaderInfo> r = runtime_.Reader(reader);
  RSC_CHECK(r.has_value());
  ReaderPort& port = ports_[reader];
  HistEvent e;
  switch (event.kind) {
    case ConsumerEventKind::kAcquire:
      e = Event(HistKind::kAcquire);
      e.epoch = event.assignment_epoch;
      e.lease_end_us =
          event.lease_end_us >= 0 ? GlobalUs(event.lease_end_us / 1000) : w.now() * 1000;
      port.lease_us = e.lease_end_us;
      break;
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
      if (detail == "drained") w.probes().Hit("drain_completed");
      if (r->abandoned) {
        // The window's grant ended at the abandon: a renewal that came while the abandoned
        // work was stopping does not give the shard back (it is never restarted from here).
        HistEvent l = Event(HistKind::kLease);
        l.shard = r->shard;
        l.lease_end_us = port.abandon_lease_us;
        if (clock_jumps_ > port.jumps_at_abandon) {
          w.probes().Hit("abandoned_released_after_clock_jump");
        }
        w.Emit(std::move(l));
        // Already listed for revocation: the core reports it REVOKED once told it stopped.
        if (runtime_.core().StateOf(r->shard) == client::LocalShardState::kRevoked) {
          detail = "revoked";
        }
      }
      ports_.erase(reader);  // its last event
      e = Event(HistKind::kRelease);
      e.detail = std::move(detail);
      break;
    }
    default:
      return;
  }
  e.shard = r->shard;
  e.stream = event.stream;
  w.Emit(std::move(e));
}

}  // namespace rsc::sim
