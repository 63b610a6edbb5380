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

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
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
#include "support/worker_fleet.h"

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
using rsc::testing::Worker;
using rsc::testing::WorkerFleet;

constexpr int kShards = 8;
constexpr const char* kStream = "orders";
constexpr const char* kGroup = "billing";
// L1: after the last fault ("heal"), every shard is held by exactly one live consumer
// within this (a crashed dynamic member's shards wait for its member lease).
constexpr int64_t kConvergenceBoundUs = 10'000'000;

int64_t NowUs() { return rsc::testing::SteadyUs(); }

// A whole run: the processes, their logs, and the harness's own events (crashes).
class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fleet_.Init());
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, kStream, kGroup, kShards,
                                             rsc::testing::FastLeases()));
    coordinator_port_ = coordinator_->Port();
    coordinator_incarnation_ = 1;
    fleet_.SetCommonArgs({"--coordinator", CoordinatorAddress(), "--redis", redis_.Url(),
                          "--stream", kStream, "--group", kGroup});
    fleet_.Record(HistKind::kStart, "coordinator#1");
  }

  std::string CoordinatorAddress() const {
    return "127.0.0.1:" + std::to_string(coordinator_port_);
  }

  Worker* SpawnConsumer(const std::string& name, const std::string& instance) {
    std::vector<std::string> args = {"consume", "--handler-delay-us", "8000"};
    if (!instance.empty()) args.insert(args.end(), {"--instance", instance});
    return fleet_.Spawn(name, args);
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
    fleet_.Record(HistKind::kCrash, "coordinator#" + std::to_string(coordinator_incarnation_),
                  "SIGKILL");
    fleet_.Record(HistKind::kFault, "harness", "coordinators_down");
  }

  // A new coordinator process on the same port. "coordinators_up" is stamped before it is
  // spawned, so no lease it grants can precede the record.
  ::testing::AssertionResult RestartCoordinator() {
    fleet_.Record(HistKind::kFault, "harness", "coordinators_up");
    coordinator_ = std::make_unique<CoordinatorProcess>(
        CoordinatorOptions{.redis_url = redis_.Url(), .port = coordinator_port_});
    if (auto r = coordinator_->Start(); !r) return r;
    ++coordinator_incarnation_;
    fleet_.Record(HistKind::kStart, "coordinator#" + std::to_string(coordinator_incarnation_));
    return ::testing::AssertionSuccess();
  }

  // The group's leases (FastLeases) are what the checkers may assume.
  static rsc::sim::CheckerConfig CheckConfig() {
    return rsc::testing::RealProcessCheckConfig(kShards, rsc::testing::FastLeases(),
                                                kConvergenceBoundUs);
  }

  static std::string Show(const std::vector<rsc::sim::Violation>& vs) {
    return rsc::testing::ShowViolations(vs);
  }

  // Judges a finished run: the checkers (S1–S5, and L1/L2 since the harness logs its
  // faults; S6–S8 need coordinator events, which real coordinators do not log) and direct
  // checks that do not depend on them. Returns the checkers' counters.
  rsc::sim::CheckerCounters ExpectAllGuarantees(const History& history, int64_t messages) {
    const rsc::sim::CheckReport report = rsc::sim::CheckHistory(history, CheckConfig());
    EXPECT_TRUE(report.violations.empty())
        << report.violations.size() << " violations:" << Show(report.violations) << "\nlogs in "
        << fleet_.dir();
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
  // Declared last, destroyed first: its workers die before the coordinator and Redis.
  WorkerFleet fleet_{"rsc-e2e", "RSC_E2E_KEEP"};
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
  ASSERT_TRUE(WaitFor([&] { return fleet_.HeldShards().size() == kShards; }, 15s,
                      "every shard is read by one of the first three consumers"))
      << fleet_.Describe(*c1) << "\n"
      << fleet_.Describe(*c2) << "\n"
      << fleet_.Describe(*c3);

  Worker* producer = fleet_.Spawn(
      "producer", {"produce", "--messages", std::to_string(kMessages), "--keys",
                   std::to_string(kKeys), "--interval-us", std::to_string(kIntervalUs)});
  ASSERT_NE(producer, nullptr);
  // Faults are placed by production progress, not by wall time, so they all happen while
  // messages flow however slow the machine is.
  auto at_published = [&](double fraction) {
    const int64_t n = static_cast<int64_t>(fraction * kMessages);
    return WaitFor([&] { return WorkerFleet::CountKind(producer->log_path, "publish") >= n; }, 30s,
                   "producer reaches " + std::to_string(n) + " acked publishes");
  };

  // A consumer joins late.
  ASSERT_TRUE(at_published(0.10)) << fleet_.Describe(*producer);
  Worker* c4 = SpawnConsumer("c4", "");
  ASSERT_NE(c4, nullptr);

  // A static member is SIGKILLed and restarted at once with the same instance id.
  ASSERT_TRUE(at_published(0.25)) << fleet_.Describe(*producer);
  fleet_.Kill(c1);
  c1 = SpawnConsumer("c1", "inst-c1");
  ASSERT_NE(c1, nullptr);

  // A member leaves cleanly.
  ASSERT_TRUE(at_published(0.40)) << fleet_.Describe(*producer);
  fleet_.Term(c2);
  const std::optional<int> c2_exit = fleet_.WaitExit(c2, 15s);
  ASSERT_TRUE(c2_exit.has_value()) << fleet_.Describe(*c2);
  EXPECT_EQ(*c2_exit, 0) << fleet_.Describe(*c2);

  // The coordinator is SIGKILLed and a new process takes its port ~1 s later (less than
  // the routing lease: the producer keeps publishing; consumers may fail closed).
  ASSERT_TRUE(at_published(0.55)) << fleet_.Describe(*producer);
  KillCoordinator();
  std::this_thread::sleep_for(1000ms);  // the outage itself: a fault parameter
  ASSERT_TRUE(RestartCoordinator());

  // A dynamic member is SIGKILLed and replaced by a new member.
  ASSERT_TRUE(at_published(0.75)) << fleet_.Describe(*producer);
  fleet_.Kill(c3);
  Worker* c5 = SpawnConsumer("c5", "");
  ASSERT_NE(c5, nullptr);
  fleet_.Record(HistKind::kFault, "harness", "heal");  // no more faults: L1 from here

  const std::optional<int> producer_exit = fleet_.WaitExit(producer, 60s);
  ASSERT_TRUE(producer_exit.has_value()) << fleet_.Describe(*producer);
  ASSERT_EQ(*producer_exit, 0) << fleet_.Describe(*producer);
  const auto produced_at = std::chrono::steady_clock::now();

  ASSERT_TRUE(WaitFor([&] { return fleet_.DeliveredUnique() == kMessages; }, 30s,
                      "every published message delivered"))
      << "delivered " << fleet_.DeliveredUnique() << " of " << kMessages << "\n"
      << fleet_.Describe(*c1) << "\n"
      << fleet_.Describe(*c4) << "\n"
      << fleet_.Describe(*c5) << "\n"
      << coordinator_->LogTail();
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 15s, "everything XACKed"))
      << "pending " << PendingTotal();

  // Clean stop of the survivors, in parallel.
  for (Worker* w : {c1, c4, c5}) fleet_.Term(w);
  for (Worker* w : {c1, c4, c5}) {
    const std::optional<int> code = fleet_.WaitExit(w, 15s);
    ASSERT_TRUE(code.has_value()) << fleet_.Describe(*w);
    EXPECT_EQ(*code, 0) << fleet_.Describe(*w);
  }
  const auto done_at = std::chrono::steady_clock::now();

  const History history = fleet_.Merged();
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
  ASSERT_TRUE(
      WaitFor([&] { return fleet_.HeldShards().size() == kShards; }, 15s, "every shard is read"))
      << fleet_.Describe(*c1) << "\n"
      << fleet_.Describe(*c2);
  Worker* producer = fleet_.Spawn(
      "producer", {"produce", "--messages", std::to_string(kMessages), "--keys",
                   std::to_string(kKeys), "--interval-us", std::to_string(kIntervalUs)});
  ASSERT_NE(producer, nullptr);
  ASSERT_TRUE(WaitFor(
      [&] { return WorkerFleet::CountKind(producer->log_path, "publish") >= kMessages / 4; }, 30s,
      "a quarter published"))
      << fleet_.Describe(*producer);
  const int64_t killed_us = NowUs();
  KillCoordinator();
  std::this_thread::sleep_for(kOutage);  // the outage itself: a fault parameter
  const int64_t restart_us = NowUs();
  ASSERT_TRUE(RestartCoordinator());
  fleet_.Record(HistKind::kFault, "harness", "heal");  // no more faults: L1 from here

  const std::optional<int> producer_exit = fleet_.WaitExit(producer, 60s);
  ASSERT_TRUE(producer_exit.has_value()) << fleet_.Describe(*producer);
  ASSERT_EQ(*producer_exit, 0) << fleet_.Describe(*producer);
  ASSERT_TRUE(WaitFor([&] { return fleet_.DeliveredUnique() == kMessages; }, 30s,
                      "every published message delivered"))
      << "delivered " << fleet_.DeliveredUnique() << " of " << kMessages << "\n"
      << fleet_.Describe(*c1) << "\n"
      << fleet_.Describe(*c2) << "\n"
      << coordinator_->LogTail();
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 15s, "everything XACKed"))
      << "pending " << PendingTotal();
  // Both resume: a lease again (a member that expired meanwhile rejoins first), and every
  // shard read again.
  auto resumed = [&] {
    std::set<std::string> with_lease;
    for (const HistEvent& e : fleet_.Merged()) {
      // Leases are reported per shard: an acquire under a new lease, or a renewal.
      const bool lease = e.kind == HistKind::kLease || e.kind == HistKind::kAcquire;
      if (lease && e.t_us > restart_us) with_lease.insert(e.proc);
    }
    return with_lease.size() == 2 && fleet_.HeldShards().size() == kShards;
  };
  ASSERT_TRUE(WaitFor(resumed, 15s, "both consumers hold a lease again, every shard read"))
      << fleet_.Describe(*c1) << "\n"
      << fleet_.Describe(*c2);
  for (Worker* w : {c1, c2}) fleet_.Term(w);
  for (Worker* w : {c1, c2}) {
    const std::optional<int> code = fleet_.WaitExit(w, 15s);
    ASSERT_TRUE(code.has_value()) << fleet_.Describe(*w);
    EXPECT_EQ(*code, 0) << fleet_.Describe(*w);
  }

  const History history = fleet_.Merged();
  const rsc::sim::CheckerCounters n = ExpectAllGuarantees(history, kMessages);
  for (const Worker* w : {c1, c2}) {
    // The last lease granted before the kill, and the first one after the restart (leases
    // are reported per shard: with its acquire, then with each renewal).
    int64_t lease_end = -1, resumed_us = -1;
    std::set<int32_t> held_at_kill;
    for (const HistEvent& e : history) {
      if (e.proc != w->proc) continue;
      if (e.t_us < killed_us) {
        if (e.kind == HistKind::kLease) lease_end = e.lease_end_us;
        if (e.kind == HistKind::kAcquire) held_at_kill.insert(e.shard);
        if (e.kind == HistKind::kRelease) held_at_kill.erase(e.shard);
      } else if ((e.kind == HistKind::kLease || e.kind == HistKind::kAcquire) && resumed_us < 0) {
        resumed_us = e.t_us;  // the first window read under a lease granted after the restart
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
        abandoned.insert(e.shard);
      }
    }
    // Given up before the consumer's first lease after the restart (an order, not a time:
    // how soon after the lease end a loaded machine runs the release does not matter, no
    // read or handler call after the lease end does, and that is asserted above).
    EXPECT_EQ(abandoned, held_at_kill) << w->proc << ": every shard held is given up";
  }
  std::cout << "e2e (outage " << kOutage.count() << " ms): " << kMessages << " messages, "
            << history.size() << " events; intervals=" << n.intervals << " handoffs=" << n.handoffs
            << " redeliveries=" << n.redeliveries << " refused_publishes=" << n.refused_publishes
            << "\n";
}

}  // namespace
}  // namespace rsc
