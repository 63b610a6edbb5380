// The producer as the library runs it: client::ProducerRuntime (the runtime the simulator runs
// too: refresh rounds over the endpoints, routing, what an XADD's reply means) over
// production ports — a refresh thread that performs its HTTP requests with the HTTP
// transport, and XADDs through the connection layer's executor (src/redis/executor.h): one
// pipeline per Redis node — one server, or each slot's master on a Redis Cluster (detected
// on the first publish; MOVED/ASK/TRYAGAIN followed per entry, which is safe since a
// redirected XADD did not run).
//
// Locks: `redis_mu_` serializes use of the Redis connections; `mu_` guards the runtime and the
// refresh state. Order: redis_mu_ before mu_. The refresh thread takes only mu_ and never
// holds it during I/O; publishes hold mu_ only to route.

#include "rsc/producer.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "client/client_options.h"
#include "client/client_status.h"
#include "client/http_transport.h"
#include "client/producer_core.h"
#include "client/producer_runtime.h"
#include "client/publish_call.h"
#include "core/protocol.h"
#include "core/protocol_json.h"
#include "redis/cluster.h"
#include "redis/connection.h"
#include "redis/redis_url.h"

namespace rsc {

namespace {

using client::HttpEndpoint;
using client::HttpReply;
using client::HttpTransport;
using client::PercentEncode;
using client::ProducerCore;
using client::RouteErrorKind;
using client::RouteResult;
using client::RouteTarget;
using client::SteadyNowMs;
using client::SteadyNowUs;

ProducerError Err(ProducerErrorCode code, std::string message) {
  return ProducerError{code, std::move(message)};
}

using redis::CommandKind;
using redis::ConnectionOptions;
using redis::Reply;

}  // namespace

class Producer::Impl : public client::ProducerPorts {
 public:
  Impl(ProducerOptions options, std::vector<HttpEndpoint> endpoints, ConnectionOptions redis)
      : options_(std::move(options)),
        runtime_(client::ProducerRuntimeOptionsOf(options_, static_cast<int>(endpoints.size()),
                                                  /*first_endpoint=*/0),
                 this),
        redis_options_(std::move(redis)),
        headers_(client::BearerHeaders(options_.coordinator_token)),
        rng_(std::random_device{}()) {
    for (HttpEndpoint& ep : endpoints) {
      transports_.push_back(std::make_unique<HttpTransport>(std::move(ep), options_.http_timeout));
    }
  }

  ~Impl() override { Close(); }

  void SeedObserved(const ObservedVersion& v) {
    std::lock_guard<std::mutex> lock(mu_);
    runtime_.SeedObserved(v);
  }

  void Start() {
    thread_ = std::thread([this] { RefreshLoop(); });
    pthread_setname_np(thread_.native_handle(), "rsc-refresh");
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(redis_mu_);
    redis_.reset();
  }

  // ── client::ProducerPorts (called under mu_) ──
  TimeMs NowMs(bool round_up) override {
    return round_up ? client::SteadyNowMsCeil() : SteadyNowMs();
  }
  // Performed by the refresh thread once mu_ is released (RefreshLoop).
  void Http(uint64_t call, const client::HttpCall& request) override {
    pending_http_.emplace(call, request);
  }
  double Random() override { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  void SaveVersion(const ObservedVersion& version) override { pending_save_ = version; }

  bool WaitForRouting(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return closed_ || runtime_.has_routing(); }) &&
           runtime_.has_routing();
  }

  // Routes all keys at one instant. Waits for the first routing if there is none yet.
  // Requires redis_mu_ held by the caller (so the lease is checked right before sending).
  std::vector<ProducerResult<RouteTarget>> RouteAll(const std::vector<std::string_view>& keys) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!runtime_.has_routing() && !closed_) {
      cv_.wait_for(lock, options_.first_routing_wait,
                   [&] { return closed_ || runtime_.has_routing(); });
    }
    if (closed_) {
      return std::vector<ProducerResult<RouteTarget>>(
          keys.size(), Err(ProducerErrorCode::kClosed, "producer is closed"));
    }
    std::vector<ProducerResult<RouteTarget>> out = runtime_.Route(keys);
    const bool wake = std::any_of(out.begin(), out.end(), [](const auto& r) {
      return !r.ok() && r.error().code == ProducerErrorCode::kStaleRouting;
    });
    lock.unlock();
    if (wake) cv_.notify_all();  // PR2: the refresh thread re-evaluates at once
    return out;
  }

  // Drives a PublishCall (client/publish_call.h: every decision of the call is there): routes
  // under mu_, writes over the executor with the routing-lease check right before each
  // pipeline, and waits for a newer routing on cv_.
  std::vector<ProducerResult<std::string>> PublishBatch(
      const std::vector<std::string_view>& keys, const std::vector<const StreamFields*>& fields) {
    if (keys.empty()) return {};
    if (IsClosed()) {
      return std::vector<ProducerResult<std::string>>(
          keys.size(), Err(ProducerErrorCode::kClosed, "producer is closed"));
    }
    client::PublishCall call(keys, fields);
    std::lock_guard<std::mutex> redis_lock(redis_mu_);
    while (!call.done()) {
      if (call.waiting()) {
        WaitForNewRouting(call);
        continue;
      }
      // Opened before routing; the connections come up before the routing lease is checked
      // again right before each pipeline is written (before_write below).
      const Status opened = OpenRedis();
      bool nomkstream = nomkstream_.load();
      std::vector<redis::KeyedCommand> cmds =
          call.Write(RouteAll(call.RouteKeys()), opened, nomkstream);
      if (cmds.empty()) continue;
      // Per node one pipeline, commands in input order: entries of one key (one shard, one
      // slot) keep their order. On a cluster each goes to its slot's master (SPEC CL1).
      const TimeMs lease_end_ms = call.write_lease_end_ms();
      bool lease_ended = false;
      const int64_t sent_us = SteadyNowUs();
      std::vector<Result<Reply>> replies = redis_->RunBatch(cmds, CommandKind::kWrite, [&] {
        lease_ended = lease_ended || SteadyNowMs() >= lease_end_ms;
        return !lease_ended;
      });
      const client::PublishCall::Outcome outcome =
          call.OnReplies(std::move(replies), lease_ended, &nomkstream);
      if (!nomkstream) nomkstream_.store(false);
      if (!options_.on_publish) continue;
      for (size_t i : outcome.written) {
        const client::RouteTarget& route = call.route(i);
        ReportPublished(PublishEvent{std::string(keys[i]), *fields[i], route.shard, route.stream,
                                     call.result(i).value(), route.metadata_version, sent_us,
                                     SteadyNowUs(), route.lease_end_ms * 1000});
      }
    }
    std::vector<ProducerResult<std::string>> results = call.TakeResults();
    return Count(results);
  }

  // Entries refused by a stale target wait for a routing newer than the one they were
  // refused under: a refresh is asked for again every kSealRetryMs (PR2 spacing applies).
  void WaitForNewRouting(client::PublishCall& call) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (closed_) return call.GiveUp();
      const auto& routing = runtime_.core().routing();
      const client::PublishCall::Wait w =
          call.OnWait(SteadyNowMs(),
                      routing ? std::optional<int64_t>(routing->metadata_version) : std::nullopt);
      if (w.what != client::PublishCall::Wait::What::kRefresh) return;
      runtime_.OnStaleTarget();
      seal_retries_.fetch_add(1);
      cv_.notify_all();  // the refresh thread re-evaluates at once
      cv_.wait_for(lock, std::chrono::milliseconds(w.sleep_ms));
    }
  }

  std::vector<ProducerResult<std::string>> Count(
      std::vector<ProducerResult<std::string>>& results) {
    for (const auto& r : results) (r.ok() ? publishes_ok_ : publishes_failed_).fetch_add(1);
    return std::move(results);
  }

  // Opens the executor on first use (auto-detecting a cluster); a failure is retried on the
  // next publish, so a producer starts while Redis is down. Requires redis_mu_.
  Status OpenRedis() {
    if (redis_) return OkStatus();
    auto opened = redis::OpenExecutor(redis_options_, redis::ClusterMode::kAuto,
                                      /*pool_size=*/1, options_.redis_timeout);
    if (!opened.ok()) return opened.error();
    redis_ = std::move(opened).value();
    return OkStatus();
  }

  void ReportPublished(const PublishEvent& event) const {
    try {
      options_.on_publish(event);
    } catch (...) {  // NOLINT(bugprone-empty-catch): documented as swallowed
    }
  }

  ProducerMetrics Metrics() const {
    std::lock_guard<std::mutex> lock(mu_);
    // The clock Publish decides with (rounded up): a refused publish never sits next to a
    // metric that still shows lease left (seen as 1 ms remaining on a loaded machine).
    return client::ProducerMetricsOf(
        options_, runtime_, client::SteadyNowMsCeil(),
        client::ProducerPortFacts{
            .publishes_ok = publishes_ok_.load(),
            .publishes_failed = publishes_failed_.load(),
            .seal_refresh_waits = seal_retries_.load(),
            .current_endpoint = transports_[runtime_.current_endpoint()]->endpoint().ToString(),
        });
  }

 private:
  // The refresh thread: runs the runtime's timers and performs its HTTP requests and version
  // saves outside mu_.
  void RefreshLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!closed_) {
      runtime_.Tick();
      if (pending_http_) {
        const auto [call, request] = std::move(*pending_http_);
        pending_http_.reset();
        lock.unlock();
        HttpTransport& t = *transports_[static_cast<size_t>(request.endpoint)];
        const HttpReply reply = t.Request(request.method, request.target, request.body, headers_);
        lock.lock();
        runtime_.OnHttp(call, client::HttpOutcome{reply.status, reply.body, reply.error,
                                                  t.endpoint().ToString()});
        cv_.notify_all();  // publishers waiting for the first routing
        SaveVersion(lock);
        continue;
      }
      const std::optional<TimeMs> wake = runtime_.NextWakeupMs();
      const TimeMs wait = wake ? std::clamp<TimeMs>(*wake - SteadyNowMs(), 1, 1000) : 1000;
      cv_.wait_for(lock, std::chrono::milliseconds(wait));
    }
  }

  // C5 (outside mu_): a failed save is retried after the next refresh; the in-memory value
  // still rules.
  void SaveVersion(std::unique_lock<std::mutex>& lock) {
    if (!pending_save_ || !options_.version_store) return;
    const ObservedVersion v = *pending_save_;
    lock.unlock();
    std::string error;
    const bool saved = options_.version_store->Save(
        options_.stream, client::ProducerVersionStoreGroup(options_), v, &error);
    lock.lock();
    if (saved && pending_save_ == v) pending_save_.reset();
  }

  bool IsClosed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  const ProducerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // routing changes, close, PR2 wake-ups (with mu_)
  client::ProducerRuntime runtime_;  // guarded by mu_
  bool closed_ = false;              // guarded by mu_
  std::optional<std::pair<uint64_t, client::HttpCall>> pending_http_;  // guarded by mu_
  std::optional<ObservedVersion> pending_save_;                        // guarded by mu_

  std::mutex redis_mu_;
  const ConnectionOptions redis_options_;
  std::unique_ptr<redis::Executor> redis_;  // guarded by redis_mu_; opened on first publish

  // Used by the refresh thread only (rng_: under mu_).
  std::vector<std::unique_ptr<HttpTransport>> transports_;
  const std::vector<std::pair<std::string, std::string>> headers_;  // the coordinator token
  std::mt19937_64 rng_;
  std::thread thread_;

  std::atomic<int64_t> publishes_ok_{0};
  std::atomic<int64_t> publishes_failed_{0};
  std::atomic<int64_t> seal_retries_{0};
  std::atomic<bool> nomkstream_{true};  // false once the server turned NOMKSTREAM down
};

ProducerResult<std::unique_ptr<Producer>> Producer::Create(ProducerOptions options) {
  auto invalid = [](std::string m) { return Err(ProducerErrorCode::kInvalidArgument, m); };
  client::CheckedEndpoints checked;
  if (auto error = client::CheckProducerOptions(options, &checked)) return invalid(*error);
  ConnectionOptions redis = ConnectionOptions::FromUrl(checked.redis);
  redis.connect_timeout = options.redis_timeout;
  redis.command_timeout = options.redis_timeout;
  std::string error;
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, client::ProducerVersionStoreGroup(options),
                                   &seed, &error)) {
    return invalid("cannot load the observed metadata version: " + error);
  }
  auto impl =
      std::make_unique<Impl>(std::move(options), std::move(checked.coordinators), std::move(redis));
  impl->SeedObserved(seed);
  impl->Start();
  return std::unique_ptr<Producer>(new Producer(std::move(impl)));
}

Producer::Producer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Producer::~Producer() { Close(); }
void Producer::Close() { impl_->Close(); }

ProducerResult<std::string> Producer::Publish(std::string_view key, const StreamFields& fields) {
  return impl_->PublishBatch({key}, {&fields}).front();
}

std::vector<ProducerResult<std::string>> Producer::PublishBatch(
    const std::vector<ProducerMessage>& messages) {
  std::vector<std::string_view> keys;
  std::vector<const StreamFields*> fields;
  keys.reserve(messages.size());
  fields.reserve(messages.size());
  for (const ProducerMessage& m : messages) {
    keys.push_back(m.key);
    fields.push_back(&m.fields);
  }
  return impl_->PublishBatch(keys, fields);
}

bool Producer::WaitForRouting(std::chrono::milliseconds timeout) {
  return impl_->WaitForRouting(timeout);
}

ProducerMetrics Producer::Metrics() const { return impl_->Metrics(); }

}  // namespace rsc
