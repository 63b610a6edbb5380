#pragma once
// Coordinator-side Prometheus metrics (SPEC §11), all prefixed `rsc_`.
//
// One Metrics object per process, owned by main and handed by reference to the HTTP API
// (request counts, /metrics) and to GroupService (protocol signals). It owns its
// prometheus::Registry; Serialize() renders the text exposition format that /metrics
// serves, so no civetweb exposer is needed.
//
// Signals and their meaning:
//   rsc_coordinator_terminating                 gauge 1 while in terminating mode (S1)
//   rsc_http_requests_total{route,status}       counter per route name and HTTP status
//                                               (route="unmatched": 404/405/bad names;
//                                               route="http_protocol": 400 malformed
//                                               HTTP, 413, 503 while stopping)
//   rsc_http_request_duration_seconds{route}    histogram of handler + queueing time
//   rsc_http_open_connections                   gauge, set when /metrics is scraped
//   rsc_heartbeats_total{status}                OK / REVOKE_PENDING / DRAIN / SYNC_METADATA,
//                                               or the error code name of a failed one;
//                                               counted by the HTTP API (api.cc) for
//                                               every heartbeat and leave answer, so
//                                               GroupService must NOT call OnHeartbeat
//   rsc_mutex_wait_seconds                      histogram: time to acquire a group mutex
//   rsc_revision_conflicts_total                CAS failures on the metadata hash (R2.6)
//   rsc_steady_renewals_total{outcome}          heartbeat batches committed by the steady
//                                               path (applied) or sent on to the locked
//                                               path (refused; issue 14)
//   rsc_member_heartbeat_age_seconds{stream,group}
//                                               gauge: the OLDEST member heartbeat age in
//                                               the group as of the last load (a member
//                                               near memberLeaseMs is about to expire);
//                                               a gauge, not a histogram, because the
//                                               runbook alert is "max age > lease/2"
//   rsc_revoking_shards{stream,group}           gauge: shards being drained in the group
//   rsc_metadata_version_regressions_total{kind}
//                                               kind="ahead" (client version > stored, M2)
//                                               or "diverged" (lineage mismatch, M8)
//   rsc_client_version_ahead_total              heartbeats/routing calls whose reported
//                                               version is above the stored one
//   rsc_unproven_client_versions_total          requests claiming a version ahead of or
//                                               diverging from the store with a lineage
//                                               token the group never issued: told the
//                                               stored truth, not taken as lost writes
//   rsc_correction_rounds_active                gauge: groups with an active round
//   rsc_metadata_unreadable_total               schema/layout/corrupt JSON (L3, M7)
//   rsc_metadata_missing_total                  indexed group whose key is gone (L1)
//   rsc_group_invariant_failures_total{stream,group}
//                                               decisions refused because their next
//                                               state broke an invariant: the group fails
//                                               closed, the process serves the others
//   rsc_redis_compat_failures_total             Redis compatibility check failures (L4)
//   rsc_redis_policy_warning{kind}              gauge 1 while a policy warning holds
//                                               (e.g. kind="eviction",
//                                               "persistence")
//   rsc_script_reloads_total                    NOSCRIPT recoveries (L5)
//   rsc_lock_timeouts_total                     group mutex acquisitions that timed out
//   rsc_members_expired_total                   members removed by lease expiry
//   rsc_members_fenced_total                    members fenced (rebalance timeout of a
//                                               client without `shard-lease`, admin)
//   rsc_shards_taken_total                      stuck shards taken from their owner at the
//                                               rebalance timeout (C8)
//   rsc_reshard_events_total{event}             resharding events (SPEC RS2–RS6):
//                                               parent_completed, parent_reopened (a
//                                               completion undone), parent_resealed (a
//                                               lost seal written again),
//                                               generation_deleted (retired keys emptied
//                                               to tombstones, generation dropped),
//                                               retired_key_kept (a retired key without
//                                               its seal: runbook 7a), layout_rolled_forward
//                                               (a layout found behind its seals written
//                                               forward), layout_behind (one that could not
//                                               be: routing fails closed, runbook 7e),
//                                               shard_key_recreated (a missing key of a
//                                               resharded stream's ACTIVE generation),
//                                               shard_key_recreate_deferred (not created:
//                                               the layout moved between the tick's reads),
//                                               layout_adoption_deferred (a group not
//                                               written from a layout read before a
//                                               rollback)
//   rsc_reshard_parents_incomplete{stream}      gauge: sealed (not yet retired) shards
//                                               of the stream not read to their end,
//                                               summed over its groups, as of the last
//                                               stream tick (children wait for them; a
//                                               value that stays up is a reshard that
//                                               does not finish: runbook 7a)
//   rsc_group_lag{stream,group}                 gauge: entries not yet delivered to the
//                                               group, summed over its shards (XINFO
//                                               GROUPS lag; shards where Redis cannot
//                                               tell count 0), every tick (O1)
//   rsc_group_pending{stream,group}             gauge: delivered, not acknowledged (PELs)
//   rsc_group_oldest_pending_seconds{stream,group}
//                                               gauge: idle time of the oldest pending
//                                               entry over the group's shards
//   rsc_group_members{stream,group}             gauge: member records of the group (live,
//                                               leaving or fenced) after its last tick
//   rsc_group_shards{stream,group,state}        gauge: the group's shards per O1 state
//                                               (ASSIGNED, UNASSIGNED, DRAINING,
//                                               WAITING_PARENTS, COMPLETED; every state
//                                               always has a series), every tick
//   rsc_shard_lag{stream,group,shard}           the same per shard, only with
//   rsc_shard_pending{stream,group,shard}       --shard-metrics (one series per shard)
//   rsc_ticks_total                             tick passes run
//   rsc_auth_previous_token_requests_total{role}
//                                               requests admitted with a role's previous
//                                               token (a rotation not finished, auth.h)
//   rsc_audit_write_failures_total              admin mutations whose audit entry could
//                                               not be appended (the mutation stands;
//                                               server/audit.h, SPEC O4)
//
// Thread safety: every method may be called concurrently from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/types.h"

namespace prometheus {
class Registry;
}

namespace rsc {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // HTTP layer. `route` is a fixed route name (never a raw path: label cardinality).
  void OnHttpRequest(std::string_view route, int status, double seconds);
  // A reply the HTTP server made itself (malformed HTTP, 413, stopping): counted under
  // route="http_protocol", without a duration.
  void OnHttpServerReply(int status);
  void SetOpenConnections(int64_t n);
  void SetTerminating(bool terminating);
  // Called by the HTTP API once per heartbeat/leave answer (see rsc_heartbeats_total).
  void OnHeartbeat(std::string_view status_name);

  // Protocol signals for GroupService / tick loop.
  void ObserveMutexWait(double seconds);
  void OnRevisionConflict();
  void OnSteadyRenewal(bool applied);
  void SetMemberHeartbeatAge(const GroupKey& key, double max_age_seconds);
  void SetRevokingShards(const GroupKey& key, int64_t shards);
  // (group, sealed shard) pairs not complete yet, per stream (rsc_reshard_parents_incomplete).
  void SetReshardParentsIncomplete(const std::string& stream, int64_t pairs);
  // O1: the group's summed lag and pending and its oldest pending entry's idle time.
  void SetGroupBacklog(const GroupKey& key, int64_t lag, int64_t pending, double oldest_seconds);
  // Member records of the group (rsc_group_members).
  void SetGroupMembers(const GroupKey& key, int64_t members);
  // Shards per O1 state (rsc_group_shards): the five states of the group view, each set
  // (0 when absent from `counts`); other names in `counts` are ignored.
  void SetGroupShardStates(const GroupKey& key, const std::map<std::string, int64_t>& counts);
  // Per shard (--shard-metrics); a shard whose lag Redis cannot tell gets no lag series.
  void SetShardBacklog(const GroupKey& key, int32_t shard, std::optional<int64_t> lag,
                       int64_t pending);
  void ForgetShard(const GroupKey& key, int32_t shard);
  void ForgetGroup(const GroupKey& key);     // drops the per-group series (deleted group)
  void OnRegression(std::string_view kind);  // "ahead" | "diverged"
  void OnClientVersionAhead();
  void OnUnprovenVersion();
  void SetCorrectionRoundsActive(int64_t rounds);
  void OnMetadataUnreadable();
  void OnMetadataMissing();
  void OnInvariantFailure(const GroupKey& key);
  void OnRedisCompatFailure();
  void SetRedisPolicyWarning(std::string_view kind, bool active);
  void OnScriptReload();
  void OnLockTimeout();
  void OnMembersExpired(int64_t n = 1);
  void OnMembersFenced(int64_t n = 1);
  void OnShardTaken();
  // SPEC §13 stream-tick and group events, by event name (rsc_reshard_events_total).
  void OnReshardEvent(std::string_view event);
  void OnTick();
  // An audit entry that could not be written (rsc_audit_write_failures_total).
  void OnAuditWriteFailure();
  // A request admitted with `role`'s previous token (rsc_auth_previous_token_requests_total).
  void OnPreviousToken(std::string_view role);

  // Prometheus text exposition format (version 0.0.4).
  std::string Serialize() const;
  // For callers that register their own families (e.g. the Redis adapter).
  prometheus::Registry& registry();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc
