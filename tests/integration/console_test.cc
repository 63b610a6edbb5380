// Level 2: the web console (SPEC O3, docs/console.md) loaded in a real headless Chromium
// against a real coordinator and redis-server, with a real group whose members heartbeat:
// what the page shows (groups, members with epochs and leases, shards with owner, state
// and lag, correction rounds, reshard progress), that it refreshes by itself, that a wrong
// or missing token shows the 401 message and no data, and the /ui responses themselves
// (public, typed, CSP, counted under route="ui").
//
// Assertions read the DOM Chromium prints after the page's scripts ran (--dump-dom): rows
// carry data-* attributes (data-member, data-shard, data-state, data-owner, data-group) for
// that. A failure prints the DOM. Needs `chromium` (scripts/bootstrap.sh installs it).
//
// The page's reactions to answers a healthy coordinator does not give on demand (a refresh
// that fails after a good one, 403, markup in server text) are checked against a scripted
// API: the real /ui files (ServeUi) on the real HttpServer, with canned JSON for /v1.
//
// RSC_CONSOLE_SCREENSHOT=<file.png> makes ReshardProgressAndLiveRefresh also write a
// screenshot of the page it checked (scripts/console-screenshot.sh, docs/console.png).

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>

#include "integration/harness.h"
#include "server/http_server.h"
#include "server/ui_assets.h"
#include "support/browser.h"

namespace rsc::integration {
namespace {

using rsc::testing::HeadlessBrowser;
using rsc::testing::ProcessRun;

constexpr const char* kP = "orders";
constexpr const char* kG = "billing";
constexpr const char* kToken = "console-test-token";

// The text of the first element that starts with `open` (e.g. `<tr data-shard="3"`), up to
// its closing `</tag>`; "" when there is none. Rows hold no nested element of their own tag.
std::string Element(const std::string& dom, const std::string& open, const std::string& tag) {
  const size_t at = dom.find(open);
  if (at == std::string::npos) return "";
  const size_t end = dom.find("</" + tag + ">", at);
  return end == std::string::npos ? dom.substr(at) : dom.substr(at, end - at);
}

std::string Attr(const std::string& name, const std::string& value) {
  return name + "=\"" + value + "\"";
}

// `<td class="num lag">3</td>`: a cell with this class and exactly this text.
std::string Cell(const std::string& cls, const std::string& text) {
  return "class=\"" + cls + "\">" + text + "</td>";
}

// Leases far longer than a browser run, even on a loaded machine: the members' shards must
// not move between the view the test reads and the page the browser draws.
Config LongLeases() { return Config{1000, 60000, 50000, 60000}; }

class ConsoleTest : public LiveCoordinatorTest {
 protected:
  int64_t TickMs() const override { return 100; }
  std::vector<std::string> ExtraArgs() const override { return {"--admin-token", kToken}; }

  HttpClient::Headers Auth() const { return {{"Authorization", std::string("Bearer ") + kToken}}; }

  json::value View() {
    HttpResult r = http_->Get(GroupPath(kP, kG), Auth());
    EXPECT_EQ(r.status, 200) << r.Describe();
    return r.json;
  }

  void BeatAll() {
    for (Consumer& c : members_) Beat(*http_, c, kP, kG);
  }

  // Three members join and heartbeat until every shard of the group is ASSIGNED to one.
  ::testing::AssertionResult JoinMembers() {
    for (const char* id : {"console-a", "console-b", "console-c"}) {
      members_.emplace_back(id);
      members_.back().features = {"layout-v2"};  // so the stream may be resharded (D5)
    }
    return WaitFor(
        [&] {
          BeatAll();
          const json::value view = View();
          if (!view.is_object()) return false;
          for (const json::value& s : view.at("shards").as_array()) {
            if (JsonStr(s, "state") != "ASSIGNED") return false;
          }
          return true;
        },
        20s, "every shard ASSIGNED to one of three members");
  }

  std::string ShardKey(const json::value& view, int64_t id) {
    for (const json::value& s : view.at("shards").as_array()) {
      if (JsonInt(s, "id") == id) return JsonStr(s, "stream");
    }
    ADD_FAILURE() << "no shard " << id << " in " << JsonString(view);
    return "";
  }

  // `count` entries on shard `id`, the first `delivered` of them read (not acknowledged) by
  // the shard's owner, as its reader would: lag count - delivered, pending delivered.
  void Backlog(const json::value& view, int64_t id, int count, int delivered) {
    const std::string key = ShardKey(view, id);
    for (int i = 0; i < count; ++i) {
      ASSERT_NE(cli_->Run({"XADD", key, "*", "k", std::to_string(i)}).type, CliReply::Type::kError);
    }
    if (delivered > 0) {
      CliReply read = cli_->Run({"XREADGROUP", "GROUP", kG, "reader", "COUNT",
                                 std::to_string(delivered), "STREAMS", key, ">"});
      ASSERT_EQ(read.type, CliReply::Type::kArray) << read.ToString();
    }
  }

  std::string Url(const std::string& fragment) const {
    return "http://127.0.0.1:" + std::to_string(coord_->Port()) + "/ui/" + fragment;
  }

  // The page's DOM after `virtual_time` of scripts; the test fails (with the browser's
  // output) when Chromium does not run, fails or prints no page.
  std::string Browse(const std::string& fragment,
                     std::chrono::milliseconds virtual_time = std::chrono::seconds(3)) {
    BeatAll();  // members stay live while the browser runs
    ProcessRun run = browser_.DumpDom(Url(fragment), virtual_time);
    const bool ok =
        run.exit_code == 0 && !run.timed_out && run.out.find("</html>") != std::string::npos;
    EXPECT_TRUE(ok) << "chromium " << browser_.path() << " on " << Url(fragment) << ":\n"
                    << run.Describe(20000);
    return run.out;
  }

  HeadlessBrowser browser_;
  std::vector<Consumer> members_;
};

TEST_F(ConsoleTest, GroupPageShowsMembersShardsOwnersAndLag) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 8, LongLeases(), Auth()));
  ASSERT_TRUE(JoinMembers());
  json::value view = View();
  ASSERT_NO_FATAL_FAILURE(Backlog(view, 0, 5, 2));  // shard 0: lag 3, pending 2
  view = View();

  const std::string dom = Browse("#group=orders%2Fbilling&token=" + std::string(kToken));
  const std::string body = Element(dom, "<body", "body");
  ASSERT_NE(body.find(Attr("data-state", "ready")), std::string::npos) << dom;
  EXPECT_NE(body.find(Attr("data-view", "group")), std::string::npos) << dom;
  EXPECT_NE(dom.find("<h2>orders<span class=\"muted\"> / </span>billing</h2>"), std::string::npos)
      << dom;
  // The token came from the address: it is never written into the page.
  EXPECT_EQ(dom.find(kToken), std::string::npos) << dom;

  // Members: id, epoch, how many shards each owns, a running lease.
  std::map<std::string, int> owned;
  for (const json::value& s : view.at("shards").as_array()) ++owned[JsonStr(s, "owner")];
  ASSERT_EQ(view.at("members").as_array().size(), 3u);
  for (const json::value& m : view.at("members").as_array()) {
    const std::string id = JsonStr(m, "memberId");
    const std::string row = Element(dom, "<tr " + Attr("data-member", id), "tr");
    ASSERT_FALSE(row.empty()) << "no row for member " << id << ":\n" << dom;
    EXPECT_NE(row.find(Cell("member", id)), std::string::npos) << row;
    EXPECT_NE(row.find(Cell("num epoch", std::to_string(JsonInt(m, "memberEpoch")))),
              std::string::npos)
        << row;
    EXPECT_NE(row.find(Cell("num owned", std::to_string(owned[id]))), std::string::npos) << row;
    EXPECT_NE(row.find("class=\"leasebar\""), std::string::npos) << row;
    EXPECT_EQ(row.find("expired"), std::string::npos) << row;
  }
  // Shards: every one with its state and owner, shard 0 with its backlog.
  for (const json::value& s : view.at("shards").as_array()) {
    const std::string id = std::to_string(JsonInt(s, "id"));
    const std::string row = Element(dom, "<tr " + Attr("data-shard", id), "tr");
    ASSERT_FALSE(row.empty()) << "no row for shard " << id << ":\n" << dom;
    EXPECT_NE(row.find(Attr("data-state", "ASSIGNED")), std::string::npos) << row;
    EXPECT_NE(row.find(Attr("data-owner", JsonStr(s, "owner"))), std::string::npos) << row;
    EXPECT_NE(row.find(Cell("owner", JsonStr(s, "owner"))), std::string::npos) << row;
    EXPECT_NE(row.find("state-assigned"), std::string::npos) << row;  // the coloured badge
  }
  const std::string shard0 = Element(dom, "<tr " + Attr("data-shard", "0"), "tr");
  EXPECT_NE(shard0.find(Cell("num lag", "3")), std::string::npos) << shard0;
  EXPECT_NE(shard0.find(Cell("num pending", "2")), std::string::npos) << shard0;
  EXPECT_NE(dom.find("<div class=\"card lag\"><div class=\"label\">Lag</div>"
                     "<div class=\"value\">3</div>"),
            std::string::npos)
      << dom;
  // No correction round, no reshard; the time of the data is shown.
  EXPECT_NE(Element(dom, "<p id=\"round\"", "p").find(Attr("data-active", "false")),
            std::string::npos)
      << dom;
  EXPECT_NE(Element(dom, "<p id=\"reshard-summary\"", "p").find(Attr("data-in-progress", "false")),
            std::string::npos)
      << dom;
  EXPECT_NE(Element(dom, "<span id=\"updated\"", "span").find("updated "), std::string::npos)
      << dom;
}

TEST_F(ConsoleTest, GroupListSummarisesEachGroup) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 8, LongLeases(), Auth()));
  ASSERT_EQ(http_
                ->Post("/v1/groups", json::value(json::object{{"stream", kP}, {"group", "audit"}}),
                       Auth())
                .status,
            201);
  ASSERT_TRUE(JoinMembers());
  ASSERT_NO_FATAL_FAILURE(Backlog(View(), 3, 4, 1));  // lag 3, pending 1

  const std::string dom = Browse("#token=" + std::string(kToken));
  ASSERT_NE(dom.find(Attr("data-view", "groups")), std::string::npos) << dom;
  const std::string billing = Element(dom, "<tr " + Attr("data-group", "orders/billing"), "tr");
  ASSERT_FALSE(billing.empty()) << dom;
  EXPECT_NE(billing.find("href=\"#group=orders%2Fbilling\""), std::string::npos) << billing;
  EXPECT_NE(billing.find(Cell("num members", "3")), std::string::npos) << billing;
  EXPECT_NE(billing.find(Cell("num shards", "8")), std::string::npos) << billing;
  EXPECT_NE(billing.find(Cell("num lag", "3")), std::string::npos) << billing;
  EXPECT_NE(billing.find(Cell("num pending", "1")), std::string::npos) << billing;
  // The second group of the stream: no member, every shard unassigned, nothing delivered yet.
  const std::string audit = Element(dom, "<tr " + Attr("data-group", "orders/audit"), "tr");
  ASSERT_FALSE(audit.empty()) << dom;
  EXPECT_NE(audit.find(Cell("num members", "0")), std::string::npos) << audit;
  EXPECT_NE(audit.find(Cell("num lag", "4")), std::string::npos) << audit;
  EXPECT_NE(audit.find(Attr("data-state", "UNASSIGNED")), std::string::npos) << audit;
}

TEST_F(ConsoleTest, WrongOrMissingTokenShowsTheRefusalAndNoData) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4, LongLeases(), Auth()));
  for (const std::string fragment : {"#token=wrong-token", "#group=orders%2Fbilling&token=nope"}) {
    const std::string dom = Browse(fragment);
    const std::string banner = Element(dom, "<div id=\"banner\"", "div");
    EXPECT_NE(banner.find(Attr("data-code", "UNAUTHORIZED")), std::string::npos) << dom;
    EXPECT_NE(banner.find("401 UNAUTHORIZED"), std::string::npos) << banner;
    EXPECT_NE(banner.find("The token entered is not accepted"), std::string::npos) << banner;
    EXPECT_NE(Element(dom, "<body", "body").find(Attr("data-state", "error")), std::string::npos)
        << dom;
    EXPECT_EQ(dom.find("data-group="), std::string::npos) << dom;
    EXPECT_EQ(dom.find("data-shard="), std::string::npos) << dom;
    EXPECT_EQ(dom.find("wrong-token"), std::string::npos) << dom;
  }
  const std::string none = Browse("");
  EXPECT_NE(Element(none, "<div id=\"banner\"", "div").find("It needs a token"), std::string::npos)
      << none;
}

TEST_F(ConsoleTest, ReshardProgressAndLiveRefresh) {
  // A short routing lease: the reshard seals its parents one routing lease + 1 s after it.
  Config config = LongLeases();
  config.routing_lease_ms = 500;
  config.routing_refresh_ms = 200;
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 16, config, Auth()));
  ASSERT_TRUE(JoinMembers());
  json::value view = View();
  // Some backlog, as a screenshot of a working group would have.
  for (int s = 0; s < 16; ++s) {
    ASSERT_NO_FATAL_FAILURE(Backlog(view, s, 3 + (s * 7) % 12, s % 5 == 0 ? 2 : 0));
  }
  // Reshard 16 -> 24. Nobody reads the parents to their seal, so the children wait.
  HttpResult stream = http_->Get("/v1/streams/orders", Auth());
  ASSERT_EQ(stream.status, 200) << stream.Describe();
  HttpResult reshard = http_->Post(
      "/v1/streams/orders/reshard",
      json::value(json::object{{"expectedLayoutRevision", JsonInt(stream.json, "revision")},
                               {"shardCount", 24}}),
      Auth());
  ASSERT_EQ(reshard.status, 200) << reshard.Describe();
  ASSERT_TRUE(WaitFor(
      [&] {
        return http_->Get("/v1/streams/orders", Auth()).body.find("\"state\":\"SEALED\"") !=
               std::string::npos;
      },
      20s, "generation 0 sealed"));
  int waiting = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        BeatAll();
        view = View();
        waiting = 0;
        for (const json::value& s : view.at("shards").as_array()) {
          waiting += JsonStr(s, "state") == "WAITING_PARENTS";
        }
        return waiting == 24;
      },
      20s, "the group adopts generation 1: 24 children WAITING_PARENTS"))
      << JsonString(view);

  // refresh=1: over 5 s of the page's time it loads about five times.
  const std::string fragment = "#group=orders%2Fbilling&refresh=1&token=" + std::string(kToken);
  const std::string dom = Browse(fragment, std::chrono::seconds(5));
  const std::string summary = Element(dom, "<p id=\"reshard-summary\"", "p");
  EXPECT_NE(summary.find(Attr("data-in-progress", "true")), std::string::npos) << dom;
  EXPECT_NE(summary.find(Attr("data-parents-incomplete", "16")), std::string::npos) << summary;
  EXPECT_NE(summary.find(Attr("data-children-waiting", "24")), std::string::npos) << summary;
  EXPECT_NE(dom.find("<tr " + Attr("data-generation", "0") + " " + Attr("data-state", "SEALED")),
            std::string::npos)
      << dom;
  EXPECT_NE(dom.find("<tr " + Attr("data-generation", "1") + " " + Attr("data-state", "ACTIVE")),
            std::string::npos)
      << dom;
  // Children: waiting for parents, no owner; parents: still read by their owners.
  const std::string child = Element(dom, "<tr " + Attr("data-shard", "16"), "tr");
  EXPECT_NE(child.find(Attr("data-state", "WAITING_PARENTS")), std::string::npos) << dom;
  EXPECT_NE(child.find(Cell("waiting", "0-15")), std::string::npos) << child;
  EXPECT_NE(
      Element(dom, "<tr " + Attr("data-shard", "0"), "tr").find(Attr("data-state", "ASSIGNED")),
      std::string::npos)
      << dom;
  // Live: the page polled by itself (the first load plus at least two refreshes).
  const std::string body = Element(dom, "<body", "body");
  const size_t loads_at = body.find("data-loads=\"");
  ASSERT_NE(loads_at, std::string::npos) << body.substr(0, 300);
  EXPECT_GE(std::stoi(body.substr(loads_at + 12)), 3) << body.substr(0, 300);

  if (const char* png = std::getenv("RSC_CONSOLE_SCREENSHOT"); png != nullptr && *png != '\0') {
    BeatAll();
    ProcessRun shot = browser_.Screenshot(
        Url("#group=orders%2Fbilling&token=" + std::string(kToken)), png, 1400, 900);
    EXPECT_EQ(shot.exit_code, 0) << shot.Describe();
    EXPECT_TRUE(std::filesystem::exists(png)) << png << "\n" << shot.Describe();
  }
}

// A restore starts a correction round (docs/protocol.md §7.3): the group page shows it with
// its id and the version it started from, the list marks the group.
TEST_F(ConsoleTest, AnActiveCorrectionRoundIsShown) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4, LongLeases(), Auth()));
  ASSERT_TRUE(JoinMembers());
  HttpResult doc = http_->Get(GroupPath(kP, kG) + "/export", Auth());
  ASSERT_EQ(doc.status, 200) << doc.Describe();
  HttpResult restored = http_->Post("/v1/groups/restore", doc.body, Auth());
  ASSERT_EQ(restored.status, 200) << restored.Describe();
  const json::value& round = restored.json.at("correctionRound");
  ASSERT_TRUE(round.is_object()) << restored.body;
  const std::string id = std::to_string(JsonInt(round, "id"));

  const std::string dom = Browse("#group=orders%2Fbilling&token=" + std::string(kToken));
  const std::string shown = Element(dom, "<p id=\"round\"", "p");
  EXPECT_NE(shown.find(Attr("data-active", "true")), std::string::npos) << dom;
  EXPECT_NE(shown.find("round #" + id), std::string::npos) << shown;
  EXPECT_NE(shown.find("from metadata version " + std::to_string(JsonInt(round, "startedVersion"))),
            std::string::npos)
      << shown;
  const std::string list = Browse("#token=" + std::string(kToken));
  EXPECT_NE(Element(list, "<tr " + Attr("data-group", "orders/billing"), "tr")
                .find("correction round #" + id),
            std::string::npos)
      << list;
}

// The /ui responses themselves, over plain HTTP: public while the API needs the token,
// typed, with the CSP, and counted under route="ui".
TEST_F(ConsoleTest, FilesArePublicTypedAndCounted) {
  HttpResult index = http_->Get("/ui/");
  ASSERT_EQ(index.status, 200) << index.Describe();
  EXPECT_EQ(index.Header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(index.Header("content-security-policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(index.Header("x-content-type-options"), "nosniff");
  EXPECT_NE(index.body.find("<script src=\"app.js\""), std::string::npos) << index.body;
  HttpResult js = http_->Get("/ui/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.Header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(http_->Get("/ui/style.css").Header("content-type"), "text/css; charset=utf-8");
  HttpResult bare = http_->Get("/ui");
  EXPECT_EQ(bare.status, 301);
  EXPECT_EQ(bare.Header("location"), "/ui/");
  EXPECT_EQ(http_->Get("/ui/../v1/groups").status, 404);
  EXPECT_EQ(http_->Get("/ui/missing.js").status, 404);
  EXPECT_EQ(http_->Get("/v1/groups").status, 401);  // the data stays behind the token
  EXPECT_EQ(Metric(*http_, "rsc_http_requests_total", "route=\"ui\",status=\"200\""), 3);
  EXPECT_EQ(Metric(*http_, "rsc_http_requests_total", "route=\"ui\",status=\"404\""), 2);
  EXPECT_EQ(Metric(*http_, "rsc_http_requests_total", "route=\"ui\",status=\"301\""), 1);
}

// ── the page against a scripted API ──────────────────────────────────────────────────

// A group view and a stream layout as the coordinator serializes them (docs/protocol.md
// §7.2, §7.4), with one member whose id is `member`.
std::string CannedView(const std::string& member) {
  json::object shard0{{"id", 0},         {"stream", "{orders:0}"}, {"generation", 0},
                      {"owner", member}, {"target", member},       {"state", "ASSIGNED"},
                      {"lag", 7},        {"pending", 1},           {"oldestPendingMs", 1500}};
  json::object shard1{{"id", 1},      {"stream", "{orders:1}"}, {"generation", 0}, {"owner", ""},
                      {"target", ""}, {"state", "UNASSIGNED"},  {"lag", 0},        {"pending", 0}};
  json::object m{{"memberId", member},
                 {"memberEpoch", 4},
                 {"instanceId", ""},
                 {"assignedShards", json::array{0}},
                 {"pendingShards", json::array{}},
                 {"revokingShards", json::array{}},
                 {"leaseRemainingMs", 9000},
                 {"leaving", false},
                 {"fenced", false}};
  json::object config{{"heartbeatIntervalMs", 1000}, {"memberLeaseMs", 10000},
                      {"assignmentLeaseMs", 8000},   {"rebalanceTimeoutMs", 30000},
                      {"routingLeaseMs", 30000},     {"routingRefreshMs", 5000}};
  return json::serialize(
      json::object{{"stream", "orders"},
                   {"group", "billing"},
                   {"revision", 9},
                   {"metadataVersion", 9},
                   {"lineage", "abc"},
                   {"assignmentEpoch", 3},
                   {"shardCount", 2},
                   {"config", config},
                   {"members", json::array{m}},
                   {"correctionRound", nullptr},
                   {"shards", json::array{shard0, shard1}},
                   {"generations", json::array{json::object{{"generation", 0},
                                                            {"shards", json::array{0, 1}},
                                                            {"completed", json::array{}},
                                                            {"waitingFor", json::array{}}}}}});
}

constexpr const char* kCannedStream =
    R"({"stream":"orders","revision":1,"version":3,"lineage":"x","routingLeaseMs":30000,)"
    R"("routingRefreshMs":5000,"groups":["billing"],"generations":[{"generation":0,)"
    R"("shardCount":2,"hash":"jump-xxh64","state":"ACTIVE","shards":[{"id":0,)"
    R"("stream":"{orders:0}"},{"id":1,"stream":"{orders:1}"}]}]})";

HttpResponse JsonAnswer(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// Serves the embedded console and answers /v1 calls from `script` (given the request and
// how many /v1 calls came before it); records the Authorization headers it saw.
class ScriptedCoordinator : public HttpHandler {
 public:
  using Script = std::function<HttpResponse(const std::string& path, int call)>;
  explicit ScriptedCoordinator(Script script) : script_(std::move(script)), server_({}, *this) {
    Status s = server_.Start();
    EXPECT_TRUE(s.ok()) << s.error().message;
  }
  ~ScriptedCoordinator() override { server_.Stop(); }

  HttpResponse Handle(const HttpRequest& req) override {
    std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/ui" || path.starts_with("/ui/")) {
      return ServeUi(path, req.Header("If-None-Match"));
    }
    std::lock_guard<std::mutex> lock(mu_);
    authorization_.emplace_back(req.Header("Authorization"));
    return script_(path, calls_++);
  }

  std::string Url(const std::string& fragment) const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + "/ui/" + fragment;
  }
  std::vector<std::string> authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }

 private:
  Script script_;
  std::mutex mu_;
  int calls_ = 0;                           // guarded by mu_
  std::vector<std::string> authorization_;  // guarded by mu_
  HttpServer server_;                       // last: stops before the rest goes
};

std::string BrowseScripted(ScriptedCoordinator& api, const std::string& fragment,
                           std::chrono::milliseconds virtual_time = std::chrono::seconds(3)) {
  HeadlessBrowser browser;
  ProcessRun run = browser.DumpDom(api.Url(fragment), virtual_time);
  EXPECT_TRUE(run.exit_code == 0 && !run.timed_out && run.out.find("</html>") != std::string::npos)
      << run.Describe(20000);
  return run.out;
}

TEST(ConsolePageTest, AFailedRefreshKeepsTheLastDataWithTheError) {
  ScriptedCoordinator api([](const std::string& path, int call) {
    if (path == "/v1/streams/orders") return JsonAnswer(200, kCannedStream);
    if (path == "/v1/groups/orders/billing" && call < 2) {
      return JsonAnswer(200, CannedView("console-a"));
    }
    return JsonAnswer(503,
                      R"({"error":"REDIS_UNAVAILABLE","message":"redis: connection refused"})");
  });
  const std::string dom =
      BrowseScripted(api, "#group=orders%2Fbilling&refresh=1&token=tok", std::chrono::seconds(4));
  const std::string banner = Element(dom, "<div id=\"banner\"", "div");
  EXPECT_NE(banner.find(Attr("data-code", "REDIS_UNAVAILABLE")), std::string::npos) << dom;
  EXPECT_NE(banner.find("redis: connection refused"), std::string::npos) << banner;
  EXPECT_NE(banner.find("(stale)"), std::string::npos) << banner;
  // The last good data is still there, marked stale.
  const std::string body = Element(dom, "<body", "body");
  EXPECT_NE(body.find("class=\"stale\""), std::string::npos) << body.substr(0, 300);
  EXPECT_NE(dom.find("<tr " + Attr("data-member", "console-a")), std::string::npos) << dom;
  EXPECT_NE(Element(dom, "<tr " + Attr("data-shard", "0"), "tr").find(Cell("num lag", "7")),
            std::string::npos)
      << dom;
  // Every call carried the token from the address as a bearer token.
  const std::vector<std::string> auth = api.authorization();
  ASSERT_GE(auth.size(), 3u);
  for (const std::string& a : auth) EXPECT_EQ(a, "Bearer tok");
}

TEST(ConsolePageTest, ForbiddenNamesTheMissingRight) {
  ScriptedCoordinator api([](const std::string&, int) {
    return JsonAnswer(403, R"({"error":"FORBIDDEN","message":"this token may not read groups"})");
  });
  const std::string dom = BrowseScripted(api, "#token=member-token");
  const std::string banner = Element(dom, "<div id=\"banner\"", "div");
  EXPECT_NE(banner.find(Attr("data-code", "FORBIDDEN")), std::string::npos) << dom;
  EXPECT_NE(banner.find("403 FORBIDDEN"), std::string::npos) << banner;
  EXPECT_NE(banner.find("Use a monitor or admin token"), std::string::npos) << banner;
}

// Member ids, names and messages reach the page as text: markup in them stays text.
TEST(ConsolePageTest, ServerTextIsNeverMarkup) {
  const std::string evil = "<img src=x onerror=\"document.title='pwned'\">";
  ScriptedCoordinator api([&](const std::string& path, int) {
    if (path == "/v1/streams/orders") {
      return JsonAnswer(404, json::serialize(json::object{{"error", "STREAM_NOT_FOUND"},
                                                          {"message", "<b>" + evil + "</b>"}}));
    }
    return JsonAnswer(200, CannedView(evil));
  });
  const std::string dom = BrowseScripted(api, "#group=orders%2Fbilling");
  EXPECT_NE(dom.find("<title>rsc console</title>"), std::string::npos) << dom;
  EXPECT_EQ(dom.find("<img"), std::string::npos) << dom;
  EXPECT_EQ(dom.find("<b><"), std::string::npos) << dom;  // the page's own <b>s hold numbers
  EXPECT_NE(dom.find("&lt;img src=x onerror=\"document.title='pwned'\"&gt;"), std::string::npos)
      << dom;
  EXPECT_NE(dom.find("&lt;b&gt;"), std::string::npos) << dom;  // the stream view's error
}

}  // namespace
}  // namespace rsc::integration
