// RedisConn::Interrupt, which an abandoned shard reader's connection gets (found by the
// real-process chaos run: an abandoned reader blocked in a Redis command kept counting as
// the shard's reader for up to its reply timeout; then, once the socket was shut down,
// its next write raised SIGPIPE and killed the consumer process). Against a real
// redis-server; run inside scripts/netns.sh.

#include "client/redis_conn.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::client {
namespace {

using namespace std::chrono_literals;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

bool OneClientBlocked(RedisProcess& redis) {
  auto cli = redis.Cli();
  return cli && cli->Run({"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
}

class RedisConnInterrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    std::string error;
    std::optional<RedisTarget> target = ParseRedisUrl(redis_.Url(), &error);
    ASSERT_TRUE(target) << error;
    conn_ = std::make_unique<RedisConn>(*target, 2000ms);
    ASSERT_TRUE(conn_->Ensure(&error)) << error;
  }

  RedisProcess redis_;
  std::unique_ptr<RedisConn> conn_;
};

// The BLOCK (60 s) is far longer than any wait below, so a return can only be the
// interrupt's doing, however slowly a loaded machine runs the threads.
TEST_F(RedisConnInterrupt, ACommandBlockedInAnotherThreadReturnsAtOnce) {
  std::atomic<bool> done{false};
  bool got_reply = false;
  std::string error;
  std::thread reader([&] {
    RedisReplyPtr r = conn_->Command({"XREAD", "BLOCK", "60000", "STREAMS", "s", "$"}, &error, 90s);
    got_reply = r != nullptr;
    done = true;
  });
  const bool blocked =
      static_cast<bool>(WaitFor([&] { return OneClientBlocked(redis_); }, 10s, "the XREAD blocks"));
  const auto interrupted_at = std::chrono::steady_clock::now();
  conn_->Interrupt();
  const bool returned = static_cast<bool>(
      WaitFor([&] { return done.load(); }, 20s, "the blocked XREAD returns after Interrupt"));
  reader.join();  // returns at the latest when the BLOCK ends
  ASSERT_TRUE(blocked);
  EXPECT_TRUE(returned);
  EXPECT_FALSE(got_reply) << "an interrupted command has no reply";
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted_at, 30s) << "not the 60 s BLOCK";
  std::string again;
  EXPECT_FALSE(conn_->Ensure(&again)) << "an interrupted connection does not reconnect";
  EXPECT_NE(again.find("interrupted"), std::string::npos) << again;
}

TEST_F(RedisConnInterrupt, NothingIsWrittenAfterwards) {
  // This thread does not block SIGPIPE: a write to the shut-down socket would kill the test.
  conn_->Interrupt();
  std::string error;
  EXPECT_EQ(conn_->Command({"PING"}, &error), nullptr);
  EXPECT_NE(error.find("interrupted"), std::string::npos) << error;
}

}  // namespace
}  // namespace rsc::client
