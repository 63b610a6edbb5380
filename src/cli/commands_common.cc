#include <ostream>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "core/protocol_json.h"

namespace rsc::cli {

std::string GroupPath(const std::string& stream, const std::string& group) {
  return "/v1/groups/" + EncodePathSegment(stream) + "/" + EncodePathSegment(group);
}

int Fail(Context& ctx, const CallOutcome& outcome) {
  *ctx.err << "rsc: " << outcome.message << "\n";
  return outcome.exit_code;
}

void AddMetricsFlags(CLI::App* cmd, MetricsFlags* flags) {
  cmd->add_option("--metrics-port", flags->port,
                  "Serve this process's client metrics (Prometheus text) on GET /metrics at this "
                  "port (0: a free port, printed on stderr); off when not given")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-host", flags->host,
                  "Address the metrics listener binds (0.0.0.0: every interface)")
      ->capture_default_str();
}

int StartMetrics(const MetricsFlags& flags, const MetricsRegistry& registry, Context& ctx,
                 std::unique_ptr<MetricsServer>* server) {
  server->reset();
  if (flags.port < 0) return kExitOk;
  MetricsServerOptions options;
  options.host = flags.host;
  options.port = static_cast<uint16_t>(flags.port);
  std::string error;
  *server = MetricsServer::Start(options, registry, &error);
  if (*server == nullptr) {
    *ctx.err << "rsc: " << error << "\n";
    return kExitUsage;
  }
  const bool v6 = flags.host.find(':') != std::string::npos;
  *ctx.err << "rsc: metrics on http://" << (v6 ? "[" + flags.host + "]" : flags.host) << ":"
           << (*server)->port() << "/metrics\n";
  ctx.err->flush();
  return kExitOk;
}

namespace {

// The group's current revision, or the failed describe.
CallOutcome ReadRevision(Context& ctx, const std::string& stream, const std::string& group,
                         int64_t* revision) {
  CallOutcome read = ctx.admin->Call("GET", GroupPath(stream, group), "", Replay::kSafe);
  if (!read.ok()) return read;
  Result<GroupView> view = ParseGroupView(read.body);
  if (!view.ok()) {
    read.exit_code = kExitServerError;
    read.message = "malformed group view from " + read.endpoint + ": " + view.error().message;
    return read;
  }
  *revision = view->revision;
  return read;
}

}  // namespace

CallOutcome WithRevision(Context& ctx, const std::string& stream, const std::string& group,
                         std::optional<int64_t> expected_revision,
                         const std::function<CallOutcome(int64_t revision)>& send) {
  if (expected_revision) return send(*expected_revision);
  for (int attempt = 0;; ++attempt) {
    int64_t revision = 0;
    if (CallOutcome read = ReadRevision(ctx, stream, group, &revision); !read.ok()) return read;
    CallOutcome result = send(revision);
    if (result.code != "REVISION_CONFLICT" || attempt == 1) return result;
    // The revision moves whenever a tick or heartbeat writes (docs/protocol.md §13), so one
    // conflict between our read and our write is ordinary; a second one is reported.
    *ctx.err << "rsc: revision " << revision
             << " was overtaken (REVISION_CONFLICT); re-reading the group and retrying once\n";
  }
}

std::string StreamPath(const std::string& stream) {
  return "/v1/streams/" + EncodePathSegment(stream);
}

CallOutcome ReadStream(Context& ctx, const std::string& stream, StreamView* view) {
  CallOutcome call = ctx.admin->Call("GET", StreamPath(stream), "", Replay::kSafe);
  if (!call.ok()) return call;
  Result<StreamView> parsed = ParseStreamView(call.body);
  if (!parsed.ok()) {
    call.exit_code = kExitServerError;
    call.message = "malformed stream view from " + call.endpoint + ": " + parsed.error().message;
    return call;
  }
  *view = std::move(*parsed);
  return call;
}

}  // namespace rsc::cli
