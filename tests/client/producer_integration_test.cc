// rsc::Producer against a real redis-server and a real rsc-coordinator (ENGINEERING §5
// level 2). Run inside scripts/netns.sh (the host loopback is throttled).
//
// - every published key lands on the shard stream jump-xxh64 names, in publish order;
// - the first of two coordinator endpoints is dead: refreshes move on to the next (C6);
// - the version store records the observed version;
// - a coordinator killed past the routing lease makes publishes fail closed (PR5,
//   SPEC §10.1 scenario 10) with an error naming the lease end and the refresh error;
// - without a group it routes by the stream (D4) and outlives the group's deletion.

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "client/live_group.h"
#include "rsc/producer.h"
#include "rsc/routing.h"
#include "rsc/version_store.h"
#include "support/coordinator_process.h"
#include "support/http_client.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using rsc::testing::CliReply;
using rsc::testing::CoordinatorOptions;
using rsc::testing::CoordinatorProcess;
using rsc::testing::FieldValue;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

constexpr int kShards = 4;
constexpr int64_t kRoutingLeaseMs = 1500;
constexpr int64_t kRoutingRefreshMs = 300;

TEST(ProducerIntegration, PublishesToRoutedShardsAndFailsClosedAfterCoordinatorDies) {
  RedisProcess redis;
  std::unique_ptr<CoordinatorProcess> coordinator_owner;
  json::object config = rsc::testing::FastLeases();
  config["heartbeatIntervalMs"] = 500;
  config["routingLeaseMs"] = kRoutingLeaseMs;
  config["routingRefreshMs"] = kRoutingRefreshMs;
  ASSERT_TRUE(
      rsc::testing::StartLiveGroup(redis, coordinator_owner, "orders", "billing", kShards, config));
  CoordinatorProcess& coordinator = *coordinator_owner;

  char tmpl[] = "/tmp/rsc-producer-it-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto store = std::make_shared<FileVersionStore>(dir + "/versions");

  ProducerOptions options;
  // The first endpoint refuses connections (port 1): refreshes must move on to the second.
  options.coordinator_endpoints = {"127.0.0.1:1",
                                   "http://127.0.0.1:" + std::to_string(coordinator.Port())};
  options.stream = "orders";
  options.group = "billing";
  options.redis_url = redis.Url();
  options.version_store = store;
  options.http_timeout = 1000ms;
  ProducerResult<std::unique_ptr<Producer>> created_producer = Producer::Create(options);
  ASSERT_TRUE(created_producer.ok()) << created_producer.error().message;
  std::unique_ptr<Producer> producer = std::move(created_producer).value();
  ASSERT_TRUE(producer->WaitForRouting(10s)) << producer->Metrics().last_refresh_error;
  EXPECT_EQ(producer->Metrics().shard_count, kShards);

  // Publish N keyed messages one by one, then a batch.
  constexpr int kSingles = 120;
  constexpr int kBatch = 200;
  std::map<std::string, std::vector<int>> sent_per_key;
  for (int i = 0; i < kSingles; ++i) {
    const std::string key = "key-" + std::to_string(i % 37);
    ProducerResult<std::string> id =
        producer->Publish(key, {{"key", key}, {"seq", std::to_string(i)}});
    ASSERT_TRUE(id.ok()) << ProducerErrorCodeName(id.error().code) << ": " << id.error().message;
    EXPECT_NE(id.value().find('-'), std::string::npos) << id.value();
    sent_per_key[key].push_back(i);
  }
  std::vector<ProducerMessage> batch;
  for (int i = kSingles; i < kSingles + kBatch; ++i) {
    const std::string key = "key-" + std::to_string(i % 37);
    batch.push_back({key, {{"key", key}, {"seq", std::to_string(i)}}});
    sent_per_key[key].push_back(i);
  }
  std::vector<ProducerResult<std::string>> ids = producer->PublishBatch(batch);
  ASSERT_EQ(ids.size(), batch.size());
  for (const auto& id : ids) ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_FALSE(producer->Publish("k", {}).ok()) << "an entry needs at least one field";
  // Publishes from several threads at once (Producer is thread-safe).
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::map<std::string, std::vector<int>>> per_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i % 5);
        const int seq = 10000 * (t + 1) + i;
        ProducerResult<std::string> id =
            producer->Publish(key, {{"key", key}, {"seq", std::to_string(seq)}});
        EXPECT_TRUE(id.ok()) << id.error().message;
        per_thread[t][key].push_back(seq);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const auto& m : per_thread) sent_per_key.insert(m.begin(), m.end());

  // Verify with XRANGE: every entry sits on the shard the routing hash names, per-key order
  // is the publish order, and nothing is missing.
  std::unique_ptr<rsc::testing::RedisCli> cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  std::map<std::string, std::vector<int>> seen_per_key;
  int total = 0;
  for (int shard = 0; shard < kShards; ++shard) {
    const std::string stream = "{orders:" + std::to_string(shard) + "}";
    CliReply entries = cli->Run({"XRANGE", stream, "-", "+"});
    ASSERT_EQ(entries.type, CliReply::Type::kArray) << entries.ToString();
    for (const CliReply& entry : entries.elements) {
      ASSERT_EQ(entry.elements.size(), 2u);
      const std::string key = FieldValue(entry.elements[1], "key");
      EXPECT_EQ(ShardForKey(key, kShards), shard) << key << " on " << stream;
      seen_per_key[key].push_back(std::stoi(FieldValue(entry.elements[1], "seq")));
      ++total;
    }
  }
  EXPECT_EQ(total, kSingles + kBatch + kThreads * kPerThread);
  EXPECT_EQ(seen_per_key, sent_per_key);

  // The version store follows the observed version.
  ASSERT_TRUE(WaitFor(
      [&] {
        ObservedVersion v;
        std::string error;
        return store->Load("orders", "billing", &v, &error) &&
               v.metadata_version == producer->Metrics().metadata_version && v.metadata_version > 0;
      },
      5s, "version store records the routing's metadataVersion"));

  // Kill the coordinator: publishes work until the lease ends, then fail closed (PR5).
  coordinator.Kill();
  const auto killed_at = std::chrono::steady_clock::now();
  // PR4: the last refresh is at most one interval old, so the lease still has over a second.
  ProducerResult<std::string> last = producer->Publish("key-1", {{"key", "key-1"}});
  EXPECT_TRUE(last.ok()) << "PR4: publishes continue inside the lease: " << last.error().message;
  ASSERT_TRUE(WaitFor(
      [&] {
        last = producer->Publish("key-1", {{"key", "key-1"}, {"seq", "-1"}});
        return !last.ok();
      },
      std::chrono::milliseconds(kRoutingLeaseMs * 4), "publish fails once the lease ended"));
  const auto failed_after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed_at);
  // The lease counts from the last successful refresh's send time, at most one refresh
  // interval (plus scheduling slack) before the kill.
  EXPECT_GE(failed_after.count(), kRoutingLeaseMs - kRoutingRefreshMs - 100);
  EXPECT_EQ(last.error().code, ProducerErrorCode::kRoutingExpired) << last.error().message;
  EXPECT_NE(last.error().message.find("routing lease expired"), std::string::npos)
      << last.error().message;
  EXPECT_NE(last.error().message.find("last refresh error"), std::string::npos)
      << last.error().message;
  EXPECT_NE(last.error().message.find("127.0.0.1:" + std::to_string(coordinator.Port())),
            std::string::npos)
      << "the error names the endpoint that failed: " << last.error().message;
  const ProducerMetrics m = producer->Metrics();
  EXPECT_EQ(m.lease_remaining_ms, 0);
  EXPECT_GT(m.refresh_failures, 0);
  EXPECT_GE(m.routing_cache_age_ms, kRoutingLeaseMs);
  EXPECT_GT(m.publishes_refused_expired, 0);

  producer->Close();
  ProducerResult<std::string> closed = producer->Publish("k", {{"a", "b"}});
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.error().code, ProducerErrorCode::kClosed);
  std::filesystem::remove_all(dir);
}

// SPEC D4: a producer without a group routes by the stream. It follows the layout (its
// version, not a group's; the routing lease PATCH /v1/streams/{P} sets), its observed
// version is stored under kStreamRoutingGroup, and it keeps publishing when the group it
// would have named is deleted — with a group's routing it would stop at its lease end.
TEST(ProducerIntegration, AProducerWithoutAGroupRoutesByTheStream) {
  RedisProcess redis;
  std::unique_ptr<CoordinatorProcess> coordinator;
  json::object config = rsc::testing::FastLeases();
  config["routingLeaseMs"] = kRoutingLeaseMs;
  config["routingRefreshMs"] = kRoutingRefreshMs;
  ASSERT_TRUE(
      rsc::testing::StartLiveGroup(redis, coordinator, "orders", "billing", kShards, config));
  HttpClient http(coordinator->Port());

  char tmpl[] = "/tmp/rsc-producer-stream-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto store = std::make_shared<FileVersionStore>(dir + "/versions");
  ProducerOptions options;
  options.coordinator_endpoints = {"127.0.0.1:" + std::to_string(coordinator->Port())};
  options.stream = "orders";  // no group
  options.redis_url = redis.Url();
  options.version_store = store;
  ProducerResult<std::unique_ptr<Producer>> created = Producer::Create(options);
  ASSERT_TRUE(created.ok()) << created.error().message;
  std::unique_ptr<Producer> producer = std::move(created).value();
  ASSERT_TRUE(producer->WaitForRouting(10s)) << producer->Metrics().last_refresh_error;
  EXPECT_EQ(producer->Metrics().shard_count, kShards);

  auto layout = [&] { return http.Get("/v1/streams/orders").json; };
  const json::value before = layout();
  EXPECT_EQ(producer->Metrics().metadata_version, rsc::testing::JsonInt(before, "version"))
      << "the layout's version, not the group's";
  ASSERT_TRUE(WaitFor(
      [&] {
        ObservedVersion v;
        std::string error;
        return store->Load("orders", kStreamRoutingGroup, &v, &error) &&
               v.metadata_version == rsc::testing::JsonInt(before, "version");
      },
      5s, "the version store keeps the layout version under kStreamRoutingGroup"));

  // The stream's routing lease is the stream's: a PATCH reaches the producer (PR1).
  HttpResult patched = http.Patch(
      "/v1/streams/orders", json::value(json::object{{"expectedLayoutRevision",
                                                      rsc::testing::JsonInt(before, "revision")},
                                                     {"routingLeaseMs", 4000}}));
  ASSERT_EQ(patched.status, 200) << patched.Describe();
  EXPECT_TRUE(WaitFor(
      [&] {
        return producer->Metrics().metadata_version ==
               rsc::testing::JsonInt(patched.json, "version");
      },
      5s, "the producer to adopt the patched layout"));

  // The group goes; the stream's routing stays, and so does the producer.
  const int64_t group_rev =
      rsc::testing::JsonInt(http.Get("/v1/groups/orders/billing").json, "revision");
  ASSERT_EQ(
      http.Delete("/v1/groups/orders/billing?expectedRevision=" + std::to_string(group_rev)).status,
      200);
  // Past a whole routing lease of the group (1.5 s): a group-routed producer fails here.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kRoutingLeaseMs * 2);
  int published = 0;
  while (std::chrono::steady_clock::now() < until) {
    const std::string key = "key-" + std::to_string(published % 7);
    ProducerResult<std::string> id = producer->Publish(key, {{"key", key}});
    ASSERT_TRUE(id.ok()) << ProducerErrorCodeName(id.error().code) << ": " << id.error().message;
    ++published;
    std::this_thread::sleep_for(20ms);  // pacing over the lease, not synchronisation
  }
  EXPECT_GT(producer->Metrics().refreshes_ok, 2) << "refreshes went on after the delete";
  EXPECT_EQ(producer->Metrics().consecutive_refresh_failures, 0)
      << producer->Metrics().last_refresh_error;
  producer->Close();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rsc
