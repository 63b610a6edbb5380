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
  app.add_option("--admin-token", admin_token, "Bearer token of the admin API")
      ->envname("RSC_ADMIN_TOKEN");
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
  if (!IsValidAdminToken(admin_token)) {
    std::cerr << "rsc: --admin-token: only printable ASCII without blanks is allowed\n";
    return kExitUsage;
  }
  const std::chrono::milliseconds timeout(timeout_ms);
  Context ctx;
  for (const rsc::client::HttpEndpoint& ep : endpoints) ctx.coordinators.push_back(ep.ToString());
  AdminClient admin(std::move(endpoints), admin_token, timeout);
  ctx.admin = &admin;
  ctx.timeout = timeout;
  ctx.json = json;
  ctx.out = &std::cout;
  ctx.err = &std::cerr;
  const int rc = selected ? selected(ctx) : kExitUsage;
  std::cout.flush();
  return rc;
}
