#pragma once
// The coordinator's HTTP API: turns an HttpRequest into one CoordinatorApi call and its
// JSON answer. Per request, in this order:
//   1. route (router.h): 404 NOT_FOUND, 405 METHOD_NOT_ALLOWED (with Allow), 400 for bad
//      P/G/member names (R2.4)
//   2. roles (auth.h, SPEC O4): a route whose class needs a token takes
//      `Authorization: Bearer <token>`; none or an unknown one is 401 UNAUTHORIZED (with
//      WWW-Authenticate: Bearer), a token of a role the route does not admit 403 FORBIDDEN
//   3. client requests and admin mutations pass the ShutdownGate: 503
//      COORDINATOR_TERMINATING once terminating; requests already inside complete (S1)
//   4. body/query validation (protocol_json.h): 400 INVALID_REQUEST naming the field
//   5. the CoordinatorApi call; an Error becomes HttpStatus(code) with
//      {"error": CODE, "message": ...}
//   6. an admin mutation the service reports committed is recorded by the Auditor (SPEC
//      O4) — also when a later step of the request failed — with the actor from step 2 and
//      the revisions the service reported; a failed record does not change the answer
//      (audit.h)
// Every request is counted in rsc_http_requests_total / _duration_seconds and logged as
// one line at debug level (warn for status >= 500); requests routing did not match are
// counted under route="unmatched" (401 and 403 under their route). Heartbeat and leave
// outcomes are counted in rsc_heartbeats_total{status} HERE, including requests refused
// before reaching the service (401, 403, 503), so GroupService must not count them again.
//
// PATCH with a partial config: the missing fields come from the group's current config,
// read with DescribeGroup; if that read shows a revision other than expectedRevision the
// patch is refused with REVISION_CONFLICT right away (the service would refuse it too,
// SPEC I4), so the merge always starts from the revision the patch is applied to.
//
// Thread safety: Handle() and HandleAsync() run concurrently on the server's worker threads
// (a heartbeat's answer is finished on its batch's leader thread); the Api
// holds no mutable state of its own. `api`, `gate` and `metrics` must outlive it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "server/audit.h"
#include "server/auth.h"
#include "server/coordinator_api.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/router.h"
#include "server/shutdown_gate.h"

namespace rsc {

struct ApiOptions {
  // The configured tokens (SPEC O4), validated (ValidateTokens); none: every route is open.
  TokenConfig tokens;
  // Optional source of the open-connection count reported on /metrics.
  std::function<int64_t()> open_connections;
  // Records admin mutations (SPEC O4); nullptr: none are (test doubles). Must outlive the Api.
  Auditor* auditor = nullptr;
};

class Api : public HttpHandler {
 public:
  Api(CoordinatorApi& api, ShutdownGate& gate, Metrics& metrics, ApiOptions options = {});

  HttpResponse Handle(const HttpRequest& req) override;
  // Heartbeat and leave: answered from the group's batch (CoordinatorApi::HeartbeatAsync,
  // whose blocking work goes to `spawn`), with no thread waiting for it; every other route
  // (called on a worker): Handle(req).
  void HandleAsync(const HttpRequest& req, Done done, const Spawn& spawn) override;
  // Heartbeat and leave: HandleAsync only parses and queues them, on the IO thread.
  bool IsQueued(const HttpRequest& req) const override;
  // /healthz, /metrics and the console's files (/ui) never block: they run on the IO thread.
  bool IsInline(const HttpRequest& req) const override;
  // Counts server-made replies (400 malformed HTTP, 413, 503 stopping) under
  // rsc_http_requests_total{route="http_protocol"}.
  void OnServerReply(int status) override;

 private:
  struct Outcome;
  Outcome Dispatch(const RouteMatch& m, const HttpRequest& req);
  // Steps 2 and 3: an Outcome when the request is refused there; else nullopt, with the
  // actor and, for a gated route, the gate's guard (held until the request is answered).
  std::optional<Outcome> Admit(const RouteMatch& m, const HttpRequest& req, std::string_view* actor,
                               std::optional<ShutdownGate::Guard>* guard);
  Outcome HeartbeatOutcome(const Result<HeartbeatResponse>& r);
  // Counts and logs the request; its response.
  HttpResponse Finish(const HttpRequest& req, std::string_view route,
                      std::chrono::steady_clock::time_point start, Outcome out);
  Outcome Patch(const RouteMatch& m, const HttpRequest& req, RevisionChange* change);
  // Hands a committed mutation of `m.route` to the auditor, if any (also when the request
  // then failed: the change happened).
  void Audit(std::string_view actor, const RouteMatch& m, const RevisionChange& change) const;

  CoordinatorApi& api_;
  ShutdownGate& gate_;
  Metrics& metrics_;
  const ApiOptions options_;
  const Authorizer auth_;
};

}  // namespace rsc
