// Level 2: metadata loss and corruption in a real Redis (SPEC §7 L1, L3, M7; scenario 5).
// The coordinator fails closed and never recreates or overwrites the hash on its own.

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

class MetadataLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    coord_ = std::make_unique<CoordinatorProcess>(CoordOpts(redis_, /*tick_ms=*/50));
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
    cli_ = redis_.Cli();
    ASSERT_NE(cli_, nullptr);
    ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
    // A healthy neighbour: rsc_ticks_total counts successful group ticks, so waiting for
    // it to grow by 2 proves at least one whole tick pass over every group ran.
    ASSERT_TRUE(CreateGroup(*http_, kP, "neighbour", 4));  // the stream's layout: 4 (D3)
    HttpResult r = Beat(*http_, member_, kP, kG);
    ASSERT_EQ(r.status, 200) << r.Describe();
    ASSERT_EQ(member_.last_status, "OK");
  }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }
  // Waits until the tick loop has run at least `n - 1` whole passes over every group.
  void WaitTicks(int n) {
    const double start = Metric(*http_, "rsc_ticks_total");
    ASSERT_TRUE(WaitFor([&] { return Metric(*http_, "rsc_ticks_total") >= start + n; }, 5s,
                        std::to_string(n) + " tick passes"));
  }

  static constexpr const char* kP = "payments";
  static constexpr const char* kG = "ledger";
  const std::string key_ = MetadataKey(kP, kG);
  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<RedisCli> cli_;
  Consumer member_{"member-1"};
};

// Scenario 5 / L1: the hash deleted -> METADATA_MISSING while indexed, never rebuilt from
// heartbeats, routing or ticks; once the index entry is gone too -> GROUP_NOT_FOUND.
TEST_F(MetadataLossTest, DeletedMetadataKeyFailsClosedAndIsNeverRecreated) {
  ASSERT_EQ(cli_->Run({"DEL", key_}).integer, 1);
  for (int i = 0; i < 20; ++i) {
    HttpResult hb = http_->Post(HeartbeatPath(kP, kG), json::value(member_.Request()));
    ASSERT_EQ(hb.status, 503) << hb.Describe();
    EXPECT_EQ(hb.ErrorCode(), "METADATA_MISSING") << hb.Describe();
  }
  // A join of a new member must not recreate it either.
  {
    Consumer fresh("member-new");
    HttpResult r = http_->Post(HeartbeatPath(kP, kG), json::value(fresh.Request()));
    EXPECT_EQ(r.ErrorCode(), "METADATA_MISSING") << r.Describe();
    HttpResult leave = http_->Post(
        GroupPath(kP, kG) + "/leave",
        json::value(json::object{{"memberId", "member-1"}, {"memberEpoch", member_.epoch}}));
    EXPECT_EQ(leave.ErrorCode(), "METADATA_MISSING") << leave.Describe();
  }
  HttpResult routing = http_->Get(RoutingPath(kP, kG, member_.version, member_.lineage));
  EXPECT_EQ(routing.status, 503) << routing.Describe();
  EXPECT_EQ(routing.ErrorCode(), "METADATA_MISSING") << routing.Describe();
  HttpResult describe = http_->Get(GroupPath(kP, kG));
  EXPECT_EQ(describe.ErrorCode(), "METADATA_MISSING") << describe.Describe();
  ASSERT_NO_FATAL_FAILURE(WaitTicks(3));
  EXPECT_EQ(Exists(*cli_, key_), 0)
      << "metadata hash recreated: " << cli_->Run({"HGETALL", key_}).ToString();
  EXPECT_GE(Metric(*http_, "rsc_metadata_missing_total"), 1);
  // Still listed by the index (auxiliary), so it is not "not found".
  HttpResult list = http_->Get("/v1/groups");
  ASSERT_EQ(list.status, 200) << list.Describe();
  EXPECT_NE(list.body.find(kG), std::string::npos) << list.body;

  // The index entry removed as well: the group is simply not found.
  ASSERT_EQ(cli_->Run({"SREM", kIndexKey, std::string(kP) + ":" + kG}).integer, 1);
  HttpResult hb = http_->Post(HeartbeatPath(kP, kG), json::value(member_.Request()));
  EXPECT_EQ(hb.status, 404) << hb.Describe();
  EXPECT_EQ(hb.ErrorCode(), "GROUP_NOT_FOUND") << hb.Describe();
  HttpResult r2 = http_->Get(RoutingPath(kP, kG));
  EXPECT_EQ(r2.status, 404) << r2.Describe();
  EXPECT_EQ(r2.ErrorCode(), "GROUP_NOT_FOUND") << r2.Describe();
  EXPECT_EQ(Exists(*cli_, key_), 0);
  EXPECT_EQ(cli_->Run({"SISMEMBER", kIndexKey, std::string(kP) + ":" + kG}).integer, 0)
      << "index entry re-added";
  // L2: recovery is an explicit operator action (a fresh create).
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer again("member-2");
  HttpResult ok = Beat(*http_, again, kP, kG);
  EXPECT_EQ(ok.status, 200) << ok.Describe();
}

// Simulator seed 8431395707449856820: a group created again over a lost key (still listed
// in the index) must not hand out shards while the lost group's leases may run. The create
// starts a correction round (shown in the view); a new member gets no OK meanwhile. A create
// once the index entry is gone too (above) is a plain create.
TEST_F(MetadataLossTest, CreateOverALostKeyStartsACorrectionRound) {
  ASSERT_EQ(cli_->Run({"DEL", key_}).integer, 1);
  HttpResult created = http_->Post(
      "/v1/groups", json::value(json::object{{"stream", kP}, {"group", kG}, {"shardCount", 4}}));
  ASSERT_EQ(created.status, 201) << created.Describe();
  json::value view = json::parse(created.body);
  EXPECT_TRUE(view.as_object().at("correctionRound").is_object()) << created.body;
  Consumer fresh("member-new");
  for (int i = 0; i < 3; ++i) {
    HttpResult r = Beat(*http_, fresh, kP, kG);
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_NE(fresh.last_status, "OK") << "granted during the lost group's leases: " << r.body;
  }
  // A neighbour that was never lost is created without a round.
  HttpResult other = http_->Post(
      "/v1/groups",
      json::value(json::object{{"stream", kP}, {"group", "unrelated"}, {"shardCount", 4}}));
  ASSERT_EQ(other.status, 201) << other.Describe();
  EXPECT_TRUE(json::parse(other.body).as_object().at("correctionRound").is_null()) << other.body;
}

// L3: corrupt JSON in the aggregate field -> METADATA_UNREADABLE, left untouched.
TEST_F(MetadataLossTest, CorruptAggregateFailsClosedAndIsNotOverwritten) {
  const std::map<std::string, std::string> original = HGetAll(*cli_, key_);
  ASSERT_TRUE(original.count("aggregate"));
  ASSERT_EQ(cli_->Run({"HSET", key_, "aggregate", "{not json"}).integer, 0);
  for (int i = 0; i < 10; ++i) {
    HttpResult hb = http_->Post(HeartbeatPath(kP, kG), json::value(member_.Request()));
    ASSERT_EQ(hb.status, 503) << hb.Describe();
    EXPECT_EQ(hb.ErrorCode(), "METADATA_UNREADABLE") << hb.Describe();
  }
  HttpResult routing = http_->Get(RoutingPath(kP, kG));
  EXPECT_EQ(routing.ErrorCode(), "METADATA_UNREADABLE") << routing.Describe();
  HttpResult describe = http_->Get(GroupPath(kP, kG));
  EXPECT_EQ(describe.ErrorCode(), "METADATA_UNREADABLE") << describe.Describe();
  ASSERT_NO_FATAL_FAILURE(WaitTicks(3));
  std::map<std::string, std::string> after = HGetAll(*cli_, key_);
  EXPECT_EQ(after["aggregate"], "{not json");
  EXPECT_EQ(after["revision"], original.at("revision")) << "the hash was written";
  EXPECT_GE(Metric(*http_, "rsc_metadata_unreadable_total"), 1);

  // The operator repairs it by hand: service resumes from the stored state.
  ASSERT_EQ(cli_->Run({"HSET", key_, "aggregate", original.at("aggregate")}).integer, 0);
  HttpResult ok = Beat(*http_, member_, kP, kG);
  EXPECT_EQ(ok.status, 200) << ok.Describe();
  EXPECT_EQ(member_.owned, (std::set<int>{0, 1, 2, 3}));
}

// L3 / M7: unknown schemaVersion or layoutVersion -> METADATA_UNREADABLE, left untouched.
TEST_F(MetadataLossTest, UnknownSchemaOrLayoutVersionFailsClosedAndIsNotOverwritten) {
  for (const char* field : {"schemaVersion", "layoutVersion"}) {
    SCOPED_TRACE(field);
    const std::map<std::string, std::string> original = HGetAll(*cli_, key_);
    ASSERT_TRUE(original.count(field)) << field << " missing from the hash";
    ASSERT_TRUE(cli_->Run({"HSET", key_, field, "99"}).ok());
    for (int i = 0; i < 5; ++i) {
      HttpResult hb = http_->Post(HeartbeatPath(kP, kG), json::value(member_.Request()));
      ASSERT_EQ(hb.status, 503) << hb.Describe();
      EXPECT_EQ(hb.ErrorCode(), "METADATA_UNREADABLE") << hb.Describe();
    }
    HttpResult routing = http_->Get(RoutingPath(kP, kG));
    EXPECT_EQ(routing.ErrorCode(), "METADATA_UNREADABLE") << routing.Describe();
    // Admin mutations fail closed too.
    HttpResult patch = http_->Patch(
        GroupPath(kP, kG),
        json::value(json::object{{"expectedRevision", std::stoll(original.at("revision"))},
                                 {"config", json::object{{"rebalanceTimeoutMs", 31000}}}}));
    EXPECT_EQ(patch.ErrorCode(), "METADATA_UNREADABLE") << patch.Describe();
    ASSERT_NO_FATAL_FAILURE(WaitTicks(2));
    std::map<std::string, std::string> after = HGetAll(*cli_, key_);
    EXPECT_EQ(after[field], "99");
    EXPECT_EQ(after["aggregate"], original.at("aggregate"));
    EXPECT_EQ(after["revision"], original.at("revision"));
    ASSERT_TRUE(cli_->Run({"HSET", key_, field, original.at(field)}).ok());
    HttpResult ok = Beat(*http_, member_, kP, kG);
    EXPECT_EQ(ok.status, 200) << ok.Describe();
  }
}

// L3 against the coordinator's parse cache: a hand edit that keeps the aggregate's byte
// length (and the writeToken) must still be noticed, not answered from the cached copy
// and then overwritten by the next write.
TEST_F(MetadataLossTest, SameLengthCorruptionIsNotHiddenByTheParseCache) {
  // Make the coordinator cache the current aggregate.
  HttpResult warm = Beat(*http_, member_, kP, kG);
  ASSERT_EQ(warm.status, 200) << warm.Describe();
  const std::map<std::string, std::string> original = HGetAll(*cli_, key_);
  std::string corrupt = original.at("aggregate");
  ASSERT_EQ(corrupt.front(), '{');
  corrupt.front() = '!';  // same length, no longer JSON
  ASSERT_TRUE(cli_->Run({"HSET", key_, "aggregate", corrupt}).ok());
  // A heartbeat that writes (a second member joins) would overwrite the corrupt field.
  Consumer other("member-2");
  HttpResult hb = http_->Post(HeartbeatPath(kP, kG), json::value(other.Request()));
  EXPECT_EQ(hb.status, 503) << hb.Describe();
  EXPECT_EQ(hb.ErrorCode(), "METADATA_UNREADABLE") << hb.Describe();
  std::map<std::string, std::string> after = HGetAll(*cli_, key_);
  EXPECT_EQ(after["aggregate"], corrupt) << "the corrupt aggregate was overwritten (L3)";
  EXPECT_EQ(after["revision"], original.at("revision")) << "the hash was written";
}

}  // namespace
}  // namespace rsc::integration
