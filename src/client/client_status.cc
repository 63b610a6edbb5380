#include "client/client_status.h"

namespace rsc::client {

rsc::ConsumerStatus ConsumerStatusOf(const ConsumerOptions& options, const ConsumerRuntime& runtime,
                                     const DeliveryStats& stats, TimeMs now_ceil,
                                     const ConsumerPortFacts& port) {
  const ConsumerStatus st = runtime.core().Status(now_ceil);
  rsc::ConsumerStatus out;
  out.stream = options.stream;
  out.group = options.group;
  out.started = port.started;
  out.stopped = port.stopped;
  out.phase = std::string(ConsumerPhaseName(st.phase));
  out.member_id = port.member_id;
  out.member_epoch = st.member_epoch;
  out.assignment_epoch = st.assignment_epoch;
  out.metadata_version = st.metadata_version;
  out.lineage = st.lineage;
  out.lease_remaining_ms = st.lease_remaining_ms;
  out.failed_closed = st.failed_closed;
  out.reading = st.reading;
  out.draining = st.draining;
  out.revoked = st.revoked;
  out.revoking_count = st.revoking_count;
  out.taken = st.taken;
  out.shards_taken = st.counters.shards_taken;
  out.coordinator_endpoint = port.coordinator_endpoint;
  out.consecutive_heartbeat_failures = st.consecutive_failures;
  out.last_heartbeat_error = runtime.last_error();
  out.heartbeats_sent = st.counters.heartbeats_sent;
  out.lease_expirations = st.counters.lease_expirations;
  out.rejoins = st.counters.rejoins;
  out.messages_handled = stats.handled.load();
  out.messages_acked = stats.acked.load();
  out.messages_claimed = stats.claimed.load();
  out.late_read_reclaims = stats.foreign_claims.load();
  out.handler_failures = stats.handler_failures.load();
  out.dead_lettered = stats.dead_lettered.load();
  out.last_handler_error = stats.handler_error();
  out.last_redis_error = stats.redis_error();
  out.stop_error = runtime.stop_error();
  out.threads = port.threads;
  out.redis_connections = port.redis_connections;
  return out;
}

ProducerMetrics ProducerMetricsOf(const ProducerOptions& options, const ProducerRuntime& runtime,
                                  TimeMs now_ceil, const ProducerPortFacts& port) {
  const ProducerCore& core = runtime.core();
  const ProducerCoreMetrics m = core.Metrics(now_ceil);
  ProducerMetrics out;
  out.stream = options.stream;
  out.group = options.group;
  out.has_routing = m.has_routing;
  out.metadata_version = m.metadata_version;
  out.shard_count = core.has_routing() ? core.routing()->shard_count : 0;
  out.routing_cache_age_ms = m.cache_age_ms;
  out.lease_remaining_ms = m.lease_remaining_ms;
  out.refresh_failures = m.refresh_failures;
  out.consecutive_refresh_failures = m.consecutive_failures;
  out.refreshes_ok = m.refreshes_ok;
  out.sync_adoptions = m.sync_adoptions;
  out.publishes_ok = port.publishes_ok;
  out.publishes_failed = port.publishes_failed;
  out.seal_refresh_waits = port.seal_refresh_waits;
  out.publishes_refused_expired = runtime.refused_expired();
  out.last_refresh_error = core.last_refresh_error();
  out.current_endpoint = port.current_endpoint;
  return out;
}

}  // namespace rsc::client
