// Connection and pool against real redis-servers: AUTH forms, SELECT, pipelining,
// reconnect, and the failure mapping REDIS_UNAVAILABLE vs UNKNOWN_RESULT.

#include "redis/connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "redis/test_util.h"
#include "support/redis_process.h"

namespace rsc::redis::testing {
namespace {

using rsc::testing::RedisProcess;
using rsc::testing::RedisProcessOptions;
using std::chrono::milliseconds;

ConnectionOptions OptionsFor(const RedisProcess& p) {
  auto url = ParseRedisUrl(p.Url());
  EXPECT_TRUE(url.ok());
  ConnectionOptions o = ConnectionOptions::FromUrl(*url);
  o.command_timeout = milliseconds(2000);
  return o;
}

TEST(ConnectionTest, RefusedConnectionIsRedisUnavailable) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  ConnectionOptions o = OptionsFor(p);
  ASSERT_TRUE(p.Stop());
  Connection c(o);
  auto r = c.Run({"SET", "k", "v"}, CommandKind::kWrite);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(r.error().message.find(o.Address()), std::string::npos) << r.error().message;
  EXPECT_FALSE(c.connected());
}

TEST(ConnectionTest, PasswordAuth) {
  RedisProcessOptions opts;
  opts.password = "pa ss";  // a space survives the URL as %20 and AUTH as one argument
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  ConnectionOptions o;
  o.port = p.Port();
  o.password = "pa ss";
  Connection good(o);
  auto pong = good.Run({"PING"}, CommandKind::kRead);
  ASSERT_TRUE(pong.ok()) << Describe(pong);
  EXPECT_EQ(pong->str, "PONG");

  auto url = ParseRedisUrl("redis://:pa%20ss@127.0.0.1:" + std::to_string(p.Port()));
  ASSERT_TRUE(url.ok());
  Connection from_url(ConnectionOptions::FromUrl(*url));
  EXPECT_TRUE(from_url.Run({"PING"}, CommandKind::kRead).ok());

  o.password = "wrong-secret";
  Connection bad(o);
  auto refused = bad.Run({"PING"}, CommandKind::kRead);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(refused.error().message.find("AUTH"), std::string::npos) << refused.error().message;
  EXPECT_EQ(refused.error().message.find("wrong-secret"), std::string::npos);

  o.password.clear();
  Connection none(o);
  auto noauth = none.Run({"GET", "x"}, CommandKind::kRead);
  ASSERT_TRUE(noauth.ok());  // an error *reply*, not a transport failure
  EXPECT_TRUE(noauth->ErrorIs("NOAUTH")) << noauth->DebugString();
}

TEST(ConnectionTest, AclUserAuth) {
  RedisProcessOptions opts;
  opts.acl_user = "alice";
  opts.acl_password = "s3cret";
  opts.extra_args = {"--user", "default", "off"};  // only alice may log in
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto url = ParseRedisUrl(p.Url());
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->user, "alice");
  Connection c(ConnectionOptions::FromUrl(*url));
  auto who = c.Run({"ACL", "WHOAMI"}, CommandKind::kRead);
  ASSERT_TRUE(who.ok()) << Describe(who);
  EXPECT_EQ(who->str, "alice");

  ConnectionOptions wrong = ConnectionOptions::FromUrl(*url);
  wrong.password = "nope";
  Connection bad(wrong);
  auto refused = bad.Run({"PING"}, CommandKind::kRead);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(refused.error().message.find("user 'alice'"), std::string::npos)
      << refused.error().message;
}

TEST(ConnectionTest, SelectsTheDatabaseFromTheUrl) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  auto url = ParseRedisUrl(p.Url() + "/3");
  ASSERT_TRUE(url.ok());
  Connection c(ConnectionOptions::FromUrl(*url));
  ASSERT_TRUE(c.Run({"SET", "in-db-3", "yes"}, CommandKind::kWrite).ok());
  auto cli = p.Cli();
  EXPECT_TRUE(cli->Run({"GET", "in-db-3"}).IsNil());
  ASSERT_TRUE(cli->Run({"SELECT", "3"}).ok());
  EXPECT_EQ(cli->Run({"GET", "in-db-3"}).str, "yes");
}

TEST(ConnectionTest, PipelineKeepsReplyOrderAcrossErrorReplies) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  Connection c(OptionsFor(p));
  std::string big(100'000, 'x');  // larger than one socket write
  auto replies = c.Pipeline({{"SET", "a", "1"},
                             {"INCR", "a"},
                             {"HGET", "a", "f"},  // WRONGTYPE
                             {"SET", "big", big},
                             {"GET", "big"},
                             {"GET", "a"}},
                            CommandKind::kWrite);
  ASSERT_TRUE(replies.ok()) << Describe(replies);
  ASSERT_EQ(replies->size(), 6u);
  EXPECT_EQ((*replies)[0].str, "OK");
  EXPECT_EQ((*replies)[1].integer, 2);
  EXPECT_TRUE((*replies)[2].ErrorIs("WRONGTYPE"));
  EXPECT_EQ((*replies)[4].str, big);
  EXPECT_EQ((*replies)[5].str, "2");
}

// A server restart closes pooled sockets; the next command must reconnect first rather
// than report UNKNOWN_RESULT for a write that never left.
TEST(ConnectionTest, ReconnectsOnNextUseAfterServerRestart) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  Connection c(OptionsFor(p));
  ASSERT_TRUE(c.Run({"PING"}, CommandKind::kRead).ok());
  ASSERT_TRUE(p.Restart());
  auto w = c.Run({"SET", "after", "restart"}, CommandKind::kWrite);
  ASSERT_TRUE(w.ok()) << Describe(w);
  EXPECT_EQ(c.reconnects(), 1);

  p.Kill();
  auto down = c.Run({"SET", "k", "v"}, CommandKind::kWrite);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code, ErrorCode::kRedisUnavailable) << down.error().message;
  ASSERT_TRUE(p.Start());
  EXPECT_TRUE(c.Run({"PING"}, CommandKind::kRead).ok());
}

TEST(ConnectionTest, TimeoutAfterSendingIsUnknownResultForWritesOnly) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  ConnectionOptions o = OptionsFor(p);
  o.command_timeout = milliseconds(200);
  Connection c(o);
  ASSERT_TRUE(c.Run({"PING"}, CommandKind::kRead).ok());

  p.Pause();  // SIGSTOP: the socket accepts bytes, nobody answers
  auto w = c.Run({"SET", "k", "v"}, CommandKind::kWrite);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kUnknownResult) << w.error().message;
  EXPECT_NE(w.error().message.find("200 ms"), std::string::npos) << w.error().message;
  auto r = c.Run({"GET", "k"}, CommandKind::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kRedisUnavailable) << r.error().message;
  p.Resume();

  // The late replies to the abandoned commands must not be read as answers to new ones.
  auto after = c.Run({"ECHO", "fresh"}, CommandKind::kRead);
  ASSERT_TRUE(after.ok()) << Describe(after);
  EXPECT_EQ(after->str, "fresh");
}

TEST(ConnectionPoolTest, BoundedCheckoutWaitsThenFails) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  ConnectionPool pool(OptionsFor(p), 2, milliseconds(50));
  auto a = pool.Checkout();
  auto b = pool.Checkout();
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = pool.Checkout();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(c.error().message.find("pool exhausted"), std::string::npos);
  { auto released = std::move(a); }
  auto d = pool.Checkout();
  EXPECT_TRUE(d.ok());
}

TEST(ConnectionPoolTest, ManyThreadsShareFewConnections) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  ConnectionPool pool(OptionsFor(p), 2, milliseconds(5000));
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto lease = pool.Checkout();
        if (!lease.ok() || !(*lease)->Run({"INCR", "n"}, CommandKind::kWrite).ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  auto cli = p.Cli();
  EXPECT_EQ(cli->Run({"GET", "n"}).str, "300");
  // The pool's two connections plus this client.
  const std::string clients = cli->Run({"CLIENT", "LIST"}).str;
  EXPECT_EQ(std::count(clients.begin(), clients.end(), '\n'), 3) << clients;
}

}  // namespace
}  // namespace rsc::redis::testing
