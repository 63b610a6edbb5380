#include "server/api.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <limits>
#include <optional>
#include <utility>

#include "core/protocol_json.h"
#include "server/ui_assets.h"

namespace rsc {
namespace {

constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// Reads an optional non-negative integer query parameter.
Result<std::optional<int64_t>> QueryInt(const std::map<std::string, std::string>& q,
                                        const std::string& name) {
  auto it = q.find(name);
  if (it == q.end()) return std::optional<int64_t>();
  const std::string& s = it->second;
  int64_t v = 0;
  bool ok = !s.empty() && s.size() <= 19;
  for (char c : s) {
    if (!ok) break;
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    int d = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - d) / 10) {
      ok = false;
      break;
    }
    v = v * 10 + d;
  }
  if (!ok) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("query parameter {}: must be an integer between 0 and {}", name,
                                 std::numeric_limits<int64_t>::max()));
  }
  return std::optional<int64_t>(v);
}

struct RoutingQuery {
  int64_t observed_version = 0;
  std::string lineage;
};

// ?observedVersion=N&lineage=L of both routing routes (docs/protocol.md 5).
Result<RoutingQuery> ParseRoutingQuery(std::string_view query) {
  RSC_ASSIGN_OR_RETURN(auto q, ParseQuery(query));
  RSC_ASSIGN_OR_RETURN(std::optional<int64_t> version, QueryInt(q, "observedVersion"));
  RoutingQuery out;
  out.observed_version = version.value_or(0);
  if (auto it = q.find("lineage"); it != q.end()) out.lineage = it->second;
  if (out.lineage.size() > kMaxLineageLength) {
    return MakeError(ErrorCode::kInvalidRequest, "query parameter lineage: at most 64 bytes");
  }
  return out;
}

// The heartbeat a heartbeat or leave body carries.
Result<HeartbeatRequest> ParseHeartbeatBody(Route route, std::string_view body) {
  if (route == Route::kHeartbeat) return ParseHeartbeatRequest(body);
  RSC_ASSIGN_OR_RETURN(auto leave, ParseLeaveRequest(body));
  return std::move(leave.heartbeat);
}

}  // namespace

struct Api::Outcome {
  HttpResponse response;
  std::optional<Error> error;  // set when the response is an error body

  static Outcome Ok(int status, std::string body) {
    return Outcome{JsonResponse(status, std::move(body)), std::nullopt};
  }
  static Outcome Fail(Error e) {
    Outcome o{JsonResponse(HttpStatus(e.code), SerializeError(e)), std::move(e)};
    return o;
  }
};

Api::Api(CoordinatorApi& api, ShutdownGate& gate, Metrics& metrics, ApiOptions options)
    : api_(api),
      gate_(gate),
      metrics_(metrics),
      options_(std::move(options)),
      auth_(options_.tokens) {}

bool Api::IsInline(const HttpRequest& req) const {
  if (req.method != "GET") return false;
  std::string_view t = req.target;
  t = t.substr(0, t.find('?'));
  return t == "/healthz" || t == "/metrics" || t == "/ui" || t.starts_with("/ui/");
}

void Api::OnServerReply(int status) { metrics_.OnHttpServerReply(status); }

HttpResponse Api::Handle(const HttpRequest& req) {
  auto start = std::chrono::steady_clock::now();
  std::string allow;
  Result<RouteMatch> m = MatchRoute(req.method, req.target, &allow);
  std::string_view route = "unmatched";
  Outcome out;
  if (!m.ok()) {
    out = Outcome::Fail(m.error());
    if (!allow.empty()) out.response.headers.emplace_back("Allow", allow);
  } else {
    route = RouteName(m->route);
    try {
      out = Dispatch(*m, req);
    } catch (const std::exception& e) {
      spdlog::error("http handler for route {} threw: {}", route, e.what());
      out = Outcome::Fail(MakeError(ErrorCode::kInternal, "internal error"));
    }
  }
  return Finish(req, route, start, std::move(out));
}

bool Api::IsQueued(const HttpRequest& req) const {
  if (req.method != "POST") return false;
  Result<RouteMatch> m = MatchRoute(req.method, req.target, nullptr);
  return m.ok() && (m->route == Route::kHeartbeat || m->route == Route::kLeave);
}

void Api::HandleAsync(const HttpRequest& req, Done done, const Spawn& spawn) {
  auto start = std::chrono::steady_clock::now();
  Result<RouteMatch> m = MatchRoute(req.method, req.target, nullptr);
  if (!m.ok() || (m->route != Route::kHeartbeat && m->route != Route::kLeave)) {
    // Not IsQueued: the server calls this on a worker, which may block.
    return done(Handle(req));
  }
  // Heartbeats and leaves: the same steps as Dispatch, but the answer comes from the
  // group's batch (GroupService::HeartbeatAsync): no thread waits for it, and on the IO
  // thread (IsQueued) nothing here blocks.
  const std::string_view route = RouteName(m->route);
  Outcome out;
  try {
    std::string_view actor;
    std::optional<ShutdownGate::Guard> guard;
    std::optional<Outcome> refused = Admit(*m, req, &actor, &guard);
    if (refused) return done(Finish(req, route, start, std::move(*refused)));
    Result<HeartbeatRequest> hb = ParseHeartbeatBody(m->route, req.body);
    if (!hb.ok()) {
      metrics_.OnHeartbeat(ErrorCodeName(hb.error().code));
      return done(Finish(req, route, start, Outcome::Fail(hb.error())));
    }
    // The guard is held until the answer (S1: requests already inside complete).
    auto held = std::make_shared<std::optional<ShutdownGate::Guard>>(std::move(guard));
    api_.HeartbeatAsync(
        m->key, std::move(*hb),
        [this, &req, route, start, held, done](Result<HeartbeatResponse> r) {
          // Runs on the batch's leader: must not throw into its loop.
          Outcome o;
          try {
            o = HeartbeatOutcome(r);
          } catch (const std::exception& e) {
            spdlog::error("http handler for route {} threw: {}", route, e.what());
            o = Outcome::Fail(MakeError(ErrorCode::kInternal, "internal error"));
          }
          held->reset();
          done(Finish(req, route, start, std::move(o)));
        },
        spawn);
    return;
  } catch (const std::exception& e) {
    spdlog::error("http handler for route {} threw: {}", route, e.what());
    out = Outcome::Fail(MakeError(ErrorCode::kInternal, "internal error"));
  }
  done(Finish(req, route, start, std::move(out)));
}

HttpResponse Api::Finish(const HttpRequest& req, std::string_view route,
                         std::chrono::steady_clock::time_point start, Outcome out) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.OnHttpRequest(route, out.response.status, seconds);
  std::string_view path = req.target;
  path = path.substr(0, path.find('?'));
  auto duration_us = static_cast<int64_t>(seconds * 1e6);
  if (out.response.status >= 500) {
    spdlog::warn("http method={} path={} route={} status={} duration_us={} error={} message=\"{}\"",
                 req.method, path, route, out.response.status, duration_us,
                 out.error ? ErrorCodeName(out.error->code) : "-",
                 out.error ? out.error->message : "");
  } else {
    spdlog::debug("http method={} path={} route={} status={} duration_us={}{}{}", req.method, path,
                  route, out.response.status, duration_us, out.error ? " error=" : "",
                  out.error ? ErrorCodeName(out.error->code) : "");
  }
  return std::move(out.response);
}

std::optional<Api::Outcome> Api::Admit(const RouteMatch& m, const HttpRequest& req,
                                       std::string_view* actor_out,
                                       std::optional<ShutdownGate::Guard>* guard) {
  bool previous_token = false;
  Result<std::string_view> actor =
      auth_.Check(m.route, req.Header("Authorization"), &previous_token);
  if (previous_token) metrics_.OnPreviousToken(*actor);
  if (!actor.ok()) {
    if (m.route == Route::kHeartbeat || m.route == Route::kLeave) {
      metrics_.OnHeartbeat(ErrorCodeName(actor.error().code));
    }
    Outcome o = Outcome::Fail(actor.error());
    if (actor.error().code == ErrorCode::kUnauthorized) {
      o.response.headers.emplace_back("WWW-Authenticate", "Bearer");
    }
    return o;
  }
  *actor_out = *actor;
  if (IsGatedRoute(m.route)) {
    *guard = gate_.Enter();
    if (!*guard) {
      Error e = MakeError(ErrorCode::kCoordinatorTerminating,
                          "coordinator is terminating; retry on another endpoint");
      if (m.route == Route::kHeartbeat || m.route == Route::kLeave) {
        metrics_.OnHeartbeat(ErrorCodeName(e.code));
      }
      return Outcome::Fail(std::move(e));
    }
  }
  return std::nullopt;
}

Api::Outcome Api::Dispatch(const RouteMatch& m, const HttpRequest& req) {
  std::string_view actor;
  std::optional<ShutdownGate::Guard> guard;
  if (std::optional<Outcome> refused = Admit(m, req, &actor, &guard)) return *refused;

  switch (m.route) {
    case Route::kHeartbeat:
    case Route::kLeave: {
      auto hb = ParseHeartbeatBody(m.route, req.body);
      if (!hb.ok()) {
        metrics_.OnHeartbeat(ErrorCodeName(hb.error().code));
        return Outcome::Fail(hb.error());
      }
      return HeartbeatOutcome(api_.Heartbeat(m.key, *hb));
    }
    case Route::kRouting:
    case Route::kStreamRouting: {
      auto q = ParseRoutingQuery(m.query);
      if (!q.ok()) return Outcome::Fail(q.error());
      auto r = m.route == Route::kRouting
                   ? api_.Routing(m.key, q->observed_version, q->lineage)
                   : api_.StreamRouting(m.key.stream, q->observed_version, q->lineage);
      if (!r.ok()) return Outcome::Fail(r.error());
      return Outcome::Ok(200, SerializeRoutingResponse(*r));
    }
    case Route::kCreateGroup: {
      auto c = ParseCreateGroupRequest(req.body);
      if (!c.ok()) return Outcome::Fail(c.error());
      RevisionChange change;
      auto v = api_.CreateGroup(*c, &change);
      Audit(actor, m, change);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(201, SerializeGroupView(*v));
    }
    case Route::kListGroups: {
      auto l = api_.ListGroups();
      if (!l.ok()) return Outcome::Fail(l.error());
      return Outcome::Ok(200, SerializeGroupList(*l));
    }
    case Route::kDescribeGroup: {
      auto v = api_.DescribeGroup(m.key);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(200, SerializeGroupView(*v));
    }
    case Route::kPatchGroup: {
      RevisionChange change;
      Outcome o = Patch(m, req, &change);
      Audit(actor, m, change);
      return o;
    }
    case Route::kDeleteGroup: {
      auto q = ParseQuery(m.query);
      if (!q.ok()) return Outcome::Fail(q.error());
      auto rev = QueryInt(*q, "expectedRevision");
      if (!rev.ok()) return Outcome::Fail(rev.error());
      if (!rev->has_value()) {
        return Outcome::Fail(
            MakeError(ErrorCode::kInvalidRequest, "query parameter expectedRevision: is required"));
      }
      RevisionChange change;
      Status s = api_.DeleteGroup(m.key, **rev, &change);
      Audit(actor, m, change);
      if (!s.ok()) return Outcome::Fail(s.error());
      metrics_.ForgetGroup(m.key);
      return Outcome::Ok(200, SerializeDeleted(m.key));
    }
    case Route::kFenceMember: {
      RevisionChange change;
      auto v = api_.FenceMember(m.key, MemberId(m.member), &change);
      Audit(actor, m, change);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(200, SerializeGroupView(*v));
    }
    case Route::kExportGroup: {
      auto doc = api_.ExportGroup(m.key);
      if (!doc.ok()) return Outcome::Fail(doc.error());
      return Outcome::Ok(200, std::move(*doc));
    }
    case Route::kRestoreGroup: {
      if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
        return Outcome::Fail(
            MakeError(ErrorCode::kInvalidRequest, "body is empty, expected an export document"));
      }
      RevisionChange change;
      auto v = api_.RestoreGroup(req.body, &change);
      Audit(actor, m, change);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(200, SerializeGroupView(*v));
    }
    case Route::kDescribeStream: {
      auto v = api_.DescribeStream(m.key.stream);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(200, SerializeStreamView(*v));
    }
    case Route::kPatchStream: {
      auto body = ParsePatchStreamRequest(req.body);
      if (!body.ok()) return Outcome::Fail(body.error());
      RevisionChange change;
      auto v = api_.PatchStream(m.key.stream, *body, &change);
      Audit(actor, m, change);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(200, SerializeStreamView(*v));
    }
    case Route::kReshard: {
      auto body = ParseReshardRequest(req.body);
      if (!body.ok()) return Outcome::Fail(body.error());
      RevisionChange change;
      auto v =
          api_.Reshard(m.key.stream, body->expected_layout_revision, body->shard_count, &change);
      Audit(actor, m, change);
      if (!v.ok()) return Outcome::Fail(v.error());
      return Outcome::Ok(200, SerializeStreamView(*v));
    }
    case Route::kHealthz:
      return Outcome::Ok(200, R"({"status":"ok"})");
    case Route::kReadyz: {
      if (gate_.terminating()) {
        return Outcome::Fail(
            MakeError(ErrorCode::kCoordinatorTerminating, "coordinator is terminating"));
      }
      Status s = api_.Ready();
      if (!s.ok()) {
        Outcome o = Outcome::Fail(s.error());
        o.response.status = 503;  // not ready, whatever the reason
        return o;
      }
      return Outcome::Ok(200, R"({"status":"ready"})");
    }
    case Route::kUi: {
      HttpResponse r = ServeUi(m.path, req.Header("If-None-Match"));
      std::optional<Error> e;
      if (r.status == 404) e = MakeError(ErrorCode::kNotFound, "no console file");
      return Outcome{std::move(r), std::move(e)};
    }
    case Route::kMetrics: {
      metrics_.SetTerminating(gate_.terminating());
      if (options_.open_connections) metrics_.SetOpenConnections(options_.open_connections());
      Outcome o = Outcome::Ok(200, metrics_.Serialize());
      o.response.content_type = std::string(kPrometheusContentType);
      return o;
    }
  }
  return Outcome::Fail(MakeError(ErrorCode::kInternal, "unhandled route"));
}

Api::Outcome Api::HeartbeatOutcome(const Result<HeartbeatResponse>& r) {
  if (!r.ok()) {
    metrics_.OnHeartbeat(ErrorCodeName(r.error().code));
    return Outcome::Fail(r.error());
  }
  metrics_.OnHeartbeat(HeartbeatStatusName(r->status));
  return Outcome::Ok(200, SerializeHeartbeatResponse(*r));
}

Api::Outcome Api::Patch(const RouteMatch& m, const HttpRequest& req, RevisionChange* change) {
  auto body = ParsePatchGroupBody(req.body);
  if (!body.ok()) return Outcome::Fail(body.error());
  GroupConfig current;
  if (body->config && !body->config->Complete()) {
    auto view = api_.DescribeGroup(m.key);
    if (!view.ok()) return Outcome::Fail(view.error());
    if (view->revision != body->expected_revision) {
      return Outcome::Fail(
          MakeError(ErrorCode::kRevisionConflict,
                    fmt::format("expectedRevision {} does not match the current revision {}",
                                body->expected_revision, view->revision)));
    }
    current = view->config;
  }
  auto patch = ResolvePatch(*body, current);
  if (!patch.ok()) return Outcome::Fail(patch.error());
  auto v = api_.PatchGroup(m.key, *patch, change);
  if (!v.ok()) return Outcome::Fail(v.error());
  return Outcome::Ok(200, SerializeGroupView(*v));
}

void Api::Audit(std::string_view actor, const RouteMatch& m, const RevisionChange& change) const {
  if (options_.auditor == nullptr || !change.committed) return;
  AuditRecord r;
  r.actor = std::string(actor);
  r.action = std::string(RouteName(m.route));
  r.stream = change.group.stream;
  r.group = change.group.group;
  r.revision_before = change.before;
  r.revision_after = change.after;
  if (m.route == Route::kFenceMember) r.member = m.member;
  options_.auditor->Record(std::move(r));
}

}  // namespace rsc
