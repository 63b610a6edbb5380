// Level 2: malformed and hostile requests against a real coordinator (SPEC R2.4, §4.1
// error table, §8 S4 admin token). None of them may change what Redis stores (the
// metadata hash, the liveness set, the set of keys), and the coordinator keeps serving,
// on the same keep-alive connection wherever HTTP allows it.

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kToken = "integration-admin-token";
constexpr const char* kP = "orders";
constexpr const char* kG = "billing";

class HostileRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    CoordinatorOptions o = CoordOpts(redis_);
    o.admin_token = kToken;
    coord_ = std::make_unique<CoordinatorProcess>(o);
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
    cli_ = redis_.Cli();
    ASSERT_NE(cli_, nullptr);
    ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4, Config{}, Auth()));
    HttpResult r = Beat(*http_, member_, kP, kG);
    ASSERT_EQ(r.status, 200) << r.Describe();
    Snapshot(&before_);
  }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }

  static HttpClient::Headers Auth() { return {{"Authorization", std::string("Bearer ") + kToken}}; }

  struct State {
    std::map<std::string, std::string> hash;
    std::string liveness;
    std::set<std::string> keys;
  };
  void Snapshot(State* s) {
    s->hash = HGetAll(*cli_, MetadataKey(kP, kG));
    s->liveness = cli_->Run({"ZRANGE", "redis-stream:coord:{orders:billing}:liveness", "0", "-1",
                             "WITHSCORES"})
                      .ToString();
    s->keys = AllKeys(*cli_);
    // The group mutex comes and goes with ticks; it is not state.
    s->keys.erase(LockKey(kP, kG));
  }
  void ExpectUnchanged(const std::string& after_what) {
    State now;
    Snapshot(&now);
    EXPECT_EQ(now.hash, before_.hash) << "metadata hash changed after " << after_what;
    EXPECT_EQ(now.liveness, before_.liveness) << "liveness changed after " << after_what;
    EXPECT_EQ(now.keys, before_.keys) << "keys created or removed after " << after_what;
  }
  // The coordinator still answers normal requests.
  void ExpectServing(HttpClient& h) {
    HttpResult health = h.Get("/healthz");
    EXPECT_EQ(health.status, 200) << health.Describe();
    HttpResult routing = h.Get(RoutingPath(kP, kG));
    EXPECT_EQ(routing.status, 200) << routing.Describe();
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<RedisCli> cli_;
  Consumer member_{"member-1"};
  State before_;
};

TEST_F(HostileRequestsTest, MalformedHeartbeatBodiesAre400AndChangeNothing) {
  const std::string ok_prefix =
      R"({"memberId":"member-1","memberEpoch":)" + std::to_string(member_.epoch);
  const std::vector<std::string> bodies = {
      "",
      "{",
      R"({"memberId":)",
      "not json at all",
      "[]",
      "null",
      "42",
      R"({"memberId":5,"memberEpoch":1})",
      R"({"memberId":"member-1","memberEpoch":"1"})",
      R"({"memberId":"member-1"})",
      R"({"memberEpoch":1})",
      R"({"memberId":"member-1","memberEpoch":1e30})",
      R"({"memberId":"member-1","memberEpoch":99999999999999999999999})",
      R"({"memberId":"member-1","memberEpoch":-2})",
      R"({"memberId":"member-1","memberEpoch":1.5})",
      ok_prefix + R"(,"ownedShards":"0,1"})",
      ok_prefix + R"(,"ownedShards":[1.5]})",
      ok_prefix + R"(,"ownedShards":[-1]})",
      ok_prefix + R"(,"ownedShards":[2147483648]})",
      ok_prefix + R"(,"completedShards":[-3]})",
      ok_prefix + R"(,"completedShards":"4"})",
      ok_prefix + R"(,"ownedShards":[18446744073709551615]})",
      ok_prefix + R"(,"ownedShards":[1,1]})",
      ok_prefix + R"(,"ownedShards":[0],"revokingShards":[{"shard":0,"state":"REVOKED"}]})",
      ok_prefix + R"(,"revokingShards":[{"shard":1,"state":"BOGUS"}]})",
      ok_prefix + R"(,"revokingShards":[{"shard":"1","state":"REVOKED"}]})",
      ok_prefix + R"(,"revokingShards":[1]})",
      ok_prefix + R"(,"metadataVersion":-5})",
      ok_prefix + R"(,"metadataVersion":1e400})",
      ok_prefix + R"(,"assignmentEpoch":"x"})",
      ok_prefix + R"(,"lineage":5})",
      ok_prefix + R"(,"lineage":")" + std::string(65, 'a') + R"("})",
      ok_prefix + R"(,"instanceId":"has space"})",
      R"({"memberId":"a b","memberEpoch":0})",
      R"({"memberId":"{x}","memberEpoch":0})",
      R"({"memberId":"","memberEpoch":0})",
      R"({"memberId":")" + std::string(300, 'm') + R"(","memberEpoch":0})",
      "{\"memberId\":\"\xff\xfe\",\"memberEpoch\":0}",
      std::string(100000, '[') + std::string(100000, ']'),
      R"({"memberId":"member-1","memberEpoch":1} trailing)",
  };
  const int opened = http_->connections_opened();
  for (const std::string& body : bodies) {
    HttpResult r = http_->Post(HeartbeatPath(kP, kG), body);
    const std::string shown = body.size() > 80 ? body.substr(0, 80) + "..." : body;
    EXPECT_EQ(r.status, 400) << "body " << shown << ": " << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "INVALID_REQUEST") << "body " << shown << ": " << r.Describe();
    EXPECT_FALSE(JsonStr(r.json, "message").empty()) << r.Describe();
  }
  EXPECT_EQ(http_->connections_opened(), opened) << "a 400 for a bad body closed the connection";
  // The same for leave.
  for (const std::string& body : {std::string("{"), std::string(R"({"memberId":7})")}) {
    HttpResult r = http_->Post(GroupPath(kP, kG) + "/leave", body);
    EXPECT_EQ(r.ErrorCode(), "INVALID_REQUEST") << r.Describe();
  }
  ExpectUnchanged("malformed heartbeats");
  ExpectServing(*http_);
}

TEST_F(HostileRequestsTest, OversizedBodyIs413AndTheConnectionStaysUsable) {
  const int opened = http_->connections_opened();
  const std::string big(2 << 20, 'x');  // 2 MiB
  HttpResult r = http_->Post(HeartbeatPath(kP, kG), big);
  EXPECT_EQ(r.status, 413) << r.Describe();
  EXPECT_EQ(r.ErrorCode(), "PAYLOAD_TOO_LARGE") << r.Describe();
  // A 2 MiB JSON-looking body (valid prefix) is refused the same way.
  std::string json_big =
      R"({"memberId":"member-1","memberEpoch":1,"lineage":")" + std::string(2 << 20, 'a') + "\"}";
  HttpResult r2 = http_->Post(HeartbeatPath(kP, kG), json_big);
  EXPECT_EQ(r2.status, 413) << r2.Describe();
  // Same connection, valid request.
  HttpResult ok = http_->Post(HeartbeatPath(kP, kG), json::value(member_.Request()));
  EXPECT_EQ(ok.status, 200) << ok.Describe();
  EXPECT_EQ(http_->connections_opened(), opened) << "the 413 closed the keep-alive connection";
  // Restore the liveness snapshot's meaning: the valid heartbeat above moved the deadline.
  Snapshot(&before_);
  HttpResult admin_big = http_->Post("/v1/groups/restore", big, Auth());
  EXPECT_EQ(admin_big.status, 413) << admin_big.Describe();
  ExpectUnchanged("oversized bodies");
  ExpectServing(*http_);
}

TEST_F(HostileRequestsTest, BadNamesAreRejectedWithoutTouchingRedis) {
  const std::vector<std::string> bad_streams = {
      "a{b",  "a}b", "{orders:billing}", "a b", std::string(201, 's'),
      "../x", "a/b", "x\r\ny",           "",    ".",
      "..",   "...",  // only dots: proxies and curl rewrite such path segments (issue 8)
  };
  const std::vector<std::string> bad_groups = {
      "a{b", "a}b", "g:x", "a b", std::string(129, 'g'), "../etc", "g*", "", ".", "..",
  };
  for (const std::string& p : bad_streams) {
    HttpResult r = http_->Post("/v1/groups", json::value(CreateBody(p, "g", 2)), Auth());
    EXPECT_EQ(r.status, 400) << "stream '" << p << "': " << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "INVALID_REQUEST") << r.Describe();
  }
  for (const std::string& g : bad_groups) {
    HttpResult r = http_->Post("/v1/groups", json::value(CreateBody("s", g, 2)), Auth());
    EXPECT_EQ(r.status, 400) << "group '" << g << "': " << r.Describe();
  }
  // The same names in paths (percent-encoded), for every route family.
  for (const std::string& p : bad_streams) {
    if (p.empty()) continue;
    const std::string enc = rsc::testing::UrlEncode(p);
    for (const std::string& path :
         {HeartbeatPath(enc, kG), RoutingPath(enc, kG), GroupPath(enc, kG)}) {
      HttpResult r = path.ends_with("heartbeat") ? http_->Post(path, json::value(member_.Request()))
                                                 : http_->Get(path, Auth());
      EXPECT_EQ(r.status, 400) << path << ": " << r.Describe();
    }
  }
  for (const std::string& g : bad_groups) {
    if (g.empty()) continue;
    HttpResult r =
        http_->Post(HeartbeatPath(kP, rsc::testing::UrlEncode(g)), json::value(member_.Request()));
    EXPECT_EQ(r.status, 400) << g << ": " << r.Describe();
  }
  // Raw (unencoded) hostile bytes in the request line, and traversal-looking paths.
  for (const std::string& target :
       {std::string("/v1/groups/a{b/g/heartbeat"), std::string("/v1/groups/a}b/g/heartbeat"),
        std::string("/v1/groups/..%2F..%2Fetc/passwd/heartbeat"),
        std::string("/v1/groups/orders/billing%00/heartbeat"),
        std::string("/v1/groups/orders/bill%ing/heartbeat")}) {
    HttpResult r = http_->Post(target, json::value(member_.Request()));
    EXPECT_EQ(r.status, 400) << target << ": " << r.Describe();
  }
  for (const std::string& target :
       {std::string("/v1/groups/../../etc/passwd"), std::string("/../v1/groups"),
        std::string("/v1/groups/orders/billing/heartbeat/../export")}) {
    HttpResult r = http_->Get(target, Auth());
    EXPECT_TRUE(r.status == 400 || r.status == 404 || r.status == 405)
        << target << ": " << r.Describe();
  }
  // A member id with bad characters in the fence path.
  HttpResult fence = http_->Post(
      GroupPath(kP, kG) + "/members/" + rsc::testing::UrlEncode("m{1}") + "/fence", "", Auth());
  EXPECT_EQ(fence.status, 400) << fence.Describe();
  ExpectUnchanged("bad names");
  ExpectServing(*http_);
}

TEST_F(HostileRequestsTest, UnknownRoutesAre404AndWrongMethods405) {
  for (const std::string& target :
       {std::string("/"), std::string("/v2/groups"), std::string("/v1"), std::string("/v1/groupz"),
        GroupPath(kP, kG) + "/unknown", GroupPath(kP, kG) + "/members/member-1/kill",
        GroupPath(kP, kG) + "/a/b/c/d/e", std::string("/healthz/x")}) {
    HttpResult r = http_->Get(target, Auth());
    EXPECT_EQ(r.status, 404) << target << ": " << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "NOT_FOUND") << target << ": " << r.Describe();
  }
  struct Case {
    const char* method;
    std::string target;
  };
  for (const Case& c :
       {Case{"PUT", "/v1/groups"}, Case{"DELETE", "/v1/groups"}, Case{"GET", HeartbeatPath(kP, kG)},
        Case{"DELETE", HeartbeatPath(kP, kG)}, Case{"POST", GroupPath(kP, kG)},
        Case{"PUT", GroupPath(kP, kG)}, Case{"POST", RoutingPath(kP, kG)}, Case{"POST", "/healthz"},
        Case{"DELETE", "/metrics"}, Case{"GET", "/v1/groups/restore"},
        Case{"GET", GroupPath(kP, kG) + "/members/member-1/fence"}}) {
    HttpResult r = http_->Request(c.method, c.target, "", Auth());
    EXPECT_EQ(r.status, 405) << c.method << " " << c.target << ": " << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "METHOD_NOT_ALLOWED") << r.Describe();
    EXPECT_FALSE(r.Header("allow").empty()) << c.method << " " << c.target << ": no Allow header";
  }
  // Query-string abuse on routing.
  for (const std::string& q :
       {std::string("?observedVersion=-1"), std::string("?observedVersion=x"),
        std::string("?observedVersion=99999999999999999999"),
        std::string("?observedVersion=1&observedVersion=2"),
        std::string("?observedVersion=1&lineage=") + std::string(65, 'a'),
        std::string("?lineage=%zz")}) {
    HttpResult r = http_->Get(GroupPath(kP, kG) + "/routing" + q);
    EXPECT_EQ(r.status, 400) << q << ": " << r.Describe();
  }
  ExpectUnchanged("unknown routes and wrong methods");
  ExpectServing(*http_);
}

TEST_F(HostileRequestsTest, AdminEndpointsRequireTheBearerToken) {
  const int64_t revision = JsonInt(http_->Get(GroupPath(kP, kG), Auth()).json, "revision");
  ASSERT_GT(revision, 0);
  const std::vector<HttpClient::Headers> bad_auth = {
      {},
      {{"Authorization", "Bearer wrong-token"}},
      {{"Authorization", std::string("Bearer ") + kToken + "x"}},
      {{"Authorization", std::string("Basic ") + kToken}},
      {{"Authorization", std::string("Bearer") + kToken}},
      {{"Authorization", "Bearer "}},
      {{"Authorization", std::string("Bearer ") + std::string(kToken).substr(0, 10)}},
      {{"X-Admin-Token", kToken}},
  };
  const std::string restore_doc = http_->Get(GroupPath(kP, kG) + "/export", Auth()).body;
  ASSERT_FALSE(restore_doc.empty());
  for (size_t i = 0; i < bad_auth.size(); ++i) {
    const auto& h = bad_auth[i];
    SCOPED_TRACE("auth variant " + std::to_string(i));
    std::vector<HttpResult> rs = {
        http_->Get("/v1/groups", h),
        http_->Post("/v1/groups", json::value(CreateBody("other", "g", 2)), h),
        http_->Get(GroupPath(kP, kG), h),
        http_->Patch(GroupPath(kP, kG),
                     json::value(json::object{{"expectedRevision", revision}, {"shardCount", 8}}),
                     h),
        http_->Delete(GroupPath(kP, kG) + "?expectedRevision=" + std::to_string(revision), h),
        http_->Post(GroupPath(kP, kG) + "/members/member-1/fence", "", h),
        http_->Get(GroupPath(kP, kG) + "/export", h),
        http_->Post("/v1/groups/restore", restore_doc, h),
    };
    for (const HttpResult& r : rs) {
      EXPECT_EQ(r.status, 401) << r.Describe();
      EXPECT_EQ(r.ErrorCode(), "UNAUTHORIZED") << r.Describe();
      EXPECT_NE(r.body.find("Bearer"), std::string::npos) << r.Describe();
    }
  }
  // Consumer and producer endpoints and probes need no token.
  EXPECT_EQ(http_->Get(RoutingPath(kP, kG)).status, 200);
  EXPECT_EQ(http_->Get("/healthz").status, 200);
  EXPECT_EQ(http_->Get("/readyz").status, 200);
  EXPECT_EQ(http_->Get("/metrics").status, 200);
  ExpectUnchanged("unauthorized admin calls");
  // With the token (any case of the scheme) the admin API works.
  HttpResult list = http_->Get("/v1/groups", {{"Authorization", std::string("bearer ") + kToken}});
  EXPECT_EQ(list.status, 200) << list.Describe();
}

TEST_F(HostileRequestsTest, MalformedHttpIsRejectedAndTheServerKeepsServing) {
  struct Raw {
    std::string name;
    std::string bytes;
  };
  const std::vector<Raw> raws = {
      {"garbage request line", "HELLO WORLD\r\n\r\n"},
      {"binary", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + "\r\n\r\n"},
      {"negative length",
       "POST " + HeartbeatPath(kP, kG) + " HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"},
      {"two lengths",
       "POST " + HeartbeatPath(kP, kG) +
           " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"},
      {"header too large",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 << 10, 'h') + "\r\n\r\n"},
      {"bad chunk",
       "POST " + HeartbeatPath(kP, kG) +
           " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"},
  };
  for (const Raw& raw : raws) {
    HttpClient h(coord_->Port(), 5s);
    HttpResult r = h.SendRaw(raw.bytes);
    // A response (4xx) or a closed connection are both acceptable; a 2xx or 5xx is not.
    if (r.status != 0) {
      EXPECT_GE(r.status, 400) << raw.name << ": " << r.Describe();
      EXPECT_LT(r.status, 500) << raw.name << ": " << r.Describe();
    }
    EXPECT_TRUE(h.WaitServerClose(3s)) << raw.name << ": connection left open after bad HTTP";
  }
  // A client that sends half a request and stalls does not block others.
  HttpClient stalled(coord_->Port(), 5s);
  std::string half = "POST " + HeartbeatPath(kP, kG) +
                     " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"memberId\"";
  ASSERT_TRUE(stalled.SendBytes(half));
  HttpClient other(coord_->Port(), 5s);
  ExpectServing(other);
  ExpectUnchanged("malformed HTTP");
  EXPECT_TRUE(coord_->WaitExit(0ms) == std::nullopt) << "the coordinator died";
}

}  // namespace
}  // namespace rsc::integration
