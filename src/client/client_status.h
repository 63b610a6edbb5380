#pragma once
// What Consumer::Status() and Producer::Metrics() report (include/rsc/), made from the
// runtime's state and the port's own facts. No I/O and no clock: the caller passes the time
// (rounded up, as the lease checks use it) and its threads, connections and endpoint names.
// The simulator reports its consumers and producers through the same functions and renders
// them with RenderMetricsText (include/rsc/metrics.h), as an application's scrape would.

#include <cstdint>
#include <string>

#include "client/consumer_runtime.h"
#include "client/producer_runtime.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"

namespace rsc::client {

// A consumer port's facts: its lifecycle, threads and connections, and the coordinator
// endpoint it now talks to (by the runtime's endpoint index).
struct ConsumerPortFacts {
  bool started = false;
  bool stopped = false;
  std::string member_id;
  std::string coordinator_endpoint;
  int threads = 0;
  int redis_connections = 0;
};

rsc::ConsumerStatus ConsumerStatusOf(const ConsumerOptions& options, const ConsumerRuntime& runtime,
                                     const DeliveryStats& stats, TimeMs now_ceil,
                                     const ConsumerPortFacts& port);

// A producer port's counts (publish calls are the port's) and endpoint name.
struct ProducerPortFacts {
  int64_t publishes_ok = 0;
  int64_t publishes_failed = 0;
  int64_t seal_refresh_waits = 0;
  std::string current_endpoint;
};

ProducerMetrics ProducerMetricsOf(const ProducerOptions& options, const ProducerRuntime& runtime,
                                  TimeMs now_ceil, const ProducerPortFacts& port);

}  // namespace rsc::client
