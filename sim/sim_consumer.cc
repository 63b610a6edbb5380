#include "sim/sim_consumer.h"

#include <fmt/format.h>

#include <limits>

#include "client/client_options.h"
#include "client/consumer_factory.h"
#include "client/platform.h"
#include "client/reader_redis.h"
#include "core/check.h"
#include "core/protocol_json.h"

namespace rsc::sim {

namespace {

constexpr TimeMs kDayMs = 86'400'000;

// The options a simulated consumer process is configured with, written as an application
// writes them (include/rsc/consumer.h); the library checks them and derives the runtime's
// options from them (ConsumerAccess::Create), as in Consumer::Create.
ConsumerOptions OptionsOf(const ConsumerParams& p, const ConsumerSlot& slot,
                          std::shared_ptr<VersionStore> store) {
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
  o.version_store = std::move(store);
  o.on_event = [](const ConsumerEvent&) {};  // the history is recorded from the seams
  return o;
}

std::string FieldOf(const StreamFields& fields, std::string_view name) {
  for (const auto& [f, v] : fields) {
    if (f == name) return v;
  }
  return {};
}

}  // namespace

// ── the platform ──────────────────────────────────────────────────────────────────────

class SimConsumer::Store : public VersionStore {
 public:
  explicit Store(SimConsumer& c) : c_(c) {}
  bool Load(const std::string& /*stream*/, const std::string& /*group*/, ObservedVersion* out,
            std::string* /*error*/) override {
    *out = c_.slot_.stored;
    return true;
  }
  bool Save(const std::string& /*stream*/, const std::string& /*group*/,
            const ObservedVersion& version, std::string* error) override {
    if (c_.dead_) {
      *error = "the process died";
      return false;
    }
    c_.slot_.stored = version;
    return true;
  }

 private:
  SimConsumer& c_;
};

// The reader connections: the library's ReaderRedis over SimReaderNet (one server, or the
// simulated cluster: sim/sim_reader_net.h), which answers through SimConsumer::OnReaderAnswers.
// This wrapper only notes what each reader sent, for the probes. A dead process's commands
// are owed an answer (kTransport) that the teardown delivers.
class SimConsumer::Readers : public client::ReaderPort {
 public:
  Readers(SimConsumer& c, Answers answers) : c_(c), answers_(std::move(answers)) {
    auto net =
        std::make_unique<SimReaderNet>(c.env_, c.fibers_, c.sync_, c.slot_.node, c.env_.cluster(),
                                       c.env_.world().mutant().SkipsTakeover());
    net_ = net.get();
    redis_ =
        std::make_unique<client::ReaderRedis>(std::move(net), [](uint64_t, client::ReaderReply) {
          RSC_CHECK(false && "answers come in batches (SetBatchDone)");
        });
    redis_->SetBatchDone(
        [&c](std::vector<client::ReaderAnswer>& answers) { c.OnReaderAnswers(answers); });
  }
  ~Readers() override {
    net_->Closing();
    c_.readers_ = nullptr;
  }

  void Start() override { redis_->Start(); }
  void Stop() override {
    net_->Closing();
    redis_->Stop();
  }
  void Submit(uint64_t token, const client::ReaderCoreConfig& config,
              const client::ReaderCommand& command) override {
    if (c_.dead_) return;  // its connections are closed: answered by the teardown
    if (c_.own_checked_.erase(token) > 0 &&
        command.kind == client::ReaderCommandKind::kCreateGroup) {
      c_.env_.world().probes().Hit("own_late_read_reclaimed");
    }
    ReaderNote& port = c_.ports_[token];
    port.kind = command.kind;
    port.checks = command.kind == client::ReaderCommandKind::kCheckForeign ||
                  (command.kind == client::ReaderCommandKind::kReadLive && command.check_foreign);
    redis_->Submit(token, config, command);
  }
  void Cancel(uint64_t token, bool now) override {
    if (!c_.dead_) redis_->Cancel(token, now);
  }
  client::ReaderRedisStats Stats() const override { return redis_->Stats(); }
  bool SingleServer() const override { return redis_->SingleServer(); }

  // The process died: its connections close.
  void Kill() { net_->Kill(); }
  void Deliver(std::vector<client::ReaderAnswer>& answers) { answers_(answers); }
  // The teardown: every command still in flight fails (its connection closed).
  void FailInFlight() {
    std::vector<client::ReaderAnswer> answers;
    for (const client::ReaderInfo& r : c_.runtime().Readers()) {
      if (!r.command_in_flight) continue;
      answers.push_back(client::ReaderAnswer{
          r.id,
          client::ReaderReply::Error(client::ReaderReply::Kind::kTransport, "the process died")});
    }
    if (!answers.empty()) Deliver(answers);
  }

 private:
  SimConsumer& c_;
  const Answers answers_;
  SimReaderNet* net_ = nullptr;  // owned by redis_
  std::unique_ptr<client::ReaderRedis> redis_;
};

class SimConsumer::Platform : public client::Platform {
 public:
  explicit Platform(SimConsumer& c) : c_(c) {}

  SyncPort& Sync() override { return c_.sync_; }
  TimeMs NowMs(bool /*round_up*/) override { return c_.ClockRead(); }
  int64_t NowUs() override { return c_.ClockRead() * 1000; }
  double Random() override { return c_.env_.world().rng().Unit(); }
  std::unique_ptr<Thread> StartThread(const char* /*name*/, std::function<void()> body) override {
    return c_.fibers_.StartThread(std::move(body));
  }
  const void* CurrentThread() override { return Fiber::Current(); }

  // One exchange over the simulated network, bounded by the client's timeout: the first of
  // the answer (a duplicate is ignored) and the timeout wins.
  client::HttpOutcome Request(const client::HttpCall& call) override {
    const std::string where = EndpointName(call.endpoint);
    if (c_.dead_) {
      if (c_.fibers_.tearing_down()) c_.fibers_.YieldOnce();
      return client::HttpOutcome{0, "", "the process died", where};
    }
    World& w = c_.env_.world();
    const bool heartbeat = call.method == "POST";
    if (heartbeat) c_.heartbeat_sent_ = w.now();
    HttpRequest req;
    req.method = call.method;
    req.target = call.target;
    req.body = call.body;
    auto done = std::make_shared<bool>(false);
    auto outcome = std::make_shared<client::HttpOutcome>();
    Fiber* me = Fiber::Current();
    SimConsumer& c = c_;
    auto finish = [&c, me, done, outcome](client::HttpOutcome o) {
      if (*done) return;
      *done = true;
      *outcome = std::move(o);
      c.fibers_.Wake(me);
    };
    c_.env_.SendHttp(
        c_.slot_.node, c_.Endpoint(call.endpoint), std::move(req),
        [finish, where](const HttpResponse& resp) {
          finish(client::HttpOutcome{resp.status, resp.body,
                                     resp.status == 0 ? "connection failed" : "", where});
        });
    // Also after a clean exit (a leave still in flight when the shutdown gave up): Stop()
    // joins this thread, which returns by the timeout as in production. A crashed process's
    // fiber is not resumed by it (frozen).
    w.After(c_.p_.http_timeout_ms, [&c, finish, done, heartbeat, where] {
      if (*done) return;
      if (heartbeat && !c.dead_) c.env_.world().probes().Hit("heartbeat_timed_out");
      finish(client::HttpOutcome{0, "", "timed out", where});
    });
    c_.fibers_.ParkUntil(done);
    if (!*done) return client::HttpOutcome{0, "", "the process died", where};
    return *outcome;
  }
  std::string EndpointName(int endpoint) const override {
    return fmt::format("coordinator-{}", c_.Endpoint(endpoint));
  }
  Result<std::unique_ptr<redis::Executor>> OpenRedis() override {
    return MakeError(ErrorCode::kInternal, "a consumer opens reader connections only");
  }
  std::unique_ptr<client::ReaderPort> OpenReaders(client::ReaderPort::Answers answers) override {
    auto readers = std::make_unique<Readers>(c_, std::move(answers));
    c_.readers_ = readers.get();
    return readers;
  }
  std::string NewMemberId() override { return c_.member_; }
  uint64_t NewSeed() override { return c_.env_.world().rng().Seed(); }

  void BeforeAnswer(HeartbeatResponse& answer, TimeMs sent_ms) override {
    World& w = c_.env_.world();
    w.mutant().OnHeartbeatAnswer(answer, c_.GlobalUs(sent_ms) / 1000, w.now());
  }
  std::unique_ptr<client::ReaderCore> MakeReader(client::ReaderCoreConfig config,
                                                 client::ReaderContext* context,
                                                 client::DeliveryStats* stats,
                                                 bool has_predecessor) override {
    return c_.env_.world().mutant().MakeReader(std::move(config), context, stats, has_predecessor);
  }
  void ReaderStopping(const client::ConsumerRuntime& runtime, uint64_t reader, bool abandon,
                      client::AbandonCause cause) override {
    c_.OnReaderStopping(runtime, reader, abandon, cause);
  }
  void ObserveConsumer(const client::ConsumerRuntime& runtime, uint64_t reader,
                       const ConsumerEvent& event) override {
    c_.Observe(runtime, reader, event);
  }
  void AfterInput(const client::ConsumerRuntime& runtime) override { c_.AfterInput(runtime); }

 private:
  SimConsumer& c_;
};

// ── the process ───────────────────────────────────────────────────────────────────────

SimConsumer::SimConsumer(Services& env, const ConsumerParams& params, ConsumerSlot& slot)
    : env_(env),
      p_(params),
      slot_(slot),
      name_(fmt::format("{}#{}", slot.node, ++slot.incarnations)),
      member_(fmt::format("c{}-{}", slot.index, slot.incarnations)),
      fibers_(env.world()),
      sync_(env.world(), nullptr, &fibers_),
      offset_(env.world().rng().Uniform(0, 1'000'000)) {
  auto store = slot.version_store ? std::make_shared<Store>(*this) : nullptr;
  ConsumerResult<std::unique_ptr<Consumer>> made = client::ConsumerAccess::Create(
      OptionsOf(params, slot, std::move(store)),
      [this](const Message& m) { return HandleMessage(m); },
      [this](const ConsumerOptions&, client::CheckedEndpoints) {
        return std::make_unique<Platform>(*this);
      });
  RequireValidOptions(made.ok() ? std::nullopt : std::optional<std::string>(made.error().message),
                      "consumer");
  consumer_ = std::move(made).value();
}

SimConsumer::~SimConsumer() {
  dead_ = true;
  fibers_.Freeze();
  if (consumer_) fibers_.Spawn([this] { consumer_->Stop(); });
  fibers_.RunToEnd([this] {
    if (readers_ != nullptr) readers_->FailInFlight();
  });
  consumer_.reset();
}

const client::ConsumerRuntime& SimConsumer::runtime() const {
  return client::ConsumerAccess::Runtime(*consumer_);
}

TimeMs SimConsumer::LocalNow() const { return env_.world().now() + offset_; }

TimeMs SimConsumer::ClockRead() {
  if (fibers_.tearing_down()) teardown_ms_ += kDayMs;
  return LocalNow() + teardown_ms_;
}

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
  consumer_->Start();
}

void SimConsumer::Crash(const std::string& why) {
  if (dead_) return;
  dead_ = true;
  fibers_.Freeze();  // nothing of it runs any more (the teardown ends its fibers)
  env_.redis().DropBlockedReadsOf(member_);  // its connections close with it
  // And a read still on its way finds its connection closed.
  if (readers_ != nullptr) readers_->Kill();
  HistEvent e = Event(HistKind::kCrash);
  e.detail = why;
  env_.world().Emit(std::move(e));
}

void SimConsumer::Shutdown() {
  if (dead_ || stop_asked_) return;
  stop_asked_ = true;
  fibers_.Spawn([this] { consumer_->Stop(); });
}

void SimConsumer::JumpClock(TimeMs forward_ms) {
  if (dead_ || forward_ms <= 0) return;
  offset_ += forward_ms;
  ++clock_jumps_;
  env_.world().Fault("skew",
                     fmt::format("{} monotonic clock jumps {} ms forward", name_, forward_ms));
  sync_.EndTimedWaits();    // the timer thread's wait, on a steady clock, would end now
  RecordLeases(runtime());  // the lease ends move in global time at once
}

std::vector<int32_t> SimConsumer::HeldShards() const {
  std::vector<int32_t> out;
  for (const client::ReaderInfo& r : runtime().Readers()) {
    if (r.acquired) out.push_back(r.shard);
  }
  return out;
}

// ── the application's handler ─────────────────────────────────────────────────────────

HandlerResult SimConsumer::HandleMessage(const Message& message) {
  if (dead_) return HandlerResult::Ok();  // torn down: what it returns goes nowhere
  World& w = env_.world();
  ShardHandler& h = handlers_[message.shard];
  h.running = true;
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
  h.hang_until = 0;
  if (h.hang_in_drain) {
    for (const client::ReaderInfo& r : runtime().Readers()) {
      if (r.shard != message.shard || !r.draining || r.abandoned) continue;
      h.hang_in_drain = false;
      h.hang_until = w.now() + StuckForMs();
    }
  }
  fibers_.Sleep(d);
  // Hung when its shard was asked to drain: returns no earlier than that.
  while (!dead_ && handlers_[message.shard].hang_until > w.now()) {
    fibers_.Sleep(handlers_[message.shard].hang_until - w.now());
  }
  handlers_[message.shard].running = false;
  return HandlerResult::Ok();
}

TimeMs SimConsumer::StuckForMs() {
  World& w = env_.world();
  w.probes().Hit("handler_hung");
  return p_.rebalance_timeout_ms + w.rng().Uniform(p_.member_lease_ms / 2, 2 * p_.member_lease_ms);
}

// ── after each input: history ───────────────────────────────────────────────────────────

void SimConsumer::AfterInput(const client::ConsumerRuntime& runtime) {
  if (dead_) return;
  if (runtime.exited()) {
    // Left (or gave up) and every reader finished: running handlers and commands were
    // waited for, as Stop() joins them.
    dead_ = true;
    if (readers_ != nullptr) readers_->Kill();  // its connections close
    env_.world().Emit(Event(HistKind::kStop));
    return;
  }
  RecordLeases(runtime);
}

// Per window rather than member-wide (shard -1): a window whose work is being abandoned
// keeps the lease it had — a renewal does not give an abandoned shard back (the runtime never
// restarts it while its work is stopping), and a member-wide kLease would extend it and,
// after a rollback, clear its mark (sim/checkers.h). A shard taken from us (C8) has its own
// lease, which renewals do not extend. A lease that was dropped (UNKNOWN_MEMBER_ID/FENCED)
// ended now at the latest; a negative lease end would read as "unbounded".
void SimConsumer::RecordLeases(const client::ConsumerRuntime& runtime) {
  const int64_t now_us = env_.world().now() * 1000;
  if (const std::optional<TimeMs> end = runtime.core().lease_end()) {
    last_lease_us_ = GlobalUs(*end);
  } else if (last_lease_us_ >= 0) {
    last_lease_us_ = std::min(last_lease_us_, now_us);
  }
  const int64_t current_us = last_lease_us_;
  for (const client::ReaderInfo& r : runtime.Readers()) {
    if (!r.acquired || r.abandoned) continue;
    ReaderNote& port = ports_[r.id];
    const auto own = runtime.core().LeaseEndOf(r.shard);
    const int64_t us = own ? GlobalUs(*own) : current_us;
    if (us < 0 || us == port.lease_us) continue;
    port.lease_us = us;
    HistEvent e = Event(HistKind::kLease);
    e.shard = r.shard;
    e.lease_end_us = us;
    env_.world().Emit(std::move(e));
  }
}

// ── the reader connections ─────────────────────────────────────────────────────────

void SimConsumer::OnReaderAnswers(std::vector<client::ReaderAnswer>& answers) {
  if (dead_ || readers_ == nullptr) return;
  World& w = env_.world();
  const client::ConsumerRuntime& rt = runtime();
  for (client::ReaderAnswer& a : answers) {
    const std::optional<client::ReaderInfo> r = rt.Reader(a.token);
    if (!r) continue;
    const ReaderNote& port = ports_[a.token];
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
    // the close reached Redis) found by the check: the reader reads again from its setup
    // (reader_core.cc LateReadFound), seen at its next command (Readers::Submit).
    if (port.checks && checked && a.reply.lowest_owner == member_) own_checked_.insert(a.token);
  }
  readers_->Deliver(answers);  // the facade takes them in
}

void SimConsumer::OnReaderStopping(const client::ConsumerRuntime& runtime, uint64_t reader,
                                   bool abandon, client::AbandonCause cause) {
  if (dead_) return;
  World& w = env_.world();
  const std::optional<client::ReaderInfo> r = runtime.Reader(reader);
  if (!r) return;
  ReaderNote& port = ports_[reader];
  if (abandon) {
    // When its grant ended, in global time now (a later clock jump must not move it): its
    // shard's lease, or without one the member's last lease, never later than now.
    const int64_t now_us = w.now() * 1000;
    port.jumps_at_abandon = clock_jumps_;
    const std::optional<TimeMs> own = runtime.core().LeaseEndOf(r->shard);
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
    ShardHandler& h = handlers_[r->shard];
    h.hang_in_drain = true;
    if (h.running) h.hang_until = w.now() + StuckForMs();
  }
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

void SimConsumer::Observe(const client::ConsumerRuntime& runtime, uint64_t reader,
                          const ConsumerEvent& event) {
  if (dead_) return;
  World& w = env_.world();
  if (reader == 0) {
    // The runtime's member-wide and taken leases are recorded per window (RecordLeases).
    if (event.kind == ConsumerEventKind::kHeartbeat) ObserveHeartbeat(event);
    return;
  }
  const std::optional<client::ReaderInfo> r = runtime.Reader(reader);
  RSC_CHECK(r.has_value());
  ReaderNote& port = ports_[reader];
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
        if (runtime.core().StateOf(r->shard) == client::LocalShardState::kRevoked) {
          detail = "revoked";
        }
      }
      ports_.erase(reader);  // its last event
      handlers_[r->shard].hang_in_drain = false;
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
