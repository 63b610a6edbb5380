// Shard count grows 8 -> 16 under load (SPEC R5.2, §9 PATCH shardCount), against a real
// redis-server and a real rsc-coordinator. Run inside scripts/netns.sh (the host loopback
// is throttled).
//
// One Producer publishes keyed messages (per-key increasing seq) continuously from a thread;
// two Consumers record every delivery. After about a second the group is PATCHed to 16
// shards while publishing goes on. Asserted:
// - the producer adopts shardCount 16 within the refresh interval plus slack;
// - messages land on the new shards 8..15 (XLEN > 0 on some "{P:s}", s >= 8);
// - the consumers between them read all 16 shards, some of them >= 8;
// - every acknowledged publish is consumed at least once;
// - per key and shard the first deliveries come in increasing seq order; for keys the jump
//   hash did not move, per key; keys only ever move onto new shards (R5.2).
// Across a move (old shard -> new shard) the library does not order deliveries of one key
// (the two shards are read concurrently, possibly by different members), so inversions
// there are counted and reported, not asserted, as are the messages of moved keys that
// still went to their old shard after the PATCH (until the producer's next refresh: the
// XADD is not fenced, PR2 [beyond]). They are consumed all the same.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/live_group.h"
#include "client/publish_loop.h"
#include "rsc/consumer.h"
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
using rsc::testing::CoordinatorOptions;
using rsc::testing::CoordinatorProcess;
using rsc::testing::FieldValue;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::JsonInt;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

constexpr int kOldShards = 8;
constexpr int kNewShards = 16;
constexpr int kKeys = 64;
constexpr char kStream[] = "growth";
constexpr char kGroup[] = "readers";

std::string ShardKey(int s) { return std::string("{") + kStream + ":" + std::to_string(s) + "}"; }

using rsc::testing::DescribeConsumer;

// Every delivery, per key, in handler-call order. Thread-safe.
class Received {
 public:
  void Add(const Message& m) {
    const std::string key = FieldValue(m.fields, "key");
    const int seq = std::stoi(FieldValue(m.fields, "seq"));
    // R5.2: a key is on its 8-shard shard or (after the growth) its 16-shard shard.
    const int32_t old_shard = ShardForKey(key, kOldShards);
    const int32_t new_shard = ShardForKey(key, kNewShards);
    EXPECT_TRUE(m.shard == old_shard || m.shard == new_shard)
        << key << " seq " << seq << " delivered from shard " << m.shard;
    EXPECT_EQ(m.stream, ShardKey(m.shard));
    std::lock_guard<std::mutex> lock(mu_);
    per_key_[key].push_back({seq, m.shard});
    ++total_;
  }
  int total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  std::map<std::string, std::vector<std::pair<int, int32_t>>> All() const {
    std::lock_guard<std::mutex> lock(mu_);
    return per_key_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::pair<int, int32_t>>> per_key_;  // (seq, shard)
  int total_ = 0;
};

class ShardGrowth : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, kStream, kGroup, kOldShards,
                                             rsc::testing::FastLeases()));
  }

  std::string GroupPath() const { return std::string("/v1/groups/") + kStream + "/" + kGroup; }

  std::unique_ptr<Consumer> MakeConsumer(Received* received) {
    return rsc::testing::MakeLiveConsumer(*coordinator_, redis_, kStream, kGroup,
                                          [received](const Message& m) {
                                            received->Add(m);
                                            return HandlerResult::Ok();
                                          });
  }

  std::unique_ptr<Producer> MakeProducer() {
    return rsc::testing::MakeLiveProducer(*coordinator_, redis_, kStream, kGroup);
  }

  int64_t XLen(int shard) {
    std::unique_ptr<rsc::testing::RedisCli> cli = redis_.Cli();
    if (!cli) return -1;
    CliReply r = cli->Run({"XLEN", ShardKey(shard)});
    return r.type == CliReply::Type::kInteger ? r.integer : -1;
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
};

TEST_F(ShardGrowth, EightToSixteenUnderLoadLosesNothing) {
  Received received;
  std::unique_ptr<Consumer> a = MakeConsumer(&received);
  std::unique_ptr<Consumer> b = MakeConsumer(&received);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a->Start();
  b->Start();
  auto reading_union = [&] { return rsc::testing::ReadingUnion({a.get(), b.get()}); };
  auto both = [&] {
    return "a: " + DescribeConsumer(a->Status()) + "\nb: " + DescribeConsumer(b->Status());
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return reading_union().size() == kOldShards && !a->Status().reading.empty() &&
               !b->Status().reading.empty();
      },
      15s, "a and b together read all 8 shards"))
      << both();

  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  ASSERT_EQ(producer->Metrics().shard_count, kOldShards);
  rsc::testing::PublishLoop loop(producer.get(), kKeys);
  ASSERT_TRUE(WaitFor([&] { return loop.published() >= 2000 || !loop.fatal().empty(); }, 10s,
                      "2000 messages (about 1 s) published on 8 shards"));
  ASSERT_EQ(loop.fatal(), "");
  ASSERT_TRUE(WaitFor([&] { return received.total() >= 200; }, 10s, "deliveries under way"))
      << both();
  for (int s = kOldShards; s < kNewShards; ++s) EXPECT_EQ(XLen(s), 0) << ShardKey(s);

  // PATCH shardCount 16 with the current revision.
  HttpClient http(coordinator_->Port());
  const int64_t seq_at_patch = loop.published();  // later seqs are published after the PATCH
  HttpResult view = http.Get(GroupPath());
  ASSERT_EQ(view.status, 200) << view.Describe();
  const int64_t revision = JsonInt(view.json, "revision");
  ASSERT_GE(revision, 0) << view.Describe();
  HttpResult patched = http.Patch(
      GroupPath(),
      json::value(json::object{{"expectedRevision", revision}, {"shardCount", kNewShards}}));
  const auto patched_at = std::chrono::steady_clock::now();
  const int64_t refreshes_at_patch = producer->Metrics().refreshes_ok;
  ASSERT_EQ(patched.status, 200) << patched.Describe();
  EXPECT_EQ(JsonInt(patched.json, "shardCount"), kNewShards) << patched.Describe();

  // PR1: the producer switches at its first refresh sent after the PATCH. Counted in
  // refreshes, not milliseconds (a loaded machine delays timers, not the protocol): one
  // refresh may have been in flight at the PATCH, the one after it must carry 16 shards.
  int64_t refreshes_without_switch = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        const ProducerMetrics m = producer->Metrics();
        if (m.shard_count == kNewShards) return true;
        refreshes_without_switch =
            std::max(refreshes_without_switch, m.refreshes_ok - refreshes_at_patch);
        return false;
      },
      20s, "producer routing has 16 shards"))
      << producer->Metrics().last_refresh_error;
  EXPECT_LE(refreshes_without_switch, 1)
      << "refreshes completed after the PATCH that still routed over 8 shards (PR1)";
  // Every message published on the old routing after the PATCH was published before this.
  const int64_t published_by_switch = loop.published();
  const auto switch_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - patched_at)
                             .count();
  ::testing::Test::RecordProperty("producer_switch_ms", static_cast<int>(switch_ms));

  // Messages land on the new shards, and the consumers read them.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (int s = kOldShards; s < kNewShards; ++s) {
          if (XLen(s) > 0) return true;
        }
        return false;
      },
      5s, "XLEN > 0 on some shard 8..15"));
  const int64_t published_at_switch = loop.published();
  EXPECT_TRUE(WaitFor([&] { return reading_union().size() == kNewShards; }, 15s,
                      "a and b together read all 16 shards"))
      << both();
  std::set<int32_t> reading_new;
  for (int32_t s : reading_union()) {
    if (s >= kOldShards) reading_new.insert(s);
  }
  EXPECT_FALSE(reading_new.empty()) << both();
  EXPECT_FALSE(a->Status().reading.empty()) << both();
  EXPECT_FALSE(b->Status().reading.empty()) << both();

  // Keep publishing a little on 16 shards, then stop.
  ASSERT_TRUE(WaitFor(
      [&] { return loop.published() >= published_at_switch + 500 || !loop.fatal().empty(); }, 10s,
      "500 more messages published on 16 shards"));
  loop.Stop();
  ASSERT_EQ(loop.fatal(), "");
  const std::map<std::string, std::vector<int>> sent = loop.Sent();
  int64_t sent_total = 0;
  for (const auto& [key, seqs] : sent) sent_total += static_cast<int64_t>(seqs.size());
  ASSERT_EQ(sent_total, loop.published());

  // Everything acknowledged is consumed at least once.
  auto missing = [&] {
    const auto got = received.All();
    int64_t n = 0;
    for (const auto& [key, seqs] : sent) {
      std::set<int> seen;
      auto it = got.find(key);
      if (it != got.end()) {
        for (const auto& [seq, shard] : it->second) seen.insert(seq);
      }
      for (int s : seqs) n += seen.count(s) ? 0 : 1;
    }
    return n;
  };
  EXPECT_TRUE(WaitFor([&] { return missing() == 0; }, 20s, "every published message consumed"))
      << missing() << " of " << sent_total << " missing\n"
      << both();

  // Order: per (key, shard) first deliveries increase; per key too when the key stayed.
  int moved_keys = 0;
  int cross_shard_inversions = 0;
  int64_t redeliveries = 0;
  int64_t stale_after_patch = 0;  // moved keys published to the old shard after the PATCH
  for (const auto& [key, deliveries] : received.All()) {
    const bool moved = ShardForKey(key, kOldShards) != ShardForKey(key, kNewShards);
    if (moved) {
      ++moved_keys;
      EXPECT_GE(ShardForKey(key, kNewShards), kOldShards) << key << ": R5.2 moves only onto new";
    }
    std::set<int> seen;
    std::map<int32_t, int> last_by_shard;
    int last = -1;
    for (const auto& [seq, shard] : deliveries) {
      if (moved && shard < kOldShards && seq > seq_at_patch && !seen.count(seq)) {
        ++stale_after_patch;
      }
      if (!seen.insert(seq).second) {
        ++redeliveries;
        continue;
      }
      auto it = last_by_shard.find(shard);
      if (it != last_by_shard.end()) {
        EXPECT_GT(seq, it->second) << key << " on shard " << shard << ": first deliveries";
      }
      last_by_shard[shard] = seq;
      if (seq < last) {
        EXPECT_TRUE(moved) << key << ": seq " << seq << " first delivered after " << last;
        ++cross_shard_inversions;
      }
      last = std::max(last, seq);
    }
  }
  EXPECT_GT(moved_keys, 0);
  // The v1 bound (issue 9; ordered resharding replaces it with zero, SPEC §13): a moved key
  // lands on its old shard only while the producer still routes by 8 shards — at most what
  // it published between the PATCH and its switch — and only such a stale message can be
  // read after a newer one of its key from the new shard.
  EXPECT_LE(stale_after_patch, published_by_switch - seq_at_patch)
      << "messages of moved keys reached their old shard after the producer switched";
  EXPECT_LE(cross_shard_inversions, stale_after_patch)
      << "an inversion without a stale message behind it";
  ::testing::Test::RecordProperty("published", static_cast<int>(sent_total));
  ::testing::Test::RecordProperty("redeliveries", static_cast<int>(redeliveries));
  ::testing::Test::RecordProperty("cross_shard_inversions", cross_shard_inversions);
  std::ostringstream errors;
  for (const auto& [code, n] : loop.Errors()) errors << code << "=" << n << " ";
  ::testing::Test::RecordProperty("publish_errors", errors.str());
  std::cout << "[ShardGrowth] published=" << sent_total << " switch_ms=" << switch_ms
            << " moved_keys=" << moved_keys << " redeliveries=" << redeliveries
            << " cross_shard_inversions=" << cross_shard_inversions
            << " stale_after_patch=" << stale_after_patch << " publish_errors={" << errors.str()
            << "}\n";

  a->Stop();
  b->Stop();
  EXPECT_EQ(a->Status().phase, "left") << DescribeConsumer(a->Status());
  EXPECT_EQ(b->Status().phase, "left") << DescribeConsumer(b->Status());
}

}  // namespace
}  // namespace rsc
