// Level 2: start-up compatibility checks (SPEC L4, S3, S4): a Redis without Lua scripting
// is refused with exit code 4 and a message naming what is missing; an unreachable Redis
// is exit code 3; a usable one gives /healthz and /readyz; one that becomes unusable while
// the coordinator runs makes /readyz 503.

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

// A redis-server with an ACL user "app" (password "s3cret") holding every permission.
RedisProcessOptions AclUserRedis() {
  RedisProcessOptions ro;
  ro.acl_user = "app";
  ro.acl_password = "s3cret";
  return ro;
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
  RedisProcess redis(AclUserRedis());
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

// Issue 13 (O5): the compatibility check also runs while the coordinator serves, from
// /readyz at most every --compat-recheck-ms. A Redis whose ACL loses EVAL under a running
// coordinator makes /readyz 503 naming it and counts rsc_redis_compat_failures_total; when
// the ACL is fixed, ready again.
TEST(StartupTest, RedisThatBecomesIncompatibleIsReportedByReadyzAndCounted) {
  RedisProcess redis(AclUserRedis());
  ASSERT_TRUE(redis.Start());
  CoordinatorOptions o = CoordOpts(redis);
  o.extra_args = {"--compat-recheck-ms", "200"};
  CoordinatorProcess coord(o);
  ASSERT_TRUE(coord.Start());
  HttpClient http(coord.Port());
  HttpResult ready = http.Get("/readyz");
  ASSERT_EQ(ready.status, 200) << ready.Describe();
  EXPECT_EQ(Metric(http, "rsc_redis_compat_failures_total"), 0);

  auto cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  HttpResult last;
  auto readyz_becomes = [&](int status) {
    return WaitFor(
        [&] {
          last = http.Get("/readyz");
          return last.status == status;
        },
        10s, "/readyz to answer " + std::to_string(status));
  };
  ASSERT_EQ(cli->Run({"ACL", "SETUSER", "app", "-eval", "-evalsha"}).type, CliReply::Type::kStatus);
  ASSERT_TRUE(readyz_becomes(503)) << "the Redis lost EVAL: " << last.Describe();
  EXPECT_EQ(last.ErrorCode(), "REDIS_UNAVAILABLE") << last.Describe();
  EXPECT_NE(last.body.find("EVAL"), std::string::npos) << "names what is missing: " << last.body;
  EXPECT_GE(Metric(http, "rsc_redis_compat_failures_total"), 1);
  EXPECT_TRUE(coord.LogContains("event=redis_incompatible")) << coord.LogTail();

  ASSERT_EQ(cli->Run({"ACL", "SETUSER", "app", "+eval", "+evalsha"}).type, CliReply::Type::kStatus);
  ASSERT_TRUE(readyz_becomes(200)) << "the ACL was fixed: " << last.Describe();
  EXPECT_TRUE(coord.LogContains("event=redis_compatible_again")) << coord.LogTail();
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

// A value outside a flag's range is refused at start, not run with: a tick interval of 0
// would spin the tick loop against Redis, 0 workers would be silently 1.
TEST(StartupTest, OutOfRangeFlagValuesAreExitCode2) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--tick-interval-ms", "0"},
                                        {"--tick-interval-ms", "-5"},
                                        {"--workers", "0"},
                                        {"--io-threads", "100000"},
                                        {"--shutdown-grace-ms", "-1"},
                                        {"--max-body-bytes", "10"}}) {
    CoordinatorOptions o;
    o.redis_url = "redis://127.0.0.1:1";
    o.extra_args = args;
    CoordinatorProcess coord(o);
    ASSERT_TRUE(coord.Spawn());
    EXPECT_EQ(coord.WaitExit(10s), std::optional<int>(2)) << args[0] << " " << args[1] << "\n"
                                                          << coord.LogTail();
  }
}

}  // namespace
}  // namespace rsc::integration
