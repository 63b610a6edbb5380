#include "core/stream_decide.h"

#include <fmt/format.h>

#include <algorithm>

namespace rsc {

Decision<RoutingResponse> DecideStreamRouting(const StoredLayout& stored, int64_t observed_version,
                                              const std::string& observed_lineage) {
  const Layout& l = stored.layout;
  std::vector<Event> events;
  bool sync = false;
  if (observed_version > l.version) {
    sync = true;
    events.push_back(Event{
        EventKind::kVersionRegression, "producer", -1,
        fmt::format("producer saw layout version {} > stored {}", observed_version, l.version)});
  } else if (observed_version == l.version && !observed_lineage.empty() &&
             observed_lineage != l.lineage) {
    sync = true;
    events.push_back(Event{
        EventKind::kLineageDivergence, "producer", -1,
        fmt::format("producer saw layout version {} with another lineage", observed_version)});
  }
  RoutingResponse r;
  r.metadata_version = l.version;
  r.lineage = l.lineage;
  if (const Generation* g = l.Active()) {
    r.shard_count = static_cast<int32_t>(g->shards.size());
    for (const LayoutShard& s : g->shards) r.shards.push_back(RoutingShard{s.id, s.stream});
    r.generation = g->generation;
  }
  r.layout_revision = stored.revision.value();
  r.routing_lease_ms = l.routing_lease_ms;
  r.refresh_interval_ms = l.routing_refresh_ms;
  r.sync = sync;
  return Decision<RoutingResponse>{std::nullopt, {}, r, std::move(events)};
}

Result<std::optional<Layout>> DecidePatchStream(const Layout& stored, const PatchStreamRequest& req,
                                                const std::string& fresh_lineage) {
  if (!req.routing_lease_ms && !req.routing_refresh_ms) {
    return MakeError(ErrorCode::kInvalidRequest,
                     "patch changes nothing: give routingLeaseMs and/or routingRefreshMs");
  }
  const int64_t lease = req.routing_lease_ms.value_or(stored.routing_lease_ms);
  const int64_t refresh = req.routing_refresh_ms.value_or(stored.routing_refresh_ms);
  for (const auto& [name, value] :
       {std::pair{"routingLeaseMs", lease}, std::pair{"routingRefreshMs", refresh}}) {
    if (value < kMinDurationMs || value > kMaxDurationMs) {
      return MakeError(ErrorCode::kInvalidRequest,
                       fmt::format("{} must be between {} and {} ms, got {}", name, kMinDurationMs,
                                   kMaxDurationMs, value));
    }
  }
  if (refresh >= lease) {
    return MakeError(
        ErrorCode::kInvalidRequest,
        fmt::format("routingRefreshMs ({}) must be below routingLeaseMs ({})", refresh, lease));
  }
  if (lease == stored.routing_lease_ms && refresh == stored.routing_refresh_ms) {
    return std::optional<Layout>{};
  }
  Layout next = stored;
  next.version = std::min(stored.version + 1, kMaxCounter);
  next.lineage = fresh_lineage;
  next.routing_lease_ms = lease;
  next.routing_refresh_ms = refresh;
  RSC_RETURN_IF_ERROR(CheckLayoutInvariants(next));
  return std::optional<Layout>{std::move(next)};
}

}  // namespace rsc
