// Heartbeat throughput and latency through the whole coordinator (HTTP → GroupService →
// Redis), at 10, 100 and 1,000 members in one group, with the number of Redis commands
// each heartbeat costs. Not a test: it prints a table. Figures are reported next to a
// baseline measured in the same run on the same redis-server (a raw HGET round trip),
// because this machine is noisy.
//
//   scripts/netns.sh build/bench/heartbeat_bench [--seconds 5] [--connections 8]
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

namespace {

using Clock = std::chrono::steady_clock;

// Minimal keep-alive HTTP/1.1 client over a blocking socket: enough for a benchmark
// (Content-Length bodies only), and free of the library's own overhead.
class MiniHttp {
 public:
  explicit MiniHttp(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::abort();
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~MiniHttp() { ::close(fd_); }

  // Returns the status code; body in `body`.
  int Post(const std::string& path, const std::string& json, std::string& body) {
    std::string req = fmt::format(
        "POST {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
        "{}\r\n\r\n{}",
        path, json.size(), json);
    if (::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      return -1;
    }
    return ReadResponse(body);
  }

 private:
  int ReadResponse(std::string& body) {
    for (;;) {
      const size_t end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const int status = std::atoi(buf_.c_str() + 9);
        size_t len = 0;
        const size_t cl = buf_.find("Content-Length: ");
        const size_t cl2 = buf_.find("content-length: ");
        const size_t at = cl != std::string::npos ? cl : cl2;
        if (at != std::string::npos && at < end)
          len = std::strtoul(buf_.c_str() + at + 16, nullptr, 10);
        while (buf_.size() < end + 4 + len) {
          if (!Fill()) return -1;
        }
        body = buf_.substr(end + 4, len);
        buf_.erase(0, end + 4 + len);
        return status;
      }
      if (!Fill()) return -1;
    }
  }
  bool Fill() {
    char tmp[16384];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_;
  std::string buf_;
};

struct Member {
  std::string id;
  int64_t epoch = 0;
  int64_t version = 0;
  std::string lineage;
  std::vector<int64_t> owned;
  std::vector<int64_t> revoked;
};

std::string RequestFor(const Member& m) {
  boost::json::object o{{"memberId", m.id},
                        {"memberEpoch", m.epoch},
                        {"metadataVersion", m.version},
                        {"lineage", m.lineage}};
  boost::json::array owned, rev;
  for (auto s : m.owned) owned.push_back(s);
  for (auto s : m.revoked) rev.push_back(boost::json::object{{"shard", s}, {"state", "REVOKED"}});
  o["ownedShards"] = std::move(owned);
  o["revokingShards"] = std::move(rev);
  return boost::json::serialize(o);
}

// Applies a heartbeat response like a well-behaved consumer that drains instantly.
void Apply(Member& m, const std::string& body) {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return;
  auto& o = v.as_object();
  if (!o.contains("status")) {
    m.epoch = 0;  // error: rejoin
    m.owned.clear();
    m.revoked.clear();
    return;
  }
  m.epoch = o["memberEpoch"].as_int64();
  const int64_t ver = o["metadataVersion"].as_int64();
  const std::string status(o["status"].as_string());
  if (ver > m.version || status == "SYNC_METADATA") {
    m.version = ver;
    m.lineage = std::string(o["lineage"].as_string());
  }
  std::vector<int64_t> assigned, revoke;
  for (auto& x : o["assignedShards"].as_array()) assigned.push_back(x.as_int64());
  for (auto& x : o["revokeShards"].as_array()) revoke.push_back(x.as_int64());
  m.revoked = revoke;  // report every listed revoke as released (drained instantly)
  std::vector<int64_t> keep;
  for (auto s : m.owned) {
    if (std::find(assigned.begin(), assigned.end(), s) != assigned.end()) keep.push_back(s);
  }
  if (status == "OK") keep = assigned;
  m.owned = keep;
}

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

struct Row {
  int members;
  double hb_per_sec;
  double p50_us, p99_us;
  double redis_cmds_per_hb;
  double baseline_rtt_us;
  int64_t errors;
  std::map<std::string, int64_t> statuses;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

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

Row RunOne(int http_port, int redis_port, int members, int connections, double seconds) {
  const std::string group = fmt::format("g{}", members);
  {
    MiniHttp admin(http_port);
    std::string body;
    const int shards = std::max(8, members);
    admin.Post("/v1/groups",
               fmt::format(R"({{"stream":"bench","group":"{}","shardCount":{},)"
                           R"("config":{{"memberLeaseMs":60000,"assignmentLeaseMs":50000,)"
                           R"("heartbeatIntervalMs":1000,"rebalanceTimeoutMs":60000}}}})",
                           group, shards),
               body);
  }
  const std::string path = "/v1/groups/bench/" + group + "/heartbeat";
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
  std::vector<double> merged;
  std::map<std::string, int64_t> st;
  for (size_t t = 0; t < lat.size(); ++t) {
    merged.insert(merged.end(), lat[t].begin(), lat[t].end());
    for (auto& [k, v] : statuses[t]) st[k] += v;
  }
  Row r;
  r.members = members;
  r.hb_per_sec = static_cast<double>(merged.size()) / elapsed;
  r.redis_cmds_per_hb = static_cast<double>(cmds) / static_cast<double>(merged.size());
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
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    if (a == "--connections" && i + 1 < argc) connections = std::atoi(argv[++i]);
    if (a == "--members" && i + 1 < argc) sizes = {std::atoi(argv[++i])};
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
  rsc::GroupService service(**store, clock, tokens, observer, {}, nullptr);
  rsc::Api api(service, gate, metrics);
  rsc::HttpServerOptions ho;
  ho.port = 0;
  rsc::HttpServer server(ho, api);
  if (!server.Start().ok()) return 1;

  std::printf(
      "heartbeat benchmark: %d connections, %.0f s per row, one group, redis-server "
      "on loopback (private netns when run via scripts/netns.sh)\n\n",
      connections, seconds);
  std::printf(
      "| members | heartbeats/s | p50 µs | p99 µs | Redis round trips/hb | baseline HGET p50 µs "
      "| p50 / baseline | errors |\n|---|---|---|---|---|---|---|---|\n");
  for (int n : sizes) {
    Row r = RunOne(server.port(), redis.port(), n, connections, seconds);
    std::printf("| %d | %.0f | %.0f | %.0f | %.2f | %.1f | %.1fx | %ld |\n", r.members,
                r.hb_per_sec, r.p50_us, r.p99_us, r.redis_cmds_per_hb, r.baseline_rtt_us,
                r.p50_us / r.baseline_rtt_us, static_cast<long>(r.errors));
    std::fflush(stdout);
    for (auto& [k, v] : r.statuses)
      std::fprintf(stderr, "  members=%d status %s: %ld\n", n, k.c_str(), static_cast<long>(v));
  }
  server.Stop();
  redis.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
