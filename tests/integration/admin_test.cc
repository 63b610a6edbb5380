// Level 2: the admin API against a real coordinator and Redis (SPEC §9, I4, L2, K5):
// PATCH with expectedRevision, shard-count growth reaching members, shrink refused,
// fencing, delete, export and restore.

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kP = "admin";
constexpr const char* kG = "g";

class AdminTest : public LiveCoordinatorTest {
 protected:
  json::value Describe() {
    HttpResult r = http_->Get(GroupPath(kP, kG));
    EXPECT_EQ(r.status, 200) << r.Describe();
    return r.json;
  }
  int64_t Revision() { return JsonInt(Describe(), "revision"); }

  // Heartbeats every consumer (REVOKED reports included) until all answer OK.
  ::testing::AssertionResult Settle(std::vector<Consumer*> cs) {
    return WaitFor(
        [&] {
          bool all_ok = true;
          for (Consumer* c : cs) {
            HttpResult r = Beat(*http_, *c, kP, kG);
            if (r.status != 200) {
              ADD_FAILURE() << c->id << ": " << r.Describe();
              return true;
            }
            all_ok = all_ok && c->last_status == "OK" && c->revoking.empty();
          }
          return all_ok;
        },
        10s, "every member to reach OK");
  }
};

TEST_F(AdminTest, PatchChecksRevisionAndRefusesShardCount) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("a"), b("b");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  ASSERT_TRUE(Settle({&a, &b}));
  ASSERT_EQ(a.owned.size(), 2u);
  ASSERT_EQ(b.owned.size(), 2u);
  const int64_t rev = Revision();
  const std::string hash_before = cli_->Run({"HGETALL", MetadataKey(kP, kG)}).ToString();
  const std::string layout_before = cli_->Run({"HGETALL", LayoutKey(kP)}).ToString();

  // I4: a stale expectedRevision is refused and changes nothing.
  for (int64_t stale : {rev - 1, rev + 1, int64_t{0}}) {
    HttpResult r = http_->Patch(
        GroupPath(kP, kG),
        json::value(json::object{{"expectedRevision", stale},
                                 {"config", json::object{{"heartbeatIntervalMs", 400}}}}));
    EXPECT_EQ(r.status, 409) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "REVISION_CONFLICT") << r.Describe();
  }
  // SPEC RS1: a shard count (any, with any revision) is a 400 naming the reshard endpoint;
  // invalid configs and no-op patches are 400s too.
  for (const json::object& body :
       {json::object{{"expectedRevision", rev}, {"shardCount", 8}},
        json::object{{"expectedRevision", rev - 1}, {"shardCount", 8}},
        json::object{{"expectedRevision", rev}, {"shardCount", 2}},
        json::object{{"expectedRevision", rev}, {"shardCount", 0}},
        json::object{{"expectedRevision", rev}, {"shardCount", 5000}},
        json::object{{"expectedRevision", rev},
                     {"config", json::object{{"assignmentLeaseMs", 10000}}}},
        json::object{{"expectedRevision", rev},
                     {"config", json::object{{"heartbeatIntervalMs", 5}}}},
        json::object{{"expectedRevision", rev}}}) {
    HttpResult r = http_->Patch(GroupPath(kP, kG), json::value(body));
    EXPECT_EQ(r.status, 400) << JsonString(json::value(body)) << ": " << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "INVALID_REQUEST") << r.Describe();
    // (A count outside 1..4096 is refused by the body's parser, before the rule.)
    if (body.contains("shardCount") && body.at("shardCount").as_int64() > 0 &&
        body.at("shardCount").as_int64() <= 4096) {
      EXPECT_NE(r.body.find("/v1/streams/" + std::string(kP) + "/reshard"), std::string::npos)
          << r.Describe();
    }
  }
  EXPECT_EQ(cli_->Run({"HGETALL", MetadataKey(kP, kG)}).ToString(), hash_before)
      << "a refused PATCH wrote the hash";
  EXPECT_EQ(cli_->Run({"HGETALL", LayoutKey(kP)}).ToString(), layout_before)
      << "a refused PATCH wrote the layout";
  EXPECT_EQ(JsonInt(Describe(), "shardCount"), 4);

  // A partial config patch merges onto the stored config and reaches the members.
  HttpResult cfg = http_->Patch(
      GroupPath(kP, kG),
      json::value(json::object{{"expectedRevision", rev},
                               {"config", json::object{{"heartbeatIntervalMs", 400}}}}));
  ASSERT_EQ(cfg.status, 200) << cfg.Describe();
  EXPECT_GT(JsonInt(cfg.json, "revision"), rev) << cfg.body;
  EXPECT_EQ(JsonInt(cfg.json.at("config"), "heartbeatIntervalMs"), 400) << cfg.body;
  EXPECT_EQ(JsonInt(cfg.json.at("config"), "memberLeaseMs"), 10000) << cfg.body;
  HttpResult hb = Beat(*http_, a, kP, kG);
  EXPECT_EQ(JsonInt(hb.json, "heartbeatIntervalMs"), 400) << hb.body;
  // The same PATCH again is now stale.
  HttpResult again = http_->Patch(
      GroupPath(kP, kG),
      json::value(json::object{{"expectedRevision", rev},
                               {"config", json::object{{"heartbeatIntervalMs", 400}}}}));
  EXPECT_EQ(again.ErrorCode(), "REVISION_CONFLICT") << again.Describe();
  ASSERT_TRUE(Settle({&a, &b}));
  EXPECT_EQ(a.owned.size() + b.owned.size(), 4u);
}

TEST_F(AdminTest, FencedMemberGetsFencedEpochAndMayRejoin) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("a"), b("b");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  ASSERT_TRUE(Settle({&a, &b}));
  const int64_t b_epoch = b.epoch;
  const json::object b_req = b.Request();

  HttpResult f = http_->Post(GroupPath(kP, kG) + "/members/b/fence", "");
  ASSERT_EQ(f.status, 200) << f.Describe();
  const json::object* fm = FindMember(f.json, "b");
  ASSERT_NE(fm, nullptr) << f.body;
  EXPECT_TRUE(fm->at("fenced").as_bool()) << f.body;
  // Fencing an unknown member is a 409, not a silent success.
  HttpResult unknown = http_->Post(GroupPath(kP, kG) + "/members/nobody/fence", "");
  EXPECT_EQ(unknown.status, 409) << unknown.Describe();
  EXPECT_EQ(unknown.ErrorCode(), "UNKNOWN_MEMBER_ID") << unknown.Describe();

  // K5: the zombie's next heartbeats are refused, repeatedly.
  for (int i = 0; i < 2; ++i) {
    HttpResult r = http_->Post(HeartbeatPath(kP, kG), json::value(b_req));
    EXPECT_EQ(r.status, 409) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "FENCED_MEMBER_EPOCH") << r.Describe();
  }
  // A higher epoch than recorded is no way around it.
  {
    json::object forged = b_req;
    forged["memberEpoch"] = b_epoch + 5;
    HttpResult r = http_->Post(HeartbeatPath(kP, kG), json::value(forged));
    EXPECT_EQ(r.ErrorCode(), "FENCED_MEMBER_EPOCH") << r.Describe();
  }
  // The well-behaved client drops everything and rejoins with a new, higher epoch.
  HttpResult r = Beat(*http_, b, kP, kG);
  EXPECT_EQ(r.ErrorCode(), "FENCED_MEMBER_EPOCH");
  EXPECT_TRUE(b.owned.empty());
  HttpResult rejoin = Beat(*http_, b, kP, kG);
  ASSERT_EQ(rejoin.status, 200) << rejoin.Describe();
  EXPECT_GT(b.epoch, b_epoch) << rejoin.body;
  // The old epoch stays fenced after the rejoin.
  HttpResult zombie = http_->Post(HeartbeatPath(kP, kG), json::value(b_req));
  EXPECT_EQ(zombie.ErrorCode(), "FENCED_MEMBER_EPOCH") << zombie.Describe();
  // A is unaffected.
  HttpResult ra = Beat(*http_, a, kP, kG);
  EXPECT_EQ(ra.status, 200) << ra.Describe();
  EXPECT_EQ(a.epoch, 1);
}

TEST_F(AdminTest, DeleteNeedsTheRevisionThenTheGroupIsGone) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2));
  Consumer a("a");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  // Creating it again is a conflict.
  HttpResult dup = http_->Post("/v1/groups", json::value(CreateBody(kP, kG, 2)));
  EXPECT_EQ(dup.status, 409) << dup.Describe();
  EXPECT_EQ(dup.ErrorCode(), "GROUP_EXISTS") << dup.Describe();
  const int64_t rev = Revision();
  HttpResult missing = http_->Delete(GroupPath(kP, kG));
  EXPECT_EQ(missing.status, 400) << missing.Describe();
  HttpResult stale =
      http_->Delete(GroupPath(kP, kG) + "?expectedRevision=" + std::to_string(rev - 1));
  EXPECT_EQ(stale.status, 409) << stale.Describe();
  EXPECT_EQ(stale.ErrorCode(), "REVISION_CONFLICT") << stale.Describe();
  EXPECT_EQ(Exists(*cli_, MetadataKey(kP, kG)), 1);

  HttpResult del = http_->Delete(GroupPath(kP, kG) + "?expectedRevision=" + std::to_string(rev));
  ASSERT_EQ(del.status, 200) << del.Describe();
  EXPECT_EQ(Exists(*cli_, MetadataKey(kP, kG)), 0);
  EXPECT_EQ(cli_->Run({"SISMEMBER", kIndexKey, std::string(kP) + ":" + kG}).integer, 0);
  for (const HttpResult& r :
       {http_->Get(GroupPath(kP, kG)), http_->Post(HeartbeatPath(kP, kG), json::value(a.Request())),
        http_->Get(RoutingPath(kP, kG)), http_->Get(GroupPath(kP, kG) + "/export"),
        http_->Delete(GroupPath(kP, kG) + "?expectedRevision=" + std::to_string(rev))}) {
    EXPECT_EQ(r.status, 404) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "GROUP_NOT_FOUND") << r.Describe();
  }
  HttpResult list = http_->Get("/v1/groups");
  EXPECT_EQ(list.body.find("\"" + std::string(kG) + "\""), std::string::npos) << list.body;
}

// L2: export, delete, restore. The restored group is back under a new lineage; clients
// that saw versions the restored history does not contain (newer ones, or the same numbers
// under the old lineage) are told to resync, never answered OK on stale state.
TEST_F(AdminTest, ExportThenRestoreIntoDeletedGroupMakesClientsResync) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("a"), b("b");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  ASSERT_TRUE(Settle({&a, &b}));
  HttpResult exported = http_->Get(GroupPath(kP, kG) + "/export");
  ASSERT_EQ(exported.status, 200) << exported.Describe();
  ASSERT_TRUE(exported.json.is_object()) << exported.body;
  const json::value at_export = Describe();
  const int64_t v_export = JsonInt(at_export, "metadataVersion");
  const std::string l_export = JsonStr(at_export, "lineage");

  // The group moves on after the export: B leaves, the config changes; A sees it all.
  HttpResult left = http_->Post(HeartbeatPath(kP, kG), json::value(b.LeaveRequest()));
  ASSERT_EQ(left.status, 200) << left.Describe();
  const int64_t v_after = JsonInt(left.json, "metadataVersion");
  const std::string l_after = JsonStr(left.json, "lineage");
  ASSERT_EQ(v_after, v_export + 1) << left.body;
  ASSERT_TRUE(Settle({&a}));
  HttpResult cfg = http_->Patch(
      GroupPath(kP, kG),
      json::value(json::object{{"expectedRevision", Revision()},
                               {"config", json::object{{"heartbeatIntervalMs", 400}}}}));
  ASSERT_EQ(cfg.status, 200) << cfg.Describe();
  HttpResult cfg2 = http_->Patch(
      GroupPath(kP, kG),
      json::value(json::object{{"expectedRevision", Revision()},
                               {"config", json::object{{"heartbeatIntervalMs", 300}}}}));
  ASSERT_EQ(cfg2.status, 200) << cfg2.Describe();
  ASSERT_TRUE(Settle({&a}));
  ASSERT_GE(a.version, v_export + 3);
  EXPECT_EQ(a.owned, (std::set<int>{0, 1, 2, 3}));

  HttpResult del =
      http_->Delete(GroupPath(kP, kG) + "?expectedRevision=" + std::to_string(Revision()));
  ASSERT_EQ(del.status, 200) << del.Describe();
  const json::object a_req = a.Request();
  HttpResult gone = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  EXPECT_EQ(gone.ErrorCode(), "GROUP_NOT_FOUND") << gone.Describe();

  // Restore refuses garbage first.
  for (const std::string& bad : {std::string("{"), std::string("{}"), std::string("[]"),
                                 std::string(R"({"aggregate":"x"})")}) {
    HttpResult r = http_->Post("/v1/groups/restore", bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.Describe();
  }
  EXPECT_EQ(Exists(*cli_, MetadataKey(kP, kG)), 0);

  HttpResult restored = http_->Post("/v1/groups/restore", exported.body);
  ASSERT_EQ(restored.status, 200) << restored.Describe();
  const int64_t v_restored = JsonInt(restored.json, "metadataVersion");
  EXPECT_EQ(JsonInt(restored.json, "shardCount"), 4) << restored.body;
  EXPECT_NE(JsonStr(restored.json, "lineage"), l_export) << "a restore starts a new lineage (L2)";
  EXPECT_NE(JsonStr(restored.json, "lineage"), l_after) << "a restore starts a new lineage (L2)";
  EXPECT_FALSE(restored.json.at("correctionRound").is_null()) << restored.body;
  EXPECT_GT(v_restored, v_export) << restored.body;
  EXPECT_LT(v_restored, a.version) << restored.body;
  EXPECT_NE(FindMember(restored.json, "b"), nullptr) << "B is in the export: " << restored.body;
  EXPECT_EQ(Exists(*cli_, MetadataKey(kP, kG)), 1);
  EXPECT_EQ(cli_->Run({"SISMEMBER", kIndexKey, std::string(kP) + ":" + kG}).integer, 1);

  // A saw a newer version than the restored one: SYNC_METADATA with the stored version,
  // identical when repeated.
  HttpResult ra = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  ASSERT_EQ(ra.status, 200) << ra.Describe();
  EXPECT_EQ(JsonStr(ra.json, "status"), "SYNC_METADATA") << ra.body;
  EXPECT_LT(JsonInt(ra.json, "metadataVersion"), a.version) << ra.body;
  HttpResult ra2 = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  EXPECT_EQ(ra2.body, ra.body);
  // A process that saw the restored version's number under the old lineage (M8).
  Consumer c("c");
  c.version = v_after;
  c.lineage = l_after;
  HttpResult rc = Beat(*http_, c, kP, kG);
  ASSERT_EQ(rc.status, 200) << rc.Describe();
  EXPECT_EQ(c.last_status, "SYNC_METADATA") << rc.body;
  EXPECT_NE(c.lineage, l_after);
  // Producers: newer or diverged -> sync; older than the restored history -> ordinary lag,
  // answered with the (newer) restored routing.
  HttpResult newer = http_->Get(RoutingPath(kP, kG, a.version, a.lineage));
  ASSERT_EQ(newer.status, 200) << newer.Describe();
  EXPECT_TRUE(newer.json.at("sync").as_bool()) << newer.body;
  HttpResult diverged = http_->Get(RoutingPath(kP, kG, v_after, l_after));
  EXPECT_TRUE(diverged.json.at("sync").as_bool()) << diverged.body;
  HttpResult older = http_->Get(RoutingPath(kP, kG, v_export, l_export));
  EXPECT_FALSE(older.json.at("sync").as_bool()) << older.body;
  EXPECT_GE(JsonInt(older.json, "metadataVersion"), v_restored) << older.body;
  EXPECT_EQ(JsonInt(older.json, "metadataVersion"), JsonInt(Describe(), "metadataVersion"));
}

// Issue 8 (severe): a restore document with metadataVersion 2^63-2 was accepted (200) and the
// next decision on the group aborted the process, and every coordinator restarted against
// that Redis. Now such a document is a 400 naming the field; and a group whose stored state a
// decision cannot continue (here: at the counter limit, written behind the coordinator's back)
// fails closed alone — its requests get METADATA_UNREADABLE, the event is logged with the
// group and counted — while the process serves every other group.
TEST_F(AdminTest, RestoreWithoutHeadroomIs400AndAnExhaustedGroupFailsClosedAlone) {
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2, ShortLeases()));
  ASSERT_TRUE(CreateGroup(*http_, kP, "other", 2));
  Consumer a("a"), o("o");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, o, kP, "other").status, 200);
  HttpResult exported = http_->Get(GroupPath(kP, kG) + "/export");
  ASSERT_EQ(exported.status, 200) << exported.Describe();

  auto doctored = [&](int64_t version) {
    json::value doc = exported.json;
    json::object& agg = doc.as_object().at("aggregate").as_object();
    agg["metadataVersion"] = version;
    agg["lineageHistory"] = json::array{json::array{version, agg.at("lineage")}};
    return json::serialize(doc);
  };
  for (int64_t v : {INT64_MAX - 1, INT64_MAX}) {
    HttpResult r = http_->Post("/v1/groups/restore", doctored(v));
    EXPECT_EQ(r.status, 400) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "INVALID_REQUEST") << r.Describe();
    EXPECT_NE(r.body.find("metadataVersion"), std::string::npos) << r.body;
  }
  EXPECT_EQ(JsonInt(Describe(), "metadataVersion"),
            JsonInt(exported.json.at("aggregate"), "metadataVersion"))
      << "a refused restore writes nothing";

  // The stored aggregate at the last version a record may hold (2^53 - 1): it loads, but no
  // decision can write after it.
  json::value agg = json::parse(HGet(*cli_, MetadataKey(kP, kG), "aggregate"));
  const int64_t limit = (int64_t{1} << 53) - 1;
  agg.as_object()["metadataVersion"] = limit;
  agg.as_object()["lineageHistory"] =
      json::array{json::array{limit, agg.as_object().at("lineage")}};
  ASSERT_EQ(cli_->Run({"HSET", MetadataKey(kP, kG), "aggregate", json::serialize(agg)}).integer, 0);
  ASSERT_EQ(cli_->Run({"HDEL", MetadataKey(kP, kG), "writeToken"}).integer, 1);
  Consumer b("b");
  HttpResult join = Beat(*http_, b, kP, kG);
  EXPECT_EQ(join.status, 503) << join.Describe();
  EXPECT_EQ(join.ErrorCode(), "METADATA_UNREADABLE") << join.Describe();
  EXPECT_NE(join.body.find("fails closed"), std::string::npos) << join.body;
  EXPECT_EQ(JsonInt(Describe(), "metadataVersion"), limit) << "nothing was written";
  // Ticks keep failing closed for that group (a's 3 s lease ends: the expiry cannot be
  // written), and the other group is served throughout.
  EXPECT_TRUE(WaitFor(
      [&] {
        HttpResult r = Beat(*http_, o, kP, "other");
        EXPECT_EQ(r.status, 200) << r.Describe();
        return Metric(*http_, "rsc_group_invariant_failures_total", "group=\"g\"") >= 3;
      },
      15s, "ticks to fail closed on the exhausted group (expiring a)", 200ms));
  EXPECT_TRUE(coord_->running());
  EXPECT_FALSE(coord_->WaitExit(0ms).has_value()) << coord_->LogTail(20);
  EXPECT_EQ(http_->Get("/healthz").status, 200);
  EXPECT_TRUE(coord_->LogContains("event=invariant_violation group=admin:g"))
      << coord_->LogTail(20);
}

}  // namespace
}  // namespace rsc::integration
