#include "server/ui_assets.h"

#include <algorithm>
#include <string>

#include "core/protocol_json.h"

namespace rsc {
namespace {

constexpr std::string_view kPrefix = "/ui/";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// RFC 9110 §13.1.2: a list of entity tags or "*"; weak tags compare by their opaque part.
bool ETagMatches(std::string_view if_none_match, std::string_view etag) {
  while (!if_none_match.empty()) {
    size_t comma = if_none_match.find(',');
    std::string_view tag = if_none_match.substr(0, comma);
    if_none_match = comma == std::string_view::npos ? "" : if_none_match.substr(comma + 1);
    size_t b = tag.find_first_not_of(" \t");
    if (b == std::string_view::npos) continue;
    tag = tag.substr(b, tag.find_last_not_of(" \t") + 1 - b);
    if (tag.substr(0, 2) == "W/") tag = tag.substr(2);
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

HttpResponse WithUiHeaders(HttpResponse r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(kUiContentSecurityPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  // Revalidated on every load (a 304 while unchanged), so an upgraded coordinator's console
  // is never mixed with files cached from the previous one.
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace

std::string_view UiContentType(std::string_view name) {
  struct Type {
    std::string_view extension, content_type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const Type& t : kTypes) {
    if (EndsWith(name, t.extension)) return t.content_type;
  }
  return "application/octet-stream";
}

std::optional<UiAsset> FindUiAsset(std::string_view name) {
  if (name.empty()) name = "index.html";
  std::span<const detail::EmbeddedUiFile> files = detail::EmbeddedUiFiles();
  auto it = std::lower_bound(
      files.begin(), files.end(), name,
      [](const detail::EmbeddedUiFile& f, std::string_view n) { return f.name < n; });
  if (it == files.end() || it->name != name) return std::nullopt;
  return UiAsset{it->name, it->bytes, UiContentType(it->name), it->etag};
}

HttpResponse ServeUi(std::string_view path, std::string_view if_none_match) {
  HttpResponse r;
  if (path == "/ui") {
    r.status = 301;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "moved to /ui/\n";
    r.headers.emplace_back("Location", "/ui/");
    return WithUiHeaders(std::move(r));
  }
  std::optional<UiAsset> asset;
  if (path.substr(0, kPrefix.size()) == kPrefix) asset = FindUiAsset(path.substr(kPrefix.size()));
  if (!asset) {
    r.status = 404;
    std::string_view shown = path.size() <= 200 ? path : "(a long path)";
    r.body =
        SerializeError(MakeError(ErrorCode::kNotFound, "no console file at " + std::string(shown)));
    return WithUiHeaders(std::move(r));
  }
  r.headers.emplace_back("ETag", std::string(asset->etag));
  if (ETagMatches(if_none_match, asset->etag)) {
    r.status = 304;
    r.content_type = std::string(asset->content_type);
    return WithUiHeaders(std::move(r));
  }
  r.content_type = std::string(asset->content_type);
  r.body = std::string(asset->bytes);
  return WithUiHeaders(std::move(r));
}

}  // namespace rsc
