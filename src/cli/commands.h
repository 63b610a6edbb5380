#pragma once
// The subcommands of `rsc`. Each Add*Commands call registers its CLI11 subcommands on
// `app`; when one is selected on the command line, its parse callback stores the code to
// run in *selected, and main() runs it with a Context once the global options are known.
// A command returns its exit code (exit_codes.h), having written its result to `out` and
// any failure to `err`.

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/admin_client.h"
#include "core/protocol.h"
#include "rsc/metrics.h"

namespace rsc::cli {

struct Context {
  AdminClient* admin = nullptr;
  std::vector<std::string> coordinators;  // as given, for runtimes with their own client
  std::string member_token;               // the coordinator token those runtimes send ("" = none)
  std::chrono::milliseconds timeout{5000};
  bool json = false;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

using Command = std::function<int(Context&)>;

// create, list, describe, stream, config, delete, fence.
void AddGroupCommands(CLI::App& app, Command* selected);
// reshard (POST /v1/streams/{P}/reshard, then waits and shows progress).
void AddReshardCommand(CLI::App& app, Command* selected);
// export, restore.
void AddTransferCommands(CLI::App& app, Command* selected);
// produce (the Producer runtime, include/rsc/producer.h).
void AddProduceCommand(CLI::App& app, Command* selected);
// consume (the Consumer runtime, include/rsc/consumer.h).
void AddConsumeCommand(CLI::App& app, Command* selected);
// demo (a live rebalancing demo: producer and consumers in one process).
void AddDemoCommand(CLI::App& app, Command* selected);

// Shared by the commands: the group's admin path, and printing a failed call.
std::string GroupPath(const std::string& stream, const std::string& group);
int Fail(Context& ctx, const CallOutcome& outcome);

// --metrics-port / --metrics-host of the commands that run clients (consume, demo): an
// optional /metrics listener (include/rsc/metrics.h, SPEC O2). Off unless --metrics-port is
// given; 0 picks a free port.
struct MetricsFlags {
  std::string host = "127.0.0.1";
  int port = -1;  // -1: off
};
void AddMetricsFlags(CLI::App* cmd, MetricsFlags* flags);
// Starts the listener on `registry` when the flags ask for one and says where on ctx.err
// ("rsc: metrics on http://HOST:PORT/metrics"). Returns kExitOk (with *server null when off),
// or kExitUsage after printing why the listener could not start.
int StartMetrics(const MetricsFlags& flags, const MetricsRegistry& registry, Context& ctx,
                 std::unique_ptr<MetricsServer>* server);

// Runs a revision-checked change (PATCH, DELETE). With `expected_revision` it is sent
// once. Without, the current revision is read first and, on REVISION_CONFLICT (a tick or
// heartbeat wrote in between), read again and the change retried once, saying so on
// stderr; a second conflict ends with kExitRevisionConflict.
CallOutcome WithRevision(Context& ctx, const std::string& stream, const std::string& group,
                         std::optional<int64_t> expected_revision,
                         const std::function<CallOutcome(int64_t revision)>& send);

// "/v1/streams/{P}" with P percent-encoded.
std::string StreamPath(const std::string& stream);

// GET /v1/streams/{P}, parsed into *view; a malformed answer becomes a failed outcome
// (kExitServerError). The outcome keeps the raw body (for --json).
CallOutcome ReadStream(Context& ctx, const std::string& stream, StreamView* view);

}  // namespace rsc::cli
