// rsc-sim: the deterministic simulator's command line (issue 4).
//
//   rsc-sim --seed 42 [--trace]        replay one seed (every event with --trace)
//   rsc-sim --seeds 100 [--base-seed 1] sweep seeds base … base+N-1
//   rsc-sim --minutes 10               time-boxed sweep from a random base seed
// On a violation: the seed, the invariant and message, the last events, the state at the
// end and a one-line replay command; exit status 1. On success: a summary table (seeds,
// simulated hours, speed-up, faults by kind, probes reached); a sweep of at least the
// default seed count that left a probe at zero also fails.
//
// --expect INV turns a sweep into a mutation check: it succeeds when some seed violates
// invariant INV. --mutant NAME runs a deliberately broken rule (sim/mutants.h,
// --list-mutants); the binary rsc-sim-mutant-resume_revoking_on_failure is built with one.
// An --expect run stops at the first violation: a different invariant than expected fails.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "sim/mutants.h"
#include "sim/simulation.h"

namespace {

// Whether `invariant` is `expect` or one of its '|'-separated alternatives ("S1|S2": a
// mutant whose first violation depends on the seed — a handoff judged S2 when the old
// holder crashed, S1 when it was still reading).
bool Expected(const std::string& expect, const std::string& invariant) {
  size_t from = 0;
  while (from <= expect.size()) {
    size_t end = expect.find('|', from);
    if (end == std::string::npos) end = expect.size();
    if (expect.compare(from, end - from, invariant) == 0) return true;
    from = end + 1;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rsc::sim;
  CLI::App app{"rsc-sim: deterministic simulation of coordinators, consumers, producers and Redis"};
  uint64_t seed = 0;
  int64_t seeds = 0;
  uint64_t base_seed = 1;
  double minutes = 0;
  bool trace = false;
  bool all_faults = false;
  bool no_faults = false;
  int64_t safety_seconds = 0;
  int shards = 0;
  int consumers = 0;
  int producers = 0;
  int reshards = -1;
  int coord_workers = 0;
  int pipelined = -1;
  std::string expect;
  std::string mutant;
  bool list_mutants = false;
  bool quiet = false;
  app.add_option("--seed", seed, "Run (replay) exactly this seed");
  app.add_option("--seeds", seeds, "Sweep this many seeds from --base-seed");
  app.add_option("--base-seed", base_seed, "First seed of a --seeds sweep");
  app.add_option("--minutes", minutes, "Sweep random seeds for this many minutes (wall time)");
  app.add_flag("--trace", trace, "Print every history event as it happens");
  app.add_option("--safety-seconds", safety_seconds, "Length of the fault phase (simulated)");
  app.add_option("--shards", shards, "Shard count (default: drawn per seed, 1-16)");
  app.add_option("--consumers", consumers, "Consumer count (default: drawn per seed, 1-6)");
  app.add_option("--producers", producers, "Producer count (default: drawn per seed, 1-3)");
  app.add_option("--reshards", reshards,
                 "Operator reshards per run (default: drawn per seed, 0-3; 0 = none)");
  app.add_option("--coord-workers", coord_workers,
                 "Worker fibers per coordinator (default: drawn per seed, 1-4)")
      ->check(CLI::Range(1, 16));
  app.add_option("--pipelined", pipelined,
                 "1: one server, consumers pipeline a backlog's XACK, read and late-read "
                 "check; 0: the consumers' readers see a simulated Redis Cluster and send "
                 "one command at a time (default: drawn per seed)")
      ->check(CLI::Range(0, 1));
  app.add_flag("--all-faults", all_faults, "Switch every BUGGIFY site on");
  app.add_flag("--no-faults", no_faults, "Switch every BUGGIFY site off");
  app.add_option("--expect", expect,
                 "Succeed only if some seed violates this invariant, or one of several "
                 "given as S1|S2 (mutation checks)");
  app.add_option("--mutant", mutant, "Run with this rule deliberately broken (--list-mutants)")
      ->check([](const std::string& name) {
        return FindMutant(name) != nullptr ? std::string() : "unknown mutant '" + name + "'";
      });
  app.add_flag("--list-mutants", list_mutants, "List the run-time mutants and exit");
  app.add_flag("--quiet", quiet, "Print only failures and the final summary");
  CLI11_PARSE(app, argc, argv);
  if (list_mutants) {
    for (const MutantInfo& m : Mutants()) {
      std::printf("%-26s breaks %-8s caught by %-4s %s\n", m.name, m.rule, m.invariant, m.what);
    }
    return 0;
  }

  SimOptions base;
  base.safety_ms = safety_seconds * 1000;
  base.shards = shards;
  base.consumers = consumers;
  base.producers = producers;
  base.reshards = reshards;
  base.coord_workers = coord_workers;
  base.pipelined = pipelined;
  base.mutant = mutant;
  base.sites = all_faults  ? rsc::sim::Buggify::Mode::kAllOn
               : no_faults ? rsc::sim::Buggify::Mode::kAllOff
                           : rsc::sim::Buggify::Mode::kRandom;
  const std::string binary = argv[0];

  if (app.count("--seed") > 0) {
    SimOptions o = base;
    o.seed = seed;
    o.trace = trace ? stdout : nullptr;
    const SimResult r = RunSimulation(o);
    if (r.violation) {
      std::printf("%s", FailureReport(o, r, binary).c_str());
      return expect.empty() || !Expected(expect, r.violation->invariant) ? 1 : 0;
    }
    SweepTotals t;
    t.Add(r);
    std::printf("seed %llu passed (history digest %016llx, %lld events)\n%s\n%s",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(r.digest),
                static_cast<long long>(r.events), r.params.Describe().c_str(), t.Summary().c_str());
    return expect.empty() ? 0 : 1;
  }

  const auto start = std::chrono::steady_clock::now();
  uint64_t next = base_seed;
  if (minutes > 0 && app.count("--base-seed") == 0) {
    std::random_device rd;
    next = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    std::printf("time-boxed sweep from base seed %llu\n", static_cast<unsigned long long>(next));
  }
  if (seeds == 0 && minutes <= 0) seeds = kDefaultSweepSeeds;
  SweepTotals totals;
  for (int64_t i = 0;; ++i) {
    if (seeds > 0 && i >= seeds) break;
    if (minutes > 0 && std::chrono::steady_clock::now() - start >
                           std::chrono::duration<double, std::ratio<60>>(minutes)) {
      break;
    }
    SimOptions o = base;
    o.seed = next++;
    const SimResult r = RunSimulation(o);
    totals.Add(r);
    if (r.violation) {
      std::printf("%s", FailureReport(o, r, binary).c_str());
      if (!expect.empty()) {
        if (Expected(expect, r.violation->invariant)) {
          std::printf("mutation caught: %s violated at seed %llu (after %lld seeds)\n",
                      r.violation->invariant.c_str(), static_cast<unsigned long long>(o.seed),
                      static_cast<long long>(i + 1));
          return 0;
        }
        std::printf("expected %s, got %s\n", expect.c_str(), r.violation->invariant.c_str());
        return 1;
      }
      std::printf("\n%s", totals.Summary().c_str());
      return 1;
    }
    if (!quiet) {
      std::printf("seed %llu ok  %5.1fs simulated in %.2fs  %lld events\n",
                  static_cast<unsigned long long>(o.seed),
                  static_cast<double>(r.simulated_ms) / 1000, r.real_seconds,
                  static_cast<long long>(r.events));
      std::fflush(stdout);
    }
  }
  std::printf("\n%s", totals.Summary().c_str());
  if (!expect.empty()) {
    std::printf("mutation NOT caught: no seed violated %s\n", expect.c_str());
    return 1;
  }
  const auto unreached = totals.UnreachedProbes();
  if (totals.seeds >= kDefaultSweepSeeds && !unreached.empty()) {
    std::printf("FAILED: a sweep of %lld seeds never reached %zu probe(s), e.g. %s\n",
                static_cast<long long>(totals.seeds), unreached.size(), unreached[0].c_str());
    return 1;
  }
  return 0;
}
