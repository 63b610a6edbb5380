#pragma once
// Roles and bearer tokens of the coordinator's HTTP API (SPEC O4; docs/protocol.md §2).
//
// Three roles, each enforced only once its token is configured:
//   admin    everything, member endpoints included
//   monitor  reads: group and stream views, /metrics (and the console's API calls, O3)
//   member   heartbeat, leave, routing (consumers and producers)
// A monitor or member token needs an admin token (ValidateTokens). What a route is comes
// from the router's table (RequiredAccess); which tokens satisfy it here:
//
//   configured        public  metrics        read           member          admin
//   nothing           open    open           open           open            open
//   admin             open    open           admin          open            admin
//   admin+monitor     open    admin|monitor  admin|monitor  open            admin
//   admin+member      open    open           admin          admin|member    admin
//   all three         open    admin|monitor  admin|monitor  admin|member    admin
//
// On a route that needs a token: none, a malformed header, or a token that is no
// configured one → UNAUTHORIZED (401); a configured token of a role the route does not
// admit → FORBIDDEN (403). On an open route the header is not looked at (a client may
// send its token before the coordinator starts requiring it: the rollout order of
// docs/runbook.md). Every comparison is constant-time and runs against every configured
// token, so neither the answer's timing nor its kind tells which token came close.
//
// Each role may also have a `previous` token, accepted like the current one while a
// rotation is under way (tokens file only, docs/runbook.md §7c).
//
// Tokens never appear in an error message, a log line or a metric label.
//
// Pure except LoadTokensFile (reads a file). Authorizer is immutable: thread-safe.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "server/router.h"

namespace rsc {

enum class Role { kAdmin, kMonitor, kMember };
inline constexpr std::array<Role, 3> kAllRoles = {Role::kAdmin, Role::kMonitor, Role::kMember};
std::string_view RoleName(Role r);
// The actor of a request no token was asked of (no token configured for its route).
inline constexpr std::string_view kAnonymousActor = "anonymous";

struct RoleTokens {
  std::string token;     // "" = the role is not configured
  std::string previous;  // also accepted during a rotation ("" = none); needs `token`
};

struct TokenConfig {
  RoleTokens admin;
  RoleTokens monitor;
  RoleTokens member;

  RoleTokens& Of(Role r);
  const RoleTokens& Of(Role r) const;
  bool Configured(Role r) const { return !Of(r).token.empty(); }
  bool Empty() const;
};

// Longest token accepted (it travels in one header line).
inline constexpr size_t kMaxTokenLength = 1024;
// Largest tokens file read.
inline constexpr size_t kMaxTokensFileBytes = 64 * 1024;

// True for 1..kMaxTokenLength printable ASCII characters without blanks (what can be sent
// in an Authorization header and written on one line of the tokens file).
bool IsValidToken(std::string_view token);

// Checks a configuration: every token IsValidToken; a monitor or member token only with an
// admin token; a previous token only with a current one of its role; no token used twice
// (for two roles, or as current and previous). Errors (kInvalidRequest) name the role,
// never the token.
Status ValidateTokens(const TokenConfig& tokens);

// The tokens file (docs/protocol.md §2.1): one `role=token` per line, role one of admin,
// monitor, member, admin.previous, monitor.previous, member.previous; blanks around either
// side are ignored; empty lines and lines whose first non-blank character is '#' are
// skipped; CRLF line ends are accepted. Refused, with the line number: a line without '=',
// an unknown role, a role given twice, an empty or invalid token; then ValidateTokens.
// Errors never quote a token (a line that is not role=token may be one).
Result<TokenConfig> ParseTokensFile(std::string_view text);

// Reads and parses the file at `path`. Refused: not a regular file, larger than
// kMaxTokensFileBytes, readable or writable by others, or writable by its group (the
// tokens grant admin access: chmod 600 or 640). Errors name the path.
Result<TokenConfig> LoadTokensFile(const std::string& path);

// The flags (and their environment variables), then the file: a role may be configured in
// one place only (a token in the file that a forgotten environment variable silently
// overrode would defeat a rotation). The result is validated.
Result<TokenConfig> CombineTokens(const TokenConfig& from_flags,
                                  const std::optional<TokenConfig>& from_file);

// The token of an `Authorization: Bearer <token>` header value: the scheme is
// case-insensitive, blanks around the token are trimmed. nullopt for anything else.
std::optional<std::string_view> BearerToken(std::string_view header);

// Compares in time that depends only on `expected`'s length, not on where they differ.
bool ConstantTimeEquals(std::string_view given, std::string_view expected);

class Authorizer {
 public:
  // Precondition: ValidateTokens(tokens) is ok.
  explicit Authorizer(TokenConfig tokens);

  // Whether a request on `route` with this Authorization header value ("" when absent)
  // may proceed. Ok: the actor for logs and the audit trail (a role name, or
  // kAnonymousActor on an open route); *previous (if given) says whether the role's
  // previous token admitted it (a client not yet moved during a rotation). Errors:
  // kUnauthorized, kForbidden, with a message for the error body.
  Result<std::string_view> Check(Route route, std::string_view authorization,
                                 bool* previous = nullptr) const;

  // The roles a route of class `a` admits under this configuration; an empty set: open.
  struct Roles {
    bool admin = false, monitor = false, member = false;
    bool Open() const { return !admin && !monitor && !member; }
    bool Has(Role r) const;
  };
  Roles Admitted(Access a) const;

  bool Configured(Role r) const { return tokens_.Configured(r); }
  // "admin,monitor" (the roles configured) or "off": for the start-up log line.
  std::string Summary() const;

 private:
  // The role whose current or previous token `token` is (*previous: which); every
  // configured token is compared.
  std::optional<Role> Identify(std::string_view token, bool* previous) const;

  const TokenConfig tokens_;
};

}  // namespace rsc
