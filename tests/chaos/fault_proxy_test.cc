// The chaos run's TCP fault proxy (tests/support/fault_proxy.h) against real redis-servers:
// each fault does what the chaos checkers assume it does. Run inside scripts/netns.sh.

#include "support/fault_proxy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::unique_ptr<RedisCli> Through(const FaultProxy& proxy, milliseconds timeout,
                                  std::string* error) {
  return RedisCli::Connect(proxy.port(), "", "", timeout, error);
}

class FaultProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(a_.Start());
    ASSERT_TRUE(b_.Start());
    ASSERT_TRUE(a_.Cli()->Run({"SET", "who", "a"}).ok());
    ASSERT_TRUE(b_.Cli()->Run({"SET", "who", "b"}).ok());
  }
  RedisProcess a_;
  RedisProcess b_;
};

TEST_F(FaultProxyTest, ForwardsBothWaysWithoutFaults) {
  FaultProxy proxy(a_.Port(), 1);
  std::string err;
  auto cli = Through(proxy, milliseconds(2000), &err);
  ASSERT_TRUE(cli) << err;
  EXPECT_EQ(cli->Run({"GET", "who"}).str, "a");
  // A value larger than one proxy chunk arrives intact.
  const std::string big(200'000, 'x');
  ASSERT_TRUE(cli->Run({"SET", "big", big}).ok());
  EXPECT_EQ(cli->Run({"GET", "big"}).str, big);
  EXPECT_GE(proxy.counters().bytes, 400'000);
  EXPECT_EQ(proxy.counters().accepted, 1);
}

TEST_F(FaultProxyTest, DelayHoldsEveryChunkAtLeastTheMinimum) {
  FaultProxy proxy(a_.Port(), 2);
  std::string err;
  auto cli = Through(proxy, milliseconds(5000), &err);
  ASSERT_TRUE(cli) << err;
  proxy.SetFaults({.delay_min = milliseconds(100), .delay_max = milliseconds(150)});
  const auto t0 = Clock::now();
  EXPECT_EQ(cli->Run({"GET", "who"}).str, "a");
  // Request and reply each wait >= 100 ms.
  EXPECT_GE(Clock::now() - t0, milliseconds(200));
  EXPECT_GE(proxy.counters().chunks_delayed, 2);
}

TEST_F(FaultProxyTest, ResetCutsTheConnection) {
  FaultProxy proxy(a_.Port(), 3);
  std::string err;
  auto cli = Through(proxy, milliseconds(2000), &err);
  ASSERT_TRUE(cli) << err;
  proxy.SetFaults({.reset_probability = 1.0});
  const CliReply r = cli->Run({"GET", "who"});
  EXPECT_EQ(r.type, CliReply::Type::kTransportError) << r.ToString();
  EXPECT_EQ(proxy.counters().resets, 1);
}

TEST_F(FaultProxyTest, BlackholeHoldsBytesUntilLifted) {
  FaultProxy proxy(a_.Port(), 4);
  std::string err;
  auto cli = Through(proxy, milliseconds(300), &err);
  ASSERT_TRUE(cli) << err;
  proxy.SetFaults({.blackhole = true});
  // The request is held: no reply within the client's timeout.
  EXPECT_EQ(cli->Run({"INCR", "n"}).type, CliReply::Type::kTransportError);
  // ... but it was not dropped: once the partition heals it reaches the server.
  proxy.SetFaults({});
  auto check = a_.Cli();
  EXPECT_TRUE(WaitFor(
      [&] {
        return check->Run({"GET", "n"}).str == "1";
      },
      milliseconds(3000), "the held INCR reaches redis after the blackhole lifted"));
}

TEST_F(FaultProxyTest, RefuseClosesNewConnections) {
  FaultProxy proxy(a_.Port(), 5);
  proxy.SetFaults({.refuse = true});
  std::string err;
  auto cli = Through(proxy, milliseconds(1000), &err);
  if (cli) {
    EXPECT_EQ(cli->Run({"PING"}).type, CliReply::Type::kTransportError);
  }
  EXPECT_EQ(proxy.counters().refused, 1);
  EXPECT_EQ(proxy.counters().accepted, 0);
}

TEST_F(FaultProxyTest, RetargetAndResetAllMoveClientsToTheNewServer) {
  FaultProxy proxy(a_.Port(), 6);
  std::string err;
  auto old_cli = Through(proxy, milliseconds(2000), &err);
  ASSERT_TRUE(old_cli) << err;
  EXPECT_EQ(old_cli->Run({"GET", "who"}).str, "a");
  proxy.Retarget(b_.Port());
  proxy.ResetAll();
  EXPECT_EQ(old_cli->Run({"GET", "who"}).type, CliReply::Type::kTransportError);
  auto new_cli = Through(proxy, milliseconds(2000), &err);
  ASSERT_TRUE(new_cli) << err;
  EXPECT_EQ(new_cli->Run({"GET", "who"}).str, "b");
}

TEST_F(FaultProxyTest, SameSeedSameFaultDecisions) {
  // Determinism of the decisions themselves: with reset_probability 0.5, the same seed
  // resets the same numbered connections (one request per connection, sequentially).
  auto pattern = [&](uint64_t seed) {
    FaultProxy proxy(a_.Port(), seed);
    proxy.SetFaults({.reset_probability = 0.5});
    std::string bits;
    for (int i = 0; i < 16; ++i) {
      std::string err;
      auto cli = Through(proxy, milliseconds(2000), &err);
      if (!cli) {
        bits += '?';
        continue;
      }
      bits += cli->Run({"PING"}).ok() ? '1' : '0';
    }
    return bits;
  };
  const std::string first = pattern(42);
  EXPECT_EQ(first, pattern(42));
  EXPECT_NE(first.find('0'), std::string::npos);
  EXPECT_NE(first.find('1'), std::string::npos);
}

}  // namespace
}  // namespace rsc::testing
