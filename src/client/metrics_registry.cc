// MetricsText and MetricsRegistry (include/rsc/metrics.h): a live Consumer's Status() and a
// Producer's Metrics(), snapshotted now and rendered by RenderMetricsText (metrics_text.cc).
// Kept apart from the rendering so that what renders snapshots (the simulator too) does not
// link the clients themselves.

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "rsc/metrics.h"

namespace rsc {

std::string MetricsText(const Consumer& consumer, const MetricLabels& labels) {
  return RenderMetricsText({{consumer.Status(), labels}}, {});
}

std::string MetricsText(const Producer& producer, const MetricLabels& labels) {
  return RenderMetricsText({}, {{producer.Metrics(), labels}});
}

namespace {

template <class Client>
void AddOrReplace(std::vector<std::pair<const Client*, MetricLabels>>& list, const Client& c,
                  MetricLabels labels) {
  for (auto& [client, l] : list) {
    if (client == &c) {
      l = std::move(labels);
      return;
    }
  }
  list.emplace_back(&c, std::move(labels));
}

template <class Client>
void Erase(std::vector<std::pair<const Client*, MetricLabels>>& list, const Client& c) {
  list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& e) { return e.first == &c; }),
             list.end());
}

}  // namespace

void MetricsRegistry::Add(const Consumer& consumer, MetricLabels labels) {
  std::lock_guard<std::mutex> lock(mu_);
  AddOrReplace(consumers_, consumer, std::move(labels));
}

void MetricsRegistry::Add(const Producer& producer, MetricLabels labels) {
  std::lock_guard<std::mutex> lock(mu_);
  AddOrReplace(producers_, producer, std::move(labels));
}

void MetricsRegistry::Remove(const Consumer& consumer) {
  std::lock_guard<std::mutex> lock(mu_);
  Erase(consumers_, consumer);
}

void MetricsRegistry::Remove(const Producer& producer) {
  std::lock_guard<std::mutex> lock(mu_);
  Erase(producers_, producer);
}

std::string MetricsRegistry::Render() const {
  std::vector<ConsumerMetricsSample> consumers;
  std::vector<ProducerMetricsSample> producers;
  {
    // Held while the clients are read, so Remove() returning means they are not touched.
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [c, labels] : consumers_) consumers.push_back({c->Status(), labels});
    for (const auto& [p, labels] : producers_) producers.push_back({p->Metrics(), labels});
  }
  return RenderMetricsText(consumers, producers);
}

}  // namespace rsc
