#pragma once
// One seeded run of the deterministic simulation (issue 4, SPEC §10 level 3).
//
// A run draws everything from its seed: the group config (within what ValidateConfig
// accepts), shard/consumer/producer counts, the coordinator replica schedule (1, 2, 3,
// 1→2→1 or 1→0→1), latencies, which BUGGIFY fault sites are on. Then:
//   safety phase   processes start, faults are injected (network, Redis, coordinator and
//                  client crashes, clocks, operator actions); invariants are checked after
//                  every step;
//   heal           faults stop, partitions heal, everything is restarted, a deleted key is
//                  restored; a `heal` fault (status "all") starts the checker's L1 clock;
//   liveness phase the group must converge within the bound; producers stop publishing for
//                  the last part so that every acknowledged publish can be delivered (S3).
// On a violation the run stops at that step; the result holds the invariant, the last
// events and the replay command.

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/metadata.h"
#include "sim/buggify.h"
#include "sim/checkers.h"
#include "sim/history.h"

namespace rsc::sim {

struct SimOptions {
  uint64_t seed = 1;
  // Overrides; 0 = drawn from the seed.
  int64_t safety_ms = 0;
  int32_t shards = 0;
  int consumers = 0;
  int producers = 0;
  int reshards = -1;      // operator reshards per run; -1 = drawn from the seed
  int coord_workers = 0;  // worker fibers per coordinator; 0 = drawn from the seed
  int pipelined = -1;     // 1: one server, reads pipelined; 0: a simulated cluster; -1 = drawn
  Buggify::Mode sites = Buggify::Mode::kRandom;
  FILE* trace = nullptr;  // print every event as it happens
  std::string mutant;     // a run-time mutant (sim/mutants.h); "" = the correct system
  size_t tail = 50;       // events kept for the failure report
};

// Everything a run draws from its seed.
struct SimParams {
  GroupConfig group;
  int32_t shards = 1;
  int consumers = 1;
  int producers = 1;
  std::string schedule;  // "1", "2", "3", "1-2-1", "1-0-1"
  int coord_slots = 1;
  TimeMs schedule_t1 = 0;
  TimeMs schedule_t2 = 0;
  TimeMs safety_ms = 0;
  TimeMs convergence_bound_ms = 0;
  TimeMs tail_ms = 0;  // producers are quiet for this long at the end
  TimeMs lock_ttl_ms = 2000;
  TimeMs lock_wait_ms = 1500;
  TimeMs tick_ms = 1000;
  TimeMs http_timeout_ms = 2000;
  TimeMs coord_redis_timeout_ms = 1000;
  int max_batch = 10;
  TimeMs block_ms = 1000;
  TimeMs handler_max_ms = 20;
  TimeMs publish_min_ms = 20;
  TimeMs publish_max_ms = 200;
  int keys = 4;
  TimeMs max_lag_ms = 0;
  TimeMs skew_bound_ms = 150;  // coordinator wall clocks stay within ±this of true time
  int reshards = 0;            // operator reshards (1–16 shards) during the fault phase
  int coord_workers = 1;       // worker fibers per coordinator process (1–4)
  bool pipelined = false;      // one server (reads pipelined); false: a simulated cluster
  std::string Describe() const;
};

SimParams DrawParams(const SimOptions& options);

struct SimResult {
  uint64_t seed = 0;
  SimParams params;
  std::optional<Violation> violation;
  std::vector<HistEvent> tail;
  std::string state;  // both sides' view at the end (failures)
  uint64_t digest = 0;
  int64_t events = 0;
  TimeMs simulated_ms = 0;
  double real_seconds = 0;
  std::map<std::string, int64_t> faults;
  std::map<std::string, int64_t> probes;
  std::map<std::string, bool, std::less<>> sites;
  CheckerCounters counters;
};

SimResult RunSimulation(const SimOptions& options);

// A sweep of at least this many seeds must reach every probe (sim/buggify.h).
inline constexpr int kDefaultSweepSeeds = 30;

struct SweepTotals {
  int64_t seeds = 0;
  int64_t failures = 0;
  TimeMs simulated_ms = 0;
  double real_seconds = 0;
  int64_t events = 0;
  std::map<std::string, int64_t> faults;
  std::map<std::string, int64_t> probes;
  CheckerCounters counters;

  void Add(const SimResult& r);
  std::vector<std::string> UnreachedProbes() const;
  // The summary table the CLI prints.
  std::string Summary() const;
};

// The one-line command that replays `options` (overrides included).
std::string ReplayCommand(const SimOptions& options, const std::string& binary = "rsc-sim");
// The failure report: seed, invariant, the last events, the replay command.
std::string FailureReport(const SimOptions& options, const SimResult& result,
                          const std::string& binary = "rsc-sim");

}  // namespace rsc::sim
