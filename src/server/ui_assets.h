#pragma once
// The web console (SPEC O3): static files under src/server/ui/, embedded into the binary at
// build time (cmake/EmbedUi.cmake), served read-only at /ui/. The page itself calls the
// admin read endpoints (GET /v1/groups, /v1/groups/{P}/{G}, /v1/streams/{P}) from the
// browser with the token the user enters; the files are public (SPEC O4), since they hold
// no data.
//
//   GET /ui          301 to /ui/ (a relative page needs the trailing slash)
//   GET /ui/         index.html
//   GET /ui/<name>   the embedded file <name>, or 404 NOT_FOUND
//
// <name> is compared as sent (not percent-decoded) with the embedded names, and only with
// them: nothing is read from the file system, so no path can reach anything else.
// Every answer carries a Content-Security-Policy that allows only this origin's scripts,
// styles and API calls, `X-Content-Type-Options: nosniff`, `Cache-Control: no-cache` and an
// ETag; a request whose If-None-Match names the file's ETag gets 304 without a body.
//
// Pure lookups over constant data: thread-safe.

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "server/http_server.h"

namespace rsc {

struct UiAsset {
  std::string_view name;          // e.g. "app.js"
  std::string_view bytes;         // the file's content, static storage
  std::string_view content_type;  // from the name's extension (UiContentType)
  std::string_view etag;          // quoted, e.g. "\"3f2a…\"": changes with the content
};

// The embedded file called `name` ("" means index.html); nullopt for any other name.
std::optional<UiAsset> FindUiAsset(std::string_view name);

// The Content-Type for a file name, by extension; application/octet-stream when unknown.
std::string_view UiContentType(std::string_view name);

// The response for a request path under /ui (the path without its query: "/ui",
// "/ui/", "/ui/app.js", ...). `if_none_match` is the request's If-None-Match header ("" when
// absent).
HttpResponse ServeUi(std::string_view path, std::string_view if_none_match);

// The Content-Security-Policy sent with every /ui response.
inline constexpr std::string_view kUiContentSecurityPolicy =
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

namespace detail {
// One embedded file as the generated source lists it (cmake/EmbedUi.cmake).
struct EmbeddedUiFile {
  std::string_view name;
  std::string_view bytes;
  std::string_view etag;
};
// Sorted by name. Defined in the generated ui_assets_data.cc.
std::span<const EmbeddedUiFile> EmbeddedUiFiles();
}  // namespace detail

}  // namespace rsc
