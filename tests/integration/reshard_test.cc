// Level 2: resharding on the coordinator (SPEC §13.2 RS1–RS3, RS5, D3, D5) against a real
// coordinator and Redis, with members driven over HTTP and their reads done with redis-cli:
// the new generation is prepared (consumer groups on its keys), the old one sealed so Redis
// itself refuses stale producers, children wait until every parent is read to its end for
// the group, and a generation retires once every group has done so.

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kP = "orders";
constexpr const char* kSeal = "18446744073709551615-18446744073709551615";

class ReshardTest : public LiveCoordinatorTest {
 protected:
  int64_t TickMs() const override { return 50; }
  // Waits until the tick loop has run at least `n - 1` whole passes (rsc_ticks_total counts
  // group ticks; every pass ticks each group once, after the stream ticks).
  void WaitTicks(int n) {
    const double groups = 3;  // billing, audit, late
    const double start = Metric(*http_, "rsc_ticks_total");
    ASSERT_TRUE(WaitFor([&] { return Metric(*http_, "rsc_ticks_total") >= start + n * groups; },
                        10s, std::to_string(n) + " tick passes"));
  }
  json::value Stream() {
    HttpResult r = http_->Get("/v1/streams/" + std::string(kP));
    EXPECT_EQ(r.status, 200) << r.Describe();
    return r.json;
  }
  std::string StateOf(int generation) {
    const json::value view = Stream();
    if (!view.is_object() || !view.as_object().contains("generations")) return "no view";
    for (const json::value& g : view.at("generations").as_array()) {
      if (JsonInt(g, "generation") == generation) return std::string(g.at("state").as_string());
    }
    return "absent";
  }
  // Group "audit" adopting the stream's layout (D3), with a short routing lease: the wait
  // before a reshard's seal is the longest lease of the stream and its groups.
  ::testing::AssertionResult CreateAudit() {
    const HttpResult r =
        http_->Post("/v1/groups",
                    json::value(json::object{
                        {"stream", kP}, {"group", "audit"}, {"config", ReshardLeases().ToJson()}}));
    if (r.status == 201) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r.Describe();
  }
  HttpResult Reshard(int64_t revision, int shards) {
    return http_->Post(
        "/v1/streams/" + std::string(kP) + "/reshard",
        json::value(json::object{{"expectedLayoutRevision", revision}, {"shardCount", shards}}));
  }
  // Reads everything of `key` for `group` as consumer `name` and acknowledges it, as a
  // consumer's reader does; returns the ids read (the seal included).
  std::vector<std::string> Drain(const std::string& key, const std::string& group,
                                 const std::string& name) {
    std::vector<std::string> ids;
    cli_->Run({"XGROUP", "CREATE", key, group, "0", "MKSTREAM"});  // as a reader does
    for (;;) {
      CliReply r =
          cli_->Run({"XREADGROUP", "GROUP", group, name, "COUNT", "100", "STREAMS", key, ">"});
      if (r.type != CliReply::Type::kArray || r.elements.empty()) break;
      const auto& entries = r.elements[0].elements[1].elements;
      if (entries.empty()) break;
      for (const CliReply& e : entries) {
        ids.push_back(e.elements[0].str);
        cli_->Run({"XACK", key, group, e.elements[0].str});
      }
    }
    return ids;
  }
};

TEST_F(ReshardTest, ShrinkSealsParentsAndChildrenWaitForEveryParent) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 4, ReshardLeases()));
  ASSERT_TRUE(CreateAudit());
  for (int s = 0; s < 4; ++s) {
    ASSERT_FALSE(cli_->Run({"XADD", "{orders:" + std::to_string(s) + "}", "*", "k", "v"}).type ==
                 CliReply::Type::kError);
  }
  // D5: a live member without layout-v2 blocks the reshard.
  Consumer old("old-client");
  ASSERT_EQ(Beat(*http_, old, kP, "audit").status, 200);
  const int64_t rev = JsonInt(Stream(), "revision");
  HttpResult refused = Reshard(rev, 2);
  EXPECT_EQ(refused.ErrorCode(), "CLIENTS_TOO_OLD") << refused.Describe();
  EXPECT_NE(refused.body.find("old-client"), std::string::npos) << refused.body;
  ASSERT_EQ(http_->Post("/v1/groups/orders/audit/leave", json::value(old.LeaveRequest())).status,
            200);

  Consumer a("a");
  a.features = {"layout-v2", "shard-lease"};
  ASSERT_TRUE(
      WaitFor([&] { return Beat(*http_, a, kP, "billing").status == 200 && a.owned.size() == 4; },
              10s, "a owns the four shards"));
  // RS1: bad input first, nothing changes.
  EXPECT_EQ(Reshard(rev, 0).status, 400);
  EXPECT_EQ(Reshard(rev + 7, 2).ErrorCode(), "REVISION_CONFLICT");
  EXPECT_EQ(http_
                ->Post("/v1/streams/nothing/reshard",
                       json::value(json::object{{"expectedLayoutRevision", 1}, {"shardCount", 2}}))
                .ErrorCode(),
            "STREAM_NOT_FOUND");
  HttpResult ok = Reshard(JsonInt(Stream(), "revision"), 2);
  ASSERT_EQ(ok.status, 200) << ok.Describe();
  // RS2: sealed, then active; Redis itself refuses a stale producer's XADD.
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "ACTIVE"; }, 10s, "generation 1 ACTIVE"));
  EXPECT_EQ(StateOf(0), "SEALED");
  CliReply stale = cli_->Run({"XADD", "{orders:0}", "*", "k", "late"});
  EXPECT_TRUE(stale.type == CliReply::Type::kError) << stale.ToString();
  // D3: both groups' consumer groups exist on the children before anyone writes them.
  CliReply groups = cli_->Run({"XINFO", "GROUPS", "{orders:4}"});
  EXPECT_EQ(groups.elements.size(), 2u) << groups.ToString();
  // Routing names the new generation (positions 0, 1 → ids 4, 5).
  HttpResult routing;
  EXPECT_TRUE(WaitFor(
      [&] {
        routing = http_->Get(RoutingPath(kP, "billing"));
        return JsonInt(routing.json, "generation") == 1;
      },
      10s, "routing of generation 1"))
      << routing.body;
  EXPECT_EQ(JsonInts(routing.json, "shards").size(), 0u);  // objects, not ints
  EXPECT_EQ(routing.json.at("shards").as_array()[0].at("id").as_int64(), 4) << routing.body;

  // RS5: a group created now reads both generations, parents first.
  HttpResult late =
      http_->Post("/v1/groups", json::value(json::object{{"stream", kP}, {"group", "late"}}));
  ASSERT_EQ(late.status, 201) << late.Describe();
  EXPECT_EQ(JsonInt(late.json, "shardCount"), 2) << late.body;
  // O1: the view lists every shard it holds, parents first, then the children.
  ASSERT_EQ(late.json.at("shards").as_array().size(), 6u) << late.body;
  EXPECT_EQ(late.json.at("shards").as_array()[5].at("id").as_int64(), 5) << late.body;
  EXPECT_EQ(late.json.at("shards").as_array()[5].at("generation").as_int64(), 1) << late.body;
  EXPECT_EQ(JsonInt(late.json, "metadataVersion"), 1) << late.body;
  Consumer l("l");
  l.features = {"layout-v2"};
  ASSERT_TRUE(
      WaitFor([&] { return Beat(*http_, l, kP, "late").status == 200 && l.owned.size() == 4; }, 10s,
              "the late group reads the parents"))
      << JsonString(l.last) << http_->Get(GroupPath(kP, "late")).body;
  EXPECT_EQ(l.owned, (std::set<int>{0, 1, 2, 3}));

  // RS3: children wait; they are shown as pending.
  ASSERT_EQ(Beat(*http_, a, kP, "billing").status, 200);
  EXPECT_EQ(JsonInts(a.last, "pendingShards"), (std::vector<int>{4, 5})) << JsonString(a.last);
  EXPECT_EQ(a.owned.size(), 4u);
  // Three parents read to the end: still waiting.
  for (int s = 0; s < 3; ++s) {
    std::vector<std::string> ids = Drain("{orders:" + std::to_string(s) + "}", "billing", "a");
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), kSeal) << "the seal is the last entry";
  }
  // Two whole tick passes (stream ticks run first in each) have seen the three completions.
  ASSERT_NO_FATAL_FAILURE(WaitTicks(3));
  ASSERT_EQ(Beat(*http_, a, kP, "billing").status, 200);
  EXPECT_EQ(JsonInts(a.last, "pendingShards"), (std::vector<int>{4, 5})) << JsonString(a.last);
  EXPECT_TRUE(a.owned.count(3)) << "parent 3 was taken away before it was read";
  EXPECT_FALSE(a.owned.count(4)) << "a child ran before its last parent completed";
  // What the children wait for, as a gauge: billing's parent 3, all four for audit and late.
  EXPECT_EQ(Metric(*http_, "rsc_reshard_parents_incomplete", "stream=\"orders\""), 1 + 4 + 4);
  Drain("{orders:3}", "billing", "a");
  ASSERT_TRUE(WaitFor(
      [&] {
        return Beat(*http_, a, kP, "billing").status == 200 && a.owned == std::set<int>{4, 5};
      },
      10s, "the children once every parent completed"));
  // D2: the answer names the children's keys.
  EXPECT_EQ(JsonStr(a.last.at("streams"), "4"), "{orders:4}") << JsonString(a.last);

  // RS5: audit has not read generation 0, so it is not retired; once it has, it is.
  ASSERT_NO_FATAL_FAILURE(WaitTicks(3));
  EXPECT_EQ(StateOf(0), "SEALED");
  for (int s = 0; s < 4; ++s) {
    Drain("{orders:" + std::to_string(s) + "}", "audit", "x");
    Drain("{orders:" + std::to_string(s) + "}", "late", "l");
  }
  ASSERT_TRUE(WaitFor([&] { return StateOf(0) == "RETIRED"; }, 10s, "generation 0 retired"));
  EXPECT_TRUE(WaitFor(
      [&] { return Metric(*http_, "rsc_reshard_parents_incomplete", "stream=\"orders\"") == 0; },
      10s, "no parent left incomplete once retired"));
  json::value billing = http_->Get(GroupPath(kP, "billing")).json;
  EXPECT_EQ(JsonInt(billing, "shardCount"), 2) << JsonString(billing);
}

// D3 for a restore (issue 12): an export taken before a reshard is restored after it. It
// used to be refused (LAYOUT_MISMATCH: 4 shards against the stream's 8); now the group
// adopts the stream's layout in the same request, as a stream tick would: the parents it
// had, the children waiting for them (RS3). Exports that do not fit are core tests
// (Layout.ARestoredExportFitsTheLayoutItsShardsBelongTo).
TEST_F(ReshardTest, AnExportFromBeforeAReshardIsRestoredIntoTheNewLayout) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 4, ReshardLeases()));
  ASSERT_TRUE(CreateAudit());
  HttpResult exported = http_->Get(GroupPath(kP, "billing") + "/export");
  ASSERT_EQ(exported.status, 200) << exported.Describe();
  ASSERT_EQ(Reshard(JsonInt(Stream(), "revision"), 8).status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "ACTIVE"; }, 10s, "generation 1 ACTIVE"));

  // The group is lost (here deleted; a lost key is restored the same way).
  const int64_t rev = JsonInt(http_->Get(GroupPath(kP, "billing")).json, "revision");
  ASSERT_EQ(
      http_->Delete(GroupPath(kP, "billing") + "?expectedRevision=" + std::to_string(rev)).status,
      200);
  HttpResult restored = http_->Post("/v1/groups/restore", exported.body);
  ASSERT_EQ(restored.status, 200) << restored.Describe();
  EXPECT_EQ(JsonInt(restored.json, "shardCount"), 8) << restored.body;
  const json::array& shards = restored.json.at("shards").as_array();
  ASSERT_EQ(shards.size(), 12u) << "its 4 parents and the 8 children: " << restored.body;
  EXPECT_EQ(shards[0].at("generation").as_int64(), 0) << restored.body;
  EXPECT_EQ(shards[11].at("id").as_int64(), 11) << restored.body;
  EXPECT_EQ(shards[11].at("generation").as_int64(), 1) << restored.body;
  const json::value stream = Stream();
  std::vector<std::string> groups;
  for (const json::value& g : stream.at("groups").as_array()) groups.emplace_back(g.as_string());
  EXPECT_EQ(groups, (std::vector<std::string>{"audit", "billing"})) << JsonString(stream);

  // RS3 for the restored group: parents first, the children wait for them.
  Consumer a("a");
  a.features = {"layout-v2", "shard-lease"};
  ASSERT_TRUE(
      WaitFor([&] { return Beat(*http_, a, kP, "billing").status == 200 && a.owned.size() == 4; },
              15s, "the restored group reads its parents"))
      << JsonString(a.last);
  EXPECT_EQ(a.owned, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(JsonInts(a.last, "pendingShards"), (std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11}))
      << JsonString(a.last);
  CliReply info = cli_->Run({"XINFO", "GROUPS", "{orders:11}"});
  EXPECT_NE(info.ToString().find("billing"), std::string::npos)
      << "D3: the restored group's consumer group on a child: " << info.ToString();
}

// RS6: the layout record rolled back past a reshard (here its hash put back as it was before
// the reshard; a snapshot restore, or a failover on a cluster whose layout and shards live on
// different masters, does the same) while the streams keep their seals. The coordinator finds
// its ACTIVE generation sealed and writes the lost generation back from the seals'
// `rsc-next`: the same ids and keys, so what producers wrote there is read. Entries above the
// highest id that no seal explains fail the stream's routing closed until they are dealt with.
TEST_F(ReshardTest, ALayoutRolledBackPastAReshardIsRolledForwardFromItsSeals) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 4, ReshardLeases()));
  const std::map<std::string, std::string> before = HGetAll(*cli_, LayoutKey(kP));
  ASSERT_EQ(Reshard(JsonInt(Stream(), "revision"), 8).status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "ACTIVE"; }, 10s, "generation 1 ACTIVE"));
  const json::value resharded = Stream();
  CliReply seal = cli_->Run({"XREVRANGE", "{orders:2}", "+", "-", "COUNT", "1"});
  EXPECT_NE(seal.ToString().find("rsc-next"), std::string::npos)
      << "the seal names the generation after it: " << seal.ToString();
  ASSERT_FALSE(cli_->Run({"XADD", "{orders:9}", "*", "k", "v"}).type == CliReply::Type::kError);

  // The rollback: the layout as it was before the reshard.
  ASSERT_EQ(cli_->Run({"DEL", LayoutKey(kP)}).integer, 1);
  std::vector<std::string> hset{"HSET", LayoutKey(kP)};
  for (const auto& [field, value] : before) {
    hset.push_back(field);
    hset.push_back(value);
  }
  ASSERT_EQ(cli_->Run(hset).integer, static_cast<int64_t>(before.size()));
  const auto events = [&](const std::string& event) {
    return Metric(*http_, "rsc_reshard_events_total", "event=\"" + event + "\"");
  };
  ASSERT_TRUE(WaitFor([&] { return events("layout_rolled_forward") == 1; }, 10s,
                      "the layout rolled forward"));
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "ACTIVE"; }, 10s, "generation 1 ACTIVE again"));
  EXPECT_EQ(StateOf(0), "SEALED");
  const json::value forward = Stream();
  EXPECT_EQ(JsonString(forward.at("generations")), JsonString(resharded.at("generations")))
      << "the generation written back is the one lost";
  // M1/M8: the rolled-back version is written on from where the hash went back to; clients
  // that saw the lost versions have another lineage at the same or a higher version: sync.
  EXPECT_GE(JsonInt(forward, "version"), JsonInt(resharded, "version"));
  EXPECT_NE(JsonStr(forward, "lineage"), JsonStr(resharded, "lineage"));
  HttpResult routing = http_->Get(std::string("/v1/streams/orders/routing"));
  EXPECT_EQ(JsonInt(routing.json, "generation"), 1) << routing.Describe();

  // Entries on the key after the highest id (11) that no seal names: behind, fail closed.
  ASSERT_FALSE(cli_->Run({"XADD", "{orders:12}", "*", "k", "v"}).type == CliReply::Type::kError);
  HttpResult refused;
  ASSERT_TRUE(WaitFor(
      [&] {
        refused = http_->Get(std::string("/v1/streams/orders/routing"));
        return refused.status == 503;
      },
      10s, "routing refused"))
      << refused.Describe();
  EXPECT_EQ(refused.ErrorCode(), "METADATA_UNREADABLE") << refused.Describe();
  EXPECT_NE(refused.body.find("runbook 7e"), std::string::npos) << refused.body;
  EXPECT_EQ(http_->Get(RoutingPath(kP, "billing")).ErrorCode(), "METADATA_UNREADABLE");
  EXPECT_EQ(events("layout_behind"), 1);
  EXPECT_EQ(Reshard(JsonInt(Stream(), "revision"), 2).ErrorCode(), "METADATA_UNREADABLE")
      << "a reshard would give those entries' key to a new generation";
  // Dealt with (here: the stray key removed): routing answers again.
  ASSERT_EQ(cli_->Run({"DEL", "{orders:12}"}).integer, 1);
  ASSERT_TRUE(
      WaitFor([&] { return http_->Get(std::string("/v1/streams/orders/routing")).status == 200; },
              10s, "routing back once the layout is in step"));
}

// RS5: a retired generation's keys are emptied after the retention (here the stream's
// routing lease: --retired-retention-ms 0 is raised to it), then the generation leaves the
// layout. An emptied key stays a tombstone (no entries, the maximum last ID): writes to it
// keep failing. A retired key that no longer ends with its seal is kept, with the
// generation, until an operator deals with it (runbook 7a).
class ReshardRetentionTest : public ReshardTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--retired-retention-ms", "0"}; }
  double Events(const std::string& event) {
    return Metric(*http_, "rsc_reshard_events_total", "event=\"" + event + "\"");
  }
};

TEST_F(ReshardRetentionTest, RetiredKeysAreEmptiedAfterTheRoutingLease) {
  Config config = ShortLeases();
  config.routing_lease_ms = 4000;
  config.routing_refresh_ms = 1000;
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 2, config));
  for (int s = 0; s < 2; ++s) {
    ASSERT_FALSE(cli_->Run({"XADD", "{orders:" + std::to_string(s) + "}", "*", "k", "v"}).type ==
                 CliReply::Type::kError);
  }
  Consumer a("a");
  a.features = {"layout-v2", "shard-lease"};
  ASSERT_TRUE(
      WaitFor([&] { return Beat(*http_, a, kP, "billing").status == 200 && a.owned.size() == 2; },
              10s, "a owns the two shards"));
  ASSERT_EQ(Reshard(JsonInt(Stream(), "revision"), 1).status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "ACTIVE"; }, 10s, "generation 1 ACTIVE"));
  for (int s = 0; s < 2; ++s) Drain("{orders:" + std::to_string(s) + "}", "billing", "a");
  ASSERT_TRUE(WaitFor([&] { return StateOf(0) == "RETIRED"; }, 10s, "generation 0 retired"));
  // The seal of {orders:1} goes (as if a failover lost it and something wrote after it).
  ASSERT_EQ(cli_->Run({"XDEL", "{orders:1}", kSeal}).integer, 1);

  ASSERT_TRUE(WaitFor(
      [&] {
        return cli_->Run({"XLEN", "{orders:0}"}).integer == 0;
      },
      15s, "the sealed retired key emptied"));
  EXPECT_EQ(Exists(*cli_, "{orders:0}"), 1) << "a tombstone, not a deleted key";
  for (const char* mode : {"", "NOMKSTREAM"}) {
    std::vector<std::string> xadd = {"XADD", "{orders:0}"};
    if (*mode != '\0') xadd.push_back(mode);
    xadd.insert(xadd.end(), {"*", "k", "late"});
    EXPECT_TRUE(cli_->Run(xadd).type == CliReply::Type::kError) << "the tombstone took a write";
  }
  ASSERT_TRUE(WaitFor([&] { return Events("retired_key_kept") >= 1; }, 10s,
                      "the unsealed retired key reported"));
  EXPECT_EQ(cli_->Run({"XLEN", "{orders:1}"}).integer, 1)
      << "a retired key without its seal was emptied";
  EXPECT_EQ(StateOf(0), "RETIRED") << "the generation left the layout with a key kept";
  EXPECT_EQ(Events("generation_deleted"), 0);

  // The operator decides (runbook 7a) and deletes it: the generation goes, the key comes
  // back as a tombstone.
  ASSERT_EQ(cli_->Run({"DEL", "{orders:1}"}).integer, 1);
  ASSERT_TRUE(WaitFor([&] { return StateOf(0) == "absent"; }, 10s, "generation 0 dropped"));
  EXPECT_EQ(Events("generation_deleted"), 1);
  EXPECT_EQ(Exists(*cli_, "{orders:1}"), 1);
  EXPECT_TRUE(cli_->Run({"XADD", "{orders:1}", "*", "k", "late"}).type == CliReply::Type::kError);
  EXPECT_EQ(Exists(*cli_, "{orders:2}"), 1) << "the ACTIVE generation's key";
  // Not before the retention: the event says how long after its retirement.
  const std::string log = coord_->Log();
  const size_t at = log.find("event=generation_deleted");
  ASSERT_NE(at, std::string::npos) << coord_->LogTail(20);
  const size_t retired = log.find("retired ", at);
  ASSERT_NE(retired, std::string::npos) << log.substr(at, 300);
  EXPECT_GE(std::stoll(log.substr(retired + 8)), 4000) << log.substr(at, 300);
  // Producers and consumers go on on generation 1.
  ASSERT_TRUE(WaitFor(
      [&] { return Beat(*http_, a, kP, "billing").status == 200 && a.owned == std::set<int>{2}; },
      10s, "a reads the only shard of generation 1"));
}

// RS3: a member's completedShards hint is checked in Redis and recorded before its
// heartbeat is decided, so the children come in that very answer — with ticks too rare to
// have done it (ten seconds apart: the test runs between the tick that activates the
// generation and the next one).
class ReshardHintTest : public ReshardTest {
 protected:
  int64_t TickMs() const override { return 10000; }
};

TEST_F(ReshardHintTest, ACompletedShardsHintHandsTheChildrenOnInTheSameAnswer) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 2, ReshardLeases()));
  ASSERT_FALSE(cli_->Run({"XADD", "{orders:0}", "*", "k", "v"}).type == CliReply::Type::kError);
  Consumer a("a");
  a.features = {"layout-v2", "shard-lease"};
  ASSERT_TRUE(
      WaitFor([&] { return Beat(*http_, a, kP, "billing").status == 200 && a.owned.size() == 2; },
              10s, "a owns both shards"));
  HttpResult ok = Reshard(JsonInt(Stream(), "revision"), 3);
  ASSERT_EQ(ok.status, 200) << ok.Describe();
  // The request's own pass seals nothing within a routing lease of the PREPARING write; a
  // tick after that seals and activates.
  EXPECT_EQ(cli_->Run({"EXISTS", "{orders:2}"}).integer, 0) << "a child key exists already";
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)Beat(*http_, a, kP, "billing");  // a stays a member through the wait
        return StateOf(1) == "ACTIVE";
      },
      25s, "generation 1 ACTIVE"));
  ASSERT_EQ(Beat(*http_, a, kP, "billing").status, 200);
  EXPECT_EQ(JsonInts(a.last, "pendingShards"), (std::vector<int>{2, 3, 4})) << JsonString(a.last);
  // D2: once resharded, every named shard's key is in the answer (parents included).
  EXPECT_EQ(JsonStr(a.last.at("streams"), "0"), "{orders:0}") << JsonString(a.last);
  EXPECT_EQ(JsonStr(a.last.at("streams"), "4"), "{orders:4}") << JsonString(a.last);

  // A hint for a shard not yet read to its end changes nothing.
  a.completed = {0};
  ASSERT_EQ(Beat(*http_, a, kP, "billing").status, 200);
  EXPECT_EQ(a.owned, (std::set<int>{0, 1})) << JsonString(a.last);
  for (int s = 0; s < 2; ++s) {
    std::vector<std::string> ids = Drain("{orders:" + std::to_string(s) + "}", "billing", "a");
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), kSeal);
  }
  // Read to their end, but no tick has seen it and nobody said so: still waiting.
  a.completed.clear();
  ASSERT_EQ(Beat(*http_, a, kP, "billing").status, 200);
  EXPECT_EQ(JsonInts(a.last, "pendingShards"), (std::vector<int>{2, 3, 4})) << JsonString(a.last);
  // The hint: checked in Redis, recorded, and the children are assigned in this answer.
  a.completed = {0, 1};
  ASSERT_EQ(Beat(*http_, a, kP, "billing").status, 200);
  EXPECT_EQ(JsonInts(a.last, "assignedShards"), (std::vector<int>{2, 3, 4})) << JsonString(a.last);
}

}  // namespace
}  // namespace rsc::integration
