// `rsc consume`: join a group through the Consumer runtime (include/rsc/consumer.h) and
// print every message it is given, one line each (JSON lines with --json), until Ctrl-C,
// --max messages or --seconds. Leaving is clean: drain, XACK, report REVOKED, leave.
// --metrics-port serves the consumer's metrics meanwhile (include/rsc/metrics.h, SPEC O2).

#include <signal.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "rsc/consumer.h"

namespace rsc::cli {
namespace {

struct ConsumeOpts {
  std::string stream, group, redis_url, instance_id;
  int64_t max = 0;      // 0 = no limit
  int64_t seconds = 0;  // 0 = until a signal
  MetricsFlags metrics;
};

int RunConsume(const ConsumeOpts& o, Context& ctx) {
  ConsumerOptions options;
  options.coordinator_endpoints = ctx.coordinators;
  options.coordinator_token = ctx.member_token;
  options.stream = o.stream;
  options.group = o.group;
  options.redis_url = o.redis_url;
  options.instance_id = o.instance_id;
  options.http_timeout = ctx.timeout;
  options.redis_timeout = ctx.timeout;

  // Signals are taken synchronously below; block them before the runtime starts threads.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::mutex out_mu;
  std::atomic<int64_t> seen{0};
  auto handler = [&](const Message& m) {
    std::lock_guard<std::mutex> lock(out_mu);
    if (o.max > 0 && seen.load() >= o.max) {
      return HandlerResult::Fail("--max reached");  // left pending for the next owner
    }
    if (ctx.json) {
      boost::json::object fields;
      for (const auto& [f, v] : m.fields) fields[f] = v;
      *ctx.out << boost::json::serialize(boost::json::object{{"shard", m.shard},
                                                             {"stream", m.stream},
                                                             {"id", m.id},
                                                             {"fields", std::move(fields)}})
               << "\n";
    } else {
      *ctx.out << "shard " << m.shard << " " << m.id;
      for (const auto& [f, v] : m.fields) *ctx.out << " " << f << "=" << v;
      *ctx.out << "\n";
    }
    ctx.out->flush();
    seen.fetch_add(1);
    return HandlerResult::Ok();
  };
  auto created = Consumer::Create(options, handler);
  if (!created.ok()) {
    *ctx.err << "rsc: consume: " << created.error().message << "\n";
    return kExitUsage;
  }
  Consumer& consumer = *created.value();
  MetricsRegistry registry;
  registry.Add(consumer);
  std::unique_ptr<MetricsServer> metrics;
  if (int rc = StartMetrics(o.metrics, registry, ctx, &metrics); rc != kExitOk) return rc;
  consumer.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.seconds);
  for (;;) {
    timespec tick{0, 200 * 1000 * 1000};
    if (sigtimedwait(&stop, nullptr, &tick) > 0) break;
    if (o.max > 0 && seen.load() >= o.max) break;
    if (o.seconds > 0 && std::chrono::steady_clock::now() >= deadline) break;
  }
  consumer.Stop();
  if (metrics) metrics->Stop();
  // Stop returns either way: after the coordinator confirmed the leave, or after
  // shutdown_timeout without it (the coordinator down, or refusing the heartbeats). Only
  // the first is a clean leave.
  const ConsumerStatus status = consumer.Status();
  if (status.phase != "left") {
    *ctx.err << "rsc: consume: " << seen.load()
             << " messages; the leave was not confirmed (last heartbeat error: "
             << (status.last_heartbeat_error.empty() ? "none" : status.last_heartbeat_error)
             << "): what it held moves to others when its member lease ends\n";
    return kExitUnreachable;
  }
  *ctx.err << "rsc: consume: " << seen.load() << " messages; left the group cleanly\n";
  return kExitOk;
}

}  // namespace

void AddConsumeCommand(CLI::App& app, Command* selected) {
  auto o = std::make_shared<ConsumeOpts>();
  CLI::App* cmd = app.add_subcommand(
      "consume", "Join a group and print the messages it is given (Ctrl-C leaves cleanly)");
  cmd->add_option("STREAM", o->stream, "Stream prefix P")->required();
  cmd->add_option("GROUP", o->group, "Consumer group G")->required();
  cmd->add_option("--redis", o->redis_url,
                  "redis://[user[:password]@]host[:port][,host[:port]...][/db] (a cluster: any "
                  "node, or a seed list)")
      ->required();
  cmd->add_option("--instance-id", o->instance_id,
                  "Static membership: a restart with the same id takes the old place");
  cmd->add_option("--max", o->max, "Stop after this many messages (0 = no limit)");
  cmd->add_option("--seconds", o->seconds, "Stop after this long (0 = until Ctrl-C)");
  AddMetricsFlags(cmd, &o->metrics);
  cmd->callback([o, selected] { *selected = [o](Context& ctx) { return RunConsume(*o, ctx); }; });
}

}  // namespace rsc::cli
