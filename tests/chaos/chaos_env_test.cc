// The chaos environment's own faults (tests/chaos/chaos_env.h), each checked against real
// redis-servers and coordinators: a chaos run is only as good as the faults it claims to
// inject. Run inside scripts/netns.sh.

#include "chaos/chaos_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

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

// XADDs to shard 0 through the virtual IP until stopped; remembers every acknowledged id.
class Writer {
 public:
  Writer(int port, std::string stream) : port_(port), stream_(std::move(stream)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> acked() {
    std::lock_guard lk(mu_);
    return acked_;
  }

 private:
  void Run() {
    std::unique_ptr<RedisCli> cli;
    while (!stop_) {
      if (!cli) {
        std::string err;
        cli = RedisCli::Connect(port_, "", "", milliseconds(500), &err);
        if (!cli) {
          std::this_thread::sleep_for(milliseconds(10));  // reconnect backoff
          continue;
        }
      }
      const CliReply r = cli->Run({"XADD", stream_, "*", "k", "v"});
      if (r.type == CliReply::Type::kString) {
        std::lock_guard lk(mu_);
        acked_.push_back(r.str);
      } else if (r.type == CliReply::Type::kTransportError) {
        cli.reset();
      }
    }
  }
  int port_;
  std::string stream_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> acked_;
  std::thread thread_;
};

TEST(ChaosEnv, FailoverLosesExactlyTheWritesTheReplicaMissed) {
  ChaosEnv env(SmallConfig(11));
  ASSERT_TRUE(env.Start());
  const int old_port = env.master().Port();
  Writer writer(env.redis_proxy().port(), env.ShardStream(0));
  ASSERT_TRUE(WaitFor([&] { return writer.acked().size() > 50; }, milliseconds(5000),
                      "the writer gets XADDs acknowledged"));
  ASSERT_TRUE(env.FailoverLosingWrites(milliseconds(300)));
  ASSERT_TRUE(WaitFor([&] { return writer.acked().size() > 100; }, milliseconds(5000),
                      "the writer continues on the promoted replica"));
  writer.Stop();
  EXPECT_NE(env.master().Port(), old_port);
  EXPECT_GT(env.lost(), 0) << "writes during the cut must be lost";
  // Every acknowledged id is on the new master or recorded lost — nothing else vanished.
  auto now_ids = env.StreamIds(env.master());
  std::set<std::string> lost;
  for (const auto& e : env.history()) {
    if (e.kind == sim::HistKind::kLost) lost.insert(e.id);
  }
  int64_t missing = 0;
  for (const std::string& id : writer.acked()) {
    if (!now_ids[0].contains(id) && !lost.contains(id)) ++missing;
  }
  EXPECT_EQ(missing, 0);
  // The old master came back as a replica of the new one.
  EXPECT_TRUE(env.WaitReplicaInSync(milliseconds(10000)));
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
  EXPECT_EQ(env.StreamIds(env.master())[1].size(), 1u);
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
