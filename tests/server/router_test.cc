// Route table tests (server/router.h): every endpoint of SPEC §4.1, §5.1, §8, §9, the
// 404/405 distinction, percent-decoding and name validation (R2.4).

#include "server/router.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rsc {
namespace {

struct RouteCase {
  std::string method;
  std::string target;
  Route route;
  std::string stream;
  std::string group;
  std::string member;
};

TEST(MatchRoute, EveryEndpoint) {
  const std::vector<RouteCase> cases = {
      {"POST", "/v1/groups/orders/billing/heartbeat", Route::kHeartbeat, "orders", "billing", ""},
      {"POST", "/v1/groups/orders/billing/leave", Route::kLeave, "orders", "billing", ""},
      {"GET", "/v1/groups/orders/billing/routing?observedVersion=3&lineage=x", Route::kRouting,
       "orders", "billing", ""},
      {"POST", "/v1/groups", Route::kCreateGroup, "", "", ""},
      {"GET", "/v1/groups", Route::kListGroups, "", "", ""},
      {"GET", "/v1/groups/orders/billing", Route::kDescribeGroup, "orders", "billing", ""},
      {"PATCH", "/v1/groups/orders/billing", Route::kPatchGroup, "orders", "billing", ""},
      {"DELETE", "/v1/groups/orders/billing?expectedRevision=4", Route::kDeleteGroup, "orders",
       "billing", ""},
      {"POST", "/v1/groups/orders/billing/members/m-1/fence", Route::kFenceMember, "orders",
       "billing", "m-1"},
      {"GET", "/v1/groups/orders/billing/export", Route::kExportGroup, "orders", "billing", ""},
      {"POST", "/v1/groups/restore", Route::kRestoreGroup, "", "", ""},
      {"GET", "/v1/streams/orders:eu", Route::kDescribeStream, "orders:eu", "", ""},
      {"PATCH", "/v1/streams/orders:eu", Route::kPatchStream, "orders:eu", "", ""},
      {"GET", "/v1/streams/orders/routing?observedVersion=3&lineage=x", Route::kStreamRouting,
       "orders", "", ""},
      {"POST", "/v1/streams/orders/reshard", Route::kReshard, "orders", "", ""},
      {"GET", "/healthz", Route::kHealthz, "", "", ""},
      {"GET", "/readyz", Route::kReadyz, "", "", ""},
      {"GET", "/metrics", Route::kMetrics, "", "", ""},
      // The console (SPEC O3): every path under /ui, whether the file exists or not.
      {"GET", "/ui", Route::kUi, "", "", ""},
      {"GET", "/ui/", Route::kUi, "", "", ""},
      {"GET", "/ui/app.js?v=1", Route::kUi, "", "", ""},
      {"GET", "/ui/../v1/groups", Route::kUi, "", "", ""},
      // P may contain ':' (R2.4), raw or percent-encoded.
      {"POST", "/v1/groups/orders:eu/g.1/heartbeat", Route::kHeartbeat, "orders:eu", "g.1", ""},
      {"POST", "/v1/groups/orders%3Aeu/g%2D1/heartbeat", Route::kHeartbeat, "orders:eu", "g-1", ""},
      // A stream literally named "restore" is still addressable: only the 3-segment path
      // is the restore endpoint.
      {"GET", "/v1/groups/restore/x", Route::kDescribeGroup, "restore", "x", ""},
      // Absolute-form target.
      {"GET", "http://coord:8080/v1/groups/a/b", Route::kDescribeGroup, "a", "b", ""},
  };
  for (const RouteCase& c : cases) {
    auto m = MatchRoute(c.method, c.target);
    ASSERT_TRUE(m.ok()) << c.method << " " << c.target << ": " << m.error().message;
    EXPECT_EQ(m->route, c.route) << c.target;
    EXPECT_EQ(m->key.stream, c.stream) << c.target;
    EXPECT_EQ(m->key.group, c.group) << c.target;
    EXPECT_EQ(m->member, c.member) << c.target;
  }
}

TEST(MatchRoute, ConsolePathsKeepTheirRawPath) {
  // ui_assets.h looks the file up by the raw path: "/ui/../x" is a name no file has.
  auto m = MatchRoute("GET", "/ui/%2e%2e/app.js?token=x");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->route, Route::kUi);
  EXPECT_EQ(m->path, "/ui/%2e%2e/app.js");
  EXPECT_EQ(RouteName(Route::kUi), "ui");
  // "/uix" and "/v1/ui" are not the console.
  EXPECT_FALSE(MatchRoute("GET", "/uix").ok());
  EXPECT_FALSE(MatchRoute("GET", "/v1/ui").ok());
}

TEST(MatchRoute, QueryAndPathAreSeparated) {
  auto m = MatchRoute("GET", "/v1/groups/a/b/routing?observedVersion=3&lineage=x%2By");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->path, "/v1/groups/a/b/routing");
  EXPECT_EQ(m->query, "observedVersion=3&lineage=x%2By");
}

TEST(MatchRoute, UnknownPathsAre404) {
  for (const char* t :
       {"/", "", "/v1", "/v2/groups", "/v1/groups/", "/v1/groups/a", "/v1/groups/a/b/c",
        "/v1/groups/a/b/heartbeat/x", "/v1/groups/a/b/members/m",
        "/v1/groups/a/b/members/m/unfence", "/healthz/x", "/HEALTHZ", "relative/path",
        "/v1/streams", "/v1/streams/a/b", "/v1/streams/a/routing/x"}) {
    auto m = MatchRoute("GET", t);
    ASSERT_FALSE(m.ok()) << t;
    EXPECT_EQ(m.error().code, ErrorCode::kNotFound) << t;
  }
}

TEST(MatchRoute, WrongMethodIs405WithAllow) {
  struct Case {
    std::string method, target, allow;
  };
  for (const Case& c : std::vector<Case>{
           {"GET", "/v1/groups/a/b/heartbeat", "POST"},
           {"PUT", "/v1/groups/a/b", "GET, PATCH, DELETE"},
           {"DELETE", "/v1/groups", "GET, POST"},
           {"POST", "/healthz", "GET"},
           {"POST", "/v1/groups/a/b/routing", "GET"},
           {"GET", "/v1/groups/restore", "POST"},
           {"GET", "/v1/groups/a/b/members/m/fence", "POST"},
           {"DELETE", "/v1/streams/a", "GET, PATCH"},
           {"POST", "/v1/streams/a/routing", "GET"},
           {"GET", "/v1/streams/a/reshard", "POST"},
           {"POST", "/ui/", "GET"},
           {"HEAD", "/ui/app.js", "GET"},
       }) {
    std::string allow;
    auto m = MatchRoute(c.method, c.target, &allow);
    ASSERT_FALSE(m.ok()) << c.target;
    EXPECT_EQ(m.error().code, ErrorCode::kMethodNotAllowed) << c.target;
    EXPECT_EQ(allow, c.allow) << c.target;
  }
}

TEST(MatchRoute, BadNamesAre400NamingWhich) {
  struct Case {
    std::string method, target, what;
  };
  for (const Case& c : std::vector<Case>{
           {"POST", "/v1/groups/a%7Bb/g/heartbeat", "invalid stream name"},  // '{': hash tags
           {"POST", "/v1/groups/a%2Fb/g/heartbeat", "invalid stream name"},  // encoded '/'
           {"POST", "/v1/groups/a%20b/g/heartbeat", "invalid stream name"},
           {"POST", "/v1/groups/a%00/g/heartbeat", "invalid stream name"},
           {"POST", "/v1/groups/" + std::string(201, 's') + "/g/heartbeat", "invalid stream name"},
           {"POST", "/v1/groups//g/heartbeat", "invalid stream name"},
           {"POST", "/v1/groups/s/g:1/heartbeat", "invalid group name"},
           {"GET", "/v1/groups/s/g%3A1", "invalid group name"},
           {"GET", "/v1/groups/s/" + std::string(129, 'g') + "/routing", "invalid group name"},
           {"POST", "/v1/groups/s//heartbeat", "invalid group name"},
           {"POST", "/v1/groups/s/caf%C3%A9/heartbeat", "invalid group name"},
           {"POST", "/v1/groups/s/g/members/a%2Fb/fence", "invalid member id"},
           {"POST", "/v1/groups/s/g/members//fence", "invalid member id"},
           {"POST", "/v1/groups/%2E%2E/g/heartbeat", "invalid stream name"},  // ".." (issue 8)
           {"GET", "/v1/groups/s/%2E", "invalid group name"},
           {"POST", "/v1/groups/s/g/members/%2E%2E/fence", "invalid member id"},
           {"GET", "/v1/streams/a%7Bb", "invalid stream name"},
           {"GET", "/v1/streams/%2E%2E", "invalid stream name"},
           {"GET", "/v1/streams/a%7Bb/routing", "invalid stream name"},
           {"PATCH", "/v1/streams/a%20b", "invalid stream name"},
           {"POST", "/v1/groups/s/g/heartbeat%", "malformed percent-encoding"},
           {"POST", "/v1/groups/s%G1/g/heartbeat", "malformed percent-encoding"},
       }) {
    auto m = MatchRoute(c.method, c.target);
    ASSERT_FALSE(m.ok()) << c.target;
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidRequest) << c.target << " " << m.error().message;
    EXPECT_NE(m.error().message.find(c.what), std::string::npos) << m.error().message;
  }
}

TEST(RouteProperties, AccessAndGate) {
  // SPEC O4: every route's class, spelled out. kUi is the last enumerator today; a new
  // route also needs a case in RequiredAccess's switch (-Wswitch) and a line here.
  const std::vector<std::pair<Route, Access>> access = {
      {Route::kHeartbeat, Access::kMember},   {Route::kLeave, Access::kMember},
      {Route::kRouting, Access::kMember},     {Route::kCreateGroup, Access::kAdmin},
      {Route::kListGroups, Access::kRead},    {Route::kDescribeGroup, Access::kRead},
      {Route::kPatchGroup, Access::kAdmin},   {Route::kDeleteGroup, Access::kAdmin},
      {Route::kFenceMember, Access::kAdmin},  {Route::kExportGroup, Access::kAdmin},
      {Route::kRestoreGroup, Access::kAdmin}, {Route::kDescribeStream, Access::kRead},
      {Route::kPatchStream, Access::kAdmin},  {Route::kStreamRouting, Access::kMember},
      {Route::kReshard, Access::kAdmin},      {Route::kHealthz, Access::kPublic},
      {Route::kReadyz, Access::kPublic},      {Route::kMetrics, Access::kMetrics},
      {Route::kUi, Access::kPublic},  // SPEC O4: the console's files are public
  };
  ASSERT_EQ(access.size(), static_cast<size_t>(Route::kUi) + 1);
  for (const auto& [route, want] : access) {
    EXPECT_EQ(RequiredAccess(route), want)
        << RouteName(route) << " is " << AccessName(RequiredAccess(route));
  }
  for (Route r :
       {Route::kHeartbeat, Route::kLeave, Route::kRouting, Route::kCreateGroup, Route::kPatchGroup,
        Route::kDeleteGroup, Route::kFenceMember, Route::kRestoreGroup, Route::kPatchStream,
        Route::kStreamRouting, Route::kReshard}) {
    EXPECT_TRUE(IsGatedRoute(r)) << RouteName(r);
  }
  for (Route r : {Route::kListGroups, Route::kDescribeGroup, Route::kExportGroup, Route::kHealthz,
                  Route::kReadyz, Route::kMetrics, Route::kDescribeStream, Route::kUi}) {
    EXPECT_FALSE(IsGatedRoute(r)) << RouteName(r);
  }
}

TEST(PercentDecode, Cases) {
  EXPECT_EQ(PercentDecode("a%3Ab"), "a:b");
  EXPECT_EQ(PercentDecode("a%3ab"), "a:b");
  EXPECT_EQ(PercentDecode("a+b"), "a+b");
  EXPECT_EQ(PercentDecode(""), "");
  EXPECT_EQ(PercentDecode("%"), std::nullopt);
  EXPECT_EQ(PercentDecode("%4"), std::nullopt);
  EXPECT_EQ(PercentDecode("%zz"), std::nullopt);
  EXPECT_EQ(PercentDecode("%00"), std::string(1, '\0'));
}

TEST(ParseQuery, Cases) {
  auto q = ParseQuery("observedVersion=3&lineage=a%2Bb&&flag&empty=");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->at("observedVersion"), "3");
  EXPECT_EQ(q->at("lineage"), "a+b");
  EXPECT_EQ(q->at("flag"), "");
  EXPECT_EQ(q->at("empty"), "");
  auto dup = ParseQuery("a=1&a=2");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("'a' given twice"), std::string::npos);
  EXPECT_FALSE(ParseQuery("a=%").ok());
}

}  // namespace
}  // namespace rsc
