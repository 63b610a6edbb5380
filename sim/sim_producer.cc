#include "sim/sim_producer.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "client/platform.h"
#include "client/producer_factory.h"
#include "client/producer_runtime.h"
#include "core/check.h"
#include "sim/fiber_sync.h"
#include "sim/wire_redis.h"

namespace rsc::sim {

namespace {

// The options a simulated producer process is configured with, as an application writes them
// (include/rsc/producer.h); the library checks them (ProducerAccess::Create), as in
// Producer::Create. Each process lists the coordinators in its own order (`rotation`), so
// processes start their first refresh round on different endpoints.
ProducerOptions OptionsOf(const ProducerParams& p, const ProducerSlot& slot, int rotation,
                          PublishEventHandler on_publish, std::shared_ptr<VersionStore> store) {
  using std::chrono::milliseconds;
  ProducerOptions o;
  const std::vector<std::string> endpoints = SimCoordinatorEndpoints(p.endpoint_count);
  for (int i = 0; i < p.endpoint_count; ++i) {
    o.coordinator_endpoints.push_back(
        endpoints[static_cast<size_t>((i + rotation) % p.endpoint_count)]);
  }
  o.stream = p.group.stream;
  o.group = slot.by_stream ? "" : p.group.group;  // "": the stream's routing (D4)
  o.redis_url = kSimRedisUrl;
  o.http_timeout = milliseconds(p.http_timeout_ms);
  o.redis_timeout = milliseconds(2000);
  o.retry_initial = milliseconds(100);
  o.retry_max = milliseconds(5000);
  o.endpoint_backoff = milliseconds(100);
  o.version_store = std::move(store);
  o.on_publish = std::move(on_publish);
  return o;
}

}  // namespace

// ── the platform ──────────────────────────────────────────────────────────────────────

class SimProducer::Store : public VersionStore {
 public:
  explicit Store(SimProducer& p) : p_(p) {}
  bool Load(const std::string& /*stream*/, const std::string& /*group*/, ObservedVersion* out,
            std::string* /*error*/) override {
    *out = p_.slot_.stored;
    return true;
  }
  bool Save(const std::string& /*stream*/, const std::string& /*group*/,
            const ObservedVersion& version, std::string* error) override {
    if (p_.dead_) {
      *error = "the process died";
      return false;
    }
    p_.slot_.stored = version;
    return true;
  }

 private:
  SimProducer& p_;
};

class SimProducer::Executor : public redis::Executor {
 public:
  explicit Executor(SimProducer& p) : p_(p) {}

  // One pipeline to the simulated Redis, as SingleNodeExecutor::RunBatch sends it: the
  // connection comes up with the pipeline (the network's connect), `before_write` is asked
  // right before the write; a reset connection loses every reply (UNKNOWN_RESULT).
  std::vector<Result<redis::Reply>> RunBatch(const std::vector<redis::KeyedCommand>& cmds,
                                             redis::CommandKind /*kind*/,
                                             const redis::BeforeWrite& before_write) override {
    const size_t n = cmds.size();
    if (n == 0) return {};
    if (p_.dead_) return Fail(n, ErrorCode::kRedisUnavailable, "the process died");
    if (before_write && !before_write()) {
      return Fail(n, ErrorCode::kRedisUnavailable, "not sent: its deadline passed");
    }
    std::vector<redis::Command> wire;
    wire.reserve(n);
    for (const redis::KeyedCommand& k : cmds) wire.push_back(k.cmd);
    World& w = p_.env_.world();
    p_.write_sent_ = w.now();
    p_.write_offset_ = p_.offset_;
    auto result = std::make_shared<std::vector<redis::Reply>>();
    auto done = std::make_shared<bool>(false);
    auto error = std::make_shared<std::optional<std::string>>();
    Fiber* me = Fiber::Current();
    SimProducer& p = p_;
    p_.env_.SendRedis(p_.slot_.node, conn_epoch_,
                      WirePipeline(std::move(wire), WireClient{}, result),
                      [&p, me, done, error](const StreamReply& r) {
                        if (!r.ok()) *error = r.error;
                        *done = true;
                        p.fibers_.Wake(me);
                      });
    p_.fibers_.ParkUntil(done);
    if (!*done) return Fail(n, ErrorCode::kUnknownResult, "the process died");
    if (*error) {
      // No reply (a failover reset the connection): each XADD may have been written.
      if (error->value().rfind(kConnError, 0) == 0) conn_epoch_ = 0;  // reconnect
      return Fail(n, ErrorCode::kUnknownResult, **error);
    }
    std::vector<Result<redis::Reply>> out;
    for (redis::Reply& reply : *result) {
      Probe(reply);
      out.emplace_back(std::move(reply));
    }
    return out;
  }

  Result<redis::Reply> Run(std::string_view /*key*/, const redis::Command& /*cmd*/,
                           redis::CommandKind /*kind*/) override {
    RSC_CHECK(false);  // the producer writes with RunBatch only
    return MakeError(ErrorCode::kInternal, "unused");
  }
  Result<std::vector<std::string>> Masters() override {
    return std::vector<std::string>{"redis:6379"};
  }
  Result<redis::Reply> RunOn(const std::string& /*node*/, const redis::Command& /*cmd*/,
                             redis::CommandKind /*kind*/) override {
    RSC_CHECK(false);
    return MakeError(ErrorCode::kInternal, "unused");
  }
  std::string Describe() const override { return "simulated redis"; }

 private:
  static std::vector<Result<redis::Reply>> Fail(size_t n, ErrorCode code, const std::string& why) {
    return std::vector<Result<redis::Reply>>(n, MakeError(code, why));
  }
  // Probes what the producer is about to be told by Redis: a sealed shard (RS2) or a missing
  // key (D3) refusing an XADD.
  void Probe(const redis::Reply& reply) {
    client::XaddReply x;
    if (reply.IsNil()) {
      x.kind = client::XaddReply::Kind::kNil;
    } else if (reply.IsError()) {
      x.kind = client::XaddReply::Kind::kError;
      x.text = reply.str;
    } else {
      return;
    }
    if (!client::ProducerRuntime::IsStaleTarget(x)) return;
    p_.env_.world().probes().Hit(
        x.kind == client::XaddReply::Kind::kNil ? "publish_key_missing" : "publish_refused_sealed");
  }

  SimProducer& p_;
  uint64_t conn_epoch_ = 0;
};

class SimProducer::Platform : public client::Platform {
 public:
  explicit Platform(SimProducer& p) : p_(p) {}

  SyncPort& Sync() override { return p_.sync_; }
  TimeMs NowMs(bool /*round_up*/) override { return p_.LocalNow(); }
  int64_t NowUs() override { return p_.LocalNow() * 1000; }
  double Random() override { return p_.env_.world().rng().Unit(); }

  std::unique_ptr<Thread> StartThread(const char* /*name*/, std::function<void()> body) override {
    return p_.fibers_.StartThread(std::move(body));
  }
  const void* CurrentThread() override { return Fiber::Current(); }

  // One exchange over the simulated network, bounded by the client's timeout: the first of
  // the answer (a duplicate is ignored) and the timeout wins.
  client::HttpOutcome Request(const client::HttpCall& call) override {
    p_.NoteMetrics();  // the previous answer was taken in by now
    const std::string where = EndpointName(call.endpoint);
    if (p_.dead_) return client::HttpOutcome{0, "", "the process died", where};
    HttpRequest req;
    req.method = call.method;
    req.target = call.target;
    req.body = call.body;
    auto done = std::make_shared<bool>(false);
    auto outcome = std::make_shared<client::HttpOutcome>();
    Fiber* me = Fiber::Current();
    SimProducer& p = p_;
    auto finish = [&p, me, done, outcome](client::HttpOutcome o) {
      if (*done) return;
      *done = true;
      *outcome = std::move(o);
      p.fibers_.Wake(me);
    };
    p_.env_.SendHttp(
        p_.slot_.node, Slot(call.endpoint), std::move(req),
        [finish, where](const HttpResponse& resp) {
          finish(client::HttpOutcome{resp.status, resp.body,
                                     resp.status == 0 ? "connection failed" : "", where});
        });
    p_.env_.world().After(p_.p_.http_timeout_ms, [finish, where] {
      finish(client::HttpOutcome{0, "", "timed out", where});
    });
    p_.fibers_.ParkUntil(done);
    if (!*done) return client::HttpOutcome{0, "", "the process died", where};
    return *outcome;
  }

  std::string EndpointName(int endpoint) const override {
    return fmt::format("coordinator-{}", Slot(endpoint));
  }
  Result<std::unique_ptr<redis::Executor>> OpenRedis() override {
    if (p_.dead_) return MakeError(ErrorCode::kRedisUnavailable, "the process died");
    return std::unique_ptr<redis::Executor>(std::make_unique<Executor>(p_));
  }

  void ObserveRouting(const RoutingResponse& answer, TimeMs sent_ms) override {
    // The grant as the coordinator made it (S5 judges publishes against it), before any
    // mutant tampers with the answer.
    if (p_.dead_) return;
    HistEvent g = p_.Event(HistKind::kRouting);
    g.sent_us = (sent_ms - p_.offset_) * 1000;
    g.grant_ms = answer.routing_lease_ms;
    g.version = answer.metadata_version;
    g.lineage = answer.lineage;
    p_.env_.world().Emit(std::move(g));
    if (p_.slot_.by_stream && answer.generation > 0) {
      p_.env_.world().probes().Hit("stream_routing_resharded");
    }
  }
  void BeforeRouting(RoutingResponse& answer) override {
    p_.env_.world().mutant().OnRoutingAnswer(answer);
  }

 private:
  int Slot(int endpoint) const { return (endpoint + p_.endpoint_rotation_) % p_.p_.endpoint_count; }

  SimProducer& p_;
};

// ── the process ───────────────────────────────────────────────────────────────────────

SimProducer::SimProducer(Services& env, const ProducerParams& params, ProducerSlot& slot)
    : env_(env),
      p_(params),
      slot_(slot),
      name_(fmt::format("{}#{}", slot.node, ++slot.incarnations)),
      fibers_(env.world()),
      sync_(env.world(), nullptr, &fibers_),
      offset_(env.world().rng().Uniform(0, 1'000'000)),
      endpoint_rotation_(
          static_cast<int>(env.world().rng().Uniform(0, params.endpoint_count - 1))) {}

SimProducer::~SimProducer() {
  dead_ = true;
  fibers_.Kill();
  if (producer_) fibers_.Spawn([this] { producer_->Close(); });
  fibers_.RunToEnd(nullptr);
  producer_.reset();
}

TimeMs SimProducer::LocalNow() const { return env_.world().now() + offset_; }

HistEvent SimProducer::Event(HistKind kind) const {
  HistEvent e;
  e.kind = kind;
  e.proc = name_;
  return e;
}

void SimProducer::Start() {
  env_.world().Emit(Event(HistKind::kStart));
  auto store = slot_.version_store ? std::make_shared<Store>(*this) : nullptr;
  ProducerOptions options = OptionsOf(
      p_, slot_, endpoint_rotation_, [this](const PublishEvent& e) { OnPublished(e); },
      std::move(store));
  ProducerResult<std::unique_ptr<Producer>> made = client::ProducerAccess::Create(
      std::move(options), [this](const ProducerOptions&, client::CheckedEndpoints) {
        return std::make_unique<Platform>(*this);
      });
  RequireValidOptions(made.ok() ? std::nullopt : std::optional<std::string>(made.error().message),
                      "producer");
  producer_ = std::move(made).value();
  // Two application threads publish, each at half the process's rate.
  for (int i = 0; i < 2; ++i) fibers_.Spawn([this] { PublisherMain(); });
}

void SimProducer::Crash(const std::string& why) {
  if (dead_) return;
  dead_ = true;
  HistEvent e = Event(HistKind::kCrash);
  e.detail = why;
  env_.world().Emit(std::move(e));
  // Every fiber finds its ports failing; the producer is closed so its refresh thread ends.
  fibers_.Kill();
  fibers_.WakeAll();
  if (producer_) fibers_.Spawn([this] { producer_->Close(); });
}

void SimProducer::JumpClock(TimeMs forward_ms) {
  if (dead_ || forward_ms <= 0) return;
  offset_ += forward_ms;
  env_.world().Fault("skew",
                     fmt::format("{} monotonic clock jumps {} ms forward", name_, forward_ms));
  sync_.EndTimedWaits();  // the refresh thread's wait, on a steady clock, would end now
}

void SimProducer::NoteMetrics() {
  if (dead_ || !producer_) return;
  const ProducerMetrics m = producer_->Metrics();
  World& w = env_.world();
  if (m.sync_adoptions > seen_sync_adoptions_) w.probes().Hit("routing_sync_adopted");
  if (m.seal_refresh_waits > seen_seal_waits_) w.probes().Hit("publish_waits_for_routing");
  seen_sync_adoptions_ = m.sync_adoptions;
  seen_seal_waits_ = m.seal_refresh_waits;
}

// ── the application ───────────────────────────────────────────────────────────────────

void SimProducer::PublisherMain() {
  World& w = env_.world();
  while (!dead_ && publishing_) {
    fibers_.Sleep(w.rng().Uniform(2 * p_.publish_min_ms, 2 * p_.publish_max_ms));
    if (dead_ || !publishing_) return;
    PublishOne();
  }
}

void SimProducer::PublishOne() {
  World& w = env_.world();
  // One call publishes one to three keys, each once (a key's next message waits for the
  // previous one's outcome: per-key order without relying on the call's).
  const int wanted = static_cast<int>(w.rng().Uniform(1, 3));
  std::vector<ProducerMessage> messages;
  std::vector<int64_t> seqs;
  for (int n = 0; n < wanted; ++n) {
    const int k = static_cast<int>(w.rng().Uniform(0, p_.keys - 1));
    std::string key = fmt::format("k{}-{}", slot_.index, k);
    if (in_flight_.count(key)) continue;
    in_flight_.insert(key);
    int64_t& next = slot_.next_seq[key];
    if (next == 0) next = 1;
    seqs.push_back(next);
    messages.push_back(
        ProducerMessage{key, {{"key", key}, {"seq", std::to_string(next)}, {"producer", name_}}});
  }
  if (messages.empty()) return;
  if (messages.size() > 1) w.probes().Hit("publish_batch");
  const std::vector<ProducerResult<std::string>> results = producer_->PublishBatch(messages);
  for (size_t i = 0; i < results.size(); ++i) {
    in_flight_.erase(messages[i].key);
    if (dead_ || results[i].ok()) continue;
    // Refused, unknown or not sent: the same (key, seq) is published again later.
    const ProducerErrorCode code = results[i].error().code;
    if (code == ProducerErrorCode::kRoutingExpired) w.probes().Hit("publish_refused_expired");
    HistEvent e = Event(HistKind::kPublishRefused);
    e.key = messages[i].key;
    e.seq = seqs[i];
    e.detail = std::string(ProducerErrorCodeName(code));
    w.Emit(std::move(e));
  }
  NoteMetrics();
}

void SimProducer::OnPublished(const PublishEvent& event) {
  if (dead_) return;
  World& w = env_.world();
  int64_t seq = 0;
  for (const auto& [field, value] : event.fields) {
    if (field == "seq") seq = std::stoll(value);
  }
  ++slot_.next_seq[event.key];
  HistEvent e = Event(HistKind::kPublish);
  e.key = event.key;
  e.seq = seq;
  e.shard = event.shard;
  e.stream = event.stream;
  e.id = event.id;
  e.version = event.metadata_version;
  e.lease_end_us = event.routing_lease_end_us - write_offset_ * 1000;
  const std::optional<StreamId> id = StreamId::Parse(e.id);
  RSC_CHECK(id.has_value());
  w.EmitAt(std::move(e), write_sent_);
  env_.NotePublished(event.stream, *id, event.key, seq);
}

}  // namespace rsc::sim
