// The client library against a real 3-master Redis Cluster (SPEC CL1). The producer, with a
// real rsc-coordinator whose store runs on the same cluster: named by one node's URL, it
// finds the cluster itself, sends each shard's XADDs to its slot's master, and follows a
// slot moved while it publishes (ASK during the migration, MOVED after it); every
// acknowledged entry is on the shard the routing hash names, in publish order per key. The
// consumer's reader port, which does not follow a cluster yet, says so plainly. Run inside
// scripts/netns.sh.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "client/live_group.h"
#include "client/reader_redis.h"
#include "redis/cluster.h"
#include "redis/redis_url.h"
#include "rsc/producer.h"
#include "rsc/routing.h"
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
using rsc::testing::Cluster3;
using rsc::testing::CoordinatorOptions;
using rsc::testing::CoordinatorProcess;
using rsc::testing::FieldValue;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::RedisCli;

constexpr int kShards = 16;

std::string ShardStream(int shard) { return "{orders:" + std::to_string(shard) + "}"; }

class ProducerClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.Start());
    for (size_t i = 0; i < cluster_.size(); ++i) {
      clis_.push_back(cluster_.node(i).Cli());
      ASSERT_NE(clis_.back(), nullptr);
    }
    coordinator_ =
        std::make_unique<CoordinatorProcess>(CoordinatorOptions{.redis_url = cluster_.Url()});
    ASSERT_TRUE(coordinator_->Start());
    HttpClient http(coordinator_->Port());
    json::object config = rsc::testing::FastLeases();
    HttpResult created = http.Post("/v1/groups", json::value(json::object{{"stream", "orders"},
                                                                          {"group", "billing"},
                                                                          {"shardCount", kShards},
                                                                          {"config", config}}));
    ASSERT_EQ(created.status, 201) << created.Describe();

    ProducerOptions options;
    options.coordinator_endpoints = {"http://127.0.0.1:" + std::to_string(coordinator_->Port())};
    options.stream = "orders";
    options.group = "billing";
    options.redis_url = cluster_.Url();  // one node names the cluster
    auto made = Producer::Create(options);
    ASSERT_TRUE(made.ok()) << made.error().message;
    producer_ = std::move(made).value();
    ASSERT_TRUE(producer_->WaitForRouting(10s)) << producer_->Metrics().last_refresh_error;
  }

  // The node holding `key`, asked of every node (not of our own slot map).
  size_t Holder(const std::string& key) {
    for (size_t i = 0; i < clis_.size(); ++i) {
      CliReply r = clis_[i]->Run({"EXISTS", key});
      if (r.ok() && r.integer == 1) return i;
    }
    return clis_.size();
  }

  // Publishes `count` messages over `keys` keys in one batch; every one must be acknowledged.
  void PublishBatch(int first_seq, int count, int keys) {
    std::vector<ProducerMessage> batch;
    for (int i = first_seq; i < first_seq + count; ++i) {
      const std::string key = "key-" + std::to_string(i % keys);
      batch.push_back({key, {{"key", key}, {"seq", std::to_string(i)}}});
      sent_[key].push_back(i);
    }
    std::vector<ProducerResult<std::string>> ids = producer_->PublishBatch(batch);
    ASSERT_EQ(ids.size(), batch.size());
    for (const auto& id : ids) {
      ASSERT_TRUE(id.ok()) << ProducerErrorCodeName(id.error().code) << ": " << id.error().message;
    }
  }

  // Every acknowledged entry on its routed shard, per-key order = publish order, none extra.
  void ExpectEverythingOnItsShard() {
    std::map<std::string, std::vector<int>> seen;
    std::set<int> written;
    for (const auto& [key, seqs] : sent_) written.insert(ShardForKey(key, kShards));
    for (int shard = 0; shard < kShards; ++shard) {
      const size_t node = Holder(ShardStream(shard));
      if (!written.count(shard)) {
        EXPECT_EQ(node, clis_.size()) << ShardStream(shard) << " exists but no key routes there";
        continue;
      }
      ASSERT_LT(node, clis_.size()) << ShardStream(shard) << " is on no node";
      CliReply entries = clis_[node]->Run({"XRANGE", ShardStream(shard), "-", "+"});
      ASSERT_EQ(entries.type, CliReply::Type::kArray) << entries.ToString();
      for (const CliReply& entry : entries.elements) {
        const std::string key = FieldValue(entry.elements[1], "key");
        EXPECT_EQ(ShardForKey(key, kShards), shard) << key << " on " << ShardStream(shard);
        seen[key].push_back(std::stoi(FieldValue(entry.elements[1], "seq")));
      }
    }
    EXPECT_EQ(seen, sent_);
  }

  Cluster3 cluster_;
  std::vector<std::unique_ptr<RedisCli>> clis_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  std::unique_ptr<Producer> producer_;
  std::map<std::string, std::vector<int>> sent_;
};

TEST_F(ProducerClusterTest, WritesEachShardOnItsSlotsMasterAndFollowsAMovedSlot) {
  PublishBatch(0, 400, 64);
  std::set<size_t> masters;
  for (const auto& [key, seqs] : sent_) {
    masters.insert(Holder(ShardStream(ShardForKey(key, kShards))));
  }
  EXPECT_EQ(masters, (std::set<size_t>{0, 1, 2})) << "the shards' slots span every master";
  ASSERT_NO_FATAL_FAILURE(ExpectEverythingOnItsShard());

  // Move the slot of key-0.s shard to another master while the producer keeps publishing.
  const std::string stream = ShardStream(ShardForKey("key-0", kShards));
  const int slot = redis::KeySlot(stream);
  const size_t src = Holder(stream);
  ASSERT_LT(src, clis_.size());
  const size_t dst = (src + 1) % clis_.size();
  ASSERT_TRUE(cluster_.BeginSlotMigration(slot, src, dst, {stream}));
  // Mid-migration the source answers ASK for the key it no longer holds: the new entries go
  // to the importing node (seen there with ASKING, as any client must ask it).
  PublishBatch(400, 200, 64);
  ASSERT_TRUE(clis_[dst]->Run({"ASKING"}).ok());
  CliReply len = clis_[dst]->Run({"XLEN", stream});
  ASSERT_TRUE(len.ok()) << len.ToString();
  int64_t expected = 0;
  for (const auto& [key, seqs] : sent_) {
    if (ShardStream(ShardForKey(key, kShards)) == stream)
      expected += static_cast<int64_t>(seqs.size());
  }
  EXPECT_EQ(len.integer, expected) << "every entry of the moving shard, old and new, on " << dst;
  ASSERT_TRUE(cluster_.FinishSlotMigration(slot, dst));
  // After it the old master answers MOVED; the producer learns the new owner.
  PublishBatch(600, 200, 64);
  EXPECT_EQ(Holder(stream), dst);
  ASSERT_NO_FATAL_FAILURE(ExpectEverythingOnItsShard());
  EXPECT_EQ(producer_->Metrics().publishes_failed, 0);
}

TEST_F(ProducerClusterTest, ADatabaseOtherThanZeroIsRefusedWithTheReason) {
  ProducerOptions options;
  options.coordinator_endpoints = {"http://127.0.0.1:" + std::to_string(coordinator_->Port())};
  options.stream = "orders";
  options.group = "billing";
  options.redis_url = cluster_.Url() + "/2";
  auto made = Producer::Create(options);
  ASSERT_TRUE(made.ok()) << made.error().message;
  std::unique_ptr<Producer> producer = std::move(made).value();
  ASSERT_TRUE(producer->WaitForRouting(10s));
  ProducerResult<std::string> id = producer->Publish("k", {{"f", "v"}});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ProducerErrorCode::kRedisUnavailable);
  EXPECT_NE(id.error().message.find("only database 0"), std::string::npos) << id.error().message;
}

// Until the readers follow a cluster (docs/design/cluster-data-plane.md), a reader command for
// a shard on another node fails with an error that says why, not a bare "MOVED …".
TEST(ReaderRedisOnACluster, SaysPlainlyThatTheConsumerDoesNotSupportAClusterYet) {
  Cluster3 cluster;
  ASSERT_TRUE(cluster.Start());
  auto url = redis::ParseRedisUrl(cluster.Url());
  ASSERT_TRUE(url.ok());
  // A shard stream whose slot is not served by node 0 (the URL's node).
  std::string stream;
  for (int s = 0; stream.empty(); ++s) {
    const std::string candidate = ShardStream(s);
    auto moved = cluster.node(0).Cli()->Run({"XLEN", candidate});
    if (!moved.ok() && moved.str.starts_with("MOVED")) stream = candidate;
  }
  std::mutex mu;
  std::vector<client::ReaderReply> replies;
  client::ReaderRedis port(redis::ConnectionOptions::FromUrl(*url),
                           [&](uint64_t, client::ReaderReply reply) {
                             std::lock_guard<std::mutex> lock(mu);
                             replies.push_back(std::move(reply));
                           });
  port.Start();
  client::ReaderCoreConfig config;
  config.stream = stream;
  config.group = "billing";
  config.consumer_name = "c";
  config.dead_letter_stream = stream + ":dlq";
  client::ReaderCommand create;
  create.kind = client::ReaderCommandKind::kCreateGroup;
  port.Submit(1, config, create);
  ASSERT_TRUE(rsc::testing::WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return !replies.empty();
      },
      5s, "the XGROUP CREATE answered"));
  port.Stop();
  ASSERT_EQ(replies[0].kind, client::ReaderReply::Kind::kError);
  EXPECT_NE(replies[0].error.find("does not support Redis Cluster yet"), std::string::npos)
      << replies[0].error;
}

}  // namespace
}  // namespace rsc
