#include "server/router.h"

#include <fmt/format.h>

#include <vector>

#include "core/protocol.h"
#include "core/protocol_json.h"

namespace rsc {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path part of a request-target (origin-form or absolute-form), without the query.
std::string_view PathOf(std::string_view target, std::string_view* query) {
  *query = {};
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.substr(0, scheme.size()) == scheme) {
      size_t slash = target.find_first_of("/?", scheme.size());
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
      if (!target.empty() && target[0] == '?') return "/";
      break;
    }
  }
  size_t q = target.find('?');
  if (q != std::string_view::npos) {
    *query = target.substr(q + 1);
    target = target.substr(0, q);
  }
  return target;
}

Error NotFound(std::string_view path) {
  // The path is echoed so a client sees which URL it got wrong; it is bounded by the
  // HTTP header limit.
  return MakeError(ErrorCode::kNotFound, fmt::format("no route for path {}", path));
}

Result<RouteMatch> Allow(std::string_view method, std::string_view path,
                         std::initializer_list<std::pair<std::string_view, Route>> options,
                         std::string* allow, RouteMatch match) {
  std::string allowed;
  for (const auto& [m, route] : options) {
    if (m == method) {
      match.route = route;
      return match;
    }
    if (!allowed.empty()) allowed += ", ";
    allowed += m;
  }
  if (allow != nullptr) *allow = allowed;
  return MakeError(
      ErrorCode::kMethodNotAllowed,
      fmt::format("method {} is not allowed on {} (allowed: {})", method, path, allowed));
}

Status CheckGroupNames(const GroupKey& key) {
  if (!IsValidStreamName(key.stream)) {
    return MakeError(ErrorCode::kInvalidRequest,
                     "invalid stream name: must match [A-Za-z0-9._:-]{1,200}");
  }
  if (!IsValidGroupName(key.group)) {
    return MakeError(ErrorCode::kInvalidRequest,
                     "invalid group name: must match [A-Za-z0-9._-]{1,128}");
  }
  return OkStatus();
}

}  // namespace

std::string_view RouteName(Route r) {
  switch (r) {
    case Route::kHeartbeat:
      return "heartbeat";
    case Route::kLeave:
      return "leave";
    case Route::kRouting:
      return "routing";
    case Route::kCreateGroup:
      return "create_group";
    case Route::kListGroups:
      return "list_groups";
    case Route::kDescribeGroup:
      return "describe_group";
    case Route::kPatchGroup:
      return "patch_group";
    case Route::kDeleteGroup:
      return "delete_group";
    case Route::kFenceMember:
      return "fence_member";
    case Route::kExportGroup:
      return "export_group";
    case Route::kRestoreGroup:
      return "restore_group";
    case Route::kDescribeStream:
      return "describe_stream";
    case Route::kPatchStream:
      return "patch_stream";
    case Route::kStreamRouting:
      return "stream_routing";
    case Route::kReshard:
      return "reshard";
    case Route::kHealthz:
      return "healthz";
    case Route::kReadyz:
      return "readyz";
    case Route::kMetrics:
      return "metrics";
    case Route::kUi:
      return "ui";
  }
  return "unknown";
}

Access RequiredAccess(Route r) {
  switch (r) {
    case Route::kHealthz:
    case Route::kReadyz:
    case Route::kUi:  // static files only: the page's API calls carry the token (SPEC O4)
      return Access::kPublic;
    case Route::kMetrics:
      return Access::kMetrics;
    case Route::kListGroups:
    case Route::kDescribeGroup:
    case Route::kDescribeStream:
      return Access::kRead;
    case Route::kHeartbeat:
    case Route::kLeave:
    case Route::kRouting:
    case Route::kStreamRouting:
      return Access::kMember;
    case Route::kCreateGroup:
    case Route::kPatchGroup:
    case Route::kDeleteGroup:
    case Route::kFenceMember:
    case Route::kExportGroup:
    case Route::kRestoreGroup:
    case Route::kPatchStream:
    case Route::kReshard:
      return Access::kAdmin;
  }
  return Access::kAdmin;  // unreachable; the strictest class if a route is ever missed
}

std::string_view AccessName(Access a) {
  switch (a) {
    case Access::kPublic:
      return "public";
    case Access::kMetrics:
      return "metrics";
    case Access::kRead:
      return "read";
    case Access::kMember:
      return "member";
    case Access::kAdmin:
      return "admin";
  }
  return "admin";
}

bool IsGatedRoute(Route r) {
  switch (r) {
    case Route::kHeartbeat:
    case Route::kLeave:
    case Route::kRouting:
    case Route::kCreateGroup:
    case Route::kPatchGroup:
    case Route::kDeleteGroup:
    case Route::kFenceMember:
    case Route::kRestoreGroup:
    case Route::kPatchStream:
    case Route::kStreamRouting:
    case Route::kReshard:
      return true;
    default:
      return false;
  }
}

std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = HexValue(s[i + 1]);
    int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

Result<std::map<std::string, std::string>> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view piece = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (piece.empty()) continue;
    size_t eq = piece.find('=');
    auto key = PercentDecode(piece.substr(0, eq));
    auto value =
        PercentDecode(eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1));
    if (!key || !value) {
      return MakeError(ErrorCode::kInvalidRequest, "query string: malformed percent-encoding");
    }
    auto [it, inserted] = out.emplace(std::move(*key), std::move(*value));
    if (!inserted) {
      return MakeError(ErrorCode::kInvalidRequest,
                       fmt::format("query string: parameter '{}' given twice",
                                   it->first.size() <= 64 ? it->first : "(long name)"));
    }
  }
  return out;
}

Result<RouteMatch> MatchRoute(std::string_view method, std::string_view target,
                              std::string* allow) {
  RouteMatch match;
  std::string_view query;
  std::string_view path = PathOf(target, &query);
  match.path = std::string(path);
  match.query = std::string(query);
  if (path.empty() || path[0] != '/') return NotFound(path);

  // Split on '/' first, decode second (see header).
  std::vector<std::string> seg;
  std::string_view rest = path.substr(1);
  while (true) {
    size_t slash = rest.find('/');
    auto decoded = PercentDecode(rest.substr(0, slash));
    if (!decoded) {
      return MakeError(ErrorCode::kInvalidRequest, "path: malformed percent-encoding");
    }
    seg.push_back(std::move(*decoded));
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }
  using R = Route;
  const size_t n = seg.size();
  // The console: every path under /ui is its (ui_assets.h looks the file up by name).
  if (seg[0] == "ui") return Allow(method, path, {{"GET", R::kUi}}, allow, match);
  if (n == 1) {
    if (seg[0] == "healthz") return Allow(method, path, {{"GET", R::kHealthz}}, allow, match);
    if (seg[0] == "readyz") return Allow(method, path, {{"GET", R::kReadyz}}, allow, match);
    if (seg[0] == "metrics") return Allow(method, path, {{"GET", R::kMetrics}}, allow, match);
    return NotFound(path);
  }
  if ((n == 3 || (n == 4 && (seg[3] == "reshard" || seg[3] == "routing"))) && seg[0] == "v1" &&
      seg[1] == "streams") {
    match.key.stream = seg[2];
    Result<RouteMatch> r =
        n == 3 ? Allow(method, path, {{"GET", R::kDescribeStream}, {"PATCH", R::kPatchStream}},
                       allow, match)
        : seg[3] == "reshard" ? Allow(method, path, {{"POST", R::kReshard}}, allow, match)
                              : Allow(method, path, {{"GET", R::kStreamRouting}}, allow, match);
    if (r.ok() && !IsValidStreamName(seg[2])) {
      return MakeError(ErrorCode::kInvalidRequest,
                       "invalid stream name: must match [A-Za-z0-9._:-]{1,200}");
    }
    return r;
  }
  if (n < 2 || seg[0] != "v1" || seg[1] != "groups") return NotFound(path);
  if (n == 2) {
    return Allow(method, path, {{"GET", R::kListGroups}, {"POST", R::kCreateGroup}}, allow, match);
  }
  if (n == 3) {
    if (seg[2] == "restore") {
      return Allow(method, path, {{"POST", R::kRestoreGroup}}, allow, match);
    }
    return NotFound(path);
  }
  match.key = GroupKey{seg[2], seg[3]};
  Result<RouteMatch> r = NotFound(path);
  if (n == 4) {
    r = Allow(method, path,
              {{"GET", R::kDescribeGroup}, {"PATCH", R::kPatchGroup}, {"DELETE", R::kDeleteGroup}},
              allow, match);
  } else if (n == 5 && seg[4] == "heartbeat") {
    r = Allow(method, path, {{"POST", R::kHeartbeat}}, allow, match);
  } else if (n == 5 && seg[4] == "leave") {
    r = Allow(method, path, {{"POST", R::kLeave}}, allow, match);
  } else if (n == 5 && seg[4] == "routing") {
    r = Allow(method, path, {{"GET", R::kRouting}}, allow, match);
  } else if (n == 5 && seg[4] == "export") {
    r = Allow(method, path, {{"GET", R::kExportGroup}}, allow, match);
  } else if (n == 7 && seg[4] == "members" && seg[6] == "fence") {
    match.member = seg[5];
    r = Allow(method, path, {{"POST", R::kFenceMember}}, allow, match);
  }
  if (!r.ok()) return r;
  if (Status s = CheckGroupNames(r->key); !s.ok()) return s.error();
  if (r->route == R::kFenceMember && !IsValidMemberId(r->member)) {
    return MakeError(ErrorCode::kInvalidRequest,
                     "invalid member id: must match [A-Za-z0-9._:-]{1,128}");
  }
  return r;
}

}  // namespace rsc
