// The HTTP layer end to end over real sockets (run inside a private network namespace:
// scripts/netns.sh): HttpServer + Api + ShutdownGate + Metrics with a fake
// CoordinatorApi.

#include "server/http_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/protocol_json.h"
#include "http_test_util.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/shutdown_gate.h"
#include "server/ui_assets.h"
#include "support/thread_names.h"

namespace rsc {
namespace {

using testing_http::FakeApi;
using testing_http::MakeRequest;
using testing_http::RawConn;
using testing_http::RawResponse;

constexpr char kToken[] = "s3cret-token";
const std::string kHeartbeatBody = R"({"memberId":"m1","memberEpoch":0})";

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions opts = {}, std::string token = kToken) {
    TokenConfig tokens;
    tokens.admin.token = std::move(token);
    StartServerWith(std::move(opts), std::move(tokens));
  }
  void StartServerWith(HttpServerOptions opts, TokenConfig tokens) {
    opts.host = "127.0.0.1";
    opts.port = 0;
    ApiOptions api_opts;
    api_opts.tokens = std::move(tokens);
    api_opts.open_connections = [this] { return server_ ? server_->open_connections() : 0; };
    api_ = std::make_unique<Api>(fake_, gate_, metrics_, api_opts);
    server_ = std::make_unique<HttpServer>(opts, *api_);
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_NE(server_->port(), 0);
  }
  void SetUp() override {}
  void TearDown() override {
    fake_.Unblock();
    if (server_) server_->Stop();
  }

  // One request on a fresh connection.
  RawResponse Call(std::string_view method, std::string_view target, std::string_view body = {},
                   std::vector<std::string> headers = {}) {
    RawConn c(server_->port());
    EXPECT_TRUE(c.connected());
    EXPECT_TRUE(c.Send(MakeRequest(method, target, body, std::move(headers))));
    auto r = c.Read();
    EXPECT_TRUE(r.has_value()) << method << " " << target << ": no response";
    return r.value_or(RawResponse{});
  }

  std::string Auth() const { return std::string("Authorization: Bearer ") + kToken; }

  FakeApi fake_;
  ShutdownGate gate_;
  Metrics metrics_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
};

std::string ErrorCodeOf(const RawResponse& r) {
  auto e = ParseErrorBody(r.body);
  return e.ok() ? e->error : "<not an error body: " + r.body + ">";
}

// One IO thread per two CPUs, 1 or 2 (http_server.h says why), and it is the options' default.
TEST(HttpServerOptionsTest, IoThreadsDefaultToOnePerTwoCpusBetweenOneAndTwo) {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(DefaultIoThreads(), cpus >= 4 ? 2 : 1) << cpus << " CPUs";
  EXPECT_EQ(HttpServerOptions{}.io_threads, DefaultIoThreads());
}

// Operators tell the threads apart in `top -H`, perf and gdb (runbook: busy IO threads).
TEST_F(HttpServerTest, ItsThreadsAreNamedAndStopEndsThem) {
  HttpServerOptions opts;
  opts.io_threads = 2;
  StartServer(opts);
  std::map<std::string, int> names = rsc::testing::ThreadNames();
  EXPECT_EQ(names["rsc-http-io"], 2) << rsc::testing::DescribeThreadNames(names);
  // A pool thread names itself on its first task: the heartbeat's lead runs on one.
  RawConn c(server_->port());
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody)));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  names = rsc::testing::ThreadNames();
  EXPECT_GE(names["rsc-worker"], 1) << rsc::testing::DescribeThreadNames(names);
  server_->Stop();
  names = rsc::testing::ThreadNames();
  EXPECT_EQ(names.count("rsc-http-io") + names.count("rsc-worker"), 0u)
      << rsc::testing::DescribeThreadNames(names);
}

TEST_F(HttpServerTest, KeepAliveConnectionServesManyRequests) {
  StartServer();
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.Send(MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody)));
    auto r = c.Read();
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->Header("content-type"), "application/json");
    auto hb = ParseHeartbeatResponse(r->body);
    ASSERT_TRUE(hb.ok()) << r->body;
    EXPECT_EQ(hb->member_id.str(), "m1");
    ASSERT_TRUE(c.Send(MakeRequest("GET", "/healthz")));
    auto h = c.Read();
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
  }
  EXPECT_EQ(fake_.Locked([&] { return fake_.heartbeats.size(); }), 5u);
  EXPECT_EQ(server_->open_connections(), 1);
}

TEST_F(HttpServerTest, OversizedBodyGets413AndConnectionStaysUsable) {
  StartServer();
  RawConn c(server_->port());
  ASSERT_TRUE(c.connected());
  std::string big(2 << 20, 'x');  // 2 MiB > the 1 MiB default limit
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", big)));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(ErrorCodeOf(*r), "PAYLOAD_TOO_LARGE");
  EXPECT_NE(r->Header("connection"), "close");
  // The SAME connection serves the next request (SPEC R2.4).
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody)));
  auto next = c.Read();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(fake_.Locked([&] { return fake_.heartbeats.size(); }), 1u);
}

TEST_F(HttpServerTest, BodyAtTheLimitIsAccepted) {
  HttpServerOptions opts;
  opts.max_body_bytes = 4096;
  StartServer(opts);
  std::string body = kHeartbeatBody;
  body.insert(body.size() - 1, std::string(4096 - body.size(), ' '));
  ASSERT_EQ(body.size(), 4096u);
  EXPECT_EQ(Call("POST", "/v1/groups/orders/billing/heartbeat", body).status, 200);
  body.insert(1, " ");
  EXPECT_EQ(Call("POST", "/v1/groups/orders/billing/heartbeat", body).status, 413);
}

TEST_F(HttpServerTest, ChunkedBodyOverLimitGets413AndClose) {
  HttpServerOptions opts;
  opts.max_body_bytes = 1000;
  StartServer(opts);
  RawConn c(server_->port());
  std::string req =
      "POST /v1/groups/orders/billing/heartbeat HTTP/1.1\r\nHost: t\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) req += "200\r\n" + std::string(512, 'y') + "\r\n";
  req += "0\r\n\r\n";
  c.Send(req);  // may fail half-way once the server has answered; that is fine
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, ChunkedBodyWithinLimitWorks) {
  StartServer();
  RawConn c(server_->port());
  std::string req =
      "POST /v1/groups/orders/billing/heartbeat HTTP/1.1\r\nHost: t\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  std::string a = kHeartbeatBody.substr(0, 10), b = kHeartbeatBody.substr(10);
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%zx", a.size());
  req += std::string(hex) + "\r\n" + a + "\r\n";
  std::snprintf(hex, sizeof(hex), "%zx", b.size());
  req += std::string(hex) + "\r\n" + b + "\r\n0\r\n\r\n";
  ASSERT_TRUE(c.Send(req));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(HttpServerTest, ExpectContinue) {
  StartServer();
  RawConn c(server_->port());
  std::string head =
      "POST /v1/groups/orders/billing/heartbeat HTTP/1.1\r\nHost: t\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(kHeartbeatBody.size()) + "\r\n\r\n";
  ASSERT_TRUE(c.Send(head));
  auto interim = c.Read();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.Send(kHeartbeatBody));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  // Too large with Expect: answered at once (no body is sent), then closed.
  RawConn c2(server_->port());
  ASSERT_TRUE(
      c2.Send("POST /v1/groups/orders/billing/heartbeat HTTP/1.1\r\nHost: t\r\n"
              "Expect: 100-continue\r\nContent-Length: 5000000\r\n\r\n"));
  auto r2 = c2.Read();
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 413);
  EXPECT_TRUE(c2.WaitClosed());
}

TEST_F(HttpServerTest, MalformedHttpGets400AndClose) {
  StartServer();
  for (std::string junk : {std::string("GARBAGE\r\n\r\n"), std::string("GET / HTTP/9.9\r\n\r\n"),
                           std::string("GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n"),
                           std::string("POST /healthz HTTP/1.1\r\nContent-Length: x\r\n\r\n")}) {
    RawConn c(server_->port());
    ASSERT_TRUE(c.Send(junk));
    auto r = c.Read();
    ASSERT_TRUE(r) << junk;
    EXPECT_EQ(r->status, 400) << junk;
    EXPECT_EQ(ErrorCodeOf(*r), "INVALID_REQUEST");
    EXPECT_TRUE(c.WaitClosed()) << junk;
  }
}

TEST_F(HttpServerTest, HugeHeaderGets400) {
  StartServer();
  RawConn c(server_->port());
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nX-Big: " + std::string(64 << 10, 'a') + "\r\n\r\n"));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST_F(HttpServerTest, NotFoundAndMethodNotAllowed) {
  StartServer();
  auto nf = Call("GET", "/nope");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(ErrorCodeOf(nf), "NOT_FOUND");
  auto mna = Call("GET", "/v1/groups/orders/billing/heartbeat");
  EXPECT_EQ(mna.status, 405);
  EXPECT_EQ(ErrorCodeOf(mna), "METHOD_NOT_ALLOWED");
  EXPECT_EQ(mna.Header("allow"), "POST");
}

TEST_F(HttpServerTest, BadNamesAre400) {
  StartServer();
  auto r = Call("POST", "/v1/groups/ord%7Bers/billing/heartbeat", kHeartbeatBody);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ErrorCodeOf(r), "INVALID_REQUEST");
  EXPECT_NE(r.body.find("invalid stream name"), std::string::npos) << r.body;
  auto g = Call("GET", "/v1/groups/orders/bil:ling/routing");
  EXPECT_EQ(g.status, 400);
  EXPECT_NE(g.body.find("invalid group name"), std::string::npos) << g.body;
  EXPECT_TRUE(fake_.Locked([&] { return fake_.heartbeats.empty(); }));
}

TEST_F(HttpServerTest, InvalidBodiesAre400NamingTheField) {
  StartServer();
  auto r = Call("POST", "/v1/groups/orders/billing/heartbeat",
                R"({"memberId":"m1","memberEpoch":1,"ownedShards":[1,1]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("ownedShards: duplicate shard 1"), std::string::npos) << r.body;
  auto e = Call("POST", "/v1/groups/orders/billing/heartbeat", "{not json");
  EXPECT_EQ(e.status, 400);
  auto q = Call("GET", "/v1/groups/orders/billing/routing?observedVersion=-1");
  EXPECT_EQ(q.status, 400);
  EXPECT_NE(q.body.find("observedVersion"), std::string::npos);
  auto big = Call("GET", "/v1/groups/orders/billing/routing?observedVersion=99999999999999999999");
  EXPECT_EQ(big.status, 400);
}

TEST_F(HttpServerTest, HeartbeatLeaveAndRoutingReachTheService) {
  StartServer();
  EXPECT_EQ(
      Call("POST", "/v1/groups/orders:eu/billing/leave", R"({"memberId":"m9","memberEpoch":3})")
          .status,
      200);
  fake_.Locked([&] {
    ASSERT_EQ(fake_.heartbeats.size(), 1u);
    EXPECT_EQ(fake_.heartbeats[0].key.stream, "orders:eu");
    EXPECT_EQ(fake_.heartbeats[0].req.member_id.str(), "m9");
    EXPECT_EQ(fake_.heartbeats[0].req.member_epoch, -1);  // leave == heartbeat with -1
  });
  auto r = Call("GET", "/v1/groups/orders/billing/routing?observedVersion=42&lineage=a%2Bb");
  EXPECT_EQ(r.status, 200);
  auto routing = ParseRoutingResponse(r.body);
  ASSERT_TRUE(routing.ok()) << r.body;
  EXPECT_EQ(routing->shards.at(0).stream, "{orders:0}");
  fake_.Locked([&] {
    ASSERT_TRUE(fake_.last_routing);
    EXPECT_EQ(fake_.last_routing->observed_version, 42);
    EXPECT_EQ(fake_.last_routing->lineage, "a+b");
  });
  EXPECT_EQ(Call("GET", "/v1/groups/orders/billing/routing").status, 200);
  fake_.Locked([&] { EXPECT_EQ(fake_.last_routing->observed_version, 0); });
}

TEST_F(HttpServerTest, ServiceErrorsMapToStatusAndBody) {
  StartServer();
  fake_.Locked([&] {
    fake_.heartbeat_error = Error{ErrorCode::kFencedMemberEpoch, "epoch 2 < 3"};
  });
  auto r = Call("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody);
  EXPECT_EQ(r.status, 409);
  auto e = ParseErrorBody(r.body);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->error, "FENCED_MEMBER_EPOCH");
  EXPECT_EQ(e->message, "epoch 2 < 3");
  fake_.Locked([&] { fake_.heartbeat_error = Error{ErrorCode::kMetadataUnreadable, "bad"}; });
  EXPECT_EQ(Call("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody).status, 503);
}

TEST_F(HttpServerTest, AdminRoutesRequireBearerToken) {
  StartServer();
  auto none = Call("GET", "/v1/groups");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(ErrorCodeOf(none), "UNAUTHORIZED");
  EXPECT_EQ(none.Header("www-authenticate"), "Bearer");
  EXPECT_EQ(Call("GET", "/v1/groups", "", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/groups", "", {"Authorization: Bearer s3cret-tokenX"}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/groups", "", {"Authorization: Basic s3cret-token"}).status, 401);
  EXPECT_EQ(Call("GET", "/v1/groups", "", {"Authorization: Bearer"}).status, 401);
  auto ok = Call("GET", "/v1/groups", "", {Auth()});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"groups":[{"stream":"orders","group":"billing"}]})");
  EXPECT_EQ(Call("GET", "/v1/groups", "", {"authorization: bearer   s3cret-token  "}).status, 200);
  // Every admin route is guarded; client routes and probes are not.
  for (auto [m, t] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/groups"},
           {"GET", "/v1/groups/o/g"},
           {"PATCH", "/v1/groups/o/g"},
           {"DELETE", "/v1/groups/o/g?expectedRevision=1"},
           {"POST", "/v1/groups/o/g/members/m1/fence"},
           {"GET", "/v1/groups/o/g/export"},
           {"POST", "/v1/groups/restore"}}) {
    EXPECT_EQ(Call(m, t, "{}").status, 401) << m << " " << t;
  }
  EXPECT_EQ(Call("POST", "/v1/groups/o/g/heartbeat", kHeartbeatBody).status, 200);
  EXPECT_EQ(Call("GET", "/v1/groups/o/g/routing").status, 200);
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  EXPECT_EQ(Call("GET", "/readyz").status, 200);
  EXPECT_EQ(Call("GET", "/metrics").status, 200);
}

TEST_F(HttpServerTest, NoTokenConfiguredMeansOpenAdmin) {
  StartServer({}, "");
  EXPECT_EQ(Call("GET", "/v1/groups").status, 200);
}

// SPEC O4 over real sockets: the role table itself is tested in auth_test.cc; this checks
// what reaches the wire (status, body, headers, metrics) and that a refused request never
// reaches the service.
TEST_F(HttpServerTest, RolesAnswer401And403OnTheWire) {
  TokenConfig tokens;
  tokens.admin.token = kToken;
  tokens.monitor.token = "monitor-token-1";
  tokens.member.token = "member-token-1";
  StartServerWith({}, tokens);
  const std::string monitor = "Authorization: Bearer monitor-token-1";
  const std::string member = "Authorization: Bearer member-token-1";
  const std::string heartbeat = "/v1/groups/orders/billing/heartbeat";
  const std::string create = R"({"stream":"o","group":"g","shardCount":1})";

  EXPECT_EQ(Call("GET", "/v1/groups", "", {monitor}).status, 200);
  EXPECT_EQ(Call("GET", "/v1/groups/o/g", "", {monitor}).status, 200);
  EXPECT_EQ(Call("GET", "/metrics", "", {monitor}).status, 200);
  RawResponse forbidden = Call("POST", "/v1/groups", create, {monitor});
  EXPECT_EQ(forbidden.status, 403);
  EXPECT_EQ(ErrorCodeOf(forbidden), "FORBIDDEN");
  // 403 is not a challenge: the client authenticated; another token would not help it.
  EXPECT_EQ(forbidden.Header("www-authenticate"), "");
  EXPECT_NE(forbidden.body.find("the monitor token does not allow this"), std::string::npos)
      << forbidden.body;
  EXPECT_EQ(forbidden.body.find("monitor-token-1"), std::string::npos) << forbidden.body;
  EXPECT_EQ(Call("GET", "/v1/groups/o/g/export", "", {monitor}).status, 403);

  EXPECT_EQ(Call("POST", heartbeat, kHeartbeatBody, {member}).status, 200);
  EXPECT_EQ(Call("GET", "/v1/groups/o/g/routing", "", {member}).status, 200);
  EXPECT_EQ(Call("GET", "/v1/groups/o/g", "", {member}).status, 403);
  EXPECT_EQ(Call("GET", "/metrics", "", {member}).status, 403);
  RawResponse no_token = Call("POST", heartbeat, kHeartbeatBody);
  EXPECT_EQ(no_token.status, 401);
  EXPECT_EQ(ErrorCodeOf(no_token), "UNAUTHORIZED");
  EXPECT_EQ(no_token.Header("www-authenticate"), "Bearer");
  EXPECT_EQ(Call("POST", heartbeat, kHeartbeatBody, {monitor}).status, 403);
  EXPECT_EQ(Call("GET", "/metrics").status, 401);
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  EXPECT_EQ(Call("GET", "/readyz").status, 200);

  // The admin token is admitted everywhere, member endpoints included.
  EXPECT_EQ(Call("POST", "/v1/groups", create, {Auth()}).status, 201);
  EXPECT_EQ(Call("POST", heartbeat, kHeartbeatBody, {Auth()}).status, 200);
  EXPECT_EQ(Call("GET", "/metrics", "", {Auth()}).status, 200);

  // Only the two admitted heartbeats reached the service; the refused ones are counted.
  EXPECT_EQ(fake_.Locked([&] { return fake_.heartbeats.size(); }), 2u);
  RawResponse m = Call("GET", "/metrics", "", {monitor});
  for (const char* want : {
           R"(rsc_heartbeats_total{status="UNAUTHORIZED"} 1)",
           R"(rsc_heartbeats_total{status="FORBIDDEN"} 1)",
           R"(rsc_http_requests_total{route="create_group",status="403"} 1)",
           R"(rsc_http_requests_total{route="metrics",status="401"} 1)",
           R"(rsc_http_requests_total{route="heartbeat",status="401"} 1)",
       }) {
    EXPECT_NE(m.body.find(want), std::string::npos) << want;
  }
}

TEST_F(HttpServerTest, AdminEndpoints) {
  StartServer();
  fake_.Locked([&] {
    fake_.view.revision = 5;
    fake_.view.config.member_lease_ms = 30000;
    fake_.view.config.rebalance_timeout_ms = 30000;
  });
  auto created = Call("POST", "/v1/groups",
                      R"({"stream":"orders","group":"billing","shardCount":8})", {Auth()});
  EXPECT_EQ(created.status, 201);
  auto view = ParseGroupView(created.body);
  ASSERT_TRUE(view.ok()) << created.body;
  EXPECT_EQ(view->shard_count, 8);
  EXPECT_EQ(
      Call("POST", "/v1/groups", R"({"stream":"o","group":"g","shardCount":0})", {Auth()}).status,
      400);

  EXPECT_EQ(Call("GET", "/v1/groups/orders/billing", "", {Auth()}).status, 200);

  // Partial config: merged onto the CURRENT config (memberLeaseMs 30000), not defaults.
  auto patched = Call("PATCH", "/v1/groups/orders/billing",
                      R"({"expectedRevision":5,"config":{"rebalanceTimeoutMs":60000}})", {Auth()});
  EXPECT_EQ(patched.status, 200) << patched.body;
  fake_.Locked([&] {
    ASSERT_TRUE(fake_.last_patch && fake_.last_patch->config);
    EXPECT_EQ(fake_.last_patch->config->member_lease_ms, 30000);
    EXPECT_EQ(fake_.last_patch->config->rebalance_timeout_ms, 60000);
    EXPECT_EQ(fake_.last_patch->expected_revision, 5);
  });
  auto stale = Call("PATCH", "/v1/groups/orders/billing",
                    R"({"expectedRevision":4,"config":{"rebalanceTimeoutMs":60000}})", {Auth()});
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(ErrorCodeOf(stale), "REVISION_CONFLICT");
  EXPECT_EQ(Call("PATCH", "/v1/groups/orders/billing", R"({"expectedRevision":5,"shardCount":16})",
                 {Auth()})
                .status,
            200);

  auto del = Call("DELETE", "/v1/groups/orders/billing?expectedRevision=5", "", {Auth()});
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(del.body, R"({"stream":"orders","group":"billing","deleted":true})");
  fake_.Locked([&] { EXPECT_EQ(fake_.last_delete_revision, 5); });
  auto no_rev = Call("DELETE", "/v1/groups/orders/billing", "", {Auth()});
  EXPECT_EQ(no_rev.status, 400);
  EXPECT_NE(no_rev.body.find("expectedRevision"), std::string::npos);

  EXPECT_EQ(Call("POST", "/v1/groups/orders/billing/members/m-7/fence", "", {Auth()}).status, 200);
  fake_.Locked([&] { EXPECT_EQ(fake_.last_fenced, "m-7"); });

  auto exported = Call("GET", "/v1/groups/orders/billing/export", "", {Auth()});
  EXPECT_EQ(exported.status, 200);
  EXPECT_NE(exported.body.find("schemaVersion"), std::string::npos);
  EXPECT_EQ(Call("POST", "/v1/groups/restore", exported.body, {Auth()}).status, 200);
  fake_.Locked([&] { EXPECT_EQ(fake_.last_restore, exported.body); });
  EXPECT_EQ(Call("POST", "/v1/groups/restore", "", {Auth()}).status, 400);
}

TEST_F(HttpServerTest, TerminatingRefusesNewRequestsWhileInFlightOneCompletes) {
  StartServer();
  fake_.BlockHeartbeats();
  RawConn slow(server_->port());
  ASSERT_TRUE(
      slow.Send(MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody)));
  ASSERT_TRUE(fake_.WaitEntered(1));  // inside the service, holding a gate guard
  EXPECT_EQ(gate_.in_flight(), 1);

  gate_.BeginTerminate();
  for (auto [m, t] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/groups/orders/billing/heartbeat"},
           {"POST", "/v1/groups/orders/billing/leave"},
           {"GET", "/v1/groups/orders/billing/routing"},
           {"POST", "/v1/groups"},
           {"PATCH", "/v1/groups/orders/billing"},
           {"DELETE", "/v1/groups/orders/billing?expectedRevision=1"},
           {"POST", "/v1/groups/orders/billing/members/m/fence"},
           {"POST", "/v1/groups/restore"}}) {
    auto r = Call(m, t, kHeartbeatBody, {Auth()});
    EXPECT_EQ(r.status, 503) << m << " " << t;
    EXPECT_EQ(ErrorCodeOf(r), "COORDINATOR_TERMINATING") << m << " " << t;
  }
  auto ready = Call("GET", "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ErrorCodeOf(ready), "COORDINATOR_TERMINATING");
  EXPECT_EQ(Call("GET", "/healthz").status, 200);                                 // still up
  EXPECT_EQ(Call("GET", "/v1/groups/orders/billing", "", {Auth()}).status, 200);  // reads ok
  auto metrics = Call("GET", "/metrics");
  EXPECT_NE(metrics.body.find("rsc_coordinator_terminating 1"), std::string::npos);

  // The in-flight request completes normally and WaitIdle then returns.
  EXPECT_FALSE(gate_.WaitIdle(std::chrono::steady_clock::now()));
  fake_.Unblock();
  auto done = slow.Read();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200);
  EXPECT_TRUE(gate_.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  EXPECT_EQ(fake_.Locked([&] { return fake_.heartbeats.size(); }), 1u);
}

// A heartbeat waiting for its group's batch holds no worker (issue 14): with one worker,
// three heartbeats wait at once and a describe is answered meanwhile; each is answered
// from another thread, holds its gate guard until then (S1), and is counted once.
TEST_F(HttpServerTest, AQueuedHeartbeatHoldsNoWorkerAndIsAnsweredFromAnotherThread) {
  HttpServerOptions opts;
  opts.worker_threads = 1;
  StartServer(opts);
  fake_.DeferHeartbeats();
  std::vector<std::unique_ptr<RawConn>> conns;
  for (const char* id : {"m1", "m2", "m3"}) {
    conns.push_back(std::make_unique<RawConn>(server_->port()));
    ASSERT_TRUE(conns.back()->Send(
        MakeRequest("POST", "/v1/groups/orders/billing/heartbeat",
                    std::string(R"({"memberId":")") + id + R"(","memberEpoch":0})")));
  }
  ASSERT_TRUE(fake_.WaitDeferred(3)) << "the one worker was held by a waiting heartbeat";
  EXPECT_EQ(gate_.in_flight(), 3);
  EXPECT_EQ(Call("GET", "/v1/groups/orders/billing", "", {Auth()}).status, 200);

  std::thread answerer([&] { EXPECT_EQ(fake_.AnswerDeferred(), 3u); });
  answerer.join();
  for (size_t i = 0; i < conns.size(); ++i) {
    auto r = conns[i]->Read();
    ASSERT_TRUE(r) << "heartbeat " << i << " was not answered";
    EXPECT_EQ(r->status, 200);
    auto hb = ParseHeartbeatResponse(r->body);
    ASSERT_TRUE(hb.ok()) << r->body;
    EXPECT_EQ(hb->member_id.str(), "m" + std::to_string(i + 1));
  }
  EXPECT_TRUE(gate_.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  auto metrics = Call("GET", "/metrics");
  EXPECT_NE(metrics.body.find(R"(rsc_heartbeats_total{status="OK"} 3)"), std::string::npos)
      << metrics.body;
}

// The web console's files (SPEC O3, server/ui_assets.h): public, answered on the IO thread
// (so even with every worker blocked), revalidated with 304 through the real serializer,
// served while terminating, counted under route="ui".
TEST_F(HttpServerTest, ConsoleFilesArePublicInlineAndRevalidated) {
  HttpServerOptions opts;
  opts.worker_threads = 1;
  StartServer(opts);
  fake_.BlockHeartbeats();
  RawConn busy(server_->port());
  ASSERT_TRUE(busy.Send(MakeRequest("POST", "/v1/groups/o/g/heartbeat", kHeartbeatBody)));
  ASSERT_TRUE(fake_.WaitEntered(1));  // the only worker is taken

  auto index = Call("GET", "/ui/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.Header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(index.Header("content-security-policy"), kUiContentSecurityPolicy);
  EXPECT_EQ(index.body, std::string(FindUiAsset("index.html")->bytes));
  const std::string etag(FindUiAsset("app.js")->etag);
  auto cached = Call("GET", "/ui/app.js", "", {"If-None-Match: " + etag});
  EXPECT_EQ(cached.status, 304);
  EXPECT_TRUE(cached.body.empty());
  EXPECT_EQ(cached.Header("etag"), etag);
  auto bare = Call("GET", "/ui");
  EXPECT_EQ(bare.status, 301);
  EXPECT_EQ(bare.Header("location"), "/ui/");
  EXPECT_EQ(Call("GET", "/ui/../metrics").status, 404);

  fake_.Unblock();
  ASSERT_TRUE(busy.Read());
  auto post = Call("POST", "/ui/");  // only GETs are inline: this one waited for a worker
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.Header("allow"), "GET");
  EXPECT_EQ(Call("GET", "/v1/groups").status, 401);  // the data stays behind the token
  gate_.BeginTerminate();
  EXPECT_EQ(Call("GET", "/ui/style.css").status, 200);  // not gated
  auto m = Call("GET", "/metrics");
  for (const char* want : {R"(rsc_http_requests_total{route="ui",status="200"} 2)",
                           R"(rsc_http_requests_total{route="ui",status="304"} 1)",
                           R"(rsc_http_requests_total{route="ui",status="301"} 1)",
                           R"(rsc_http_requests_total{route="ui",status="404"} 1)"}) {
    EXPECT_NE(m.body.find(want), std::string::npos) << "missing: " << want << "\n" << m.body;
  }
}

TEST_F(HttpServerTest, HealthAndReadiness) {
  StartServer();
  auto h = Call("GET", "/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, R"({"status":"ok"})");
  auto r = Call("GET", "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"ready"})");
  fake_.Locked([&] {
    fake_.ready_error = Error{ErrorCode::kRedisUnavailable, "redis: connection refused"};
  });
  auto nr = Call("GET", "/readyz");
  EXPECT_EQ(nr.status, 503);
  EXPECT_EQ(ErrorCodeOf(nr), "REDIS_UNAVAILABLE");
  EXPECT_NE(nr.body.find("connection refused"), std::string::npos);
  fake_.Locked([&] { fake_.ready_error = Error{ErrorCode::kInternal, "incompatible"}; });
  EXPECT_EQ(Call("GET", "/readyz").status, 503);  // any failure is "not ready"
}

TEST_F(HttpServerTest, MetricsExposition) {
  StartServer();
  Call("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody);
  Call("POST", "/v1/groups/orders/billing/heartbeat", "{}");
  Call("GET", "/nope");
  metrics_.OnRegression("ahead");
  metrics_.SetMemberHeartbeatAge(GroupKey{"orders", "billing"}, 1.5);
  auto m = Call("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  for (const char* want : {
           R"(rsc_http_requests_total{route="heartbeat",status="200"} 1)",
           R"(rsc_http_requests_total{route="heartbeat",status="400"} 1)",
           R"(rsc_http_requests_total{route="unmatched",status="404"} 1)",
           R"(rsc_heartbeats_total{status="OK"} 1)",
           R"(rsc_heartbeats_total{status="INVALID_REQUEST"} 1)",
           R"(rsc_http_request_duration_seconds_bucket{route="heartbeat",le="+Inf"} 2)",
           R"(rsc_metadata_version_regressions_total{kind="ahead"} 1)",
           R"(rsc_member_heartbeat_age_seconds{group="billing",stream="orders"} 1.5)",
           "rsc_coordinator_terminating 0",
           "# TYPE rsc_mutex_wait_seconds histogram",
           "rsc_revision_conflicts_total 0",
           "rsc_client_version_ahead_total 0",
           "rsc_correction_rounds_active 0",
           "rsc_metadata_unreadable_total 0",
           "rsc_metadata_missing_total 0",
           "rsc_redis_compat_failures_total 0",
           "rsc_script_reloads_total 0",
           "rsc_lock_timeouts_total 0",
           "rsc_members_expired_total 0",
           "rsc_members_fenced_total 0",
           "rsc_ticks_total 0",
       }) {
    EXPECT_NE(m.body.find(want), std::string::npos) << "missing: " << want << "\n" << m.body;
  }
  // At least the scraping connection is open; earlier ones may not be reaped yet.
  size_t at = m.body.find("\nrsc_http_open_connections ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stod(m.body.substr(at + 27)), 1.0);
}

TEST_F(HttpServerTest, ServerMadeRepliesAreCounted) {
  HttpServerOptions opts;
  opts.max_body_bytes = 10;
  StartServer(opts);
  EXPECT_EQ(Call("POST", "/v1/groups/o/g/heartbeat", kHeartbeatBody).status, 413);
  RawConn c(server_->port());
  ASSERT_TRUE(c.Send("BAD\r\n\r\n"));
  ASSERT_TRUE(c.Read());
  auto m = Call("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(rsc_http_requests_total{route="http_protocol",status="413"} 1)"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find(R"(rsc_http_requests_total{route="http_protocol",status="400"} 1)"),
            std::string::npos);
}

TEST_F(HttpServerTest, IdleConnectionIsClosedAfterTimeout) {
  HttpServerOptions opts;
  opts.idle_timeout = std::chrono::milliseconds(200);
  StartServer(opts);
  RawConn c(server_->port(), std::chrono::seconds(10));
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/healthz")));
  ASSERT_TRUE(c.Read());
  EXPECT_TRUE(c.WaitClosed());  // well before the 10 s client deadline
}

// Issue 8: a header whose body never completes held the connection for idle_timeout
// (120 s). The body has its own bound, for the whole body however it trickles in: 408
// REQUEST_TIMEOUT, connection closed, nothing handled; the server keeps serving others.
TEST_F(HttpServerTest, BodyNotCompleteInTimeGets408AndClose) {
  HttpServerOptions opts;
  opts.body_timeout = std::chrono::milliseconds(300);
  StartServer(opts);
  RawConn c(server_->port(), std::chrono::seconds(10));
  ASSERT_TRUE(c.connected());
  const std::string body = kHeartbeatBody;
  std::string req = MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", body);
  req.resize(req.size() - body.size() + 3);  // the header and 3 bytes of the body
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.Send(req));
  // One more byte now and then: each read succeeds, the body as a whole is late.
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a slow client, by design
    (void)c.Send(std::string(1, body[3 + static_cast<size_t>(i)]));
  }
  auto r = c.Read();
  ASSERT_TRUE(r) << "no 408";
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(ErrorCodeOf(*r), "REQUEST_TIMEOUT");
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_LT(waited, std::chrono::seconds(5)) << "bounded by body_timeout, not idle_timeout";
  EXPECT_EQ(fake_.Locked([&] { return fake_.heartbeats.size(); }), 0u) << "nothing handled";
  // A body that completes within the bound is served as usual.
  RawResponse ok = Call("POST", "/v1/groups/orders/billing/heartbeat", kHeartbeatBody);
  EXPECT_EQ(ok.status, 200);
  RawResponse m = Call("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(rsc_http_requests_total{route="http_protocol",status="408"} 1)"),
            std::string::npos)
      << m.body;
}

// A body timeout longer than the idle timeout: a body that stalls gets its 408 at the body
// timeout, not a bare close at the idle timeout (the per-read backstop).
TEST_F(HttpServerTest, ABodyTimeoutLongerThanTheIdleTimeoutStillEndsIn408) {
  HttpServerOptions opts;
  opts.idle_timeout = std::chrono::milliseconds(200);
  opts.body_timeout = std::chrono::milliseconds(800);
  StartServer(opts);
  RawConn c(server_->port(), std::chrono::seconds(10));
  ASSERT_TRUE(c.connected());
  const std::string body = kHeartbeatBody;
  std::string req = MakeRequest("POST", "/v1/groups/orders/billing/heartbeat", body);
  req.resize(req.size() - body.size() + 3);  // the header and 3 bytes of the body, then nothing
  ASSERT_TRUE(c.Send(req));
  auto r = c.Read();
  ASSERT_TRUE(r) << "closed without a 408";
  EXPECT_EQ(r->status, 408);
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  StartServer();
  RawConn c(server_->port());
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/healthz", "", {"Connection: close"})));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, Http10WithoutKeepAliveCloses) {
  StartServer();
  RawConn c(server_->port());
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, StopClosesIdleConnectionsAndFinishesInFlight) {
  StartServer();
  RawConn idle(server_->port());
  ASSERT_TRUE(idle.Send(MakeRequest("GET", "/healthz")));
  ASSERT_TRUE(idle.Read());
  fake_.BlockHeartbeats();
  RawConn busy(server_->port());
  ASSERT_TRUE(busy.Send(MakeRequest("POST", "/v1/groups/o/g/heartbeat", kHeartbeatBody)));
  ASSERT_TRUE(fake_.WaitEntered(1));
  auto stopped = std::async(std::launch::async, [&] { server_->Stop(std::chrono::seconds(10)); });
  EXPECT_TRUE(idle.WaitClosed());
  fake_.Unblock();
  auto r = busy.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("connection"), "close");
  stopped.get();
  EXPECT_EQ(server_->open_connections(), 0);
}

// Stop's drain covers a heartbeat answered later from its batch: the connection is held
// until the answer, which is written (with Connection: close) before Stop returns.
TEST_F(HttpServerTest, StopWaitsForAQueuedHeartbeatsAnswer) {
  StartServer();
  fake_.DeferHeartbeats();
  RawConn busy(server_->port());
  ASSERT_TRUE(busy.Send(MakeRequest("POST", "/v1/groups/o/g/heartbeat", kHeartbeatBody)));
  ASSERT_TRUE(fake_.WaitDeferred(1));
  auto stopped = std::async(std::launch::async, [&] { server_->Stop(std::chrono::seconds(10)); });
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "Stop returned while a heartbeat was waiting for its answer";
  EXPECT_EQ(fake_.AnswerDeferred(), 1u);
  auto r = busy.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("connection"), "close");
  stopped.get();
  EXPECT_EQ(server_->open_connections(), 0);
}

TEST_F(HttpServerTest, ManyConcurrentClients) {
  StartServer();
  constexpr int kClients = 32;
  std::vector<std::future<int>> results;
  for (int i = 0; i < kClients; ++i) {
    results.push_back(std::async(std::launch::async, [this] {
      RawConn c(server_->port());
      int ok = 0;
      for (int k = 0; k < 20; ++k) {
        if (!c.Send(MakeRequest("POST", "/v1/groups/o/g/heartbeat", kHeartbeatBody))) break;
        auto r = c.Read();
        if (r && r->status == 200) ++ok;
      }
      return ok;
    }));
  }
  for (auto& f : results) EXPECT_EQ(f.get(), 20);
}

// A handler's HandleAsync that throws before answering gets the same 500 as Handle, and
// the connection serves the next request; one that answers later from another thread is
// answered then.
TEST(HttpServerAsync, AThrowingHandlerIs500AndALateAnswerIsWritten) {
  class Handler : public HttpHandler {
   public:
    HttpResponse Handle(const HttpRequest&) override { return HttpResponse{}; }
    void HandleAsync(const HttpRequest& req, Done done, const Spawn&) override {
      if (req.target == "/throw") throw std::runtime_error("boom");
      std::lock_guard<std::mutex> lock(mu);
      later = std::move(done);
      cv.notify_all();
    }
    std::mutex mu;
    std::condition_variable cv;
    Done later;  // guarded by mu
  } handler;
  HttpServerOptions opts;
  opts.worker_threads = 1;
  HttpServer server(opts, handler);
  ASSERT_TRUE(server.Start().ok());
  RawConn c(server.port());
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/throw", "")));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/later", "")));
  HttpHandler::Done done;
  {
    std::unique_lock<std::mutex> lock(handler.mu);
    ASSERT_TRUE(
        handler.cv.wait_for(lock, std::chrono::seconds(10), [&] { return !!handler.later; }));
    done = std::move(handler.later);
  }
  std::thread([&] {
    HttpResponse resp;
    resp.status = 202;
    resp.body = "late";
    done(std::move(resp));
  }).join();
  r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  EXPECT_EQ(r->body, "late");
}

// A request still queued for a worker when Stop begins is answered 503 without running:
// Stop's wait for the workers covers the handlers already running, not every request queued
// behind them (during a Redis outage each would take a Redis timeout).
TEST(HttpServerStop, ARequestQueuedForAWorkerWhenStopBeginsIsNotRun) {
  class Handler : public HttpHandler {
   public:
    HttpResponse Handle(const HttpRequest&) override { return HttpResponse{}; }
    void HandleAsync(const HttpRequest& req, Done done, const Spawn&) override {
      std::unique_lock<std::mutex> lock(mu);
      ++calls[req.target];
      cv.notify_all();
      if (req.target == "/slow") cv.wait_for(lock, std::chrono::seconds(10), [&] { return open; });
      lock.unlock();
      done(HttpResponse{});
    }
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, int> calls;  // guarded by mu
    bool open = false;                 // guarded by mu
  } handler;
  HttpServerOptions opts;
  opts.worker_threads = 1;
  HttpServer server(opts, handler);
  ASSERT_TRUE(server.Start().ok());
  RawConn running(server.port());
  ASSERT_TRUE(running.Send(MakeRequest("GET", "/slow", "")));
  {
    std::unique_lock<std::mutex> lock(handler.mu);
    ASSERT_TRUE(handler.cv.wait_for(lock, std::chrono::seconds(10),
                                    [&] { return handler.calls["/slow"] == 1; }));
  }
  RawConn queued(server.port());  // the only worker is busy: this one waits in the pool
  ASSERT_TRUE(queued.Send(MakeRequest("GET", "/queued", "")));
  auto stopped = std::async(std::launch::async, [&] { server.Stop(std::chrono::milliseconds(0)); });
  // Stop has begun once the listener is closed (it marks the server stopping first).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (RawConn(server.port()).connected()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "Stop never closed the listener";
    std::this_thread::yield();
  }
  {
    std::lock_guard<std::mutex> lock(handler.mu);
    handler.open = true;
    handler.cv.notify_all();
  }
  stopped.get();
  std::lock_guard<std::mutex> lock(handler.mu);
  EXPECT_EQ(handler.calls["/queued"], 0) << "a request queued before Stop ran after it began";
}

TEST(HttpServerStart, BindFailureIsReported) {
  FakeApi fake;
  ShutdownGate gate;
  Metrics metrics;
  Api api(fake, gate, metrics);
  HttpServerOptions opts;
  opts.host = "203.0.113.1";  // TEST-NET-3: not a local address, bind fails
  HttpServer server(opts, api);
  Status s = server.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("203.0.113.1"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace rsc
