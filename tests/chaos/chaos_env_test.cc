// The chaos environment's own faults (tests/chaos/chaos_env.h), each checked against real
// redis-servers and coordinators: a chaos run is only as good as the faults it claims to
// inject. Run inside scripts/netns.sh.

#include "chaos/chaos_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <tuple>

namespace rsc::testing {
namespace {

using std::chrono::milliseconds;

ChaosConfig SmallConfig(uint64_t seed) {
  ChaosConfig c;
  c.seed = seed;
  c.shards = 2;
  c.group_config = {{"heartbeatIntervalMs", 200}, {"memberLeaseMs", 2500},
                    {"assignmentLeaseMs", 1500},  {"rebalanceTimeoutMs", 3000},
                    {"routingLeaseMs", 3000},     {"routingRefreshMs", 300}};
  return c;
}

// XADDs through the virtual IP until stopped, alternating over `streams`, each entry with a
// key and a seq (as producers write them); remembers every acknowledged (stream, id, seq).
class Writer {
 public:
  struct Acked {
    size_t stream = 0;
    std::string id;
    int64_t seq = 0;
  };
  Writer(int port, std::vector<std::string> streams) : port_(port), streams_(std::move(streams)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Acked> acked() {
    std::lock_guard lk(mu_);
    return acked_;
  }

 private:
  void Run() {
    std::unique_ptr<RedisCli> cli;
    int64_t seq = 0;
    while (!stop_) {
      if (!cli) {
        std::string err;
        cli = RedisCli::Connect(port_, "", "", milliseconds(500), &err);
        if (!cli) {
          std::this_thread::sleep_for(milliseconds(10));  // reconnect backoff
          continue;
        }
      }
      const size_t s = static_cast<size_t>(seq) % streams_.size();
      const CliReply r =
          cli->Run({"XADD", streams_[s], "*", "key", "k", "seq", std::to_string(seq)});
      if (r.type == CliReply::Type::kString) {
        std::lock_guard lk(mu_);
        acked_.push_back({s, r.str, seq});
      } else if (r.type == CliReply::Type::kTransportError) {
        cli.reset();
      }
      ++seq;  // a seq is never reused, acknowledged or not
    }
  }
  int port_;
  std::vector<std::string> streams_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Acked> acked_;
  std::thread thread_;
};

TEST(ChaosEnv, FailoverLosesExactlyTheWritesTheReplicaMissed) {
  ChaosEnv env(SmallConfig(11));
  ASSERT_TRUE(env.Start());
  const int old_port = env.master().Port();
  Writer writer(env.redis_proxy().port(), {env.ShardStream(0), env.ShardStream(1)});
  ASSERT_TRUE(WaitFor([&] { return writer.acked().size() > 50; }, milliseconds(5000),
                      "the writer gets XADDs acknowledged"));
  ASSERT_TRUE(env.FailoverLosingWrites(milliseconds(300)));
  ASSERT_TRUE(WaitFor([&] { return writer.acked().size() > 100; }, milliseconds(5000),
                      "the writer continues on the promoted replica"));
  writer.Stop();
  EXPECT_NE(env.master().Port(), old_port);
  EXPECT_GT(env.lost(), 0) << "writes during the cut must be lost";
  ChaosEnv::StreamContents now;
  ASSERT_TRUE(env.ReadStreams(env.master(), &now));
  // By content: the promoted node may give an id the lost entry had to a later write (same
  // millisecond), so a lost record names (shard, id, seq), as the harness compares them.
  std::set<std::tuple<int, std::string, int64_t>> lost;
  std::set<int> lost_shards;
  for (const auto& e : env.history()) {
    if (e.kind != sim::HistKind::kLost) continue;
    lost.insert({e.shard, e.id, e.seq});
    lost_shards.insert(e.shard);
    EXPECT_EQ(e.key, "k") << "a lost record says what the entry held";
  }
  EXPECT_EQ(lost_shards, (std::set<int>{0, 1})) << "the cut lost writes on both shards";
  // Every acknowledged entry is on the new master with its content, or recorded lost —
  // nothing vanished unrecorded — and nothing the new master kept is recorded lost.
  int64_t missing = 0, kept_but_lost = 0;
  for (const Writer::Acked& a : writer.acked()) {
    const int shard = static_cast<int>(a.stream);
    auto it = now[shard].find(a.id);
    const bool kept = it != now[shard].end() && it->second.seq == a.seq;
    const bool recorded = lost.count({shard, a.id, a.seq}) > 0;
    missing += !kept && !recorded;
    kept_but_lost += kept && recorded;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(kept_but_lost, 0);
  // The old master came back as a replica of the new one.
  EXPECT_TRUE(env.WaitReplicaInSync(milliseconds(10000)));
}

// A node that cannot be read is an error, never an empty stream (which would hide every
// loss of a failover or excuse every entry).
TEST(ChaosEnv, AnUnreadableNodeIsAnErrorNotAnEmptyStream) {
  ChaosEnv env(SmallConfig(14));
  ASSERT_TRUE(env.Start());
  ChaosEnv::StreamContents c;
  ASSERT_TRUE(env.ReadStreams(env.master(), &c));
  auto cli = env.master().Cli();
  ASSERT_EQ(cli->Run({"SET", env.ShardStream(1), "not a stream"}).type, CliReply::Type::kStatus);
  auto wrong_type = env.ReadStreams(env.master(), &c);
  EXPECT_FALSE(wrong_type);
  EXPECT_NE(std::string(wrong_type.message()).find("WRONGTYPE"), std::string::npos)
      << wrong_type.message();
  ASSERT_EQ(cli->Run({"DEL", env.ShardStream(1)}).type, CliReply::Type::kInteger);
  env.replica().Kill();
  auto gone = env.ReadStreams(env.replica(), &c);
  EXPECT_FALSE(gone);
  EXPECT_NE(std::string(gone.message()).find("cannot read"), std::string::npos) << gone.message();
}

TEST(ChaosEnv, OlderSnapshotRestoreLosesWhatCameAfterIt) {
  ChaosEnv env(SmallConfig(12));
  ASSERT_TRUE(env.Start());
  auto cli = env.master().Cli();
  ASSERT_EQ(cli->Run({"XADD", env.ShardStream(1), "*", "k", "before"}).type,
            CliReply::Type::kString);
  ASSERT_TRUE(env.SaveSnapshot());
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(cli->Run({"XADD", env.ShardStream(1), "*", "k", "after"}).type,
              CliReply::Type::kString);
  }
  ASSERT_TRUE(env.RestoreOlderSnapshot());
  EXPECT_EQ(env.lost(), 5);
  ChaosEnv::StreamContents now;
  ASSERT_TRUE(env.ReadStreams(env.master(), &now));
  EXPECT_EQ(now[1].size(), 1u);
}

TEST(ChaosEnv, MetadataDeletionThenOperatorRestore) {
  ChaosEnv env(SmallConfig(13));
  ASSERT_TRUE(env.Start());
  ASSERT_TRUE(env.DeleteMetadataThenRestore(milliseconds(100)));
  HttpClient http(env.coordinator(1).Port());
  EXPECT_EQ(http.Get("/v1/groups/chaos/workers").status, 200);
  int deletes = 0, restores = 0;
  for (const auto& e : env.history()) {
    deletes += e.detail == "key_delete";
    restores += e.detail == "restore";
  }
  EXPECT_EQ(deletes, 1);
  EXPECT_EQ(restores, 1);
}

TEST(ChaosEnv, CoordinatorRestartIsReachableThroughTheSameProxy) {
  ChaosEnv env(SmallConfig(14));
  ASSERT_TRUE(env.Start());
  const int proxy_port = env.coord_proxy(0).port();
  env.KillCoordinator(0);
  ASSERT_TRUE(env.RestartCoordinator(0));
  HttpClient http(proxy_port);
  HttpResult r = http.Get("/healthz");
  EXPECT_EQ(r.status, 200) << r.Describe() << " port " << env.coordinator(0).Port();
}

}  // namespace
}  // namespace rsc::testing
