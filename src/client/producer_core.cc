#include "client/producer_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/metadata.h"
#include "rsc/routing.h"

namespace rsc::client {

std::string_view RouteErrorKindName(RouteErrorKind kind) {
  switch (kind) {
    case RouteErrorKind::kNoRouting:
      return "NO_ROUTING";
    case RouteErrorKind::kRoutingExpired:
      return "ROUTING_EXPIRED";
    case RouteErrorKind::kStaleRouting:
      return "STALE_ROUTING";
  }
  return "UNKNOWN";
}

ProducerCore::ProducerCore(ProducerCoreOptions options) : options_(options) {}

void ProducerCore::SeedObserved(const ObservedVersion& v) { RaiseObserved(v); }

void ProducerCore::RaiseObserved(const ObservedVersion& v) {
  if (v.metadata_version > observed_.metadata_version) observed_ = v;
}

std::optional<TimeMs> ProducerCore::lease_end() const {
  if (!cache_) return std::nullopt;
  return confirmed_at_ + cache_->routing_lease_ms;
}

std::optional<TimeMs> ProducerCore::NextWakeMs() const {
  if (in_flight_) return std::nullopt;
  TimeMs due = next_refresh_at_;
  if (pr2_since_) {
    due = std::min(due,
                   std::max(*pr2_since_, last_refresh_request_ + options_.min_refresh_spacing_ms));
  }
  return due;
}

std::optional<RefreshRouting> ProducerCore::Tick(TimeMs now) {
  std::optional<TimeMs> due = NextWakeMs();
  if (!due || now < *due) return std::nullopt;
  in_flight_ = true;
  last_refresh_request_ = now;
  return RefreshRouting{observed_};
}

std::optional<std::string> ProducerCore::Unusable(const RoutingResponse& resp) {
  if (resp.hash != kJumpXxh64) {
    return fmt::format("routing hash '{}' is not supported (this client implements '{}')",
                       resp.hash, kJumpXxh64);
  }
  if (resp.shard_count < 1 || resp.shard_count > kMaxShards) {
    return fmt::format("shardCount {} out of range", resp.shard_count);
  }
  if (resp.shards.size() != static_cast<size_t>(resp.shard_count)) {
    return fmt::format("shardCount {} but {} shards listed", resp.shard_count, resp.shards.size());
  }
  // Shard ids are unique per stream (SPEC D2) and listed ascending; the routing hash picks a
  // position in the list, not an id (generation 0 has ids 0..N-1, so both agree there).
  for (size_t i = 0; i < resp.shards.size(); ++i) {
    const RoutingShard& s = resp.shards[i];
    if (s.id < 0 || (i > 0 && s.id <= resp.shards[i - 1].id)) {
      return fmt::format("shard id {} is negative, repeated or out of order", s.id);
    }
    if (s.stream.empty()) return fmt::format("shard {} has an empty stream key", s.id);
  }
  if (resp.routing_lease_ms <= 0) {
    return fmt::format("routingLeaseMs {} is not positive", resp.routing_lease_ms);
  }
  return std::nullopt;
}

void ProducerCore::ScheduleAfterSuccess(TimeMs sent_at) {
  const int64_t lease = cache_->routing_lease_ms;
  const int64_t interval = cache_->refresh_interval_ms;
  // PR1: the coordinator guarantees refreshIntervalMs < routingLeaseMs (ValidateConfig);
  // should an answer break that, refresh at half the lease rather than at its very end.
  const int64_t wait =
      (interval > 0 && interval < lease) ? interval : std::max<int64_t>(lease / 2, 1);
  next_refresh_at_ = sent_at + wait;
}

void ProducerCore::OnRoutingResponse(const RoutingResponse& resp, TimeMs sent_at, TimeMs now) {
  in_flight_ = false;
  if (std::optional<std::string> why = Unusable(resp)) {
    RecordFailure(now, "unusable routing response: " + *why, 0.5);
    return;
  }
  const bool newer = !cache_ || resp.metadata_version > cache_->metadata_version;
  const bool same = cache_ && resp.metadata_version == cache_->metadata_version &&
                    resp.lineage == cache_->lineage;
  if (resp.sync || newer) {
    // PR3 / R5.1: a newer version replaces the cache; sync:true is the stored truth, adopted
    // even when older, and becomes the observed version (the higher one was lost by Redis).
    if (resp.sync) {
      observed_ = ObservedVersion{resp.metadata_version, resp.lineage};
      ++counters_.sync_adoptions;
    } else {
      RaiseObserved(ObservedVersion{resp.metadata_version, resp.lineage});
    }
    cache_ = resp;
    ++counters_.cache_replacements;
  } else if (same) {
    // Confirms the cache: only the lease and the shard layout's freshness move on. The
    // lease and interval may have been reconfigured without a version bump elsewhere, so
    // take them from the answer.
    cache_->routing_lease_ms = resp.routing_lease_ms;
    cache_->refresh_interval_ms = resp.refresh_interval_ms;
  } else {
    // PR3: an older or divergent answer without sync neither replaces nor renews the cache.
    ++counters_.stale_responses;
    RecordFailure(
        now,
        fmt::format("ignored routing response metadataVersion {} (lineage '{}'): the "
                    "cache holds {} (lineage '{}') and the answer is not sync (PR3)",
                    resp.metadata_version, resp.lineage, cache_->metadata_version, cache_->lineage),
        0.5);
    return;
  }
  confirmed_at_ = sent_at;
  ++counters_.refreshes_ok;
  counters_.consecutive_failures = 0;
  // A PR2 request made after this refresh was sent is not answered by it.
  if (pr2_since_ && sent_at >= *pr2_since_) pr2_since_.reset();
  ScheduleAfterSuccess(sent_at);
}

void ProducerCore::OnRoutingFailure(TimeMs now, std::string error, double jitter) {
  in_flight_ = false;
  RecordFailure(now, std::move(error), jitter);
}

void ProducerCore::RecordFailure(TimeMs now, std::string error, double jitter) {
  ++counters_.refresh_failures;
  ++counters_.consecutive_failures;
  last_error_ = std::move(error);
  last_error_at_ = now;
  // The backoff takes over from any PR2 request: retrying a failing coordinator faster
  // would not make the routing any fresher.
  pr2_since_.reset();
  int64_t delay = options_.initial_retry_ms;
  for (int64_t i = 1; i < counters_.consecutive_failures && delay < options_.max_retry_ms; ++i) {
    delay *= 2;
  }
  delay = std::min(delay, options_.max_retry_ms);
  // PR4: keep retrying at least as often as a healthy producer refreshes, so a lease is
  // not lost to a long backoff.
  if (cache_ && cache_->refresh_interval_ms > 0) {
    delay = std::min(delay, cache_->refresh_interval_ms);
  }
  jitter = std::clamp(jitter, 0.0, 1.0);
  delay =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(delay) * (0.5 + jitter / 2)));
  next_refresh_at_ = now + delay;
}

void ProducerCore::OnPublishError(PublishErrorKind /*kind*/, TimeMs now) {
  ++counters_.publish_refreshes;
  if (!pr2_since_) pr2_since_ = now;
}

RouteResult ProducerCore::Route(std::string_view key, TimeMs now) {
  const std::string last =
      last_error_.empty()
          ? std::string("none")
          : fmt::format("'{}' ({} consecutive failures, last {} ms ago)", last_error_,
                        counters_.consecutive_failures, now - last_error_at_);
  if (!cache_) {
    return RouteError{RouteErrorKind::kNoRouting,
                      fmt::format("no routing yet: no routing refresh has succeeded; last "
                                  "refresh error: {}",
                                  last)};
  }
  const TimeMs end = confirmed_at_ + cache_->routing_lease_ms;
  if (now >= end) {
    ++counters_.expired_routes;
    return RouteError{
        RouteErrorKind::kRoutingExpired,
        fmt::format("routing lease expired {} ms ago (lease of {} ms from the refresh sent at "
                    "steady {} ms ended at steady {} ms; cached metadataVersion {}); publishing "
                    "fails closed until a routing refresh succeeds (PR5); last refresh error: {}",
                    now - end, cache_->routing_lease_ms, confirmed_at_, end,
                    cache_->metadata_version, last)};
  }
  const int32_t position = ShardForKey(key, cache_->shard_count);
  if (position >= 0 && static_cast<size_t>(position) < cache_->shards.size()) {
    const RoutingShard& s = cache_->shards[static_cast<size_t>(position)];
    return RouteTarget{s.id, s.stream, cache_->metadata_version, end};
  }
  // Unreachable with a validated cache; kept so a bug cannot misroute silently.
  OnPublishError(PublishErrorKind::kStaleRouting, now);
  return RouteError{RouteErrorKind::kStaleRouting,
                    fmt::format("position {} is not in the cached routing (metadataVersion {}); "
                                "refresh requested (PR2)",
                                position, cache_->metadata_version)};
}

ProducerCoreMetrics ProducerCore::Metrics(TimeMs now) const {
  ProducerCoreMetrics m = counters_;
  m.has_routing = cache_.has_value();
  if (cache_) {
    m.metadata_version = cache_->metadata_version;
    m.cache_age_ms = now - confirmed_at_;
    m.lease_remaining_ms = std::max<int64_t>(0, confirmed_at_ + cache_->routing_lease_ms - now);
  }
  return m;
}

}  // namespace rsc::client
