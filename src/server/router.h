#pragma once
// The route table of the coordinator's HTTP API (SPEC §4.1, §5.1, §8, §9), as a pure
// function from (method, request-target) to a route plus its decoded path parameters.
//
//   POST   /v1/groups/{P}/{G}/heartbeat              Route::kHeartbeat
//   POST   /v1/groups/{P}/{G}/leave                  Route::kLeave
//   GET    /v1/groups/{P}/{G}/routing?observedVersion=N&lineage=L
//                                                    Route::kRouting
//   POST   /v1/groups                                Route::kCreateGroup   (201)
//   GET    /v1/groups                                Route::kListGroups
//   POST   /v1/groups/restore                        Route::kRestoreGroup
//   GET    /v1/groups/{P}/{G}                        Route::kDescribeGroup
//   PATCH  /v1/groups/{P}/{G}                        Route::kPatchGroup
//   DELETE /v1/groups/{P}/{G}?expectedRevision=N     Route::kDeleteGroup
//   POST   /v1/groups/{P}/{G}/members/{id}/fence     Route::kFenceMember
//   GET    /v1/groups/{P}/{G}/export                 Route::kExportGroup
//   GET    /v1/streams/{P}                           Route::kDescribeStream
//   PATCH  /v1/streams/{P}                           Route::kPatchStream
//   GET    /v1/streams/{P}/routing?observedVersion=N&lineage=L
//                                                    Route::kStreamRouting
//   POST   /v1/streams/{P}/reshard                   Route::kReshard
//   GET    /healthz, /readyz, /metrics
//   GET    /ui, /ui/, /ui/<file>                     Route::kUi   (the web console, public;
//                                                    ui_assets.h serves it)
//
// The path is split on '/' BEFORE percent-decoding, so an encoded "%2F" can never create
// a segment; each segment is then decoded and P, G and the member id are checked against
// SPEC R2.4 (and the memberId syntax), since they become parts of Redis keys. '+' is
// taken literally (RFC 3986), not as a space. Absolute-form targets
// ("http://host/path") are accepted.
//
// Pure, no shared state: thread-safe.

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/types.h"

namespace rsc {

enum class Route {
  kHeartbeat,
  kLeave,
  kRouting,
  kCreateGroup,
  kListGroups,
  kDescribeGroup,
  kPatchGroup,
  kDeleteGroup,
  kFenceMember,
  kExportGroup,
  kRestoreGroup,
  kDescribeStream,
  kPatchStream,
  kStreamRouting,
  kReshard,
  kHealthz,
  kReadyz,
  kMetrics,
  kUi,
};

// A stable snake_case name, used as the metrics `route` label and in logs.
std::string_view RouteName(Route r);

// Who may call a route (SPEC O4). Which tokens satisfy each class depends on which tokens
// are configured: that is server/auth.h's job; this table only says what a route is.
enum class Access {
  kPublic,   // /healthz, /readyz: orchestrator probes, never a token. The console's static
             // files (/ui/, SPEC O3) belong here too; its API calls are kRead routes.
  kMetrics,  // /metrics: monitor or admin once a monitor token is configured, open otherwise
             // (a v1 Prometheus scrape keeps working with only an admin token configured)
  kRead,     // group and stream views: monitor or admin (admin alone when only an admin
             // token is configured)
  kMember,   // heartbeat, leave, routing: member or admin once a member token is configured
  kAdmin,    // every mutation, and export (it carries the group's lineage key): admin
};
Access RequiredAccess(Route r);
std::string_view AccessName(Access a);
// Routes that pass the ShutdownGate (client requests and admin mutations, SPEC S1).
bool IsGatedRoute(Route r);

struct RouteMatch {
  Route route = Route::kHealthz;
  GroupKey key;        // group routes
  std::string member;  // kFenceMember
  std::string path;    // the raw path (no query), for logs; kUi serves the file it names
  std::string query;   // the raw query string (after '?'), not decoded
};

// Errors:
//   kNotFound          no route has this path
//   kMethodNotAllowed  the path exists for other methods; *allow (if given) lists them
//                      in Allow-header form, e.g. "GET, PATCH, DELETE"
//   kInvalidRequest    bad percent-encoding, or P / G / member id violate R2.4
Result<RouteMatch> MatchRoute(std::string_view method, std::string_view target,
                              std::string* allow = nullptr);

// Decodes %XX escapes; nullopt on a malformed escape. '+' stays '+'.
std::optional<std::string> PercentDecode(std::string_view s);

// Parses "a=1&b=x" (keys and values percent-decoded). Empty pieces are skipped.
// Errors: kInvalidRequest on a malformed escape or a key given twice.
Result<std::map<std::string, std::string>> ParseQuery(std::string_view query);

}  // namespace rsc
