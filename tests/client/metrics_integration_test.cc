// Client metrics over HTTP (SPEC O2, issue 13): a real consumer and producer against a real
// redis-server and rsc-coordinator, exported by a MetricsRegistry through a MetricsServer and
// scraped over HTTP. The scraped values must move with what the clients do: the consumer
// joins and gets a lease, published messages are counted and then acknowledged, a dead
// coordinator shows up as routing refresh failures and a shrinking routing lease, a stopped
// consumer says so. Run inside scripts/netns.sh (the host loopback is throttled).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/live_group.h"
#include "rsc/metrics.h"
#include "support/http_client.h"
#include "support/prometheus_text.h"
#include "support/wait.h"

namespace rsc {
namespace {

using namespace std::chrono_literals;
using rsc::testing::CoordinatorProcess;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::PromExposition;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

constexpr int kShards = 4;
constexpr int kMessages = 30;

// One scrape, parsed; a failed request or a format error fails the test.
PromExposition Scrape(HttpClient& http) {
  const HttpResult r = http.Get("/metrics");
  EXPECT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.Header("content-type"), kMetricsContentType);
  PromExposition e = rsc::testing::ParsePrometheusText(r.body);
  for (const std::string& error : e.errors) ADD_FAILURE() << error << "\n" << r.body;
  return e;
}

double ValueOr(const PromExposition& e, const std::string& name, double fallback = -1) {
  return e.Value(name).value_or(fallback);
}

TEST(MetricsIntegration, ScrapedClientMetricsFollowTheConsumerAndProducer) {
  RedisProcess redis;
  std::unique_ptr<CoordinatorProcess> coordinator;
  ASSERT_TRUE(rsc::testing::StartLiveGroup(redis, coordinator, "orders", "billing", kShards,
                                           rsc::testing::FastLeases()));
  std::atomic<int> handled{0};
  std::unique_ptr<Consumer> consumer =
      rsc::testing::MakeLiveConsumer(*coordinator, redis, "orders", "billing", [&](const Message&) {
        ++handled;
        return HandlerResult::Ok();
      });
  ASSERT_NE(consumer, nullptr);
  std::unique_ptr<Producer> producer =
      rsc::testing::MakeLiveProducer(*coordinator, redis, "orders", "billing");
  ASSERT_NE(producer, nullptr);

  MetricsRegistry registry;
  registry.Add(*consumer);
  registry.Add(*producer);
  std::string error;
  std::unique_ptr<MetricsServer> server = MetricsServer::Start({}, registry, &error);
  ASSERT_NE(server, nullptr) << error;
  HttpClient http(server->port());

  // Before Start(): the consumer is idle, nothing is published yet.
  PromExposition e = Scrape(http);
  EXPECT_EQ(e.Value("rsc_consumer_phase", {{"phase", "idle"}}), 1);
  EXPECT_EQ(ValueOr(e, "rsc_producer_messages_published_total"), 0);
  EXPECT_EQ(ValueOr(e, "rsc_producer_shards"), kShards);
  EXPECT_GE(ValueOr(e, "rsc_producer_routing_refreshes_total"), 1);
  EXPECT_GE(ValueOr(e, "rsc_producer_routing_cache_age_seconds"), 0);
  EXPECT_GT(ValueOr(e, "rsc_producer_routing_lease_remaining_seconds"), 0);

  // The consumer joins: a member with every shard and a running assignment lease.
  consumer->Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        e = Scrape(http);
        return e.Value("rsc_consumer_phase", {{"phase", "member"}}) == 1 &&
               ValueOr(e, "rsc_consumer_reading_shards") == kShards &&
               ValueOr(e, "rsc_consumer_assignment_lease_remaining_seconds") > 0;
      },
      15s, "the scrape shows a member reading every shard under a lease"));
  const std::string member = consumer->Status().member_id;
  ASSERT_FALSE(member.empty());
  const auto lease = e.Find("rsc_consumer_assignment_lease_remaining_seconds");
  ASSERT_EQ(lease.size(), 1u);
  EXPECT_EQ(lease[0].Label("stream"), "orders");
  EXPECT_EQ(lease[0].Label("group"), "billing");
  EXPECT_EQ(lease[0].Label("member"), member);
  EXPECT_EQ(ValueOr(e, "rsc_consumer_revoking_shards"), 0);
  EXPECT_GE(ValueOr(e, "rsc_consumer_heartbeats_total"), 1);
  const double heartbeats = ValueOr(e, "rsc_consumer_heartbeats_total");

  // Publishes are counted at once, handled and acknowledged soon after.
  for (int i = 0; i < kMessages; ++i) {
    ProducerResult<std::string> r =
        producer->Publish("key-" + std::to_string(i), {{"n", std::to_string(i)}});
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  e = Scrape(http);
  EXPECT_EQ(ValueOr(e, "rsc_producer_messages_published_total"), kMessages);
  EXPECT_EQ(e.Value("rsc_producer_messages_published_total",
                    {{"stream", "orders"}, {"group", "billing"}}),
            kMessages);
  ASSERT_TRUE(WaitFor(
      [&] {
        e = Scrape(http);
        return ValueOr(e, "rsc_consumer_messages_handled_total") == kMessages &&
               ValueOr(e, "rsc_consumer_messages_acked_total") == kMessages;
      },
      15s, "the scrape shows every published message handled and acknowledged"));
  EXPECT_EQ(handled.load(), kMessages);
  // Heartbeats go on (every heartbeatIntervalMs, 200 ms here) and the lease stays renewed.
  ASSERT_TRUE(WaitFor(
      [&] {
        e = Scrape(http);
        return ValueOr(e, "rsc_consumer_heartbeats_total") > heartbeats &&
               ValueOr(e, "rsc_consumer_assignment_lease_remaining_seconds") > 0;
      },
      10s, "the scrape shows more heartbeats sent under a renewed lease"));

  // The consumer stops cleanly: the scrape says it left.
  consumer->Stop();
  e = Scrape(http);
  EXPECT_EQ(ValueOr(e, "rsc_consumer_stopped"), 1);
  EXPECT_EQ(e.Value("rsc_consumer_phase", {{"phase", "left"}}), 1);
  EXPECT_EQ(ValueOr(e, "rsc_consumer_reading_shards"), 0);
  registry.Remove(*consumer);
  consumer.reset();

  // The coordinator dies: refresh failures count up, the routing lease runs down to 0 and the
  // cache ages past it (seed §11: producer routing cache age and refresh failures).
  e = Scrape(http);
  ASSERT_TRUE(e.Find("rsc_consumer_phase").empty()) << "a removed consumer is still exported";
  const double failures = ValueOr(e, "rsc_producer_routing_refresh_failures_total");
  coordinator->Kill();
  ASSERT_TRUE(WaitFor(
      [&] {
        e = Scrape(http);
        return ValueOr(e, "rsc_producer_routing_refresh_failures_total") > failures &&
               ValueOr(e, "rsc_producer_routing_lease_remaining_seconds") == 0;
      },
      15s, "the scrape shows refresh failures and an expired routing lease"));
  EXPECT_GE(ValueOr(e, "rsc_producer_routing_cache_age_seconds"),
            rsc::testing::FastLeases().at("routingLeaseMs").as_int64() / 1000.0);
  EXPECT_GE(ValueOr(e, "rsc_producer_routing_refresh_consecutive_failures"), 1);
  ProducerResult<std::string> refused = producer->Publish("k", {{"n", "late"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ProducerErrorCode::kRoutingExpired);
  e = Scrape(http);
  EXPECT_EQ(ValueOr(e, "rsc_producer_publishes_refused_expired_total"), 1);
  EXPECT_EQ(ValueOr(e, "rsc_producer_publish_failures_total"), 1);
  EXPECT_EQ(ValueOr(e, "rsc_producer_messages_published_total"), kMessages);

  server->Stop();
  registry.Remove(*producer);
}

}  // namespace
}  // namespace rsc
