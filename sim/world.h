#pragma once
// World: simulated time, the event queue, the run's RNG, the history and its checker.
//
// Time is one global clock in milliseconds (processes see it through their own skewed or
// jumping local clocks). Events run in (time, sequence) order, so two events at the same
// millisecond run in the order they were scheduled: together with one seeded RNG and no
// other source of nondeterminism, a seed replays exactly.
//
// Every observation the simulated processes make goes through Emit(): stamped with the
// global time, appended to the history, folded into the run's digest, and handed to the
// Checker at once, so a run stops at the very step that broke an invariant.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/types.h"
#include "sim/buggify.h"
#include "sim/checkers.h"
#include "sim/history.h"
#include "sim/mutants.h"
#include "sim/rng.h"

namespace rsc::sim {

class Fiber;

class World {
 public:
  World(uint64_t seed, Buggify::Mode mode);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  TimeMs now() const { return now_; }
  Rng& rng() { return rng_; }
  Buggify& buggify() { return buggify_; }
  Probes& probes() { return probes_; }
  // The run-time mutant in force (sim/mutants.h); its name is "" in a correct run.
  const ClientMutant& mutant() const { return mutant_; }
  void set_mutant(std::string name) { mutant_.name = std::move(name); }

  // ── events ──
  void At(TimeMs t, std::function<void()> fn);
  void After(TimeMs delay, std::function<void()> fn) {
    At(now_ + std::max<TimeMs>(0, delay), std::move(fn));
  }
  // Runs every event due at or before `until`, then sets the clock to `until` (unless the
  // run was stopped by a violation).
  void RunUntil(TimeMs until);
  size_t pending_events() const { return queue_.size(); }
  int64_t events_run() const { return events_run_; }
  // Fiber side: lets `delay` of simulated time pass for the calling fiber. When nothing else
  // is due before then the clock simply moves on (no hand-off); otherwise the fiber parks
  // and an event resumes it.
  void Sleep(Fiber& fiber, TimeMs delay);

  // ── history ──
  void SetChecker(CheckerConfig config);
  void Emit(HistEvent e);
  // Emit with an earlier time stamp: a publish is recorded when its XADD is acknowledged,
  // stamped with the time the XADD was sent (sim/history.h).
  void EmitAt(HistEvent e, TimeMs t);
  // kFault event with detail = `kind` (a readable note goes to `status`), counted by kind.
  void Fault(const std::string& kind, const std::string& note = "", const std::string& member = "");
  const History& history() const { return history_; }
  uint64_t digest() const { return digest_; }
  const std::map<std::string, int64_t>& fault_counts() const { return fault_counts_; }
  // Print every event as it happens (the CLI's --trace).
  void set_trace(FILE* out) { trace_ = out; }
  // Called with every event after the checker has seen it (the simulation's own bookkeeping:
  // e.g. it taints an answer that crossed a rollback). It may emit events itself; the event
  // it was given is then no longer valid (the history grew).
  void set_observer(std::function<void(const HistEvent&)> fn) { observer_ = std::move(fn); }

  // ── outcome ──
  bool stopped() const { return stopped_; }
  const std::optional<Violation>& violation() const { return violation_; }
  // A violation found outside the history's checker (the simulation's own watches): the
  // run's violation unless one came first; the run stops.
  void Fail(Violation v);
  // Finish() of the checker, once; violations found there become the run's violation.
  void FinishChecker();
  const CheckerCounters* checker_counters() const;

 private:
  struct Event {
    TimeMs t;
    uint64_t seq;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.t != b.t ? a.t > b.t : a.seq > b.seq;
    }
  };

  TimeMs now_ = 0;
  uint64_t seq_ = 0;
  int64_t events_run_ = 0;
  std::vector<Event> queue_;  // a heap ordered by Later
  Rng rng_;
  Buggify buggify_;
  Probes probes_;
  History history_;
  uint64_t digest_ = 0;
  std::unique_ptr<Checker> checker_;
  bool checker_finished_ = false;
  std::optional<Violation> violation_;
  bool stopped_ = false;
  std::map<std::string, int64_t> fault_counts_;
  FILE* trace_ = nullptr;
  std::function<void(const HistEvent&)> observer_;
  ClientMutant mutant_;
};

// A readable one-line form of an event (traces and failure reports).
std::string FormatEvent(const HistEvent& e);
// Folds one event into a running digest (replay determinism).
uint64_t DigestEvent(uint64_t digest, const HistEvent& e);

}  // namespace rsc::sim
