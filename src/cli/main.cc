// rsc: the admin CLI of the Redis Stream Coordinator (SPEC §9, docs/cli.md).

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

int main(int argc, char** argv) {
  using namespace rsc::cli;
  std::string coordinators = "http://127.0.0.1:7400";
  std::string admin_token;
  std::string monitor_token;
  std::string member_token;
  bool json = false;
  int64_t timeout_ms = 5000;

  CLI::App app{"rsc: admin CLI of the Redis Stream Coordinator (docs/cli.md)", "rsc"};
  app.footer(kExitCodesFooter);
  app.require_subcommand(1);
  // Global options may come after the subcommand too (`rsc describe P G --json`).
  app.fallthrough();
  app.add_option("--coordinator", coordinators,
                 "Coordinator URL, or a comma-separated list tried in order on connection "
                 "errors and retryable 503s")
      ->envname("RSC_COORDINATOR")
      ->capture_default_str();
  app.add_option("--admin-token", admin_token,
                 "Bearer token sent on admin API calls (the coordinator's admin token)")
      ->envname("RSC_ADMIN_TOKEN");
  app.add_option("--monitor-token", monitor_token,
                 "Sent on admin API calls instead when no admin token is given: enough for "
                 "list, describe, stream (the coordinator's monitor token)")
      ->envname("RSC_MONITOR_TOKEN");
  app.add_option("--member-token", member_token,
                 "Sent by consume, produce and demo on heartbeats and routing (the "
                 "coordinator's member token); default: the admin token")
      ->envname("RSC_MEMBER_TOKEN");
  app.add_flag("--json", json, "Machine output: only JSON on stdout");
  app.add_option("--timeout-ms", timeout_ms, "Per-request timeout")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}))
      ->capture_default_str();

  Command selected;
  AddGroupCommands(app, &selected);
  AddReshardCommand(app, &selected);
  AddTransferCommands(app, &selected);
  AddProduceCommand(app, &selected);
  AddConsumeCommand(app, &selected);
  AddDemoCommand(app, &selected);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;  // --help is not an error
  }

  std::vector<rsc::client::HttpEndpoint> endpoints;
  std::string error;
  if (!ParseEndpointList(coordinators, &endpoints, &error)) {
    std::cerr << "rsc: --coordinator: " << error << "\n";
    return kExitUsage;
  }
  for (const auto& [flag, token] :
       {std::pair<const char*, const std::string*>{"--admin-token", &admin_token},
        {"--monitor-token", &monitor_token},
        {"--member-token", &member_token}}) {
    if (!IsValidAdminToken(*token)) {
      std::cerr << "rsc: " << flag
                << ": only printable ASCII without blanks is allowed (at most 1024)\n";
      return kExitUsage;
    }
  }
  const std::chrono::milliseconds timeout(timeout_ms);
  Context ctx;
  for (const rsc::client::HttpEndpoint& ep : endpoints) ctx.coordinators.push_back(ep.ToString());
  // Admin API calls carry the admin token, else the monitor token (reads only); the
  // clients consume, produce and demo run carry the member token, else the admin token.
  AdminClient admin(std::move(endpoints),
                    admin_token.empty() ? AdminToken{monitor_token, "--monitor-token"}
                                        : AdminToken{admin_token, "--admin-token"},
                    timeout);
  ctx.member_token = member_token.empty() ? admin_token : member_token;
  ctx.admin = &admin;
  ctx.timeout = timeout;
  ctx.json = json;
  ctx.out = &std::cout;
  ctx.err = &std::cerr;
  const int rc = selected ? selected(ctx) : kExitUsage;
  std::cout.flush();
  if (rc == kExitOk && !std::cout) {  // what the command printed did not all arrive
    std::cerr << "rsc: cannot write to stdout\n";
    return kExitUsage;
  }
  return rc;
}
