// coordinator_rss: the memory of one rsc-coordinator process holding many idle keep-alive
// connections and many groups × members (issue 14: 10,000 connections and 100 groups of
// 1,000 members at heartbeatIntervalMs 10,000 / memberLeaseMs 30,000, goal ≤ 200 MB).
//
//   scripts/netns.sh build/bench/coordinator_rss [--connections 10000] [--groups 100]
//       [--members 1000] [--shards 64] [--clients 8] [--heartbeat-ms 10000]
//       [--member-lease-ms 30000] [--rounds 2] [--coordinator PATH] [--json FILE]
//
// It starts its own redis-server (no persistence) and rsc-coordinator process on
// 127.0.0.1: run it inside scripts/netns.sh, the host loopback is throttled.
//
//   1. The coordinator's RSS right after start: the baseline (same binary, same run).
//   2. `groups` groups of `shards` shards; `rounds` rounds of one heartbeat per member over
//      `clients` keep-alive connections (round 1 joins everyone; later rounds renew and
//      apply the handoffs, like consumers that drain instantly). A round must end within
//      memberLeaseMs, or the first members expire before their next heartbeat (their next
//      one is refused and they rejoin): the round times and refusals are reported. On 2
//      cores, 100 × 1,000 joins take about two minutes, so at the issue's sizes most members
//      have expired by round 2 — the peak (VmHWM) is the figure to read.
//   3. `connections` idle keep-alive connections opened from this process and left open
//      (last: the server closes a connection idle for 120 s).
//   4. The coordinator's VmRSS then, and its VmHWM (peak) over the whole run; the number of
//      descriptors it holds (the idle connections must be open).
//
// Not a test: it prints a table and exits 0 unless the setting broke.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/heartbeat_client.h"
#include "support/processes.h"

#ifndef RSC_COORDINATOR_BINARY
#error "RSC_COORDINATOR_BINARY must be defined (bench/CMakeLists.txt)"
#endif

namespace {

using rsc::bench::Die;

struct Config {
  int connections = 10000;
  int groups = 100;
  int members = 1000;
  int shards = 64;
  int clients = 8;
  int64_t heartbeat_ms = 10000;
  int64_t member_lease_ms = 30000;
  int rounds = 2;
  std::string coordinator = RSC_COORDINATOR_BINARY;
  std::string json;
};

double Mb(int64_t kb) { return static_cast<double>(kb) / 1024.0; }

int64_t OpenDescriptors(pid_t pid) {
  int64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

struct Round {
  double seconds = 0;
  int64_t ok = 0;      // HTTP 200
  int64_t failed = 0;  // anything else
};

// One heartbeat per member of every group, groups spread over `clients` threads.
Round HeartbeatRound(int port, const Config& cfg,
                     std::vector<std::vector<rsc::bench::Member>>& all) {
  std::atomic<int64_t> ok{0}, failed{0};
  const auto t0 = rsc::bench::BenchClock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < cfg.clients; ++t) {
    threads.emplace_back([&, t] {
      rsc::bench::MiniHttp http(port);
      std::string body;
      for (size_t g = static_cast<size_t>(t); g < all.size();
           g += static_cast<size_t>(cfg.clients)) {
        const std::string path = fmt::format("/v1/groups/rss-{}/g/heartbeat", g);
        for (rsc::bench::Member& m : all[g]) {
          const int status = http.Post(path, rsc::bench::RequestFor(m), body);
          (status == 200 ? ok : failed).fetch_add(1);
          rsc::bench::Apply(m, body);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  return {std::chrono::duration<double>(rsc::bench::BenchClock::now() - t0).count(), ok.load(),
          failed.load()};
}

}  // namespace

int main(int argc, char** argv) {
  rsc::bench::SetProgramName("coordinator_rss");
  Config cfg;
  CLI::App app{"coordinator RSS with idle connections and groups x members (issue 14)"};
  app.add_option("--connections", cfg.connections, "idle keep-alive connections")
      ->capture_default_str();
  app.add_option("--groups", cfg.groups, "groups")->capture_default_str();
  app.add_option("--members", cfg.members, "members per group")->capture_default_str();
  app.add_option("--shards", cfg.shards, "shards per group")->capture_default_str();
  app.add_option("--clients", cfg.clients, "heartbeating connections")->capture_default_str();
  app.add_option("--heartbeat-ms", cfg.heartbeat_ms, "heartbeatIntervalMs")->capture_default_str();
  app.add_option("--member-lease-ms", cfg.member_lease_ms, "memberLeaseMs")->capture_default_str();
  app.add_option("--rounds", cfg.rounds, "heartbeat rounds (1 = join only)")->capture_default_str();
  app.add_option("--coordinator", cfg.coordinator, "rsc-coordinator binary")->capture_default_str();
  app.add_option("--json", cfg.json, "also write the figures to this file");
  CLI11_PARSE(app, argc, argv);
  if (cfg.connections < 0 || cfg.groups < 1 || cfg.members < 1 || cfg.clients < 1 ||
      cfg.rounds < 1) {
    Die("--groups, --members, --clients, --rounds must be >= 1");
  }
  ::signal(SIGPIPE, SIG_IGN);
  // The coordinator inherits the raised limit: it must hold every idle connection.
  const int64_t nofile = rsc::bench::RaiseNoFile();
  if (nofile < cfg.connections + 256) {
    Die(fmt::format("RLIMIT_NOFILE is {}: too low for {} connections", nofile, cfg.connections));
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("rsc-rss-{}", ::getpid())).string();
  std::filesystem::create_directories(dir);
  rsc::bench::Child redis;
  const int redis_port = rsc::bench::StartRedis(redis, dir);
  rsc::bench::Child coordinator;
  const int port = rsc::bench::StartCoordinator(coordinator, cfg.coordinator,
                                                fmt::format("redis://127.0.0.1:{}", redis_port),
                                                dir, "coordinator");
  const pid_t pid = coordinator.pid();
  rsc::bench::SleepMs(500);  // let start-up allocations settle
  const int64_t rss_start_kb = rsc::bench::ProcStatus(pid, "VmRSS");
  const int64_t fds_start = OpenDescriptors(pid);

  // K2 and the two-heartbeats-per-lease rule: assignmentLeaseMs in
  // [2 × heartbeatIntervalMs, memberLeaseMs − 1 s].
  const int64_t assignment_ms = std::max(2 * cfg.heartbeat_ms, cfg.member_lease_ms - 1000);
  for (int g = 0; g < cfg.groups; ++g) {
    std::string answer;
    const int status = rsc::bench::HttpCall(
        port, "POST", "/v1/groups",
        fmt::format(
            R"({{"stream":"rss-{}","group":"g","shardCount":{},"config":{{"heartbeatIntervalMs":{},)"
            R"("memberLeaseMs":{},"assignmentLeaseMs":{},"rebalanceTimeoutMs":{}}}}})",
            g, cfg.shards, cfg.heartbeat_ms, cfg.member_lease_ms, assignment_ms,
            cfg.member_lease_ms),
        &answer);
    if (status != 201) Die(fmt::format("creating group rss-{}/g: HTTP {} {}", g, status, answer));
  }
  std::vector<std::vector<rsc::bench::Member>> all(static_cast<size_t>(cfg.groups));
  for (int g = 0; g < cfg.groups; ++g) {
    for (int i = 0; i < cfg.members; ++i) {
      all[static_cast<size_t>(g)].push_back({.id = fmt::format("member-{:05d}", i)});
    }
  }
  boost::json::array rounds;
  for (int r = 0; r < cfg.rounds; ++r) {
    const Round round = HeartbeatRound(port, cfg, all);
    const int64_t rss = rsc::bench::ProcStatus(pid, "VmRSS");
    std::fprintf(stderr, "  round %d: %.1f s, %lld ok, %lld failed, RSS %.1f MB\n", r + 1,
                 round.seconds, static_cast<long long>(round.ok),
                 static_cast<long long>(round.failed), Mb(rss));
    rounds.push_back(boost::json::object{{"seconds", round.seconds},
                                         {"ok", round.ok},
                                         {"failed", round.failed},
                                         {"rss_mb", Mb(rss)}});
  }
  // The idle connections come last: the server closes a connection idle for 120 s, and the
  // heartbeat rounds can take longer than that.
  const int64_t rss_groups_kb = rsc::bench::ProcStatus(pid, "VmRSS");
  std::vector<int> idle;
  idle.reserve(static_cast<size_t>(cfg.connections));
  for (int i = 0; i < cfg.connections; ++i) {
    const int fd = rsc::bench::ConnectLoopback(port);
    if (fd < 0) Die(fmt::format("idle connection {} refused", i));
    idle.push_back(fd);
  }
  rsc::bench::SleepMs(1000);  // accepting is asynchronous

  const int64_t rss_kb = rsc::bench::ProcStatus(pid, "VmRSS");
  const int64_t hwm_kb = rsc::bench::ProcStatus(pid, "VmHWM");
  const int64_t fds = OpenDescriptors(pid);
  const int64_t threads = rsc::bench::ProcStatus(pid, "Threads");

  std::printf(
      "coordinator RSS: %d idle connections, %d groups x %d members, %d shards each, "
      "heartbeatIntervalMs %lld, memberLeaseMs %lld\n\n"
      "| figure | value |\n|---|---|\n"
      "| RSS after start (MB) | %.1f |\n| RSS with groups and members (MB) | %.1f |\n"
      "| RSS with groups, members and idle connections (MB) | %.1f |\n| peak RSS, VmHWM (MB) | "
      "%.1f |\n"
      "| descriptors held (at start) | %lld (%lld) |\n| threads | %lld |\n",
      cfg.connections, cfg.groups, cfg.members, cfg.shards,
      static_cast<long long>(cfg.heartbeat_ms), static_cast<long long>(cfg.member_lease_ms),
      Mb(rss_start_kb), Mb(rss_groups_kb), Mb(rss_kb), Mb(hwm_kb), static_cast<long long>(fds),
      static_cast<long long>(fds_start), static_cast<long long>(threads));
  for (size_t r = 0; r < rounds.size(); ++r) {
    const auto& o = rounds[r].as_object();
    std::printf("| heartbeat round %zu: s, ok, failed | %.1f, %lld, %lld |\n", r + 1,
                o.at("seconds").as_double(), static_cast<long long>(o.at("ok").as_int64()),
                static_cast<long long>(o.at("failed").as_int64()));
  }
  if (!cfg.json.empty()) {
    rsc::bench::WriteJson(cfg.json, boost::json::object{{"benchmark", "coordinator_rss"},
                                                        {"connections", cfg.connections},
                                                        {"groups", cfg.groups},
                                                        {"members", cfg.members},
                                                        {"shards", cfg.shards},
                                                        {"heartbeat_interval_ms", cfg.heartbeat_ms},
                                                        {"member_lease_ms", cfg.member_lease_ms},
                                                        {"rss_start_mb", Mb(rss_start_kb)},
                                                        {"rss_groups_mb", Mb(rss_groups_kb)},
                                                        {"rss_mb", Mb(rss_kb)},
                                                        {"hwm_mb", Mb(hwm_kb)},
                                                        {"descriptors", fds},
                                                        {"descriptors_at_start", fds_start},
                                                        {"rounds", std::move(rounds)}});
  }
  for (int fd : idle) ::close(fd);
  coordinator.Stop();
  redis.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
