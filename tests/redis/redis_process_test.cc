// The test harness itself (tests/support): a harness that hides failures would make
// every test above worthless, so its failure paths are tested too.

#include "support/redis_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "support/wait.h"

namespace rsc::testing {
namespace {

using std::chrono::milliseconds;

TEST(RedisProcessTest, StartFailureExplainsItselfWithTheLog) {
  RedisProcessOptions opts;
  opts.extra_args = {"--no-such-option", "1"};
  opts.start_timeout = milliseconds(5000);
  RedisProcess p(opts);
  auto started = p.Start();
  ASSERT_FALSE(started);
  EXPECT_NE(std::string(started.message()).find("exited during start-up"), std::string::npos)
      << started.message();
  EXPECT_NE(std::string(started.message()).find("no-such-option"), std::string::npos)
      << started.message();
  EXPECT_FALSE(p.running());
}

// Two tests that pick the same port at once: the second server cannot bind, and until it
// has exited the first one answers the second's PING. Taking that for a start made two CI
// tests share one server (StoreFailureTest, 2026-12-05).
TEST(RedisProcessTest, AServerOnAPortAnotherServerHoldsDoesNotCountAsStarted) {
  RedisProcess first;
  ASSERT_TRUE(first.Start());
  ASSERT_TRUE(first.Cli()->Run({"SET", "owner", "first"}).ok());
  RedisProcessOptions opts;
  opts.port = first.Port();
  RedisProcess second(opts);
  auto started = second.Start();
  ASSERT_FALSE(started) << "the second server counted as started on the first one's port";
  const std::string why = started.message();
  EXPECT_TRUE(why.find("answered by another redis-server") != std::string::npos ||
              why.find("exited during start-up") != std::string::npos)
      << why;
  EXPECT_FALSE(second.running());
  EXPECT_EQ(first.Cli()->Run({"GET", "owner"}).str, "first");  // the first one untouched
}

TEST(RedisProcessTest, RestartKeepsPortAndDirectoryAndSaveKeepsData) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  const int port = p.Port();
  ASSERT_TRUE(p.Cli()->Run({"SET", "k", "v"}).ok());
  ASSERT_TRUE(p.Restart(/*save=*/true));
  EXPECT_EQ(p.Port(), port);
  EXPECT_EQ(p.Cli()->Run({"GET", "k"}).str, "v");
  ASSERT_TRUE(p.Restart(/*save=*/false));  // NOSAVE: the dump from before is loaded again
  EXPECT_EQ(p.Cli()->Run({"GET", "k"}).str, "v");
  ASSERT_TRUE(p.Cli()->Run({"FLUSHALL"}).ok());
  p.Kill();
  EXPECT_FALSE(p.running());
  ASSERT_TRUE(p.Start());
  EXPECT_EQ(p.Port(), port);
}

TEST(RedisProcessTest, DestructorKillsTheServerAndRemovesItsDirectory) {
  pid_t pid = 0;
  std::string dir;
  {
    RedisProcess p;
    ASSERT_TRUE(p.Start());
    pid = p.Pid();
    dir = p.Dir();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  EXPECT_NE(::kill(pid, 0), 0) << "redis-server " << pid << " outlived its RedisProcess";
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(RedisProcessTest, PasswordAndUrl) {
  RedisProcessOptions opts;
  opts.password = "pw";
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  EXPECT_EQ(p.Url(), "redis://:pw@127.0.0.1:" + std::to_string(p.Port()));
  EXPECT_EQ(p.Cli()->Run({"PING"}).str, "PONG");
  ASSERT_TRUE(p.Stop());  // SHUTDOWN needs the password too
  EXPECT_FALSE(p.running());
}

TEST(WaitForTest, SaysWhatDidNotHappen) {
  auto r = WaitFor([] { return false; }, milliseconds(30), "the moon to turn blue");
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("waiting for: the moon to turn blue"), std::string::npos);
  int n = 0;
  EXPECT_TRUE(WaitFor([&] { return ++n == 3; }, milliseconds(5000), "third poll"));
}

}  // namespace
}  // namespace rsc::testing
