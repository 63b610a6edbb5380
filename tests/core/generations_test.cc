// SPEC §13.2 RS1–RS5 in the pure core: layout generations (reshard, activate, retire) and a
// group adopting them — children wait for every parent to be completed for the group,
// completed shards belong to no one, a reopened parent drains its running children.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

#include "core/layout.h"
#include "core/layout_codec.h"
#include "tests/core/core_harness.h"

namespace rsc {
namespace {

// "id:STATE" of every shard in a group view (SPEC O1), in view order.
std::vector<std::string> States(const GroupView& v) {
  std::vector<std::string> out;
  for (const ShardView& s : v.shards) out.push_back(std::to_string(s.id) + ":" + s.state);
  return out;
}

using testing::CoreHarness;
using testing::FakeMember;
using testing::Ok;

std::string Key(int32_t id) { return ShardStreamKey("orders", id); }
const SlotPlacement kOneServer{};

Layout Stream(int32_t n) {
  Layout l = DeriveGeneration0("orders", n, GroupConfig{}, {}, {}, "t0").value();
  l.groups = {"billing"};
  return l;
}

TEST(Reshard, ANewGenerationIsPreparingWithFreshIds) {
  const Layout l = Stream(4);
  auto grown = DecideReshard(l, 8, kOneServer, "t1");
  ASSERT_TRUE(grown.ok()) << grown.error().message;
  ASSERT_EQ(grown->generations.size(), 2u);
  const Generation& g1 = grown->generations[1];
  EXPECT_EQ(g1.generation, 1);
  EXPECT_EQ(g1.state, GenerationState::kPreparing);
  ASSERT_EQ(g1.shards.size(), 8u);
  EXPECT_EQ(g1.shards.front().id, 4);  // D2: 4 → 8 gives ids 4..11
  EXPECT_EQ(g1.shards.back().id, 11);
  EXPECT_EQ(g1.shards.back().stream, Key(11));
  EXPECT_EQ(grown->Active()->generation, 0) << "producers keep writing generation 0";
  EXPECT_EQ(grown->version, l.version + 1);

  // Refusals, as a table.
  struct Row {
    const Layout* layout;
    int32_t count;
    ErrorCode code;
  } rows[] = {
      {&l, 0, ErrorCode::kInvalidRequest},
      {&l, kMaxShards + 1, ErrorCode::kInvalidRequest},
      {&*grown, 2, ErrorCode::kReshardInProgress},  // generation 1 still PREPARING
  };
  for (const Row& r : rows) {
    auto d = DecideReshard(*r.layout, r.count, kOneServer, "t");
    ASSERT_FALSE(d.ok()) << r.count;
    EXPECT_EQ(d.error().code, r.code) << d.error().message;
  }
}

TEST(Reshard, ActivateSealsTheOldAndRetireNeedsASealedGeneration) {
  Layout l = *DecideReshard(Stream(4), 2, kOneServer, "t1");
  EXPECT_FALSE(DecideRetire(l, 0, 1000, "t").has_value()) << "an ACTIVE generation never retires";
  l = *DecideActivate(l, "t2");
  EXPECT_EQ(l.generations[0].state, GenerationState::kSealed);
  EXPECT_EQ(l.generations[1].state, GenerationState::kActive);
  EXPECT_FALSE(DecideActivate(l, "t3").has_value()) << "nothing PREPARING";
  // Shrink below the previous count: ids continue above every id used (4, 5 → 6..8).
  l = *DecideReshard(l, 3, kOneServer, "t4");
  EXPECT_EQ(l.generations[2].shards.front().id, 6);
  l = *DecideActivate(l, "t5");
  EXPECT_EQ(l.generations[1].state, GenerationState::kSealed);
  EXPECT_FALSE(DecideRetire(l, 1, 1000, "t6").has_value()) << "generation 0 must retire first";
  auto retired = DecideRetire(l, 0, 1000, "t6");
  ASSERT_TRUE(retired.has_value());
  EXPECT_EQ(retired->generations[0].state, GenerationState::kRetired);
  EXPECT_TRUE(CheckLayoutInvariants(*retired).ok());
  EXPECT_FALSE(DecideRetire(*retired, 0, 1000, "t7").has_value());
  // Out-of-order retirement is refused by the invariants (RETIRED after SEALED).
  Layout bad = l;
  bad.generations[1].state = GenerationState::kRetired;
  EXPECT_FALSE(CheckLayoutInvariants(bad).ok());
  // A layout round-trips with every state.
  Layout four = *DecideReshard(*retired, 5, kOneServer, "t8");
  auto back = DecodeLayout(EncodeLayout(four));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, four);
}

// RS5: a retired generation's keys go after the retention; the layout then drops it. A
// retirement without a recorded time (an older coordinator's) is stamped first, so the
// retention is never cut short.
TEST(Reshard, RetiredGenerationsAreDroppedAfterTheRetention) {
  Layout l = *DecideActivate(*DecideReshard(Stream(4), 2, kOneServer, "t1"), "t2");
  l = *DecideActivate(*DecideReshard(l, 3, kOneServer, "t3"), "t4");
  EXPECT_FALSE(DecideRetiredWork(l, 5000, 100, "t").drop.has_value()) << "nothing retired";
  l = *DecideRetire(l, 0, 1000, "t5");
  EXPECT_EQ(l.generations[0].retired_ms, 1000);
  RetiredWork early = DecideRetiredWork(l, 1099, 100, "t");
  EXPECT_FALSE(early.stamp.has_value());
  EXPECT_FALSE(early.drop.has_value()) << "dropped before the retention passed";
  RetiredWork due = DecideRetiredWork(l, 1100, 100, "t");
  ASSERT_TRUE(due.drop.has_value());
  EXPECT_EQ(due.drop->generation, 0);
  EXPECT_FALSE(DecideDropRetired(l, 1, "t").has_value()) << "generation 1 is not retired";
  std::optional<Layout> dropped = DecideDropRetired(l, 0, "t6");
  ASSERT_TRUE(dropped.has_value());
  ASSERT_EQ(dropped->generations.size(), 2u);
  EXPECT_EQ(dropped->generations[0].generation, 1);
  EXPECT_GT(dropped->version, l.version);
  EXPECT_TRUE(CheckLayoutInvariants(*dropped).ok());
  // D2 without it: the next generation's ids are still above every id used.
  Layout grown = *DecideReshard(*dropped, 2, kOneServer, "t8");
  EXPECT_EQ(grown.generations.back().shards.front().id, 9);  // 0-3, 4-5, 6-8 were used
  // The ACTIVE generation is never dropped.
  Layout one = Stream(2);
  EXPECT_FALSE(DecideDropRetired(one, 0, "t").has_value());

  // An unstamped retirement is stamped now, and counts from then.
  Layout legacy = l;
  legacy.generations[0].retired_ms = 0;
  RetiredWork stamp = DecideRetiredWork(legacy, 50'000, 100, "t9");
  ASSERT_TRUE(stamp.stamp.has_value());
  EXPECT_FALSE(stamp.drop.has_value());
  EXPECT_EQ(stamp.stamp->generations[0].retired_ms, 50'000);
  EXPECT_FALSE(DecideRetiredWork(*stamp.stamp, 50'099, 100, "t").drop.has_value());
  // The time is stored with the layout, and only a RETIRED generation may have one.
  auto back = DecodeLayout(EncodeLayout(l));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->generations[0].retired_ms, 1000);
  std::string doc = EncodeLayout(l);
  const size_t at = doc.find(R"("state":"SEALED")");
  ASSERT_NE(at, std::string::npos) << doc;
  doc.insert(at, R"("retiredAtMs":5,)");
  EXPECT_FALSE(DecodeLayout(doc).ok()) << doc;
}

// RS2's routing-lease wait: when a reshard wrote a generation PREPARING is stored with the
// layout (the wait is measured from it by whichever coordinator's pass comes next), cleared
// once it is ACTIVE, and only a PREPARING generation may have one.
TEST(Reshard, ThePreparingTimeIsStoredAndClearedOnActivation) {
  Layout l = *DecideReshard(Stream(2), 3, kOneServer, "t1");
  EXPECT_EQ(l.generations.back().prepared_ms, 0) << "DecideReshard is pure: the shell stamps it";
  l.generations.back().prepared_ms = 1'900'000'000'123;
  l.generations.back().routing_wait_ms = 31'000;
  auto back = DecodeLayout(EncodeLayout(l));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->generations.back().prepared_ms, 1'900'000'000'123);
  EXPECT_EQ(back->generations.back().routing_wait_ms, 31'000);
  EXPECT_NE(EncodeLayout(l).find(R"("preparedAtMs":1900000000123)"), std::string::npos);

  std::optional<Layout> active = DecideActivate(l, "t2");
  ASSERT_TRUE(active.has_value());
  EXPECT_EQ(active->generations.back().state, GenerationState::kActive);
  EXPECT_EQ(active->generations.back().prepared_ms, 0);
  EXPECT_EQ(active->generations.back().routing_wait_ms, 0);
  EXPECT_EQ(EncodeLayout(*active).find("preparedAtMs"), std::string::npos);
  EXPECT_EQ(EncodeLayout(*active).find("routingWaitMs"), std::string::npos);

  std::string doc = EncodeLayout(*active);
  const size_t at = doc.find(R"("state":"ACTIVE")");
  ASSERT_NE(at, std::string::npos) << doc;
  doc.insert(at, R"("preparedAtMs":5,)");
  EXPECT_FALSE(DecodeLayout(doc).ok()) << doc;
  std::string negative = EncodeLayout(l);
  const size_t p = negative.find(R"("preparedAtMs":1900000000123)");
  ASSERT_NE(p, std::string::npos);
  negative.replace(p, std::string(R"("preparedAtMs":1900000000123)").size(),
                   R"("preparedAtMs":-1)");
  EXPECT_FALSE(DecodeLayout(negative).ok()) << negative;
  std::string too_long = EncodeLayout(l);
  const size_t w = too_long.find(R"("routingWaitMs":31000)");
  ASSERT_NE(w, std::string::npos) << too_long;
  too_long.replace(w, std::string(R"("routingWaitMs":31000)").size(),
                   R"("routingWaitMs":999999999999)");
  EXPECT_FALSE(DecodeLayout(too_long).ok()) << too_long;
}

// RS2's routing-lease wait as DecideRoutingWait judges it.
TEST(Reshard, TheRoutingWaitEndsAfterTheRecordedLeaseAndABadClockRestampsIt) {
  Layout l = *DecideReshard(Stream(2), 3, kOneServer, "t1");
  Generation& g = l.generations.back();
  EXPECT_EQ(DecideRoutingWait(l, g, 5), RoutingWait::kReady) << "rolled forward: no wait";
  g.prepared_ms = 100'000;
  g.routing_wait_ms = 31'000;
  EXPECT_EQ(DecideRoutingWait(l, g, 100'000), RoutingWait::kWaiting);
  EXPECT_EQ(DecideRoutingWait(l, g, 130'999), RoutingWait::kWaiting);
  EXPECT_EQ(DecideRoutingWait(l, g, 131'000), RoutingWait::kReady);
  // Within the margin behind: just waits longer. Beyond it: this clock went back, or the
  // stamping one ran ahead — restamped with this clock, not waited for indefinitely.
  EXPECT_EQ(DecideRoutingWait(l, g, 100'000 - kPrepareMarginMs), RoutingWait::kWaiting);
  EXPECT_EQ(DecideRoutingWait(l, g, 100'000 - kPrepareMarginMs - 1), RoutingWait::kRestamp);
  Layout restamped = DecideRestampPrepared(l, 7'000, "t2");
  EXPECT_EQ(restamped.generations.back().prepared_ms, 7'000);
  EXPECT_EQ(restamped.generations.back().routing_wait_ms, 31'000);
  EXPECT_GT(restamped.version, l.version);
  EXPECT_EQ(restamped.lineage, "t2");
  EXPECT_TRUE(CheckLayoutInvariants(restamped).ok());
  // A layout from before routingWaitMs waits the stream's lease; a huge one saturates.
  g.routing_wait_ms = 0;
  l.routing_lease_ms = 20'000;
  EXPECT_EQ(DecideRoutingWait(l, g, 120'999), RoutingWait::kWaiting);
  EXPECT_EQ(DecideRoutingWait(l, g, 121'000), RoutingWait::kReady);
  l.routing_lease_ms = INT64_MAX;
  EXPECT_EQ(DecideRoutingWait(l, g, 100'000 + kMaxRoutingWaitMs), RoutingWait::kReady);
  // Only a PREPARING generation carries a wait; a wait comes with its start.
  Layout bad = *DecideActivate(l, "t3");
  bad.generations.back().routing_wait_ms = 5;
  EXPECT_FALSE(CheckLayoutInvariants(bad).ok());
  Layout no_start = l;
  no_start.generations.back().prepared_ms = 0;
  no_start.generations.back().routing_wait_ms = 5;
  EXPECT_FALSE(CheckLayoutInvariants(no_start).ok());
  no_start.generations.back().routing_wait_ms = kMaxRoutingWaitMs + 1;
  no_start.generations.back().prepared_ms = 1;
  EXPECT_FALSE(CheckLayoutInvariants(no_start).ok());
}

TEST(Reshard, UnretiredGenerationsAreCapped) {
  Layout l = Stream(1);
  for (size_t i = 1; i < kMaxUnretiredGenerations; ++i) {
    l = *DecideActivate(*DecideReshard(l, 1, kOneServer, "t"), "t");
  }
  auto refused = DecideReshard(l, 1, kOneServer, "t");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kReshardInProgress);
  EXPECT_NE(refused.error().message.find("not yet retired"), std::string::npos);
  l = *DecideRetire(l, 0, 1000, "t");
  EXPECT_TRUE(DecideReshard(l, 1, kOneServer, "t").ok());
}

// A group driven through a shrink 4 → 2 with two members.
class GroupReshard : public ::testing::Test {
 protected:
  GroupReshard() : h_(4) {}

  void Beat(FakeMember& m) { m.Observe(Ok(h_.Heartbeat(m.Request()))); }
  void Settle() {
    for (int i = 0; i < 6; ++i) {
      Beat(a_);
      Beat(b_);
    }
  }
  void LayoutTick(const Layout& l, int64_t revision, std::vector<ShardCompletion> done = {}) {
    auto d = DecideLayoutTick(h_.meta(), h_.Live(), l, revision, done, h_.NextEnv());
    ASSERT_TRUE(d.response.ok()) << d.response.error().message;
    h_.Apply(d);
    ASSERT_TRUE(CheckInvariants(h_.meta()).ok()) << CheckInvariants(h_.meta()).error().message;
  }
  std::vector<int32_t> Owned(const std::string& id) const {
    std::vector<int32_t> out;
    for (const ShardState& s : h_.meta().shards) {
      if (s.owner == id && s.target == id) out.push_back(s.id);
    }
    return out;
  }

  CoreHarness h_;
  FakeMember a_{"a"}, b_{"b"};
};

TEST_F(GroupReshard, ChildrenWaitForEveryParentThenRun) {
  Settle();
  ASSERT_EQ(Owned("a").size() + Owned("b").size(), 4u);
  Layout l = *DecideReshard(Stream(4), 2, kOneServer, "t1");
  LayoutTick(l, 2);  // PREPARING adopted: children exist, waiting
  EXPECT_EQ(h_.meta().shards.size(), 6u);
  EXPECT_EQ(h_.meta().active_generation, 0);
  EXPECT_EQ(h_.meta().shard_count, 4);
  Settle();
  HeartbeatResponse ra = Ok(h_.Heartbeat(a_.Request()));
  HeartbeatResponse rb = Ok(h_.Heartbeat(b_.Request()));
  std::set<int32_t> pending(ra.pending_shards.begin(), ra.pending_shards.end());
  pending.insert(rb.pending_shards.begin(), rb.pending_shards.end());
  EXPECT_EQ(pending, (std::set<int32_t>{4, 5})) << "waiting children are shown as pending";
  EXPECT_EQ(ra.assigned_shards.size() + rb.assigned_shards.size(), 4u) << "parents keep running";

  l = *DecideActivate(l, "t2");
  LayoutTick(l, 3);
  EXPECT_EQ(h_.meta().active_generation, 1);
  EXPECT_EQ(h_.meta().shard_count, 2);
  auto routing = DecideRouting(h_.meta(), 0, "", h_.now()).response;
  ASSERT_TRUE(routing.ok());
  ASSERT_EQ(routing->shards.size(), 2u);
  EXPECT_EQ(routing->shards[0].id, 4);
  EXPECT_EQ(routing->generation, 1);
  EXPECT_EQ(routing->layout_revision, 3);

  // Three parents complete: the children still wait (all of generation 0 is the parent set).
  LayoutTick(l, 3, {{0, true}, {1, true}, {2, true}});
  Settle();
  EXPECT_TRUE(h_.meta().FindShard(0)->completed);
  EXPECT_TRUE(h_.meta().FindShard(0)->owner.empty());
  EXPECT_TRUE(h_.meta().FindShard(4)->owner.empty()) << "a child ran before parent 3 completed";
  EXPECT_TRUE(h_.meta().FindShard(5)->owner.empty());
  // The group view shows what the children wait for (docs/protocol.md 7.2).
  {
    const GroupView v = MakeGroupView(h_.meta(), StoreRevision(1), h_.Live(), h_.now());
    const std::vector<GroupGenerationView> want = {{0, {0, 1, 2, 3}, {0, 1, 2}, {}},
                                                   {1, {4, 5}, {}, {3}}};
    EXPECT_EQ(v.generations, want);
    // O1: every shard with its state, oldest generation first.
    EXPECT_EQ(States(v),
              (std::vector<std::string>{"0:COMPLETED", "1:COMPLETED", "2:COMPLETED", "3:ASSIGNED",
                                        "4:WAITING_PARENTS", "5:WAITING_PARENTS"}));
    EXPECT_EQ(v.shards[4].waiting_for, (std::vector<int32_t>{3}));
    EXPECT_EQ(v.shards[4].generation, 1);
    EXPECT_FALSE(v.shards[4].lag.has_value()) << "the core reads no Redis";
  }
  // A completion of an ACTIVE shard or of an unknown one is ignored.
  LayoutTick(l, 3, {{4, true}, {99, true}});
  EXPECT_FALSE(h_.meta().FindShard(4)->completed);

  LayoutTick(l, 3, {{3, true}});
  Settle();
  EXPECT_TRUE(MakeGroupView(h_.meta(), StoreRevision(1), h_.Live(), h_.now())
                  .generations.back()
                  .waiting_for.empty());
  EXPECT_EQ(Owned("a").size() + Owned("b").size(), 2u);
  EXPECT_FALSE(h_.meta().FindShard(4)->owner.empty());
  EXPECT_FALSE(h_.meta().FindShard(5)->owner.empty());
  EXPECT_EQ(h_.meta().FindShard(4)->generation, 1);

  // A parent found incomplete again (a failover lost its acks): the children drain.
  const std::string child_owner = h_.meta().FindShard(4)->owner;
  LayoutTick(l, 3, {{3, false}});
  EXPECT_EQ(h_.meta().FindShard(4)->owner, child_owner);
  {
    // Its owner still reads it: DRAINING, and waitingFor says why.
    const GroupView v = MakeGroupView(h_.meta(), StoreRevision(1), h_.Live(), h_.now());
    EXPECT_EQ(States(v)[4], "4:DRAINING");
    EXPECT_EQ(v.shards[4].waiting_for, (std::vector<int32_t>{3}));
  }
  EXPECT_TRUE(h_.meta().FindShard(4)->target.empty()) << "a running child was not drained";
  Settle();
  EXPECT_TRUE(h_.meta().FindShard(4)->owner.empty());
  EXPECT_FALSE(h_.meta().FindShard(3)->owner.empty()) << "the reopened parent is read again";
  LayoutTick(l, 3, {{3, true}});
  Settle();
  EXPECT_FALSE(h_.meta().FindShard(4)->owner.empty());

  // Retirement removes the parents from the group.
  l = *DecideRetire(l, 0, 1000, "t3");
  LayoutTick(l, 4);
  ASSERT_EQ(h_.meta().shards.size(), 2u);
  EXPECT_EQ(h_.meta().shards[0].id, 4);
}

// A completed parent stays its reader's until it reports REVOKED: a reopen (a failover lost
// the acks, or a stale completion check) must not hand it to a second reader while the first
// one's grants run (simulator seed 9204068676931625525: the owner was cleared at completion,
// its revoke answers kept renewing its lease, and the reopen gave the shard to the other
// member: S1).
TEST_F(GroupReshard, ACompletedParentIsDrainedNotDroppedSoAReopenWaitsForItsReader) {
  Settle();
  Layout l = *DecideActivate(*DecideReshard(Stream(4), 2, kOneServer, "t1"), "t2");
  LayoutTick(l, 3);
  Settle();
  const std::string reader = h_.meta().FindShard(0)->owner;
  ASSERT_FALSE(reader.empty());
  FakeMember& r = reader == "a" ? a_ : b_;
  FakeMember& other = reader == "a" ? b_ : a_;
  LayoutTick(l, 3, {{0, true}});
  const ShardState* s0 = h_.meta().FindShard(0);
  EXPECT_TRUE(s0->completed);
  EXPECT_EQ(s0->owner, reader) << "its reader still holds it: told to drain, not dropped";
  EXPECT_TRUE(s0->target.empty());
  HeartbeatResponse rr = Ok(h_.Heartbeat(r.Request()));
  EXPECT_NE(std::find(rr.revoke_shards.begin(), rr.revoke_shards.end(), 0), rr.revoke_shards.end());
  // Reopened before the reader let go: nobody else may get it.
  LayoutTick(l, 3, {{0, false}});
  for (int i = 0; i < 3; ++i) {
    HeartbeatResponse ro = Ok(h_.Heartbeat(other.Request()));
    EXPECT_EQ(std::find(ro.assigned_shards.begin(), ro.assigned_shards.end(), 0),
              ro.assigned_shards.end())
        << "the reopened parent was handed to a second reader";
  }
  EXPECT_EQ(h_.meta().FindShard(0)->owner, reader);
}

// K4 for a shard the group no longer has (a retired generation's, or one a rollback of the
// layout lost): a member still reading or draining it is told to drain it, on the steady
// fast path too. Found by the simulator with reshards (seed 3): the answer listed it nowhere
// and the member went on holding it.
TEST_F(GroupReshard, K4_ClaimOfAShardTheGroupDoesNotHaveIsRevoked) {
  Settle();
  Layout l = *DecideActivate(*DecideReshard(Stream(4), 2, kOneServer, "t1"), "t2");
  LayoutTick(l, 3, {{0, true}, {1, true}, {2, true}, {3, true}});
  l = *DecideRetire(l, 0, 1000, "t3");
  LayoutTick(l, 4);
  Settle();
  ASSERT_EQ(h_.meta().FindShard(0), nullptr) << "generation 0 left the group";
  for (const bool draining : {false, true}) {
    FakeMember m = a_;
    if (draining) {
      m.revoking.push_back({0, RevokeState::kDraining});
    } else {
      m.owned.push_back(0);
    }
    const HeartbeatResponse r = Ok(h_.Heartbeat(m.Request()));
    EXPECT_NE(std::find(r.revoke_shards.begin(), r.revoke_shards.end(), 0), r.revoke_shards.end())
        << (draining ? "DRAINING" : "owned") << ": shard 0 must be listed to drain (K4)";
    EXPECT_EQ(r.status, HeartbeatStatus::kDrain);
  }
}

TEST_F(GroupReshard, ALayoutBehindTheGroupIsNotAdopted) {
  Settle();
  Layout l = *DecideActivate(*DecideReshard(Stream(4), 2, kOneServer, "t1"), "t2");
  LayoutTick(l, 3);
  ASSERT_EQ(h_.meta().active_generation, 1);
  auto d = DecideLayoutTick(h_.meta(), h_.Live(), Stream(4), 1, {}, h_.NextEnv());
  ASSERT_FALSE(d.response.ok());
  EXPECT_EQ(d.response.error().code, ErrorCode::kMetadataUnreadable);
  EXPECT_NE(d.response.error().message.find("behind"), std::string::npos);
  EXPECT_FALSE(d.next.has_value());
}

// A layout read before another coordinator adopted a newer revision (the stream tick and the
// completion hints read it outside the group's mutex) is not adopted: it would bring back
// the retired parents, ownerless, and hand them out while their last owners might still hold
// leases on them (K1; simulator seed 20266010, S1).
TEST_F(GroupReshard, AStaleLayoutDoesNotBringBackRetiredShards) {
  Settle();
  Layout l = *DecideReshard(Stream(4), 2, kOneServer, "t1");
  LayoutTick(l, 2);
  l = *DecideActivate(l, "t2");
  LayoutTick(l, 3);
  LayoutTick(l, 3, {{0, true}, {1, true}, {2, true}, {3, true}});
  Settle();
  const Layout sealed = l;
  LayoutTick(*DecideRetire(l, 0, h_.now(), "t3"), 4);
  ASSERT_EQ(h_.meta().FindShard(0), nullptr) << "the retired parents left the group";
  auto d = DecideLayoutTick(h_.meta(), h_.Live(), sealed, 3, {}, h_.NextEnv());
  ASSERT_TRUE(d.response.ok()) << d.response.error().message;
  EXPECT_FALSE(d.next.has_value()) << "a stale layout is not written";
  h_.Apply(d);
  for (int32_t parent = 0; parent < 4; ++parent) {
    EXPECT_EQ(h_.meta().FindShard(parent), nullptr) << "parent " << parent << " came back";
  }
  EXPECT_EQ(h_.meta().layout_revision, 4);
}

// RS1–RS5 property: random grow/shrink sequences, members joining, dying and heartbeating,
// parents completing at random: the group record always passes its invariants, a shard is
// never granted while an earlier generation has an incomplete shard, and a completed shard
// is owned by no one.
RC_GTEST_PROP(ReshardProps, ChildrenNeverBeforeParents, ()) {
  CoreHarness h(*rc::gen::inRange(1, 6));
  Layout layout =
      DeriveGeneration0("orders", h.meta().shard_count, GroupConfig{}, {}, {}, "t").value();
  layout.groups = {"billing"};
  int64_t revision = 1;
  std::vector<FakeMember> members;
  for (int i = 0; i < 3; ++i) members.push_back(FakeMember{"m" + std::to_string(i)});
  // When each member's assignment lease ends (C1: from its last answered heartbeat).
  std::map<std::string, TimeMs> lease_end;
  std::vector<std::string> trace;
  auto ids = [](const std::vector<int32_t>& v) {
    std::string o;
    for (int32_t x : v) o += std::to_string(x) + ",";
    return o;
  };
  const int steps = *rc::gen::inRange(20, 120);
  for (int step = 0; step < steps; ++step) {
    const int op = *rc::gen::inRange(0, 10);
    std::vector<ShardCompletion> done;
    if (op == 0) {
      auto next = DecideReshard(layout, *rc::gen::inRange(1, 7), kOneServer, "t");
      if (next.ok()) layout = *next, ++revision;
    } else if (op == 1) {
      if (auto next = DecideActivate(layout, "t")) layout = *next, ++revision;
    } else if (op == 2) {
      // A parent is found complete (or, rarely, incomplete again). Complete in Redis means
      // its reader delivered the seal and stopped there, with nothing pending: whoever read
      // it reads it no more (the reader core stops at the seal).
      for (const ShardState& s : h.meta().shards) {
        if (s.generation < h.meta().active_generation && *rc::gen::inRange(0, 3) == 0) {
          done.push_back({s.id, *rc::gen::inRange(0, 8) != 0});
          if (done.back().complete) {
            for (FakeMember& m : members) std::erase(m.owned, s.id);
          }
        }
      }
    } else if (op == 3) {
      const Generation& oldest = layout.generations.front();
      bool complete = oldest.state == GenerationState::kSealed;
      for (const LayoutShard& ls : oldest.shards) {
        const ShardState* s = h.meta().FindShard(ls.id);
        complete = complete && (s == nullptr || s->completed);
      }
      if (complete) {
        if (auto next = DecideRetire(layout, oldest.generation, 1000, "t"))
          layout = *next, ++revision;
      }
      if (layout.generations.front().state == GenerationState::kRetired &&
          h.meta().layout_revision == revision) {
        layout.generations.erase(layout.generations.begin());  // keys deleted later
        ++revision;
      }
    } else if (op == 4) {
      members[*rc::gen::inRange(0, 3)].Forget();
    } else if (op == 5) {
      h.Advance(*rc::gen::inRange(100, 12000));
    }
    auto d = DecideLayoutTick(h.meta(), h.Live(), layout, revision, done, h.NextEnv());
    RC_ASSERT(d.response.ok());
    for (const Event& e : d.events) {
      trace.push_back(fmt::format("step {} op {} event {} {} {} {}", step, op,
                                  EventKindName(e.kind), e.member, e.shard, e.detail));
    }
    h.Apply(d);
    for (FakeMember& m : members) {
      if (*rc::gen::inRange(0, 3) == 0) continue;  // this one is slow this round
      auto r = h.Heartbeat(m.Request());
      if (r.ok()) {
        trace.push_back(fmt::format("step {} t={} {} -> {} assigned {} pending {} revoke {}", step,
                                    h.now(), m.id, HeartbeatStatusName(r->status),
                                    ids(r->assigned_shards), ids(r->pending_shards),
                                    ids(r->revoke_shards)));
        m.Observe(*r);
        lease_end[m.id] = h.now() + h.meta().config.assignment_lease_ms;
      } else {
        m.Forget();
      }
    }
    const GroupMetadata& g = h.meta();
    RC_ASSERT(CheckInvariants(g).ok());
    const std::vector<bool> assignable = g.AssignableShards();
    for (size_t i = 0; i < g.shards.size(); ++i) {
      const ShardState& s = g.shards[i];
      // A completed shard is targeted to no one; an owner it had drains it (until REVOKED).
      if (s.completed) RC_ASSERT(s.target.empty());
      if (!assignable[i]) RC_ASSERT(s.owner.empty() || s.owner != s.target);
    }
    // What members may read under a lease that still runs: each shard by one member.
    std::map<int32_t, std::string> reader;
    for (const FakeMember& m : members) {
      if (lease_end[m.id] <= h.now()) continue;  // C1: it has stopped reading
      for (int32_t s : m.owned) {
        const ShardState* st = g.FindShard(s);
        if (st == nullptr) continue;  // retired while it was still listed
        if (!reader.emplace(s, m.id).second) {
          std::string dump;
          for (const ShardState& sh : g.shards) {
            dump += fmt::format(" [{} g{} o={} t={}{}]", sh.id, sh.generation, sh.owner, sh.target,
                                sh.completed ? " done" : "");
          }
          std::string t;
          for (const std::string& line : trace) t += line + "\n";
          RC_FAIL(fmt::format("shard {} read by {} and {} (step {}, op {}):{}\n{}", s, reader[s],
                              m.id, step, op, dump, t));
        }
      }
    }
  }
}

}  // namespace
}  // namespace rsc
