// RenderMetricsText and MetricsRegistry (include/rsc/metrics.h, SPEC O2): the text is read
// back with a strict parser of the exposition format (tests/support/prometheus_text.h), so a
// wrong name, type, unit, escape or a missing HELP/TYPE fails here.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "rsc/metrics.h"
#include "support/prometheus_text.h"

namespace rsc {
namespace {

using testing::ParsePrometheusText;
using testing::PromExposition;

ConsumerStatus SomeConsumer() {
  ConsumerStatus s;
  s.stream = "orders";
  s.group = "billing";
  s.member_id = "m-1";
  s.started = true;
  s.phase = "member";
  s.member_epoch = 7;
  s.assignment_epoch = 12;
  s.metadata_version = 40;
  s.lease_remaining_ms = 1500;
  s.reading = {0, 1, 2};
  s.draining = {3};
  s.revoked = {4};
  s.revoking_count = 2;
  s.taken = {5};
  s.shards_taken = 1;
  s.consecutive_heartbeat_failures = 3;
  s.heartbeats_sent = 99;
  s.lease_expirations = 1;
  s.rejoins = 2;
  s.messages_handled = 1000;
  s.messages_acked = 990;
  s.messages_claimed = 5;
  s.late_read_reclaims = 1;
  s.handler_failures = 4;
  s.dead_lettered = 2;
  s.threads = 6;
  s.redis_connections = 2;
  return s;
}

ProducerMetrics SomeProducer() {
  ProducerMetrics m;
  m.stream = "orders";
  m.group = "billing";
  m.has_routing = true;
  m.metadata_version = 41;
  m.shard_count = 8;
  m.routing_cache_age_ms = 250;
  m.lease_remaining_ms = 2750;
  m.refresh_failures = 3;
  m.consecutive_refresh_failures = 1;
  m.refreshes_ok = 17;
  m.sync_adoptions = 1;
  m.publishes_ok = 42;
  m.publishes_failed = 6;
  m.publishes_refused_expired = 5;
  m.seal_refresh_waits = 2;
  return m;
}

PromExposition ParseOk(const std::string& text) {
  PromExposition e = ParsePrometheusText(text);
  for (const std::string& error : e.errors) ADD_FAILURE() << error << "\n" << text;
  return e;
}

// Every family the library documents (docs/metrics.md), with its type. The seed's §11 client
// signals are the first four.
const std::vector<std::pair<std::string, std::string>> kFamilies = {
    {"rsc_consumer_assignment_lease_remaining_seconds", "gauge"},
    {"rsc_consumer_revoking_shards", "gauge"},
    {"rsc_producer_routing_cache_age_seconds", "gauge"},
    {"rsc_producer_routing_refresh_failures_total", "counter"},
    {"rsc_consumer_failed_closed", "gauge"},
    {"rsc_consumer_reading_shards", "gauge"},
    {"rsc_consumer_taken_shards", "gauge"},
    {"rsc_consumer_stopped", "gauge"},
    {"rsc_consumer_phase", "gauge"},
    {"rsc_consumer_member_epoch", "gauge"},
    {"rsc_consumer_assignment_epoch", "gauge"},
    {"rsc_consumer_metadata_version", "gauge"},
    {"rsc_consumer_heartbeat_consecutive_failures", "gauge"},
    {"rsc_consumer_heartbeats_total", "counter"},
    {"rsc_consumer_lease_expirations_total", "counter"},
    {"rsc_consumer_rejoins_total", "counter"},
    {"rsc_consumer_shards_taken_total", "counter"},
    {"rsc_consumer_messages_handled_total", "counter"},
    {"rsc_consumer_messages_acked_total", "counter"},
    {"rsc_consumer_messages_claimed_total", "counter"},
    {"rsc_consumer_late_read_reclaims_total", "counter"},
    {"rsc_consumer_handler_failures_total", "counter"},
    {"rsc_consumer_dead_lettered_total", "counter"},
    {"rsc_consumer_threads", "gauge"},
    {"rsc_consumer_redis_connections", "gauge"},
    {"rsc_producer_routing_lease_remaining_seconds", "gauge"},
    {"rsc_producer_routing_refresh_consecutive_failures", "gauge"},
    {"rsc_producer_routing_refreshes_total", "counter"},
    {"rsc_producer_routing_sync_adoptions_total", "counter"},
    {"rsc_producer_routing_cached", "gauge"},
    {"rsc_producer_metadata_version", "gauge"},
    {"rsc_producer_shards", "gauge"},
    {"rsc_producer_messages_published_total", "counter"},
    {"rsc_producer_publish_failures_total", "counter"},
    {"rsc_producer_publishes_refused_expired_total", "counter"},
    {"rsc_producer_seal_refresh_waits_total", "counter"},
};

TEST(MetricsTextTest, EveryDocumentedFamilyHasHelpTypeAndOneSamplePerClient) {
  const PromExposition e =
      ParseOk(RenderMetricsText({{SomeConsumer(), {}}}, {{SomeProducer(), {}}}));
  std::set<std::string> expected;
  for (const auto& [name, type] : kFamilies) {
    expected.insert(name);
    ASSERT_EQ(e.type.count(name), 1u) << name << " has no TYPE";
    EXPECT_EQ(e.type.at(name), type) << name;
    EXPECT_FALSE(e.help.at(name).empty()) << name;
    EXPECT_EQ(name.ends_with("_total"), type == "counter") << name << ": counters end in _total";
    const size_t samples = e.Find(name).size();
    EXPECT_EQ(samples, name == "rsc_consumer_phase" ? 5u : 1u) << name;
  }
  // Nothing undocumented.
  for (const auto& [name, type] : e.type) EXPECT_EQ(expected.count(name), 1u) << name;
  EXPECT_EQ(e.help.size(), e.type.size());
}

TEST(MetricsTextTest, SeedSignalsCarryTheSeedsMeaningInTheirHelp) {
  const PromExposition e =
      ParseOk(RenderMetricsText({{SomeConsumer(), {}}}, {{SomeProducer(), {}}}));
  EXPECT_NE(e.help.at("rsc_consumer_assignment_lease_remaining_seconds")
                .find("Consumer assignment lease remaining time"),
            std::string::npos);
  EXPECT_NE(e.help.at("rsc_consumer_revoking_shards").find("Member revoking shard count"),
            std::string::npos);
  EXPECT_NE(e.help.at("rsc_producer_routing_cache_age_seconds").find("Producer routing cache age"),
            std::string::npos);
  EXPECT_NE(e.help.at("rsc_producer_routing_refresh_failures_total")
                .find("Producer routing refresh failures"),
            std::string::npos);
}

TEST(MetricsTextTest, ValuesAreInBaseUnitsWithTheClientsLabels) {
  const PromExposition e =
      ParseOk(RenderMetricsText({{SomeConsumer(), {}}}, {{SomeProducer(), {}}}));
  using Labels = std::vector<std::pair<std::string, std::string>>;
  const Labels member = {{"stream", "orders"}, {"group", "billing"}, {"member", "m-1"}};
  const Labels group = {{"stream", "orders"}, {"group", "billing"}};
  const struct {
    const char* name;
    const Labels& labels;
    double value;
  } kExpected[] = {
      {"rsc_consumer_assignment_lease_remaining_seconds", member, 1.5},
      {"rsc_consumer_revoking_shards", member, 2},
      {"rsc_consumer_reading_shards", member, 3},
      {"rsc_consumer_taken_shards", member, 1},
      {"rsc_consumer_failed_closed", member, 0},
      {"rsc_consumer_heartbeats_total", member, 99},
      {"rsc_consumer_messages_acked_total", member, 990},
      {"rsc_consumer_heartbeat_consecutive_failures", member, 3},
      {"rsc_consumer_metadata_version", member, 40},
      {"rsc_producer_routing_cache_age_seconds", group, 0.25},
      {"rsc_producer_routing_lease_remaining_seconds", group, 2.75},
      {"rsc_producer_routing_refresh_failures_total", group, 3},
      {"rsc_producer_messages_published_total", group, 42},
      {"rsc_producer_publishes_refused_expired_total", group, 5},
      {"rsc_producer_shards", group, 8},
      {"rsc_producer_routing_cached", group, 1},
  };
  for (const auto& x : kExpected) EXPECT_EQ(e.Value(x.name, x.labels), x.value) << x.name;
  // Producer series have no member label; consumer series have exactly these three.
  for (const auto& s : e.samples) {
    if (s.name.starts_with("rsc_producer_")) {
      EXPECT_EQ(s.labels.size(), 2u) << s.name;
      EXPECT_FALSE(s.Label("member").has_value()) << s.name;
    } else if (s.name != "rsc_consumer_phase") {
      EXPECT_EQ(s.labels.size(), 3u) << s.name;
    }
  }
}

TEST(MetricsTextTest, PhaseIsOneForTheCurrentPhaseOnly) {
  ConsumerStatus s = SomeConsumer();
  s.phase = "leaving";
  const PromExposition e = ParseOk(RenderMetricsText({{s, {}}}, {}));
  const auto phases = e.Find("rsc_consumer_phase");
  ASSERT_EQ(phases.size(), 5u);
  for (const auto& p : phases) {
    EXPECT_EQ(p.value, p.Label("phase") == "leaving" ? 1 : 0) << *p.Label("phase");
  }
}

TEST(MetricsTextTest, LabelValuesAreEscapedAndReadBackUnchanged) {
  ConsumerStatus s = SomeConsumer();
  s.stream = "we\"ird\\stream\nname";
  s.group = "g{1},x=\"y\"";
  s.member_id = "";  // before the first join
  ProducerMetrics p = SomeProducer();
  p.stream = s.stream;
  p.group = "\\";
  const std::string text = RenderMetricsText({{s, {{"consumer", "a\"b"}}}}, {{p, {}}});
  EXPECT_NE(text.find(R"(stream="we\"ird\\stream\nname")"), std::string::npos) << text;
  const PromExposition e = ParseOk(text);
  const auto lease = e.Find("rsc_consumer_assignment_lease_remaining_seconds");
  ASSERT_EQ(lease.size(), 1u);
  EXPECT_EQ(lease[0].Label("stream"), s.stream);
  EXPECT_EQ(lease[0].Label("group"), s.group);
  EXPECT_EQ(lease[0].Label("member"), "");
  EXPECT_EQ(lease[0].Label("consumer"), "a\"b");
  const auto published = e.Find("rsc_producer_messages_published_total");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0].Label("group"), "\\");
}

TEST(MetricsTextTest, CacheAgeHasNoSampleBeforeTheFirstRouting) {
  ProducerMetrics p;
  p.stream = "s";
  p.group = "g";
  const PromExposition e = ParseOk(RenderMetricsText({}, {{p, {}}}));
  EXPECT_EQ(e.type.at("rsc_producer_routing_cache_age_seconds"), "gauge");
  EXPECT_TRUE(e.Find("rsc_producer_routing_cache_age_seconds").empty());
  EXPECT_EQ(e.Value("rsc_producer_routing_cached"), 0);
  EXPECT_EQ(e.Value("rsc_producer_routing_lease_remaining_seconds"), 0);
}

TEST(MetricsTextTest, SeveralClientsShareEachFamilyAndExtraLabelsTellThemApart) {
  ConsumerStatus a = SomeConsumer();
  ConsumerStatus b = SomeConsumer();
  a.member_id = b.member_id = "";  // neither joined yet: only the extra label differs
  b.messages_acked = 7;
  const std::string text = RenderMetricsText(
      {{a, {{"consumer", "c1"}}}, {b, {{"consumer", "c2"}}}},
      {{SomeProducer(), {{"producer", "p1"}}}, {SomeProducer(), {{"producer", "p2"}}}});
  const PromExposition e = ParseOk(text);  // no duplicate series, samples grouped per family
  EXPECT_EQ(e.Value("rsc_consumer_messages_acked_total", {{"consumer", "c1"}}), 990);
  EXPECT_EQ(e.Value("rsc_consumer_messages_acked_total", {{"consumer", "c2"}}), 7);
  EXPECT_EQ(e.Find("rsc_producer_shards").size(), 2u);
  EXPECT_EQ(e.Find("rsc_consumer_phase").size(), 10u);
}

TEST(MetricsTextTest, InvalidOrReservedExtraLabelsAreLeftOut) {
  const PromExposition e = ParseOk(RenderMetricsText({{SomeConsumer(),
                                                       {{"stream", "x"},
                                                        {"member", "x"},
                                                        {"phase", "x"},
                                                        {"__name__", "x"},
                                                        {"1abc", "x"},
                                                        {"a-b", "x"},
                                                        {"", "x"},
                                                        {"zone", "eu"}}}},
                                                     {}));
  const auto lease = e.Find("rsc_consumer_assignment_lease_remaining_seconds");
  ASSERT_EQ(lease.size(), 1u);
  EXPECT_EQ(lease[0].labels,
            (std::vector<std::pair<std::string, std::string>>{
                {"stream", "orders"}, {"group", "billing"}, {"member", "m-1"}, {"zone", "eu"}}));
}

TEST(MetricsTextTest, NothingToRenderIsEmpty) { EXPECT_EQ(RenderMetricsText({}, {}), ""); }

TEST(MetricsTextTest, RegistryRendersWhatIsRegisteredAndForgetsRemovedClients) {
  ConsumerOptions o;
  o.coordinator_endpoints = {"127.0.0.1:1"};  // never contacted: the consumer is not started
  o.stream = "s";
  o.group = "g";
  o.redis_url = "redis://127.0.0.1:1";
  auto created = Consumer::Create(o, [](const Message&) { return HandlerResult::Ok(); });
  ASSERT_TRUE(created.ok()) << created.error().message;
  const Consumer& consumer = *created.value();

  MetricsRegistry registry;
  EXPECT_EQ(registry.Render(), "");
  registry.Add(consumer, {{"consumer", "first"}});
  registry.Add(consumer, {{"consumer", "c1"}});  // replaces the labels, not a second series
  PromExposition e = ParseOk(registry.Render());
  EXPECT_EQ(e.Value("rsc_consumer_phase", {{"stream", "s"}, {"group", "g"}, {"phase", "idle"}}), 1);
  EXPECT_EQ(e.Find("rsc_consumer_stopped").size(), 1u);
  EXPECT_EQ(e.Find("rsc_consumer_stopped")[0].Label("consumer"), "c1");
  EXPECT_EQ(ParseOk(MetricsText(consumer, {{"consumer", "c1"}})).samples.size(), e.samples.size());
  registry.Remove(consumer);
  EXPECT_EQ(registry.Render(), "");
}

}  // namespace
}  // namespace rsc
