// SPEC §14 O5 against a live coordinator (RedisProcess + CoordinatorProcess through
// LiveCoordinatorTest, integration/harness.h):
// - every metric the Grafana dashboard or the Prometheus alert rules select is one that a
//   live coordinator exports. prometheus-cpp leaves a family out of /metrics until it has a
//   series, and labelled families get their first series from events, so the scenario makes
//   each event happen (heartbeats, ticks, a regression, a reshard whose parent completes, a
//   group that fails closed) instead of trusting the names in metrics.cc. Client-side names
//   (rsc_consumer_*, rsc_producer_*) are checked against the client library's exporter;
//   `up` is Prometheus's own;
// - the members and shards-by-state gauges the dashboard shows count what the group view
//   says.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "integration/harness.h"
#include "rsc/metrics.h"
#include "support/ops_assets.h"
#include "support/prometheus_text.h"

namespace rsc::integration {
namespace {

using rsc::testing::ParsePrometheusText;
using rsc::testing::PromExposition;

// Metrics that are not ours: Prometheus adds `up` to every scrape target.
const std::set<std::string>& PrometheusOwn() {
  static const std::set<std::string> kOwn = {"up"};
  return kOwn;
}

// Every sample name and family of a text exposition (histogram samples carry their
// _bucket/_sum/_count names, which is what PromQL selects).
std::set<std::string> Exported(const PromExposition& e) {
  std::set<std::string> names;
  for (const auto& [family, type] : e.type) names.insert(family);
  for (const auto& s : e.samples) names.insert(s.name);
  return names;
}

class OpsLiveTest : public LiveCoordinatorTest {
 protected:
  int64_t TickMs() const override { return 50; }
  std::vector<std::string> ExtraArgs() const override { return {"--shard-metrics"}; }

  PromExposition Scrape() {
    HttpResult r = http_->Get("/metrics");
    EXPECT_EQ(r.status, 200) << r.Describe();
    PromExposition e = ParsePrometheusText(r.body);
    for (const std::string& err : e.errors) ADD_FAILURE() << "/metrics: " << err;
    return e;
  }
  // Reads `key` to its end for `group` and acknowledges everything (a reader's work).
  void Drain(const std::string& key, const std::string& group) {
    for (;;) {
      CliReply r =
          cli_->Run({"XREADGROUP", "GROUP", group, "r", "COUNT", "100", "STREAMS", key, ">"});
      if (r.type != CliReply::Type::kArray || r.elements.empty()) return;
      const auto& entries = r.elements[0].elements[1].elements;
      if (entries.empty()) return;
      for (const CliReply& e : entries) cli_->Run({"XACK", key, group, e.elements[0].str});
    }
  }
};

TEST_F(OpsLiveTest, EveryMetricOfTheDashboardAndTheAlertsIsExported) {
  std::string error;
  const std::map<std::string, std::string> used = rsc::testing::MetricNamesUsedByOpsFiles(&error);
  ASSERT_FALSE(used.empty()) << error;

  // A group with a member reading its one shard, entries and a pending one: heartbeats,
  // request histograms, the group gauges (per shard too: --shard-metrics).
  ASSERT_TRUE(CreateGroup(*http_, "ops", "g", 1, ReshardLeases()));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cli_->Run({"XADD", "{ops:0}", "*", "k", "v"}).ok());
  Consumer m("m-1");
  m.features = {"layout-v2", "shard-lease"};
  ASSERT_TRUE(
      WaitFor([&] { return Beat(*http_, m, "ops", "g").status == 200 && m.owned.size() == 1; }, 10s,
              "m-1 reads shard 0"));
  // The dashboard's members and shards-by-state gauges say what the group view says.
  ASSERT_TRUE(WaitFor(
      [&] {
        return Metric(*http_, "rsc_group_members", "group=\"g\"") == 1 &&
               Metric(*http_, "rsc_group_shards", "group=\"g\",state=\"ASSIGNED\"") == 1 &&
               Metric(*http_, "rsc_group_shards", "group=\"g\"") == 1;
      },
      10s, "rsc_group_members 1 and rsc_group_shards{state=ASSIGNED} 1"))
      << http_->Get("/metrics").body;
  EXPECT_EQ(Scrape().Find("rsc_group_shards", {{"group", "g"}}).size(), 5u)
      << "every state has a series";

  // A regression: a member reporting a version above the store's (taken as genuine during
  // the group's first member lease) — rsc_metadata_version_regressions_total{kind}.
  ASSERT_EQ(
      http_
          ->Post("/v1/groups", json::value(json::object{{"stream", "ops"},
                                                        {"group", "regress"},
                                                        {"config", ReshardLeases().ToJson()}}))
          .status,
      201);
  Consumer r("r-1");
  r.features = {"layout-v2"};
  ASSERT_EQ(Beat(*http_, r, "ops", "regress").status, 200);
  r.version += 5;
  ASSERT_EQ(Beat(*http_, r, "ops", "regress").status, 200);
  EXPECT_EQ(r.last_status, "SYNC_METADATA") << JsonString(r.last);

  // A reshard whose parent completes for group g: rsc_reshard_events_total{event}.
  HttpResult stream = http_->Get("/v1/streams/ops");
  ASSERT_EQ(stream.status, 200) << stream.Describe();
  HttpResult resharded = http_->Post(
      "/v1/streams/ops/reshard",
      json::value(json::object{{"expectedLayoutRevision", JsonInt(stream.json, "revision")},
                               {"shardCount", 2}}));
  ASSERT_EQ(resharded.status, 200) << resharded.Describe();
  ASSERT_TRUE(WaitFor(
      [&] {
        return http_->Get("/v1/streams/ops").body.find("\"state\":\"SEALED\"") != std::string::npos;
      },
      10s, "generation 0 sealed"));
  Drain("{ops:0}", "g");
  ASSERT_TRUE(WaitFor(
      [&] { return Metric(*http_, "rsc_reshard_events_total", "event=\"parent_completed\"") >= 1; },
      10s, "the parent completed for g"));

  // A group whose stored state no decision can continue from (a counter at its limit,
  // written behind the coordinator's back): it fails closed, rsc_group_invariant_failures_total.
  ASSERT_TRUE(CreateGroup(*http_, "exhaust", "g", 1));
  json::value agg = json::parse(HGet(*cli_, MetadataKey("exhaust", "g"), "aggregate"));
  const int64_t limit = (int64_t{1} << 53) - 1;
  agg.as_object()["metadataVersion"] = limit;
  agg.as_object()["lineageHistory"] =
      json::array{json::array{limit, agg.as_object().at("lineage")}};
  ASSERT_EQ(
      cli_->Run({"HSET", MetadataKey("exhaust", "g"), "aggregate", json::serialize(agg)}).integer,
      0);
  cli_->Run({"HDEL", MetadataKey("exhaust", "g"), "writeToken"});
  Consumer x("x-1");
  EXPECT_EQ(Beat(*http_, x, "exhaust", "g").ErrorCode(), "METADATA_UNREADABLE");

  // Every coordinator metric used is exported now (gauges arrive with the next ticks).
  std::set<std::string> missing;
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::set<std::string> exported = Exported(Scrape());
        missing.clear();
        for (const auto& [name, where] : used) {
          if (name.starts_with("rsc_consumer_") || name.starts_with("rsc_producer_")) continue;
          if (PrometheusOwn().count(name) || exported.count(name)) continue;
          missing.insert(name + " (" + where + ")");
        }
        return missing.empty();
      },
      10s, "every metric the ops files use in /metrics"))
      << [&] {
           std::string s;
           for (const std::string& n : missing) s += "\n  not exported: " + n;
           return s;
         }();

  // Client-side names: the client library's exporter, the code a live client serves.
  ConsumerMetricsSample consumer;
  ProducerMetricsSample producer;
  producer.metrics.has_routing = true;  // the cache-age gauge has a sample only then
  const PromExposition client = ParsePrometheusText(RenderMetricsText({consumer}, {producer}));
  ASSERT_TRUE(client.errors.empty());
  const std::set<std::string> client_names = Exported(client);
  int client_used = 0;
  for (const auto& [name, where] : used) {
    if (!name.starts_with("rsc_consumer_") && !name.starts_with("rsc_producer_")) continue;
    ++client_used;
    EXPECT_TRUE(client_names.count(name))
        << name << " (" << where << ") is not exported by the client library";
  }
  EXPECT_GT(client_used, 0);
  // No unknown foreign metric: everything is ours or Prometheus's own.
  for (const auto& [name, where] : used) {
    EXPECT_TRUE(name.starts_with("rsc_") || PrometheusOwn().count(name))
        << name << " (" << where << ")";
  }
}

}  // namespace
}  // namespace rsc::integration
