// The producer runtime (the shell around ProducerCore): a refresh thread that performs
// the core's RefreshRouting actions over HTTP, and XADDs over one hiredis connection.
//
// Locks: `redis_mu_` serializes use of the Redis connection; `mu_` guards the core and the
// refresh state. Order: redis_mu_ before mu_. The refresh thread takes only mu_ and never
// holds it during I/O; publishes hold mu_ only to route.

#include "rsc/producer.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "client/http_transport.h"
#include "client/producer_core.h"
#include "client/redis_conn.h"
#include "core/protocol.h"
#include "core/protocol_json.h"

namespace rsc {

std::string_view ProducerErrorCodeName(ProducerErrorCode code) {
  switch (code) {
    case ProducerErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ProducerErrorCode::kNoRouting:
      return "NO_ROUTING";
    case ProducerErrorCode::kRoutingExpired:
      return "ROUTING_EXPIRED";
    case ProducerErrorCode::kStaleRouting:
      return "STALE_ROUTING";
    case ProducerErrorCode::kRedisError:
      return "REDIS_ERROR";
    case ProducerErrorCode::kRedisUnavailable:
      return "REDIS_UNAVAILABLE";
    case ProducerErrorCode::kUnknownResult:
      return "UNKNOWN_RESULT";
    case ProducerErrorCode::kClosed:
      return "CLOSED";
  }
  return "UNKNOWN";
}

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

using client::ParseRedisUrl;
using client::RedisConn;
using client::RedisTarget;
using ReplyPtr = client::RedisReplyPtr;

ProducerError FromRouteError(const client::RouteError& e) {
  switch (e.kind) {
    case RouteErrorKind::kNoRouting:
      return Err(ProducerErrorCode::kNoRouting, e.message);
    case RouteErrorKind::kRoutingExpired:
      return Err(ProducerErrorCode::kRoutingExpired, e.message);
    case RouteErrorKind::kStaleRouting:
      return Err(ProducerErrorCode::kStaleRouting, e.message);
  }
  return Err(ProducerErrorCode::kNoRouting, e.message);
}

std::vector<std::string> XaddArgs(const std::string& stream, const StreamFields& fields) {
  std::vector<std::string> args{"XADD", stream, "*"};
  for (const auto& [f, v] : fields) {
    args.push_back(f);
    args.push_back(v);
  }
  return args;
}

}  // namespace

class Producer::Impl {
 public:
  Impl(ProducerOptions options, std::vector<HttpEndpoint> endpoints, RedisTarget redis)
      : options_(std::move(options)),
        core_(client::ProducerCoreOptions{options_.retry_initial.count(),
                                          options_.retry_max.count(), 50}),
        redis_(std::move(redis), options_.redis_timeout),
        rng_(std::random_device{}()) {
    for (HttpEndpoint& ep : endpoints) {
      transports_.push_back(std::make_unique<HttpTransport>(std::move(ep), options_.http_timeout));
    }
  }

  ~Impl() { Close(); }

  void SeedObserved(const ObservedVersion& v) {
    std::lock_guard<std::mutex> lock(mu_);
    core_.SeedObserved(v);
    saved_ = core_.observed();
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
    redis_.Reset();
  }

  bool WaitForRouting(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return closed_ || core_.has_routing(); }) &&
           core_.has_routing();
  }

  // Routes all keys at one instant. Waits for the first routing if there is none yet.
  // Requires redis_mu_ held by the caller (so the lease is checked right before sending).
  std::vector<ProducerResult<RouteTarget>> RouteAll(const std::vector<std::string_view>& keys) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!core_.has_routing() && !closed_) {
      cv_.wait_for(lock, options_.first_routing_wait,
                   [&] { return closed_ || core_.has_routing(); });
    }
    std::vector<ProducerResult<RouteTarget>> out;
    if (closed_) {
      out.assign(keys.size(), Err(ProducerErrorCode::kClosed, "producer is closed"));
      return out;
    }
    // Rounded up: a route granted now leaves the XADD inside the routing lease (PR5).
    const TimeMs now = client::SteadyNowMsCeil();
    bool wake = false;
    for (std::string_view key : keys) {
      RouteResult r = core_.Route(key, now);
      if (r.ok()) {
        out.emplace_back(r.value());
        continue;
      }
      if (r.error().kind == RouteErrorKind::kStaleRouting) wake = true;
      if (r.error().kind == RouteErrorKind::kRoutingExpired) ++refused_expired_;
      out.emplace_back(FromRouteError(r.error()));
    }
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
    std::vector<bool> valid(keys.size(), true);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (fields[i]->empty()) {
        results[i] = Err(ProducerErrorCode::kInvalidArgument,
                         "a stream entry needs at least one field/value pair");
        valid[i] = false;
      }
    }
    std::lock_guard<std::mutex> redis_lock(redis_mu_);
    std::string connect_error;
    const bool connected = redis_.Ensure(&connect_error);
    std::vector<ProducerResult<RouteTarget>> routes = RouteAll(keys);
    // Shard -> message indices, in input order (per-key order is preserved).
    std::map<int32_t, std::vector<size_t>> by_shard;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!valid[i]) continue;
      if (!routes[i].ok()) {
        results[i] = routes[i].error();
        continue;
      }
      if (!connected) {
        results[i] = Err(ProducerErrorCode::kRedisUnavailable, connect_error);
        continue;
      }
      by_shard[routes[i].value().shard].push_back(i);
    }
    bool broken = false;
    for (const auto& [shard, indices] : by_shard) {
      if (broken) {
        for (size_t i : indices) {
          results[i] = Err(ProducerErrorCode::kRedisUnavailable,
                           "not sent: the Redis connection failed earlier in this batch");
        }
        continue;
      }
      for (size_t i : indices) redis_.Append(XaddArgs(routes[i].value().stream, *fields[i]));
      // Appends only fill the output buffer; the first Read writes it.
      const int64_t sent_us = SteadyNowUs();
      for (size_t i : indices) {
        if (broken) {
          results[i] = Err(ProducerErrorCode::kUnknownResult,
                           "XADD pipelined but the connection failed before its reply: "
                           "the entry may or may not exist");
          continue;
        }
        ReplyPtr r = redis_.Read();
        if (!r) {
          broken = true;
          results[i] = Err(ProducerErrorCode::kUnknownResult,
                           fmt::format("XADD to {} sent, no reply ({}): the entry may or may "
                                       "not exist",
                                       routes[i].value().stream, redis_.TransportError()));
        } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
          results[i] = std::string(r->str, r->len);
          if (options_.on_publish) {
            const RouteTarget& route = routes[i].value();
            ReportPublished(PublishEvent{std::string(keys[i]), *fields[i], route.shard,
                                         route.stream, results[i].value(), route.metadata_version,
                                         sent_us, SteadyNowUs(), route.lease_end_ms * 1000});
          }
        } else if (r->type == REDIS_REPLY_ERROR) {
          results[i] = Err(ProducerErrorCode::kRedisError,
                           fmt::format("XADD to {} refused: {}", routes[i].value().stream,
                                       std::string(r->str, r->len)));
        } else {
          results[i] = Err(ProducerErrorCode::kRedisError,
                           fmt::format("XADD to {}: unexpected reply type {}",
                                       routes[i].value().stream, r->type));
        }
      }
    }
    if (broken) redis_.Reset();
    for (const auto& r : results) (r.ok() ? publishes_ok_ : publishes_failed_).fetch_add(1);
    return results;
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
    const client::ProducerCoreMetrics m = core_.Metrics(client::SteadyNowMsCeil());
    ProducerMetrics out;
    out.has_routing = m.has_routing;
    out.metadata_version = m.metadata_version;
    out.shard_count = core_.has_routing() ? core_.routing()->shard_count : 0;
    out.routing_cache_age_ms = m.cache_age_ms;
    out.lease_remaining_ms = m.lease_remaining_ms;
    out.refresh_failures = m.refresh_failures;
    out.consecutive_refresh_failures = m.consecutive_failures;
    out.refreshes_ok = m.refreshes_ok;
    out.sync_adoptions = m.sync_adoptions;
    out.publishes_ok = publishes_ok_.load();
    out.publishes_failed = publishes_failed_.load();
    out.publishes_refused_expired = refused_expired_;
    out.last_refresh_error = core_.last_refresh_error();
    out.current_endpoint = transports_[current_]->endpoint().ToString();
    return out;
  }

 private:
  struct Outcome {
    std::optional<RoutingResponse> response;
    TimeMs sent_at = 0;
    std::string error;
  };

  void RefreshLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!closed_) {
      std::optional<client::RefreshRouting> action = core_.Tick(SteadyNowMs());
      if (!action) {
        std::optional<TimeMs> wake = core_.NextWakeMs();
        const TimeMs wait = wake ? std::max<TimeMs>(1, *wake - SteadyNowMs()) : 1000;
        cv_.wait_for(lock, std::chrono::milliseconds(wait));
        continue;
      }
      lock.unlock();
      Outcome outcome = RefreshOnce(action->observed);
      const double jitter = std::uniform_real_distribution<double>(0, 1)(rng_);
      lock.lock();
      if (outcome.response) {
        core_.OnRoutingResponse(*outcome.response, outcome.sent_at, SteadyNowMs());
      } else {
        core_.OnRoutingFailure(SteadyNowMs(), std::move(outcome.error), jitter);
      }
      const ObservedVersion observed = core_.observed();
      cv_.notify_all();  // publishers waiting for the first routing
      if (options_.version_store && observed != saved_) {
        lock.unlock();
        std::string error;
        const bool saved =
            options_.version_store->Save(options_.stream, options_.group, observed, &error);
        lock.lock();
        // A failed save is retried after the next refresh; the in-memory value still rules.
        if (saved) saved_ = observed;
      }
    }
  }

  // Interruptible pause of the refresh thread (Close() wakes it).
  void Pause(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, d, [&] { return closed_; });
  }
  bool IsClosed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  // One refresh round: every endpoint at most once, starting with the last good one.
  Outcome RefreshOnce(const ObservedVersion& observed) {
    std::string target = "/v1/groups/" + PercentEncode(options_.stream) + "/" +
                         PercentEncode(options_.group) +
                         "/routing?observedVersion=" + std::to_string(observed.metadata_version);
    if (!observed.lineage.empty()) target += "&lineage=" + PercentEncode(observed.lineage);
    std::vector<std::string> errors;
    const size_t n = transports_.size();
    for (size_t attempt = 0; attempt < n && !IsClosed(); ++attempt) {
      const size_t index = (current_.load() + attempt) % n;
      HttpTransport& t = *transports_[index];
      const TimeMs sent_at = SteadyNowMs();
      HttpReply reply = t.Request("GET", target, "");
      std::string error;
      bool next_at_once = false;
      if (reply.status == 200) {
        Result<RoutingResponse> parsed = ParseRoutingResponse(reply.body);
        if (parsed.ok()) {
          current_ = index;
          return Outcome{std::move(parsed).value(), sent_at, ""};
        }
        error = parsed.error().message;
      } else if (reply.status == 0) {
        error = reply.error;
      } else {
        Result<ErrorBody> body = ParseErrorBody(reply.body);
        const std::string code = body.ok() ? body->error : "HTTP_" + std::to_string(reply.status);
        error = fmt::format("HTTP {} {}: {}", reply.status, code,
                            body.ok() ? body->message : reply.body.substr(0, 200));
        if (reply.status < 500) {
          // 4xx (GROUP_NOT_FOUND, INVALID_REQUEST): every coordinator would say the same.
          return Outcome{std::nullopt, sent_at,
                         fmt::format("{} from {}", error, t.endpoint().ToString())};
        }
        next_at_once = code == "COORDINATOR_TERMINATING";
      }
      errors.push_back(fmt::format("{}: {}", t.endpoint().ToString(), error));
      if (attempt + 1 < n && !next_at_once) {
        // C6: bounded backoff with jitter before the next endpoint.
        const auto base = options_.endpoint_backoff.count();
        Pause(std::chrono::milliseconds(
            base / 2 + static_cast<int64_t>(std::uniform_real_distribution<double>(0, 1)(rng_) *
                                            static_cast<double>(base))));
      }
    }
    if (!errors.empty()) current_ = (current_.load() + 1) % n;
    std::string joined;
    for (const std::string& e : errors) joined += (joined.empty() ? "" : "; ") + e;
    return Outcome{std::nullopt, SteadyNowMs(),
                   "routing refresh failed on every coordinator endpoint: " + joined};
  }

  const ProducerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;   // routing changes, close, PR2 wake-ups (with mu_)
  ProducerCore core_;            // guarded by mu_
  bool closed_ = false;          // guarded by mu_
  ObservedVersion saved_;        // guarded by mu_: last value written to the version store
  int64_t refused_expired_ = 0;  // guarded by mu_

  std::mutex redis_mu_;
  RedisConn redis_;  // guarded by redis_mu_

  // Used by the refresh thread only.
  std::vector<std::unique_ptr<HttpTransport>> transports_;
  std::atomic<size_t> current_{0};  // index of the endpoint to try first (read by Metrics)
  std::mt19937_64 rng_;
  std::thread thread_;

  std::atomic<int64_t> publishes_ok_{0};
  std::atomic<int64_t> publishes_failed_{0};
};

ProducerResult<std::unique_ptr<Producer>> Producer::Create(ProducerOptions options) {
  auto invalid = [](std::string m) { return Err(ProducerErrorCode::kInvalidArgument, m); };
  if (!IsValidStreamName(options.stream)) {
    return invalid("stream '" + options.stream + "' is not a valid stream prefix (SPEC R2.4)");
  }
  if (!IsValidGroupName(options.group)) {
    return invalid("group '" + options.group + "' is not a valid group name (SPEC R2.4)");
  }
  if (options.coordinator_endpoints.empty()) return invalid("no coordinator endpoints");
  std::vector<HttpEndpoint> endpoints;
  for (const std::string& e : options.coordinator_endpoints) {
    std::string error;
    std::optional<HttpEndpoint> ep = client::ParseHttpEndpoint(e, &error);
    if (!ep) return invalid(error);
    endpoints.push_back(std::move(*ep));
  }
  std::string error;
  std::optional<RedisTarget> redis = ParseRedisUrl(options.redis_url, &error);
  if (!redis) return invalid(error);
  if (options.retry_initial.count() < 1 || options.retry_max < options.retry_initial) {
    return invalid("retry_initial must be >= 1 ms and at most retry_max");
  }
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, options.group, &seed, &error)) {
    return invalid("cannot load the observed metadata version: " + error);
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(endpoints), std::move(*redis));
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
