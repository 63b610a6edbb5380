// Table-driven tests of the core's rules: fencing, rebalance timeout, expiry and
// idempotent retries (SPEC K1, K5, §4.4, I1, I2).

#include <gtest/gtest.h>

#include "core/codec.h"
#include "core/group_index.h"
#include "core_harness.h"

namespace rsc::testing {
namespace {

using S = HeartbeatStatus;

// Two members sharing 4 shards, both reading, steady.
struct Steady {
  CoreHarness h{4};
  FakeMember a{"A"}, b{"B"};
  Steady() {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
    for (int i = 0; i < 3; ++i) {
      a.Observe(Ok(h.Heartbeat(a.Request())));
      b.Observe(Ok(h.Heartbeat(b.Request())));
    }
    EXPECT_EQ(a.owned, V({0, 1}));
    EXPECT_EQ(b.owned, V({2, 3}));
  }
  void Beat(FakeMember& m) { m.Observe(Ok(h.Heartbeat(m.Request()))); }
};

// ── Fencing (K5, admin fence) ──

TEST(Fencing, FencedMemberGetsFencedEpochAndItsShardsWaitForItsLease) {
  Steady t;
  auto d = DecideFence(t.h.meta(), t.h.Live(), MemberId("A"), t.h.NextEnv());
  ASSERT_TRUE(d.response.ok());
  t.h.Apply(d);
  auto r = t.h.Heartbeat(t.a.Request());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kFencedMemberEpoch);
  // B is the target of A's shards but may not read them while A's lease may run.
  const TimeMs a_deadline = t.h.Live().deadline_ms.at("A");
  t.h.Advance(a_deadline - t.h.now() - 1);
  t.Beat(t.b);
  EXPECT_EQ(t.b.owned, V({2, 3})) << "K1: no handoff before the fenced member's lease ends";
  t.h.Advance(1);
  t.Beat(t.b);
  t.Beat(t.b);
  EXPECT_EQ(t.b.owned, V({0, 1, 2, 3}));
}

TEST(Fencing, FencedMemberRejoinsWithHigherEpochAndKeepsWhatItStillOwns) {
  Steady t;
  t.h.Apply(DecideFence(t.h.meta(), t.h.Live(), MemberId("A"), t.h.NextEnv()));
  const int64_t old_epoch = t.a.epoch;
  t.a.Forget();
  auto r = Ok(t.h.Heartbeat(t.a.Request()));  // rejoin
  EXPECT_GT(r.member_epoch, old_epoch);
  // The stale incarnation (old epoch) stays fenced.
  FakeMember zombie = t.a;
  zombie.epoch = old_epoch;
  auto z = t.h.Heartbeat(zombie.Request());
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.error().code, ErrorCode::kFencedMemberEpoch);
}

TEST(Fencing, FenceOfUnknownMemberIsUnknownMemberId) {
  Steady t;
  auto d = DecideFence(t.h.meta(), t.h.Live(), MemberId("nobody"), t.h.NextEnv());
  ASSERT_FALSE(d.response.ok());
  EXPECT_EQ(d.response.error().code, ErrorCode::kUnknownMemberId);
  EXPECT_FALSE(d.next.has_value());
}

// ── Epoch checks (K5) ──

struct EpochCase {
  const char* name;
  int64_t delta;  // request epoch relative to the recorded one
  bool ok;
};

class EpochTable : public ::testing::TestWithParam<EpochCase> {};

TEST_P(EpochTable, HeartbeatEpochIsChecked) {
  Steady t;
  // Raise A's epoch to 2 (fence + rejoin) so that "lower" is a real epoch, not a join.
  t.h.Apply(DecideFence(t.h.meta(), t.h.Live(), MemberId("A"), t.h.NextEnv()));
  t.a.Forget();
  t.Beat(t.a);
  ASSERT_EQ(t.a.epoch, 3);
  FakeMember m = t.a;
  m.epoch += GetParam().delta;
  auto r = t.h.Heartbeat(m.Request());
  EXPECT_EQ(r.ok(), GetParam().ok);
  if (!r.ok()) {
    EXPECT_EQ(r.error().code, ErrorCode::kFencedMemberEpoch);
  }
}

INSTANTIATE_TEST_SUITE_P(K5, EpochTable,
                         ::testing::Values(EpochCase{"Current", 0, true},
                                           EpochCase{"Lower", -1, false},
                                           EpochCase{"HigherWithoutRegression", 1, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// ── Rebalance timeout (§4.4) ──

TEST(RebalanceTimeout, MemberDrainingPastTimeoutIsFencedAndItsShardsMoveWhenItsLeaseEnds) {
  CoreHarness h(4);
  FakeMember a{"A"}, b{"B"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  b.Observe(Ok(h.Heartbeat(b.Request())));  // A must drain 2 and 3
  // A keeps heartbeating but never finishes draining: it reports 2, 3 as DRAINING.
  HeartbeatRequest stuck = a.Request();
  stuck.owned_shards = {0, 1};
  stuck.revoking_shards = {{2, RevokeState::kDraining}, {3, RevokeState::kDraining}};
  const TimeMs timeout = h.meta().config.rebalance_timeout_ms;
  const TimeMs start = h.now();
  TimeMs last_ok_sent = 0;  // every DRAIN answer renews A's assignment lease (C1)
  while (h.now() + 1000 < start + timeout) {
    h.Advance(1000);
    last_ok_sent = h.now();
    auto r = Ok(h.Heartbeat(stuck));
    ASSERT_EQ(r.status, S::kDrain);
    b.Observe(Ok(h.Heartbeat(b.Request())));
    ASSERT_TRUE(b.owned.empty()) << "before the timeout the shards stay A's (K1)";
  }
  h.Advance(start + timeout - h.now());
  auto fenced = h.Heartbeat(stuck);
  ASSERT_FALSE(fenced.ok());
  EXPECT_EQ(fenced.error().code, ErrorCode::kFencedMemberEpoch);
  EXPECT_TRUE(h.LastEventsHave(EventKind::kMemberFenced));
  // A's last DRAIN answer gave it a lease until last_ok_sent + assignmentLeaseMs: work on
  // its draining shards may run until then, so no shard moves before A expires (K2).
  const TimeMs a_lease_end = last_ok_sent + h.meta().config.assignment_lease_ms;
  const TimeMs a_expiry = last_ok_sent + h.meta().config.member_lease_ms;
  ASSERT_LT(a_lease_end, a_expiry);
  while (h.now() + 500 < a_expiry) {
    auto rb = Ok(h.Heartbeat(b.Request()));
    b.Observe(rb);
    EXPECT_TRUE(rb.assigned_shards.empty())
        << "a fenced member's shards wait for its lease to end (t=" << h.now() - start << ")";
    h.Advance(500);
  }
  h.Advance(a_expiry - h.now());
  h.Tick();
  EXPECT_TRUE(h.LastEventsHave(EventKind::kMemberExpired));
  b.Observe(Ok(h.Heartbeat(b.Request())));
  EXPECT_EQ(b.owned, V({0, 1, 2, 3}));
  EXPECT_GE(h.now(), a_lease_end);
}

TEST(RebalanceTimeout, FencedMemberRejoiningGetsAFreshDrainWindow) {
  CoreHarness h(4);
  FakeMember a{"A"}, b{"B"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  b.Observe(Ok(h.Heartbeat(b.Request())));
  HeartbeatRequest stuck = a.Request();
  stuck.owned_shards = {0, 1};
  stuck.revoking_shards = {{2, RevokeState::kDraining}, {3, RevokeState::kDraining}};
  const TimeMs fence_at = h.now() + h.meta().config.rebalance_timeout_ms;
  while (h.now() + 1000 < fence_at) {
    h.Advance(1000);
    ASSERT_EQ(Ok(h.Heartbeat(stuck)).status, S::kDrain);
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
  h.Advance(fence_at - h.now());
  ASSERT_FALSE(h.Heartbeat(stuck).ok());  // fenced
  // The process drops everything and rejoins under the same member id (C: FENCED).
  FakeMember again{"A"};
  auto joined = Ok(h.Heartbeat(again.Request()));
  again.Observe(joined);
  ASSERT_FALSE(joined.revoke_shards.empty()) << "old shards now B's: report them REVOKED";
  // A tick right after the rejoin must not fence the new incarnation for the old drain.
  h.Tick();
  EXPECT_FALSE(h.LastEventsHave(EventKind::kMemberFenced));
  // Its REVOKED reports release the drained shards at once.
  again.Observe(Ok(h.Heartbeat(again.Request())));
  b.Observe(Ok(h.Heartbeat(b.Request())));
  EXPECT_EQ(b.owned, joined.revoke_shards);
}

// ── Stuck shards: the rebalance timeout takes one shard (C8, SPEC §4.4 v2 per shard) ──

// A and B share 4 shards; A never finishes draining 2 and 3 (a stuck handler) but declares
// `shard-lease`, so at the timeout its draining shards are taken from it alone.
struct StuckDrain {
  CoreHarness h{4};
  FakeMember a{"A"}, b{"B"};
  HeartbeatRequest stuck;
  TimeMs start = 0;
  TimeMs last_grant_sent = 0;  // send time of the last answer that renewed A's lease on 2, 3
  explicit StuckDrain(bool feature = true) {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));  // A must drain 2 and 3
    stuck = a.Request();
    stuck.owned_shards = {0, 1};
    stuck.revoking_shards = {{2, RevokeState::kDraining}, {3, RevokeState::kDraining}};
    if (feature) stuck.features = {kFeatureShardLease};
    start = h.now();
  }
  TimeMs timeout() const { return h.meta().config.rebalance_timeout_ms; }
  TimeMs lease() const { return h.meta().config.assignment_lease_ms; }
  // Heartbeats of A (stuck) and B every second until just before the timeout.
  void DrainUntilTimeout() {
    while (h.now() + 1000 < start + timeout()) {
      h.Advance(1000);
      last_grant_sent = h.now();
      ASSERT_EQ(Ok(h.Heartbeat(stuck)).status, S::kDrain);
      b.Observe(Ok(h.Heartbeat(b.Request())));
      ASSERT_TRUE(b.owned.empty());
    }
    h.Advance(start + timeout() - h.now());
  }
};

TEST(StuckShards, AtTheTimeoutTheShardsAloneAreTakenAndTheMemberKeepsItsEpochAndTheRest) {
  StuckDrain t;
  t.DrainUntilTimeout();
  const int64_t epoch = t.h.meta().FindMember(MemberId("A"))->epoch.value();
  const HeartbeatResponse r = Ok(t.h.Heartbeat(t.stuck));
  EXPECT_TRUE(t.h.LastEventsHave(EventKind::kShardTaken));
  EXPECT_FALSE(t.h.LastEventsHave(EventKind::kMemberFenced));
  EXPECT_EQ(r.member_epoch, epoch) << "not fenced";
  EXPECT_EQ(r.assigned_shards, V({0, 1})) << "keeps its other shards";
  EXPECT_EQ(r.taken_shards, V({2, 3}));
  EXPECT_EQ(r.revoke_shards, V({2, 3})) << "K4: a shard it claims is still listed";
  for (int32_t s : {2, 3}) {
    const ShardState& sh = t.h.meta().shards[static_cast<size_t>(s)];
    EXPECT_EQ(sh.owner, "A") << "taken, not released yet";
    EXPECT_EQ(sh.taken_ms, t.h.now());
    EXPECT_EQ(sh.release_at_ms, t.h.now() + t.h.meta().config.member_lease_ms)
        << "memberLeaseMs ≥ assignmentLeaseMs + 1 s, also of a lease granted before a PATCH";
  }
}

TEST(StuckShards, ATakenShardMovesWhenEveryGrantOnItHasEndedNotBefore) {
  StuckDrain t;
  t.DrainUntilTimeout();
  Ok(t.h.Heartbeat(t.stuck));  // the take
  const TimeMs release_at = t.h.meta().shards[2].release_at_ms;
  ASSERT_GT(release_at, t.last_grant_sent + t.lease()) << "after A's last lease on them";
  while (t.h.now() + 500 < release_at) {
    t.h.Advance(500);
    const HeartbeatResponse ra = Ok(t.h.Heartbeat(t.stuck));
    EXPECT_EQ(ra.taken_shards, V({2, 3})) << "every later answer says so";
    t.b.Observe(Ok(t.h.Heartbeat(t.b.Request())));
    ASSERT_TRUE(t.b.owned.empty()) << "not before releaseAtMs (t=" << t.h.now() << ")";
  }
  t.h.Advance(release_at - t.h.now());
  t.h.Tick();
  EXPECT_TRUE(t.h.LastEventsHave(EventKind::kShardReleased));
  t.b.Observe(Ok(t.h.Heartbeat(t.b.Request())));
  t.b.Observe(Ok(t.h.Heartbeat(t.b.Request())));
  EXPECT_EQ(t.b.owned, V({2, 3}));
  EXPECT_EQ(t.h.meta().shards[2].taken_ms, 0);
  // A, still stuck, claims them DRAINING against B's ownership: listed to revoke (K4), not
  // taken (no longer its), and it keeps shards 0 and 1.
  const HeartbeatResponse ra = Ok(t.h.Heartbeat(t.stuck));
  EXPECT_EQ(ra.assigned_shards, V({0, 1}));
  EXPECT_EQ(ra.revoke_shards, V({2, 3}));
  EXPECT_TRUE(ra.taken_shards.empty());
}

TEST(StuckShards, AReportedRevokedReleasesATakenShardAtOnce) {
  StuckDrain t;
  t.DrainUntilTimeout();
  Ok(t.h.Heartbeat(t.stuck));  // the take
  t.h.Advance(100);
  HeartbeatRequest done = t.stuck;  // its handler returned: both drained
  done.revoking_shards = {{2, RevokeState::kRevoked}, {3, RevokeState::kRevoked}};
  done.metadata_version = t.h.meta().version.value();
  done.lineage = t.h.meta().lineage;
  Ok(t.h.Heartbeat(done));
  t.b.Observe(Ok(t.h.Heartbeat(t.b.Request())));
  t.b.Observe(Ok(t.h.Heartbeat(t.b.Request())));
  EXPECT_EQ(t.b.owned, V({2, 3}));
  EXPECT_LT(t.h.now(), t.start + t.timeout() + t.lease());
}

TEST(StuckShards, AClientWithoutTheFeatureIsFencedAsInV1) {
  StuckDrain t(/*feature=*/false);
  t.DrainUntilTimeout();
  auto r = t.h.Heartbeat(t.stuck);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kFencedMemberEpoch);
  EXPECT_FALSE(t.h.LastEventsHave(EventKind::kShardTaken));
  EXPECT_EQ(t.h.meta().shards[2].taken_ms, 0);
}

TEST(StuckShards, ATakenShardHandedBackStaysTakenUntilItsReleaseThenGoesToItsTarget) {
  StuckDrain t;
  t.DrainUntilTimeout();
  Ok(t.h.Heartbeat(t.stuck));  // the take
  // B leaves: every target is A again, but 2 and 3 stay taken (never granted again early).
  HeartbeatRequest leave = t.b.Request();
  leave.member_epoch = -1;
  Ok(t.h.Heartbeat(leave));
  HeartbeatResponse ra = Ok(t.h.Heartbeat(t.stuck));
  EXPECT_EQ(ra.taken_shards, V({2, 3}));
  EXPECT_EQ(t.h.meta().shards[2].target, "A");
  const TimeMs release_at = t.h.meta().shards[2].release_at_ms;
  // Nothing is revoking any more: the release is the only thing due, and the coordinator's
  // index (core/group_index.h) must say so, or a steady heartbeat would skip the release.
  const GroupIndex index = BuildGroupIndex(t.h.meta());
  EXPECT_EQ(index.next_due_ms, release_at);
  EXPECT_EQ(index.For(t.h.meta(), t.h.meta().members[0])->taken, V({2, 3}));
  while (t.h.now() + 1000 < release_at) {  // A heartbeats on (it is alive, only stuck)
    t.h.Advance(1000);
    EXPECT_EQ(Ok(t.h.Heartbeat(t.stuck)).taken_shards, V({2, 3}));
  }
  t.h.Advance(release_at - t.h.now());
  ra = Ok(t.h.Heartbeat(t.stuck));
  EXPECT_TRUE(ra.taken_shards.empty());
  EXPECT_EQ(t.h.meta().shards[2].owner, "A") << "released to its target, the same member";
  EXPECT_EQ(t.h.meta().shards[2].taken_ms, 0);
}

TEST(StuckShards, TheFeatureSurvivesTheCodecAndATakeIsAVersionedWrite) {
  StuckDrain t;
  t.DrainUntilTimeout();
  const int64_t before = t.h.meta().version.value();
  Ok(t.h.Heartbeat(t.stuck));
  EXPECT_GT(t.h.meta().version.value(), before);
  const std::string json = EncodeAggregate(t.h.meta());
  Result<GroupMetadata> back = DecodeAggregate(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, t.h.meta());
  EXPECT_TRUE(back->FindMember(MemberId("A"))->shard_lease);
  EXPECT_NE(json.find("\"takenMs\""), std::string::npos);
}

// ── Expiry (§4.4, K1b, K2) ──

struct ExpiryCase {
  const char* name;
  int64_t silent_ms;  // how long A stays silent after its last heartbeat
  bool expired;
};

class ExpiryTable : public ::testing::TestWithParam<ExpiryCase> {};

TEST_P(ExpiryTable, MemberExpiresExactlyAtItsDeadline) {
  Steady t;
  t.Beat(t.a);
  t.h.Advance(GetParam().silent_ms);
  t.h.Tick();
  EXPECT_EQ(t.h.meta().FindMember(MemberId("A")) == nullptr, GetParam().expired);
  if (GetParam().expired) {
    // K2: by the time the coordinator expires A, A's own assignment lease has ended.
    EXPECT_GE(GetParam().silent_ms, t.h.meta().config.assignment_lease_ms);
  }
}

INSTANTIATE_TEST_SUITE_P(Lease, ExpiryTable,
                         ::testing::Values(ExpiryCase{"WellInside", 5000, false},
                                           ExpiryCase{"OneMsBefore", 9999, false},
                                           ExpiryCase{"AtDeadline", 10000, true},
                                           ExpiryCase{"Long", 60000, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Expiry, ExpiredMemberHeartbeatIsUnknownAndRejoinRaisesEpoch) {
  Steady t;
  const int64_t epoch = t.a.epoch;
  for (int i = 0; i < 20; ++i) {  // A silent for 20 s, B keeps heartbeating
    t.h.Advance(1000);
    t.Beat(t.b);
  }
  auto r = t.h.Heartbeat(t.a.Request());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownMemberId);
  t.a.Forget();
  auto j = Ok(t.h.Heartbeat(t.a.Request()));
  EXPECT_EQ(j.member_epoch, epoch + 1) << "K5: epoch raised on rejoin after expiry";
}

// ── Idempotent retries (I1, I2) ──

struct RetryCase {
  const char* name;
  std::function<HeartbeatRequest(Steady&)> make;
};

class RetryTable : public ::testing::TestWithParam<RetryCase> {};

TEST_P(RetryTable, RepeatedRequestGetsSameAnswerAndWritesNothing) {
  Steady t;
  const HeartbeatRequest req = GetParam().make(t);
  auto first = t.h.Heartbeat(req);
  const int writes = t.h.writes();
  const auto version = t.h.meta().version;
  auto second = t.h.Heartbeat(req);
  ASSERT_EQ(first.ok(), second.ok());
  if (first.ok()) {
    EXPECT_EQ(*first, *second);
  } else {
    EXPECT_EQ(first.error().code, second.error().code);
  }
  EXPECT_EQ(t.h.writes(), writes);
  EXPECT_EQ(t.h.meta().version, version);
}

INSTANTIATE_TEST_SUITE_P(
    I1, RetryTable,
    ::testing::Values(
        RetryCase{"SteadyHeartbeat", [](Steady& t) { return t.a.Request(); }},
        RetryCase{"Join", [](Steady&) { return FakeMember{"C"}.Request(); }},
        RetryCase{"DuplicateRevokedForReleasedShard",
                  [](Steady& t) {
                    auto r = t.a.Request();
                    r.revoking_shards = {{3, RevokeState::kRevoked}};
                    return r;
                  }},
        RetryCase{"ClaimOfAnotherMembersShard",
                  [](Steady& t) {
                    auto r = t.a.Request();
                    r.owned_shards = {0, 1, 2};
                    return r;
                  }},
        RetryCase{"Leave",
                  [](Steady& t) {
                    auto r = t.a.Request();
                    r.member_epoch = -1;
                    r.owned_shards.clear();
                    r.revoking_shards = {{0, RevokeState::kRevoked}, {1, RevokeState::kRevoked}};
                    return r;
                  }},
        RetryCase{"UnknownMember",
                  [](Steady&) {
                    FakeMember g{"ghost"};
                    g.epoch = 4;
                    return g.Request();
                  }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Idempotence, ClaimOutsideRoundIsAnsweredWithRevokeButNotRecorded) {
  Steady t;
  auto r = t.a.Request();
  r.owned_shards = {0, 1, 2};
  auto resp = Ok(t.h.Heartbeat(r));
  EXPECT_EQ(resp.status, S::kDrain);
  EXPECT_EQ(resp.revoke_shards, V({2})) << "K4";
  EXPECT_EQ(t.h.meta().shards[2].owner, "B");
}

}  // namespace
}  // namespace rsc::testing

namespace rsc::testing {
namespace {

// Regression (found in review): a leave carrying a stale epoch is fenced like a heartbeat.
TEST(Leave, StaleEpochLeaveIsFencedCurrentEpochLeaveDrainsThenLeaves) {
  Steady t;
  t.h.Apply(DecideFence(t.h.meta(), t.h.Live(), MemberId("A"), t.h.NextEnv()));
  t.a.Forget();
  t.Beat(t.a);  // rejoined with a higher epoch
  HeartbeatRequest zombie = t.a.Request();
  zombie.member_epoch = -1;
  zombie.leave_epoch = 1;
  auto r = t.h.Heartbeat(zombie);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kFencedMemberEpoch);
  EXPECT_FALSE(t.h.meta().FindMember(MemberId("A"))->leaving);
  HeartbeatRequest leave = t.a.Request();
  leave.member_epoch = -1;
  leave.leave_epoch = t.a.epoch;
  auto ok = Ok(t.h.Heartbeat(leave));
  EXPECT_TRUE(t.h.meta().FindMember(MemberId("A")) == nullptr || ok.status == S::kDrain);
}

}  // namespace
}  // namespace rsc::testing

namespace rsc::testing {
namespace {

// Found by CoreProperties (seed 5444126114175033182): a request listing a shard both owned
// and REVOKED let the report release a shard its reporter still read. The HTTP layer
// rejects such a request; the core refuses it too, and writes nothing.
TEST(RequestShape, ShardBothOwnedAndRevokingIsRefusedWithoutAWrite) {
  CoreHarness h(4);
  FakeMember a{"A"};
  a.Observe(Ok(h.Heartbeat(a.Request())));
  a.Observe(Ok(h.Heartbeat(a.Request())));
  ASSERT_FALSE(a.owned.empty());
  HeartbeatRequest bad = a.Request();
  bad.revoking_shards = {{a.owned[0], RevokeState::kRevoked}};
  const auto d = DecideHeartbeat(h.meta(), h.Live(), bad, Env{h.now(), "t"});
  ASSERT_FALSE(d.response.ok());
  EXPECT_EQ(d.response.error().code, ErrorCode::kInvalidRequest);
  EXPECT_FALSE(d.next.has_value());
  EXPECT_TRUE(d.liveness.set.empty());
}

}  // namespace
}  // namespace rsc::testing
