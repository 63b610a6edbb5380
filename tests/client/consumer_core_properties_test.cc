// Property tests of the consumer core (SPEC §10 level 1, ENGINEERING §5).
//
// 1. InvariantsHoldUnderRandomResponses: the core alone against arbitrary answers (any
//    status with any shard sets, epochs, versions, leases), errors, drains, time jumps and
//    shutdowns. After every step: the runtime's readable set (built only from actions) is
//    exactly READING; READING ⊆ assignedShards of the last successful answer; READING is
//    empty once now ≥ send time + assignmentLeaseMs of that answer; a shard starts only on
//    an OK that lists it assigned and not revoked, and never straight from DRAINING or
//    REVOKED; every revokeShards entry not being read is reported REVOKED by the next
//    request; requests are well formed; nothing starts once shutting down.
//
// 2. CoupledSimulation: several consumer cores against the real pure coordinator core
//    (DecideHeartbeat through tests/core/core_harness.h), with lost answers, failed and
//    uncommitted writes, terminating coordinators, process crashes and restarts, admin
//    fences, clean shutdowns and time advances — all drawn from one seed. Checked after
//    every step: no shard is held (read or still draining in-flight work) by two consumers
//    at once. Redis rollbacks (lost writes) are simulated too; a consumer holding shards
//    under a lost grant or a lost liveness renewal is left out of the check until it has
//    received an answer decided after the loss (nobody can know of what Redis lost). After
//    the faults stop, every shard must end up read by exactly one consumer (nothing
//    stranded) — in runs without rollbacks; see the known coordinator issue at the end. A
//    runtime that ignores `abandon` (keeps reading past its lease) is caught by the same
//    checker — proof that it can fail. Replay a failing seed with ReplayOneSeed (below).

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/consumer_core.h"
#include "core/core_harness.h"

namespace rsc::client {
namespace {

using S = HeartbeatStatus;
constexpr int32_t kShards = 8;

// ── 1. The core alone ──────────────────────────────────────────────────────────

enum class Report { kRevoked, kDrainingOrRevoked };

struct Runtime {
  explicit Runtime(ConsumerCoreOptions o) : core(std::move(o)) {}

  ConsumerCore core;
  TimeMs now = 100'000;
  std::set<int32_t> readable, draining;
  std::set<int32_t> stopping;  // abandoned; OnShardDrained not yet called (consumer_core.h)
  std::optional<SendHeartbeat> in_flight;
  TimeMs sent_at = 0;
  // The test's own C1 bookkeeping, from the answers it delivered.
  std::set<int32_t> last_assigned;
  std::optional<TimeMs> lease_end;
  // What the next request must report, from the last answer's revokeShards.
  std::map<int32_t, Report> must_report;
  bool leave_sent = false;

  std::map<int32_t, LocalShardState> States() const {
    std::map<int32_t, LocalShardState> m;
    for (int32_t s = 0; s < kShards; ++s) {
      if (auto st = core.StateOf(s)) m[s] = *st;
    }
    return m;
  }

  void Apply(const ConsumerActions& a) {
    for (int32_t s : a.abandon) {
      readable.erase(s);
      draining.erase(s);
      stopping.insert(s);
    }
    for (int32_t s : a.stop) {
      RC_ASSERT(readable.erase(s) == 1u);
      draining.insert(s);
    }
    for (int32_t s : a.start) {
      RC_ASSERT(!readable.contains(s));
      RC_ASSERT(!stopping.contains(s));  // never while its abandoned work may still run
      RC_ASSERT(!leave_sent);
      readable.insert(s);
    }
    if (a.send) {
      RC_ASSERT(!in_flight.has_value());
      CheckRequest(*a.send);
      in_flight = a.send;
      sent_at = now;
    }
  }

  void CheckRequest(const SendHeartbeat& send) {
    const HeartbeatRequest& req = send.request;
    std::set<int32_t> owned(req.owned_shards.begin(), req.owned_shards.end());
    RC_ASSERT(owned.size() == req.owned_shards.size());
    RC_ASSERT(owned == readable);  // report only what is true (C4)
    std::map<int32_t, RevokeState> revoking;
    for (const RevokingReport& rr : req.revoking_shards) {
      RC_ASSERT(!owned.contains(rr.shard));
      RC_ASSERT(revoking.emplace(rr.shard, rr.state).second);
    }
    // Abandoned work not yet confirmed stopped is never reported REVOKED.
    for (int32_t s : stopping) {
      auto it = revoking.find(s);
      RC_ASSERT(it != revoking.end());
      RC_ASSERT(it->second == RevokeState::kDraining);
    }
    for (const auto& [s, want] : must_report) {
      auto it = revoking.find(s);
      RC_ASSERT(it != revoking.end());
      if (want == Report::kRevoked) {
        RC_ASSERT(it->second == RevokeState::kRevoked);
      }
    }
    must_report.clear();
    if (send.leave) {
      RC_ASSERT(req.member_epoch == -1);
      RC_ASSERT(owned.empty());
      for (const auto& [s, st] : revoking) RC_ASSERT(st == RevokeState::kRevoked);
      leave_sent = true;
    } else {
      RC_ASSERT(req.member_epoch >= 0);
    }
  }

  void CheckInvariants() {
    const std::vector<int32_t> reading = core.ReadingShards();
    RC_ASSERT(std::set<int32_t>(reading.begin(), reading.end()) == readable);
    for (int32_t s : reading) {
      RC_ASSERT(last_assigned.contains(s));  // C1: assigned by the last success
      RC_ASSERT(lease_end.has_value());
      RC_ASSERT(now < *lease_end);  // C1/C4: inside the lease from send time
      RC_ASSERT(core.MayRead(s, now));
    }
    RC_ASSERT(core.heartbeat_in_flight() == in_flight.has_value());
  }
};

std::vector<int32_t> ShardSubset() {
  auto v = *rc::gen::container<std::vector<int32_t>>(rc::gen::inRange<int32_t>(0, kShards));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

const std::vector<ErrorCode> kAllErrors = {
    ErrorCode::kInvalidRequest,     ErrorCode::kGroupNotFound,
    ErrorCode::kFencedMemberEpoch,  ErrorCode::kUnknownMemberId,
    ErrorCode::kInternal,           ErrorCode::kMetadataMissing,
    ErrorCode::kMetadataUnreadable, ErrorCode::kCoordinatorTerminating,
    ErrorCode::kRedisUnavailable,   ErrorCode::kLockTimeout,
    ErrorCode::kUnknownResult,
};

RC_GTEST_PROP(ConsumerCoreProperties, InvariantsHoldUnderRandomResponses, ()) {
  ConsumerCoreOptions o;
  o.member_id = MemberId("m-1");
  o.endpoint_count = *rc::gen::inRange(1, 4);
  o.jitter_seed = *rc::gen::arbitrary<uint64_t>();
  Runtime rt(o);
  rt.Apply(rt.core.Start(rt.now));
  rt.CheckInvariants();
  const int steps = *rc::gen::inRange(1, 150);
  for (int i = 0; i < steps; ++i) {
    // answer, error, drained, time passes, tick, shutdown (rare: it ends the interesting
    // part), abandoned work stopped
    const int kind = *rc::gen::weightedElement<int>(
        {{80, 0}, {30, 1}, {30, 2}, {40, 3}, {10, 4}, {2, 5}, {30, 6}});
    const auto before = rt.States();
    ConsumerActions a;
    bool ok_answer = false;
    std::set<int32_t> assigned, revoke;
    switch (kind) {
      case 0: {  // an answer to the heartbeat in flight
        if (!rt.in_flight) {
          a = rt.core.Tick(rt.now);
          break;
        }
        HeartbeatResponse r;
        r.status =
            *rc::gen::element(S::kOk, S::kOk, S::kRevokePending, S::kDrain, S::kSyncMetadata);
        r.member_epoch = *rc::gen::weightedElement<int64_t>({{20, 1}, {5, 2}, {1, -1}});
        r.metadata_version = *rc::gen::inRange<int64_t>(0, 20);
        r.lineage = "L" + std::to_string(*rc::gen::inRange(0, 3));
        const auto as = ShardSubset();
        const auto rv = ShardSubset();
        r.assigned_shards = as;
        r.revoke_shards = rv;
        r.assignment_lease_ms = *rc::gen::inRange<int64_t>(200, 8000);
        r.heartbeat_interval_ms = *rc::gen::inRange<int64_t>(50, 2000);
        const TimeMs sent_at = rt.sent_at;
        rt.in_flight.reset();
        a = rt.core.OnHeartbeatResponse(r, rt.now);
        if (r.member_epoch == -1) {
          rt.last_assigned.clear();
          rt.lease_end.reset();
          rt.must_report.clear();
        } else {
          assigned.insert(as.begin(), as.end());
          revoke.insert(rv.begin(), rv.end());
          ok_answer = r.status == S::kOk;
          rt.last_assigned = assigned;
          rt.lease_end = sent_at + r.assignment_lease_ms;
          rt.must_report.clear();
          for (int32_t s : revoke) {
            auto it = before.find(s);
            const bool held = (it != before.end() && it->second != LocalShardState::kRevoked) ||
                              rt.stopping.contains(s);
            rt.must_report[s] = held ? Report::kDrainingOrRevoked : Report::kRevoked;
          }
        }
        break;
      }
      case 1: {  // the heartbeat in flight failed
        if (!rt.in_flight) {
          a = rt.core.Tick(rt.now);
          break;
        }
        const ErrorCode code = *rc::gen::elementOf(kAllErrors);
        rt.in_flight.reset();
        a = rt.core.OnHeartbeatError(code, rt.now);
        if (code == ErrorCode::kUnknownMemberId || code == ErrorCode::kFencedMemberEpoch) {
          rt.last_assigned.clear();  // dropped everything
          rt.lease_end.reset();
          rt.must_report.clear();
        }
        break;
      }
      case 2: {  // in-flight work of a draining shard settled
        if (rt.draining.empty()) {
          a = rt.core.Tick(rt.now);
          break;
        }
        const int32_t s =
            *rc::gen::elementOf(std::vector<int32_t>(rt.draining.begin(), rt.draining.end()));
        rt.draining.erase(s);
        a = rt.core.OnShardDrained(s, rt.now);
        break;
      }
      case 3:  // time passes
        rt.now += *rc::gen::inRange<int64_t>(0, 3000);
        a = rt.core.Tick(rt.now);
        break;
      case 4:
        a = rt.core.Tick(rt.now);
        break;
      case 5:
        a = rt.core.Shutdown(rt.now);
        break;
      case 6: {  // the runtime reports an abandoned shard's work stopped
        if (rt.stopping.empty()) {
          a = rt.core.Tick(rt.now);
          break;
        }
        const int32_t s =
            *rc::gen::elementOf(std::vector<int32_t>(rt.stopping.begin(), rt.stopping.end()));
        rt.stopping.erase(s);
        a = rt.core.OnShardDrained(s, rt.now);
        break;
      }
    }
    // Starts: only on an OK that lists the shard assigned and not revoked; from absence,
    // from REVOKED (the same answer stops listing it, so it is forgotten and started fresh),
    // or from READING abandoned by this very event at lease end — never from DRAINING.
    for (int32_t s : a.start) {
      RC_ASSERT(ok_answer);
      RC_ASSERT(assigned.contains(s));
      RC_ASSERT(!revoke.contains(s));
      auto it = before.find(s);
      if (it == before.end()) continue;
      RC_ASSERT(it->second != LocalShardState::kDraining);
      if (it->second == LocalShardState::kReading) {
        RC_ASSERT(std::find(a.abandon.begin(), a.abandon.end(), s) != a.abandon.end());
      }
    }
    // No shard is both stopped and abandoned by one event (the fixed order stays sound).
    for (int32_t s : a.stop) {
      RC_ASSERT(std::find(a.abandon.begin(), a.abandon.end(), s) == a.abandon.end());
    }
    rt.Apply(a);
    // DRAINING/REVOKED turn into READING only through a start (checked above).
    for (const auto& [s, st] : before) {
      if (st != LocalShardState::kReading && rt.core.StateOf(s) == LocalShardState::kReading) {
        RC_ASSERT(std::find(a.start.begin(), a.start.end(), s) != a.start.end());
      }
    }
    if (rt.core.phase() == ConsumerPhase::kLeaving || rt.core.phase() == ConsumerPhase::kLeft) {
      RC_ASSERT(a.start.empty());
    }
    rt.CheckInvariants();
  }
}

// ── 2. Coupled with the real coordinator core ──────────────────────────────────

struct SimOptions {
  int consumers = 3;
  int32_t shards = 6;
  int steps = 400;
  bool broken_runtime_ignores_abandon = false;  // the checker must catch this
  bool rollbacks = true;                        // Redis loses recent writes now and then
  bool trace = false;                           // print every event (replays)
  // Check "every shard read by exactly one consumer" after the faults stop also in runs
  // with rollbacks (it was off until the blocker regression below was fixed).
  bool liveness_after_rollbacks = true;
};

struct SimResult {
  std::optional<std::string> violation;
  int64_t lease_expirations = 0;
  int64_t rejoins = 0;
  int64_t shards_started = 0;
  int64_t lost_answers = 0;
  int64_t crashes = 0;
  int64_t shutdowns = 0;
  int64_t rollbacks = 0;
  int64_t syncs = 0;  // SYNC_METADATA answers the consumers received
};

class Sim {
 public:
  Sim(uint64_t seed, SimOptions opt) : rng_(seed), opt_(opt), h_(opt.shards) {
    for (int i = 0; i < opt_.consumers; ++i) {
      procs_.emplace_back();
      procs_.back().slot = i;
      Launch(procs_.back());
    }
  }

  SimResult Run() {
    for (int step = 0; step < opt_.steps && !result_.violation; ++step) {
      h_.Advance(Rnd(0, 400));
      Faults();
      for (Proc& p : procs_) Pump(p, /*faulty=*/true);
      CheckNoSplitOwnership();
    }
    if (result_.violation) return Finish();
    // Faults stop. Every process comes (back) up, and after a while every shard must be
    // read by exactly one of them: nothing is stranded by a lost REVOKED or a stuck drain.
    for (Proc& p : procs_) {
      if (!p.core || p.core->phase() == ConsumerPhase::kLeft) Launch(p);
    }
    for (int step = 0; step < 300 && !result_.violation; ++step) {
      h_.Advance(100);
      if (step % 10 == 0) h_.Tick();
      for (Proc& p : procs_) {
        Pump(p, /*faulty=*/false);
        // A shutdown begun before the faults stopped completes: a new process takes over.
        if (p.core->phase() == ConsumerPhase::kLeft) {
          Harvest(p);
          Launch(p);
        }
      }
      CheckNoSplitOwnership();
    }
    if (!result_.violation && (result_.rollbacks == 0 || opt_.liveness_after_rollbacks)) {
      CheckEveryShardRead();
    }
    return Finish();
  }

 private:
  struct Outcome {
    TimeMs at = 0;
    Result<HeartbeatResponse> result = HeartbeatResponse{};
    // Decided by the coordinator while the process was tainted (taint generation + 1; 0 =
    // not): delivering it tells the client the truth, which ends the taint.
    int64_t untaints = 0;
  };
  struct Proc {
    int slot = 0;
    int generation = 0;
    std::unique_ptr<ConsumerCore> core;  // null while the process is down
    TimeMs restart_at = 0;
    std::set<int32_t> readable;
    std::map<int32_t, TimeMs> draining;  // shard → when its in-flight work settles
    std::map<int32_t, TimeMs> stopping;  // abandoned shard → when its running work stops
    std::optional<Outcome> outcome;
    // Holds shards under a grant that a Redis rollback erased, and no request of it has
    // reached the coordinator since. No coordinator can know of such a grant until the
    // client reports it (its version is then ahead: correction round, blockers), so the
    // split check leaves it out until it has *received* an answer decided after the
    // rollback — the same rule as tests/core/properties_test.cc.
    bool tainted = false;
    int64_t taint_generation = 0;
    TimeMs sent_at = 0;                  // of the heartbeat in flight
    std::set<int32_t> tainted_draining;  // drains of shards held under a lost grant
  };

  int64_t Rnd(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(int per_mille) { return Rnd(0, 999) < per_mille; }
  std::string Where() const { return " at t=" + std::to_string(h_.now()); }

  void Launch(Proc& p) {
    ConsumerCoreOptions o;
    o.member_id = MemberId("c" + std::to_string(p.slot) + "-" + std::to_string(++p.generation));
    if (p.slot % 2 == 0) o.instance_id = "inst-" + std::to_string(p.slot);
    o.endpoint_count = 2;
    o.jitter_seed = rng_();
    o.backoff_max_ms = 1000;
    p.core = std::make_unique<ConsumerCore>(o);
    p.readable.clear();
    p.draining.clear();
    p.stopping.clear();
    p.tainted_draining.clear();
    p.outcome.reset();
    Perform(p, p.core->Start(h_.now()), true);
  }

  void Harvest(const Proc& p) {
    if (!p.core) return;
    const ConsumerStatus st = p.core->Status(h_.now());
    result_.lease_expirations += st.counters.lease_expirations;
    result_.rejoins += st.counters.rejoins;
    result_.shards_started += st.counters.shards_started;
    result_.syncs += st.counters.responses_by_status[static_cast<int>(S::kSyncMetadata)];
  }

  void Crash(Proc& p) {
    Harvest(p);
    ++result_.crashes;
    p.core.reset();  // the process is gone, and its reads with it
    p.readable.clear();
    p.draining.clear();
    p.stopping.clear();
    p.tainted_draining.clear();
    p.outcome.reset();
    p.tainted = false;
    p.restart_at = h_.now() + Rnd(0, 5000);
  }

  void Faults() {
    if (Chance(100)) h_.Tick();
    // Now and then every coordinator is unreachable for a while: sometimes past the
    // assignment lease (consumers fail closed), sometimes past the member lease (expiry).
    if (h_.now() >= outage_until_ && Chance(12)) outage_until_ = h_.now() + Rnd(2000, 13000);
    // Redis loses recent writes (failover): clients that saw them resync (M2–M6). The loss
    // window stays under memberLeaseMs − assignmentLeaseMs (2 s with the defaults): losing
    // more liveness renewals than that expires members that still hold a valid assignment
    // lease — with no version change to reveal it when only renewals were lost. That is a
    // limit of the coordinator's K2 margin, not of the consumer (seed 6256, 2 consumers,
    // 1 shard, with an unbounded window).
    if (opt_.rollbacks && Chance(150)) snapshot_ = std::make_pair(h_.now(), h_.Save());
    if (opt_.rollbacks && snapshot_ && h_.now() - snapshot_->first <= 1500 && Chance(8)) {
      ++result_.rollbacks;
      h_.RollbackTo(snapshot_->second);
      Trace("ROLLBACK to version " + std::to_string(h_.meta().version.value()));
      for (Proc& p : procs_) {
        if (!p.core) continue;
        auto lost = [&](int64_t version, const std::string& lineage) {
          const VersionCheck vc = CheckClientVersion(h_.meta(), version, lineage, h_.now());
          return vc == VersionCheck::kAhead || vc == VersionCheck::kDiverged;
        };
        // Also an answer already decided but not yet delivered: it carries the lost state.
        const bool answer_lost =
            p.outcome && p.outcome->result.ok() &&
            lost(p.outcome->result->metadata_version, p.outcome->result->lineage);
        // Or a lost liveness renewal: the restored record no longer outlives the client's
        // assignment lease, so the coordinator may expire it while it reads. K2's margin
        // covers a lost renewal only if the one before it is less than
        // memberLeaseMs − assignmentLeaseMs older; after a heartbeat gap it is not, and
        // since renewals do not change metadataVersion nothing reveals the loss (see the
        // report of this test's seed 34842934885081128, 3 consumers, 4 shards).
        TimeMs lease_end = p.core->lease_end().value_or(0);
        if (p.outcome && p.outcome->result.ok()) {
          lease_end = std::max(lease_end, p.sent_at + p.outcome->result->assignment_lease_ms);
        }
        const auto& deadlines = h_.Live().deadline_ms;
        auto dl = deadlines.find(p.core->PeekRequest().member_id.str());
        const bool renewal_lost = (dl == deadlines.end() ? 0 : dl->second) < lease_end;
        if (lost(p.core->metadata_version(), p.core->lineage()) || answer_lost || renewal_lost) {
          p.tainted = true;
          ++p.taint_generation;
        }
      }
    }
    for (Proc& p : procs_) {
      if (!p.core) {
        if (h_.now() >= p.restart_at) Launch(p);
        continue;
      }
      if (Chance(4)) {
        Crash(p);
      } else if (Chance(3) && p.core->phase() == ConsumerPhase::kMember) {
        ++result_.shutdowns;
        Perform(p, p.core->Shutdown(h_.now()), true);
      } else if (Chance(3)) {
        h_.Apply(DecideFence(h_.meta(), h_.Live(), MemberId(p.core->PeekRequest().member_id),
                             h_.NextEnv()));
      } else if (p.core->phase() == ConsumerPhase::kLeft && Chance(50)) {
        Harvest(p);
        Launch(p);  // a new process takes the slot
      }
    }
  }

  // One process's turn: answers and drains that are due, then timers.
  void Pump(Proc& p, bool faulty) {
    if (!p.core) return;
    for (int guard = 0; guard < 8; ++guard) {
      const TimeMs now = h_.now();
      bool progressed = false;
      if (p.outcome && p.outcome->at <= now) {
        Outcome o = std::move(*p.outcome);
        p.outcome.reset();
        const bool untaints = p.tainted && o.untaints == p.taint_generation + 1;
        if (opt_.trace) {
          Trace(p.core->PeekRequest().member_id.str() + " gets " +
                (o.result.ok()
                     ? std::string(HeartbeatStatusName(o.result->status)) +
                           " epoch=" + std::to_string(o.result->member_epoch) +
                           " v=" + std::to_string(o.result->metadata_version) + "/" +
                           o.result->lineage + " assigned=" + Join(o.result->assigned_shards) +
                           " revoke=" + Join(o.result->revoke_shards)
                     : std::string(ErrorCodeName(o.result.error().code))));
        }
        Perform(p,
                o.result.ok() ? p.core->OnHeartbeatResponse(o.result.value(), now)
                              : p.core->OnHeartbeatError(o.result.error().code, now),
                faulty);
        if (untaints) {
          // The client now acts on the truth; what it still drains it took under the lost
          // grant, and stays out of the check until that in-flight work has settled.
          p.tainted = false;
          for (const auto& [s, until] : p.draining) p.tainted_draining.insert(s);
          for (const auto& [s, until] : p.stopping) p.tainted_draining.insert(s);
        }
        progressed = true;
      }
      std::vector<int32_t> settled;  // collected first: performing may abandon others
      for (const auto& [s, at] : p.draining) {
        if (at <= now) settled.push_back(s);
      }
      for (int32_t s : settled) {
        if (p.draining.erase(s) == 0) continue;
        p.tainted_draining.erase(s);
        Perform(p, p.core->OnShardDrained(s, now), faulty);
        progressed = true;
      }
      std::vector<int32_t> stopped;
      for (const auto& [s, at] : p.stopping) {
        if (at <= now) stopped.push_back(s);
      }
      for (int32_t s : stopped) {
        if (p.stopping.erase(s) == 0) continue;
        p.tainted_draining.erase(s);
        Perform(p, p.core->OnShardDrained(s, now), faulty);
        progressed = true;
      }
      Perform(p, p.core->Tick(now), faulty);
      if (!progressed) break;
    }
  }

  // The runtime: perform actions; a heartbeat is decided by the coordinator core at its
  // send time (its answer may arrive later, or be lost).
  void Trace(const std::string& line) const {
    if (opt_.trace) std::printf("t=%lld %s\n", static_cast<long long>(h_.now()), line.c_str());
  }
  static std::string Join(const std::vector<int32_t>& v) {
    std::string out;
    for (int32_t s : v) out += (out.empty() ? "" : ",") + std::to_string(s);
    return "[" + out + "]";
  }

  void Perform(Proc& p, const ConsumerActions& a, bool faulty) {
    if (opt_.trace && p.core) {
      const std::string id = p.core->PeekRequest().member_id.str();
      if (!a.abandon.empty()) Trace(id + " abandon " + Join(a.abandon));
      if (!a.stop.empty()) Trace(id + " stop " + Join(a.stop));
      if (!a.start.empty()) Trace(id + " start " + Join(a.start));
      if (a.send) {
        std::vector<int32_t> rv;
        for (const auto& r : a.send->request.revoking_shards) rv.push_back(r.shard);
        Trace(id + " send epoch=" + std::to_string(a.send->request.member_epoch) + " v=" +
              std::to_string(a.send->request.metadata_version) + "/" + a.send->request.lineage +
              " owned=" + Join(a.send->request.owned_shards) + " revoking=" + Join(rv) +
              " lease_end=" + std::to_string(p.core->lease_end().value_or(-1)));
      }
    }
    for (int32_t s : a.abandon) {
      if (!opt_.broken_runtime_ignores_abandon) p.readable.erase(s);
      p.draining.erase(s);
      p.tainted_draining.erase(s);
      // A handler call or a read already sent finishes a little later; the core waits for
      // the runtime to say so (consumer_core.h `abandon`). The broken runtime says so at
      // once — and keeps reading.
      p.stopping[s] = opt_.broken_runtime_ignores_abandon ? h_.now() : h_.now() + Rnd(0, 300);
      if (p.tainted) p.tainted_draining.insert(s);
    }
    for (int32_t s : a.stop) {
      p.readable.erase(s);
      if (p.tainted) p.tainted_draining.insert(s);
      p.draining[s] = h_.now() + Rnd(0, 1500);
    }
    for (int32_t s : a.start) p.readable.insert(s);
    if (!a.send) return;
    const HeartbeatRequest& req = a.send->request;
    const TimeMs now = h_.now();
    p.sent_at = now;
    const int64_t fate = faulty ? Rnd(0, 99) : 99;
    Outcome o;
    if (faulty && now < outage_until_) {  // nobody answers; nothing is decided
      o = Outcome{now + 1000, MakeError(ErrorCode::kUnknownResult, "unreachable")};
    } else if (fate < 8) {  // processed, answer lost: the runtime times out
      (void)h_.Heartbeat(req);
      ++result_.lost_answers;
      o = Outcome{now + 1000, MakeError(ErrorCode::kUnknownResult, "timeout")};
    } else if (fate < 12) {  // decided, but the write failed
      (void)h_.HeartbeatCrashBeforeWrite(req);
      o = Outcome{now + Rnd(0, 200), MakeError(ErrorCode::kRedisUnavailable, "write")};
    } else if (fate < 15) {  // this coordinator is shutting down
      o = Outcome{now, MakeError(ErrorCode::kCoordinatorTerminating, "sigterm")};
    } else {
      o = Outcome{now + (faulty ? Rnd(0, 300) : Rnd(0, 50)), h_.Heartbeat(req),
                  p.tainted ? p.taint_generation + 1 : 0};
    }
    p.outcome = std::move(o);
  }

  void CheckNoSplitOwnership() {
    std::map<int32_t, std::vector<std::string>> holders;
    for (const Proc& p : procs_) {
      if (!p.core || p.tainted) continue;
      const std::string id = p.core->PeekRequest().member_id.str();
      for (int32_t s : p.readable) holders[s].push_back(id + "(reading)");
      for (const auto& [s, until] : p.draining) {
        if (!p.tainted_draining.contains(s)) holders[s].push_back(id + "(draining)");
      }
      for (const auto& [s, until] : p.stopping) {
        if (!p.tainted_draining.contains(s)) holders[s].push_back(id + "(stopping)");
      }
    }
    for (const auto& [s, who] : holders) {
      if (who.size() > 1) {
        result_.violation = "split ownership of shard " + std::to_string(s) + ": " + who[0] +
                            " and " + who[1] + Where() + Dump();
        return;
      }
    }
  }

  void CheckEveryShardRead() {
    std::map<int32_t, int> readers;
    for (const Proc& p : procs_) {
      for (int32_t s : p.readable) ++readers[s];
    }
    for (int32_t s = 0; s < opt_.shards; ++s) {
      if (readers[s] != 1) {
        result_.violation = "after the faults stopped, shard " + std::to_string(s) + " has " +
                            std::to_string(readers[s]) + " readers" + Where() + Dump();
        return;
      }
    }
  }

  // Both sides' view, for a failure message.
  std::string Dump() const {
    std::string out = "\n  coordinator:";
    for (size_t s = 0; s < h_.meta().shards.size(); ++s) {
      const ShardState& st = h_.meta().shards[s];
      out += " [" + std::to_string(s) + " owner=" + st.owner + " target=" + st.target + "]";
    }
    for (const Member& m : h_.meta().members) {
      out += "\n  member " + m.id.str() + " epoch=" + std::to_string(m.epoch.value()) +
             (m.leaving ? " leaving" : "") + (m.fenced ? " fenced" : "");
    }
    if (const auto& r = h_.meta().round) {
      out += "\n  correction round started_version=" + std::to_string(r->started_version.value()) +
             " synced=";
      for (const MemberId& m : r->synced) out += m.str() + " ";
      for (const Blocker& bl : r->blockers) {
        out += "blocker(" + std::to_string(bl.shard.value()) + "," + bl.member.str() +
               ",until=" + std::to_string(bl.until_ms) + ") ";
      }
    }
    for (const Proc& p : procs_) {
      if (!p.core) {
        out += "\n  slot " + std::to_string(p.slot) + ": down";
        continue;
      }
      const ConsumerStatus st = p.core->Status(h_.now());
      out += "\n  " + p.core->PeekRequest().member_id.str() + ": " +
             std::string(ConsumerPhaseName(st.phase)) +
             " epoch=" + std::to_string(st.member_epoch) +
             " last=" + (st.last_status ? std::string(HeartbeatStatusName(*st.last_status)) : "-") +
             " err=" + (st.last_error ? std::string(ErrorCodeName(*st.last_error)) : "-") +
             " reading=" + std::to_string(st.reading.size()) +
             " draining=" + std::to_string(st.draining.size()) +
             " revoked=" + std::to_string(st.revoked.size()) +
             " in_flight=" + (p.core->heartbeat_in_flight() ? "y" : "n") +
             " next=" + std::to_string(p.core->NextWakeupMs() - h_.now());
    }
    return out;
  }

  SimResult Finish() {
    for (const Proc& p : procs_) Harvest(p);
    return result_;
  }

  std::mt19937_64 rng_;
  SimOptions opt_;
  testing::CoreHarness h_;
  std::vector<Proc> procs_;
  SimResult result_;
  TimeMs outage_until_ = 0;
  std::optional<std::pair<TimeMs, testing::CoreHarness::Snapshot>> snapshot_;
};

RC_GTEST_PROP(ConsumerCoreProperties, CoupledSimulationNeverSplitsOwnership, ()) {
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  SimOptions opt;
  opt.consumers = *rc::gen::inRange(2, 5);
  opt.shards = *rc::gen::inRange<int32_t>(1, 9);
  const SimResult r = Sim(seed, opt).Run();
  if (r.violation) {
    RC_FAIL(*r.violation + " (replay: seed " + std::to_string(seed) + ", consumers " +
            std::to_string(opt.consumers) + ", shards " + std::to_string(opt.shards) + ")");
  }
}

// A fixed sweep that replays identically and proves the sweep reaches the rare paths.
TEST(ConsumerCoreSimulation, SeedSweepReachesRarePathsWithoutSplitOwnership) {
  SimResult total;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const SimResult r = Sim(seed, SimOptions{}).Run();
    ASSERT_FALSE(r.violation.has_value()) << *r.violation << " (seed " << seed << ")";
    total.lease_expirations += r.lease_expirations;
    total.rejoins += r.rejoins;
    total.shards_started += r.shards_started;
    total.lost_answers += r.lost_answers;
    total.crashes += r.crashes;
    total.shutdowns += r.shutdowns;
    total.rollbacks += r.rollbacks;
    total.syncs += r.syncs;
  }
  std::printf(
      "60 seeds: %lld starts, %lld lease expirations, %lld rejoins, %lld lost answers, "
      "%lld crashes, %lld shutdowns, %lld rollbacks, %lld SYNC_METADATA answers\n",
      static_cast<long long>(total.shards_started), static_cast<long long>(total.lease_expirations),
      static_cast<long long>(total.rejoins), static_cast<long long>(total.lost_answers),
      static_cast<long long>(total.crashes), static_cast<long long>(total.shutdowns),
      static_cast<long long>(total.rollbacks), static_cast<long long>(total.syncs));
  EXPECT_GT(total.lease_expirations, 0) << "no run ever failed closed (C4)";
  EXPECT_GT(total.rejoins, 0) << "no run was ever fenced or expired";
  EXPECT_GT(total.lost_answers, 0);
  EXPECT_GT(total.crashes, 0);
  EXPECT_GT(total.shutdowns, 0);
  EXPECT_GT(total.syncs, 0) << "no run ever went through a correction round";
}

// Replays one seed: RSC_SIM_SEED=N RSC_SIM_CONSUMERS=C RSC_SIM_SHARDS=S client_tests
// --gtest_filter='*ReplayOneSeed*' (the failure message of the property prints all three).
TEST(ConsumerCoreSimulation, ReplayOneSeed) {
  const char* seed = std::getenv("RSC_SIM_SEED");
  if (seed == nullptr) GTEST_SKIP() << "set RSC_SIM_SEED to replay a simulation seed";
  SimOptions opt;
  if (const char* c = std::getenv("RSC_SIM_CONSUMERS")) opt.consumers = std::atoi(c);
  if (const char* n = std::getenv("RSC_SIM_SHARDS")) opt.shards = std::atoi(n);
  opt.trace = std::getenv("RSC_SIM_TRACE") != nullptr;
  opt.liveness_after_rollbacks = true;
  const SimResult r = Sim(std::strtoull(seed, nullptr, 10), opt).Run();
  EXPECT_FALSE(r.violation.has_value()) << *r.violation;
}

TEST(ConsumerCoreSimulation, SameSeedReplaysIdentically) {
  const SimResult a = Sim(1234, SimOptions{}).Run();
  const SimResult b = Sim(1234, SimOptions{}).Run();
  EXPECT_EQ(a.violation, b.violation);
  EXPECT_EQ(a.lease_expirations, b.lease_expirations);
  EXPECT_EQ(a.rejoins, b.rejoins);
  EXPECT_EQ(a.lost_answers, b.lost_answers);
}

TEST(ConsumerCoreSimulation, CheckerCatchesRuntimeThatReadsPastItsLease) {
  SimOptions broken;
  broken.broken_runtime_ignores_abandon = true;
  int caught = 0;
  for (uint64_t seed = 1; seed <= 60 && caught == 0; ++seed) {
    const auto v = Sim(seed, broken).Run().violation;
    if (v)
      std::printf("caught at seed %llu: %s\n", static_cast<unsigned long long>(seed), v->c_str());
    caught += v.has_value() ? 1 : 0;
  }
  EXPECT_GT(caught, 0) << "a runtime that ignores `abandon` must be caught within 60 seeds";
}

// Regression, found by this simulation (a coordinator-core bug, fixed in decide.cc
// ViewFor). A correction-round blocker (shard, member) of a known member lasts until that
// member reports the shard REVOKED, but the member's revokeShards listed it only while the
// member itself reported the shard (K4). Here Redis loses the write that applied c1-3's
// REVOKED for shard 2: the restored round holds blocker (2, c1-3) again while c1-3 no
// longer reports 2, so the round never ended and two shards were never read again. Now
// every blocker of a member is in its revokeShards and C3 clears it at once.
TEST(ConsumerCoreSimulation, Regression_BlockerRestoredByRollbackIsSurfacedAndCleared) {
  SimOptions opt;
  opt.consumers = 2;
  opt.shards = 6;
  opt.liveness_after_rollbacks = true;
  const SimResult r = Sim(246426208741818ULL, opt).Run();
  EXPECT_FALSE(r.violation.has_value()) << *r.violation;
}

}  // namespace
}  // namespace rsc::client
