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

#include "client/http_transport.h"
#include "client/producer_core.h"
#include "client/producer_runtime.h"
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

// XADD key NOMKSTREAM * f v …: a missing key is stale routing, never a stream created
// anew (SPEC D3). Without NOMKSTREAM (Redis < 6.2) a missing key is created.
std::vector<std::string> XaddArgs(const std::string& stream, const StreamFields& fields,
                                  bool nomkstream) {
  std::vector<std::string> args{"XADD", stream};
  if (nomkstream) args.emplace_back("NOMKSTREAM");
  args.emplace_back("*");
  for (const auto& [f, v] : fields) {
    args.push_back(f);
    args.push_back(v);
  }
  return args;
}

// Redis < 6.2 parses NOMKSTREAM as the entry ID.
bool UnknownNoMkStream(const std::string& error) {
  return error.find("Invalid stream ID") != std::string::npos ||
         error.find("syntax error") != std::string::npos;
}

// Where a producer's observed version lives in its VersionStore: under its group, or under
// kStreamRoutingGroup when it routes by the stream (a layout version, SPEC D4).
std::string VersionStoreGroup(const std::string& group) {
  return group.empty() ? std::string(kStreamRoutingGroup) : group;
}

}  // namespace

class Producer::Impl : public client::ProducerPorts {
 public:
  Impl(ProducerOptions options, std::vector<HttpEndpoint> endpoints, ConnectionOptions redis)
      : options_(std::move(options)),
        runtime_(
            client::ProducerRuntimeOptions{
                .stream = options_.stream,
                .group = options_.group,
                .endpoint_count = static_cast<int>(endpoints.size()),
                .first_endpoint = 0,
                .endpoint_backoff_ms = options_.endpoint_backoff.count(),
                .core = client::ProducerCoreOptions{options_.retry_initial.count(),
                                                    options_.retry_max.count(), 50}},
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

  std::vector<ProducerResult<std::string>> PublishBatch(
      const std::vector<std::string_view>& keys, const std::vector<const StreamFields*>& fields) {
    if (keys.empty()) return {};
    if (IsClosed()) {
      return std::vector<ProducerResult<std::string>>(
          keys.size(), Err(ProducerErrorCode::kClosed, "producer is closed"));
    }
    std::vector<ProducerResult<std::string>> results(
        keys.size(), Err(ProducerErrorCode::kUnknownResult, "not attempted"));
    std::vector<size_t> todo;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (fields[i]->empty()) {
        results[i] = Err(ProducerErrorCode::kInvalidArgument,
                         "a stream entry needs at least one field/value pair");
      } else {
        todo.push_back(i);
      }
    }
    std::lock_guard<std::mutex> redis_lock(redis_mu_);
    // RS2, D3: entries refused by a sealed shard or a missing key were not written; they go
    // again, in input order (entries of one key keep their order), on the routing that
    // follows — while the routing lease they were routed under lasts. The caller sees no
    // failure.
    std::optional<TimeMs> retry_until;
    while (!todo.empty()) {
      Attempt attempt = SendOnce(keys, fields, todo, results);
      if (!attempt.again.empty()) {
        // Sent again at once, with the stale targets among them if any (input order).
        attempt.again.insert(attempt.again.end(), attempt.sealed.begin(), attempt.sealed.end());
        std::sort(attempt.again.begin(), attempt.again.end());
        todo = std::move(attempt.again);
        continue;
      }
      if (attempt.sealed.empty()) break;
      if (!retry_until) retry_until = attempt.lease_end_ms;
      if (!WaitForNewRouting(attempt.version, *retry_until)) break;
      todo = std::move(attempt.sealed);
    }
    return Count(results);
  }

  struct Attempt {
    std::vector<size_t> again;   // indices to send again at once (NOMKSTREAM unknown)
    std::vector<size_t> sealed;  // indices refused by a stale target (sealed, or no key)
    int64_t version = 0;         // the routing version they were routed under
    TimeMs lease_end_ms = 0;     // and its lease end
  };

  // One routing and one pipelined XADD per entry of `todo`. Requires redis_mu_.
  Attempt SendOnce(const std::vector<std::string_view>& keys,
                   const std::vector<const StreamFields*>& fields, const std::vector<size_t>& todo,
                   std::vector<ProducerResult<std::string>>& results) {
    Attempt out;
    // Opened before routing; the connections come up before the routing lease is checked
    // again right before each pipeline is written (before_write below).
    const Status opened = OpenRedis();
    std::vector<std::string_view> todo_keys;
    for (size_t i : todo) todo_keys.push_back(keys[i]);
    std::vector<ProducerResult<RouteTarget>> routes = RouteAll(todo_keys);
    const bool nomkstream = nomkstream_.load();
    std::vector<redis::KeyedCommand> cmds;
    std::vector<size_t> sent;  // cmds[k] publishes keys[todo[sent[k]]]
    TimeMs lease_end_ms = std::numeric_limits<TimeMs>::max();
    for (size_t j = 0; j < todo.size(); ++j) {
      const size_t i = todo[j];
      if (!routes[j].ok()) {
        results[i] = routes[j].error();
        continue;
      }
      if (!opened.ok()) {
        results[i] = Err(ProducerErrorCode::kRedisUnavailable, opened.error().message);
        continue;
      }
      const RouteTarget& route = routes[j].value();
      cmds.push_back({route.stream, XaddArgs(route.stream, *fields[i], nomkstream)});
      sent.push_back(j);
      lease_end_ms = std::min(lease_end_ms, route.lease_end_ms);
    }
    if (cmds.empty()) return out;
    // Per node one pipeline, commands in input order: entries of one key (one shard, one
    // slot) keep their order. On a cluster each goes to its slot's master (SPEC CL1).
    bool lease_ended = false;
    const int64_t sent_us = SteadyNowUs();
    std::vector<Result<Reply>> replies = redis_->RunBatch(cmds, CommandKind::kWrite, [&] {
      lease_ended = lease_ended || SteadyNowMs() >= lease_end_ms;
      return !lease_ended;
    });
    for (size_t k = 0; k < cmds.size(); ++k) {
      const size_t i = todo[sent[k]];
      const RouteTarget& route = routes[sent[k]].value();
      Result<Reply>& r = replies[k];
      if (!r.ok() && r.error().code != ErrorCode::kUnknownResult) {
        // Never sent: the connection failed first, or the routing lease ended meanwhile.
        results[i] = lease_ended
                         ? Err(ProducerErrorCode::kStaleRouting,
                               "not sent: the routing lease ended while connecting to Redis")
                         : Err(ProducerErrorCode::kRedisUnavailable, r.error().message);
        continue;
      }
      client::XaddReply reply;
      if (!r.ok()) {
        reply = {client::XaddReply::Kind::kNoReply, r.error().message};
      } else if (r->IsNil()) {
        reply = {client::XaddReply::Kind::kNil, "nil"};
      } else if (nomkstream && r->IsError() && UnknownNoMkStream(r->str)) {
        // Redis < 6.2 took NOMKSTREAM for an ID: nothing was written. Send without it from
        // now on (a missing key is then created, as before D3).
        nomkstream_.store(false);
        out.again.push_back(i);
        continue;
      } else if (r->IsString() || r->IsStatus()) {
        reply = {client::XaddReply::Kind::kId, std::move(r->str)};
      } else if (r->IsError()) {
        reply = {client::XaddReply::Kind::kError, std::move(r->str)};
      } else {
        reply = {client::XaddReply::Kind::kUnexpected, r->DebugString()};
      }
      results[i] = client::ProducerRuntime::PublishOutcome(reply, route.stream);
      if (client::ProducerRuntime::IsStaleTarget(reply)) {
        out.sealed.push_back(i);
        out.version = route.metadata_version;
        out.lease_end_ms = route.lease_end_ms;
      }
      if (results[i].ok() && options_.on_publish) {
        ReportPublished(PublishEvent{std::string(keys[i]), *fields[i], route.shard, route.stream,
                                     results[i].value(), route.metadata_version, sent_us,
                                     SteadyNowUs(), route.lease_end_ms * 1000});
      }
    }
    return out;
  }

  // After a seal refusal: asks for a refresh (again every kSealRetryMs, PR2 spacing applies)
  // until the routing moves past `version` or `until` passes. True: route again.
  bool WaitForNewRouting(int64_t version, TimeMs until) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (closed_ || SteadyNowMs() >= until) return false;
      const auto& routing = runtime_.core().routing();
      if (routing && routing->metadata_version != version) return true;
      runtime_.OnStaleTarget();
      seal_retries_.fetch_add(1);
      cv_.notify_all();  // the refresh thread re-evaluates at once
      const TimeMs wait = std::min<TimeMs>(kSealRetryMs, until - SteadyNowMs());
      cv_.wait_for(lock, std::chrono::milliseconds(std::max<TimeMs>(1, wait)));
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
    const client::ProducerCore& core = runtime_.core();
    const client::ProducerCoreMetrics m = core.Metrics(client::SteadyNowMsCeil());
    ProducerMetrics out;
    out.stream = options_.stream;
    out.group = options_.group;
    out.has_routing = m.has_routing;
    out.metadata_version = m.metadata_version;
    out.shard_count = core.has_routing() ? core.routing()->shard_count : 0;
    out.routing_cache_age_ms = m.cache_age_ms;
    out.lease_remaining_ms = m.lease_remaining_ms;
    out.refresh_failures = m.refresh_failures;
    out.consecutive_refresh_failures = m.consecutive_failures;
    out.refreshes_ok = m.refreshes_ok;
    out.sync_adoptions = m.sync_adoptions;
    out.publishes_ok = publishes_ok_.load();
    out.publishes_failed = publishes_failed_.load();
    out.seal_refresh_waits = seal_retries_.load();
    out.publishes_refused_expired = runtime_.refused_expired();
    out.last_refresh_error = core.last_refresh_error();
    out.current_endpoint = transports_[runtime_.current_endpoint()]->endpoint().ToString();
    return out;
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
    const bool saved =
        options_.version_store->Save(options_.stream, VersionStoreGroup(options_.group), v, &error);
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
  static constexpr TimeMs kSealRetryMs = 100;
};

ProducerResult<std::unique_ptr<Producer>> Producer::Create(ProducerOptions options) {
  auto invalid = [](std::string m) { return Err(ProducerErrorCode::kInvalidArgument, m); };
  if (!IsValidStreamName(options.stream)) {
    return invalid("stream '" + options.stream + "' is not a valid stream prefix (SPEC R2.4)");
  }
  if (!options.group.empty() && !IsValidGroupName(options.group)) {
    return invalid("group '" + options.group + "' is not a valid group name (SPEC R2.4)");
  }
  if (options.coordinator_endpoints.empty()) return invalid("no coordinator endpoints");
  if (!options.coordinator_token.empty() &&
      !client::IsValidBearerToken(options.coordinator_token)) {
    return invalid("coordinator_token must be 1 to 1024 printable ASCII characters without blanks");
  }
  std::vector<HttpEndpoint> endpoints;
  for (const std::string& e : options.coordinator_endpoints) {
    std::string error;
    std::optional<HttpEndpoint> ep = client::ParseHttpEndpoint(e, &error);
    if (!ep) return invalid(error);
    endpoints.push_back(std::move(*ep));
  }
  std::string error;
  Result<redis::RedisUrl> url = redis::ParseRedisUrl(options.redis_url);
  if (!url.ok()) return invalid(url.error().message);
  ConnectionOptions redis = ConnectionOptions::FromUrl(*url);
  redis.connect_timeout = options.redis_timeout;
  redis.command_timeout = options.redis_timeout;
  if (options.retry_initial.count() < 1 || options.retry_max < options.retry_initial) {
    return invalid("retry_initial must be >= 1 ms and at most retry_max");
  }
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, VersionStoreGroup(options.group), &seed,
                                   &error)) {
    return invalid("cannot load the observed metadata version: " + error);
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(endpoints), std::move(redis));
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
