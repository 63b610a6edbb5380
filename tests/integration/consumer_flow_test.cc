// Level 2: the consumer protocol end to end through a real coordinator and a real Redis
// (SPEC §4, decide.h's timeline): join, rebalance with DRAIN / REVOKE_PENDING, REVOKED
// handoff, the describe view at every step, and idempotent repeats (I1, scenario 1).

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

class ConsumerFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    coord_ = std::make_unique<CoordinatorProcess>(CoordOpts(redis_));
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
  }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }

  json::value Describe() {
    HttpResult r = http_->Get(GroupPath(kP, kG));
    EXPECT_EQ(r.status, 200) << r.Describe();
    return r.json;
  }

  static constexpr const char* kP = "orders";
  static constexpr const char* kG = "billing";
  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::unique_ptr<HttpClient> http_;
};

TEST_F(ConsumerFlowTest, JoinRebalanceRevokeHandoffWithViewsAndIdempotentRepeats) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  {
    json::value v = Describe();
    EXPECT_EQ(JsonInt(v, "shardCount"), 4);
    EXPECT_EQ(v.at("members").as_array().size(), 0u);
    EXPECT_TRUE(v.at("correctionRound").is_null());
  }

  // ── A joins and gets everything ──
  Consumer a("member-a");
  HttpResult ra = Beat(*http_, a, kP, kG);
  ASSERT_EQ(ra.status, 200) << ra.Describe();
  EXPECT_EQ(a.last_status, "OK") << ra.body;
  EXPECT_GE(a.epoch, 1);
  EXPECT_EQ(JsonInts(ra.json, "assignedShards"), (std::vector<int>{0, 1, 2, 3})) << ra.body;
  EXPECT_TRUE(JsonInts(ra.json, "pendingShards").empty()) << ra.body;
  EXPECT_EQ(a.owned, (std::set<int>{0, 1, 2, 3}));
  const int64_t epoch_a = a.epoch;
  {
    json::value v = Describe();
    EXPECT_EQ(JsonInt(v, "metadataVersion"), a.version);
    EXPECT_EQ(JsonStr(v, "lineage"), a.lineage);
    EXPECT_EQ(MemberShards(v, "member-a", "assignedShards"), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(JsonInt(json::value(*FindMember(v, "member-a")), "memberEpoch"), epoch_a);
  }
  // I1: the identical heartbeat (same ids, epochs, versions, shards) gets the same body.
  {
    json::object req = a.Request();
    HttpResult r1 = http_->Post(HeartbeatPath(kP, kG), json::value(req));
    HttpResult r2 = http_->Post(HeartbeatPath(kP, kG), json::value(req));
    ASSERT_EQ(r1.status, 200) << r1.Describe();
    EXPECT_EQ(r1.body, r2.body);
    EXPECT_EQ(JsonStr(r1.json, "status"), "OK");
    EXPECT_EQ(JsonInt(r1.json, "metadataVersion"), a.version) << "a steady heartbeat wrote";
  }

  // ── B joins: target moves two shards, B waits for them ──
  Consumer b("member-b");
  HttpResult rb = Beat(*http_, b, kP, kG);
  ASSERT_EQ(rb.status, 200) << rb.Describe();
  EXPECT_EQ(b.last_status, "REVOKE_PENDING") << rb.body;
  const std::vector<int> moving = JsonInts(rb.json, "pendingShards");
  ASSERT_EQ(moving.size(), 2u) << rb.body;
  EXPECT_TRUE(JsonInts(rb.json, "assignedShards").empty()) << rb.body;
  EXPECT_TRUE(b.owned.empty());
  EXPECT_GT(JsonInt(rb.json, "assignmentEpoch"), a.assignment_epoch) << rb.body;
  std::vector<int> staying;
  for (int s = 0; s < 4; ++s) {
    if (std::find(moving.begin(), moving.end(), s) == moving.end()) staying.push_back(s);
  }
  {
    json::value v = Describe();
    EXPECT_EQ(MemberShards(v, "member-b", "pendingShards"), moving);
    EXPECT_TRUE(MemberShards(v, "member-b", "assignedShards").empty());
    EXPECT_EQ(MemberShards(v, "member-a", "assignedShards"), staying);
    EXPECT_EQ(MemberShards(v, "member-a", "revokingShards"), moving);
  }
  // Repeating B's join is idempotent (a lost join response retried: no ghost member).
  {
    Consumer b_retry("member-b");
    HttpResult r = http_->Post(HeartbeatPath(kP, kG), json::value(b_retry.Request()));
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_EQ(JsonInt(r.json, "memberEpoch"), b.epoch) << r.body;
    EXPECT_EQ(JsonInts(r.json, "pendingShards"), moving) << r.body;
    EXPECT_EQ(Describe().at("members").as_array().size(), 2u);
  }

  // ── A heartbeats: DRAIN for the moving shards ──
  const json::object a_drain_req = a.Request();
  HttpResult rd = Beat(*http_, a, kP, kG);
  ASSERT_EQ(rd.status, 200) << rd.Describe();
  EXPECT_EQ(a.last_status, "DRAIN") << rd.body;
  EXPECT_EQ(JsonInts(rd.json, "revokeShards"), moving) << rd.body;
  EXPECT_EQ(JsonInts(rd.json, "assignedShards"), staying) << rd.body;
  EXPECT_EQ(a.epoch, epoch_a) << "an assignment change must not raise the member epoch (K5)";
  // Scenario 1: the DRAIN response lost -> the same heartbeat gets the same DRAIN.
  {
    HttpResult again = http_->Post(HeartbeatPath(kP, kG), json::value(a_drain_req));
    ASSERT_EQ(again.status, 200) << again.Describe();
    EXPECT_EQ(again.body, rd.body);
  }
  // B still waits (the revoke is not reported yet).
  {
    HttpResult r = Beat(*http_, b, kP, kG);
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_EQ(b.last_status, "REVOKE_PENDING") << r.body;
    EXPECT_TRUE(b.owned.empty());
  }

  // ── A reports REVOKED: the shards pass to B ──
  EXPECT_EQ(a.revoking, std::set<int>(moving.begin(), moving.end()));
  EXPECT_EQ(a.owned, std::set<int>(staying.begin(), staying.end()));
  const json::object a_revoked_req = a.Request();
  HttpResult rr = Beat(*http_, a, kP, kG);
  ASSERT_EQ(rr.status, 200) << rr.Describe();
  EXPECT_EQ(a.last_status, "OK") << rr.body;
  EXPECT_EQ(JsonInts(rr.json, "assignedShards"), staying) << rr.body;
  EXPECT_TRUE(JsonInts(rr.json, "revokeShards").empty()) << rr.body;
  EXPECT_TRUE(a.revoking.empty());
  {
    json::value v = Describe();
    EXPECT_EQ(MemberShards(v, "member-a", "assignedShards"), staying);
    EXPECT_TRUE(MemberShards(v, "member-a", "revokingShards").empty());
    EXPECT_EQ(MemberShards(v, "member-b", "assignedShards"), moving);
    EXPECT_TRUE(MemberShards(v, "member-b", "pendingShards").empty());
  }
  // I2: a duplicate REVOKED for an already released shard is harmless.
  {
    HttpResult dup = http_->Post(HeartbeatPath(kP, kG), json::value(a_revoked_req));
    ASSERT_EQ(dup.status, 200) << dup.Describe();
    EXPECT_EQ(JsonStr(dup.json, "status"), "OK") << dup.body;
    EXPECT_EQ(JsonInts(dup.json, "assignedShards"), staying) << dup.body;
    EXPECT_EQ(MemberShards(Describe(), "member-b", "assignedShards"), moving);
  }

  // ── B heartbeats: OK with the moved shards ──
  HttpResult rok = Beat(*http_, b, kP, kG);
  ASSERT_EQ(rok.status, 200) << rok.Describe();
  EXPECT_EQ(b.last_status, "OK") << rok.body;
  EXPECT_EQ(JsonInts(rok.json, "assignedShards"), moving) << rok.body;
  EXPECT_EQ(b.owned, std::set<int>(moving.begin(), moving.end()));
  // I1 for B as well: the identical request twice gives identical bodies, no write.
  {
    json::object req = b.Request();
    HttpResult r1 = http_->Post(HeartbeatPath(kP, kG), json::value(req));
    HttpResult r2 = http_->Post(HeartbeatPath(kP, kG), json::value(req));
    ASSERT_EQ(r1.status, 200) << r1.Describe();
    EXPECT_EQ(r1.body, r2.body);
    const std::string rev_before = JsonStr(r1.json, "lineage");
    json::value v = Describe();
    EXPECT_EQ(JsonInt(v, "metadataVersion"), JsonInt(r1.json, "metadataVersion"));
    EXPECT_EQ(JsonStr(v, "lineage"), rev_before);
  }
  // Both members' views agree with the final state; every shard has one owner.
  {
    json::value v = Describe();
    std::vector<int> all = MemberShards(v, "member-a", "assignedShards");
    for (int s : MemberShards(v, "member-b", "assignedShards")) all.push_back(s);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3}));
  }

  // ── routing reflects the committed version ──
  {
    HttpResult r = http_->Get(RoutingPath(kP, kG, b.version, b.lineage));
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_EQ(JsonInt(r.json, "shardCount"), 4);
    EXPECT_EQ(JsonInt(r.json, "metadataVersion"), b.version);
    EXPECT_FALSE(r.json.at("sync").as_bool());
    EXPECT_EQ(r.json.at("shards").as_array().size(), 4u);
  }

  // ── B leaves cleanly: its shards go back to A ──
  {
    HttpResult r = http_->Post(HeartbeatPath(kP, kG), json::value(b.LeaveRequest()));
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_EQ(JsonInt(r.json, "memberEpoch"), -1) << r.body;
    EXPECT_EQ(FindMember(Describe(), "member-b"), nullptr);
    HttpResult ra2 = Beat(*http_, a, kP, kG);
    ASSERT_EQ(ra2.status, 200) << ra2.Describe();
    EXPECT_EQ(a.last_status, "OK") << ra2.body;
    EXPECT_EQ(a.owned, (std::set<int>{0, 1, 2, 3}));
  }
}

// Scenario 4 (K1b, K2): the previous owner goes silent while draining; the new owner gets
// the shards only after the old owner's member lease ended, and the old owner, if it comes
// back, is told it is no longer a member.
TEST_F(ConsumerFlowTest, PreviousOwnerExpiresWhileDrainingNewOwnerGetsShardsAfterExpiry) {
  // The rebalance timeout is well past the member lease, so A expires long before its
  // overdue drain could fence it. With ShortLeases (timeout = lease) both came due within
  // a few milliseconds, and which tick saw them first decided whether the zombie got
  // UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH (seen once on a busy machine, issue 8).
  Config config = ShortLeases();
  config.rebalance_timeout_ms = 4 * config.member_lease_ms;
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4, config));
  Consumer a("member-a"), b("member-b");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  const std::vector<int> moving = JsonInts(b.last, "pendingShards");
  ASSERT_EQ(moving.size(), 2u);
  const auto a_last_send = std::chrono::steady_clock::now();
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.last_status, "DRAIN");
  // A goes silent (crashed mid-drain). B keeps beating.
  HttpResult last;
  ASSERT_TRUE(WaitFor(
      [&] {
        last = Beat(*http_, b, kP, kG);
        EXPECT_EQ(last.status, 200) << last.Describe();
        return b.last_status == "OK" && b.owned.size() == 4;
      },
      10s, "B to own every shard after A expired"))
      << last.body;
  const auto elapsed = std::chrono::steady_clock::now() - a_last_send;
  EXPECT_GE(elapsed, std::chrono::milliseconds(config.member_lease_ms))
      << "B got A's shards before A's member lease could have ended";
  EXPECT_EQ(FindMember(Describe(), "member-a"), nullptr);
  HttpResult zombie = Beat(*http_, a, kP, kG);
  EXPECT_EQ(zombie.status, 409) << zombie.Describe();
  EXPECT_EQ(zombie.ErrorCode(), "UNKNOWN_MEMBER_ID") << zombie.Describe();
  EXPECT_TRUE(a.owned.empty());
  // It rejoins with a higher epoch and gets a fair share back (through a drain by B).
  HttpResult rejoin = Beat(*http_, a, kP, kG);
  ASSERT_EQ(rejoin.status, 200) << rejoin.Describe();
  EXPECT_GT(a.epoch, 1) << rejoin.body;
}

// K5 static membership: a restarted process with the same instanceId takes the old
// member's place and shards without a rebalance; the old identity is fenced.
TEST_F(ConsumerFlowTest, RestartWithSameInstanceIdKeepsShardsWithoutRebalance) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("member-a-pid1"), b("member-b");
  a.instance_id = "consumer-host-1";
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
    ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  }
  ASSERT_EQ(a.last_status, "OK");
  ASSERT_EQ(b.last_status, "OK");
  const std::set<int> a_shards = a.owned;
  const int64_t epoch_before = JsonInt(Describe(), "assignmentEpoch");

  Consumer a2("member-a-pid2");
  a2.instance_id = "consumer-host-1";
  HttpResult r = Beat(*http_, a2, kP, kG);
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(a2.last_status, "OK") << r.body;
  EXPECT_EQ(a2.owned, a_shards) << r.body;
  EXPECT_GT(a2.epoch, a.epoch) << r.body;
  json::value v = Describe();
  EXPECT_EQ(JsonInt(v, "assignmentEpoch"), epoch_before) << "a static rejoin rebalanced: " << v;
  EXPECT_EQ(FindMember(v, "member-a-pid1"), nullptr);
  HttpResult old = Beat(*http_, a, kP, kG);
  EXPECT_EQ(old.status, 409) << old.Describe();
  EXPECT_EQ(old.ErrorCode(), "FENCED_MEMBER_EPOCH") << old.Describe();
  HttpResult rb = Beat(*http_, b, kP, kG);
  EXPECT_EQ(b.last_status, "OK") << rb.body;
}

}  // namespace
}  // namespace rsc::integration
