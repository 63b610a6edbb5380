#pragma once
// ProducerCore: the producer's routing cache and lease rules (SPEC §5, PR1–PR5), as a
// sans-IO state machine (ENGINEERING §1). It performs no I/O, reads no clock and draws no
// random numbers: the runtime (src/client/producer_runtime.cc, in production and in the
// simulator alike) feeds it events with the local *monotonic* time in ms, and performs the
// actions it returns.
//
// Timeline of one producer (times are the shell's steady clock):
//
//   t0  Tick(t0)            -> RefreshRouting{observed v0}      (no cache yet: at once)
//   t0  runtime sends GET /routing?observedVersion=..&lineage=.. (send time s = t0)
//   t1  OnRoutingResponse(resp, s)  cache := resp, lease end := s + routingLeaseMs
//       Route(key, t)       -> {shard, stream}   while t < lease end
//   s + refreshIntervalMs   Tick -> RefreshRouting                (PR1, even if all is well)
//   ... refresh fails ...   OnRoutingFailure: keep the cache (PR4), retry with backoff
//   lease end passes        Route -> RoutingExpired (PR5, fail closed) until a refresh works
//
// Rules:
//   PR1 A refresh is due `refreshIntervalMs` after the send time of the last confirming
//       response (sooner if that would not leave a margin before lease end).
//   PR2 OnPublishError (or a Route that finds the cache inconsistent) makes a refresh due at
//       once.
//   PR3 A response replaces the cache only if its metadataVersion is higher, or on
//       `sync: true` (then it is adopted as truth, also with a lower version). A response
//       with exactly the cached (version, lineage) confirms the cache and renews the lease.
//       Anything else (an older or divergent answer without sync) neither replaces nor
//       renews, and counts as a failed refresh.
//   PR4 A failed refresh keeps the cache; Route works until lease end.
//   PR5 Once the lease ended, Route fails with RoutingExpired naming when the lease ended
//       and the last refresh error.
// The lease is always counted from the *send* time of the request whose answer confirmed
// the cache, never from the receive time: a slow answer must not stretch the lease.
//
// The observed (metadataVersion, lineage) sent with every refresh is the highest this
// process has seen (C5's producer analogue), optionally seeded from a VersionStore. After a
// `sync: true` answer it becomes the answer's version (the stored truth, R5.1).
//
// Thread safety: none. The runtime guards one ProducerCore with a mutex.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "core/protocol.h"
#include "core/types.h"
#include "rsc/version_store.h"  // ObservedVersion

namespace rsc::client {

struct ProducerCoreOptions {
  // First retry delay after a failed refresh; doubles per consecutive failure up to
  // `max_retry_ms`, and is never longer than the cached refresh interval.
  int64_t initial_retry_ms = 100;
  int64_t max_retry_ms = 5000;
  // PR2 refreshes are "at once", but no closer than this to the previous refresh request,
  // so a burst of failing publishes does not hammer the coordinator.
  int64_t min_refresh_spacing_ms = 50;
};

// Action: send GET /routing?observedVersion=..&lineage=.. and report the outcome with
// OnRoutingResponse (passing the time the request was sent) or OnRoutingFailure.
struct RefreshRouting {
  ObservedVersion observed;
};

// Where a key goes.
struct RouteTarget {
  int32_t shard = 0;
  std::string stream;  // the shard's Redis Stream key, as published by the coordinator
  int64_t metadata_version = 0;
  // When the routing lease this route was decided under ends (same clock as `now`).
  TimeMs lease_end_ms = 0;
};

enum class RouteErrorKind {
  kNoRouting,       // no routing response has been accepted yet (or the last was unusable)
  kRoutingExpired,  // PR5: the routing lease ended and no refresh succeeded since
  kStaleRouting,    // PR2: the cache cannot route this key (refresh requested)
};
std::string_view RouteErrorKindName(RouteErrorKind kind);

struct RouteError {
  RouteErrorKind kind;
  std::string message;
};

// A RouteTarget or a RouteError.
class RouteResult {
 public:
  RouteResult(RouteTarget t) : v_(std::move(t)) {}  // NOLINT: implicit by design
  RouteResult(RouteError e) : v_(std::move(e)) {}   // NOLINT
  bool ok() const { return v_.index() == 0; }
  const RouteTarget& value() const { return std::get<0>(v_); }
  const RouteError& error() const { return std::get<1>(v_); }

 private:
  std::variant<RouteTarget, RouteError> v_;
};

// Why the publish path asks for a refresh (PR2).
enum class PublishErrorKind {
  kStaleRouting,     // the routed shard/stream is not in the current routing
  kVersionMismatch,  // something on the publish path carried a different metadata version
};

// SPEC §11 producer signals, as of `now`.
struct ProducerCoreMetrics {
  bool has_routing = false;
  int64_t metadata_version = 0;      // of the cache (0 without one)
  int64_t cache_age_ms = 0;          // now - send time of the last confirming refresh
  int64_t lease_remaining_ms = 0;    // > 0 while routes work; 0 once expired or without cache
  int64_t refresh_failures = 0;      // total failed refreshes (incl. ignored answers)
  int64_t consecutive_failures = 0;  // since the last success
  int64_t refreshes_ok = 0;          // responses that confirmed or replaced the cache
  int64_t cache_replacements = 0;    // PR3 replacements (including sync adoptions)
  int64_t sync_adoptions = 0;        // sync:true answers adopted (R5.1)
  int64_t stale_responses = 0;       // older/divergent answers ignored (PR3)
  int64_t publish_refreshes = 0;     // refreshes requested by the publish path (PR2)
  int64_t expired_routes = 0;        // Route calls refused with kRoutingExpired (PR5)
};

class ProducerCore {
 public:
  explicit ProducerCore(ProducerCoreOptions options = {});

  // Seeds the observed version (e.g. from a VersionStore at start-up). Only raises it.
  void SeedObserved(const ObservedVersion& v);

  // Returns a refresh to perform if one is due and none is in flight. Call it whenever
  // NextWakeMs() is reached or an event arrived.
  std::optional<RefreshRouting> Tick(TimeMs now);
  // The earliest time Tick may have something to do (nullopt: only after an event, i.e. a
  // refresh is in flight).
  std::optional<TimeMs> NextWakeMs() const;

  // The outcome of the refresh Tick asked for. `sent_at` is when that request was sent (the
  // lease is counted from it); `now` is when the answer is processed.
  void OnRoutingResponse(const RoutingResponse& resp, TimeMs sent_at, TimeMs now);
  // `error` describes the failure (kept for PR5 messages); `jitter` in [0, 1] spreads the
  // retry (the shell draws it; 0.5 when it does not care).
  void OnRoutingFailure(TimeMs now, std::string error, double jitter = 0.5);

  // PR2: the publish path found the routing stale. Makes a refresh due at once.
  void OnPublishError(PublishErrorKind kind, TimeMs now);

  // The shard of `key` per the cache, or why not. Non-const: an inconsistent cache requests
  // a refresh (PR2) and refusals are counted.
  RouteResult Route(std::string_view key, TimeMs now);

  // Accessors (for the runtime, metrics and tests).
  bool has_routing() const { return cache_.has_value(); }
  const std::optional<RoutingResponse>& routing() const { return cache_; }
  const ObservedVersion& observed() const { return observed_; }
  bool refresh_in_flight() const { return in_flight_; }
  // Lease end (exclusive) of the cache, steady ms; nullopt without a cache.
  std::optional<TimeMs> lease_end() const;
  const std::string& last_refresh_error() const { return last_error_; }
  ProducerCoreMetrics Metrics(TimeMs now) const;

 private:
  void ScheduleAfterSuccess(TimeMs sent_at);
  void RecordFailure(TimeMs now, std::string error, double jitter);
  // Why a response cannot be used at all (nullopt: usable).
  static std::optional<std::string> Unusable(const RoutingResponse& resp);
  void RaiseObserved(const ObservedVersion& v);

  ProducerCoreOptions options_;
  std::optional<RoutingResponse> cache_;
  TimeMs confirmed_at_ = 0;  // send time of the last confirming response
  ObservedVersion observed_;
  bool in_flight_ = false;
  TimeMs next_refresh_at_ = 0;       // due time of the next refresh (0: at once)
  std::optional<TimeMs> pr2_since_;  // a PR2 refresh was requested at this time
  TimeMs last_refresh_request_ = INT64_MIN / 2;
  std::string last_error_;
  TimeMs last_error_at_ = 0;
  ProducerCoreMetrics counters_;
};

}  // namespace rsc::client
