// Unit tests of the consumer core (SPEC §4.2 C1–C7, M4, docs/protocol.md §3–§4): one named,
// table-driven test per rule, all with a hand-held clock, plus the client-side halves of
// SPEC §10.1 scenarios 2 and 8 driven against the real pure coordinator core. Scenario 10
// is the producer's.

#include "client/consumer_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/core_harness.h"
#include "core/decide.h"

namespace rsc::client {
namespace {

using S = HeartbeatStatus;
using V = std::vector<int32_t>;

constexpr TimeMs kT0 = 50'000;
constexpr int64_t kLease = 8000;
constexpr int64_t kInterval = 1000;

// A response with readable defaults; designated initializers name only what matters.
struct Resp {
  S status = S::kOk;
  V assigned;
  V revoke;
  V pending;
  V taken;
  int64_t epoch = 1;
  int64_t version = 5;
  std::string lineage = "L5";
  int64_t lease_ms = kLease;
  int64_t interval_ms = kInterval;

  HeartbeatResponse Build() const {
    HeartbeatResponse r;
    r.status = status;
    r.member_id = MemberId("m-1");
    r.member_epoch = epoch;
    r.assignment_epoch = 3;
    r.metadata_version = version;
    r.lineage = lineage;
    r.assigned_shards = assigned;
    r.pending_shards = pending;
    r.revoke_shards = revoke;
    r.taken_shards = taken;
    r.heartbeat_interval_ms = interval_ms;
    r.assignment_lease_ms = lease_ms;
    return r;
  }
};

ConsumerCoreOptions Options(int endpoints = 1, uint64_t seed = 7) {
  ConsumerCoreOptions o;
  o.member_id = MemberId("m-1");
  o.endpoint_count = endpoints;
  o.jitter_seed = seed;
  return o;
}

std::map<int32_t, RevokeState> Revoking(const HeartbeatRequest& r) {
  std::map<int32_t, RevokeState> m;
  for (const RevokingReport& rr : r.revoking_shards) m[rr.shard] = rr.state;
  return m;
}

// Plays the runtime: performs every action on a model of "what may be read", checks that
// model against the core after each event, and keeps the one heartbeat in flight.
class Driver {
 public:
  explicit Driver(ConsumerCoreOptions o = Options()) : core(std::move(o)) {}

  ConsumerCore core;
  TimeMs now = kT0;
  std::set<int32_t> readable;  // from start/stop/abandon actions only
  std::set<int32_t> draining;  // stop received, OnShardDrained not yet called
  std::optional<SendHeartbeat> in_flight;
  TimeMs sent_at = 0;
  std::vector<HeartbeatRequest> sent;  // every request, in order
  std::vector<int32_t> ever_started;
  std::vector<std::pair<TimeMs, ConsumerActions>> log;  // every event's actions
  // A runtime whose abandoned work stops at once: right after an event, every abandoned
  // shard is confirmed stopped (OnShardDrained, consumer_core.h `abandon`) and the effects
  // are merged into the event's actions. Off: the test confirms with Stopped().
  bool confirm_abandons = true;

  ConsumerActions Apply(ConsumerActions a) {
    log.emplace_back(now, a);
    for (int32_t s : a.abandon) {
      readable.erase(s);
      draining.erase(s);
    }
    for (int32_t s : a.stop) {
      EXPECT_TRUE(readable.erase(s)) << "stop of a shard that was not readable: " << s;
      draining.insert(s);
    }
    for (int32_t s : a.start) {
      EXPECT_FALSE(readable.contains(s)) << "double start of " << s;
      readable.insert(s);
      ever_started.push_back(s);
    }
    if (a.send) {
      EXPECT_FALSE(in_flight.has_value()) << "two heartbeats in flight";
      in_flight = a.send;
      sent_at = now;
      sent.push_back(a.send->request);
    }
    const V reading = core.ReadingShards();
    EXPECT_EQ(std::set<int32_t>(reading.begin(), reading.end()), readable)
        << "the runtime's readable set must be exactly READING";
    for (int32_t s : readable) EXPECT_TRUE(core.MayRead(s, now)) << s;
    if (confirm_abandons) {
      for (int32_t s : std::vector<int32_t>(a.abandon))
        Merge(a, Apply(core.OnShardDrained(s, now)));
    }
    return a;
  }
  static void Merge(ConsumerActions& into, const ConsumerActions& b) {
    into.abandon.insert(into.abandon.end(), b.abandon.begin(), b.abandon.end());
    into.stop.insert(into.stop.end(), b.stop.begin(), b.stop.end());
    into.start.insert(into.start.end(), b.start.begin(), b.start.end());
    if (!into.version_changed) into.version_changed = b.version_changed;
    if (!into.send) into.send = b.send;
    into.left = into.left || b.left;
  }
  // The abandoned work of `s` has stopped (when confirm_abandons is off).
  ConsumerActions Stopped(int32_t s) { return Apply(core.OnShardDrained(s, now)); }

  ConsumerActions Start() { return Apply(core.Start(now)); }
  ConsumerActions Tick() { return Apply(core.Tick(now)); }
  ConsumerActions AdvanceTo(TimeMs t) {
    now = t;
    return Tick();
  }
  ConsumerActions Advance(int64_t ms) { return AdvanceTo(now + ms); }
  ConsumerActions Respond(const Resp& r) { return RespondRaw(r.Build()); }
  ConsumerActions RespondRaw(const HeartbeatResponse& r) {
    EXPECT_TRUE(in_flight.has_value()) << "response with nothing in flight";
    in_flight.reset();
    return Apply(core.OnHeartbeatResponse(r, now));
  }
  ConsumerActions Fail(ErrorCode code) {
    EXPECT_TRUE(in_flight.has_value()) << "error with nothing in flight";
    in_flight.reset();
    return Apply(core.OnHeartbeatError(code, now));
  }
  ConsumerActions Drained(int32_t s) {
    draining.erase(s);
    return Apply(core.OnShardDrained(s, now));
  }
  const HeartbeatRequest& InFlight() {
    EXPECT_TRUE(in_flight.has_value());
    return in_flight->request;
  }
  // Sends the next heartbeat if needed (advancing to its due time) and returns it.
  const HeartbeatRequest& NextRequest() {
    // The wakeup may be a lease end rather than the heartbeat timer: keep ticking.
    for (int i = 0; i < 4 && !in_flight; ++i) AdvanceTo(std::max(now, core.NextWakeupMs()));
    return InFlight();
  }
  // Join and read `assigned` under an OK.
  void Join(const V& assigned) {
    Start();
    ASSERT_TRUE(in_flight.has_value());
    EXPECT_EQ(InFlight().member_epoch, 0);
    Respond({.assigned = assigned});
    ASSERT_EQ(core.ReadingShards(), assigned);
  }
};

// ── C1 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C1_ReadsOnlyInsideLeaseFromSendTime) {
  struct Row {
    const char* name;
    int64_t answer_delay_ms;  // send → response
    bool starts;
  };
  const Row rows[] = {
      {"instant answer", 0, true},
      {"slow answer: lease still counts from send", 3000, true},
      {"answer one ms before its lease ends", kLease - 1, true},
      {"answer after its lease ended starts nothing", kLease, false},
      {"answer long after its lease", kLease + 5000, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Driver d;
    d.Start();
    const TimeMs sent = d.sent_at;
    d.now += row.answer_delay_ms;
    auto a = d.Respond({.assigned = {0, 1}});
    EXPECT_EQ(a.start, row.starts ? V({0, 1}) : V{});
    EXPECT_EQ(d.core.lease_end(), sent + kLease) << "lease end = send time + assignmentLeaseMs";
    if (!row.starts) continue;
    EXPECT_EQ(d.core.ReadBudgetMs(0, d.now), sent + kLease - d.now);
    EXPECT_EQ(d.core.Status(d.now).lease_remaining_ms, sent + kLease - d.now);
    // Heartbeats go out but get no answer: reads continue up to, not including, lease end.
    d.AdvanceTo(sent + kLease - 1);
    EXPECT_TRUE(d.core.MayRead(0, d.now));
    EXPECT_FALSE(d.core.MayRead(2, d.now)) << "never assigned";
    EXPECT_FALSE(d.core.MayRead(0, sent + kLease)) << "MayRead must use the caller's now";
    auto at_end = d.AdvanceTo(sent + kLease);
    EXPECT_EQ(at_end.abandon, V({0, 1}));
    EXPECT_TRUE(d.core.ReadingShards().empty());
    EXPECT_EQ(d.core.ReadBudgetMs(0, d.now), 0);
  }
}

TEST(ConsumerCore, C1_ShardNoLongerAssignedStopsEvenUnderOk) {
  Driver d;
  d.Join({0, 1, 2});
  d.NextRequest();
  auto a = d.Respond({.assigned = {0, 2}});
  EXPECT_EQ(a.stop, V({1}));
  EXPECT_EQ(d.core.StateOf(1), LocalShardState::kDraining);
}

// ── C2 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C2_NewShardsStartOnlyOnOk) {
  // Reading {0,1}; the answer assigns {0,2}. Only OK may start 2; every status stops 1.
  struct Row {
    S status;
    V revoke;
    V want_start;
    V want_reading;
  };
  const Row rows[] = {
      {S::kOk, {}, {2}, {0, 2}},
      {S::kRevokePending, {}, {}, {0}},
      {S::kSyncMetadata, {}, {}, {0}},
      {S::kDrain, {1}, {}, {0}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(HeartbeatStatusName(row.status));
    Driver d;
    d.Join({0, 1});
    d.NextRequest();
    auto a = d.Respond({.status = row.status, .assigned = {0, 2}, .revoke = row.revoke});
    EXPECT_EQ(a.start, row.want_start);
    EXPECT_EQ(a.stop, V({1}));
    EXPECT_EQ(d.core.ReadingShards(), row.want_reading);
    // A later OK starts what was held back.
    d.Drained(1);
    d.NextRequest();
    auto ok = d.Respond({.assigned = {0, 2}});
    EXPECT_EQ(d.core.ReadingShards(), V({0, 2}));
    EXPECT_EQ(ok.start, row.status == S::kOk ? V{} : V({2}));
  }
}

TEST(ConsumerCore, C2_JoinAnswerWithPendingShardsStartsOnlyAssigned) {
  Driver d;
  d.Start();
  auto a = d.Respond({.status = S::kRevokePending, .assigned = {0}, .pending = {1}});
  EXPECT_TRUE(a.start.empty());
  d.NextRequest();
  a = d.Respond({.assigned = {0, 1}});
  EXPECT_EQ(a.start, V({0, 1}));
}

// ── C3 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C3_DrainStopsReadsReportsRevokedUntilUnlisted) {
  Driver d;
  d.Join({0, 1});
  d.NextRequest();
  auto a = d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
  EXPECT_EQ(a.stop, V({1}));
  EXPECT_FALSE(d.core.MayRead(1, d.now)) << "no new reads at once";
  // While in-flight work settles, 1 is reported DRAINING.
  auto req = d.NextRequest();
  EXPECT_EQ(req.owned_shards, V({0}));
  EXPECT_EQ(Revoking(req), (std::map<int32_t, RevokeState>{{1, RevokeState::kDraining}}));
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
  // Drained: REVOKED is reported at once, not an interval later.
  d.now += 10;
  auto drained = d.Drained(1);
  ASSERT_TRUE(drained.send.has_value());
  EXPECT_EQ(Revoking(drained.send->request),
            (std::map<int32_t, RevokeState>{{1, RevokeState::kRevoked}}));
  // Still listed (the report was lost or not applied yet): keep reporting, every time.
  for (int i = 0; i < 3; ++i) {
    d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
    EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kRevoked) << i;
  }
  // Errors do not make it forget either.
  d.Fail(ErrorCode::kRedisUnavailable);
  EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kRevoked);
  // A successful answer that no longer lists it: forgotten.
  d.Respond({.assigned = {0}});
  EXPECT_EQ(d.core.StateOf(1), std::nullopt);
  EXPECT_TRUE(d.NextRequest().revoking_shards.empty());
}

TEST(ConsumerCore, C3_RevokeOfShardNotReadReportedAtOnce) {
  struct Row {
    const char* name;
    void (*setup)(Driver&);
  };
  const Row rows[] = {
      {"join answer lists a shard this process never read", [](Driver& d) { d.Start(); }},
      {"lease ended and the reads were abandoned",
       [](Driver& d) {
         d.Join({0, 1});
         d.AdvanceTo(d.core.lease_end().value());
         EXPECT_TRUE(d.core.ReadingShards().empty());
       }},
      {"rejoin after FENCED_MEMBER_EPOCH dropped everything",
       [](Driver& d) {
         d.Join({0, 1});
         d.NextRequest();
         d.Fail(ErrorCode::kFencedMemberEpoch);
       }},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Driver d;
    row.setup(d);
    d.NextRequest();
    auto a = d.Respond({.status = S::kDrain, .assigned = {2}, .revoke = {0, 1}, .epoch = 2});
    EXPECT_TRUE(a.stop.empty()) << "nothing to drain: nothing was being read";
    EXPECT_TRUE(a.start.empty()) << "DRAIN starts nothing";
    ASSERT_TRUE(a.send.has_value()) << "REVOKED goes out at once";
    EXPECT_EQ(
        Revoking(a.send->request),
        (std::map<int32_t, RevokeState>{{0, RevokeState::kRevoked}, {1, RevokeState::kRevoked}}));
    EXPECT_TRUE(a.send->request.owned_shards.empty());
  }
}

TEST(ConsumerCore, C3_RevokingShardNeverResumedWhenHeartbeatsFail) {
  const ErrorCode codes[] = {
      ErrorCode::kRedisUnavailable,       ErrorCode::kLockTimeout,        ErrorCode::kInternal,
      ErrorCode::kCoordinatorTerminating, ErrorCode::kUnknownResult,      ErrorCode::kGroupNotFound,
      ErrorCode::kMetadataMissing,        ErrorCode::kMetadataUnreadable,
  };
  for (ErrorCode code : codes) {
    SCOPED_TRACE(ErrorCodeName(code));
    Driver d(Options(/*endpoints=*/2));
    d.Join({0, 1});
    d.NextRequest();
    d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
    bool drained = false;
    for (int i = 0; i < 30; ++i) {
      d.NextRequest();
      d.now += 200;
      d.Fail(code);
      if (i == 3) {
        d.Drained(1);
        drained = true;
      }
      EXPECT_FALSE(d.core.MayRead(1, d.now));
      EXPECT_NE(d.core.StateOf(1), LocalShardState::kReading);
      if (drained) {
        EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kRevoked);
      }
    }
    EXPECT_GT(d.now, d.core.lease_end().value()) << "the outage outlasted the lease";
    EXPECT_TRUE(d.core.ReadingShards().empty());
    EXPECT_EQ(std::count(d.ever_started.begin(), d.ever_started.end(), 1), 1)
        << "shard 1 was started once, at the join, and never resumed";
    // Statuses other than OK do not bring it back even when they list it assigned.
    d.NextRequest();
    d.Respond({.status = S::kRevokePending, .assigned = {0, 1}});
    EXPECT_TRUE(d.core.ReadingShards().empty());
    // Only an OK listing it assigned (and not revoked) does: a fresh start with takeover.
    d.NextRequest();
    auto ok = d.Respond({.assigned = {0, 1}});
    EXPECT_EQ(ok.start, V({0, 1}));
  }
}

TEST(ConsumerCore, C3_DrainingShardHandedBackRestartsOnlyAfterDrained) {
  Driver d;
  d.Join({0, 1});
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
  // The target moves back before 1 finished draining: OK lists it assigned again.
  d.NextRequest();
  auto a = d.Respond({.assigned = {0, 1}});
  EXPECT_TRUE(a.start.empty()) << "in-flight work of 1 has not settled";
  EXPECT_EQ(d.core.StateOf(1), LocalShardState::kDraining);
  d.Drained(1);  // reported REVOKED (ignored by the coordinator, I2)
  d.NextRequest();
  a = d.Respond({.assigned = {0, 1}});
  EXPECT_EQ(a.start, V({1})) << "fresh start once it is absent again";
}

// ── C4 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C4_LeaseEndFailsClosedAndKeepsHeartbeating) {
  const ErrorCode codes[] = {ErrorCode::kGroupNotFound,          ErrorCode::kMetadataMissing,
                             ErrorCode::kMetadataUnreadable,     ErrorCode::kRedisUnavailable,
                             ErrorCode::kCoordinatorTerminating, ErrorCode::kUnknownResult};
  for (ErrorCode code : codes) {
    for (S recovery : {S::kOk, S::kRevokePending}) {
      SCOPED_TRACE(std::string(ErrorCodeName(code)) + " then " +
                   std::string(HeartbeatStatusName(recovery)));
      Driver d(Options(3));
      d.Join({0, 1});
      d.NextRequest();
      d.Respond({.status = S::kDrain, .assigned = {0, 1}, .revoke = {2}});  // 2 → REVOKED
      const TimeMs lease_end = d.core.lease_end().value();
      while (d.now < lease_end + 5000) {
        d.NextRequest();
        d.Fail(code);
        if (d.now < lease_end) {
          EXPECT_EQ(d.core.ReadingShards(), V({0, 1})) << d.now;
        }
        d.AdvanceTo(std::min(d.core.NextWakeupMs(), lease_end + 5000));
      }
      V abandoned;
      int sends_after_end = 0;
      for (const auto& [t, a] : d.log) {
        if (t < lease_end) {
          EXPECT_TRUE(a.abandon.empty()) << "abandoned before lease end";
        }
        abandoned.insert(abandoned.end(), a.abandon.begin(), a.abandon.end());
        sends_after_end += (t >= lease_end && a.send) ? 1 : 0;
      }
      EXPECT_EQ(abandoned, V({0, 1})) << "both shards abandoned exactly once";
      EXPECT_GE(sends_after_end, 1) << "heartbeats continue after lease end";
      const ConsumerStatus st = d.core.Status(d.now);
      EXPECT_TRUE(st.failed_closed);
      EXPECT_EQ(st.lease_remaining_ms, 0);
      EXPECT_EQ(st.counters.lease_expirations, 1);
      const HeartbeatRequest& req = d.NextRequest();
      EXPECT_TRUE(req.owned_shards.empty()) << "report only what is true";
      EXPECT_EQ(Revoking(req).at(2), RevokeState::kRevoked);
      // The next success follows C2.
      auto a = d.Respond({.status = recovery, .assigned = {0, 1}});
      EXPECT_EQ(a.start, recovery == S::kOk ? V({0, 1}) : V{});
      EXPECT_FALSE(d.core.Status(d.now).failed_closed);
    }
  }
}

TEST(ConsumerCore, C4_DrainingShardIsAbandonedAtLeaseEndAndReportedRevoked) {
  Driver d;
  d.confirm_abandons = false;
  d.Join({0, 1});
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
  const TimeMs end = d.core.lease_end().value();
  d.NextRequest();
  d.Fail(ErrorCode::kRedisUnavailable);
  auto a = d.AdvanceTo(end);
  EXPECT_EQ(a.abandon, V({0, 1}));
  EXPECT_EQ(d.core.StateOf(1), LocalShardState::kRevoked);
  // Until the runtime says the abandoned work stopped, it is in-flight work: DRAINING.
  EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kDraining);
  d.Fail(ErrorCode::kRedisUnavailable);
  auto stopped = d.Stopped(1);
  EXPECT_TRUE(stopped.abandon.empty() && stopped.stop.empty() && stopped.start.empty());
  EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kRevoked);
  auto late = d.Drained(1);  // a runtime duplicate: ignored
  EXPECT_TRUE(late.abandon.empty() && late.stop.empty() && late.start.empty());
}

// ── C8: a shard taken from us has its own, final lease ───────────────────────────

TEST(ConsumerCore, C8_D5_EveryHeartbeatDeclaresShardLeaseAndLayoutV2) {
  Driver d;
  d.Start();
  EXPECT_EQ(d.InFlight().features,
            (std::vector<std::string>{kFeatureLayoutV2, kFeatureShardLease}));
}

// RS3: a sealed shard read to its end is reported in completedShards at once (its children
// wait for it), on every heartbeat after, until an answer no longer lists it; then the
// shard, no longer assigned, is drained like any other.
TEST(ConsumerCore, RS3_CompletedShardIsReportedAtOnceUntilTheAnswerStopsListingIt) {
  Driver d;
  d.Join({0, 1});
  d.Advance(10);  // the join answer's follow-up timers
  ASSERT_FALSE(d.in_flight.has_value());
  d.Apply(d.core.OnShardCompleted(1, d.now));
  ASSERT_TRUE(d.in_flight.has_value()) << "a completion is sent without waiting an interval";
  EXPECT_EQ(d.InFlight().completed_shards, V{1});
  EXPECT_EQ(d.InFlight().owned_shards, (V{0, 1}));
  d.Respond({.assigned = {0, 1}});  // the coordinator has not recorded it yet
  EXPECT_EQ(d.NextRequest().completed_shards, V{1}) << "repeated while still listed";
  d.Respond({.assigned = {0}});  // recorded: the shard left the assignment
  EXPECT_TRUE(d.draining.contains(1));
  d.Drained(1);
  const HeartbeatRequest& next = d.NextRequest();
  EXPECT_TRUE(next.completed_shards.empty());
  EXPECT_EQ(Revoking(next), (std::map<int32_t, RevokeState>{{1, RevokeState::kRevoked}}));
}

TEST(ConsumerCore, RS3_ACompletionOfAShardNotHeldIsIgnored) {
  Driver d;
  d.Join({0});
  d.Advance(10);
  const ConsumerActions a = d.Apply(d.core.OnShardCompleted(7, d.now));
  EXPECT_FALSE(a.send.has_value());
  EXPECT_TRUE(d.NextRequest().completed_shards.empty());
}

TEST(ConsumerCore, C8_TakenShardKeepsTheLeaseItHadAndIsAbandonedAloneAtItsEnd) {
  Driver d;
  d.confirm_abandons = false;
  d.Join({0, 1});
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});  // 1 drains (stuck)
  const TimeMs own_end = d.core.lease_end().value();
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}, .taken = {1}});
  EXPECT_GT(d.core.lease_end().value(), own_end) << "the member lease is renewed";
  EXPECT_EQ(d.core.LeaseEndOf(1), own_end) << "shard 1 keeps the lease it had";
  EXPECT_EQ(d.core.LeaseEndOf(0), d.core.lease_end());
  EXPECT_EQ(d.core.Status(d.now).taken, V({1}));
  // Later answers, even one that forgets the take (a rollback), renew nothing on it.
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}});
  EXPECT_EQ(d.core.LeaseEndOf(1), own_end);
  ASSERT_LT(d.now, own_end);
  EXPECT_TRUE(d.core.MayProcess(1, own_end - 1));
  EXPECT_FALSE(d.core.MayProcess(1, own_end));
  auto a = d.AdvanceTo(own_end);
  EXPECT_EQ(a.abandon, V({1})) << "shard 1 alone";
  EXPECT_EQ(d.core.ReadingShards(), V({0}));
  EXPECT_TRUE(d.core.MayRead(0, d.now));
  EXPECT_EQ(d.core.Status(d.now).counters.shards_taken, 1);
  // DRAINING until its work stopped, then REVOKED (the coordinator releases it at once).
  EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kDraining);
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1}, .taken = {1}});
  d.Stopped(1);
  EXPECT_EQ(Revoking(d.NextRequest()).at(1), RevokeState::kRevoked);
  // Released and handed back by the very answer that stops listing it in revokeShards
  // (forgotten, then started in one event): a fresh start, under the member lease again
  // (found by the simulator: the old, ended lease of the take was kept for it).
  d.Respond({.assigned = {0, 1}});
  EXPECT_EQ(d.core.ReadingShards(), V({0, 1}));
  EXPECT_EQ(d.core.LeaseEndOf(1), d.core.lease_end());
  EXPECT_TRUE(d.core.Status(d.now).taken.empty());
}

TEST(ConsumerCore, C8_AReadingShardListedTakenIsStoppedAndNeverStarted) {
  Driver d;
  d.Join({0, 1});
  d.NextRequest();
  auto a = d.Respond({.assigned = {0, 1, 2}, .taken = {1, 2}});
  EXPECT_EQ(a.stop, V({1}));
  EXPECT_TRUE(a.start.empty()) << "shard 2 is assigned but taken: not started";
  EXPECT_EQ(d.core.ReadingShards(), V({0}));
}

// Regression (simulator seed 17): a member fenced while a reader of shard 0 had an
// XREADGROUP ... BLOCK in flight reported shard 0 REVOKED at once on the rejoin's DRAIN;
// the coordinator handed it on while the old read could still take entries at Redis. An
// abandoned shard is now DRAINING until the runtime confirms its work stopped.
TEST(ConsumerCore, AbandonedShardIsNotReportedRevokedBeforeItsWorkStopped) {
  Driver d;
  d.confirm_abandons = false;
  d.Join({0, 1});
  d.NextRequest();
  auto a = d.Fail(ErrorCode::kFencedMemberEpoch);
  EXPECT_EQ(a.abandon, V({0, 1}));
  ASSERT_TRUE(a.send.has_value()) << "rejoin at once";
  EXPECT_EQ(
      Revoking(a.send->request),
      (std::map<int32_t, RevokeState>{{0, RevokeState::kDraining}, {1, RevokeState::kDraining}}));
  // The rejoin answer says to release both; the work of 0 is still running.
  a = d.Respond({.status = S::kDrain, .assigned = {}, .revoke = {0, 1}, .epoch = 2});
  EXPECT_FALSE(a.send.has_value()) << "nothing new to report: both still DRAINING";
  d.Stopped(1);
  EXPECT_EQ(Revoking(d.InFlight()), (std::map<int32_t, RevokeState>{{0, RevokeState::kDraining},
                                                                    {1, RevokeState::kRevoked}}))
      << "1 stopped: its REVOKED goes out at once";
  d.Respond({.status = S::kDrain, .assigned = {}, .revoke = {0}, .epoch = 2});
  EXPECT_EQ(Revoking(d.NextRequest()).at(0), RevokeState::kDraining);
  // Handed back while still stopping: not started (a second reader would race the first).
  a = d.Respond({.assigned = {0}, .epoch = 2});
  EXPECT_TRUE(a.start.empty());
  d.Stopped(0);
  d.NextRequest();
  a = d.Respond({.assigned = {0}, .epoch = 2});
  EXPECT_EQ(a.start, V({0})) << "a fresh start once the old work stopped";
}

TEST(ConsumerCore, ShardAbandonedAtLeaseEndRestartsOnlyAfterItsWorkStopped) {
  Driver d;
  d.confirm_abandons = false;
  d.Join({0});
  d.NextRequest();
  d.Fail(ErrorCode::kRedisUnavailable);
  auto a = d.AdvanceTo(d.core.lease_end().value());
  EXPECT_EQ(a.abandon, V({0}));
  d.NextRequest();
  a = d.Respond({.assigned = {0}});
  EXPECT_TRUE(a.start.empty()) << "the abandoned reader may still be inside a handler call";
  d.Stopped(0);
  d.NextRequest();
  a = d.Respond({.assigned = {0}});
  EXPECT_EQ(a.start, V({0}));
}

// ── C5 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C5_SendsHighestObservedVersionAndLineage) {
  struct Row {
    S status;
    int64_t version;
    std::string lineage;
    int64_t want_version;
    std::string want_lineage;
    bool changed;
  };
  const Row rows[] = {
      {S::kOk, 5, "L5", 7, "L7", false},                // lagging answer: keep ours
      {S::kOk, 9, "L9", 9, "L9", true},                 // higher: take it
      {S::kRevokePending, 9, "L9", 9, "L9", false},     // same pair: nothing to persist
      {S::kDrain, 10, "L10", 10, "L10", true},          // any status raises it
      {S::kOk, 10, "L10b", 10, "L10b", true},           // equal version: the answer's pair
      {S::kRevokePending, 8, "L8", 10, "L10b", false},  // lower without SYNC: ignored
  };
  ConsumerCoreOptions o = Options();
  o.initial_metadata_version = 7;  // from a version store
  o.initial_lineage = "L7";
  Driver d(o);
  d.Start();
  EXPECT_EQ(d.InFlight().metadata_version, 7);
  EXPECT_EQ(d.InFlight().lineage, "L7");
  for (const Row& row : rows) {
    SCOPED_TRACE(row.lineage);
    auto a = d.Respond({.status = row.status,
                        .assigned = {0},
                        .revoke = row.status == S::kDrain ? V({9}) : V{},
                        .version = row.version,
                        .lineage = row.lineage});
    EXPECT_EQ(a.version_changed.has_value(), row.changed);
    if (row.changed) {
      EXPECT_EQ(*a.version_changed, (ObservedVersionChanged{row.want_version, row.want_lineage}));
    }
    const HeartbeatRequest& req = d.NextRequest();
    EXPECT_EQ(req.metadata_version, row.want_version);
    EXPECT_EQ(req.lineage, row.want_lineage) << "the lineage always travels with its version";
  }
}

TEST(ConsumerCore, C5_SyncMetadataReplacesWithLowerVersion) {
  Driver d;
  d.Start();
  d.Respond({.assigned = {0, 1}, .version = 12, .lineage = "L12"});
  d.NextRequest();
  // Redis lost versions 5..12: the stored truth is 4/L4 and it keeps shard 0 only (M4).
  auto a = d.Respond({.status = S::kSyncMetadata, .assigned = {0}, .version = 4, .lineage = "L4"});
  ASSERT_TRUE(a.version_changed.has_value());
  EXPECT_EQ(*a.version_changed, (ObservedVersionChanged{4, "L4"}));
  EXPECT_EQ(a.stop, V({1}));
  const HeartbeatRequest& req = d.NextRequest();
  EXPECT_EQ(req.metadata_version, 4);
  EXPECT_EQ(req.lineage, "L4");
  // A lagging non-SYNC answer afterwards does not lower it further.
  d.Respond({.status = S::kRevokePending, .assigned = {0}, .version = 3, .lineage = "L3"});
  EXPECT_EQ(d.NextRequest().metadata_version, 4);
  EXPECT_EQ(d.core.Status(d.now).lineage, "L4");
}

// ── C6 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C6_TerminatingSwitchesEndpointWithBoundedBackoff) {
  struct Row {
    ErrorCode code;
    bool rotates;
  };
  const Row rows[] = {{ErrorCode::kCoordinatorTerminating, true},
                      {ErrorCode::kUnknownResult, true},
                      {ErrorCode::kRedisUnavailable, false},
                      {ErrorCode::kLockTimeout, false},
                      {ErrorCode::kInternal, false}};
  for (const Row& row : rows) {
    SCOPED_TRACE(ErrorCodeName(row.code));
    ConsumerCoreOptions o = Options(/*endpoints=*/3, /*seed=*/42);
    o.backoff_initial_ms = 100;
    o.backoff_max_ms = 1600;
    Driver d(o);
    d.Start();  // holds nothing, so only the retry timer decides NextWakeupMs
    d.Respond({.status = S::kRevokePending, .pending = {0}});
    d.NextRequest();
    std::vector<int> endpoints;
    std::vector<int64_t> delays;
    for (int i = 0; i < 10; ++i) {
      endpoints.push_back(d.in_flight->endpoint);
      auto a = d.Fail(row.code);
      delays.push_back(a.send ? 0 : d.core.NextWakeupMs() - d.now);
      d.NextRequest();
    }
    for (size_t i = 0; i < endpoints.size(); ++i) {
      EXPECT_EQ(endpoints[i], row.rotates ? static_cast<int>(i % 3) : 0) << i;
    }
    // Rotation: the two other endpoints are tried at once, then backoff. Backoff doubles
    // with equal jitter [d/2, d] and never exceeds the bound.
    const int free = row.rotates ? 2 : 0;
    for (int i = 0; i < 10; ++i) {
      if (i < free) {
        EXPECT_EQ(delays[i], 0) << i;
        continue;
      }
      const int64_t nominal = std::min<int64_t>(100LL << std::min(i - free, 20), 1600);
      EXPECT_GE(delays[i], nominal / 2) << i;
      EXPECT_LE(delays[i], nominal) << i;
    }
    EXPECT_LE(*std::max_element(delays.begin(), delays.end()), 1600);
    // Success resets the backoff and keeps the endpoint that answered.
    const int ep = d.in_flight->endpoint;
    d.Respond({.status = S::kRevokePending, .pending = {0}});
    EXPECT_EQ(d.core.Status(d.now).consecutive_failures, 0);
    EXPECT_EQ(d.core.NextWakeupMs() - d.now, kInterval);
    d.NextRequest();
    EXPECT_EQ(d.in_flight->endpoint, ep);
  }
}

TEST(ConsumerCore, C6_JitterIsDeterministicPerSeed) {
  auto delays = [](uint64_t seed) {
    Driver d(Options(1, seed));
    d.Start();
    std::vector<int64_t> out;
    for (int i = 0; i < 8; ++i) {
      d.Fail(ErrorCode::kRedisUnavailable);
      out.push_back(d.core.NextWakeupMs() - d.now);
      d.NextRequest();
    }
    return out;
  };
  EXPECT_EQ(delays(1), delays(1));
  EXPECT_NE(delays(1), delays(2));
}

// ── C7 ──────────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, C7_TakeoverOnFirstReadOfNewShard) {
  // Every entry of `start` is a first read of a shard this process does not hold, so the
  // runtime claims the previous owner's pending entries before reading. A shard kept across
  // answers is never "started" again (no needless re-claim); a shard that came back after
  // being released is started — and taken over — again.
  Driver d;
  d.Start();
  auto a = d.Respond({.assigned = {0, 1}});
  EXPECT_EQ(a.start, V({0, 1}));
  for (int i = 0; i < 3; ++i) {
    d.NextRequest();
    a = d.Respond({.assigned = {0, 1}});
    EXPECT_TRUE(a.start.empty()) << "kept shards are not restarted";
  }
  d.NextRequest();
  a = d.Respond({.assigned = {0, 1, 2}});
  EXPECT_EQ(a.start, V({2})) << "only the new shard";
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0, 2}, .revoke = {1}});
  d.Drained(1);
  d.Respond({.assigned = {0, 2}});
  d.NextRequest();
  a = d.Respond({.assigned = {0, 1, 2}});
  EXPECT_EQ(a.start, V({1})) << "back after release: a new first read";
  EXPECT_EQ(d.ever_started, V({0, 1, 2, 1}));
}

// ── UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH ─────────────────────────────────────

void DropsAllAndRejoins(ErrorCode code) {
  Driver d;
  d.Join({0, 1, 2, 3});
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0, 1}, .revoke = {2, 3}});
  d.Drained(3);  // 2 DRAINING, 3 REVOKED
  d.Respond({.status = S::kDrain, .assigned = {0, 1}, .revoke = {2, 3}});
  d.NextRequest();
  auto a = d.Fail(code);
  EXPECT_EQ(a.abandon, V({0, 1, 2})) << "READING and DRAINING are abandoned now";
  EXPECT_TRUE(d.core.ReadingShards().empty());
  EXPECT_EQ(d.core.StateOf(3), std::nullopt) << "local revoking state is cleared";
  EXPECT_EQ(d.core.phase(), ConsumerPhase::kJoining);
  ASSERT_TRUE(a.send.has_value()) << "rejoin at once";
  EXPECT_EQ(a.send->request.member_epoch, 0);
  EXPECT_EQ(a.send->request.member_id, MemberId("m-1")) << "same member id";
  EXPECT_TRUE(a.send->request.owned_shards.empty());
  // Sent before the runtime confirmed the abandoned work stopped: reported DRAINING
  // (REVOKED 3 is forgotten).
  EXPECT_EQ(
      Revoking(a.send->request),
      (std::map<int32_t, RevokeState>{
          {0, RevokeState::kDraining}, {1, RevokeState::kDraining}, {2, RevokeState::kDraining}}));
  EXPECT_EQ(a.send->request.metadata_version, 5) << "the observed version survives";
  // A late drain of the abandoned shard is ignored.
  auto late = d.Drained(2);
  EXPECT_TRUE(late.empty());
  // The rejoin answer: new epoch; it still records 2 and 3 as ours to release.
  a = d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {2, 3}, .epoch = 2});
  EXPECT_TRUE(a.start.empty());
  ASSERT_TRUE(a.send.has_value());
  EXPECT_EQ(a.send->request.member_epoch, 2);
  EXPECT_EQ(Revoking(a.send->request).size(), 2u);
  a = d.Respond({.assigned = {0}, .epoch = 2});
  EXPECT_EQ(a.start, V({0}));
  EXPECT_EQ(d.core.Status(d.now).counters.rejoins, 1);
  // Repeated rejoin failures back off instead of spinning.
  d.NextRequest();
  d.Fail(code);
  d.NextRequest();
  a = d.Fail(code);
  EXPECT_FALSE(a.send.has_value());
  EXPECT_GT(d.core.NextWakeupMs(), d.now);
}

TEST(ConsumerCore, UnknownMember_DropsAllAndRejoins) {
  DropsAllAndRejoins(ErrorCode::kUnknownMemberId);
}
TEST(ConsumerCore, Fenced_DropsAllAndRejoins) { DropsAllAndRejoins(ErrorCode::kFencedMemberEpoch); }

TEST(ConsumerCore, UnexpectedLeftAnswerDropsAllAndRejoins) {
  Driver d;
  d.Join({0});
  d.NextRequest();
  auto a = d.Respond({.epoch = -1});
  EXPECT_EQ(a.abandon, V({0}));
  EXPECT_FALSE(a.left);
  ASSERT_TRUE(a.send.has_value());
  EXPECT_EQ(a.send->request.member_epoch, 0);
}

// ── Shutdown ────────────────────────────────────────────────────────────────────

TEST(ConsumerCore, CleanShutdownDrainsThenLeaves) {
  Driver d;
  d.Join({0, 1});
  d.NextRequest();
  d.Respond({.status = S::kDrain, .assigned = {0, 1}, .revoke = {5}});  // 5: REVOKED at once
  d.Respond({.status = S::kDrain, .assigned = {0, 1}, .revoke = {5}});
  auto a = d.Apply(d.core.Shutdown(d.now));
  EXPECT_EQ(a.stop, V({0, 1}));
  EXPECT_EQ(d.core.phase(), ConsumerPhase::kLeaving);
  // While draining, ordinary heartbeats keep the membership alive (no leave yet).
  const HeartbeatRequest hb = d.NextRequest();
  EXPECT_EQ(hb.member_epoch, 1);
  EXPECT_FALSE(d.in_flight->leave);
  EXPECT_EQ(Revoking(hb), (std::map<int32_t, RevokeState>{{0, RevokeState::kDraining},
                                                          {1, RevokeState::kDraining},
                                                          {5, RevokeState::kRevoked}}));
  a = d.Respond({.assigned = {0, 1, 2}});
  EXPECT_TRUE(a.start.empty()) << "nothing starts while leaving, even on OK";
  a = d.Drained(0);  // reports 0 REVOKED at once; 1 still drains, so no leave yet
  ASSERT_TRUE(a.send.has_value());
  EXPECT_FALSE(a.send->leave);
  d.Respond({.assigned = {1, 2}});
  // Last drain: the leave goes out at once, with everything held reported REVOKED.
  a = d.Drained(1);
  ASSERT_TRUE(a.send.has_value());
  EXPECT_TRUE(a.send->leave);
  EXPECT_EQ(a.send->request.member_epoch, -1);
  EXPECT_TRUE(a.send->request.owned_shards.empty());
  EXPECT_EQ(Revoking(a.send->request),
            (std::map<int32_t, RevokeState>{{1, RevokeState::kRevoked}}));
  // The coordinator still records 2 as ours: DRAIN. 2 is released at once; leave again.
  a = d.Respond({.status = S::kDrain, .revoke = {2}});
  ASSERT_TRUE(a.send.has_value());
  EXPECT_TRUE(a.send->leave);
  EXPECT_EQ(Revoking(a.send->request),
            (std::map<int32_t, RevokeState>{{2, RevokeState::kRevoked}}));
  a = d.Respond({.epoch = -1});
  EXPECT_TRUE(a.left);
  EXPECT_EQ(d.core.phase(), ConsumerPhase::kLeft);
  // Finished: nothing more is ever sent or started; no read followed the first leave.
  EXPECT_TRUE(d.Advance(60'000).empty());
  EXPECT_EQ(d.ever_started, V({0, 1}));
  bool leave_sent = false;
  for (const auto& [t, act] : d.log) {
    if (leave_sent) {
      EXPECT_TRUE(act.start.empty());
    }
    leave_sent = leave_sent || (act.send && act.send->leave);
  }
}

TEST(ConsumerCore, ShutdownBeforeStartOrWithNothingHeldLeavesAtOnce) {
  ConsumerCore idle(Options());
  auto a = idle.Shutdown(kT0);
  EXPECT_TRUE(a.left);

  Driver d;
  d.Start();
  d.Respond({.status = S::kRevokePending, .pending = {0}});
  a = d.Apply(d.core.Shutdown(d.now));
  ASSERT_TRUE(a.send.has_value());
  EXPECT_TRUE(a.send->leave);
  a = d.Respond({.epoch = -1});
  EXPECT_TRUE(a.left);
}

// ── Status / metrics (SPEC §11) ─────────────────────────────────────────────────

TEST(ConsumerCore, StatusReportsLeaseRevokingAndEpoch) {
  Driver d;
  d.Join({0, 1, 2});
  d.now += 2500;
  d.Tick();
  d.Respond({.status = S::kDrain, .assigned = {0}, .revoke = {1, 2}, .epoch = 4});
  d.Drained(2);
  const ConsumerStatus st = d.core.Status(d.now);
  EXPECT_EQ(st.phase, ConsumerPhase::kMember);
  EXPECT_EQ(st.member_epoch, 4);
  EXPECT_EQ(st.reading, V({0}));
  EXPECT_EQ(st.draining, V({1}));
  EXPECT_EQ(st.revoked, V({2}));
  EXPECT_EQ(st.revoking_count, 2);
  EXPECT_EQ(st.lease_remaining_ms, d.core.lease_end().value() - d.now);
  EXPECT_EQ(st.metadata_version, 5);
  EXPECT_EQ(st.last_status, S::kDrain);
  EXPECT_EQ(st.counters.shards_started, 3);
}

// ── SPEC §10.1, client side, against the real pure coordinator core ────────────

ConsumerCoreOptions OptionsFor(const std::string& id) {
  ConsumerCoreOptions o = Options();
  o.member_id = MemberId(id);
  return o;
}

// Delivers the heartbeat `d` has in flight (sending one first if due) to the coordinator
// core, which decides and commits it, and hands the answer back.
void Deliver(Driver& d, testing::CoreHarness& h) {
  d.now = h.now();
  if (!d.in_flight) d.Tick();
  if (!d.in_flight) return;
  const HeartbeatRequest req = d.in_flight->request;
  auto r = h.Heartbeat(req);
  if (r.ok()) {
    d.RespondRaw(*r);
  } else {
    d.Fail(r.error().code);
  }
}

// Moves the clock to `d`'s next heartbeat (if it is not already due) and delivers it.
void DeliverNext(Driver& d, testing::CoreHarness& h) {
  d.now = h.now();
  if (!d.in_flight) d.Tick();
  for (int i = 0; i < 4 && !d.in_flight; ++i) {
    h.Advance(std::max<int64_t>(0, d.core.NextWakeupMs() - h.now()));
    d.now = h.now();
    d.Tick();
  }
  ASSERT_TRUE(d.in_flight.has_value());
  Deliver(d, h);
}

// The coordinator is unreachable: whatever `d` has in flight times out.
void Unreachable(Driver& d, testing::CoreHarness& h) {
  d.now = h.now();
  if (!d.in_flight) d.Tick();
  if (d.in_flight) d.Fail(ErrorCode::kUnknownResult);
}

void ExpectNoSplitOwnership(const std::vector<const Driver*>& ds) {
  std::map<int32_t, int> readers;
  for (const Driver* d : ds) {
    for (int32_t s : d->readable) ++readers[s];
    for (int32_t s : d->draining) ++readers[s];  // in-flight work counts as ownership
  }
  for (const auto& [s, n] : readers) EXPECT_LE(n, 1) << "shard " << s << " held twice";
}

TEST(ConsumerCoreScenarios,
     Scenario02_CoordinatorUnavailableAfterDrainKeepsShardRevokingNeverResumes) {
  testing::CoreHarness h(4);
  // Retries at most 500 ms apart, so A heartbeats soon after the outage and well inside its
  // member lease (with a longer backoff A may expire instead — also safe, but another test).
  ConsumerCoreOptions oa = OptionsFor("A"), ob = OptionsFor("B");
  oa.backoff_max_ms = ob.backoff_max_ms = 500;
  Driver a(oa), b(ob);
  a.now = b.now = h.now();
  a.Start();
  Deliver(a, h);  // join: all four shards, handed over in the same write
  ASSERT_EQ(a.core.ReadingShards(), V({0, 1, 2, 3}));
  b.Start();
  Deliver(b, h);  // B joins: target split, 2 and 3 pending for B
  ASSERT_TRUE(b.readable.empty());
  h.Advance(kInterval);
  Deliver(a, h);  // DRAIN [2,3]
  ASSERT_EQ(a.draining, std::set<int32_t>({2, 3}));
  const TimeMs outage_start = h.now();
  const TimeMs a_lease_end = a.core.lease_end().value();
  // The coordinator is unreachable for longer than the assignment lease (but shorter than
  // the member lease, so nobody expires). A finishes draining half a second in.
  while (h.now() < outage_start + 8500) {
    h.Advance(250);
    Unreachable(a, h);
    Unreachable(b, h);
    if (h.now() == outage_start + 500) {
      a.Drained(2);
      a.Drained(3);
    }
    EXPECT_FALSE(a.core.MayRead(2, h.now()));
    EXPECT_FALSE(a.core.MayRead(3, h.now()));
    if (h.now() >= a_lease_end) {
      EXPECT_TRUE(a.readable.empty()) << "C4 at " << h.now();
    }
    EXPECT_TRUE(b.readable.empty()) << "B never got an OK for 2/3";
    ExpectNoSplitOwnership({&a, &b});
  }
  EXPECT_EQ(a.core.StateOf(2), LocalShardState::kRevoked);
  EXPECT_EQ(a.core.StateOf(3), LocalShardState::kRevoked);
  EXPECT_EQ(std::count(a.ever_started.begin(), a.ever_started.end(), 2), 1);
  // The coordinator is back: A's REVOKED report releases 2 and 3 to B; A gets 0 and 1 back
  // as a fresh start (C2, C7).
  for (int i = 0; i < 20; ++i) {
    h.Advance(250);
    Deliver(a, h);
    Deliver(b, h);
    ExpectNoSplitOwnership({&a, &b});
  }
  EXPECT_EQ(a.core.ReadingShards(), V({0, 1}));
  EXPECT_EQ(b.core.ReadingShards(), V({2, 3}));
  EXPECT_EQ(a.ever_started, V({0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(a.core.StateOf(2), std::nullopt) << "forgotten once no longer listed";
}

TEST(ConsumerCoreScenarios, Scenario08_AfterSyncDrainsRemovedShardsAndWaitsOnRevokePending) {
  testing::CoreHarness h(2);
  Driver a(OptionsFor("A")), b(OptionsFor("B"));
  a.now = b.now = h.now();
  a.Start();
  Deliver(a, h);
  ASSERT_EQ(a.core.ReadingShards(), V({0, 1}));
  b.Start();
  Deliver(b, h);      // B joins: 1 pending for B
  DeliverNext(a, h);  // A: DRAIN [1]
  a.Drained(1);       // REVOKED goes out at once ...
  Deliver(a, h);      // ... and releases 1 to B
  DeliverNext(b, h);  // B: OK [1]
  ASSERT_EQ(a.core.ReadingShards(), V({0}));
  ASSERT_EQ(b.core.ReadingShards(), V({1}));
  const auto before = h.Save();  // Redis: A owns 0, B owns 1
  // B shuts down cleanly; A is given 1 and reads it. Then Redis loses all of that.
  b.Apply(b.core.Shutdown(h.now()));
  b.Drained(1);
  for (int i = 0; i < 3 && b.core.phase() != ConsumerPhase::kLeft; ++i) Deliver(b, h);
  ASSERT_EQ(b.core.phase(), ConsumerPhase::kLeft);
  h.Advance(kInterval);
  Deliver(a, h);
  ASSERT_EQ(a.core.ReadingShards(), V({0, 1}));
  const int64_t seen_version = a.core.metadata_version();
  const std::string seen_lineage = a.core.lineage();
  h.RollbackTo(before);
  ASSERT_LT(h.meta().version.value(), seen_version);

  // A's next heartbeat reveals the regression: SYNC_METADATA, keep 0, drain 1 (M4).
  h.Advance(kInterval);
  Deliver(a, h);
  const ConsumerActions& sync = a.log.back().second;
  EXPECT_EQ(a.core.Status(h.now()).last_status, S::kSyncMetadata);
  EXPECT_EQ(sync.stop, V({1}));
  ASSERT_TRUE(sync.version_changed.has_value());
  // Replaced by the stored truth: never above what A saw, and a different (version,
  // lineage) pair — the round's own write may bring the number back to A's.
  EXPECT_LE(sync.version_changed->metadata_version, seen_version);
  EXPECT_NE(sync.version_changed->lineage, seen_lineage);
  EXPECT_EQ(a.core.ReadingShards(), V({0}));
  // Until the round ends: no OK, nothing starts; 1 drains and is reported REVOKED.
  std::vector<S> statuses;
  bool got_ok = false;
  for (int i = 0; i < 40 && !got_ok; ++i) {
    h.Advance(500);
    if (i == 2) a.Drained(1);
    Deliver(a, h);
    const S st = a.core.Status(h.now()).last_status.value();
    statuses.push_back(st);
    got_ok = st == S::kOk;
    if (!got_ok) {
      EXPECT_EQ(a.core.ReadingShards(), V({0})) << "nothing starts before OK (C2), i=" << i;
      EXPECT_LE(a.core.metadata_version(), h.meta().version.value())
          << "A never reports the lost version again";
    }
  }
  ASSERT_TRUE(got_ok) << "the round never ended";
  EXPECT_NE(std::find(statuses.begin(), statuses.end(), S::kRevokePending), statuses.end())
      << "REVOKE_PENDING while the round waits for blockers";
  // B's stale record expired and the round ended: A gets 1 back as a fresh start.
  EXPECT_EQ(a.core.ReadingShards(), V({0, 1}));
  EXPECT_EQ(a.ever_started, V({0, 1, 1, 1}));
  EXPECT_FALSE(h.meta().round.has_value());
}

}  // namespace
}  // namespace rsc::client
