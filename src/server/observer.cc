#include "server/observer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

namespace rsc {

void MetricsObserver::OnEvents(const GroupKey& key, const std::vector<Event>& events) {
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::kVersionRegression:
        metrics_.OnRegression("ahead");
        metrics_.OnClientVersionAhead();
        // M9: every regression is an alert-level log line.
        spdlog::error("event=metadata_regression group={} client={} detail=\"{}\"", key.Tag(),
                      e.member, e.detail);
        continue;
      case EventKind::kLineageDivergence:
        metrics_.OnRegression("diverged");
        spdlog::error("event=metadata_divergence group={} client={} detail=\"{}\"", key.Tag(),
                      e.member, e.detail);
        continue;
      case EventKind::kUnprovenVersion:
        metrics_.OnUnprovenVersion();
        spdlog::warn("event=unproven_version group={} client={} detail=\"{}\"", key.Tag(), e.member,
                     e.detail);
        continue;
      case EventKind::kInvariantViolation:
        metrics_.OnInvariantFailure(key);
        spdlog::error("event=invariant_violation group={} detail=\"{}\" action=fail_closed",
                      key.Tag(), e.detail);
        continue;
      case EventKind::kMemberExpired:
        metrics_.OnMembersExpired();
        break;
      case EventKind::kMemberFenced:
        metrics_.OnMembersFenced();
        break;
      case EventKind::kShardTaken:
        metrics_.OnShardTaken();
        break;
      case EventKind::kParentCompleted:
      case EventKind::kParentReopened:
      case EventKind::kParentResealed:
      case EventKind::kGenerationDeleted:
      case EventKind::kShardKeyRecreateDeferred:
      case EventKind::kLayoutAdoptionDeferred:
        metrics_.OnReshardEvent(EventKindName(e.kind));
        break;
      case EventKind::kRetiredKeyKept:
      case EventKind::kLayoutRolledForward:
      case EventKind::kLayoutBehind:
      case EventKind::kShardKeyRecreated:
        metrics_.OnReshardEvent(EventKindName(e.kind));
        spdlog::error("event={} stream={} shard={} detail=\"{}\"", EventKindName(e.kind),
                      key.stream, e.shard, e.detail);
        continue;
      default:
        break;
    }
    // Routine ownership moves are debug; a taken shard's release (C8) is worth a line.
    const bool notable =
        e.kind != EventKind::kShardAssigned && e.kind != EventKind::kStaleRevokeIgnored &&
        (e.kind != EventKind::kShardReleased || e.detail == "taken shard released");
    if (notable) {
      spdlog::info("event={} group={} member={} shard={} detail=\"{}\"", EventKindName(e.kind),
                   key.Tag(), e.member, e.shard, e.detail);
    } else {
      spdlog::debug("event={} group={} member={} shard={} detail=\"{}\"", EventKindName(e.kind),
                    key.Tag(), e.member, e.shard, e.detail);
    }
  }
}

void MetricsObserver::OnHeartbeat(const GroupKey&, const HeartbeatRequest&, std::string_view,
                                  size_t) {
  // Counted by the HTTP layer (rsc_heartbeats_total), which also sees rejected requests.
}

void MetricsObserver::OnMutexWait(double seconds, bool acquired) {
  metrics_.ObserveMutexWait(seconds);
  if (!acquired) metrics_.OnLockTimeout();
}

void MetricsObserver::OnRevisionConflict(const GroupKey& key) {
  metrics_.OnRevisionConflict();
  spdlog::debug("event=revision_conflict group={}", key.Tag());
}

void MetricsObserver::OnSteadyRenewal(const GroupKey&, bool applied) {
  metrics_.OnSteadyRenewal(applied);
}

void MetricsObserver::OnLoadError(const GroupKey& key, const Error& e) {
  if (e.code == ErrorCode::kMetadataUnreadable) {
    metrics_.OnMetadataUnreadable();
    spdlog::error("event=metadata_unreadable group={} message=\"{}\"", key.Tag(), e.message);
  } else if (e.code == ErrorCode::kMetadataMissing) {
    metrics_.OnMetadataMissing();
    spdlog::error("event=metadata_missing group={} message=\"{}\"", key.Tag(), e.message);
  }
}

void MetricsObserver::OnGroupBacklog(const GroupKey& key, const std::vector<ShardView>& shards) {
  int64_t lag = 0, pending = 0, oldest_ms = 0;
  std::set<int32_t> present;
  std::map<std::string, int64_t> states;
  for (const ShardView& s : shards) {
    ++states[s.state];
    lag += s.lag.value_or(0);
    pending += s.pending.value_or(0);
    oldest_ms = std::max(oldest_ms, s.oldest_pending_ms.value_or(0));
    if (shard_metrics_ && (s.lag || s.pending)) {
      metrics_.SetShardBacklog(key, s.id, s.lag, s.pending.value_or(0));
      present.insert(s.id);
    }
  }
  metrics_.SetGroupBacklog(key, lag, pending, static_cast<double>(oldest_ms) / 1000.0);
  metrics_.SetGroupShardStates(key, states);
  if (!shard_metrics_) return;
  std::set<int32_t> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<int32_t>& had = shard_series_[key.Tag()];
    std::set_difference(had.begin(), had.end(), present.begin(), present.end(),
                        std::inserter(gone, gone.end()));
    had = std::move(present);
  }
  for (int32_t id : gone) metrics_.ForgetShard(key, id);  // retired, or unreadable now
}

void MetricsObserver::OnGroupState(const GroupKey& key, const GroupMetadata& m,
                                   const Liveness& live, TimeMs now) {
  // Age of the oldest heartbeat: the deadline minus the lease is when it was recorded.
  double max_age = 0;
  for (const Member& mem : m.members) {
    auto it = live.deadline_ms.find(mem.id.str());
    const TimeMs last = it == live.deadline_ms.end() ? 0 : it->second - m.config.member_lease_ms;
    if (last > 0) max_age = std::max(max_age, static_cast<double>(now - last) / 1000.0);
  }
  metrics_.SetMemberHeartbeatAge(key, max_age);
  metrics_.SetGroupMembers(key, static_cast<int64_t>(m.members.size()));
  int64_t revoking = 0;
  for (const ShardState& s : m.shards) {
    revoking += (!s.owner.empty() && s.owner != s.target) ? 1 : 0;
  }
  metrics_.SetRevokingShards(key, revoking);
  std::lock_guard<std::mutex> lock(mu_);
  round_active_[key.Tag()] = m.round.has_value();
  int64_t active = 0;
  for (const auto& [tag, on] : round_active_) active += on ? 1 : 0;
  metrics_.SetCorrectionRoundsActive(active);
}

void MetricsObserver::AttachStoreCounters(std::function<int64_t()> script_reloads) {
  std::lock_guard<std::mutex> lock(mu_);
  script_reloads_ = std::move(script_reloads);
}

void MetricsObserver::OnTick(const GroupKey&, bool) {
  metrics_.OnTick();
  std::lock_guard<std::mutex> lock(mu_);
  if (script_reloads_) {
    const int64_t now = script_reloads_();
    for (; script_reloads_seen_ < now; ++script_reloads_seen_) metrics_.OnScriptReload();
  }
}

}  // namespace rsc
