#pragma once
// Client metrics in the Prometheus text exposition format (SPEC §11 client signals, O2):
// what a Consumer (Status()) and a Producer (Metrics()) report, rendered so that an
// application exports them without writing any glue. docs/metrics.md lists every metric.
//
// Three layers, use the one that fits:
// * RenderMetricsText(): pure, snapshots in, text out (no I/O, no clock). For tests and for
//   applications that already serve a /metrics page (append the text to theirs).
// * MetricsRegistry: the consumers and producers of one process; Render() snapshots each of
//   them now and renders them together (each metric family once, one series per client).
// * MetricsServer: an optional HTTP listener serving GET /metrics from a registry (or any
//   text source). Nothing listens unless the application starts one.
//
//   rsc::MetricsRegistry registry;
//   registry.Add(*consumer);
//   registry.Add(*producer);
//   std::string error;
//   auto server = rsc::MetricsServer::Start({.host = "0.0.0.0", .port = 9464}, registry, &error);
//
// Series and labels: consumer series carry stream, group and member (the member id; "" until
// the first join); producer series carry stream and group. A client added with extra labels
// (e.g. {"consumer", "c1"}) gets them after those. Two clients of one process with the same
// label set would render duplicate series, which Prometheus rejects: give such clients (two
// consumers of one group before they joined, two producers of one group) an extra label that
// tells them apart. Label values may hold any bytes; they are escaped as the format requires.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rsc/consumer.h"
#include "rsc/producer.h"

namespace rsc {

// Extra labels of one client's series, in order. Names must match [a-zA-Z_][a-zA-Z0-9_]*, must
// not start with "__" and must not be stream, group or member (precondition: RenderMetricsText
// skips a label that breaks it rather than emit text Prometheus rejects).
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

struct ConsumerMetricsSample {
  ConsumerStatus status;
  MetricLabels labels;
};

struct ProducerMetricsSample {
  ProducerMetrics metrics;
  MetricLabels labels;
};

// The Content-Type of the text RenderMetricsText produces.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Text exposition format 0.0.4: every family with its # HELP and # TYPE lines, then one
// sample per client (families of a kind with no client are left out). Counters end in
// _total; durations are in seconds. Deterministic: the same samples give the same text.
std::string RenderMetricsText(const std::vector<ConsumerMetricsSample>& consumers,
                              const std::vector<ProducerMetricsSample>& producers);

// One client alone, snapshotted now.
std::string MetricsText(const Consumer& consumer, const MetricLabels& labels = {});
std::string MetricsText(const Producer& producer, const MetricLabels& labels = {});

// The clients one process exports. Thread safety: every method may be called from any
// thread. Lifetime: a client must stay alive while it is registered; once Remove() returns,
// the registry no longer touches it (a Render() in progress has finished with it).
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Adding a client twice replaces its labels.
  void Add(const Consumer& consumer, MetricLabels labels = {});
  void Add(const Producer& producer, MetricLabels labels = {});
  // No-op for a client that is not registered.
  void Remove(const Consumer& consumer);
  void Remove(const Producer& producer);

  // Status() / Metrics() of every registered client, in the order they were added, rendered
  // with RenderMetricsText.
  std::string Render() const;

 private:
  mutable std::mutex mu_;  // guards the lists, and is held while their clients are read
  std::vector<std::pair<const Consumer*, MetricLabels>> consumers_;
  std::vector<std::pair<const Producer*, MetricLabels>> producers_;
};

struct MetricsServerOptions {
  // Host name or address to bind ("0.0.0.0" or "::" for every interface). The default
  // serves only this machine.
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: a free port, see MetricsServer::port()
  // A connection that takes longer than this to send a request (or to read the response)
  // is closed; an idle keep-alive connection is closed after it too.
  std::chrono::milliseconds io_timeout{10000};
};

// Called once per scrape on the server's thread; returns the exposition text. Must not
// block for long (scrapes are served one at a time). An exception is answered 500.
using MetricsSource = std::function<std::string()>;

// An HTTP/1.1 listener on one thread: GET /metrics (any query string) answers 200 with the
// source's text; other paths 404; other methods on /metrics 405. Keep-alive is honoured.
// Thread safety: all methods may be called from any thread except the source itself.
class MetricsServer {
 public:
  // Binds, listens and starts the thread. nullptr (with *error set, when error is not
  // null) when the host does not resolve or the bind fails.
  static std::unique_ptr<MetricsServer> Start(MetricsServerOptions options, MetricsSource source,
                                              std::string* error);
  // Serves registry.Render(); the registry must outlive the server.
  static std::unique_ptr<MetricsServer> Start(MetricsServerOptions options,
                                              const MetricsRegistry& registry, std::string* error);

  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  uint16_t port() const;  // the bound port
  // Closes the listener and joins the thread. Idempotent. When it returns, the source is
  // not called again and nothing is answered; connections still open (a scraper's
  // keep-alive) are closed when the MetricsServer is destroyed.
  void Stop();

  class Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc
