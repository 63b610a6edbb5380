// Issue 8, item 4: any client could stall a group. A heartbeat of an unknown member id with
// a made-up metadataVersion (2^62) claiming every shard got 409, yet recorded a correction
// round and blockers; repeated every 200 ms it kept honest members at REVOKE_PENDING and
// newcomers waiting indefinitely. Claimed versions are now proven by keyed lineage tokens
// (core/lineage_token.h), and what an unknown claimant may block is bounded and never
// renewed (decide.cc UnknownClaimMayBlock). These tests pin both, and that a real rollback
// (M2–M6) still works exactly as before.

#include <gtest/gtest.h>

#include "core/lineage_token.h"
#include "core_harness.h"

namespace rsc::testing {
namespace {

using S = HeartbeatStatus;

std::string Hex(const std::array<uint8_t, 20>& d) {
  std::string s;
  for (uint8_t b : d) s += fmt::format("{:02x}", b);
  return s;
}

// RFC 2202 known answers pin the HMAC-SHA1 built on Boost's SHA-1.
TEST(LineageToken, HmacSha1MatchesRfc2202) {
  EXPECT_EQ(Hex(HmacSha1(std::string(20, '\x0b'), "Hi There")),
            "b617318655057264e28bc0b6fb378c8ef146be00");
  EXPECT_EQ(Hex(HmacSha1("Jefe", "what do ya want for nothing?")),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
  EXPECT_EQ(Hex(HmacSha1(std::string(80, '\xaa'),
                         "Test Using Larger Than Block-Size Key - Hash Key First")),
            "aa4ae5e15272d00e95705637ce8a3b55ed402112");
}

TEST(LineageToken, VerifiesOnlyWhatItNames) {
  const GroupKey g{"orders", "billing"};
  const std::string t = IssueLineageToken("k0123456789abcdef", g, 41, "0123456789abcdefXYZ");
  EXPECT_EQ(t.size(), kLineageNonceLength + kLineageTagHexLength);
  EXPECT_TRUE(VerifyLineageToken("k0123456789abcdef", g, 41, t));
  EXPECT_FALSE(VerifyLineageToken("k0123456789abcdef", g, 42, t)) << "another version";
  EXPECT_FALSE(VerifyLineageToken("k0123456789abcdeF", g, 41, t)) << "another key";
  EXPECT_FALSE(VerifyLineageToken("k0123456789abcdef", GroupKey{"orders", "b"}, 41, t));
  std::string tampered = t;
  tampered[3] = tampered[3] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(VerifyLineageToken("k0123456789abcdef", g, 41, tampered)) << "another nonce";
  EXPECT_FALSE(VerifyLineageToken("k0123456789abcdef", g, 41, "short"));
  EXPECT_FALSE(VerifyLineageToken("k0123456789abcdef", g, 41, ""));
}

// Two honest members sharing 8 shards, past the key's first member lease.
struct Settled {
  CoreHarness h{8};
  FakeMember a{"A"}, b{"B"};
  Settled() {
    for (int i = 0; i < 4; ++i) {
      a.Observe(Ok(h.Heartbeat(a.Request())));
      b.Observe(Ok(h.Heartbeat(b.Request())));
    }
    for (int64_t t = 0; t <= h.meta().config.member_lease_ms; t += 1000) {  // past the
      h.Advance(1000);                                                      // young-key window
      Beat();
    }
  }
  void Beat() {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
};

HeartbeatRequest Attacker(const std::string& id, int64_t version, const std::string& lineage) {
  HeartbeatRequest r;
  r.member_id = MemberId(id);
  r.member_epoch = 1;
  r.metadata_version = version;
  r.lineage = lineage;
  r.owned_shards = {0, 1, 2, 3, 4, 5, 6, 7};
  return r;
}

// The issue's reproduction, in the core: a forged ahead version every 200 ms for 8 s.
TEST(UnprovenClaims, AnUnknownMemberWithAForgedVersionBlocksNothing) {
  Settled t;
  ASSERT_EQ(t.a.owned.size() + t.b.owned.size(), 8u);
  FakeMember c{"C"};  // a newcomer joins during the attack and must get its shards
  int ok = 0, beats = 0;
  for (int i = 0; i < 40; ++i) {
    const int writes = t.h.writes();
    auto r = t.h.Heartbeat(Attacker(fmt::format("x-{}", i % 3), int64_t{1} << 62, "forged"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kUnknownMemberId);
    EXPECT_EQ(t.h.writes(), writes) << "an unproven claim writes nothing";
    EXPECT_TRUE(t.h.LastEventsHave(EventKind::kUnprovenVersion));
    EXPECT_FALSE(t.h.LastEventsHave(EventKind::kRoundStarted));
    t.h.Advance(200);
    if (i == 5) c.Observe(Ok(t.h.Heartbeat(c.Request())));
    if (i % 5 == 0) {
      for (FakeMember* m : {&t.a, &t.b, &c}) {
        if (m->epoch == 0) continue;
        auto hb = Ok(t.h.Heartbeat(m->Request()));
        m->Observe(hb);
        ++beats;
        ok += hb.status == S::kOk ? 1 : 0;
      }
    }
  }
  EXPECT_FALSE(t.h.meta().round.has_value());
  EXPECT_FALSE(c.owned.empty()) << "the newcomer got its shards during the attack";
  EXPECT_EQ(t.a.owned.size() + t.b.owned.size() + c.owned.size(), 8u);
  EXPECT_GE(ok, beats - 4) << "honest members are answered OK (but for the handoff)";
}

// The same with a wrong lineage at a version inside the window (M8's divergence test).
TEST(UnprovenClaims, AWrongLineageInsideTheWindowIsNotADivergence) {
  Settled t;
  const int64_t v = t.h.meta().lineage_history.front().version.value();
  const int writes = t.h.writes();
  auto r = t.h.Heartbeat(Attacker("x", v, "0123456789abcdef0123456789abcdef"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(t.h.writes(), writes);
  EXPECT_FALSE(t.h.meta().round.has_value());
  t.Beat();
  EXPECT_EQ(Ok(t.h.Heartbeat(t.a.Request())).status, S::kOk);
}

// A known member's request with an unproven version is told the stored truth, and nothing
// in it counts: no round, no REVOKED report applied, not counted as synced.
TEST(UnprovenClaims, AKnownMemberIsToldTheTruthButChangesNothing) {
  Settled t;
  ASSERT_FALSE(t.a.owned.empty());
  const int32_t mine = t.a.owned.front();
  HeartbeatRequest forged = t.a.Request();
  forged.metadata_version = t.h.meta().version.value() + 3;
  forged.lineage = "0000000000000000ffffffffffffffff";
  std::erase(forged.owned_shards, mine);
  forged.revoking_shards = {{mine, RevokeState::kRevoked}};
  const int writes = t.h.writes();
  auto r = Ok(t.h.Heartbeat(forged));
  EXPECT_EQ(r.status, S::kSyncMetadata);
  EXPECT_EQ(r.metadata_version, t.h.meta().version.value());
  EXPECT_EQ(t.h.writes(), writes);
  EXPECT_EQ(t.h.meta().shards[static_cast<size_t>(mine)].owner, "A")
      << "a REVOKED report in an unproven request releases nothing";
  EXPECT_FALSE(t.h.meta().round.has_value());
  auto again = Ok(t.h.Heartbeat(forged));
  EXPECT_EQ(again, r) << "R3.3";
}

// A real rollback (M2–M6) is unchanged: the client's token was issued by the group, so its
// ahead version is evidence, a round starts, and the round ends once everyone synced.
TEST(ProvenClaims, ARealRollbackStillStartsARoundAndRecordsBlockers) {
  Settled t;
  const auto before = t.h.Save();
  FakeMember d{"D"};  // joins and reads under a state Redis will lose
  d.Observe(Ok(t.h.Heartbeat(d.Request())));
  for (int i = 0; i < 6; ++i) {
    t.Beat();
    d.Observe(Ok(t.h.Heartbeat(d.Request())));
  }
  ASSERT_FALSE(d.owned.empty());
  t.h.RollbackTo(before);
  auto r = t.h.Heartbeat(d.Request());  // unknown now, but its token proves the lost state
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownMemberId);
  ASSERT_TRUE(t.h.meta().round.has_value()) << "M2: a proven lost write starts a round";
  EXPECT_EQ(t.h.meta().round->blockers.size(), d.owned.size()) << "M5";
  EXPECT_TRUE(t.h.LastEventsHave(EventKind::kVersionRegression));
}

// An unknown claimant's blockers last one member lease and are never renewed by the same
// incarnation: the round ends even if it keeps claiming.
TEST(ProvenClaims, AnUnknownClaimantBlocksOnceForOneLease) {
  Settled t;
  const auto before = t.h.Save();
  FakeMember d{"D"};
  d.Observe(Ok(t.h.Heartbeat(d.Request())));
  for (int i = 0; i < 6; ++i) {
    t.Beat();
    d.Observe(Ok(t.h.Heartbeat(d.Request())));
  }
  const HeartbeatRequest stuck = d.Request();  // a buggy client that never drops its shards
  t.h.RollbackTo(before);
  (void)t.h.Heartbeat(stuck);
  ASSERT_TRUE(t.h.meta().round.has_value());
  const TimeMs started = t.h.meta().round->started_ms;
  const int64_t lease = t.h.meta().config.member_lease_ms;
  const Tombstone* tomb = t.h.meta().FindTombstone(MemberId("D"));
  ASSERT_NE(tomb, nullptr);
  EXPECT_TRUE(tomb->claimed);
  bool ended = false;
  for (int i = 0; i < 60 && !ended; ++i) {
    t.h.Advance(500);
    (void)t.h.Heartbeat(stuck);
    t.Beat();
    ended = !t.h.meta().round.has_value();
  }
  EXPECT_TRUE(ended) << "the claimant kept the round open";
  EXPECT_LE(t.h.now(), started + 2 * lease + 1000);
  EXPECT_EQ(Ok(t.h.Heartbeat(t.a.Request())).status, S::kOk);
}

// During a round, an unknown claimant whose version is ordinary lag may block only within
// the round's first member lease (any lease from the lost state has ended by then).
TEST(ProvenClaims, LaggingUnknownClaimsBlockOnlyEarlyInARound) {
  Settled t;
  FakeMember future = t.a;  // a genuine ahead claim by a known member starts the round
  future.version = t.h.meta().version.value() + 2;
  future.lineage =
      IssueLineageToken(t.h.meta().lineage_key, t.h.meta().key, future.version, "lostlostlostlost");
  (void)t.h.Heartbeat(future.Request());
  ASSERT_TRUE(t.h.meta().round.has_value());
  HeartbeatRequest early = Attacker("early", 0, "");
  early.owned_shards = {0};
  (void)t.h.Heartbeat(early);
  EXPECT_TRUE(t.h.LastEventsHave(EventKind::kBlockerRecorded));
  t.h.Advance(t.h.meta().config.member_lease_ms);
  HeartbeatRequest late = Attacker("late", 0, "");
  late.owned_shards = {1};
  (void)t.h.Heartbeat(late);
  EXPECT_FALSE(t.h.LastEventsHave(EventKind::kBlockerRecorded));
}

// For one member lease after a group gets its key, claims it cannot verify still count:
// a client may hold a token of an earlier incarnation of the group (lost and created again).
TEST(ProvenClaims, AYoungKeyTakesUnverifiableClaimsForOneLease) {
  CoreHarness h(2);
  HeartbeatRequest claim = Attacker("old-incarnation", 40, "0123456789abcdef0123456789abcdef");
  claim.owned_shards = {1};
  (void)h.Heartbeat(claim);
  ASSERT_TRUE(h.meta().round.has_value());
  EXPECT_EQ(h.meta().round->blockers.size(), 1u);
}

// A record from before keys accepts every claim (as before) and gets a key at its next write.
TEST(ProvenClaims, ARecordWithoutAKeyGetsOneAtItsNextWrite) {
  Settled t;
  t.h.mutable_meta().lineage_key.clear();
  HeartbeatRequest claim = Attacker("x", t.h.meta().version.value() + 9, "whatever");
  claim.owned_shards = {0};
  (void)t.h.Heartbeat(claim);
  ASSERT_TRUE(t.h.meta().round.has_value()) << "no key: the claim counts, as before keys";
  EXPECT_FALSE(t.h.meta().lineage_key.empty());
  EXPECT_EQ(t.h.meta().lineage_key_since_ms, t.h.now());
  EXPECT_TRUE(VerifyLineageToken(t.h.meta().lineage_key, t.h.meta().key, t.h.meta().version.value(),
                                 t.h.meta().lineage));
}

}  // namespace
}  // namespace rsc::testing
