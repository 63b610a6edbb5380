// The web console's embedded files (server/ui_assets.h, SPEC O3): the lookup, content types,
// the /ui responses and their headers, and that what the build embedded is exactly what
// src/server/ui/ holds.

#include "server/ui_assets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/protocol_json.h"

namespace rsc {
namespace {

std::string HeaderOf(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::filesystem::path kUiDir = std::filesystem::path(RSC_SOURCE_DIR) / "src/server/ui";

TEST(FindUiAsset, TheConsoleFilesWithTheirContentTypes) {
  struct Case {
    std::string_view name, content_type;
  };
  for (const Case& c : {Case{"index.html", "text/html; charset=utf-8"},
                        Case{"app.js", "text/javascript; charset=utf-8"},
                        Case{"style.css", "text/css; charset=utf-8"}}) {
    std::optional<UiAsset> a = FindUiAsset(c.name);
    ASSERT_TRUE(a.has_value()) << c.name;
    EXPECT_EQ(a->name, c.name);
    EXPECT_EQ(a->content_type, c.content_type) << c.name;
    EXPECT_FALSE(a->bytes.empty()) << c.name;
    // A quoted opaque tag (RFC 9110 §8.8.3): 16 hex digits of the file's SHA-256.
    EXPECT_TRUE(std::regex_match(std::string(a->etag), std::regex("\"[0-9a-f]{16}\""))) << a->etag;
  }
  // "" is the directory itself: index.html.
  std::optional<UiAsset> index = FindUiAsset("");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->name, "index.html");
}

TEST(FindUiAsset, OnlyTheEmbeddedNamesExactly) {
  for (std::string_view name :
       {"nope.js", "../index.html", "..", ".", "/index.html", "./app.js", "ui/app.js", "APP.JS",
        "app.js/", "app.js%00", "app.js?x", "%61pp.js", "index.htm", "app", "CMakeLists.txt"}) {
    EXPECT_FALSE(FindUiAsset(name).has_value()) << name;
  }
}

TEST(UiContentType, ByExtension) {
  EXPECT_EQ(UiContentType("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(UiContentType("a.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(UiContentType("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(UiContentType("a.svg"), "image/svg+xml");
  EXPECT_EQ(UiContentType("a.png"), "image/png");
  EXPECT_EQ(UiContentType("a.json"), "application/json");
  EXPECT_EQ(UiContentType("a.txt"), "text/plain; charset=utf-8");
  EXPECT_EQ(UiContentType("a.bin"), "application/octet-stream");
  EXPECT_EQ(UiContentType("js"), "application/octet-stream");
  EXPECT_EQ(UiContentType(""), "application/octet-stream");
}

TEST(ServeUi, TheBarePathRedirectsToTheDirectory) {
  HttpResponse r = ServeUi("/ui", "");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(HeaderOf(r, "Location"), "/ui/");
}

TEST(ServeUi, FilesWithTypeCspAndRevalidation) {
  HttpResponse index = ServeUi("/ui/", "");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index.body, std::string(FindUiAsset("index.html")->bytes));
  HttpResponse js = ServeUi("/ui/app.js", "");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(HeaderOf(js, "ETag"), FindUiAsset("app.js")->etag);
  for (const HttpResponse* r : {&index, &js}) {
    EXPECT_EQ(HeaderOf(*r, "Content-Security-Policy"), kUiContentSecurityPolicy);
    EXPECT_EQ(HeaderOf(*r, "X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(HeaderOf(*r, "Cache-Control"), "no-cache");
    EXPECT_EQ(HeaderOf(*r, "Referrer-Policy"), "no-referrer");
  }
  // The policy allows this origin only: no inline script, no other host.
  EXPECT_NE(kUiContentSecurityPolicy.find("default-src 'self'"), std::string_view::npos);
  EXPECT_EQ(kUiContentSecurityPolicy.find("unsafe-inline"), std::string_view::npos);
  EXPECT_EQ(kUiContentSecurityPolicy.find("unsafe-eval"), std::string_view::npos);
}

TEST(ServeUi, UnknownFilesAndTraversalAre404) {
  for (std::string_view path :
       {"/ui/nope.js", "/ui/../v1/groups", "/ui/%2e%2e/README.md", "/ui/./app.js", "/ui//app.js",
        "/ui/app.js/", "/ui/sub/app.js", "/uiapp.js", "/v1/groups", "/ui/../../etc/passwd"}) {
    HttpResponse r = ServeUi(path, "");
    EXPECT_EQ(r.status, 404) << path;
    auto e = ParseErrorBody(r.body);
    ASSERT_TRUE(e.ok()) << path << ": " << r.body;
    EXPECT_EQ(e->error, "NOT_FOUND") << path;
    EXPECT_EQ(r.content_type, "application/json") << path;
    EXPECT_EQ(HeaderOf(r, "Content-Security-Policy"), kUiContentSecurityPolicy) << path;
  }
}

TEST(ServeUi, IfNoneMatchGets304WithoutBody) {
  const std::string etag(FindUiAsset("app.js")->etag);
  for (const std::string& header :
       {etag, "W/" + etag, "\"other\", " + etag, "\"other\" ,W/" + etag + " ", std::string("*")}) {
    HttpResponse r = ServeUi("/ui/app.js", header);
    EXPECT_EQ(r.status, 304) << header;
    EXPECT_TRUE(r.body.empty()) << header;
    EXPECT_EQ(HeaderOf(r, "ETag"), etag);
  }
  for (std::string_view header : {"\"other\"", "", "W/", ","}) {
    EXPECT_EQ(ServeUi("/ui/app.js", header).status, 200) << header;
  }
  // Each file has its own tag.
  EXPECT_EQ(ServeUi("/ui/style.css", etag).status, 200);
}

// The build embedded exactly the files in src/server/ui/ (a stale build or a file left out
// of the glob would serve something else than what was reviewed).
TEST(EmbeddedUiFiles, MatchTheSourceDirectory) {
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(kUiDir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.starts_with(".") || name.ends_with("~")) continue;
    on_disk.insert(name);
    std::optional<UiAsset> a = FindUiAsset(name);
    ASSERT_TRUE(a.has_value()) << name << " is in src/server/ui but not embedded";
    EXPECT_EQ(std::string(a->bytes), ReadFile(entry.path())) << name << " differs from its source";
  }
  std::set<std::string> embedded;
  std::string previous;
  for (const detail::EmbeddedUiFile& f : detail::EmbeddedUiFiles()) {
    embedded.insert(std::string(f.name));
    EXPECT_LT(previous, f.name) << "the table must be sorted for the lookup";
    previous = std::string(f.name);
  }
  EXPECT_EQ(embedded, on_disk);
}

// Every local file the page refers to (src="…", href="…") is embedded.
TEST(EmbeddedUiFiles, ThePageRefersOnlyToEmbeddedFiles) {
  const std::string index(FindUiAsset("index.html")->bytes);
  std::regex ref(R"re((?:src|href)="([^"#:]+)")re");
  int refs = 0;
  for (auto it = std::sregex_iterator(index.begin(), index.end(), ref);
       it != std::sregex_iterator(); ++it) {
    ++refs;
    EXPECT_TRUE(FindUiAsset((*it)[1].str()).has_value()) << (*it)[1].str();
  }
  EXPECT_GE(refs, 2);  // the script and the style sheet
  // No script or style inline: the CSP (default-src 'self') would refuse it.
  EXPECT_FALSE(std::regex_search(index, std::regex("<script>|<script [^>]*>[^<]")));
  EXPECT_EQ(index.find("<style"), std::string::npos);
  EXPECT_EQ(index.find(" style=\""), std::string::npos);
}

}  // namespace
}  // namespace rsc
