// Level 2: roles and tokens (SPEC O4) against a real coordinator and redis-server: 401 for
// a missing or wrong token, 403 for a token of the wrong role, the admin token admitted
// everywhere, refused requests changing nothing in Redis, the tokens file (with a rotation's
// previous token), and the start-up refusals (exit code 2) of bad token setups. Tokens
// never reach the log.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kMonitor = "monitor-token-0123456789";
constexpr const char* kMember = "member-token-0123456789";
constexpr const char* kP = "orders";
constexpr const char* kG = "billing";

HttpClient::Headers Bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

// Writes `text` to `dir`/name with `mode`; returns the path.
std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text,
                      mode_t mode) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  EXPECT_EQ(::chmod(path.c_str(), mode), 0) << path;
  return path;
}

class RolesTest : public RedisFixtureTest {
 protected:
  // Starts the coordinator with `extra` arguments (and `env`), debug logging so that every
  // request is logged (the no-token-in-the-log check reads those lines).
  void StartCoordinator(std::vector<std::string> extra, std::vector<std::string> env = {}) {
    CoordinatorOptions o = CoordOpts(redis_);
    o.log_level = "debug";
    o.extra_args = std::move(extra);
    o.env = std::move(env);
    coord_ = std::make_unique<CoordinatorProcess>(o);
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
  }
  // Spawns a coordinator that must refuse to start with exit code 2 and a message that
  // contains `want` (and no token).
  void ExpectRefused(std::vector<std::string> extra, const std::string& want,
                     std::vector<std::string> env = {}) {
    CoordinatorOptions o = CoordOpts(redis_);
    o.extra_args = std::move(extra);
    o.env = std::move(env);
    CoordinatorProcess coord(o);
    ASSERT_TRUE(coord.Spawn());
    const std::optional<int> code = coord.WaitExit(20s);
    ASSERT_TRUE(code.has_value()) << "rsc-coordinator kept running:" << coord.LogTail();
    EXPECT_EQ(*code, 2) << coord.LogTail();
    const std::string log = coord.Log();
    EXPECT_NE(log.find(want), std::string::npos) << "want: " << want << coord.LogTail();
    EXPECT_EQ(log.find("event=listening"), std::string::npos) << "it listened anyway";
    for (const char* token : {kAdmin, kMonitor, kMember, "secret-token-in-file"}) {
      EXPECT_EQ(log.find(token), std::string::npos) << "the log shows a token:" << coord.LogTail();
    }
  }
};

TEST_F(RolesTest, EachRoleReachesExactlyItsRoutes) {
  StartCoordinator(
      {"--admin-token", kAdmin, "--monitor-token", kMonitor, "--member-token", kMember});
  ASSERT_TRUE(coord_->LogContains("roles=admin,monitor,member")) << coord_->LogTail();
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2, Config{}, Bearer(kAdmin)));
  const std::string before = HGet(*cli_, MetadataKey(kP, kG), "revision");
  const std::set<std::string> keys_before = AllKeys(*cli_);
  const std::string patch_body = R"({"expectedRevision":1,"config":{"heartbeatIntervalMs":900}})";
  const json::value hb = json::object{{"memberId", "m-1"}, {"memberEpoch", 0}};

  // 401: no token, or a wrong one, on every class that needs a token.
  for (const HttpClient::Headers& h : {HttpClient::Headers{}, Bearer("wrong-token-0123456")}) {
    for (HttpResult r :
         {http_->Get(GroupPath(kP, kG), h), http_->Get("/v1/streams/orders", h),
          http_->Get("/metrics", h), http_->Post(HeartbeatPath(kP, kG), hb, h),
          http_->Get(RoutingPath(kP, kG), h), http_->Patch(GroupPath(kP, kG), patch_body, h)}) {
      EXPECT_EQ(r.status, 401) << r.Describe();
      EXPECT_EQ(r.ErrorCode(), "UNAUTHORIZED") << r.Describe();
      EXPECT_EQ(r.Header("www-authenticate"), "Bearer") << r.Describe();
    }
  }
  // 403: the monitor token on mutations, export and member endpoints; the member token on
  // reads and mutations.
  for (HttpResult r :
       {http_->Patch(GroupPath(kP, kG), patch_body, Bearer(kMonitor)),
        http_->Delete(GroupPath(kP, kG) + "?expectedRevision=1", Bearer(kMonitor)),
        http_->Post(GroupPath(kP, kG) + "/members/m-1/fence", "", Bearer(kMonitor)),
        http_->Post("/v1/streams/orders/reshard", R"({"expectedLayoutRevision":1,"shardCount":3})",
                    Bearer(kMonitor)),
        http_->Get(GroupPath(kP, kG) + "/export", Bearer(kMonitor)),
        http_->Post(HeartbeatPath(kP, kG), hb, Bearer(kMonitor)),
        http_->Get(GroupPath(kP, kG), Bearer(kMember)), http_->Get("/v1/groups", Bearer(kMember)),
        http_->Get("/metrics", Bearer(kMember)),
        http_->Post("/v1/groups", json::value(CreateBody(kP, "other", 2)), Bearer(kMember))}) {
    EXPECT_EQ(r.status, 403) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "FORBIDDEN") << r.Describe();
    EXPECT_EQ(r.Header("www-authenticate"), "") << r.Describe();
  }
  // Nothing refused changed anything.
  EXPECT_EQ(HGet(*cli_, MetadataKey(kP, kG), "revision"), before);
  EXPECT_EQ(AllKeys(*cli_), keys_before);

  // Each role where it belongs; the admin token everywhere.
  EXPECT_EQ(http_->Get(GroupPath(kP, kG), Bearer(kMonitor)).status, 200);
  EXPECT_EQ(http_->Get("/v1/streams/orders", Bearer(kMonitor)).status, 200);
  EXPECT_EQ(http_->Get("/metrics", Bearer(kMonitor)).status, 200);
  HttpResult joined = http_->Post(HeartbeatPath(kP, kG), hb, Bearer(kMember));
  EXPECT_EQ(joined.status, 200) << joined.Describe();
  EXPECT_EQ(http_->Get(RoutingPath(kP, kG), Bearer(kMember)).status, 200);
  EXPECT_EQ(http_->Get("/healthz").status, 200);
  EXPECT_EQ(http_->Get("/readyz").status, 200);
  HttpResult heartbeat_as_admin = http_->Post(
      HeartbeatPath(kP, kG), json::object{{"memberId", "m-2"}, {"memberEpoch", 0}}, Bearer(kAdmin));
  EXPECT_EQ(heartbeat_as_admin.status, 200) << heartbeat_as_admin.Describe();
  EXPECT_EQ(http_->Get("/metrics", Bearer(kAdmin)).status, 200);
  HttpResult exported = http_->Get(GroupPath(kP, kG) + "/export", Bearer(kAdmin));
  EXPECT_EQ(exported.status, 200) << exported.Describe();

  const std::string metrics = http_->Get("/metrics", Bearer(kMonitor)).body;
  EXPECT_EQ(MetricSum(metrics, "rsc_heartbeats_total", R"(status="UNAUTHORIZED")"), 2);
  EXPECT_EQ(MetricSum(metrics, "rsc_heartbeats_total", R"(status="FORBIDDEN")"), 1);
  EXPECT_EQ(MetricSum(metrics, "rsc_http_requests_total", R"(status="403")"), 10);

  // Debug logging shows every request; no token is among them.
  const std::string log = coord_->Log();
  EXPECT_NE(log.find("status=403"), std::string::npos) << coord_->LogTail();
  for (const char* token : {kAdmin, kMonitor, kMember, "wrong-token-0123456"}) {
    EXPECT_EQ(log.find(token), std::string::npos) << "the log shows a token";
  }
}

// SPEC O4 "with only an admin token configured, reads need it too and member endpoints stay
// open (as in v1)"; /metrics stays open too (docs/protocol.md 2.1).
TEST_F(RolesTest, OnlyAnAdminTokenGuardsReadsAndLeavesMemberEndpointsAndMetricsOpen) {
  StartCoordinator({}, {"RSC_ADMIN_TOKEN=" + std::string(kAdmin)});
  ASSERT_TRUE(coord_->LogContains("admin_auth=on roles=admin ")) << coord_->LogTail();
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2, Config{}, Bearer(kAdmin)));
  EXPECT_EQ(http_->Get(GroupPath(kP, kG)).status, 401);
  EXPECT_EQ(http_->Get("/v1/streams/orders").status, 401);
  // A token of a role that is not configured is just an unknown token.
  EXPECT_EQ(http_->Get(GroupPath(kP, kG), Bearer(kMonitor)).status, 401);
  EXPECT_EQ(http_->Get(GroupPath(kP, kG), Bearer(kAdmin)).status, 200);
  Consumer c("m-1");
  EXPECT_EQ(Beat(*http_, c, kP, kG).status, 200);
  EXPECT_EQ(http_->Get(RoutingPath(kP, kG)).status, 200);
  // An open route ignores the header, even a wrong token (clients may get theirs first).
  EXPECT_EQ(http_->Get(RoutingPath(kP, kG), Bearer("not-yet-configured")).status, 200);
  EXPECT_EQ(http_->Get("/metrics").status, 200);
}

TEST_F(RolesTest, TokensFileConfiguresRolesAndAcceptsThePreviousTokenDuringARotation) {
  const std::string file =
      WriteFile(redis_.Dir(), "tokens",
                "# rsc tokens\n"
                "admin=" +
                    std::string(kAdmin) + "\n" + "monitor = " + kMonitor + "\r\n" +
                    "member=" + kMember + "\n" + "member.previous=old-member-token-0123\n",
                0600);
  StartCoordinator({"--tokens-file", file});
  ASSERT_TRUE(coord_->LogContains("roles=admin,monitor,member")) << coord_->LogTail();
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2, Config{}, Bearer(kAdmin)));
  EXPECT_EQ(http_->Get(GroupPath(kP, kG), Bearer(kMonitor)).status, 200);
  const json::value hb = json::object{{"memberId", "m-1"}, {"memberEpoch", 0}};
  EXPECT_EQ(http_->Post(HeartbeatPath(kP, kG), hb, Bearer(kMember)).status, 200);
  EXPECT_EQ(http_->Post(HeartbeatPath(kP, kG), hb, Bearer("old-member-token-0123")).status, 200);
  // The previous member token is a member token: no more.
  EXPECT_EQ(http_->Get(GroupPath(kP, kG), Bearer("old-member-token-0123")).status, 403);
  EXPECT_EQ(http_->Post(HeartbeatPath(kP, kG), hb).status, 401);
  // What the previous token still admits is counted: the rotation is not finished.
  const std::string metrics = http_->Get("/metrics", Bearer(kMonitor)).body;
  EXPECT_EQ(MetricSum(metrics, "rsc_auth_previous_token_requests_total", R"(role="member")"), 1)
      << metrics;
}

TEST_F(RolesTest, BadTokenSetupsRefuseToStartWithExitCode2) {
  ExpectRefused({"--monitor-token", kMonitor}, "a monitor token needs an admin token");
  ExpectRefused({}, "a member token needs an admin token",
                {"RSC_MEMBER_TOKEN=" + std::string(kMember)});
  ExpectRefused({"--admin-token", kAdmin, "--member-token", kAdmin},
                "the admin and member tokens are the same");
  ExpectRefused({"--admin-token", "has blank"}, "printable ASCII characters without blanks");

  const std::string dir = redis_.Dir();
  const std::string malformed = WriteFile(
      dir, "malformed", "admin=" + std::string(kAdmin) + "\nsecret-token-in-file\n", 0600);
  ExpectRefused({"--tokens-file", malformed}, "line 2: expected role=token");
  const std::string duplicate = WriteFile(
      dir, "duplicate", "admin=" + std::string(kAdmin) + "\nadmin=secret-token-in-file\n", 0600);
  ExpectRefused({"--tokens-file", duplicate}, "line 2: admin is given twice");
  const std::string readable =
      WriteFile(dir, "readable", "admin=" + std::string(kAdmin) + "\n", 0644);
  ExpectRefused({"--tokens-file", readable}, "mode 644 lets other users read or change it");
  const std::string good = WriteFile(dir, "good", "admin=" + std::string(kAdmin) + "\n", 0600);
  ExpectRefused({"--tokens-file", good}, "given both by --admin-token",
                {"RSC_ADMIN_TOKEN=secret-token-in-file"});
  ExpectRefused({}, "tokens file " + dir + "/missing: No such file",
                {"RSC_TOKENS_FILE=" + dir + "/missing"});
}

}  // namespace
}  // namespace rsc::integration
