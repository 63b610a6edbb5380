// Level 2: start-up compatibility checks (SPEC L4, S3, S4): a Redis without Lua scripting
// is refused with exit code 4 and a message naming what is missing; an unreachable Redis
// is exit code 3; a usable one gives /healthz and /readyz.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

// A loopback port nobody listens on (bound, then released).
int UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

void ExpectRefusedWithCode(CoordinatorProcess& coord, int expected_code,
                           const std::vector<std::string>& must_mention) {
  ASSERT_TRUE(coord.Spawn());
  std::optional<int> code = coord.WaitExit(20s);
  ASSERT_TRUE(code.has_value()) << "rsc-coordinator kept running:" << coord.LogTail();
  EXPECT_EQ(*code, expected_code) << coord.LogTail();
  const std::string log = coord.Log();
  for (const std::string& word : must_mention) {
    EXPECT_NE(log.find(word), std::string::npos)
        << "the message does not name " << word << ":" << coord.LogTail();
  }
  EXPECT_EQ(log.find("event=listening"), std::string::npos) << "it listened anyway";
}

TEST(StartupTest, RedisWithoutEvalshaIsRefusedWithExitCode4) {
  RedisProcessOptions ro;
  ro.extra_args = {"--rename-command", "EVALSHA", ""};
  RedisProcess redis(ro);
  ASSERT_TRUE(redis.Start());
  CoordinatorProcess coord(CoordOpts(redis));
  ExpectRefusedWithCode(coord, 4, {"EVALSHA"});
}

TEST(StartupTest, RedisWithoutEvalIsRefusedWithExitCode4) {
  RedisProcessOptions ro;
  ro.extra_args = {"--rename-command", "EVAL", "EVAL_renamed_away"};
  RedisProcess redis(ro);
  ASSERT_TRUE(redis.Start());
  CoordinatorProcess coord(CoordOpts(redis));
  ExpectRefusedWithCode(coord, 4, {"EVAL "});
}

TEST(StartupTest, UnreachableRedisIsExitCode3) {
  CoordinatorOptions o;
  o.redis_url = "redis://127.0.0.1:" + std::to_string(UnusedPort());
  CoordinatorProcess coord(o);
  ExpectRefusedWithCode(coord, 3, {"redis_unreachable"});
}

TEST(StartupTest, WrongRedisPasswordIsRefusedNonZero) {
  RedisProcessOptions ro;
  ro.password = "right-password";
  RedisProcess redis(ro);
  ASSERT_TRUE(redis.Start());
  CoordinatorOptions o;
  o.redis_url = "redis://:wrong-password@" + redis.Address();
  CoordinatorProcess coord(o);
  ASSERT_TRUE(coord.Spawn());
  std::optional<int> code = coord.WaitExit(20s);
  ASSERT_TRUE(code.has_value()) << coord.LogTail();
  EXPECT_NE(*code, 0) << coord.LogTail();
  EXPECT_EQ(coord.Log().find("wrong-password"), std::string::npos)
      << "the password leaked into the log:" << coord.LogTail();
}

TEST(StartupTest, AuthenticatedRedisWorksAndProbesAnswer) {
  RedisProcessOptions ro;
  ro.acl_user = "app";
  ro.acl_password = "s3cret";
  RedisProcess redis(ro);
  ASSERT_TRUE(redis.Start());
  CoordinatorProcess coord(CoordOpts(redis));
  ASSERT_TRUE(coord.Start());
  EXPECT_EQ(coord.Log().find("s3cret"), std::string::npos) << "password logged:" << coord.LogTail();
  HttpClient http(coord.Port());
  EXPECT_EQ(http.Get("/healthz").status, 200);
  HttpResult ready = http.Get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.Describe();
  ASSERT_TRUE(CreateGroup(http, "auth", "g", 2));
  Consumer a("a");
  HttpResult r = Beat(http, a, "auth", "g");
  EXPECT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(coord.Terminate(10s), std::optional<int>(0)) << coord.LogTail();
}

TEST(StartupTest, BadCommandLineIsExitCode2) {
  CoordinatorOptions o;
  o.redis_url = "redis://127.0.0.1:1";
  o.extra_args = {"--no-such-flag"};
  CoordinatorProcess coord(o);
  ASSERT_TRUE(coord.Spawn());
  EXPECT_EQ(coord.WaitExit(10s), std::optional<int>(2)) << coord.LogTail();
}

}  // namespace
}  // namespace rsc::integration
