// SPEC §10.1 priority scenarios, driven through the pure coordinator core. Each test name
// says which scenario it is. Client-side halves of 2, 8 and 10 live with the client cores.

#include <gtest/gtest.h>

#include "core_harness.h"

namespace rsc::testing {
namespace {

using S = HeartbeatStatus;

// Two members A and B sharing 4 shards after A owned them all.
struct Rebalanced {
  CoreHarness h{4};
  FakeMember a{"A"}, b{"B"};
  HeartbeatResponse a_drain;

  Rebalanced() {
    a.Observe(Ok(h.Heartbeat(a.Request())));  // join → all 4
    a.Observe(Ok(h.Heartbeat(a.Request())));  // OK → starts reading
    EXPECT_EQ(a.owned, V({0, 1, 2, 3}));
    b.Observe(Ok(h.Heartbeat(b.Request())));  // join → target split, pending
  }
};

TEST(Scenario01, DrainWrittenResponseLostNextHeartbeatGetsSameDrain) {
  Rebalanced t;
  const auto req = t.a.Request();
  const int writes = t.h.writes();
  auto first = Ok(t.h.Heartbeat(req));  // response lost
  EXPECT_EQ(first.status, S::kDrain);
  EXPECT_EQ(first.revoke_shards, V({2, 3}));
  auto again = Ok(t.h.Heartbeat(req));
  EXPECT_EQ(again, first) << "a repeated heartbeat must get the same recorded DRAIN (R3.3)";
  EXPECT_EQ(t.h.writes(), writes) << "the DRAIN was recorded at B's join; heartbeats write nothing";
}

TEST(Scenario02, CoordinatorDownAfterDrainShardStaysRevokingInRedis) {
  Rebalanced t;
  auto drain = Ok(t.h.Heartbeat(t.a.Request()));
  ASSERT_EQ(drain.status, S::kDrain);
  // Coordinator unavailable for a while (no requests), then back: nothing moved forward,
  // the shard is still A's to release and B still only has it pending.
  t.h.Advance(5000);
  auto b = Ok(t.h.Heartbeat(t.b.Request()));
  EXPECT_EQ(b.status, S::kRevokePending);
  EXPECT_EQ(b.pending_shards, V({2, 3}));
  EXPECT_TRUE(b.assigned_shards.empty());
  // A that (wrongly) still reports 2 and 3 as owned is told again to drain them.
  auto again = Ok(t.h.Heartbeat(t.a.Request()));
  EXPECT_EQ(again.status, S::kDrain);
  EXPECT_EQ(again.revoke_shards, V({2, 3}));
}

TEST(Scenario03, RevokedWrittenResponseLostNewOwnerGetsShardNextHeartbeat) {
  Rebalanced t;
  t.a.Observe(Ok(t.h.Heartbeat(t.a.Request())));  // DRAIN → drains instantly
  auto revoked_req = t.a.Request();
  ASSERT_EQ(revoked_req.revoking_shards.size(), 2u);
  (void)Ok(t.h.Heartbeat(revoked_req));  // REVOKED written, response lost
  auto b = Ok(t.h.Heartbeat(t.b.Request()));
  EXPECT_EQ(b.status, S::kOk);
  EXPECT_EQ(b.assigned_shards, V({2, 3}));
  // A's retry of the lost request is harmless (I2) and A is no longer told to drain.
  auto retry = Ok(t.h.Heartbeat(revoked_req));
  EXPECT_EQ(retry.status, S::kOk);
  EXPECT_EQ(retry.assigned_shards, V({0, 1}));
}

// A REVOKED report answers one revoke, not a later one of the same shard. The request
// that carries it can reach a coordinator long after it was sent (delayed, or held by a
// paused coordinator); by then the member may own the shard again, read it, and be told
// to drain it anew. Simulator seed 458260817779326665: the late report released the new
// revoke and the shard went to C while A still read it (S1).
TEST(StaleRevoke, LateReportOfAnEarlierRevokeReleasesNothing) {
  Rebalanced t;
  t.a.Observe(Ok(t.h.Heartbeat(t.a.Request())));  // DRAIN 2,3 → drained at once
  const HeartbeatRequest late = t.a.Request();    // REVOKED 2,3: this copy arrives late
  ASSERT_EQ(late.revoking_shards.size(), 2u);
  // B leaves before A's report arrives: the targets go back to A, which reads 2 and 3 again.
  HeartbeatRequest leave = t.b.Request();
  leave.member_epoch = -1;
  (void)Ok(t.h.Heartbeat(leave));
  t.a.Observe(Ok(t.h.Heartbeat(t.a.Request())));
  t.a.Observe(Ok(t.h.Heartbeat(t.a.Request())));
  ASSERT_EQ(t.a.owned, V({0, 1, 2, 3}));
  // C joins: a new revoke of 2 and 3; A is told to drain them but has not finished.
  FakeMember c{"C"};
  c.Observe(Ok(t.h.Heartbeat(c.Request())));
  auto drain = Ok(t.h.Heartbeat(t.a.Request()));
  ASSERT_EQ(drain.status, S::kDrain);
  ASSERT_EQ(drain.revoke_shards, V({2, 3}));
  // The late copy of A's first report arrives now.
  (void)t.h.Heartbeat(late);
  EXPECT_TRUE(t.h.LastEventsHave(EventKind::kStaleRevokeIgnored));
  EXPECT_EQ(t.h.meta().shards[2].owner, "A") << "a report older than this revoke released it";
  EXPECT_EQ(t.h.meta().shards[3].owner, "A");
  auto c_view = Ok(t.h.Heartbeat(c.Request()));
  EXPECT_TRUE(c_view.assigned_shards.empty()) << "C was handed a shard A still reads";
  // A's report of the current revoke releases them.
  t.a.Observe(drain);
  (void)Ok(t.h.Heartbeat(t.a.Request()));
  EXPECT_TRUE(t.h.meta().shards[2].owner.empty() || t.h.meta().shards[2].owner == "C");
  c.Observe(Ok(t.h.Heartbeat(c.Request())));
  EXPECT_EQ(c.Request().owned_shards, V({2, 3}));
}

TEST(Scenario04, PreviousOwnerExpiresWhileDrainingNewOwnerGetsShardAfterExpiry) {
  Rebalanced t;
  (void)Ok(t.h.Heartbeat(t.a.Request()));  // A gets DRAIN, then goes silent
  const TimeMs a_deadline = t.h.Live().deadline_ms.at("A");
  // Before A's lease ends B keeps waiting, however often it asks.
  while (t.h.now() + 1000 < a_deadline) {
    t.h.Advance(1000);
    t.b.Observe(Ok(t.h.Heartbeat(t.b.Request())));
    ASSERT_TRUE(t.b.owned.empty()) << "B must not get a shard A may still read (K1)";
  }
  t.h.Advance(a_deadline - t.h.now());
  auto b = Ok(t.h.Heartbeat(t.b.Request()));
  EXPECT_EQ(b.status, S::kOk);
  EXPECT_EQ(b.assigned_shards, V({0, 1, 2, 3}));
  EXPECT_TRUE(t.h.meta().FindTombstone(MemberId("A")) != nullptr);
}

TEST(Scenario05, MetadataKeyDeletedFailsClosedNoRebuildFromHeartbeats) {
  // The core cannot be asked to build a group from a heartbeat: its only sources of
  // metadata are DecideCreate (validated admin input) and DecideRestore (an export).
  // What a heartbeat can do is bounded by the stored state it is given; here a heartbeat
  // for a member of a group that has no such member never creates one with shards.
  CoreHarness h(2);
  FakeMember ghost{"ghost"};
  ghost.epoch = 3;
  ghost.owned = {0, 1};
  auto r = h.Heartbeat(ghost.Request());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownMemberId);
  EXPECT_TRUE(h.meta().members.empty());
  // The key-deletion half (store answers METADATA_MISSING / GROUP_NOT_FOUND and nothing
  // recreates the key) is tested against real Redis in tests/redis and tests/integration.
}

TEST(Scenario06, ClientSawVersionNRedisBackToNMinus1NextHeartbeatGetsSync) {
  CoreHarness h(2);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  auto before = h.Save();  // Redis at N-1
  FakeMember b{"B"};
  b.Observe(Ok(h.Heartbeat(b.Request())));  // writes N
  a.Observe(Ok(h.Heartbeat(a.Request())));  // A observes N
  ASSERT_EQ(a.version, h.meta().version.value());
  h.RollbackTo(before);  // failover loses N
  auto r = Ok(h.Heartbeat(a.Request()));
  EXPECT_EQ(r.status, S::kSyncMetadata);
  EXPECT_TRUE(h.LastEventsHave(EventKind::kVersionRegression));
  EXPECT_TRUE(h.meta().round.has_value());
  // M2/M10: never bumped to the client's number; the answer is the stored one.
  EXPECT_EQ(r.metadata_version, h.meta().version.value());
  EXPECT_EQ(r.lineage, h.meta().lineage);
}

// Regression (simulator seed 8): a leave (heartbeat with epoch -1) whose version Redis lost
// was answered "left" with status OK. M2 applies to it like to any heartbeat: the answer
// is SYNC_METADATA with the stored version, and a member's leave records a correction
// round. Also when Redis lost the member altogether (an unknown member's leave).
TEST(Scenario06, LeaveWithALostVersionIsAnsweredSyncMetadata) {
  for (const bool known : {true, false}) {
    SCOPED_TRACE(known ? "the member is in the restored state" : "Redis lost the member too");
    CoreHarness h(2);
    FakeMember a{"A"}, b{"B"};
    b.Observe(Ok(h.Heartbeat(b.Request())));
    auto before_a = h.Save();
    a.Observe(Ok(h.Heartbeat(a.Request())));
    auto with_a = h.Save();
    b.Observe(Ok(h.Heartbeat(b.Request())));  // DRAIN: B releases a shard for A
    b.Observe(Ok(h.Heartbeat(b.Request())));  // REVOKED: written
    a.Observe(Ok(h.Heartbeat(a.Request())));  // A sees that version
    ASSERT_GT(a.version, with_a.meta.version.value());
    h.RollbackTo(known ? with_a : before_a);  // a failover loses what A saw last
    HeartbeatRequest leave = a.Request();
    leave.member_epoch = -1;
    for (int32_t s : leave.owned_shards)
      leave.revoking_shards.push_back({s, RevokeState::kRevoked});
    leave.owned_shards.clear();
    auto r = Ok(h.Heartbeat(leave));
    EXPECT_EQ(r.status, S::kSyncMetadata);
    EXPECT_EQ(r.metadata_version, h.meta().version.value()) << "the stored truth (M10)";
    EXPECT_EQ(r.lineage, h.meta().lineage);
    EXPECT_TRUE(h.LastEventsHave(EventKind::kVersionRegression));
    if (known) {
      EXPECT_TRUE(h.meta().round.has_value()) << "M2: a correction round is recorded";
    }
  }
}

TEST(Scenario07, SyncMetadataLostNextHighVersionHeartbeatGetsSameSync) {
  CoreHarness h(2);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  auto before = h.Save();
  FakeMember b{"B"};
  b.Observe(Ok(h.Heartbeat(b.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  h.RollbackTo(before);
  const auto req = a.Request();
  auto first = Ok(h.Heartbeat(req));  // lost
  const int writes = h.writes();
  auto second = Ok(h.Heartbeat(req));
  EXPECT_EQ(second, first);
  EXPECT_EQ(second.status, S::kSyncMetadata);
  EXPECT_EQ(h.writes(), writes) << "the round is recorded once";
}

// A request from before a correction round, arriving late (delayed, or held by a paused
// coordinator), is the heartbeat whose write ends the round. Its answer derives from the
// state after that write — no round — so it is OK, and a retry decided on that state gets
// the same answer (R3.3, S6). It used to be SYNC_METADATA (judged before the write) while
// the retry got OK (simulator seed 4460115182493809583).
TEST(Scenario07, LateRequestWhoseWriteEndsTheRoundIsAnsweredLikeItsRetry) {
  CoreHarness h(4);
  FakeMember a{"A"}, b{"B"};
  for (int i = 0; i < 4; ++i) {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
  const HeartbeatRequest late = a.Request();  // sent now, arrives after the round
  FakeMember future = a;
  future.version = h.meta().version.value() + 5;  // a version Redis lost: starts a round
  (void)h.Heartbeat(future.Request());
  ASSERT_TRUE(h.meta().round.has_value());
  const TimeMs started = h.meta().round->started_ms;
  const int64_t lease = h.meta().config.member_lease_ms;
  // Both sync, and keep heartbeating until just before the round may end.
  while (h.now() + 1000 < started + lease) {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
    h.Advance(1000);
  }
  ASSERT_TRUE(h.meta().round.has_value());
  ASSERT_EQ(h.meta().round->synced.size(), 2u);
  h.Advance(started + lease - h.now());
  const int writes = h.writes();
  auto first = Ok(h.Heartbeat(late));
  ASSERT_EQ(h.writes(), writes + 1);
  ASSERT_TRUE(h.LastEventsHave(EventKind::kRoundEnded)) << "the late request ends the round";
  EXPECT_EQ(first.status, S::kOk) << "no round in the state this answer derives from";
  auto retry = Ok(h.Heartbeat(late));
  EXPECT_EQ(h.writes(), writes + 1) << "the retry writes nothing";
  EXPECT_EQ(retry, first) << "a retry on the same state must get the same answer";
}

// A member expires while its process still drains a shard it abandoned; the process rejoins
// (memberEpoch 0) reporting that shard DRAINING. The join's own write hands it the free shard
// (it is the target), so the answer — derived from that write — must not list it as a K4
// conflict: a retry decided on the written state (where the member owns it) gets no DRAIN
// either (R3.3, S6). It used to be DRAIN then OK (simulator seed 4437484523665089528).
TEST(Idempotence, RejoinStillDrainingAShardItIsHandedAgainIsAnsweredLikeItsRetry) {
  CoreHarness h(2);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  ASSERT_EQ(a.owned, V({0, 1}));
  h.Advance(h.meta().config.member_lease_ms + 1);
  h.Tick();
  ASSERT_TRUE(h.LastEventsHave(EventKind::kMemberExpired));
  // The process learns it lost the group; shard 1 still has a handler running.
  HeartbeatRequest join = a.Request();
  join.member_epoch = 0;
  join.owned_shards.clear();
  join.revoking_shards = {{1, RevokeState::kDraining}};
  const int writes = h.writes();
  auto first = Ok(h.Heartbeat(join));
  ASSERT_EQ(h.writes(), writes + 1);
  ASSERT_EQ(h.meta().shards[1].owner, "A") << "the join hands the free shard to its target";
  auto retry = Ok(h.Heartbeat(join));
  EXPECT_EQ(h.writes(), writes + 1) << "the retry writes nothing";
  EXPECT_EQ(retry, first) << "a retry on the same state must get the same answer";
  EXPECT_TRUE(first.revoke_shards.empty());
  EXPECT_EQ(first.assigned_shards, V({0, 1}));
}

TEST(Scenario08, AfterSyncDrainingRemovedShardsGetsRevokePendingUntilBlockersClear) {
  // A owned {0,1}; Redis loses B's join and the resulting move; A re-synced, while a
  // member C that Redis forgot still claims shard 1.
  CoreHarness h(2);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  ASSERT_EQ(a.owned, V({0, 1}));
  auto before = h.Save();
  FakeMember c{"C"};
  c.Observe(Ok(h.Heartbeat(c.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));  // DRAIN 1
  a.Observe(Ok(h.Heartbeat(a.Request())));  // REVOKED 1 → C owns 1
  c.Observe(Ok(h.Heartbeat(c.Request())));  // C reads 1
  ASSERT_EQ(c.owned, V({1}));
  h.RollbackTo(before);  // Redis: A owns {0,1}, no C
  // C (unknown now) heartbeats first: it is told to rejoin and shard 1 is blocked.
  auto cr = h.Heartbeat(c.Request());
  ASSERT_FALSE(cr.ok());
  EXPECT_EQ(cr.error().code, ErrorCode::kUnknownMemberId);
  ASSERT_TRUE(h.meta().round.has_value());
  ASSERT_EQ(h.meta().round->blockers.size(), 1u);
  // A (stored owner of 0 and 1, but it had released 1) syncs.
  auto s = Ok(h.Heartbeat(a.Request()));
  EXPECT_EQ(s.status, S::kSyncMetadata);
  a.Observe(s);
  auto p = Ok(h.Heartbeat(a.Request()));
  EXPECT_EQ(p.status, S::kRevokePending) << "round still blocked by C's claim on shard 1";
  // C's claim ends only when its lease must have ended; then the round ends: OK.
  const TimeMs until = h.meta().round->blockers[0].until_ms;
  while (h.now() < until) {
    h.Advance(1000);
    auto r = Ok(h.Heartbeat(a.Request()));
    if (h.now() < until) {
      ASSERT_EQ(r.status, S::kRevokePending) << "at " << h.now();
    }
    a.Observe(r);
  }
  auto ok = Ok(h.Heartbeat(a.Request()));
  EXPECT_EQ(ok.status, S::kOk);
  EXPECT_FALSE(h.meta().round.has_value());
}

TEST(Scenario09, ConcurrentStaleRevokesDuringRoundOnlyMatchingOnesApply) {
  CoreHarness h(4);
  FakeMember a{"A"}, b{"B"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  b.Observe(Ok(h.Heartbeat(b.Request())));
  for (int i = 0; i < 3; ++i) {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
  ASSERT_EQ(a.owned, V({0, 1}));
  ASSERT_EQ(b.owned, V({2, 3}));
  // Start a round: a client claims a version from a lost future.
  FakeMember future = a;
  future.version = h.meta().version.value() + 5;
  (void)Ok(h.Heartbeat(future.Request()));
  ASSERT_TRUE(h.meta().round.has_value());
  // Stale REVOKED reports: B says it revoked shard 0 (A's) and A says it revoked 3 (B's).
  HeartbeatRequest stale_b = b.Request();
  stale_b.revoking_shards = {{0, RevokeState::kRevoked}};
  HeartbeatRequest stale_a = a.Request();
  stale_a.revoking_shards = {{3, RevokeState::kRevoked}};
  (void)h.Heartbeat(stale_b);
  EXPECT_TRUE(h.LastEventsHave(EventKind::kStaleRevokeIgnored));
  (void)h.Heartbeat(stale_a);
  EXPECT_TRUE(h.LastEventsHave(EventKind::kStaleRevokeIgnored));
  EXPECT_EQ(h.meta().shards[0].owner, "A");
  EXPECT_EQ(h.meta().shards[3].owner, "B");
  // A blocker-matching revoke does apply: B claims shard 1 (A's), then revokes it.
  HeartbeatRequest claim = b.Request();
  claim.owned_shards = {1, 2, 3};
  auto r = Ok(h.Heartbeat(claim));
  EXPECT_EQ(r.revoke_shards, V({1}));
  ASSERT_EQ(h.meta().round->blockers.size(), 1u);
  // A report made before B learnt of the blocker (an older version) is stale...
  HeartbeatRequest early = b.Request();
  early.revoking_shards = {{1, RevokeState::kRevoked}};
  (void)h.Heartbeat(early);
  EXPECT_TRUE(h.LastEventsHave(EventKind::kStaleRevokeIgnored));
  EXPECT_EQ(h.meta().round->blockers.size(), 1u) << "a report older than the blocker";
  // ...the one B makes after the answer that recorded it releases it.
  HeartbeatRequest rel = b.Request();
  rel.metadata_version = r.metadata_version;
  rel.lineage = r.lineage;
  rel.revoking_shards = {{1, RevokeState::kRevoked}};
  (void)h.Heartbeat(rel);
  EXPECT_TRUE(h.meta().round->blockers.empty());
  EXPECT_EQ(h.meta().shards[1].owner, "A") << "a blocker release never moves stored ownership";
}

TEST(Scenario10, ProducerRoutingDuringOutageServerSide) {
  // Server half: routing is a pure view with the lease the producer must honour; the
  // fail-closed half is the producer core's (client issue).
  CoreHarness h(3);
  auto d = DecideRouting(h.meta(), 0, "", h.now());
  ASSERT_TRUE(d.response.ok());
  EXPECT_EQ(d.response->routing_lease_ms, 30000);
  EXPECT_EQ(d.response->refresh_interval_ms, 5000);
  EXPECT_FALSE(d.response->sync);
  EXPECT_FALSE(d.next.has_value()) << "routing never writes (I3)";
  auto ahead = DecideRouting(h.meta(), h.meta().version.value() + 1, "x", h.now());
  EXPECT_TRUE(ahead.response->sync);
}

TEST(Scenario11, OldCoordinatorCrashesNewOneContinuesRebalanceFromRedis) {
  // "Coordinator" here is just whoever calls the pure core: a crash before the write
  // leaves Redis unchanged; a new process reads the same metadata and continues.
  Rebalanced t;
  t.a.Observe(Ok(t.h.Heartbeat(t.a.Request())));  // DRAIN → drained
  const auto revoked = t.a.Request();
  auto lost = t.h.HeartbeatCrashBeforeWrite(revoked);  // old coordinator dies pre-CAS
  EXPECT_TRUE(lost.ok());
  EXPECT_EQ(t.h.meta().shards[2].owner, "A") << "nothing was written";
  // The new coordinator gets A's retry and continues the handoff from Redis alone.
  auto r = Ok(t.h.Heartbeat(revoked));
  EXPECT_EQ(t.h.meta().shards[2].owner, "B");
  EXPECT_EQ(r.status, S::kOk);
  auto b = Ok(t.h.Heartbeat(t.b.Request()));
  EXPECT_EQ(b.assigned_shards, V({2, 3}));
}

}  // namespace
}  // namespace rsc::testing

namespace rsc::testing {
namespace {

// Regression (found in review): a static member replaced during a correction round must
// not hand its blockers to the new process, which never read those shards.
TEST(StaticMembership, ReplacedMembersBlockersExpireWithItsLease) {
  CoreHarness h(2);
  FakeMember a{"a1", "inst-a"}, b{"b1"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  b.Observe(Ok(h.Heartbeat(b.Request())));
  for (int i = 0; i < 3; ++i) {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
  ASSERT_EQ(a.owned.size(), 1u);
  // a1 claims b's shard with a version from a lost future: round + blocker for a1.
  FakeMember claim = a;
  claim.version += 10;
  claim.owned.push_back(b.owned[0]);
  (void)Ok(h.Heartbeat(claim.Request()));
  ASSERT_TRUE(h.meta().round);
  ASSERT_EQ(h.meta().round->blockers.size(), 1u);
  // a1's process restarts as a2 with the same instance id.
  FakeMember a2{"a2", "inst-a"};
  a2.Observe(Ok(h.Heartbeat(a2.Request())));
  ASSERT_EQ(h.meta().round->blockers.size(), 1u);
  EXPECT_EQ(h.meta().round->blockers[0].member.str(), "a1");
  EXPECT_GT(h.meta().round->blockers[0].until_ms, 0);
  // Everyone keeps heartbeating; the round ends once a1's lease must have ended.
  HeartbeatStatus last = HeartbeatStatus::kRevokePending;
  for (int i = 0; i < 30 && last != HeartbeatStatus::kOk; ++i) {
    h.Advance(500);
    b.Observe(Ok(h.Heartbeat(b.Request())));
    auto r = Ok(h.Heartbeat(a2.Request()));
    a2.Observe(r);
    last = r.status;
  }
  EXPECT_EQ(last, HeartbeatStatus::kOk) << "the round must not stall on the replaced member";
  EXPECT_FALSE(h.meta().round.has_value());
}

TEST(StaticMembership, RestartWithSameInstanceTakesPlaceWithoutRebalance) {
  CoreHarness h(4);
  FakeMember a{"a1", "inst-a"}, b{"b1", "inst-b"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  b.Observe(Ok(h.Heartbeat(b.Request())));
  for (int i = 0; i < 3; ++i) {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
  const auto epoch_before = h.meta().assignment_epoch;
  const auto a_shards = a.owned;
  FakeMember a2{"a2", "inst-a"};
  auto r = Ok(h.Heartbeat(a2.Request()));
  EXPECT_EQ(r.status, HeartbeatStatus::kOk);
  EXPECT_EQ(r.assigned_shards, a_shards) << "same place, same shards";
  EXPECT_EQ(h.meta().assignment_epoch, epoch_before) << "no rebalance (K5 static membership)";
  EXPECT_GT(r.member_epoch, a.epoch);
  // The old incarnation is fenced.
  auto old = h.Heartbeat(a.Request());
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().code, ErrorCode::kFencedMemberEpoch);
}

// Regression (found in review): PATCH must respect leases granted under the old config.
TEST(AdminPatch, ConfigShrinkBeyondOutstandingLeasesIsRejected) {
  CoreHarness h(2);
  PatchGroupRequest p;
  GroupConfig c;
  c.member_lease_ms = 4000;
  c.assignment_lease_ms = 3000;
  c.heartbeat_interval_ms = 1000;
  c.rebalance_timeout_ms = 4000;
  p.config = c;
  auto d = DecidePatch(h.meta(), h.Live(), p, h.NextEnv());
  ASSERT_FALSE(d.response.ok());
  EXPECT_EQ(d.response.error().code, ErrorCode::kInvalidRequest);
  // One step that keeps memberLeaseMs >= old assignment lease + margin is accepted.
  c.member_lease_ms = 9000;
  c.rebalance_timeout_ms = 10000;
  p.config = c;
  auto ok = DecidePatch(h.meta(), h.Live(), p, h.NextEnv());
  EXPECT_TRUE(ok.response.ok()) << ok.response.error().message;
}

// SPEC RS1: the shard count changes only by resharding the stream; the refusal names the
// endpoint and changes nothing.
TEST(AdminPatch, ShardCountIsRefusedNamingTheReshardEndpoint) {
  CoreHarness h(2);
  FakeMember a{"a"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  for (int32_t n : {1, 2, 5}) {
    PatchGroupRequest p;
    p.shard_count = n;
    auto d = DecidePatch(h.meta(), h.Live(), p, h.NextEnv());
    EXPECT_FALSE(d.next.has_value());
    ASSERT_FALSE(d.response.ok());
    EXPECT_EQ(d.response.error().code, ErrorCode::kInvalidRequest);
    EXPECT_NE(d.response.error().message.find("/reshard"), std::string::npos)
        << d.response.error().message;
    EXPECT_FALSE(CheckPatchRequest(h.meta().key, p).ok());
  }
  EXPECT_EQ(Ok(h.Heartbeat(a.Request())).assigned_shards, V({0, 1}));
}

// Regression (found in review): restore validates names, ids and config like create.
TEST(Restore, RejectsInvalidNamesAndConfigAndStartsARound) {
  CoreHarness h(2);
  GroupMetadata bad = h.meta();
  bad.key.group = "bad name}";
  EXPECT_FALSE(DecideRestore(bad, h.NextEnv()).ok());
  GroupMetadata bad_cfg = h.meta();
  bad_cfg.config.assignment_lease_ms = bad_cfg.config.member_lease_ms;
  EXPECT_FALSE(DecideRestore(bad_cfg, h.NextEnv()).ok());
  auto good = DecideRestore(h.meta(), h.NextEnv());
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->round.has_value());
  EXPECT_EQ(good->lineage_history.size(), 1u);
}

// Simulator seed 8431395707449856820 (S1): the metadata key was lost right after a member's
// lease was renewed, and the group was created again with no export; a new member joined and
// got OK with every shard while the lost group's member still read under its lease. A create
// over a lost key starts a correction round: nobody gets OK (or a shard) for one member
// lease, which outlasts any assignment lease the lost group granted (K2).
TEST(Scenario05, CreateOverALostKeyHoldsEveryGrantForOneMemberLease) {
  CoreHarness h(2);
  const CreateGroupRequest req{"orders", "billing", 2, h.meta().config};
  auto fresh = DecideCreate(req, h.NextEnv());
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->round.has_value()) << "a plain create has no round";
  auto again = DecideCreate(req, h.NextEnv(), CreateOver::kLostKey);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->round.has_value());
  h.mutable_meta() = *again;

  FakeMember c{"C"};
  const TimeMs created = h.now();
  const int64_t lease = h.meta().config.member_lease_ms;
  while (h.now() < created + lease) {
    auto r = Ok(h.Heartbeat(c.Request()));
    EXPECT_NE(r.status, S::kOk) << "OK at " << h.now() - created << " ms after the create";
    c.Observe(r);
    EXPECT_TRUE(c.owned.empty()) << "reads a shard at " << h.now() - created << " ms";
    h.Advance(lease / 8);
  }
  h.Advance(1);
  c.Observe(Ok(h.Heartbeat(c.Request())));
  auto r = Ok(h.Heartbeat(c.Request()));
  EXPECT_EQ(r.status, S::kOk);
  EXPECT_EQ(r.assigned_shards, V({0, 1}));
}

// Issue 8: a restore at metadataVersion 2^63-2 (and the last lineage entry to match) was
// accepted; the next decision overflowed the version and aborted the process. A restore must
// leave room on every counter, and say which field does not (400, never 503).
TEST(Restore, RefusesCountersWithoutHeadroomNamingTheField) {
  CoreHarness h(2);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  const int64_t cases[] = {INT64_MAX - 1, kMaxCounter, kMaxCounter - kRestoreHeadroom + 1};
  for (int64_t v : cases) {
    GroupMetadata doc = h.meta();
    doc.version = MetadataVersion(v);
    doc.lineage_history = {LineageEntry{doc.version, doc.lineage}};
    auto r = DecideRestore(doc, h.NextEnv());
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest) << v;
    EXPECT_NE(r.error().message.find("metadataVersion"), std::string::npos) << r.error().message;
  }
  GroupMetadata epochs = h.meta();
  epochs.members[0].epoch = MemberEpoch(kMaxCounter - 1);
  auto r = DecideRestore(epochs, h.NextEnv());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest);
  EXPECT_NE(r.error().message.find("members[0].epoch"), std::string::npos) << r.error().message;
  GroupMetadata at_room = h.meta();
  at_room.version = MetadataVersion(kMaxCounter - kRestoreHeadroom);
  at_room.lineage_history = {LineageEntry{at_room.version, at_room.lineage}};
  EXPECT_TRUE(DecideRestore(at_room, h.NextEnv()).ok()) << "the bound itself is accepted";
}

// A drain window in a restored document never starts in the future.
TEST(Restore, ClampsADrainWindowFromTheFuture) {
  Rebalanced t;
  (void)Ok(t.h.Heartbeat(t.a.Request()));  // A drains 2, 3
  GroupMetadata doc = t.h.meta();
  for (ShardState& sh : doc.shards) {
    if (sh.revoke_since_ms != 0) sh.revoke_since_ms = kMaxTimeMs;
  }
  auto r = DecideRestore(doc, t.h.NextEnv());
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const ShardState& sh : r->shards) EXPECT_LE(sh.revoke_since_ms, t.h.now());
}

// Issue 8: one group's state that a decision cannot continue (here every counter exhausted)
// must fail that group closed — an error answer, nothing written, an event for the log and
// metric — and never abort the process that serves the other groups.
TEST(FailClosed, ADecisionThatWouldBreakAnInvariantWritesNothingAndAnswersUnreadable) {
  CoreHarness h(2);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  GroupMetadata& m = h.mutable_meta();
  m.version = MetadataVersion(kMaxCounter);
  m.lineage_history = {LineageEntry{m.version, m.lineage}};
  ASSERT_TRUE(CheckInvariants(m).ok()) << "a record at the limit still loads";
  FakeMember b{"B"};
  auto d = DecideHeartbeat(h.meta(), h.Live(), b.Request(), h.NextEnv());  // a join writes
  EXPECT_FALSE(d.next.has_value());
  EXPECT_TRUE(d.liveness.empty());
  ASSERT_FALSE(d.response.ok());
  EXPECT_EQ(d.response.error().code, ErrorCode::kMetadataUnreadable);
  EXPECT_NE(d.response.error().message.find("orders:billing"), std::string::npos);
  bool flagged = false;
  for (const Event& e : d.events) flagged = flagged || e.kind == EventKind::kInvariantViolation;
  EXPECT_TRUE(flagged);
  // The tick that would end a round, expire a member or fence fails closed the same way.
  h.Advance(h.meta().config.member_lease_ms + 1);
  auto tick = DecideTick(h.meta(), h.Live(), h.NextEnv());
  EXPECT_FALSE(tick.next.has_value());
  ASSERT_FALSE(tick.response.ok());
  EXPECT_EQ(tick.response.error().code, ErrorCode::kMetadataUnreadable);
  PatchGroupRequest config;
  config.config = h.meta().config;
  auto patch = DecidePatch(h.meta(), h.Live(), config, h.NextEnv());
  EXPECT_FALSE(patch.next.has_value());
  EXPECT_FALSE(patch.response.ok());
}

}  // namespace
}  // namespace rsc::testing
