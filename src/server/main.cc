// rsc-coordinator: the stateless coordinator service (SPEC §8 S1–S4).

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "redis/compat.h"
#include "redis/connection.h"
#include "redis/executor.h"
#include "redis/log.h"
#include "redis/redis_audit_sink.h"
#include "redis/redis_store.h"
#include "redis/redis_stream_admin.h"
#include "redis/redis_url.h"
#include "server/api.h"
#include "server/audit.h"
#include "server/auth.h"
#include "server/compat_watch.h"
#include "server/embedded_redis.h"
#include "server/group_service.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/observer.h"
#include "server/shutdown_gate.h"
#include "server/system.h"
#include "server/tick_loop.h"

namespace {

constexpr const char* kFooter = R"(
Examples:
  rsc-coordinator                                   # embedded local redis-server (data in ./.state)
  rsc-coordinator --redis redis://127.0.0.1:6379 --listen 0.0.0.0:7400
  rsc-coordinator --redis redis://app:secret@redis.internal:6379/0 --admin-token "$TOKEN"
  rsc-coordinator --redis redis://redis.internal:6379 --tokens-file /etc/rsc/tokens  # roles
  rsc-coordinator --listen 127.0.0.1:0              # port 0: a free port, logged at start

Endpoints: POST /v1/groups/{stream}/{group}/heartbeat, GET .../routing, admin /v1/groups…,
/healthz, /readyz, /metrics. See docs/protocol.md.

Roles (docs/protocol.md §2): admin (everything), monitor (group and stream views, /metrics),
member (heartbeat, leave, routing), each enforced once its token is configured; a monitor or
member token needs an admin token. Tokens file: lines `admin=T`, `monitor=T`, `member=T`
(and `<role>.previous=T` during a rotation), `#` comments, mode 600 or 640.

Exit codes: 0 clean shutdown (SIGTERM/SIGINT), 2 bad command line (also: bad tokens),
3 Redis unreachable,
4 Redis incompatible (the message names what is missing), 5 cannot listen.
)";

// Tokens shorter than this are accepted with a warning.
constexpr size_t kShortTokenLength = 16;

struct Flags {
  std::string redis_url;
  std::string listen = "127.0.0.1:7400";
  std::string admin_token;
  std::string monitor_token;
  std::string member_token;
  std::string tokens_file;
  int64_t audit_max_len = 10000;
  std::string state_dir = ".state";
  int io_threads = rsc::DefaultIoThreads();
  int workers = 8;
  size_t max_body_bytes = 1 << 20;
  int64_t body_timeout_ms = 10000;
  int64_t redis_timeout_ms = 2000;
  int64_t compat_recheck_ms = 30000;
  int64_t shutdown_grace_ms = 5000;
  int64_t tick_interval_ms = 1000;
  int64_t retired_retention_ms = 3'600'000;
  bool shard_metrics = false;
  std::string log_level = "info";
};

bool SplitHostPort(const std::string& s, std::string& host, uint16_t& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  try {
    const int p = std::stoi(s.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "rsc-coordinator: Kafka-style consumer groups over sharded Redis Streams.\n"
      "Stateless: every decision lives in Redis; run as many replicas as you like."};
  app.footer(kFooter);
  app.add_option("--redis", f.redis_url,
                 "Redis URL redis://[user:password@]host[:port][,host[:port]...][/db] (a "
                 "cluster: any node, or a seed list). Without it a local "
                 "redis-server is started (embedded default)")
      ->envname("RSC_REDIS_URL");
  app.add_option("--listen", f.listen, "HTTP listen address host:port (port 0 = free port)")
      ->envname("RSC_LISTEN")
      ->capture_default_str();
  app.add_option("--admin-token", f.admin_token,
                 "Bearer token of the admin role: every endpoint; with it alone, the group and "
                 "stream views need it too (empty: everything open)")
      ->envname("RSC_ADMIN_TOKEN");
  app.add_option("--monitor-token", f.monitor_token,
                 "Bearer token of the monitor role: group and stream views and /metrics, which "
                 "then need it or the admin token (needs an admin token)")
      ->envname("RSC_MONITOR_TOKEN");
  app.add_option("--member-token", f.member_token,
                 "Bearer token of the member role: heartbeat, leave and routing, which then "
                 "need it or the admin token (needs an admin token)")
      ->envname("RSC_MEMBER_TOKEN");
  app.add_option("--tokens-file", f.tokens_file,
                 "File of role=token lines (admin, monitor, member, <role>.previous), # "
                 "comments; not readable by others. A role is given here or by its flag, not "
                 "both")
      ->envname("RSC_TOKENS_FILE");
  app.add_option("--audit-max-len", f.audit_max_len,
                 "Entries kept in the audit stream redis-stream:coord:audit (one per admin "
                 "mutation; trimmed approximately, oldest first)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}))
      ->capture_default_str();
  app.add_option("--state-dir", f.state_dir, "Data directory of the embedded redis-server")
      ->envname("RSC_STATE_DIR")
      ->capture_default_str();
  app.add_option("--io-threads", f.io_threads,
                 "HTTP IO threads (default: one per two CPUs, 1 or 2)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--workers", f.workers, "Worker threads running requests")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--max-body-bytes", f.max_body_bytes, "Largest request body (413 above)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--body-timeout-ms", f.body_timeout_ms,
                 "Time from a request's header to the end of its body (408 and close above)")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}))
      ->capture_default_str();
  app.add_option("--redis-timeout-ms", f.redis_timeout_ms,
                 "How long one Redis command may take before it fails (REDIS_UNAVAILABLE, or "
                 "UNKNOWN_RESULT for a write whose reply was lost)")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}))
      ->capture_default_str();
  app.add_option("--compat-recheck-ms", f.compat_recheck_ms,
                 "While running, /readyz repeats the start-up Redis compatibility check at most "
                 "this often (a Redis that changed under the coordinator: 503, counted)")
      ->check(CLI::Range(int64_t{100}, int64_t{86400000}))
      ->capture_default_str();
  app.add_option("--shutdown-grace-ms", f.shutdown_grace_ms,
                 "On SIGTERM: how long in-flight requests may take before exit")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--tick-interval-ms", f.tick_interval_ms,
                 "Maintenance tick period (expiry, fencing, round completion)")
      ->check(CLI::Range(int64_t{10}, int64_t{600'000}))
      ->capture_default_str();
  app.add_option("--retired-retention-ms", f.retired_retention_ms,
                 "Keep a retired generation's shard keys this long before deleting them "
                 "(never less than the stream's routingLeaseMs; SPEC RS5)")
      ->check(CLI::Range(int64_t{0}, int64_t{365} * 24 * 3'600'000))
      ->capture_default_str();
  app.add_flag("--shard-metrics", f.shard_metrics,
               "Also export lag and pending per shard (rsc_shard_lag, rsc_shard_pending: one "
               "series per shard of every group; the per-group sums are always exported)");
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // Before anything starts: a wrong token setup is a bad command line (exit 2).
  rsc::TokenConfig flag_tokens;
  flag_tokens.admin.token = f.admin_token;
  flag_tokens.monitor.token = f.monitor_token;
  flag_tokens.member.token = f.member_token;
  std::optional<rsc::TokenConfig> file_tokens;
  if (!f.tokens_file.empty()) {
    auto loaded = rsc::LoadTokensFile(f.tokens_file);
    if (!loaded.ok()) {
      std::cerr << "--tokens-file: " << loaded.error().message << "\n";
      return 2;
    }
    file_tokens = std::move(loaded).value();
  }
  auto role_tokens = rsc::CombineTokens(flag_tokens, file_tokens);
  if (!role_tokens.ok()) {
    std::cerr << "tokens: " << role_tokens.error().message << "\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
  rsc::redis::SetLogSink([](rsc::redis::LogLevel level, std::string_view line) {
    switch (level) {
      case rsc::redis::LogLevel::kDebug:
        spdlog::debug("{}", line);
        break;
      case rsc::redis::LogLevel::kInfo:
        spdlog::info("{}", line);
        break;
      case rsc::redis::LogLevel::kWarn:
        spdlog::warn("{}", line);
        break;
    }
  });

  for (rsc::Role role : rsc::kAllRoles) {
    const size_t length = role_tokens->Of(role).token.size();
    if (length > 0 && length < kShortTokenLength) {
      spdlog::warn(
          "event=short_token role={} length={} message=\"a token this short can be guessed; "
          "use at least {} random characters (e.g. openssl rand -hex 32)\"",
          rsc::RoleName(role), length, kShortTokenLength);
    }
  }

  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(f.listen, host, port)) {
    std::cerr << "--listen must be host:port, got '" << f.listen << "'\n";
    return 2;
  }

  // Block termination signals in every thread; the main thread waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<rsc::EmbeddedRedis> embedded;
  if (f.redis_url.empty()) {
    embedded = std::make_unique<rsc::EmbeddedRedis>(rsc::EmbeddedRedisOptions{f.state_dir});
    spdlog::info(
        "event=start mode=embedded message=\"no --redis given: starting a local "
        "redis-server with data in {}/redis\"",
        f.state_dir);
    rsc::Status st = embedded->Start();
    if (!st.ok()) {
      spdlog::critical("event=embedded_redis_failed message=\"{}\"", st.error().message);
      return 3;
    }
    f.redis_url = embedded->Url();
  }
  auto url = rsc::redis::ParseRedisUrl(f.redis_url);
  if (!url.ok()) {
    std::cerr << "--redis: " << url.error().message << "\n";
    return 2;
  }
  if (!embedded) {
    spdlog::info("event=start mode=external redis={}", url->Redacted());
  } else {
    spdlog::info("event=embedded_redis_ready redis={} pid={}", url->Redacted(), embedded->pid());
  }

  rsc::Metrics metrics;
  // L4: refuse to start against a Redis we cannot use, naming exactly what is missing.
  const std::chrono::milliseconds redis_timeout(f.redis_timeout_ms);
  rsc::redis::ConnectionOptions probe_options = rsc::redis::ConnectionOptions::FromUrl(*url);
  probe_options.command_timeout = redis_timeout;
  // On a cluster the check runs on a master (the URL may name any node, also a replica),
  // chosen again for every re-check (a failover turns masters into replicas).
  std::unique_ptr<rsc::redis::Connection> probe;
  auto check = [&probe, probe_options]() -> rsc::Result<rsc::redis::CompatReport> {
    auto target = rsc::redis::CompatCheckTarget(probe_options);
    if (!target.ok()) return target.error();
    if (!probe || probe->options().Address() != target->Address()) {
      probe = std::make_unique<rsc::redis::Connection>(*target);
    }
    return rsc::redis::CheckCompatibility(*probe);
  };
  auto report = check();
  if (!report.ok()) {
    spdlog::critical("event=redis_unreachable redis={} message=\"{}\"", url->Redacted(),
                     report.error().message);
    return 3;
  }
  if (!report->ok()) {
    metrics.OnRedisCompatFailure();
    spdlog::critical("event=redis_incompatible {}", rsc::redis::FormatCompatReport(*report));
    std::cerr << "Redis at " << url->Redacted()
              << " cannot be used: " << rsc::redis::FormatCompatReport(*report) << "\n";
    return 4;
  }
  for (const auto& w : report->warnings)
    spdlog::warn("event=redis_policy_warning message=\"{}\"", w);
  for (const auto& fb : report->fallbacks) spdlog::info("event=redis_fallback message=\"{}\"", fb);
  metrics.SetRedisPolicyWarning("eviction", report->eviction_warning());
  metrics.SetRedisPolicyWarning("persistence", report->persistence_warning());

  rsc::redis::RedisStoreOptions store_options;
  store_options.pool_size = static_cast<size_t>(std::max(2, f.workers + 2));
  store_options.command_timeout = redis_timeout;
  auto store = rsc::redis::RedisStore::Open(*url, store_options);
  if (!store.ok()) {
    spdlog::critical("event=redis_unreachable message=\"{}\"", store.error().message);
    return 3;
  }

  rsc::SystemClock clock;
  rsc::RandomTokens tokens;
  rsc::MetricsObserver observer(metrics, f.shard_metrics);
  rsc::ShutdownGate gate;
  rsc::redis::RedisStore& redis_store = **store;
  // L4 while running: `check` and its connection are the watch's alone (it serializes checks).
  rsc::CompatWatch compat(check, clock, metrics, f.compat_recheck_ms);
  auto ready_probe = [&redis_store, &compat]() -> rsc::Status {
    auto groups = redis_store.ListGroups();  // one round trip: Redis reachable and answering
    if (!groups.ok()) return groups.error();
    return compat.Current();
  };
  observer.AttachStoreCounters(
      [&redis_store] { return redis_store.stats().script_reloads.load(); });
  // Resharding's shard-stream commands share the store's connections and slot routing.
  rsc::redis::RedisStreamAdmin stream_admin(redis_store.executor());
  rsc::GroupServiceOptions service_options;
  service_options.streams = &stream_admin;
  service_options.retired_retention_ms = f.retired_retention_ms;
  rsc::GroupService service(redis_store, clock, tokens, observer, service_options, ready_probe);

  rsc::HttpServerOptions http_options;
  http_options.host = host;
  http_options.port = port;
  http_options.io_threads = f.io_threads;
  http_options.worker_threads = f.workers;
  http_options.max_body_bytes = f.max_body_bytes;
  http_options.body_timeout = std::chrono::milliseconds(f.body_timeout_ms);
  rsc::HttpServer* server_ptr = nullptr;
  // SPEC O4: every admin mutation answered with success goes to the audit stream.
  rsc::redis::RedisAuditSink audit_sink(redis_store.executor(), f.audit_max_len);
  rsc::Auditor auditor(audit_sink, clock, metrics);
  rsc::ApiOptions api_options;
  api_options.tokens = *role_tokens;
  api_options.auditor = &auditor;
  api_options.open_connections = [&server_ptr]() -> int64_t {
    return server_ptr ? server_ptr->open_connections() : 0;
  };
  rsc::Api api(service, gate, metrics, api_options);
  rsc::HttpServer server(http_options, api);
  server_ptr = &server;
  rsc::Status started = server.Start();
  if (!started.ok()) {
    spdlog::critical("event=listen_failed message=\"{}\"", started.error().message);
    return 5;
  }
  spdlog::info("event=listening address={}:{} admin_auth={} roles={} redis={}", host, server.port(),
               role_tokens->Configured(rsc::Role::kAdmin) ? "on" : "off",
               rsc::Authorizer(*role_tokens).Summary(), url->Redacted());

  rsc::TickLoop ticks(service, std::chrono::milliseconds(f.tick_interval_ms));
  ticks.Start();

  int sig = 0;
  sigwait(&signals, &sig);
  // S1: terminating at once; in-flight critical sections finish and release the mutex.
  gate.BeginTerminate();
  metrics.SetTerminating(true);
  spdlog::info("event=terminating signal={} in_flight={}", sig, gate.in_flight());
  ticks.Stop();
  const auto grace = std::chrono::milliseconds(f.shutdown_grace_ms);
  const bool idle = gate.WaitIdle(std::chrono::steady_clock::now() + grace);
  server.Stop(std::chrono::milliseconds(500));
  if (embedded) embedded->Stop();
  spdlog::info("event=stopped idle={}", idle);
  return 0;
}
