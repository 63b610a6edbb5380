#include "sim/sim_producer.h"

#include <fmt/format.h>

#include "client/client_options.h"
#include "client/client_status.h"
#include "core/check.h"
#include "core/protocol_json.h"
#include "sim/wire_redis.h"

namespace rsc::sim {

namespace {

// The options a simulated producer process is configured with, as an application writes them
// (include/rsc/producer.h); the library's checks pass them, as in Producer::Create.
ProducerOptions OptionsOf(const ProducerParams& p, const ProducerSlot& slot) {
  using std::chrono::milliseconds;
  ProducerOptions o;
  o.coordinator_endpoints = SimCoordinatorEndpoints(p.endpoint_count);
  o.stream = p.group.stream;
  o.group = slot.by_stream ? "" : p.group.group;  // "": the stream's routing (D4)
  o.redis_url = kSimRedisUrl;
  o.http_timeout = milliseconds(p.http_timeout_ms);
  o.retry_initial = milliseconds(100);
  o.retry_max = milliseconds(5000);
  o.endpoint_backoff = milliseconds(100);
  client::CheckedEndpoints checked;
  const std::optional<std::string> error = client::CheckProducerOptions(o, &checked);
  RequireValidOptions(error, "producer");
  return o;
}

}  // namespace

SimProducer::SimProducer(Services& env, const ProducerParams& params, ProducerSlot& slot)
    : env_(env),
      p_(params),
      slot_(slot),
      name_(fmt::format("{}#{}", slot.node, ++slot.incarnations)),
      offset_(env.world().rng().Uniform(0, 1'000'000)),
      options_(OptionsOf(params, slot)),
      // The library's derivation, as in Producer::Create; the first refresh round starts on
      // a drawn endpoint (each process lists the coordinators in its own order).
      runtime_(client::ProducerRuntimeOptionsOf(
                   options_, params.endpoint_count,
                   static_cast<int>(env.world().rng().Uniform(0, params.endpoint_count - 1))),
               this) {
  if (slot_.version_store) runtime_.SeedObserved(slot_.stored);
}

TimeMs SimProducer::LocalNow() const { return env_.world().now() + offset_; }

TimeMs SimProducer::NowMs(bool /*round_up*/) { return LocalNow(); }

double SimProducer::Random() { return env_.world().rng().Unit(); }

ProducerMetrics SimProducer::Metrics() const {
  return client::ProducerMetricsOf(
      options_, runtime_, LocalNow(),
      client::ProducerPortFacts{
          .publishes_ok = publishes_ok_,
          .publishes_failed = publishes_failed_,
          .seal_refresh_waits = seal_waits_,
          .current_endpoint = fmt::format("coordinator-{}", runtime_.current_endpoint()),
      });
}

HistEvent SimProducer::Event(HistKind kind) const {
  HistEvent e;
  e.kind = kind;
  e.proc = name_;
  return e;
}

void SimProducer::Start() {
  env_.world().Emit(Event(HistKind::kStart));
  Tick();
  SchedulePublish();
}

void SimProducer::Crash(const std::string& why) {
  if (dead_) return;
  dead_ = true;
  HistEvent e = Event(HistKind::kCrash);
  e.detail = why;
  env_.world().Emit(std::move(e));
}

void SimProducer::JumpClock(TimeMs forward_ms) {
  if (dead_ || forward_ms <= 0) return;
  offset_ += forward_ms;
  env_.world().Fault("skew",
                     fmt::format("{} monotonic clock jumps {} ms forward", name_, forward_ms));
  Tick();
}

void SimProducer::Tick() {
  if (dead_) return;
  runtime_.Tick();
  ArmTimer();
}

void SimProducer::ArmTimer() {
  const std::optional<TimeMs> next = runtime_.NextWakeupMs();
  if (!next) {
    timer_at_.reset();
    ++timer_gen_;
    return;
  }
  World& w = env_.world();
  const TimeMs at = std::max(w.now(), *next - offset_);
  if (timer_at_ && *timer_at_ == at) return;
  timer_at_ = at;
  const uint64_t gen = ++timer_gen_;
  w.At(at, [this, gen] {
    if (dead_ || gen != timer_gen_) return;
    timer_at_.reset();
    Tick();
  });
}

// ── HTTP: the simulated network, with the client's timeout ─────────────────────────

void SimProducer::Http(uint64_t call, const client::HttpCall& request) {
  HttpRequest req;
  req.method = request.method;
  req.target = request.target;
  req.body = request.body;
  const std::string where = fmt::format("coordinator-{}", request.endpoint);
  http_in_flight_.insert(call);
  auto outcome = [this, call](client::HttpOutcome o) {
    if (dead_ || http_in_flight_.erase(call) == 0) return;  // late: already timed out
    World& w = env_.world();
    const int64_t adopted = runtime_.core().Metrics(LocalNow()).sync_adoptions;
    runtime_.OnHttp(call, std::move(o));
    if (runtime_.core().Metrics(LocalNow()).sync_adoptions > adopted) {
      w.probes().Hit("routing_sync_adopted");
    }
    if (slot_.version_store) slot_.stored = runtime_.core().observed();
    ArmTimer();
  };
  env_.SendHttp(slot_.node, request.endpoint, std::move(req),
                [outcome, where](const HttpResponse& resp) {
                  outcome(client::HttpOutcome{resp.status, resp.body,
                                              resp.status == 0 ? "connection failed" : "", where});
                });
  env_.world().After(p_.http_timeout_ms, [outcome, where] {
    outcome(client::HttpOutcome{0, "", "timed out", where});
  });
}

void SimProducer::SaveVersion(const ObservedVersion& version) {
  if (slot_.version_store) slot_.stored = version;
}

void SimProducer::ObserveRouting(const RoutingResponse& answer, TimeMs sent_ms) {
  // The grant as the coordinator made it (S5 judges publishes against it), before any mutant
  // tampers with the answer.
  HistEvent g = Event(HistKind::kRouting);
  g.sent_us = (sent_ms - offset_) * 1000;
  g.grant_ms = answer.routing_lease_ms;
  g.version = answer.metadata_version;
  g.lineage = answer.lineage;
  env_.world().Emit(std::move(g));
  if (slot_.by_stream && answer.generation > 0) {
    env_.world().probes().Hit("stream_routing_resharded");
  }
}

void SimProducer::BeforeRouting(RoutingResponse& answer) {
  env_.world().mutant().OnRoutingAnswer(answer);
}

// ── the workload ──────────────────────────────────────────────────────────────────

void SimProducer::SchedulePublish() {
  World& w = env_.world();
  w.After(w.rng().Uniform(p_.publish_min_ms, p_.publish_max_ms), [this] {
    if (dead_ || !publishing_) return;
    PublishOne();
    SchedulePublish();
  });
}

void SimProducer::PublishOne() {
  World& w = env_.world();
  // One call publishes one to three keys, each once (a key's next message waits for the
  // previous one's outcome: per-key order without relying on the call's).
  const int wanted = static_cast<int>(w.rng().Uniform(1, 3));
  auto call = std::make_shared<Call>();
  call->keys.reserve(static_cast<size_t>(wanted));
  for (int n = 0; n < wanted; ++n) {
    const int k = static_cast<int>(w.rng().Uniform(0, p_.keys - 1));
    std::string key = fmt::format("k{}-{}", slot_.index, k);
    if (in_flight_.count(key)) continue;
    in_flight_.insert(key);
    int64_t& next = slot_.next_seq[key];
    if (next == 0) next = 1;
    call->seqs.push_back(next);
    call->fields.push_back({{"key", key}, {"seq", std::to_string(next)}, {"producer", name_}});
    call->keys.push_back(std::move(key));
  }
  if (call->keys.empty()) return;
  std::vector<std::string_view> keys(call->keys.begin(), call->keys.end());
  std::vector<const StreamFields*> fields;
  for (const StreamFields& f : call->fields) fields.push_back(&f);
  call->call = std::make_unique<client::PublishCall>(std::move(keys), std::move(fields));
  if (call->keys.size() > 1) w.probes().Hit("publish_batch");
  Continue(call);
}

// Drives the library's PublishCall (client/publish_call.h) as producer.cc does: route at one
// instant, write unless the routing lease ended first, wait for a newer routing while
// entries refused by a stale target may still go.
void SimProducer::Continue(const std::shared_ptr<Call>& call) {
  if (dead_) return;
  client::PublishCall& pc = *call->call;
  while (!pc.done()) {
    if (pc.waiting()) {
      const auto& routing = runtime_.core().routing();
      const client::PublishCall::Wait wait = pc.OnWait(
          LocalNow(), routing ? std::optional<int64_t>(routing->metadata_version) : std::nullopt);
      if (wait.what != client::PublishCall::Wait::What::kRefresh) continue;
      env_.world().probes().Hit("publish_waits_for_routing");
      ++seal_waits_;
      runtime_.OnStaleTarget();  // RS2, D3: a refresh at once
      Tick();
      env_.world().After(wait.sleep_ms, [this, call] { Continue(call); });
      return;
    }
    std::vector<ProducerResult<client::RouteTarget>> routes = runtime_.Route(pc.RouteKeys());
    Tick();                  // Route may have asked for a refresh (PR2)
    bool nomkstream = true;  // the simulated Redis has it (7.x)
    std::vector<redis::KeyedCommand> keyed = pc.Write(std::move(routes), OkStatus(), nomkstream);
    if (keyed.empty()) continue;
    if (LocalNow() >= pc.write_lease_end_ms()) {
      // PR5: the lease ended before the write: nothing is sent.
      std::vector<Result<redis::Reply>> unsent(
          keyed.size(), MakeError(ErrorCode::kRedisUnavailable, "not sent: the lease ended"));
      Record(*call, pc.OnReplies(std::move(unsent), /*lease_ended=*/true, &nomkstream), 0, 0);
      continue;
    }
    std::vector<redis::Command> cmds;
    for (redis::KeyedCommand& k : keyed) cmds.push_back(std::move(k.cmd));
    const size_t n = cmds.size();
    const TimeMs sent = env_.world().now();
    // The local clock's offset now: a lease end is turned into simulated time as the producer
    // believed it when it wrote (a clock jump before the reply must not move it).
    const TimeMs offset = offset_;
    auto result = std::make_shared<std::vector<redis::Reply>>();
    env_.SendRedis(slot_.node, conn_epoch_, WirePipeline(std::move(cmds), WireClient{}, result),
                   [this, call, result, n, sent, offset](const StreamReply& r) {
                     if (dead_) return;
                     std::vector<Result<redis::Reply>> replies;
                     if (r.ok()) {
                       for (redis::Reply& reply : *result) replies.emplace_back(std::move(reply));
                     } else {
                       // No reply (a failover reset the connection, or it timed out): each
                       // XADD may have been written.
                       if (r.error.rfind(kConnError, 0) == 0) conn_epoch_ = 0;  // reconnect
                       replies.assign(n, MakeError(ErrorCode::kUnknownResult, r.error));
                     }
                     bool nomkstream = true;
                     Record(*call, call->call->OnReplies(std::move(replies), false, &nomkstream),
                            sent, offset);
                     Continue(call);
                   });
    return;
  }
  Finish(*call);
}

void SimProducer::Record(Call& call, const client::PublishCall::Outcome& outcome, TimeMs sent,
                         TimeMs offset) {
  World& w = env_.world();
  if (outcome.missing > 0) w.probes().Hit("publish_key_missing");
  if (outcome.sealed > 0) w.probes().Hit("publish_refused_sealed");
  for (size_t i : outcome.written) {
    const client::RouteTarget& route = call.call->route(i);
    const std::string& key = call.keys[i];
    const int64_t seq = call.seqs[i];
    ++slot_.next_seq[key];
    HistEvent e = Event(HistKind::kPublish);
    e.key = key;
    e.seq = seq;
    e.shard = route.shard;
    e.stream = route.stream;
    e.id = call.call->result(i).value();
    e.version = route.metadata_version;
    e.lease_end_us = (route.lease_end_ms - offset) * 1000;
    const std::optional<StreamId> id = StreamId::Parse(e.id);
    RSC_CHECK(id.has_value());
    w.EmitAt(std::move(e), sent);
    env_.NotePublished(route.stream, *id, key, seq);
  }
}

void SimProducer::Finish(Call& call) {
  World& w = env_.world();
  std::vector<ProducerResult<std::string>> results = call.call->TakeResults();
  for (size_t i = 0; i < results.size(); ++i) {
    in_flight_.erase(call.keys[i]);
    ++(results[i].ok() ? publishes_ok_ : publishes_failed_);
    if (results[i].ok()) continue;
    // Refused, unknown or not sent: the same (key, seq) is published again later.
    const ProducerErrorCode code = results[i].error().code;
    if (code == ProducerErrorCode::kRoutingExpired) w.probes().Hit("publish_refused_expired");
    HistEvent e = Event(HistKind::kPublishRefused);
    e.key = call.keys[i];
    e.seq = call.seqs[i];
    e.detail = std::string(ProducerErrorCodeName(code));
    w.Emit(std::move(e));
  }
}

}  // namespace rsc::sim
