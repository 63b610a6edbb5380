// SPEC §14 O5: docs/openapi.yaml checked against the running server. A real redis-server
// and a real rsc-coordinator (RedisProcess, CoordinatorProcess: LiveCoordinatorTest of
// integration/harness.h) are driven through a scenario that reaches every operation and
// the error answers a client meets (400, 401, 404, 405, 409, 413, 503); every answer is
// checked against the documented schema of its path, method and status (response objects
// are closed in the spec, so an undocumented field fails too), and every request the
// scenario means to be valid against the documented request schema. Operations are found
// with the router itself (MatchRoute -> RouteName = operationId).

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "integration/harness.h"
#include "server/router.h"
#include "support/openapi.h"

namespace rsc::integration {
namespace {

using rsc::testing::OpenApiOperation;
using rsc::testing::OpenApiSpec;

constexpr const char* kToken = "openapi-test-token";
constexpr const char* kP = "orders";

class OpenApiLiveTest : public LiveCoordinatorTest {
 protected:
  int64_t TickMs() const override { return 50; }
  std::vector<std::string> ExtraArgs() const override {
    return {"--admin-token", kToken, "--max-body-bytes", "4096", "--redis-timeout-ms", "500"};
  }
  void SetUp() override {
    LiveCoordinatorTest::SetUp();
    std::string error;
    spec_ = OpenApiSpec::Load(rsc::testing::DefaultOpenApiPath(), &error);
    ASSERT_NE(spec_, nullptr) << error;
  }

  enum class Body { kValid, kInvalid };  // is the request meant to match its schema?

  // One exchange, checked against the spec. `auth`: send the admin token.
  HttpResult Call(const std::string& method, const std::string& target, const std::string& body,
                  Body intent = Body::kValid, bool auth = true) {
    HttpClient::Headers headers;
    if (auth) headers.emplace_back("Authorization", std::string("Bearer ") + kToken);
    HttpResult r = http_->Request(method, target, body, headers);
    EXPECT_TRUE(r.transport_ok()) << method << " " << target << ": " << r.error;
    if (!r.transport_ok()) return r;
    statuses_.insert(r.status);
    Result<RouteMatch> m = MatchRoute(method, target);
    if (!m.ok()) {
      // No operation: an unknown path, an undocumented method or a bad name. The answer is
      // still the documented error body.
      ExpectValid(
          spec_->validator().Validate(boost::json::value{{"$ref", "#/components/schemas/Error"}},
                                      r.json.is_null() ? boost::json::value() : r.json),
          method + " " + target);
      EXPECT_EQ(r.Header("content-type"), "application/json") << target;
      if (r.status == 405) {
        EXPECT_FALSE(r.Header("allow").empty()) << target;
      }
      return r;
    }
    const std::string id(RouteName(m->route));
    const OpenApiOperation* op = spec_->Find(id);
    EXPECT_NE(op, nullptr) << "operation " << id << " is not documented";
    if (op == nullptr) return r;
    covered_[id].insert(r.status);
    if (intent == Body::kValid && spec_->RequestSchema(*op) != nullptr) {
      ExpectValid(spec_->CheckRequest(*op, body), "request of " + target);
    }
    ExpectValid(spec_->CheckResponse(*op, r.status, r.Header("content-type"), r.body),
                method + " " + target + " -> " + r.Describe());
    if (r.status == 401) {
      EXPECT_EQ(r.Header("www-authenticate"), "Bearer");
    }
    return r;
  }
  HttpResult Get(const std::string& target, bool auth = true) {
    return Call("GET", target, "", Body::kValid, auth);
  }
  HttpResult Post(const std::string& target, const json::value& body, Body intent = Body::kValid) {
    return Call("POST", target, json::serialize(body), intent);
  }
  HttpResult Beat(Consumer& c, const std::string& g) {
    HttpResult r = Post(HeartbeatPath(kP, g), json::value(c.Request()));
    c.Apply(r);
    return r;
  }
  void ExpectValid(const std::vector<std::string>& errors, const std::string& what) {
    for (const std::string& e : errors) ADD_FAILURE() << what << "\n  " << e;
  }
  int64_t Revision(const std::string& target) { return JsonInt(Get(target).json, "revision"); }

  std::unique_ptr<OpenApiSpec> spec_;
  std::map<std::string, std::set<int>> covered_;  // operationId -> statuses seen
  std::set<int> statuses_;
};

TEST_F(OpenApiLiveTest, EveryAnswerOfARealScenarioMatchesTheSpec) {
  const std::string billing = GroupPath(kP, "billing");
  // ── probes, auth ─────────────────────────────────────────────────────────────────
  EXPECT_EQ(Get("/healthz").status, 200);
  EXPECT_EQ(Get("/readyz").status, 200);
  EXPECT_EQ(Get("/metrics").status, 200);
  EXPECT_EQ(Get("/ui/app.js").status, 200);  // the console's files (O3): public
  EXPECT_EQ(Get("/v1/groups", /*auth=*/false).status, 401);
  EXPECT_EQ(http_->Get("/v1/groups", {{"Authorization", "Bearer wrong"}}).status, 401);

  // ── create ───────────────────────────────────────────────────────────────────────
  Config config = ShortLeases();
  ASSERT_EQ(Post("/v1/groups", json::value(CreateBody(kP, "billing", 4, config))).status, 201);
  EXPECT_EQ(Post("/v1/groups", json::value(CreateBody(kP, "billing", 4, config))).ErrorCode(),
            "GROUP_EXISTS");
  EXPECT_EQ(Post("/v1/groups", json::value(CreateBody(kP, "audit", 6, config))).ErrorCode(),
            "LAYOUT_MISMATCH");
  EXPECT_EQ(Post("/v1/groups", json::value(json::object{{"stream", "new"}, {"group", "g"}})).status,
            400);  // a new stream needs shardCount
  EXPECT_EQ(
      Post("/v1/groups",
           json::value(json::object{{"stream", "bad/name"}, {"group", "g"}, {"shardCount", 1}}),
           Body::kInvalid)
          .status,
      400);
  EXPECT_EQ(Call("POST", "/v1/groups", "{not json", Body::kInvalid).status, 400);
  ASSERT_EQ(
      Post("/v1/groups", json::value(json::object{{"stream", kP}, {"group", "audit"}})).status,
      201);
  EXPECT_EQ(Get("/v1/groups").status, 200);

  // ── consumers: join, rebalance, drain, errors ────────────────────────────────────
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(cli_->Run({"XADD", "{orders:1}", "*", "k", "v"}).ok());
  ASSERT_TRUE(
      cli_->Run({"XREADGROUP", "GROUP", "billing", "x", "COUNT", "2", "STREAMS", "{orders:1}", ">"})
          .ok());  // two pending: the view shows lag, pending and their age
  Consumer a("a-1"), b("b-1");
  a.features = b.features = {"layout-v2", "shard-lease"};
  ASSERT_EQ(Beat(a, "billing").status, 200);
  ASSERT_TRUE(WaitFor([&] { return Beat(a, "billing").status == 200 && a.owned.size() == 4; }, 10s,
                      "a-1 reads the four shards"));
  ASSERT_EQ(Beat(b, "billing").status, 200);
  ASSERT_TRUE(WaitFor(
      [&] {
        return Beat(a, "billing").status == 200 && Beat(b, "billing").status == 200 &&
               a.owned.size() == 2 && b.owned.size() == 2 && a.revoking.empty();
      },
      10s, "a-1 drains two shards to b-1"));
  Consumer ghost("ghost");
  ghost.epoch = 1;
  EXPECT_EQ(Beat(ghost, "billing").ErrorCode(), "UNKNOWN_MEMBER_ID");
  EXPECT_EQ(Post(HeartbeatPath(kP, "nope"), json::value(Consumer("z").Request())).ErrorCode(),
            "GROUP_NOT_FOUND");
  EXPECT_EQ(Post(HeartbeatPath(kP, "billing"), json::value(json::object{{"memberId", "m"}}),
                 Body::kInvalid)
                .status,
            400);  // memberEpoch is required
  EXPECT_EQ(Call("POST", HeartbeatPath(kP, "billing"), std::string(5000, ' '), Body::kInvalid)
                .ErrorCode(),
            "PAYLOAD_TOO_LARGE");

  // ── producers ────────────────────────────────────────────────────────────────────
  EXPECT_EQ(Get(RoutingPath(kP, "billing", 0)).status, 200);
  EXPECT_EQ(Get(RoutingPath(kP, "billing") + "?observedVersion=x").status, 400);
  EXPECT_EQ(Get(RoutingPath(kP, "nope", 0)).status, 404);

  // ── admin: describe, patch, fence, export, restore ──────────────────────────────
  HttpResult view = Get(billing);
  ASSERT_EQ(view.status, 200);
  EXPECT_NE(view.body.find("\"pending\":2"), std::string::npos) << view.body;
  EXPECT_EQ(Get(GroupPath(kP, "nope")).ErrorCode(), "GROUP_NOT_FOUND");
  const int64_t rev = JsonInt(view.json, "revision");
  EXPECT_EQ(
      Call("PATCH", billing,
           json::serialize(json::object{{"expectedRevision", rev + 100},
                                        {"config", json::object{{"heartbeatIntervalMs", 400}}}}))
          .ErrorCode(),
      "REVISION_CONFLICT");
  EXPECT_EQ(Call("PATCH", billing,
                 json::serialize(json::object{{"expectedRevision", rev}, {"shardCount", 8}}),
                 Body::kInvalid)
                .status,
            400);
  HttpResult patched;
  ASSERT_TRUE(WaitFor(
      [&] {
        patched = Call(
            "PATCH", billing,
            json::serialize(json::object{{"expectedRevision", Revision(billing)},
                                         {"config", json::object{{"heartbeatIntervalMs", 400}}}}));
        return patched.status == 200;
      },
      10s, "a patch at the current revision"))
      << patched.Describe();
  EXPECT_EQ(Call("POST", billing + "/members/b-1/fence", "").status, 200);
  EXPECT_EQ(Beat(b, "billing").ErrorCode(), "FENCED_MEMBER_EPOCH");
  EXPECT_EQ(Call("POST", billing + "/members/nobody/fence", "").ErrorCode(), "UNKNOWN_MEMBER_ID");
  HttpResult exported = Get(billing + "/export");
  ASSERT_EQ(exported.status, 200);
  EXPECT_EQ(Call("POST", "/v1/groups/restore", exported.body).status, 200);
  EXPECT_EQ(Call("POST", "/v1/groups/restore", R"({"kind":"other"})", Body::kInvalid).status, 400);

  // ── streams: describe, reshard (refused, then done), the new generation ──────────
  const std::string stream = "/v1/streams/" + std::string(kP);
  EXPECT_EQ(Get(stream).status, 200);
  EXPECT_EQ(Get("/v1/streams/nothing").ErrorCode(), "STREAM_NOT_FOUND");
  // The stream's routing and its routing lease (D4).
  EXPECT_EQ(Get(stream + "/routing?observedVersion=0").status, 200);
  EXPECT_EQ(Get(stream + "/routing?observedVersion=x").status, 400);
  EXPECT_EQ(Get("/v1/streams/nothing/routing").ErrorCode(), "STREAM_NOT_FOUND");
  auto patch_stream = [&](const json::object& body, Body intent = Body::kValid) {
    return Call("PATCH", stream, json::serialize(body), intent);
  };
  EXPECT_EQ(patch_stream({{"expectedLayoutRevision", Revision(stream)}, {"routingLeaseMs", 40000}})
                .status,
            200);
  EXPECT_EQ(
      patch_stream({{"expectedLayoutRevision", Revision(stream) + 3}, {"routingLeaseMs", 50000}})
          .ErrorCode(),
      "REVISION_CONFLICT");
  EXPECT_EQ(patch_stream({{"expectedLayoutRevision", Revision(stream)}}, Body::kInvalid).status,
            400);
  EXPECT_EQ(
      Call("PATCH", "/v1/streams/nothing",
           json::serialize(json::object{{"expectedLayoutRevision", 1}, {"routingLeaseMs", 40000}}))
          .ErrorCode(),
      "STREAM_NOT_FOUND");
  Consumer legacy("legacy");  // no "layout-v2": holds every reshard back (D5)
  ASSERT_EQ(Beat(legacy, "audit").status, 200);
  auto reshard = [&](int64_t revision, int shards) {
    return Post(stream + "/reshard", json::value(json::object{{"expectedLayoutRevision", revision},
                                                              {"shardCount", shards}}));
  };
  EXPECT_EQ(reshard(Revision(stream), 6).ErrorCode(), "CLIENTS_TOO_OLD");
  // A clean leave: its shards reported REVOKED, repeated until the answer says it is gone.
  ASSERT_TRUE(WaitFor(
      [&] {
        HttpResult l = Post(GroupPath(kP, "audit") + "/leave", json::value(legacy.LeaveRequest()));
        legacy.Apply(l);
        return l.status == 200 && JsonInt(l.json, "memberEpoch") == -1;
      },
      10s, "legacy has left"));
  EXPECT_EQ(reshard(Revision(stream) + 5, 6).ErrorCode(), "REVISION_CONFLICT");
  EXPECT_EQ(Post(stream + "/reshard", json::value(json::object{{"expectedLayoutRevision", 1}}),
                 Body::kInvalid)
                .status,
            400);
  EXPECT_EQ(Post("/v1/streams/nothing/reshard",
                 json::value(json::object{{"expectedLayoutRevision", 1}, {"shardCount", 2}}))
                .ErrorCode(),
            "STREAM_NOT_FOUND");
  ASSERT_EQ(reshard(Revision(stream), 6).status, 200);
  // Children wait for their parents: a-1's answers name them, with their keys (streams).
  ASSERT_TRUE(WaitFor(
      [&] {
        return Beat(a, "billing").status == 200 && a.last.as_object().contains("streams") &&
               !JsonInts(a.last, "pendingShards").empty();
      },
      10s, "a-1 is told the children and their keys"))
      << JsonString(a.last);
  HttpResult after = Get(billing);
  EXPECT_NE(after.body.find("WAITING_PARENTS"), std::string::npos) << after.body;
  EXPECT_NE(after.body.find("\"generations\""), std::string::npos) << after.body;
  EXPECT_EQ(Get(RoutingPath(kP, "billing", 0)).status, 200);

  // ── routes that do not exist, methods that are not allowed, bad names ───────────
  EXPECT_EQ(Get("/v2/nothing").ErrorCode(), "NOT_FOUND");
  EXPECT_EQ(Call("DELETE", "/healthz", "").ErrorCode(), "METHOD_NOT_ALLOWED");
  EXPECT_EQ(Get("/v1/groups/..%2F/g").status, 400);

  // ── delete ───────────────────────────────────────────────────────────────────────
  EXPECT_EQ(Call("DELETE", GroupPath(kP, "audit"), "").status, 400);  // expectedRevision missing
  EXPECT_EQ(Call("DELETE", GroupPath(kP, "audit") + "?expectedRevision=999999", "").ErrorCode(),
            "REVISION_CONFLICT");
  HttpResult deleted;
  ASSERT_TRUE(WaitFor(
      [&] {
        deleted = Call("DELETE",
                       GroupPath(kP, "audit") +
                           "?expectedRevision=" + std::to_string(Revision(GroupPath(kP, "audit"))),
                       "");
        return deleted.status == 200;
      },
      10s, "delete at the current revision"))
      << deleted.Describe();
  EXPECT_EQ(Get(GroupPath(kP, "audit")).ErrorCode(), "GROUP_NOT_FOUND");

  // ── Redis gone: 503 answers ─────────────────────────────────────────────────────
  redis_.Kill();
  EXPECT_EQ(Get("/readyz").status, 503);
  EXPECT_EQ(Get(billing).status, 503);
  EXPECT_EQ(Beat(a, "billing").status, 503);

  // Every documented operation answered at least once with a success.
  for (const OpenApiOperation& op : spec_->operations()) {
    const std::set<int>& seen = covered_[op.operation_id];
    EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [](int s) { return s < 300; }))
        << op.method << " " << op.path << " never answered 2xx in the scenario";
  }
  for (int status : {200, 201, 400, 401, 404, 405, 409, 413, 503}) {
    EXPECT_TRUE(statuses_.count(status)) << "status " << status << " never seen";
  }
}

}  // namespace
}  // namespace rsc::integration
