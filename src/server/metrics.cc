#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <string>

namespace rsc {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// Latency buckets from 0.5 ms (a Redis round trip on the same host) to 10 s (far past
// any lease-relevant delay).
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return kBuckets;
}

Family<Counter>& CounterFamily(prometheus::Registry& r, const std::string& name,
                               const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

Family<Gauge>& GaugeFamily(prometheus::Registry& r, const std::string& name,
                           const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

Family<Histogram>& HistogramFamily(prometheus::Registry& r, const std::string& name,
                                   const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

prometheus::Labels GroupLabels(const GroupKey& key) {
  return {{"stream", key.stream}, {"group", key.group}};
}

}  // namespace

// prometheus-cpp families and metrics are internally synchronized; Impl adds no state
// of its own beyond stable references into the registry.
struct Metrics::Impl {
  prometheus::Registry registry;

  Family<Gauge>& terminating_family =
      GaugeFamily(registry, "rsc_coordinator_terminating",
                  "1 while the coordinator is in terminating mode (SPEC S1)");
  Gauge& terminating = terminating_family.Add({});
  Family<Counter>& http_requests = CounterFamily(registry, "rsc_http_requests_total",
                                                 "HTTP requests served, by route and status");
  Family<Histogram>& http_duration =
      HistogramFamily(registry, "rsc_http_request_duration_seconds",
                      "HTTP request handling time (queueing + handler), by route");
  Family<Gauge>& open_connections_family =
      GaugeFamily(registry, "rsc_http_open_connections", "Open HTTP connections");
  Gauge& open_connections = open_connections_family.Add({});
  Family<Counter>& heartbeats = CounterFamily(registry, "rsc_heartbeats_total",
                                              "Heartbeats answered, by status or error code");
  Family<Histogram>& mutex_wait_family = HistogramFamily(
      registry, "rsc_mutex_wait_seconds", "Time spent acquiring a group mutex (R2.7)");
  Histogram& mutex_wait = mutex_wait_family.Add({}, LatencyBuckets());
  Family<Counter>& revision_conflicts_family =
      CounterFamily(registry, "rsc_revision_conflicts_total",
                    "Compare-and-set failures on a group's metadata revision (R2.6)");
  Counter& revision_conflicts = revision_conflicts_family.Add({});
  Family<Counter>& steady_renewals_family = CounterFamily(
      registry, "rsc_steady_renewals_total",
      "Batches of steady heartbeats committed in one round trip (applied), or refused because "
      "the group changed and decided again under the mutex (refused)");
  Counter& steady_applied = steady_renewals_family.Add({{"outcome", "applied"}});
  Counter& steady_refused = steady_renewals_family.Add({{"outcome", "refused"}});
  Family<Gauge>& heartbeat_age =
      GaugeFamily(registry, "rsc_member_heartbeat_age_seconds",
                  "Oldest member heartbeat age in the group, seconds, as of the last load");
  Family<Gauge>& revoking_shards =
      GaugeFamily(registry, "rsc_revoking_shards", "Shards being drained in the group");
  Family<Gauge>& group_lag = GaugeFamily(
      registry, "rsc_group_lag",
      "Entries not yet delivered to the group, summed over its shards (XINFO GROUPS lag)");
  Family<Gauge>& group_pending = GaugeFamily(registry, "rsc_group_pending",
                                             "Entries delivered to the group and not acknowledged");
  Family<Gauge>& group_oldest_pending =
      GaugeFamily(registry, "rsc_group_oldest_pending_seconds",
                  "Idle time of the group's oldest pending entry, seconds");
  Family<Gauge>& group_members =
      GaugeFamily(registry, "rsc_group_members",
                  "Member records of the group (live, leaving or fenced), as of its last tick");
  Family<Gauge>& group_shards =
      GaugeFamily(registry, "rsc_group_shards",
                  "Shards of the group per state (ASSIGNED, UNASSIGNED, DRAINING, "
                  "WAITING_PARENTS, COMPLETED; SPEC O1), as of its last tick");
  Family<Gauge>& shard_lag = GaugeFamily(registry, "rsc_shard_lag",
                                         "Entries not yet delivered to the group on the shard "
                                         "(only with --shard-metrics)");
  Family<Gauge>& shard_pending =
      GaugeFamily(registry, "rsc_shard_pending",
                  "Pending entries of the group on the shard (only with --shard-metrics)");
  Family<Gauge>& parents_incomplete =
      GaugeFamily(registry, "rsc_reshard_parents_incomplete",
                  "Sealed shards of the stream not yet read to their end, summed over its groups "
                  "(SPEC RS3): children wait for them; as of the last stream tick");
  Family<Counter>& regressions =
      CounterFamily(registry, "rsc_metadata_version_regressions_total",
                    "Metadata version regressions detected (M2 ahead, M8 diverged)");
  Family<Counter>& client_ahead_family =
      CounterFamily(registry, "rsc_client_version_ahead_total",
                    "Requests whose client-observed metadata version exceeds the stored one");
  Counter& client_ahead = client_ahead_family.Add({});
  Family<Counter>& unproven_family = CounterFamily(
      registry, "rsc_unproven_client_versions_total",
      "Requests claiming a version ahead of or diverging from the store with a lineage token "
      "the group never issued (answered with the stored truth, not taken as lost writes)");
  Counter& unproven = unproven_family.Add({});
  Family<Gauge>& rounds_family = GaugeFamily(registry, "rsc_correction_rounds_active",
                                             "Groups with an active correction round");
  Gauge& rounds = rounds_family.Add({});
  Family<Counter>& unreadable_family =
      CounterFamily(registry, "rsc_metadata_unreadable_total",
                    "Metadata that could not be interpreted (schema/layout/corrupt, L3)");
  Counter& unreadable = unreadable_family.Add({});
  Family<Counter>& invariant_failures =
      CounterFamily(registry, "rsc_group_invariant_failures_total",
                    "Decisions refused because their next state broke an invariant; the group "
                    "fails closed (METADATA_UNREADABLE) until restored");
  Family<Counter>& missing_family = CounterFamily(
      registry, "rsc_metadata_missing_total", "Indexed groups whose metadata key is missing (L1)");
  Counter& missing = missing_family.Add({});
  Family<Counter>& compat_family = CounterFamily(registry, "rsc_redis_compat_failures_total",
                                                 "Redis compatibility check failures (L4)");
  Counter& compat = compat_family.Add({});
  Family<Gauge>& policy_warning = GaugeFamily(registry, "rsc_redis_policy_warning",
                                              "1 while a Redis policy warning holds (L4)");
  Family<Counter>& script_reloads_family = CounterFamily(
      registry, "rsc_script_reloads_total", "Lua scripts reloaded after NOSCRIPT (L5)");
  Counter& script_reloads = script_reloads_family.Add({});
  Family<Counter>& lock_timeouts_family =
      CounterFamily(registry, "rsc_lock_timeouts_total", "Group mutex acquisitions that timed out");
  Counter& lock_timeouts = lock_timeouts_family.Add({});
  Family<Counter>& expired_family =
      CounterFamily(registry, "rsc_members_expired_total", "Members expired by lease");
  Counter& expired = expired_family.Add({});
  Family<Counter>& fenced_family =
      CounterFamily(registry, "rsc_members_fenced_total", "Members fenced");
  Counter& fenced = fenced_family.Add({});
  Family<Counter>& taken_family = CounterFamily(
      registry, "rsc_shards_taken_total",
      "Stuck shards taken from their owner at the rebalance timeout (the member keeps the rest)");
  Counter& taken = taken_family.Add({});
  Family<Counter>& reshard_family =
      CounterFamily(registry, "rsc_reshard_events_total",
                    "Resharding events: parent_completed, parent_reopened, parent_resealed, "
                    "generation_deleted, retired_key_kept, layout_rolled_forward, "
                    "layout_behind, shard_key_recreated, shard_key_recreate_deferred, "
                    "layout_adoption_deferred (SPEC RS2-RS6, D3)");
  Family<Counter>& ticks_family =
      CounterFamily(registry, "rsc_ticks_total", "Group ticks run (one per group per pass)");
  Counter& ticks = ticks_family.Add({});
  Family<Counter>& audit_failures_family = CounterFamily(
      registry, "rsc_audit_write_failures_total",
      "Admin mutations whose entry could not be appended to redis-stream:coord:audit (O4)");
  Counter& audit_failures = audit_failures_family.Add({});
  Family<Counter>& previous_tokens = CounterFamily(
      registry, "rsc_auth_previous_token_requests_total",
      "Requests admitted with a role's previous token, by role (a rotation in progress, O4)");
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::OnHttpRequest(std::string_view route, int status, double seconds) {
  std::string r(route);
  impl_->http_requests.Add({{"route", r}, {"status", std::to_string(status)}}).Increment();
  impl_->http_duration.Add({{"route", r}}, LatencyBuckets()).Observe(seconds);
}

void Metrics::OnHttpServerReply(int status) {
  impl_->http_requests.Add({{"route", "http_protocol"}, {"status", std::to_string(status)}})
      .Increment();
}

void Metrics::SetOpenConnections(int64_t n) { impl_->open_connections.Set(static_cast<double>(n)); }

void Metrics::SetTerminating(bool terminating) { impl_->terminating.Set(terminating ? 1 : 0); }

void Metrics::OnHeartbeat(std::string_view status_name) {
  impl_->heartbeats.Add({{"status", std::string(status_name)}}).Increment();
}

void Metrics::ObserveMutexWait(double seconds) { impl_->mutex_wait.Observe(seconds); }

void Metrics::OnRevisionConflict() { impl_->revision_conflicts.Increment(); }

void Metrics::OnSteadyRenewal(bool applied) {
  (applied ? impl_->steady_applied : impl_->steady_refused).Increment();
}

void Metrics::SetMemberHeartbeatAge(const GroupKey& key, double max_age_seconds) {
  impl_->heartbeat_age.Add(GroupLabels(key)).Set(max_age_seconds);
}

void Metrics::SetRevokingShards(const GroupKey& key, int64_t shards) {
  impl_->revoking_shards.Add(GroupLabels(key)).Set(static_cast<double>(shards));
}

void Metrics::SetReshardParentsIncomplete(const std::string& stream, int64_t pairs) {
  impl_->parents_incomplete.Add({{"stream", stream}}).Set(static_cast<double>(pairs));
}

void Metrics::SetGroupBacklog(const GroupKey& key, int64_t lag, int64_t pending,
                              double oldest_seconds) {
  impl_->group_lag.Add(GroupLabels(key)).Set(static_cast<double>(lag));
  impl_->group_pending.Add(GroupLabels(key)).Set(static_cast<double>(pending));
  impl_->group_oldest_pending.Add(GroupLabels(key)).Set(oldest_seconds);
}

namespace {
// The states of the group view's shards (docs/protocol.md 7.2; decide.cc sets them):
// each always has a series, so a state's count falls to 0 instead of vanishing.
constexpr const char* kShardStates[] = {"ASSIGNED", "UNASSIGNED", "DRAINING", "WAITING_PARENTS",
                                        "COMPLETED"};

prometheus::Labels StateLabels(const GroupKey& key, const std::string& state) {
  return {{"stream", key.stream}, {"group", key.group}, {"state", state}};
}
}  // namespace

void Metrics::SetGroupMembers(const GroupKey& key, int64_t members) {
  impl_->group_members.Add(GroupLabels(key)).Set(static_cast<double>(members));
}

void Metrics::SetGroupShardStates(const GroupKey& key,
                                  const std::map<std::string, int64_t>& counts) {
  for (const char* state : kShardStates) {
    auto it = counts.find(state);
    impl_->group_shards.Add(StateLabels(key, state))
        .Set(static_cast<double>(it == counts.end() ? 0 : it->second));
  }
}

namespace {
prometheus::Labels ShardLabels(const GroupKey& key, int32_t shard) {
  return {{"stream", key.stream}, {"group", key.group}, {"shard", std::to_string(shard)}};
}
}  // namespace

void Metrics::SetShardBacklog(const GroupKey& key, int32_t shard, std::optional<int64_t> lag,
                              int64_t pending) {
  if (lag) {
    impl_->shard_lag.Add(ShardLabels(key, shard)).Set(static_cast<double>(*lag));
  } else {
    impl_->shard_lag.Remove(&impl_->shard_lag.Add(ShardLabels(key, shard)));
  }
  impl_->shard_pending.Add(ShardLabels(key, shard)).Set(static_cast<double>(pending));
}

void Metrics::ForgetShard(const GroupKey& key, int32_t shard) {
  impl_->shard_lag.Remove(&impl_->shard_lag.Add(ShardLabels(key, shard)));
  impl_->shard_pending.Remove(&impl_->shard_pending.Add(ShardLabels(key, shard)));
}

void Metrics::ForgetGroup(const GroupKey& key) {
  // Add() returns the existing series (or a fresh one), which Remove() then drops.
  impl_->heartbeat_age.Remove(&impl_->heartbeat_age.Add(GroupLabels(key)));
  impl_->revoking_shards.Remove(&impl_->revoking_shards.Add(GroupLabels(key)));
  impl_->group_lag.Remove(&impl_->group_lag.Add(GroupLabels(key)));
  impl_->group_pending.Remove(&impl_->group_pending.Add(GroupLabels(key)));
  impl_->group_oldest_pending.Remove(&impl_->group_oldest_pending.Add(GroupLabels(key)));
  impl_->group_members.Remove(&impl_->group_members.Add(GroupLabels(key)));
  for (const char* state : kShardStates) {
    impl_->group_shards.Remove(&impl_->group_shards.Add(StateLabels(key, state)));
  }
}

void Metrics::OnRegression(std::string_view kind) {
  impl_->regressions.Add({{"kind", std::string(kind)}}).Increment();
}

void Metrics::OnClientVersionAhead() { impl_->client_ahead.Increment(); }
void Metrics::OnUnprovenVersion() { impl_->unproven.Increment(); }

void Metrics::SetCorrectionRoundsActive(int64_t rounds) {
  impl_->rounds.Set(static_cast<double>(rounds));
}

void Metrics::OnMetadataUnreadable() { impl_->unreadable.Increment(); }
void Metrics::OnInvariantFailure(const GroupKey& key) {
  impl_->invariant_failures.Add(GroupLabels(key)).Increment();
}
void Metrics::OnMetadataMissing() { impl_->missing.Increment(); }
void Metrics::OnRedisCompatFailure() { impl_->compat.Increment(); }

void Metrics::SetRedisPolicyWarning(std::string_view kind, bool active) {
  impl_->policy_warning.Add({{"kind", std::string(kind)}}).Set(active ? 1 : 0);
}

void Metrics::OnScriptReload() { impl_->script_reloads.Increment(); }
void Metrics::OnLockTimeout() { impl_->lock_timeouts.Increment(); }
void Metrics::OnMembersExpired(int64_t n) { impl_->expired.Increment(static_cast<double>(n)); }
void Metrics::OnMembersFenced(int64_t n) { impl_->fenced.Increment(static_cast<double>(n)); }
void Metrics::OnShardTaken() { impl_->taken.Increment(); }

void Metrics::OnReshardEvent(std::string_view event) {
  impl_->reshard_family.Add({{"event", std::string(event)}}).Increment();
}
void Metrics::OnTick() { impl_->ticks.Increment(); }

void Metrics::OnAuditWriteFailure() { impl_->audit_failures.Increment(); }

void Metrics::OnPreviousToken(std::string_view role) {
  impl_->previous_tokens.Add({{"role", std::string(role)}}).Increment();
}

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry.Collect());
}

prometheus::Registry& Metrics::registry() { return impl_->registry; }

}  // namespace rsc
