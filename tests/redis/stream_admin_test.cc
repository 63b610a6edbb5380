// Replica acknowledgements against real Redis (SPEC RS2): where the shard's master has a
// replica, RedisStreamAdmin's seal counts only once a replica acknowledged it (WAIT), and so
// does RedisStore's layout barrier before sealing; without replicas neither waits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "core/layout.h"
#include "redis/redis_store.h"
#include "redis/redis_stream_admin.h"
#include "redis/redis_url.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::redis::testing {
namespace {

using namespace std::chrono_literals;
using rsc::testing::RedisProcess;
using rsc::testing::RedisProcessOptions;
using rsc::testing::WaitFor;

std::unique_ptr<SingleNodeExecutor> ExecutorFor(const RedisProcess& p) {
  ConnectionOptions o;
  o.port = p.Port();
  return std::make_unique<SingleNodeExecutor>(o, 2, 2000ms);
}

bool EndsWithSeal(rsc::testing::RedisCli& cli, const std::string& key) {
  const auto r = cli.Run({"XREVRANGE", key, "+", "-", "COUNT", "1"});
  return r.ok() && r.elements.size() == 1 && !r.elements[0].elements.empty() &&
         r.elements[0].elements[0].str == kSealId;
}

// The offset the master's first replica last acknowledged (INFO replication "slave0:…,
// offset=N,…"); -1 when there is none.
int64_t ReplicaAckedOffset(rsc::testing::RedisCli& master) {
  const std::string info = master.Run({"INFO", "replication"}).str;
  const size_t slave = info.find("slave0:");
  if (slave == std::string::npos) return -1;
  const size_t at = info.find("offset=", slave);
  if (at == std::string::npos) return -1;
  return std::strtoll(info.c_str() + at + 7, nullptr, 10);
}

TEST(RedisStreamAdminSeal, WithoutReplicasItDoesNotWait) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  auto ex = ExecutorFor(p);
  RedisStreamAdmin admin(*ex, 20s);
  const auto start = std::chrono::steady_clock::now();
  auto wrote = admin.Seal("{orders:0}", 0, "");
  ASSERT_TRUE(wrote.ok()) << wrote.error().message;
  EXPECT_TRUE(*wrote);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s)
      << "a seal on a server without replicas waited for WAIT's timeout";
  auto again = admin.Seal("{orders:0}", 0, "");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(*again) << "already sealed";
}

// Progresses and Backlogs read every key in one pipeline and answer per key, in order: a
// missing key, a key without the group, a sealed key read to its end, a key with a backlog.
TEST(RedisStreamAdminReads, ProgressesAndBacklogsAnswerPerKeyInOrder) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  auto cli = p.Cli();
  ASSERT_NE(cli, nullptr);
  auto ex = ExecutorFor(p);
  RedisStreamAdmin admin(*ex);
  ASSERT_TRUE(cli->Run({"XADD", "{o:nogroup}", "*", "k", "v"}).ok());
  ASSERT_TRUE(admin.CreateConsumerGroup("{o:done}", "g").ok());
  ASSERT_TRUE(admin.Seal("{o:done}", 0, "").ok());
  ASSERT_TRUE(cli->Run({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "{o:done}", ">"}).ok());
  ASSERT_TRUE(cli->Run({"XACK", "{o:done}", "g", kSealId}).ok());
  ASSERT_TRUE(admin.CreateConsumerGroup("{o:busy}", "g").ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cli->Run({"XADD", "{o:busy}", "*", "k", "v"}).ok());
  ASSERT_TRUE(
      cli->Run({"XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "{o:busy}", ">"}).ok());
  const std::vector<std::string> keys = {"{o:missing}", "{o:nogroup}", "{o:done}", "{o:busy}"};

  const auto progress = admin.Progresses(keys, "g");
  ASSERT_EQ(progress.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(progress[i].ok()) << keys[i] << ": " << progress[i].error().message;
    auto one = admin.Progress(keys[i], "g");
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(progress[i]->exists, one->exists) << keys[i];
    EXPECT_EQ(progress[i]->Complete(), one->Complete()) << keys[i];
  }
  EXPECT_FALSE(progress[0]->exists);
  EXPECT_FALSE(progress[1]->exists);
  EXPECT_TRUE(progress[2]->Complete());
  EXPECT_FALSE(progress[3]->Complete());
  EXPECT_EQ(progress[3]->pending, 1);

  const auto backlog = admin.Backlogs(keys, "g");
  ASSERT_EQ(backlog.size(), keys.size());
  for (const auto& b : backlog) ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_FALSE(backlog[0]->exists);
  EXPECT_FALSE(backlog[1]->exists);
  EXPECT_EQ(backlog[2]->lag, 0);
  EXPECT_EQ(backlog[2]->pending, 0);
  EXPECT_FALSE(backlog[2]->oldest_idle_ms.has_value()) << "nothing pending";
  EXPECT_EQ(backlog[3]->lag, 3);
  EXPECT_EQ(backlog[3]->pending, 1);
  ASSERT_TRUE(backlog[3]->oldest_idle_ms.has_value());
  EXPECT_GE(*backlog[3]->oldest_idle_ms, 0);
}

// A master with one replica that acknowledges the master's writes.
class WithReplica : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(master.Start());
    RedisProcessOptions ro;
    ro.replicaof_port = master.Port();
    replica = std::make_unique<RedisProcess>(ro);
    ASSERT_TRUE(replica->Start());
    mcli = master.Cli();
    rcli = replica->Cli();
    ASSERT_NE(mcli, nullptr);
    ASSERT_NE(rcli, nullptr);
    ASSERT_TRUE(WaitFor(
        [&] {
          // Streaming and acknowledging: after a diskless full sync the master holds the
          // stream back until the replica's first ACK (up to a second), and a write made
          // before the replica attached moves no offset. WAIT covers its connection's writes.
          // So: the replica acknowledged a non-zero offset, then a fresh write.
          return ReplicaAckedOffset(*mcli) > 0 && mcli->Run({"SET", "sync-probe", "1"}).ok() &&
                 mcli->Run({"WAIT", "1", "100"}).integer == 1;
        },
        20s, "the replica to acknowledge the master's writes"));
  }
  RedisProcess master;
  std::unique_ptr<RedisProcess> replica;
  std::unique_ptr<rsc::testing::RedisCli> mcli, rcli;
};

// A replica that does not acknowledge (stopped) keeps the seal from counting: the tick then
// activates nothing. Once the replica is back, the seal is found written.
TEST_F(WithReplica, ASealCountsOnlyOnceAReplicaAcknowledgedIt) {
  auto ex = ExecutorFor(master);
  RedisStreamAdmin admin(*ex, 300ms);

  auto sealed = admin.Seal("{orders:0}", 0, "");  // acknowledged
  ASSERT_TRUE(sealed.ok()) << sealed.error().message
                           << "\nmaster: " << mcli->Run({"INFO", "replication"}).str
                           << "\nreplica: " << rcli->Run({"INFO", "replication"}).str << "\n"
                           << master.LogTail(8);
  EXPECT_TRUE(*sealed);
  EXPECT_TRUE(EndsWithSeal(*rcli, "{orders:0}")) << "WAIT returned before the replica had it";

  replica->Pause();
  auto unacked = admin.Seal("{orders:1}", 0, "");
  replica->Resume();
  ASSERT_FALSE(unacked.ok()) << "a seal no replica acknowledged was reported done";
  EXPECT_EQ(unacked.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(unacked.error().message.find("acknowledged"), std::string::npos)
      << unacked.error().message;
  ASSERT_TRUE(WaitFor([&] { return EndsWithSeal(*rcli, "{orders:1}"); }, 10s,
                      "the resumed replica to receive the seal"));
  auto found = admin.Seal("{orders:1}", 0, "");
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_FALSE(*found) << "the seal was written by the first call";
}

// RS2's barrier before sealing (MetadataStore::ConfirmLayout): the layout at a revision
// counts once a replica acknowledged it; a stopped replica keeps it from counting; a moved
// revision is no confirmation.
TEST_F(WithReplica, TheLayoutCountsBeforeSealingOnlyOnceAReplicaHasIt) {
  auto url = ParseRedisUrl(master.Url());
  ASSERT_TRUE(url.ok());
  RedisStoreOptions options;
  options.replica_wait = 300ms;
  auto store = RedisStore::Open(*url, options);
  ASSERT_TRUE(store.ok()) << store.error().message;
  Layout l = DeriveGeneration0("orders", 2, GroupConfig{}, {}, {}, "lineage").value();
  l.groups = {"billing"};
  auto created = (*store)->CompareAndSetLayout("orders", StoreRevision(0), l, 1);
  ASSERT_TRUE(created.ok() && created->applied);

  auto confirmed = (*store)->ConfirmLayout("orders", created->revision, 2);
  ASSERT_TRUE(confirmed.ok()) << confirmed.error().message;
  EXPECT_TRUE(*confirmed);
  EXPECT_EQ(rcli->Run({"HGET", "redis-stream:coord:{orders}:layout", "updatedAt"}).str, "2")
      << "confirmed before the replica had the barrier's write";
  auto moved = (*store)->ConfirmLayout("orders", StoreRevision(created->revision.value() + 1), 3);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_FALSE(*moved);

  replica->Pause();
  auto unacked = (*store)->ConfirmLayout("orders", created->revision, 4);
  replica->Resume();
  ASSERT_FALSE(unacked.ok()) << "a layout no replica acknowledged was confirmed";
  EXPECT_EQ(unacked.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(unacked.error().message.find("acknowledged"), std::string::npos)
      << unacked.error().message;
}

}  // namespace
}  // namespace rsc::redis::testing
