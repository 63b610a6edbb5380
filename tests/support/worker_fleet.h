#pragma once
// WorkerFleet: the client processes of a multi-process run (tests/e2e, tests/chaos) and
// their logs. It owns a run directory (/tmp/<prefix>-XXXXXX) holding, per process, its
// JSONL History (sim/history.h) and its stdout/stderr, plus the harness's own JSONL log
// (crashes it caused, faults it injected). It spawns `rsc-e2e-worker` processes
// (tests/e2e/worker.cc) under unique proc names `name#incarnation`, sends them signals,
// reaps them, and reads their logs back: merged into one history for the checkers
// (sim/checkers.h), or probed while the run goes on (deliveries, held shards).
//
// Recording rule (what the checkers rely on): a process killed with SIGKILL cannot log its
// end, so Kill() records a `crash` for it, stamped after waitpid returned — the process is
// gone by then, so no event of it can follow the record. SIGSTOP/SIGCONT are not recorded:
// a paused process simply logs nothing.
//
// The destructor SIGKILLs and reaps whatever still runs (without records: the run is over)
// and removes the directory unless the current test failed or the environment variable
// named at construction is set; then it prints where the logs are.
//
// Thread safety: none; drive a fleet from the test's thread.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/checkers.h"
#include "sim/history.h"

namespace rsc::testing {

// std::chrono::steady_clock (CLOCK_MONOTONIC) in µs: the clock every log of a run uses.
int64_t SteadyUs();

// One rsc-e2e-worker process (one incarnation of a name).
struct Worker {
  std::string name;      // "c1"
  std::string proc;      // "c1#2": name#incarnation, unique in the run
  std::string log_path;  // its JSONL history
  std::string out_path;  // its stdout/stderr
  pid_t pid = -1;        // -1 once reaped
  bool paused = false;   // SIGSTOPped by Pause()
  bool running() const { return pid > 0; }
};

class WorkerFleet {
 public:
  // `prefix`: the run directory's name prefix; `keep_env`: an environment variable that,
  // when set, keeps the logs of a passing run too.
  WorkerFleet(std::string prefix, std::string keep_env);
  ~WorkerFleet();
  WorkerFleet(const WorkerFleet&) = delete;
  WorkerFleet& operator=(const WorkerFleet&) = delete;

  // Creates the run directory and checks that the worker binary was built.
  ::testing::AssertionResult Init();
  // Arguments every worker gets after its own (e.g. --coordinator, --redis, --stream,
  // --group); `--log` and `--proc` are added per process.
  void SetCommonArgs(std::vector<std::string> args) { common_args_ = std::move(args); }

  const std::string& dir() const { return dir_; }
  const std::string& harness_log() const { return harness_log_; }
  static std::string WorkerBinary();

  // Appends an event to the harness log (stamped now unless e.t_us is set).
  void Record(sim::HistEvent e);
  void Record(sim::HistKind kind, const std::string& proc, const std::string& detail = "");

  // Spawns `rsc-e2e-worker <args> <common args> --log <file> --proc name#n`, n counting the
  // incarnations of `name`. Returns null (after ADD_FAILURE) if fork fails. The pointer
  // stays valid for the fleet's life.
  Worker* Spawn(const std::string& name, const std::vector<std::string>& args);
  // SIGKILL, reap, then record the crash.
  void Kill(Worker* w);
  // SIGTERM (and SIGCONT, so a paused process can act on it); does not wait.
  void Term(Worker* w);
  // SIGSTOP / SIGCONT.
  void Pause(Worker* w);
  void Resume(Worker* w);
  // If the worker has exited (unexpectedly: nothing here killed it), reaps it and returns its
  // exit code (128 + signal); nullopt while it runs. Records nothing: a process that died
  // on its own is a failure of the run, not a fault it injected.
  std::optional<int> Poll(Worker* w);
  // Waits (bounded) for a worker to exit; returns its exit code (128 + signal if killed),
  // nullopt if it still runs.
  std::optional<int> WaitExit(Worker* w, std::chrono::milliseconds wait);

  const std::deque<Worker>& workers() const { return workers_; }
  // Its output and last events, for failure messages.
  std::string Describe(const Worker& w) const;

  // Lines of kind `kind` in a log (cheap progress probe; no parsing).
  static int64_t CountKind(const std::string& path, std::string_view kind);
  // Every log of the run (workers', then the harness's), merged and stably sorted by t_us:
  // among events stamped at the same microsecond the harness's records come last, so a
  // crash record follows anything its victim logged. Lines that do not parse fail the test.
  sim::History Merged() const;
  // The (key, seq) of every kDeliver so far, over every worker log.
  std::set<std::pair<std::string, int64_t>> Delivered() const;
  int64_t DeliveredUnique() const { return static_cast<int64_t>(Delivered().size()); }
  // Shards some live process holds now (acquired, not released, not crashed/stopped).
  std::set<int32_t> HeldShards() const;

 private:
  std::string prefix_;
  std::string keep_env_;
  std::string dir_;
  std::string harness_log_;
  std::vector<std::string> common_args_;
  std::map<std::string, int> incarnations_;
  std::deque<Worker> workers_;  // stable addresses
};

// What the checkers assume of a run of real processes: the group's shard count and leases
// (its config object, e.g. FastLeases(): assignmentLeaseMs, routingLeaseMs,
// memberLeaseMs), the L1 bound after the last heal; coordinator-side rules off (real
// coordinators write no history), delivery (S3) checked.
sim::CheckerConfig RealProcessCheckConfig(int32_t shards, const boost::json::object& group_config,
                                          int64_t convergence_bound_us);

// Violations formatted for a failure message (at most `max`, then "... N more").
std::string ShowViolations(const std::vector<sim::Violation>& vs, size_t max = 10);

}  // namespace rsc::testing
