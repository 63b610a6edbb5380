#pragma once
// AdminClient: the admin API of one or more rsc-coordinator replicas, over the client
// library's HttpTransport (one keep-alive connection per endpoint).
//
// Failover: endpoints are tried in order, starting with the last one that answered. The
// next endpoint is tried when a connection fails before the request was sent, and when
// the coordinator refuses with a retryable 503 (COORDINATOR_TERMINATING, REDIS_UNAVAILABLE,
// LOCK_TIMEOUT: nothing was applied). A request that was sent but got no reply is only
// repeated elsewhere when the caller says it is safe to replay (reads): for a change the
// result is unknown, and repeating a create or restore blindly could apply it twice.
//
// Every outcome carries the exit code `rsc` ends with (exit_codes.h), so commands only
// decide what to print.
//
// Thread safety: none (the CLI is single-threaded).

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/http_transport.h"

namespace rsc::cli {

struct CallOutcome {
  int exit_code = 0;  // kExitOk on a 2xx answer
  int status = 0;     // HTTP status of the answer used (0: none)
  std::string body;   // the answer's body (success) or the error body as sent
  // The server's error code; "UNKNOWN_RESULT" also for a change sent whose reply was lost;
  // "" on success or another transport failure.
  std::string code;
  std::string message;   // for failures: the line to print on stderr
  std::string endpoint;  // the endpoint that answered
  bool ok() const { return exit_code == 0; }
};

enum class Replay {
  kSafe,    // a read: may be sent again to another endpoint after a lost reply
  kUnsafe,  // a change: a lost reply is an unknown result, reported as such
};

// Splits "URL[,URL...]" and parses each with client::ParseHttpEndpoint. False and *error
// for an empty list or a bad entry.
bool ParseEndpointList(std::string_view text, std::vector<client::HttpEndpoint>* out,
                       std::string* error);

// True if `token` can be sent as a bearer token: "" (none), or what the coordinator accepts
// (client::IsValidBearerToken).
bool IsValidAdminToken(std::string_view token);

// The token admin API calls carry, and the flag it came from (named in the hints added to
// UNAUTHORIZED and FORBIDDEN answers).
struct AdminToken {
  std::string value;  // "" = none
  std::string flag;   // "--admin-token" or "--monitor-token"
};

// "orders" -> "orders"; percent-encodes everything outside [A-Za-z0-9._~:-], so a name
// that breaks the rules reaches the coordinator intact and gets its 400 message.
std::string EncodePathSegment(std::string_view segment);

class AdminClient {
 public:
  // Precondition: endpoints non-empty; token.value passes IsValidAdminToken ("" = none).
  AdminClient(std::vector<client::HttpEndpoint> endpoints, AdminToken token,
              std::chrono::milliseconds timeout);

  CallOutcome Call(std::string_view method, std::string_view path, std::string_view body,
                   Replay replay);

 private:
  // UNAUTHORIZED / FORBIDDEN: which token was sent and what to do (SPEC O4).
  void AddAuthHint(CallOutcome& out) const;

  std::vector<std::unique_ptr<client::HttpTransport>> transports_;
  AdminToken token_;
  size_t preferred_ = 0;  // index of the endpoint that answered last
};

}  // namespace rsc::cli
