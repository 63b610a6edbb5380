// RenderMetricsText (include/rsc/metrics.h): client snapshots as Prometheus text (MetricsText
// and MetricsRegistry, which take the snapshots, are in metrics_registry.cc). The text itself is
// written by prometheus-cpp's TextSerializer (the library the coordinator's /metrics uses,
// ENGINEERING §2): it owns the format's escaping and number formatting, so this file only maps
// snapshot fields to families. No Registry is kept: the families are rebuilt from a snapshot at
// every scrape, so a client's metrics are exactly its Status() / Metrics() at that moment.

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <sstream>
#include <string_view>

#include "rsc/metrics.h"

namespace rsc {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr MetricType kGauge = MetricType::Gauge;
constexpr MetricType kCounter = MetricType::Counter;

// One metric family read from a snapshot. `value` returns nullopt when the snapshot has no
// meaningful value (the family is still rendered, with HELP and TYPE).
template <class Snapshot>
struct FamilySpec {
  const char* name;
  const char* help;
  MetricType type;
  std::function<std::optional<double>(const Snapshot&)> value;
};

// A number or bool field as it is.
template <class Snapshot, class T>
std::function<std::optional<double>(const Snapshot&)> Of(T Snapshot::*field) {
  return
      [field](const Snapshot& s) -> std::optional<double> { return static_cast<double>(s.*field); };
}

// A millisecond field in seconds (Prometheus base units).
template <class Snapshot>
std::function<std::optional<double>(const Snapshot&)> MsAsSeconds(int64_t Snapshot::*field) {
  return [field](const Snapshot& s) -> std::optional<double> {
    return static_cast<double>(s.*field) / 1000.0;
  };
}

// The size of a list field (shards).
template <class Snapshot, class T>
std::function<std::optional<double>(const Snapshot&)> SizeOf(T Snapshot::*field) {
  return [field](const Snapshot& s) -> std::optional<double> {
    return static_cast<double>((s.*field).size());
  };
}

// The families of a consumer. Names follow the seed's §11 signals where it names one
// (assignment lease remaining, revoking shards per member); the rest are ConsumerStatus.
const std::array<FamilySpec<ConsumerStatus>, 22> kConsumerFamilies = {{
    {"rsc_consumer_assignment_lease_remaining_seconds",
     "Consumer assignment lease remaining time: seconds until this member must stop reading "
     "its shards unless a heartbeat renews the lease (0 without a lease or once it ended; "
     "SPEC C1, C4)",
     kGauge, MsAsSeconds(&ConsumerStatus::lease_remaining_ms)},
    {"rsc_consumer_revoking_shards",
     "Member revoking shard count: shards this member is draining or has revoked but not yet "
     "had confirmed by the coordinator",
     kGauge, Of(&ConsumerStatus::revoking_count)},
    {"rsc_consumer_failed_closed",
     "1 while the assignment lease has ended without a successful heartbeat: the consumer "
     "reads nothing until it renews or rejoins (SPEC C4)",
     kGauge, Of(&ConsumerStatus::failed_closed)},
    {"rsc_consumer_reading_shards", "Shards this member is reading", kGauge,
     SizeOf(&ConsumerStatus::reading)},
    {"rsc_consumer_taken_shards",
     "Shards taken from this member at the rebalance timeout (stuck handler, C8), still read "
     "under their final lease",
     kGauge, SizeOf(&ConsumerStatus::taken)},
    {"rsc_consumer_stopped",
     "1 once the consumer has stopped (Stop() finished, or the kStop handler policy ended it)",
     kGauge, Of(&ConsumerStatus::stopped)},
    {"rsc_consumer_member_epoch", "Member epoch the coordinator last gave this member", kGauge,
     Of(&ConsumerStatus::member_epoch)},
    {"rsc_consumer_assignment_epoch", "Assignment epoch of this member's current assignment",
     kGauge, Of(&ConsumerStatus::assignment_epoch)},
    {"rsc_consumer_metadata_version",
     "Highest group metadata version this consumer has observed (SPEC C5)", kGauge,
     Of(&ConsumerStatus::metadata_version)},
    {"rsc_consumer_heartbeat_consecutive_failures",
     "Heartbeats failed in a row since the last successful one", kGauge,
     Of(&ConsumerStatus::consecutive_heartbeat_failures)},
    {"rsc_consumer_heartbeats_total", "Heartbeats sent to the coordinator", kCounter,
     Of(&ConsumerStatus::heartbeats_sent)},
    {"rsc_consumer_lease_expirations_total",
     "Times the assignment lease ended without renewal (the consumer failed closed)", kCounter,
     Of(&ConsumerStatus::lease_expirations)},
    {"rsc_consumer_rejoins_total",
     "Times this consumer joined the group again (after member lease expiry, fencing or an "
     "unknown-member answer)",
     kCounter, Of(&ConsumerStatus::rejoins)},
    {"rsc_consumer_shards_taken_total",
     "Taken shards abandoned at the end of their final lease (C8)", kCounter,
     Of(&ConsumerStatus::shards_taken)},
    {"rsc_consumer_messages_handled_total", "Handler calls that succeeded", kCounter,
     Of(&ConsumerStatus::messages_handled)},
    {"rsc_consumer_messages_acked_total", "Entries acknowledged (XACK confirmed by Redis)",
     kCounter, Of(&ConsumerStatus::messages_acked)},
    {"rsc_consumer_messages_claimed_total",
     "Pending entries taken over from previous owners of a shard (C7)", kCounter,
     Of(&ConsumerStatus::messages_claimed)},
    {"rsc_consumer_late_read_reclaims_total",
     "Times a reader claimed back entries that a previous owner's late read took after the "
     "takeover",
     kCounter, Of(&ConsumerStatus::late_read_reclaims)},
    {"rsc_consumer_handler_failures_total", "Handler attempts that failed or threw", kCounter,
     Of(&ConsumerStatus::handler_failures)},
    {"rsc_consumer_dead_lettered_total", "Entries moved to a dead-letter stream and acknowledged",
     kCounter, Of(&ConsumerStatus::dead_lettered)},
    {"rsc_consumer_threads", "Threads the consumer runs (timer, HTTP, Redis, handlers)", kGauge,
     Of(&ConsumerStatus::threads)},
    {"rsc_consumer_redis_connections", "Open Redis connections of the consumer", kGauge,
     Of(&ConsumerStatus::redis_connections)},
}};

// The phases ConsumerStatus::phase takes: rsc_consumer_phase has one series per phase, 1 for
// the current one, so a dashboard sees a phase change as a value change, not a new series.
constexpr std::array<std::string_view, 5> kConsumerPhases = {"idle", "joining", "member", "leaving",
                                                             "left"};

// The families of a producer (seed §11: routing cache age and refresh failures; the rest
// are ProducerMetrics).
const std::array<FamilySpec<ProducerMetrics>, 13> kProducerFamilies = {{
    {"rsc_producer_routing_cache_age_seconds",
     "Producer routing cache age: seconds since the send time of the last successful routing "
     "refresh (no sample until a routing is cached)",
     kGauge,
     [](const ProducerMetrics& m) -> std::optional<double> {
       if (!m.has_routing) return std::nullopt;
       return static_cast<double>(m.routing_cache_age_ms) / 1000.0;
     }},
    {"rsc_producer_routing_lease_remaining_seconds",
     "Seconds until the routing cache expires and publishes fail closed unless a refresh "
     "succeeds (0 without a routing or once expired; SPEC PR5)",
     kGauge, MsAsSeconds(&ProducerMetrics::lease_remaining_ms)},
    {"rsc_producer_routing_refresh_failures_total",
     "Producer routing refresh failures (transport errors, error answers, ignored stale "
     "answers)",
     kCounter, Of(&ProducerMetrics::refresh_failures)},
    {"rsc_producer_routing_refresh_consecutive_failures",
     "Routing refreshes failed in a row since the last successful one", kGauge,
     Of(&ProducerMetrics::consecutive_refresh_failures)},
    {"rsc_producer_routing_refreshes_total",
     "Routing refreshes that confirmed or replaced the cache", kCounter,
     Of(&ProducerMetrics::refreshes_ok)},
    {"rsc_producer_routing_sync_adoptions_total",
     "Routing answers marked sync that the producer adopted (metadata version correction)",
     kCounter, Of(&ProducerMetrics::sync_adoptions)},
    {"rsc_producer_routing_cached", "1 once a routing is cached (publishes can be routed)", kGauge,
     Of(&ProducerMetrics::has_routing)},
    {"rsc_producer_metadata_version", "Metadata version of the cached routing", kGauge,
     Of(&ProducerMetrics::metadata_version)},
    {"rsc_producer_shards", "Shard count of the cached routing", kGauge,
     Of(&ProducerMetrics::shard_count)},
    {"rsc_producer_messages_published_total", "Messages published (XADD acknowledged by Redis)",
     kCounter, Of(&ProducerMetrics::publishes_ok)},
    {"rsc_producer_publish_failures_total",
     "Publishes that returned an error (any code, including routing expired)", kCounter,
     Of(&ProducerMetrics::publishes_failed)},
    {"rsc_producer_publishes_refused_expired_total",
     "Publishes refused because the routing lease had expired (fail closed, SPEC PR5)", kCounter,
     Of(&ProducerMetrics::publishes_refused_expired)},
    {"rsc_producer_seal_refresh_waits_total",
     "Waits for a newer routing after Redis refused XADDs to a sealed shard (a reshard; the "
     "entries were sent again)",
     kCounter, Of(&ProducerMetrics::seal_refresh_waits)},
}};

bool IsReservedLabel(std::string_view name) {
  return name == "stream" || name == "group" || name == "member" || name == "phase" ||
         name.substr(0, 2) == "__";
}

// [a-zA-Z_][a-zA-Z0-9_]*, as the exposition format requires of label names.
bool IsValidLabelName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<ClientMetric::Label> Labels(std::vector<ClientMetric::Label> base,
                                        const MetricLabels& extra) {
  for (const auto& [name, value] : extra) {
    if (IsValidLabelName(name) && !IsReservedLabel(name)) base.push_back({name, value});
  }
  return base;
}

template <class Snapshot>
void AddFamilies(
    const FamilySpec<Snapshot>* specs, size_t n,
    const std::vector<std::pair<const Snapshot*, std::vector<ClientMetric::Label>>>& series,
    std::vector<MetricFamily>* out) {
  for (size_t i = 0; i < n; ++i) {
    const FamilySpec<Snapshot>& spec = specs[i];
    MetricFamily family{spec.name, spec.help, spec.type, {}};
    for (const auto& [snapshot, labels] : series) {
      const std::optional<double> v = spec.value(*snapshot);
      if (!v) continue;
      ClientMetric metric;
      metric.label = labels;
      (spec.type == kCounter ? metric.counter.value : metric.gauge.value) = *v;
      family.metric.push_back(std::move(metric));
    }
    out->push_back(std::move(family));
  }
}

}  // namespace

std::string RenderMetricsText(const std::vector<ConsumerMetricsSample>& consumers,
                              const std::vector<ProducerMetricsSample>& producers) {
  std::vector<MetricFamily> families;
  if (!consumers.empty()) {
    std::vector<std::pair<const ConsumerStatus*, std::vector<ClientMetric::Label>>> series;
    for (const ConsumerMetricsSample& c : consumers) {
      series.emplace_back(&c.status, Labels({{"stream", c.status.stream},
                                             {"group", c.status.group},
                                             {"member", c.status.member_id}},
                                            c.labels));
    }
    AddFamilies(kConsumerFamilies.data(), kConsumerFamilies.size(), series, &families);
    MetricFamily phase{"rsc_consumer_phase",
                       "1 for the consumer's current phase (idle, joining, member, leaving, "
                       "left), 0 for the others",
                       kGauge,
                       {}};
    for (const auto& [status, labels] : series) {
      for (std::string_view p : kConsumerPhases) {
        ClientMetric metric;
        metric.label = labels;
        metric.label.push_back({"phase", std::string(p)});
        metric.gauge.value = status->phase == p ? 1 : 0;
        phase.metric.push_back(std::move(metric));
      }
    }
    families.push_back(std::move(phase));
  }
  if (!producers.empty()) {
    std::vector<std::pair<const ProducerMetrics*, std::vector<ClientMetric::Label>>> series;
    for (const ProducerMetricsSample& p : producers) {
      series.emplace_back(
          &p.metrics, Labels({{"stream", p.metrics.stream}, {"group", p.metrics.group}}, p.labels));
    }
    AddFamilies(kProducerFamilies.data(), kProducerFamilies.size(), series, &families);
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace rsc
