// Heartbeat throughput and latency through the whole coordinator (HTTP → GroupService →
// Redis), at 10, 100 and 1,000 members in one group, with the number of Redis commands
// each heartbeat costs. Not a test: it prints a table. Figures are reported next to a
// baseline measured in the same run on the same redis-server (a raw HGET round trip),
// because this machine is noisy.
//
//   scripts/netns.sh build/bench/heartbeat_bench [--seconds 5] [--connections 8]
//       [--members 10,100,1000] [--shards 64,4096] [--json FILE] [--locked-only]
//       [--io-threads N]
//
// --members and --shards take lists: one row per (members, shards) pair, in a group of its
// own (without --shards: max(8, members) shards). "µs/hb" is the wall time per heartbeat at
// saturation (1 / heartbeats/s with the same connections): the per-heartbeat cost whose
// growth with the group size issue 14 bounds. "writes/hb" is the metadata revisions the
// window committed per heartbeat: 0 when the group is steady, so the row measures steady
// heartbeats and not a rebalance the warm-up left unfinished. --json FILE also writes the
// rows to FILE. --locked-only turns the steady path off (GroupServiceOptions::steady_path):
// every batch then takes the locked cycle, lock + load + CAS + unlock, as before issue 14.
// --io-threads N sets the HTTP server's IO threads (default: DefaultIoThreads(), as the
// coordinator's own default).
//
// Runs its own redis-server (EmbeddedRedis in a temp dir) and an in-process server.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "redis/keys.h"
#include "redis/redis_store.h"
#include "redis/redis_url.h"
#include "server/api.h"
#include "server/embedded_redis.h"
#include "server/group_service.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/observer.h"
#include "server/shutdown_gate.h"
#include "server/system.h"
#include "support/heartbeat_client.h"
#include "support/processes.h"

namespace {

using Clock = std::chrono::steady_clock;
using rsc::bench::Apply;
using rsc::bench::Member;
using rsc::bench::MiniHttp;
using rsc::bench::Percentile;
using rsc::bench::RequestFor;

// Client round trips: calls of the top-level commands the coordinator sends. Commands a
// Lua script runs inside Redis are counted by INFO too, so they are left out by name.
int64_t RedisRoundTrips(int port) {
  redisContext* c = redisConnect("127.0.0.1", port);
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO commandstats"));
  int64_t n = 0;
  if (r && r->type == REDIS_REPLY_STRING) {
    for (const char* name : {"cmdstat_evalsha:", "cmdstat_evalsha_ro:", "cmdstat_eval:",
                             "cmdstat_set:", "cmdstat_script|load:"}) {
      const char* p = std::strstr(r->str, name);
      if (p) n += std::atoll(p + std::strlen(name) + std::strlen("calls="));
    }
  }
  if (r) freeReplyObject(r);
  redisFree(c);
  return n;
}

// The group's stored metadata revision: how many versions a window committed.
int64_t StoredRevision(int port, const std::string& key) {
  redisContext* c = redisConnect("127.0.0.1", port);
  auto* r = static_cast<redisReply*>(redisCommand(c, "HGET %s revision", key.c_str()));
  int64_t v = (r && r->type == REDIS_REPLY_STRING) ? std::atoll(r->str) : -1;
  if (r) freeReplyObject(r);
  redisFree(c);
  return v;
}

struct Row {
  int members;
  int shards;
  double hb_per_sec;
  double p50_us, p99_us;
  double redis_cmds_per_hb;
  double writes_per_hb;  // metadata revisions committed per heartbeat (0 when steady)
  double baseline_rtt_us;
  int64_t errors;
  std::map<std::string, int64_t> statuses;
};

// Baseline: raw HGET round trips on one connection for the same duration.
double BaselineRttUs(int port, double seconds) {
  redisContext* c = redisConnect("127.0.0.1", port);
  freeReplyObject(redisCommand(c, "HSET bench:baseline f v"));
  std::vector<double> rtts;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    freeReplyObject(redisCommand(c, "HGET bench:baseline f"));
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  redisFree(c);
  return Percentile(rtts, 0.5);
}

Row RunOne(int http_port, int redis_port, int members, int shards, int connections,
           double seconds) {
  // A stream per row: a stream's shard count is fixed by its first group.
  const std::string stream = fmt::format("bench-{}x{}", members, shards);
  {
    MiniHttp admin(http_port);
    std::string body;
    const int created =
        admin.Post("/v1/groups",
                   fmt::format(R"({{"stream":"{}","group":"g","shardCount":{},)"
                               R"("config":{{"memberLeaseMs":60000,"assignmentLeaseMs":50000,)"
                               R"("heartbeatIntervalMs":1000,"rebalanceTimeoutMs":60000}}}})",
                               stream, shards),
                   body);
    if (created != 201) {
      std::fprintf(stderr, "creating group %s/g: HTTP %d %s\n", stream.c_str(), created,
                   body.c_str());
      std::exit(1);
    }
  }
  const std::string path = "/v1/groups/" + stream + "/g/heartbeat";
  std::vector<Member> all(static_cast<size_t>(members));
  for (int i = 0; i < members; ++i)
    all[static_cast<size_t>(i)].id = fmt::format("member-{:05d}", i);

  // Warm up: join everyone and let handoffs settle (a few heartbeats each).
  {
    MiniHttp c(http_port);
    std::string body;
    for (int round = 0; round < 4; ++round) {
      for (Member& m : all) {
        c.Post(path, RequestFor(m), body);
        Apply(m, body);
      }
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::vector<std::vector<double>> lat(static_cast<size_t>(connections));
  std::vector<std::map<std::string, int64_t>> statuses(static_cast<size_t>(connections));
  const double baseline = BaselineRttUs(redis_port, 1.0);
  const int64_t cmds_before = RedisRoundTrips(redis_port);
  const std::string meta_key = rsc::redis::MetadataKey(rsc::GroupKey{stream, "g"});
  const int64_t rev_before = StoredRevision(redis_port, meta_key);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int t = 0; t < connections; ++t) {
    threads.emplace_back([&, t] {
      MiniHttp c(http_port);
      std::string body;
      size_t i = static_cast<size_t>(t);
      while (!stop.load(std::memory_order_relaxed)) {
        Member& m = all[i];
        const auto s = Clock::now();
        const int code = c.Post(path, RequestFor(m), body);
        lat[static_cast<size_t>(t)].push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - s).count());
        if (code != 200) {
          errors.fetch_add(1);
          statuses[static_cast<size_t>(t)][fmt::format("HTTP {}", code)]++;
        } else {
          const auto at = body.find("\"status\":\"");
          if (at != std::string::npos) {
            statuses[static_cast<size_t>(t)]
                    [body.substr(at + 10, body.find('"', at + 10) - at - 10)]++;
          }
        }
        Apply(m, body);
        i += static_cast<size_t>(connections);
        if (i >= all.size()) i = static_cast<size_t>(t) % all.size();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // measuring window
  stop = true;
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t cmds = RedisRoundTrips(redis_port) - cmds_before;
  const int64_t writes = StoredRevision(redis_port, meta_key) - rev_before;
  std::vector<double> merged;
  std::map<std::string, int64_t> st;
  for (size_t t = 0; t < lat.size(); ++t) {
    merged.insert(merged.end(), lat[t].begin(), lat[t].end());
    for (auto& [k, v] : statuses[t]) st[k] += v;
  }
  Row r;
  r.members = members;
  r.shards = shards;
  r.hb_per_sec = static_cast<double>(merged.size()) / elapsed;
  r.redis_cmds_per_hb = static_cast<double>(cmds) / static_cast<double>(merged.size());
  r.writes_per_hb = static_cast<double>(writes) / static_cast<double>(merged.size());
  r.p50_us = Percentile(merged, 0.50);
  r.p99_us = Percentile(merged, 0.99);
  r.errors = errors.load();
  r.statuses = st;
  r.baseline_rtt_us = baseline;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int connections = 8;
  std::vector<int> sizes = {10, 100, 1000};
  std::vector<int> shard_counts;  // empty: max(8, members)
  std::string json;
  bool steady_path = true;
  int io_threads = rsc::HttpServerOptions{}.io_threads;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    if (a == "--connections" && i + 1 < argc) connections = std::atoi(argv[++i]);
    if (a == "--members" && i + 1 < argc) sizes = rsc::bench::ParseList(argv[++i]);
    if (a == "--shards" && i + 1 < argc) shard_counts = rsc::bench::ParseList(argv[++i]);
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    if (a == "--locked-only") steady_path = false;
    if (a == "--io-threads" && i + 1 < argc) io_threads = std::atoi(argv[++i]);
  }
  spdlog::set_level(spdlog::level::warn);
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("rsc-bench-{}", ::getpid())).string();
  rsc::EmbeddedRedis redis(rsc::EmbeddedRedisOptions{dir});
  if (auto st = redis.Start(); !st.ok()) {
    std::fprintf(stderr, "redis: %s\n", st.error().message.c_str());
    return 1;
  }
  auto url = rsc::redis::ParseRedisUrl(redis.Url());
  rsc::redis::RedisStoreOptions so;
  so.pool_size = 12;
  auto store = rsc::redis::RedisStore::Open(*url, so);
  if (!store.ok()) return 1;
  rsc::SystemClock clock;
  rsc::RandomTokens tokens;
  rsc::Metrics metrics;
  rsc::MetricsObserver observer(metrics);
  rsc::ShutdownGate gate;
  rsc::GroupServiceOptions service_options;
  service_options.steady_path = steady_path;
  rsc::GroupService service(**store, clock, tokens, observer, service_options, nullptr);
  rsc::Api api(service, gate, metrics);
  rsc::HttpServerOptions ho;
  ho.port = 0;
  ho.io_threads = io_threads;
  rsc::HttpServer server(ho, api);
  if (!server.Start().ok()) return 1;

  std::printf(
      "heartbeat benchmark: %d connections, %.0f s per row, one group, redis-server "
      "on loopback (private netns when run via scripts/netns.sh)\n\n",
      connections, seconds);
  std::printf(
      "| members | shards | heartbeats/s | µs/hb | p50 µs | p99 µs | Redis round trips/hb | "
      "writes/hb | baseline HGET p50 µs | p50 / baseline | errors "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  boost::json::array rows;
  for (int n : sizes) {
    std::vector<int> shard_list = shard_counts;
    if (shard_list.empty()) shard_list = {std::max(8, n)};
    for (int m : shard_list) {
      Row r = RunOne(server.port(), redis.port(), n, m, connections, seconds);
      const double cost_us = r.hb_per_sec > 0 ? 1e6 / r.hb_per_sec : 0;
      std::printf("| %d | %d | %.0f | %.1f | %.0f | %.0f | %.2f | %.3f | %.1f | %.1fx | %ld |\n",
                  r.members, r.shards, r.hb_per_sec, cost_us, r.p50_us, r.p99_us,
                  r.redis_cmds_per_hb, r.writes_per_hb, r.baseline_rtt_us,
                  r.p50_us / r.baseline_rtt_us, static_cast<long>(r.errors));
      std::fflush(stdout);
      boost::json::object statuses;
      for (auto& [k, v] : r.statuses) {
        statuses[k] = v;
        std::fprintf(stderr, "  members=%d shards=%d status %s: %ld\n", n, m, k.c_str(),
                     static_cast<long>(v));
      }
      rows.push_back(boost::json::object{{"members", r.members},
                                         {"shards", r.shards},
                                         {"heartbeats_per_s", r.hb_per_sec},
                                         {"us_per_heartbeat", cost_us},
                                         {"p50_us", r.p50_us},
                                         {"p99_us", r.p99_us},
                                         {"redis_round_trips_per_hb", r.redis_cmds_per_hb},
                                         {"metadata_writes_per_hb", r.writes_per_hb},
                                         {"baseline_hget_p50_us", r.baseline_rtt_us},
                                         {"errors", r.errors},
                                         {"statuses", std::move(statuses)}});
    }
  }
  if (!json.empty()) {
    rsc::bench::WriteJson(json, boost::json::object{{"benchmark", "heartbeat_bench"},
                                                    {"connections", connections},
                                                    {"seconds", seconds},
                                                    {"rows", std::move(rows)}});
  }
  server.Stop();
  redis.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
