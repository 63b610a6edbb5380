// End-to-end, multi-process (issue 3): a real redis-server, a real rsc-coordinator and
// separate client processes (tests/e2e/worker.cc, `rsc-e2e-worker`). A producer publishes N
// keyed messages while consumers join, leave cleanly, are SIGKILLed and restarted (same
// instanceId, and replaced by a new member), and while the coordinator is SIGKILLed and
// restarted on the same port. Every process writes what its client library reports through
// the public hooks (ConsumerOptions::on_event, ProducerOptions::on_publish) as History events
// (sim/history.h, JSONL, CLOCK_MONOTONIC stamps); the harness adds a `crash` event after
// reaping each SIGKILLed process, and `fault` records for the coordinator outage
// (coordinators_down / coordinators_up) and the end of the faults (heal). The merged history
// is judged by the simulator's checkers (sim/checkers.h): S1 no shard read by two members in
// overlapping lease windows (and no read outside a lease), S2 every handoff justified, S3
// every acked publish delivered, S4 per-key order except redeliveries, S5 no publish outside
// its routing lease, L1 convergence after the last fault, L2 reading/publishing stops within
// the leases while no coordinator runs. Direct checks back them up: deliveries only inside
// acquire … release, no acknowledged entry delivered again.
//
// A second test keeps the coordinator down longer than the assignment lease: consumers stop
// reading by their lease end and release their shards ("abandoned"), then resume.
//
// A negative control feeds the same checkers doctored copies of the real history (a
// consumer's releases removed; a delivery removed) and expects S1 / S3 violations, so a
// checker that accepts everything cannot pass this test.
//
// Run inside scripts/netns.sh (the host loopback is throttled).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/live_group.h"
#include "sim/checkers.h"
#include "sim/history.h"
#include "support/coordinator_process.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc {
namespace {

using namespace std::chrono_literals;
using rsc::sim::HistEvent;
using rsc::sim::HistKind;
using rsc::sim::History;
using rsc::testing::CoordinatorOptions;
using rsc::testing::CoordinatorProcess;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

constexpr int kShards = 8;
constexpr const char* kStream = "orders";
constexpr const char* kGroup = "billing";
// Leases of the group (FastLeases): what the checkers may assume.
constexpr int64_t kAssignmentLeaseMs = 1500;
constexpr int64_t kMemberLeaseMs = 2500;
constexpr int64_t kRoutingLeaseMs = 3000;
// L1: after the last fault ("heal"), every shard is held by exactly one live consumer
// within this (a crashed dynamic member's shards wait for its member lease).
constexpr int64_t kConvergenceBoundUs = 10'000'000;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tail(const std::string& text, size_t lines) {
  std::vector<std::string> all;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "\n  | " + all[i];
  }
  return out;
}

std::string WorkerBinary() { return std::string(RSC_BINARY_DIR) + "/tests/rsc-e2e-worker"; }

// One rsc-e2e-worker process.
struct Worker {
  std::string proc;      // "c1#2": name#incarnation, unique in the run
  std::string log_path;  // its JSONL history
  std::string out_path;  // its stdout/stderr
  pid_t pid = -1;
};

// A whole run: the processes, their logs, and the harness's own events (crashes).
class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rsc-e2e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    harness_log_ = dir_ + "/harness.jsonl";
    ASSERT_EQ(::access(WorkerBinary().c_str(), X_OK), 0)
        << WorkerBinary() << " is missing: build it (cmake --build build --target "
        << "rsc-e2e-worker)";
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, kStream, kGroup, kShards,
                                             rsc::testing::FastLeases()));
    coordinator_port_ = coordinator_->Port();
    coordinator_incarnation_ = 1;
    LogHarness(HistKind::kStart, "coordinator#1");
  }

  void TearDown() override {
    for (Worker& w : workers_) {
      if (w.pid > 0) {
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, nullptr, 0);
        w.pid = -1;
      }
    }
    if (HasFailure() || std::getenv("RSC_E2E_KEEP") != nullptr) {
      std::cerr << "e2e: logs kept in " << dir_ << "\n";
    } else if (!dir_.empty()) {
      std::filesystem::remove_all(dir_);
    }
  }

  void LogHarness(HistKind kind, const std::string& proc, const std::string& detail = "") {
    HistEvent e;
    e.kind = kind;
    e.t_us = NowUs();
    e.proc = proc;
    e.detail = detail;
    std::ofstream(harness_log_, std::ios::app) << rsc::sim::ToJsonLine(e) << "\n";
  }

  std::string CoordinatorAddress() const {
    return "127.0.0.1:" + std::to_string(coordinator_port_);
  }

  // Spawns a worker; its proc name is `name#<n>`, n counting the incarnations of `name`.
  Worker* Spawn(const std::string& name, std::vector<std::string> args) {
    const int n = ++incarnations_[name];
    Worker w;
    w.proc = name + "#" + std::to_string(n);
    w.log_path = dir_ + "/" + name + "_" + std::to_string(n) + ".jsonl";
    w.out_path = dir_ + "/" + name + "_" + std::to_string(n) + ".out";
    std::vector<std::string> argv_s = {WorkerBinary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    argv_s.insert(argv_s.end(),
                  {"--coordinator", CoordinatorAddress(), "--redis", redis_.Url(), "--stream",
                   kStream, "--group", kGroup, "--log", w.log_path, "--proc", w.proc});
    std::vector<char*> argv;
    for (std::string& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      return nullptr;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      const int fd = ::open(w.out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    w.pid = pid;
    workers_.push_back(std::move(w));
    return &workers_.back();
  }

  Worker* SpawnConsumer(const std::string& name, const std::string& instance) {
    std::vector<std::string> args = {"consume", "--handler-delay-us", "8000"};
    if (!instance.empty()) args.insert(args.end(), {"--instance", instance});
    return Spawn(name, args);
  }

  // SIGKILL, reap, then record the crash (stamped after waitpid: the process is gone).
  void Kill(Worker* w) {
    ASSERT_GT(w->pid, 0) << w->proc << " is not running";
    ::kill(w->pid, SIGKILL);
    ::waitpid(w->pid, nullptr, 0);
    w->pid = -1;
    LogHarness(HistKind::kCrash, w->proc, "SIGKILL");
  }

  // Waits (bounded) for a worker to exit; returns its exit code (128 + signal if killed).
  std::optional<int> WaitExit(Worker* w, std::chrono::milliseconds wait) {
    std::optional<int> code;
    const auto r = WaitFor(
        [&] {
          int status = 0;
          if (::waitpid(w->pid, &status, WNOHANG) != w->pid) return false;
          code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          return true;
        },
        wait, w->proc + " exits");
    if (r) w->pid = -1;
    return code;
  }

  std::string Describe(const Worker& w) const {
    return w.proc + " output:" + Tail(ReadFile(w.out_path), 15) + "\n" + w.proc +
           " last events:" + Tail(ReadFile(w.log_path), 8);
  }

  // Every log of the run, merged and stably sorted by time (harness log last, so its
  // crash records follow anything stamped at the same microsecond).
  History Merged() {
    History all;
    std::vector<std::string> paths;
    for (const Worker& w : workers_) paths.push_back(w.log_path);
    paths.push_back(harness_log_);
    for (const std::string& p : paths) {
      std::string text = ReadFile(p);
      // A SIGKILL can cut the line being written: drop an unterminated tail.
      if (const size_t nl = text.rfind('\n'); nl != std::string::npos) {
        text.resize(nl + 1);
      } else {
        text.clear();
      }
      rsc::sim::ParseOutcome parsed = rsc::sim::ParseJsonLines(text);
      for (const std::string& e : parsed.errors) ADD_FAILURE() << p << ": " << e;
      all.insert(all.end(), parsed.events.begin(), parsed.events.end());
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const HistEvent& a, const HistEvent& b) { return a.t_us < b.t_us; });
    return all;
  }

  // Lines of kind `kind` in a log (cheap progress probe; no parsing).
  static int64_t CountKind(const std::string& path, std::string_view kind) {
    const std::string text = ReadFile(path);
    const std::string needle = "\"kind\":\"" + std::string(kind) + "\"";
    int64_t n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
    return n;
  }

  // Distinct (key, seq) delivered so far, over every consumer log.
  int64_t DeliveredUnique() {
    std::set<std::pair<std::string, int64_t>> seen;
    for (const Worker& w : workers_) {
      std::string text = ReadFile(w.log_path);
      if (const size_t nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl + 1);
      for (const HistEvent& e : rsc::sim::ParseJsonLines(text).events) {
        if (e.kind == HistKind::kDeliver) seen.insert({e.key, e.seq});
      }
    }
    return static_cast<int64_t>(seen.size());
  }

  // Shards some live process currently holds (acquired, not released, not crashed/stopped).
  std::set<int32_t> HeldShards() {
    std::map<std::pair<std::string, int32_t>, bool> open;
    for (const HistEvent& e : Merged()) {
      if (e.kind == HistKind::kAcquire) open[{e.proc, e.shard}] = true;
      if (e.kind == HistKind::kRelease) open.erase({e.proc, e.shard});
      if (e.kind == HistKind::kCrash || e.kind == HistKind::kStop) {
        for (auto it = open.begin(); it != open.end();) {
          it = it->first.first == e.proc ? open.erase(it) : std::next(it);
        }
      }
    }
    std::set<int32_t> held;
    for (const auto& [k, v] : open) held.insert(k.second);
    return held;
  }

  int64_t PendingTotal() {
    std::unique_ptr<rsc::testing::RedisCli> cli = redis_.Cli();
    if (cli == nullptr) return -1;
    int64_t total = 0;
    for (int s = 0; s < kShards; ++s) {
      const rsc::testing::CliReply r = cli->Run(
          {"XPENDING", "{" + std::string(kStream) + ":" + std::to_string(s) + "}", kGroup});
      if (r.type != rsc::testing::CliReply::Type::kArray || r.elements.empty()) return -1;
      total += r.elements[0].integer;
    }
    return total;
  }

  // The only coordinator dies. Stamped after it was reaped: every answer it gave was to a
  // request sent before, so every lease it granted ends before this + the lease (L2).
  void KillCoordinator() {
    coordinator_->Kill();
    LogHarness(HistKind::kCrash, "coordinator#" + std::to_string(coordinator_incarnation_),
               "SIGKILL");
    LogHarness(HistKind::kFault, "harness", "coordinators_down");
  }

  // A new coordinator process on the same port. "coordinators_up" is stamped before it is
  // spawned, so no lease it grants can precede the record.
  ::testing::AssertionResult RestartCoordinator() {
    LogHarness(HistKind::kFault, "harness", "coordinators_up");
    coordinator_ = std::make_unique<CoordinatorProcess>(
        CoordinatorOptions{.redis_url = redis_.Url(), .port = coordinator_port_});
    if (auto r = coordinator_->Start(); !r) return r;
    ++coordinator_incarnation_;
    LogHarness(HistKind::kStart, "coordinator#" + std::to_string(coordinator_incarnation_));
    return ::testing::AssertionSuccess();
  }

  static rsc::sim::CheckerConfig CheckConfig() {
    rsc::sim::CheckerConfig c;
    c.shards = kShards;
    c.max_assignment_lease_us = kAssignmentLeaseMs * 1000;
    c.max_routing_lease_us = kRoutingLeaseMs * 1000;
    c.member_lease_us = kMemberLeaseMs * 1000;
    c.convergence_bound_us = kConvergenceBoundUs;
    c.check_coordinator = false;  // the coordinator writes no history
    c.check_delivery = true;
    return c;
  }

  static std::string Show(const std::vector<rsc::sim::Violation>& vs, size_t max = 10) {
    std::string out;
    for (size_t i = 0; i < vs.size() && i < max; ++i) {
      out += "\n  " + vs[i].invariant + " at t=" + std::to_string(vs[i].t_us) + " [event " +
             std::to_string(vs[i].event_index) + "]: " + vs[i].message;
    }
    if (vs.size() > max) out += "\n  ... " + std::to_string(vs.size() - max) + " more";
    return out;
  }

  // Judges a finished run: the checkers (S1–S5, and L1/L2 since the harness logs its
  // faults; S6–S8 need coordinator events, which real coordinators do not log) and direct
  // checks that do not depend on them. Returns the checkers' counters.
  rsc::sim::CheckerCounters ExpectAllGuarantees(const History& history, int64_t messages) {
    const rsc::sim::CheckReport report = rsc::sim::CheckHistory(history, CheckConfig());
    EXPECT_TRUE(report.violations.empty())
        << report.violations.size() << " violations:" << Show(report.violations) << "\nlogs in "
        << dir_;
    const rsc::sim::CheckerCounters& n = report.counters;
    EXPECT_EQ(n.publishes, messages);
    EXPECT_EQ(n.delivered_unique, messages);

    // Direct checks: every delivery lies inside an acquire … release of its process on that
    // shard; an entry whose XACK was confirmed is never delivered again (duplicates only of
    // unacknowledged messages); every acked publish was delivered.
    std::set<std::pair<std::string, int32_t>> open;
    std::set<std::pair<std::string, std::string>> acked;  // (stream, id)
    std::set<std::pair<std::string, int64_t>> delivered;
    int64_t outside = 0, acked_again = 0;
    std::string first_outside, first_acked_again;
    for (const HistEvent& e : history) {
      switch (e.kind) {
        case HistKind::kAcquire:
          open.insert({e.proc, e.shard});
          break;
        case HistKind::kRelease:
          open.erase({e.proc, e.shard});
          break;
        case HistKind::kAck:
          acked.insert({e.stream, e.id});
          break;
        case HistKind::kDeliver:
          delivered.insert({e.key, e.seq});
          if (open.count({e.proc, e.shard}) == 0 && outside++ == 0) {
            first_outside = rsc::sim::ToJsonLine(e);
          }
          if (acked.count({e.stream, e.id}) != 0 && acked_again++ == 0) {
            first_acked_again = rsc::sim::ToJsonLine(e);
          }
          break;
        default:
          break;
      }
    }
    EXPECT_EQ(outside, 0) << "deliveries outside their acquire/release window, first: "
                          << first_outside;
    EXPECT_EQ(acked_again, 0) << "acknowledged entries delivered again, first: "
                              << first_acked_again;
    int64_t undelivered = 0;
    for (const HistEvent& e : history) {
      if (e.kind == HistKind::kPublish && delivered.count({e.key, e.seq}) == 0 &&
          undelivered++ < 5) {
        ADD_FAILURE() << "acked publish never delivered: " << rsc::sim::ToJsonLine(e);
      }
    }
    return n;
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  int coordinator_port_ = 0;
  int coordinator_incarnation_ = 0;
  std::string dir_;
  std::string harness_log_;
  std::map<std::string, int> incarnations_;
  std::deque<Worker> workers_;  // stable addresses
};

TEST_F(EndToEnd, ChurnCrashesAndCoordinatorRestartKeepEveryGuarantee) {
  constexpr int64_t kMessages = 2500;
  constexpr int64_t kKeys = 40;
  constexpr int64_t kIntervalUs = 4000;  // ~10 s of production
  const auto test_start = std::chrono::steady_clock::now();

  // Three consumers: two static members (instance ids) and one dynamic.
  Worker* c1 = SpawnConsumer("c1", "inst-c1");
  Worker* c2 = SpawnConsumer("c2", "inst-c2");
  Worker* c3 = SpawnConsumer("c3", "");
  ASSERT_TRUE(c1 && c2 && c3);
  ASSERT_TRUE(WaitFor([&] { return HeldShards().size() == kShards; }, 15s,
                      "every shard is read by one of the first three consumers"))
      << Describe(*c1) << "\n"
      << Describe(*c2) << "\n"
      << Describe(*c3);

  Worker* producer =
      Spawn("producer", {"produce", "--messages", std::to_string(kMessages), "--keys",
                         std::to_string(kKeys), "--interval-us", std::to_string(kIntervalUs)});
  ASSERT_NE(producer, nullptr);
  // Faults are placed by production progress, not by wall time, so they all happen while
  // messages flow however slow the machine is.
  auto at_published = [&](double fraction) {
    const int64_t n = static_cast<int64_t>(fraction * kMessages);
    return WaitFor([&] { return CountKind(producer->log_path, "publish") >= n; }, 30s,
                   "producer reaches " + std::to_string(n) + " acked publishes");
  };

  // A consumer joins late.
  ASSERT_TRUE(at_published(0.10)) << Describe(*producer);
  Worker* c4 = SpawnConsumer("c4", "");
  ASSERT_NE(c4, nullptr);

  // A static member is SIGKILLed and restarted at once with the same instance id.
  ASSERT_TRUE(at_published(0.25)) << Describe(*producer);
  Kill(c1);
  c1 = SpawnConsumer("c1", "inst-c1");
  ASSERT_NE(c1, nullptr);

  // A member leaves cleanly.
  ASSERT_TRUE(at_published(0.40)) << Describe(*producer);
  ::kill(c2->pid, SIGTERM);
  const std::optional<int> c2_exit = WaitExit(c2, 15s);
  ASSERT_TRUE(c2_exit.has_value()) << Describe(*c2);
  EXPECT_EQ(*c2_exit, 0) << Describe(*c2);

  // The coordinator is SIGKILLed and a new process takes its port ~1 s later (less than
  // the routing lease: the producer keeps publishing; consumers may fail closed).
  ASSERT_TRUE(at_published(0.55)) << Describe(*producer);
  KillCoordinator();
  std::this_thread::sleep_for(1000ms);  // the outage itself: a fault parameter
  ASSERT_TRUE(RestartCoordinator());

  // A dynamic member is SIGKILLed and replaced by a new member.
  ASSERT_TRUE(at_published(0.75)) << Describe(*producer);
  Kill(c3);
  Worker* c5 = SpawnConsumer("c5", "");
  ASSERT_NE(c5, nullptr);
  LogHarness(HistKind::kFault, "harness", "heal");  // no more faults: L1 from here

  const std::optional<int> producer_exit = WaitExit(producer, 60s);
  ASSERT_TRUE(producer_exit.has_value()) << Describe(*producer);
  ASSERT_EQ(*producer_exit, 0) << Describe(*producer);
  const auto produced_at = std::chrono::steady_clock::now();

  ASSERT_TRUE(WaitFor([&] { return DeliveredUnique() == kMessages; }, 30s,
                      "every published message delivered"))
      << "delivered " << DeliveredUnique() << " of " << kMessages << "\n"
      << Describe(*c1) << "\n"
      << Describe(*c4) << "\n"
      << Describe(*c5) << "\n"
      << coordinator_->LogTail();
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 15s, "everything XACKed"))
      << "pending " << PendingTotal();

  // Clean stop of the survivors, in parallel.
  for (Worker* w : {c1, c4, c5}) ::kill(w->pid, SIGTERM);
  for (Worker* w : {c1, c4, c5}) {
    const std::optional<int> code = WaitExit(w, 15s);
    ASSERT_TRUE(code.has_value()) << Describe(*w);
    EXPECT_EQ(*code, 0) << Describe(*w);
  }
  const auto done_at = std::chrono::steady_clock::now();

  const History history = Merged();
  const rsc::sim::CheckerCounters n = ExpectAllGuarantees(history, kMessages);
  EXPECT_GT(n.intervals, kShards) << "shards moved between members";
  EXPECT_GT(n.handoffs, 0);

  int64_t crashes = 0, stops = 0, refusals = 0;
  for (const HistEvent& e : history) {
    crashes += e.kind == HistKind::kCrash;
    stops += e.kind == HistKind::kStop;
    refusals += e.kind == HistKind::kPublishRefused;
  }
  EXPECT_EQ(crashes, 3) << "c1#1, c3#1 and coordinator#1";
  EXPECT_EQ(refusals, n.refused_publishes);
  EXPECT_EQ(stops, 5) << "c2#1, c1#2, c4#1, c5#1 and the producer";
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::cout << "e2e: " << kMessages << " messages over " << kKeys << " keys, " << history.size()
            << " events; checker: intervals=" << n.intervals << " handoffs=" << n.handoffs
            << " publishes=" << n.publishes << " delivered_unique=" << n.delivered_unique
            << " redeliveries=" << n.redeliveries << " refused_publishes=" << n.refused_publishes
            << "\ne2e: produced in " << secs(produced_at - test_start) << " s, all consumed and "
            << "stopped at " << secs(done_at - test_start) << " s\n";

  // ── Negative controls: the checkers must see doctored copies of this very history. ──
  // (1) Drop every release of one consumer that handed a shard over by releasing it: the
  //     next owner's acquire now overlaps a still-open window → S1.
  {
    std::string victim;
    std::map<int32_t, std::string> released_by;  // shard → proc of the latest release
    for (const HistEvent& e : history) {
      if (e.kind == HistKind::kRelease) released_by[e.shard] = e.proc;
      if (e.kind == HistKind::kAcquire) {
        auto it = released_by.find(e.shard);
        if (it != released_by.end() && it->second != e.proc && victim.empty()) victim = it->second;
      }
    }
    ASSERT_FALSE(victim.empty()) << "no handoff after a release in this run";
    History doctored;
    for (const HistEvent& e : history) {
      if (!(e.kind == HistKind::kRelease && e.proc == victim)) doctored.push_back(e);
    }
    const rsc::sim::CheckReport bad = rsc::sim::CheckHistory(doctored, CheckConfig());
    EXPECT_TRUE(std::any_of(bad.violations.begin(), bad.violations.end(),
                            [](const rsc::sim::Violation& v) { return v.invariant == "S1"; }))
        << "releases of " << victim << " removed, yet no S1 violation:" << Show(bad.violations);
  }
  // (2) Drop every delivery of one published message → S3 (acked but never delivered).
  {
    const HistEvent* pub = nullptr;
    for (const HistEvent& e : history) {
      if (e.kind == HistKind::kPublish) pub = &e;
    }
    ASSERT_NE(pub, nullptr);
    History doctored;
    for (const HistEvent& e : history) {
      if (!(e.kind == HistKind::kDeliver && e.key == pub->key && e.seq == pub->seq)) {
        doctored.push_back(e);
      }
    }
    const rsc::sim::CheckReport bad = rsc::sim::CheckHistory(doctored, CheckConfig());
    EXPECT_TRUE(std::any_of(bad.violations.begin(), bad.violations.end(),
                            [](const rsc::sim::Violation& v) { return v.invariant == "S3"; }))
        << "delivery of " << pub->key << "/" << pub->seq
        << " removed, yet no S3 violation:" << Show(bad.violations);
  }
}

// Coordinator down longer than the assignment lease (C4), with real processes: each
// consumer stops reading by the end of its last lease and reports its shards released
// ("abandoned"); nothing is read until the coordinator is back; then every shard is read
// again, everything is delivered, and the only duplicates are of unacknowledged entries.
TEST_F(EndToEnd, CoordinatorDownPastTheLeaseStopsReadingThenResumes) {
  constexpr int64_t kMessages = 600;
  constexpr int64_t kKeys = 20;
  constexpr int64_t kIntervalUs = 5000;  // ~3 s of production
  constexpr auto kOutage = 2200ms;       // > assignment lease (1.5 s), < routing lease (3 s)

  Worker* c1 = SpawnConsumer("c1", "inst-c1");
  Worker* c2 = SpawnConsumer("c2", "");
  ASSERT_TRUE(c1 && c2);
  ASSERT_TRUE(WaitFor([&] { return HeldShards().size() == kShards; }, 15s, "every shard is read"))
      << Describe(*c1) << "\n"
      << Describe(*c2);
  Worker* producer =
      Spawn("producer", {"produce", "--messages", std::to_string(kMessages), "--keys",
                         std::to_string(kKeys), "--interval-us", std::to_string(kIntervalUs)});
  ASSERT_NE(producer, nullptr);
  ASSERT_TRUE(WaitFor([&] { return CountKind(producer->log_path, "publish") >= kMessages / 4; },
                      30s, "a quarter published"))
      << Describe(*producer);
  const int64_t killed_us = NowUs();
  KillCoordinator();
  std::this_thread::sleep_for(kOutage);  // the outage itself: a fault parameter
  const int64_t restart_us = NowUs();
  ASSERT_TRUE(RestartCoordinator());
  LogHarness(HistKind::kFault, "harness", "heal");  // no more faults: L1 from here

  const std::optional<int> producer_exit = WaitExit(producer, 60s);
  ASSERT_TRUE(producer_exit.has_value()) << Describe(*producer);
  ASSERT_EQ(*producer_exit, 0) << Describe(*producer);
  ASSERT_TRUE(WaitFor([&] { return DeliveredUnique() == kMessages; }, 30s,
                      "every published message delivered"))
      << "delivered " << DeliveredUnique() << " of " << kMessages << "\n"
      << Describe(*c1) << "\n"
      << Describe(*c2) << "\n"
      << coordinator_->LogTail();
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 15s, "everything XACKed"))
      << "pending " << PendingTotal();
  // Both resume: a lease again (a member that expired meanwhile rejoins first), and every
  // shard read again.
  auto resumed = [&] {
    std::set<std::string> with_lease;
    for (const HistEvent& e : Merged()) {
      if (e.kind == HistKind::kLease && e.t_us > restart_us) with_lease.insert(e.proc);
    }
    return with_lease.size() == 2 && HeldShards().size() == kShards;
  };
  ASSERT_TRUE(WaitFor(resumed, 15s, "both consumers hold a lease again, every shard read"))
      << Describe(*c1) << "\n"
      << Describe(*c2);
  for (Worker* w : {c1, c2}) ::kill(w->pid, SIGTERM);
  for (Worker* w : {c1, c2}) {
    const std::optional<int> code = WaitExit(w, 15s);
    ASSERT_TRUE(code.has_value()) << Describe(*w);
    EXPECT_EQ(*code, 0) << Describe(*w);
  }

  const History history = Merged();
  const rsc::sim::CheckerCounters n = ExpectAllGuarantees(history, kMessages);
  for (const Worker* w : {c1, c2}) {
    // The last lease granted before the kill, and the first one after the restart.
    int64_t lease_end = -1, resumed_us = -1;
    std::set<int32_t> held_at_kill;
    for (const HistEvent& e : history) {
      if (e.proc != w->proc) continue;
      if (e.t_us < killed_us) {
        if (e.kind == HistKind::kLease) lease_end = e.lease_end_us;
        if (e.kind == HistKind::kAcquire) held_at_kill.insert(e.shard);
        if (e.kind == HistKind::kRelease) held_at_kill.erase(e.shard);
      } else if (e.kind == HistKind::kLease && resumed_us < 0) {
        resumed_us = e.t_us;
      }
    }
    ASSERT_GT(lease_end, killed_us) << w->proc << " had a lease running at the kill";
    ASSERT_LT(lease_end, restart_us) << w->proc << ": the outage must outlast the lease";
    ASSERT_GT(resumed_us, restart_us) << w->proc << " got a lease again after the restart";
    ASSERT_FALSE(held_at_kill.empty()) << w->proc << " read something when the kill came";
    std::set<int32_t> abandoned;
    for (const HistEvent& e : history) {
      if (e.proc != w->proc || e.t_us < killed_us || e.t_us >= resumed_us) continue;
      if (e.kind == HistKind::kRead || e.kind == HistKind::kDeliver) {
        EXPECT_LT(e.t_us, lease_end)
            << w->proc << " read or handled after its lease ended: " << rsc::sim::ToJsonLine(e);
      }
      if (e.kind == HistKind::kRelease) {
        EXPECT_EQ(e.detail, "abandoned") << rsc::sim::ToJsonLine(e);
        // Blocking reads are capped by the lease and a handler call takes 8 ms.
        EXPECT_LT(e.t_us, lease_end + 500'000) << rsc::sim::ToJsonLine(e);
        abandoned.insert(e.shard);
      }
    }
    EXPECT_EQ(abandoned, held_at_kill) << w->proc << ": every shard held is given up";
  }
  std::cout << "e2e (outage " << kOutage.count() << " ms): " << kMessages << " messages, "
            << history.size() << " events; intervals=" << n.intervals << " handoffs=" << n.handoffs
            << " redeliveries=" << n.redeliveries << " refused_publishes=" << n.refused_publishes
            << "\n";
}

}  // namespace
}  // namespace rsc
