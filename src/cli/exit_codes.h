#pragma once
// Exit codes of `rsc` (docs/cli.md). One code per distinct reaction of the script that ran
// it: fix the request (1, 2), try again later or elsewhere (3, 5), re-read and re-decide (4).

namespace rsc::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitServerError = 1,       // the coordinator answered an error (code and message on stderr)
  kExitUsage = 2,             // bad command line, or a change refused locally (e.g. no --yes)
  kExitUnreachable = 3,       // no endpoint answered, or a sent change got no reply
  kExitRevisionConflict = 4,  // REVISION_CONFLICT (after the one retry, when it applies)
  kExitRetryable = 5,         // every endpoint refused with a retryable 503
  kExitTimedOut = 6,          // rsc reshard: --wait-timeout passed, the reshard goes on
};

inline constexpr const char* kExitCodesFooter =
    "Exit codes:\n"
    "  0  ok\n"
    "  1  the coordinator answered an error (CODE: message on stderr), also\n"
    "     UNAUTHORIZED (no or a wrong token) and FORBIDDEN (the token's role may not)\n"
    "  2  usage error (also: delete without --yes when stdin is not a terminal)\n"
    "  3  coordinator unreachable after trying every endpoint, or a change was sent and\n"
    "     no reply came (unknown result: run `rsc describe` before retrying); consume:\n"
    "     its leave was not confirmed\n"
    "  4  REVISION_CONFLICT (after the one automatic retry, when no revision was given)\n"
    "  5  refused with a retryable 503 (COORDINATOR_TERMINATING, REDIS_UNAVAILABLE,\n"
    "     LOCK_TIMEOUT) by every endpoint\n"
    "  6  reshard: --wait-timeout passed before the reshard finished (it goes on; see\n"
    "     `rsc stream` and `rsc describe`)\n"
    "\n"
    "Environment: RSC_COORDINATOR (--coordinator), RSC_ADMIN_TOKEN (--admin-token),\n"
    "RSC_MONITOR_TOKEN (--monitor-token), RSC_MEMBER_TOKEN (--member-token).";

}  // namespace rsc::cli
