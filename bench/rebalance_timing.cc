// rebalance_timing: how long a group takes to move shards between consumer processes
// (issue 14), with the library's own view of ownership checked for overlap.
//
//   scripts/netns.sh build/bench/rebalance_timing [--kills 20] [--scaleouts 3]
//       [--consumers 4] [--shards 16] [--scale-from 4] [--scale-to 8] [--scale-shards 64]
//       [--heartbeat-ms 500] [--member-lease-ms 3000] [--seconds 60] [--coordinator PATH]
//       [--json FILE]
//
// It starts its own redis-server (no persistence) and rsc-coordinator process, both on
// 127.0.0.1: run it inside scripts/netns.sh, the host loopback is throttled. Each consumer
// is a separate process: this same binary run as
//
//   rebalance_timing worker --coordinator H:P --redis URL --stream S --log FILE
//
// which runs one rsc::Consumer (group g) and appends the runtime's kAcquire and kRelease
// events (ConsumerOptions::on_event: "may be read from now on" / "nothing more is read")
// to FILE, one JSON line each, stamped with CLOCK_MONOTONIC µs like this process's clock.
//
// Failover (--kills K, 0 = skip): `consumers` workers on a group of `shards` shards,
// balanced; then K times: SIGKILL one worker (round robin), measure from the kill to the
// last of its shards acquired by another worker, start a replacement, wait until balanced
// again. Reported: min / median / p90 / max against memberLeaseMs + heartbeatIntervalMs
// (a dead member's shards can move only once the coordinator expired it, memberLeaseMs
// after its last heartbeat, and a survivor heard so on its next heartbeat).
//
// Scale-out (--scaleouts R, 0 = skip): R times, a new group of `scale-shards` shards read by
// `scale-from` workers, balanced; then `scale-to` - `scale-from` more workers start at once;
// the time from their start to the last acquire of the balanced state (every shard read by
// exactly one worker, each worker reading scale-shards / scale-to).
//
// Overlap (both): from every worker's log, per shard, the intervals [acquire, release)
// (a killed worker's end at its kill, a running one's open) of different workers must not
// intersect. Reported: how many pairs did, and for how long at most.
//
// The temporary directory (the workers' event logs, the coordinator's log) is kept and its
// path printed when an overlap was found, or always with RSC_BENCH_KEEP=1; the JSON lists
// the first 20 overlapping pairs (shard, workers, intervals, kill times).
//
// Not a test (no pass/fail on timing); exit status 1 only when the setting broke (a
// process did not start, a state was not reached within --seconds).

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "rsc/consumer.h"
#include "support/processes.h"

#ifndef RSC_COORDINATOR_BINARY
#error "RSC_COORDINATOR_BINARY must be defined (bench/CMakeLists.txt)"
#endif

namespace {

using rsc::bench::Child;
using rsc::bench::Die;
using std::chrono::milliseconds;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             rsc::bench::BenchClock::now().time_since_epoch())
      .count();
}

// ── The worker process ──────────────────────────────────────────────────────────────

// One rsc::Consumer until SIGTERM; its acquire/release events appended to --log, one line
// per write(2) on an O_APPEND file, so a SIGKILL loses at most the line being written.
int Worker(int argc, char** argv) {
  std::string log, coordinator, redis, stream;
  CLI::App app{"one consumer process of rebalance_timing"};
  app.add_option("--coordinator", coordinator, "host:port")->required();
  app.add_option("--redis", redis, "redis://host:port")->required();
  app.add_option("--stream", stream, "stream (group g)")->required();
  app.add_option("--log", log, "acquire/release events, JSON lines")->required();
  CLI11_PARSE(app, argc - 1, argv + 1);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) Die("worker: cannot open " + log);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // inherited by the library's threads

  rsc::ConsumerOptions o;
  o.coordinator_endpoints = {coordinator};
  o.redis_url = redis;
  o.stream = stream;
  o.group = "g";
  o.block = milliseconds(250);
  o.on_event = [fd](const rsc::ConsumerEvent& e) {
    if (e.kind != rsc::ConsumerEventKind::kAcquire && e.kind != rsc::ConsumerEventKind::kRelease) {
      return;
    }
    const std::string line =
        boost::json::serialize(boost::json::object{
            {"t", e.t_us},
            {"kind", e.kind == rsc::ConsumerEventKind::kAcquire ? "acquire" : "release"},
            {"shard", e.shard}}) +
        "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::_Exit(3);  // a log with holes would report a false overlap or a false failover
    }
  };
  auto created =
      rsc::Consumer::Create(o, [](const rsc::Message&) { return rsc::HandlerResult::Ok(); });
  if (!created.ok()) Die("worker: " + created.error().message);
  std::unique_ptr<rsc::Consumer> consumer = std::move(created).value();
  consumer->Start();
  int sig = 0;
  sigwait(&stop, &sig);
  consumer->Stop();
  ::close(fd);
  return 0;
}

// ── Ownership, as the workers logged it ─────────────────────────────────────────────

struct Interval {
  int64_t start_us = 0;
  int64_t end_us = INT64_MAX;  // open while held
};

struct WorkerProc {
  std::string name;
  std::string log;
  std::unique_ptr<Child> child = std::make_unique<Child>();
  int64_t killed_us = -1;  // when the bench SIGKILLed it
  bool alive() const { return killed_us < 0 && child->pid() > 0; }
};

// shard → intervals of one worker, from its log (re-read whole: the logs stay small).
std::map<int32_t, std::vector<Interval>> IntervalsOf(const WorkerProc& w) {
  std::map<int32_t, std::vector<Interval>> out;
  std::istringstream in(rsc::bench::ReadFile(w.log));
  for (std::string line; std::getline(in, line);) {
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) continue;  // the line a SIGKILL cut short
    const auto& o = v.as_object();
    const int32_t shard = static_cast<int32_t>(o.at("shard").as_int64());
    const int64_t t = o.at("t").as_int64();
    auto& list = out[shard];
    if (o.at("kind").as_string() == "acquire") {
      list.push_back({t, INT64_MAX});
    } else if (!list.empty() && list.back().end_us == INT64_MAX) {
      list.back().end_us = t;
    }
  }
  if (w.killed_us >= 0) {
    for (auto& [shard, list] : out) {
      for (Interval& i : list) i.end_us = std::min(i.end_us, w.killed_us);
    }
  }
  return out;
}

// What every live worker holds now: worker index → shard → since (µs).
std::vector<std::map<int32_t, int64_t>> Holdings(const std::vector<WorkerProc>& workers) {
  std::vector<std::map<int32_t, int64_t>> out(workers.size());
  for (size_t w = 0; w < workers.size(); ++w) {
    if (!workers[w].alive()) continue;
    for (const auto& [shard, list] : IntervalsOf(workers[w])) {
      if (!list.empty() && list.back().end_us == INT64_MAX) out[w][shard] = list.back().start_us;
    }
  }
  return out;
}

// Balanced: every shard held by exactly one live worker, each holding shards / live (±1).
// Returns the time of the last acquire of that state, or -1 if not balanced.
int64_t BalancedSince(const std::vector<WorkerProc>& workers, int shards) {
  const auto held = Holdings(workers);
  size_t live = 0;
  for (const WorkerProc& w : workers) live += w.alive() ? 1 : 0;
  std::vector<int> count(static_cast<size_t>(shards), 0);
  int64_t last = 0;
  for (size_t w = 0; w < workers.size(); ++w) {
    if (!workers[w].alive()) continue;
    const size_t n = held[w].size();
    const size_t lo = static_cast<size_t>(shards) / live;
    if (n < lo || n > lo + (static_cast<size_t>(shards) % live != 0 ? 1 : 0)) return -1;
    for (const auto& [shard, since] : held[w]) {
      if (shard < 0 || shard >= shards) return -1;
      ++count[static_cast<size_t>(shard)];
      last = std::max(last, since);
    }
  }
  return std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }) ? last : -1;
}

struct Overlap {
  int64_t pairs = 0;
  int64_t max_us = 0;
  // The first pairs found, for the JSON: which shard, which two workers, from when to when.
  boost::json::array details;
};

// Pairs of intervals of different workers on one shard that intersect.
Overlap FindOverlap(const std::vector<WorkerProc>& workers) {
  std::map<int32_t, std::vector<std::pair<Interval, size_t>>> by_shard;
  for (size_t w = 0; w < workers.size(); ++w) {
    for (const auto& [shard, list] : IntervalsOf(workers[w])) {
      for (const Interval& i : list) by_shard[shard].push_back({i, w});
    }
  }
  Overlap o;
  for (auto& [shard, list] : by_shard) {
    for (size_t a = 0; a < list.size(); ++a) {
      for (size_t b = a + 1; b < list.size(); ++b) {
        if (list[a].second == list[b].second) continue;
        const int64_t from = std::max(list[a].first.start_us, list[b].first.start_us);
        const int64_t to = std::min(list[a].first.end_us, list[b].first.end_us);
        if (from < to) {
          ++o.pairs;
          o.max_us = std::max(o.max_us, to == INT64_MAX ? INT64_MAX : to - from);
          if (o.details.size() < 20) {
            const auto& [ia, wa] = list[a];
            const auto& [ib, wb] = list[b];
            o.details.push_back(boost::json::object{{"shard", shard},
                                                    {"a", workers[wa].name},
                                                    {"a_from_us", ia.start_us},
                                                    {"a_to_us", ia.end_us},
                                                    {"a_killed_us", workers[wa].killed_us},
                                                    {"b", workers[wb].name},
                                                    {"b_from_us", ib.start_us},
                                                    {"b_to_us", ib.end_us},
                                                    {"b_killed_us", workers[wb].killed_us}});
          }
        }
      }
    }
  }
  return o;
}

// ── The runs ────────────────────────────────────────────────────────────────────────

struct Config {
  int kills = 20;
  int scaleouts = 3;
  int consumers = 4;
  int shards = 16;
  int scale_from = 4;
  int scale_to = 8;
  int scale_shards = 64;
  int64_t heartbeat_ms = 500;
  int64_t member_lease_ms = 3000;
  double seconds = 60;  // longest wait for any one state
  std::string coordinator = RSC_COORDINATOR_BINARY;
  std::string json;
};

struct Setting {
  std::string dir;
  std::string self;  // this binary, for the workers
  int coordinator_port = 0;
  std::string redis_url;
};

void CreateGroup(const Setting& s, const Config& cfg, const std::string& stream, int shards) {
  // K2: assignmentLeaseMs ≤ memberLeaseMs − 1 s; at least two heartbeats per lease.
  const int64_t assignment_ms = cfg.member_lease_ms - 1000;
  const std::string body = fmt::format(
      R"({{"stream":"{}","group":"g","shardCount":{},"config":{{"heartbeatIntervalMs":{},)"
      R"("memberLeaseMs":{},"assignmentLeaseMs":{},"rebalanceTimeoutMs":{}}}}})",
      stream, shards, cfg.heartbeat_ms, cfg.member_lease_ms, assignment_ms,
      2 * cfg.member_lease_ms);
  std::string answer;
  const int status = rsc::bench::HttpCall(s.coordinator_port, "POST", "/v1/groups", body, &answer);
  if (status != 201) Die(fmt::format("creating group {}/g: HTTP {} {}", stream, status, answer));
}

void Spawn(const Setting& s, const std::string& stream, std::vector<WorkerProc>& workers) {
  WorkerProc w;
  w.name = fmt::format("{}-w{}", stream, workers.size());
  w.log = fmt::format("{}/{}.jsonl", s.dir, w.name);
  w.child->Spawn(
      {s.self, "worker", "--coordinator", fmt::format("127.0.0.1:{}", s.coordinator_port),
       "--redis", s.redis_url, "--stream", stream, "--log", w.log},
      fmt::format("{}/{}.out", s.dir, w.name));
  workers.push_back(std::move(w));
}

int64_t WaitBalanced(const std::vector<WorkerProc>& workers, int shards, const Config& cfg,
                     const std::string& what) {
  int64_t since = -1;
  if (!rsc::bench::WaitUntil([&] { return (since = BalancedSince(workers, shards)) >= 0; },
                             milliseconds(static_cast<int64_t>(cfg.seconds * 1000)))) {
    Die(fmt::format("{}: not balanced within {} s", what, cfg.seconds));
  }
  return since;
}

void StopAll(std::vector<WorkerProc>& workers) {
  for (WorkerProc& w : workers) {
    if (w.alive()) ::kill(w.child->pid(), SIGTERM);
  }
  for (WorkerProc& w : workers) w.child->Stop();
}

boost::json::object Distribution(std::vector<double> ms) {
  return {
      {"n", static_cast<int64_t>(ms.size())},         {"min_ms", rsc::bench::Percentile(ms, 0)},
      {"median_ms", rsc::bench::Percentile(ms, 0.5)}, {"p90_ms", rsc::bench::Percentile(ms, 0.9)},
      {"max_ms", rsc::bench::Percentile(ms, 1)},      {"samples_ms", boost::json::value_from(ms)}};
}

boost::json::object RunFailover(const Setting& s, const Config& cfg) {
  const std::string stream = "failover";
  CreateGroup(s, cfg, stream, cfg.shards);
  std::vector<WorkerProc> workers;
  for (int i = 0; i < cfg.consumers; ++i) Spawn(s, stream, workers);
  WaitBalanced(workers, cfg.shards, cfg, "failover set-up");
  std::vector<double> failover_ms;
  for (int k = 0; k < cfg.kills; ++k) {
    std::vector<size_t> live;
    for (size_t w = 0; w < workers.size(); ++w) {
      if (workers[w].alive()) live.push_back(w);
    }
    const size_t victim = live[static_cast<size_t>(k) % live.size()];
    std::set<int32_t> lost;
    const auto before = Holdings(workers);
    for (const auto& [shard, since] : before[victim]) lost.insert(shard);
    WorkerProc& v = workers[victim];
    v.killed_us = NowUs();
    v.child->Kill();
    // Done when every lost shard is held again, by a worker that acquired it after the kill.
    int64_t last = -1;
    const bool moved = rsc::bench::WaitUntil(
        [&] {
          const auto held = Holdings(workers);
          int64_t latest = 0;
          for (int32_t shard : lost) {
            int64_t since = -1;
            for (const auto& h : held) {
              if (auto it = h.find(shard); it != h.end()) since = it->second;
            }
            if (since < v.killed_us) return false;
            latest = std::max(latest, since);
          }
          last = latest;
          return true;
        },
        milliseconds(static_cast<int64_t>(cfg.seconds * 1000)));
    if (!moved) Die(fmt::format("kill {}: shards not read elsewhere within {} s", k, cfg.seconds));
    failover_ms.push_back(static_cast<double>(last - v.killed_us) / 1000.0);
    std::fprintf(stderr, "  kill %d: %zu shards read elsewhere after %.0f ms\n", k + 1, lost.size(),
                 failover_ms.back());
    Spawn(s, stream, workers);
    WaitBalanced(workers, cfg.shards, cfg, fmt::format("after kill {}", k + 1));
  }
  StopAll(workers);
  const Overlap overlap = FindOverlap(workers);
  boost::json::object out = Distribution(failover_ms);
  out["consumers"] = cfg.consumers;
  out["shards"] = cfg.shards;
  out["heartbeat_interval_ms"] = cfg.heartbeat_ms;
  out["member_lease_ms"] = cfg.member_lease_ms;
  out["bound_ms"] = cfg.member_lease_ms + cfg.heartbeat_ms;
  out["overlap_pairs"] = overlap.pairs;
  out["overlap_max_ms"] = static_cast<double>(overlap.max_us) / 1000.0;
  out["overlaps"] = overlap.details;
  return out;
}

boost::json::object RunScaleOuts(const Setting& s, const Config& cfg) {
  std::vector<double> balanced_ms;
  Overlap overlap;
  for (int r = 0; r < cfg.scaleouts; ++r) {
    const std::string stream = fmt::format("scaleout-{}", r);
    CreateGroup(s, cfg, stream, cfg.scale_shards);
    std::vector<WorkerProc> workers;
    for (int i = 0; i < cfg.scale_from; ++i) Spawn(s, stream, workers);
    WaitBalanced(workers, cfg.scale_shards, cfg, "scale-out set-up");
    const int64_t t0 = NowUs();
    for (int i = cfg.scale_from; i < cfg.scale_to; ++i) Spawn(s, stream, workers);
    const int64_t done = WaitBalanced(workers, cfg.scale_shards, cfg, "scale-out");
    balanced_ms.push_back(static_cast<double>(done - t0) / 1000.0);
    std::fprintf(stderr, "  scale-out %d: %d -> %d consumers balanced after %.0f ms\n", r + 1,
                 cfg.scale_from, cfg.scale_to, balanced_ms.back());
    StopAll(workers);
    const Overlap o = FindOverlap(workers);
    overlap.pairs += o.pairs;
    overlap.max_us = std::max(overlap.max_us, o.max_us);
    for (const auto& d : o.details) {
      if (overlap.details.size() < 20) overlap.details.push_back(d);
    }
  }
  boost::json::object out = Distribution(balanced_ms);
  out["from"] = cfg.scale_from;
  out["to"] = cfg.scale_to;
  out["shards"] = cfg.scale_shards;
  out["heartbeat_interval_ms"] = cfg.heartbeat_ms;
  out["overlap_pairs"] = overlap.pairs;
  out["overlap_max_ms"] = static_cast<double>(overlap.max_us) / 1000.0;
  out["overlaps"] = overlap.details;
  return out;
}

void PrintDistribution(const char* what, const boost::json::object& d, const char* reference,
                       int64_t reference_ms) {
  std::printf("| %s | %lld | %.0f | %.0f | %.0f | %.0f | %s %lld ms | %lld |\n", what,
              static_cast<long long>(d.at("n").as_int64()), d.at("min_ms").as_double(),
              d.at("median_ms").as_double(), d.at("p90_ms").as_double(), d.at("max_ms").as_double(),
              reference, static_cast<long long>(reference_ms),
              static_cast<long long>(d.at("overlap_pairs").as_int64()));
}

}  // namespace

int main(int argc, char** argv) {
  rsc::bench::SetProgramName("rebalance_timing");
  if (argc > 1 && std::string(argv[1]) == "worker") return Worker(argc, argv);
  Config cfg;
  CLI::App app{"failover after kill -9 and scale-out times of consumer processes (issue 14)"};
  app.add_option("--kills", cfg.kills, "kill -9 samples (0 = skip)")->capture_default_str();
  app.add_option("--scaleouts", cfg.scaleouts, "scale-out samples (0 = skip)")
      ->capture_default_str();
  app.add_option("--consumers", cfg.consumers, "failover: consumers")->capture_default_str();
  app.add_option("--shards", cfg.shards, "failover: shards")->capture_default_str();
  app.add_option("--scale-from", cfg.scale_from, "scale-out: consumers before")
      ->capture_default_str();
  app.add_option("--scale-to", cfg.scale_to, "scale-out: consumers after")->capture_default_str();
  app.add_option("--scale-shards", cfg.scale_shards, "scale-out: shards")->capture_default_str();
  app.add_option("--heartbeat-ms", cfg.heartbeat_ms, "heartbeatIntervalMs")->capture_default_str();
  app.add_option("--member-lease-ms", cfg.member_lease_ms, "memberLeaseMs")->capture_default_str();
  app.add_option("--seconds", cfg.seconds, "longest wait for any one state")->capture_default_str();
  app.add_option("--coordinator", cfg.coordinator, "rsc-coordinator binary")->capture_default_str();
  app.add_option("--json", cfg.json, "also write the figures to this file");
  CLI11_PARSE(app, argc, argv);
  if (cfg.consumers < 2 || cfg.scale_from < 1 || cfg.scale_to <= cfg.scale_from ||
      cfg.shards < cfg.consumers || cfg.scale_shards < cfg.scale_to) {
    Die("need --consumers >= 2, --scale-to > --scale-from, and at least one shard per consumer");
  }
  ::signal(SIGPIPE, SIG_IGN);
  Setting s;
  s.dir = (std::filesystem::temp_directory_path() / fmt::format("rsc-rebalance-{}", ::getpid()))
              .string();
  std::filesystem::create_directories(s.dir);
  s.self = std::filesystem::read_symlink("/proc/self/exe").string();
  Child redis;
  const int redis_port = rsc::bench::StartRedis(redis, s.dir);
  s.redis_url = fmt::format("redis://127.0.0.1:{}", redis_port);
  Child coordinator;
  s.coordinator_port =
      rsc::bench::StartCoordinator(coordinator, cfg.coordinator, s.redis_url, s.dir, "coordinator");
  const std::string load_before = rsc::bench::LoadAverage();

  boost::json::object result{{"benchmark", "rebalance_timing"},
                             {"load_average_before", load_before}};
  std::printf(
      "rebalance timing: consumer processes, heartbeatIntervalMs %lld, memberLeaseMs %lld, "
      "load average before: %s\n\n"
      "| what | n | min ms | median ms | p90 ms | max ms | reference | overlapping pairs |\n"
      "|---|---|---|---|---|---|---|---|\n",
      static_cast<long long>(cfg.heartbeat_ms), static_cast<long long>(cfg.member_lease_ms),
      load_before.c_str());
  if (cfg.kills > 0) {
    boost::json::object f = RunFailover(s, cfg);
    PrintDistribution(fmt::format("kill -9 → shards read elsewhere ({} consumers, {} shards)",
                                  cfg.consumers, cfg.shards)
                          .c_str(),
                      f, "memberLease + heartbeat =", cfg.member_lease_ms + cfg.heartbeat_ms);
    result["failover"] = std::move(f);
  }
  if (cfg.scaleouts > 0) {
    boost::json::object so = RunScaleOuts(s, cfg);
    PrintDistribution(fmt::format("scale-out {} → {} consumers, {} shards → balanced",
                                  cfg.scale_from, cfg.scale_to, cfg.scale_shards)
                          .c_str(),
                      so, "heartbeatInterval =", cfg.heartbeat_ms);
    result["scaleout"] = std::move(so);
  }
  std::printf("\nload average after: %s\n", rsc::bench::LoadAverage().c_str());
  if (!cfg.json.empty()) rsc::bench::WriteJson(cfg.json, result);
  coordinator.Stop();
  redis.Stop();
  int64_t overlaps = 0;
  for (const char* part : {"failover", "scaleout"}) {
    if (result.contains(part)) overlaps += result.at(part).at("overlap_pairs").as_int64();
  }
  if (std::getenv("RSC_BENCH_KEEP") != nullptr || overlaps > 0) {
    // The evidence of an overlap is kept whatever was asked: it is rare and must be read.
    std::printf("kept (%s): %s\n", overlaps > 0 ? "overlaps found" : "RSC_BENCH_KEEP",
                s.dir.c_str());
  } else {
    std::filesystem::remove_all(s.dir);
  }
  return 0;
}
