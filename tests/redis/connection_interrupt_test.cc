// Connection::Interrupt and Connection::Cut (called from another thread while the owner is
// blocked in a command), and the streaming pipeline (Send, then one Receive per reply).
// Interrupt is what a stopping reader port does (found by the real-process chaos run: an
// abandoned reader blocked in a Redis command kept counting as the shard's reader for up to
// its reply timeout; then, once the socket was shut down, its next write raised SIGPIPE and
// killed the consumer process). Cut is how an abandon ends a shared blocked read while the
// port goes on. Against a real redis-server; run inside scripts/netns.sh.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "redis/connection.h"
#include "redis/redis_url.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::redis {
namespace {

using namespace std::chrono_literals;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

bool OneClientBlocked(RedisProcess& redis) {
  auto cli = redis.Cli();
  return cli && cli->Run({"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
}

class ConnectionCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    Result<RedisUrl> url = ParseRedisUrl(redis_.Url());
    ASSERT_TRUE(url.ok()) << url.error().message;
    ConnectionOptions o = ConnectionOptions::FromUrl(*url);
    o.command_timeout = 2000ms;
    conn_ = std::make_unique<Connection>(o);
    ASSERT_TRUE(conn_->Connect().ok());
  }

  // Runs a 60 s blocking XREAD in another thread, waits until Redis reports it blocked,
  // calls `cut`, and returns how the read ended. The BLOCK is far longer than any wait
  // here, so a return can only be the cut's doing, however slowly the machine runs.
  template <class Cut>
  Result<Reply> BlockedReadEndedBy(Cut cut) {
    std::atomic<bool> done{false};
    Result<Reply> result = MakeError(ErrorCode::kInternal, "not run");
    std::thread reader([&] {
      result =
          conn_->Run({"XREAD", "BLOCK", "60000", "STREAMS", "s", "$"}, CommandKind::kRead, 90s);
      done = true;
    });
    const bool blocked = static_cast<bool>(
        WaitFor([&] { return OneClientBlocked(redis_); }, 10s, "the XREAD blocks"));
    const auto cut_at = std::chrono::steady_clock::now();
    cut();
    const bool returned = static_cast<bool>(
        WaitFor([&] { return done.load(); }, 20s, "the blocked XREAD returns after the cut"));
    reader.join();  // returns at the latest when the BLOCK ends
    EXPECT_TRUE(blocked);
    EXPECT_TRUE(returned);
    EXPECT_LT(std::chrono::steady_clock::now() - cut_at, 30s) << "not the 60 s BLOCK";
    return result;
  }

  RedisProcess redis_;
  std::unique_ptr<Connection> conn_;
};

TEST_F(ConnectionCutTest, InterruptEndsABlockedCommandAndRefusesToReconnect) {
  Result<Reply> r = BlockedReadEndedBy([&] { conn_->Interrupt(); });
  EXPECT_FALSE(r.ok()) << "an interrupted command has no reply";
  Status again = conn_->Connect();
  ASSERT_FALSE(again.ok()) << "an interrupted connection does not reconnect";
  EXPECT_NE(again.error().message.find("interrupted"), std::string::npos) << again.error().message;
}

TEST_F(ConnectionCutTest, NothingIsWrittenAfterAnInterrupt) {
  // This thread does not block SIGPIPE itself: a write to the shut-down socket outside the
  // connection's guard would kill the test.
  conn_->Interrupt();
  Result<Reply> r = conn_->Run({"PING"}, CommandKind::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(r.error().message.find("interrupted"), std::string::npos) << r.error().message;
}

TEST_F(ConnectionCutTest, CutEndsABlockedCommandAndTheNextOneReconnects) {
  Result<Reply> r = BlockedReadEndedBy([&] { conn_->Cut(); });
  EXPECT_FALSE(r.ok()) << "a cut command has no reply";
  Result<Reply> pong = conn_->Run({"PING"}, CommandKind::kRead);
  ASSERT_TRUE(pong.ok()) << pong.error().message;
  EXPECT_EQ(pong->str, "PONG");
}

TEST_F(ConnectionCutTest, ACutWhileIdleIsNoticedBeforeTheNextWrite) {
  ASSERT_TRUE(conn_->Run({"PING"}, CommandKind::kRead).ok());
  conn_->Cut();
  // A write on the cut socket would fail as UNKNOWN_RESULT or vanish; it goes out on a
  // fresh connection instead.
  Result<Reply> r = conn_->Run({"SET", "k", "v"}, CommandKind::kWrite);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->str, "OK");
}

TEST_F(ConnectionCutTest, StreamingPipelineAnswersInOrderAndKeepsErrorReplies) {
  ASSERT_TRUE(
      conn_->Send({{"SET", "a", "1"}, {"INCR", "nope", "x"}, {"GET", "a"}}, CommandKind::kWrite)
          .ok());
  Result<Reply> set = conn_->Receive();
  Result<Reply> bad = conn_->Receive();
  Result<Reply> get = conn_->Receive();
  ASSERT_TRUE(set.ok() && bad.ok() && get.ok());
  EXPECT_EQ(set->str, "OK");
  EXPECT_TRUE(bad->IsError()) << bad->DebugString();
  EXPECT_EQ(get->str, "1");
  // Nothing is outstanding: a Receive more is an error, not a hang.
  Result<Reply> extra = conn_->Receive();
  EXPECT_FALSE(extra.ok());
}

TEST_F(ConnectionCutTest, AReplyLostMidPipelineIsUnknownForWrites) {
  ASSERT_TRUE(conn_->Send({{"SET", "a", "1"}, {"BLPOP", "empty", "0"}}, CommandKind::kWrite).ok());
  ASSERT_TRUE(conn_->Receive().ok());
  Result<Reply> late = conn_->Receive();  // blocks for good: the 2 s reply timeout runs out
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kUnknownResult) << late.error().message;
  // An unread pipeline never leaks into the next one: the connection was dropped.
  Result<Reply> pong = conn_->Run({"PING"}, CommandKind::kRead);
  ASSERT_TRUE(pong.ok()) << pong.error().message;
  EXPECT_EQ(pong->str, "PONG");
}

}  // namespace
}  // namespace rsc::redis
