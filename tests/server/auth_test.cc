// Roles and tokens (server/auth.h, SPEC O4): the role table for every route under every
// token configuration, the tokens file parser and loader (bad inputs fail with a clear
// message that never quotes a token), combining flags with the file, and bearer parsing.

#include "server/auth.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace rsc {
namespace {

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kMonitor[] = "monitor-token-0123456789";
constexpr char kMember[] = "member-token-0123456789";

TokenConfig Config(bool admin, bool monitor, bool member) {
  TokenConfig t;
  if (admin) t.admin.token = kAdmin;
  if (monitor) t.monitor.token = kMonitor;
  if (member) t.member.token = kMember;
  return t;
}

std::string Bearer(const std::string& token) { return "Bearer " + token; }

// 'o' admitted, 'U' 401 UNAUTHORIZED, 'F' 403 FORBIDDEN, for the presented token in this
// order: none, an unknown one, the admin, monitor and member tokens (a role that is not
// configured makes its token an unknown one).
struct ConfigCase {
  std::string name;
  TokenConfig tokens;
  // By route class (the letters of RouteCase::cls).
  std::map<char, std::string> expect;
};

// The table of auth.h, written out independently of the code: P public, X /metrics,
// R reads, M member endpoints, A admin.
std::vector<ConfigCase> AllConfigs() {
  return {
      {"none",
       Config(false, false, false),
       {{'P', "ooooo"}, {'X', "ooooo"}, {'R', "ooooo"}, {'M', "ooooo"}, {'A', "ooooo"}}},
      {"admin",
       Config(true, false, false),
       {{'P', "ooooo"}, {'X', "ooooo"}, {'R', "UUoUU"}, {'M', "ooooo"}, {'A', "UUoUU"}}},
      {"admin+monitor",
       Config(true, true, false),
       {{'P', "ooooo"}, {'X', "UUooU"}, {'R', "UUooU"}, {'M', "ooooo"}, {'A', "UUoFU"}}},
      {"admin+member",
       Config(true, false, true),
       {{'P', "ooooo"}, {'X', "ooooo"}, {'R', "UUoUF"}, {'M', "UUoUo"}, {'A', "UUoUF"}}},
      {"all three",
       Config(true, true, true),
       {{'P', "ooooo"}, {'X', "UUooF"}, {'R', "UUooF"}, {'M', "UUoFo"}, {'A', "UUoFF"}}},
  };
}

struct RouteCase {
  Route route;
  char cls;
};

// Every route of router.h.
const std::vector<RouteCase>& AllRoutes() {
  static const std::vector<RouteCase> routes = {
      {Route::kHeartbeat, 'M'},   {Route::kLeave, 'M'},         {Route::kRouting, 'M'},
      {Route::kCreateGroup, 'A'}, {Route::kListGroups, 'R'},    {Route::kDescribeGroup, 'R'},
      {Route::kPatchGroup, 'A'},  {Route::kDeleteGroup, 'A'},   {Route::kFenceMember, 'A'},
      {Route::kExportGroup, 'A'}, {Route::kRestoreGroup, 'A'},  {Route::kDescribeStream, 'R'},
      {Route::kPatchStream, 'A'}, {Route::kStreamRouting, 'M'}, {Route::kReshard, 'A'},
      {Route::kHealthz, 'P'},     {Route::kReadyz, 'P'},        {Route::kMetrics, 'X'},
  };
  return routes;
}

TEST(Authorizer, EveryRouteUnderEveryConfiguration) {
  ASSERT_EQ(AllRoutes().size(), static_cast<size_t>(Route::kMetrics) + 1);
  const std::vector<std::string> presented = {"", Bearer("not-a-configured-token"), Bearer(kAdmin),
                                              Bearer(kMonitor), Bearer(kMember)};
  const std::vector<std::string> presented_names = {"no token", "an unknown token", "admin",
                                                    "monitor", "member"};
  for (const ConfigCase& c : AllConfigs()) {
    ASSERT_TRUE(ValidateTokens(c.tokens).ok()) << c.name;
    const Authorizer auth(c.tokens);
    for (const RouteCase& rc : AllRoutes()) {
      const std::string& want = c.expect.at(rc.cls);
      for (size_t i = 0; i < presented.size(); ++i) {
        const Result<std::string_view> got = auth.Check(rc.route, presented[i]);
        const char g = got.ok()                                       ? 'o'
                       : got.error().code == ErrorCode::kUnauthorized ? 'U'
                       : got.error().code == ErrorCode::kForbidden    ? 'F'
                                                                      : '?';
        EXPECT_EQ(g, want[i]) << "configured: " << c.name << ", route " << RouteName(rc.route)
                              << ", presented " << presented_names[i]
                              << (got.ok() ? "" : ": " + got.error().message);
        if (got.ok()) {
          // The actor: the role whose token was asked for and given, else anonymous.
          const bool open = c.expect.at(rc.cls) == "ooooo";
          const std::string_view actor =
              open ? kAnonymousActor : std::string_view(presented_names[i]);
          EXPECT_EQ(*got, actor) << c.name << " " << RouteName(rc.route);
        } else {
          // Messages name roles, never a token.
          for (const char* t : {kAdmin, kMonitor, kMember, "not-a-configured-token"}) {
            EXPECT_EQ(got.error().message.find(t), std::string::npos) << got.error().message;
          }
          EXPECT_NE(got.error().message.find(RouteName(rc.route)), std::string::npos)
              << got.error().message;
        }
      }
    }
  }
}

TEST(Authorizer, MessagesSayWhatIsNeeded) {
  const Authorizer auth(Config(true, true, true));
  auto forbidden = auth.Check(Route::kCreateGroup, Bearer(kMonitor));
  ASSERT_FALSE(forbidden.ok());
  EXPECT_EQ(forbidden.error().message,
            "create_group: the monitor token does not allow this (needs the admin token)");
  auto missing = auth.Check(Route::kHeartbeat, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "heartbeat: missing or wrong 'Authorization: Bearer' token (needs the admin or "
            "member token)");
}

TEST(Authorizer, PreviousTokensAreAcceptedForTheirRoleDuringARotation) {
  TokenConfig t = Config(true, true, false);
  t.admin.previous = "old-admin-token-0123";
  t.monitor.previous = "old-monitor-token-0123";
  ASSERT_TRUE(ValidateTokens(t).ok());
  const Authorizer auth(t);
  bool previous = false;
  auto admin = auth.Check(Route::kPatchGroup, Bearer("old-admin-token-0123"), &previous);
  ASSERT_TRUE(admin.ok()) << admin.error().message;
  EXPECT_EQ(*admin, "admin");
  EXPECT_TRUE(previous) << "a rotation's progress is visible per request";
  ASSERT_TRUE(auth.Check(Route::kPatchGroup, Bearer(kAdmin), &previous).ok());
  EXPECT_FALSE(previous);
  auto monitor = auth.Check(Route::kDescribeGroup, Bearer("old-monitor-token-0123"));
  ASSERT_TRUE(monitor.ok());
  EXPECT_EQ(*monitor, "monitor");
  // The old monitor token is still a monitor token: no more.
  previous = true;
  auto refused = auth.Check(Route::kPatchGroup, Bearer("old-monitor-token-0123"), &previous);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kForbidden);
  EXPECT_FALSE(previous) << "only admitted requests count";
}

TEST(Authorizer, SummaryNamesTheConfiguredRoles) {
  EXPECT_EQ(Authorizer(Config(false, false, false)).Summary(), "off");
  EXPECT_EQ(Authorizer(Config(true, false, false)).Summary(), "admin");
  EXPECT_EQ(Authorizer(Config(true, false, true)).Summary(), "admin,member");
  EXPECT_EQ(Authorizer(Config(true, true, true)).Summary(), "admin,monitor,member");
}

TEST(BearerToken, Cases) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER \t abc  "), "abc");
  EXPECT_EQ(BearerToken("Bearer"), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer "), std::nullopt);
  EXPECT_EQ(BearerToken("Bearerabc"), std::nullopt);
  EXPECT_EQ(BearerToken("Basic abc"), std::nullopt);
  EXPECT_EQ(BearerToken(""), std::nullopt);
}

TEST(ConstantTimeEquals, Cases) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(ValidateTokens, MonitorOrMemberNeedAnAdminToken) {
  for (TokenConfig t :
       {Config(false, true, false), Config(false, false, true), Config(false, true, true)}) {
    Status s = ValidateTokens(t);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("needs an admin token"), std::string::npos)
        << s.error().message;
  }
  EXPECT_TRUE(ValidateTokens(Config(true, true, true)).ok());
  EXPECT_TRUE(ValidateTokens(Config(false, false, false)).ok());
}

TEST(ValidateTokens, RefusesSharedPreviousWithoutCurrentAndBadCharacters) {
  TokenConfig same = Config(true, true, false);
  same.monitor.token = kAdmin;
  Status s = ValidateTokens(same);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "the admin and monitor tokens are the same: every token must be distinct (a token "
            "identifies its role)");
  EXPECT_EQ(s.error().message.find(kAdmin), std::string::npos);

  TokenConfig reused = Config(true, false, false);
  reused.admin.previous = kAdmin;
  EXPECT_FALSE(ValidateTokens(reused).ok());

  TokenConfig orphan = Config(true, false, false);
  orphan.member.previous = "old-member-token";
  s = ValidateTokens(orphan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("member.previous is set but no member token"), std::string::npos)
      << s.error().message;

  for (std::string bad :
       {std::string("has blank"), std::string("tab\tinside"), std::string("new\nline"),
        std::string("\x7f"), std::string(1025, 'a'), std::string("caf\xc3\xa9")}) {
    TokenConfig t;
    t.admin.token = bad;
    EXPECT_FALSE(ValidateTokens(t).ok()) << bad;
  }
  TokenConfig longest;
  longest.admin.token = std::string(1024, 'a');
  EXPECT_TRUE(ValidateTokens(longest).ok());
}

TEST(ParseTokensFile, AcceptsCommentsBlanksAndCrlf) {
  auto t = ParseTokensFile(
      "# coordinator tokens\n"
      "\n"
      "  admin = admin-token-0123456789  \r\n"
      "\t# monitoring\n"
      "monitor=monitor-token-0123456789\n"
      "member=member-token-0123456789==\n"
      "admin.previous=old-admin-token\n"
      "member.previous=old-member-token");  // no final newline
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->admin.token, "admin-token-0123456789");
  EXPECT_EQ(t->admin.previous, "old-admin-token");
  EXPECT_EQ(t->monitor.token, "monitor-token-0123456789");
  EXPECT_EQ(t->monitor.previous, "");
  EXPECT_EQ(t->member.token, "member-token-0123456789==");  // '=' inside a token is kept
  EXPECT_EQ(t->member.previous, "old-member-token");

  auto empty = ParseTokensFile("# nothing configured yet\n\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->Empty());
}

TEST(ParseTokensFile, BadInputsFailWithTheLineAndWithoutTheToken) {
  struct Bad {
    std::string text;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {"admin=a-secret-token\nsecret-bare-token\n", "line 2: expected role=token"},
      {"admin=a-secret-token\nadmn=another-secret\n",
       "line 2: unknown role (expected admin, monitor, member, or one of them followed by "
       ".previous)"},
      // A bare base64 token ending in '=': the part before it is not echoed either.
      {"c2VjcmV0LXRva2Vu=\n", "line 1: unknown role"},
      {"admin=a-secret-token\n# again\nadmin=another-secret\n", "line 3: admin is given twice"},
      {"admin=a-secret-token\nmonitor=\n", "line 2: the monitor token is empty"},
      {"admin=a-secret-token # the admin\n",
       "line 1: the admin token must be 1 to 1024 printable ASCII characters without blanks"},
      {"monitor=a-secret-token\n", "a monitor token needs an admin token"},
      {"admin=a-secret-token\nmember=a-secret-token\n", "the admin and member tokens are the same"},
      {"admin=a-secret-token\nmonitor.previous=another-secret\n",
       "monitor.previous is set but no monitor token"},
      {"admin=a-secret-token\nadmin.previous=a-secret-token\n",
       "the admin and admin.previous tokens are the same"},
  };
  for (const Bad& b : cases) {
    auto t = ParseTokensFile(b.text);
    ASSERT_FALSE(t.ok()) << b.text;
    EXPECT_EQ(t.error().code, ErrorCode::kInvalidRequest);
    EXPECT_NE(t.error().message.find(b.message), std::string::npos)
        << "got: " << t.error().message << "\nwant: " << b.message;
    for (const char* secret : {"secret-token", "another-secret", "c2VjcmV0LXRva2Vu"}) {
      EXPECT_EQ(t.error().message.find(secret), std::string::npos) << t.error().message;
    }
  }
}

// Garbage never crashes the parser; what it accepts is a valid configuration; what it
// refuses is refused with a message quoting no run of the input long enough to be a token.
RC_GTEST_PROP(ParseTokensFile, GarbageIsRefusedCleanlyOrAcceptedValid, ()) {
  const auto lines = *rc::gen::container<std::vector<std::string>>(rc::gen::oneOf(
      rc::gen::arbitrary<std::string>(),
      rc::gen::map(rc::gen::pair(rc::gen::element<std::string>("admin", "monitor", "member",
                                                               "admin.previous", "member.previous",
                                                               "monitor.previous", "#", ""),
                                 rc::gen::arbitrary<std::string>()),
                   [](const std::pair<std::string, std::string>& kv) {
                     return kv.first + "=" + kv.second;
                   })));
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  const Result<TokenConfig> t = ParseTokensFile(text);
  if (t.ok()) {
    RC_ASSERT(ValidateTokens(*t).ok());
    for (Role r : kAllRoles) {
      if (!t->Of(r).token.empty()) RC_ASSERT(IsValidToken(t->Of(r).token));
      if (!t->Of(r).previous.empty()) RC_ASSERT(IsValidToken(t->Of(r).previous));
    }
    return;
  }
  RC_ASSERT(t.error().code == ErrorCode::kInvalidRequest);
  RC_ASSERT(!t.error().message.empty());
  for (const std::string& l : lines) {
    const size_t eq = l.find('=');
    const std::string value = eq == std::string::npos ? l : l.substr(eq + 1);
    // Blank-free runs of 12+ characters could be a token (the fixed texts have none that
    // long except inside words a token of the generator is unlikely to equal).
    size_t start = 0;
    while (start < value.size()) {
      size_t end = value.find_first_of(" \t\r\n", start);
      if (end == std::string::npos) end = value.size();
      if (end - start >= 12) {
        RC_ASSERT(t.error().message.find(value.substr(start, end - start)) == std::string::npos);
      }
      start = end + 1;
    }
  }
}

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rsc-auth-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    path_ = d != nullptr ? d : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(LoadTokensFile, ReadsAPrivateFile) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (mode_t mode : {0600, 0400, 0640, 0440}) {
    const std::string p = dir.Write("tokens", "admin=admin-token-0123456789\n", mode);
    auto t = LoadTokensFile(p);
    ASSERT_TRUE(t.ok()) << std::oct << mode << ": " << t.error().message;
    EXPECT_EQ(t->admin.token, "admin-token-0123456789");
  }
}

TEST(LoadTokensFile, RefusesFilesOthersCanReadOrChange) {
  TempDir dir;
  for (mode_t mode : {0644, 0604, 0602, 0620, 0666}) {
    const std::string p = dir.Write("tokens", "admin=admin-token-0123456789\n", mode);
    auto t = LoadTokensFile(p);
    ASSERT_FALSE(t.ok()) << std::oct << mode;
    EXPECT_NE(t.error().message.find(p), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find("chmod 600"), std::string::npos) << t.error().message;
    EXPECT_EQ(t.error().message.find("admin-token-0123456789"), std::string::npos);
  }
}

TEST(LoadTokensFile, RefusesMissingDirectoryHugeAndMalformedFiles) {
  TempDir dir;
  auto missing = LoadTokensFile(dir.path() + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("No such file"), std::string::npos)
      << missing.error().message;
  auto directory = LoadTokensFile(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("not a regular file"), std::string::npos);
  const std::string huge =
      dir.Write("huge", "# " + std::string(kMaxTokensFileBytes, 'x') + "\n", 0600);
  auto big = LoadTokensFile(huge);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("larger than"), std::string::npos);
  const std::string bad = dir.Write("bad", "admin=ok-token-0123456\nmonitor\n", 0600);
  auto malformed = LoadTokensFile(bad);
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.error().message, "tokens file " + bad + ": line 2: expected role=token");
}

TEST(CombineTokens, ARoleComesFromOnePlace) {
  TokenConfig flags = Config(true, false, false);
  TokenConfig file;
  file.monitor.token = kMonitor;
  file.member.token = kMember;
  auto combined = CombineTokens(flags, file);
  ASSERT_TRUE(combined.ok()) << combined.error().message;
  EXPECT_EQ(combined->admin.token, kAdmin);
  EXPECT_EQ(combined->monitor.token, kMonitor);
  EXPECT_EQ(combined->member.token, kMember);

  file.admin.token = "admin-token-from-the-file";
  auto conflict = CombineTokens(flags, file);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.error().message,
            "the admin token is given both by --admin-token (or RSC_ADMIN_TOKEN) and in the "
            "tokens file: configure each role in one place");

  // A monitor flag with no admin token anywhere.
  auto lonely = CombineTokens(Config(false, true, false), std::nullopt);
  ASSERT_FALSE(lonely.ok());
  EXPECT_NE(lonely.error().message.find("a monitor token needs an admin token"), std::string::npos);
  // A monitor flag with the admin token in the file is fine.
  TokenConfig admin_file = Config(true, false, false);
  EXPECT_TRUE(CombineTokens(Config(false, true, false), admin_file).ok());
  // Nothing anywhere: everything open, as in v1.
  auto none = CombineTokens(TokenConfig{}, std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->Empty());
}

}  // namespace
}  // namespace rsc
