// Level 2: the stream layout (SPEC §13.1 D1–D4) against a real coordinator and Redis:
// groups of one stream share one layout, a v1 stream gets its layout derived from its
// groups, and a missing or corrupt layout is handled like §7 metadata.

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kP = "orders";

std::string StreamPath(const std::string& p) { return "/v1/streams/" + p; }

class LayoutTest : public LiveCoordinatorTest {
 protected:
  json::value Stream(const std::string& p = kP) {
    HttpResult r = http_->Get(StreamPath(p));
    EXPECT_EQ(r.status, 200) << r.Describe();
    return r.json;
  }
  static std::vector<std::string> Groups(const json::value& v) {
    std::vector<std::string> out;
    for (const json::value& g : v.at("groups").as_array()) out.emplace_back(g.as_string());
    return out;
  }
  static size_t ActiveShards(const json::value& v) {
    for (const json::value& g : v.at("generations").as_array()) {
      if (g.at("state").as_string() == "ACTIVE") return g.at("shards").as_array().size();
    }
    return 0;
  }
};

// D3: a second group adopts the stream's layout; another shard count is refused and
// changes nothing; a PATCH shardCount is refused (v1 grew one group in place: its producers
// wrote shards another group of the stream never read).
TEST_F(LayoutTest, GroupsOfOneStreamShareOneLayout) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 4));
  json::value v = Stream();
  EXPECT_EQ(JsonInt(v, "revision"), 1) << JsonString(v);
  EXPECT_EQ(Groups(v), std::vector<std::string>{"billing"});
  ASSERT_EQ(v.at("generations").as_array().size(), 1u);
  const json::value& g0 = v.at("generations").as_array()[0];
  EXPECT_EQ(JsonInt(g0, "generation"), 0);
  EXPECT_EQ(g0.at("shards").as_array()[3].at("stream").as_string(), "{orders:3}");

  HttpResult mismatch = http_->Post("/v1/groups", json::value(CreateBody(kP, "audit", 8)));
  EXPECT_EQ(mismatch.status, 409) << mismatch.Describe();
  EXPECT_EQ(mismatch.ErrorCode(), "LAYOUT_MISMATCH") << mismatch.Describe();
  EXPECT_NE(mismatch.body.find("has 4 shards"), std::string::npos) << mismatch.body;
  EXPECT_EQ(http_->Get(GroupPath(kP, "audit")).status, 404);
  EXPECT_EQ(JsonInt(Stream(), "revision"), 1) << "a refused create wrote the layout";

  json::object adopt{{"stream", kP}, {"group", "audit"}};
  HttpResult created = http_->Post("/v1/groups", json::value(adopt));
  ASSERT_EQ(created.status, 201) << created.Describe();
  EXPECT_EQ(JsonInt(created.json, "shardCount"), 4) << created.body;
  EXPECT_EQ(Groups(Stream()), (std::vector<std::string>{"audit", "billing"}));

  // SPEC RS1: no group changes the stream's shard count by PATCH, shared or alone.
  const int64_t rev = JsonInt(http_->Get(GroupPath(kP, "billing")).json, "revision");
  HttpResult grow =
      http_->Patch(GroupPath(kP, "billing"),
                   json::value(json::object{{"expectedRevision", rev}, {"shardCount", 8}}));
  EXPECT_EQ(grow.ErrorCode(), "INVALID_REQUEST") << grow.Describe();
  EXPECT_NE(grow.body.find("POST /v1/streams/orders/reshard"), std::string::npos) << grow.body;
  EXPECT_EQ(ActiveShards(Stream()), 4u);
  EXPECT_EQ(JsonInt(http_->Get(GroupPath(kP, "billing")).json, "shardCount"), 4);

  // Deleted groups leave the layout; alone again, the group still reshards only by the
  // stream's endpoint.
  const int64_t audit_rev = JsonInt(http_->Get(GroupPath(kP, "audit")).json, "revision");
  HttpResult del =
      http_->Delete(GroupPath(kP, "audit") + "?expectedRevision=" + std::to_string(audit_rev));
  ASSERT_EQ(del.status, 200) << del.Describe();
  EXPECT_EQ(Groups(Stream()), std::vector<std::string>{"billing"});
  grow = http_->Patch(GroupPath(kP, "billing"),
                      json::value(json::object{{"expectedRevision", rev}, {"shardCount", 8}}));
  EXPECT_EQ(grow.ErrorCode(), "INVALID_REQUEST") << grow.Describe();
  EXPECT_EQ(ActiveShards(Stream()), 4u);
}

TEST_F(LayoutTest, UnknownAndInvalidStreams) {
  HttpResult none = http_->Get(StreamPath("nothing"));
  EXPECT_EQ(none.status, 404) << none.Describe();
  EXPECT_EQ(none.ErrorCode(), "STREAM_NOT_FOUND") << none.Describe();
  HttpResult bad = http_->Get(StreamPath("bad%7Bname"));
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  HttpResult post = http_->Post(StreamPath(kP), json::value(json::object{}));
  EXPECT_EQ(post.status, 405) << post.Describe();
  // A new stream needs a shard count.
  HttpResult no_count =
      http_->Post("/v1/groups", json::value(json::object{{"stream", "fresh"}, {"group", "g"}}));
  EXPECT_EQ(no_count.status, 400) << no_count.Describe();
  EXPECT_NE(no_count.body.find("shardCount is required"), std::string::npos) << no_count.body;
  EXPECT_EQ(Exists(*cli_, LayoutKey("fresh")), 0);
}

// D2: a stream from before layouts (groups, no layout key) gets generation 0 derived from
// its groups on first use, with a version above every group's metadataVersion (D1).
TEST_F(LayoutTest, AV1StreamGetsItsLayoutFromItsGroups) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 3));
  Consumer c("c1");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Beat(*http_, c, kP, "billing").status, 200);
  const int64_t group_version =
      JsonInt(http_->Get(GroupPath(kP, "billing")).json, "metadataVersion");
  ASSERT_GT(group_version, 1);
  ASSERT_EQ(cli_->Run({"DEL", LayoutKey(kP)}).integer, 1);
  // A producer routing by the stream finds it too: its first read derives generation 0.
  HttpResult routing = http_->Get(StreamPath(kP) + "/routing");
  ASSERT_EQ(routing.status, 200) << routing.Describe();
  EXPECT_EQ(JsonInt(routing.json, "shardCount"), 3) << routing.body;
  EXPECT_GT(JsonInt(routing.json, "metadataVersion"), group_version) << routing.body;
  EXPECT_EQ(Exists(*cli_, LayoutKey(kP)), 1);

  json::object adopt{{"stream", kP}, {"group", "audit"}};
  HttpResult created = http_->Post("/v1/groups", json::value(adopt));
  ASSERT_EQ(created.status, 201) << created.Describe();
  EXPECT_EQ(JsonInt(created.json, "shardCount"), 3) << created.body;
  json::value v = Stream();
  EXPECT_EQ(Groups(v), (std::vector<std::string>{"audit", "billing"}));
  EXPECT_EQ(ActiveShards(v), 3u);
  EXPECT_GT(JsonInt(v, "version"), group_version) << JsonString(v);
  EXPECT_EQ(HGet(*cli_, LayoutKey(kP), "schemaVersion"), "1");
}

// D4: producers route by the stream: the layout's ACTIVE shards, version and lineage, its
// generation and revision, and the routing lease taken from the first group's config.
TEST_F(LayoutTest, StreamRoutingAnswersFromTheLayout) {
  json::object create = CreateBody(kP, "billing", 4);
  create["config"] = json::object{{"routingLeaseMs", 20000}, {"routingRefreshMs", 2000}};
  HttpResult created = http_->Post("/v1/groups", json::value(create));
  ASSERT_EQ(created.status, 201) << created.Describe();
  const json::value view = Stream();
  HttpResult r = http_->Get(StreamPath(kP) + "/routing");
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(JsonInt(r.json, "metadataVersion"), JsonInt(view, "version")) << r.body;
  EXPECT_EQ(r.json.at("lineage"), view.at("lineage")) << r.body;
  EXPECT_EQ(JsonInt(r.json, "layoutRevision"), JsonInt(view, "revision")) << r.body;
  EXPECT_EQ(JsonInt(r.json, "generation"), 0);
  EXPECT_EQ(JsonInt(r.json, "routingLeaseMs"), 20000);
  EXPECT_EQ(JsonInt(r.json, "refreshIntervalMs"), 2000);
  EXPECT_FALSE(r.json.at("sync").as_bool());
  HttpResult group = http_->Get(RoutingPath(kP, "billing"));
  ASSERT_EQ(group.status, 200) << group.Describe();
  EXPECT_EQ(r.json.at("shards"), group.json.at("shards")) << "the same shards and keys";
  EXPECT_EQ(JsonInt(r.json, "shardCount"), 4);

  // A producer that saw a newer layout (a rollback lost it) is told the stored one, with sync.
  const int64_t version = JsonInt(view, "version");
  HttpResult ahead =
      http_->Get(StreamPath(kP) + "/routing?observedVersion=" + std::to_string(version + 5));
  ASSERT_EQ(ahead.status, 200) << ahead.Describe();
  EXPECT_TRUE(ahead.json.at("sync").as_bool()) << ahead.body;
  EXPECT_EQ(JsonInt(ahead.json, "metadataVersion"), version);
  EXPECT_EQ(JsonInt(Stream(), "revision"), JsonInt(view, "revision")) << "routing wrote";

  HttpResult none = http_->Get(StreamPath("nothing") + "/routing");
  EXPECT_EQ(none.ErrorCode(), "STREAM_NOT_FOUND") << none.Describe();
  HttpResult bad = http_->Get(StreamPath(kP) + "/routing?observedVersion=-1");
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  HttpResult long_lineage = http_->Get(StreamPath(kP) + "/routing?lineage=" + std::string(65, 'a'));
  EXPECT_EQ(long_lineage.status, 400) << long_lineage.Describe();
}

// D4: PATCH /v1/streams/{P} changes the routing lease and refresh the stream's routing
// carries, revision-checked; bad input changes nothing.
TEST_F(LayoutTest, PatchStreamChangesTheStreamsRoutingLease) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 2));
  const json::value before = Stream();
  const int64_t rev = JsonInt(before, "revision");
  auto patch = [&](json::object body) { return http_->Patch(StreamPath(kP), json::value(body)); };

  struct Refused {
    json::object body;
    int status;
    const char* code;
  };
  for (const Refused& c : std::vector<Refused>{
           {{{"expectedLayoutRevision", rev + 1}, {"routingLeaseMs", 60000}},
            409,
            "REVISION_CONFLICT"},
           {{{"expectedLayoutRevision", rev}, {"routingRefreshMs", 30000}},
            400,
            "INVALID_REQUEST"},  // not below the lease (30000)
           {{{"expectedLayoutRevision", rev}, {"routingLeaseMs", 5}}, 400, "INVALID_REQUEST"},
           {{{"expectedLayoutRevision", rev}}, 400, "INVALID_REQUEST"},
           {{{"routingLeaseMs", 60000}}, 400, "INVALID_REQUEST"},
       }) {
    HttpResult r = patch(c.body);
    EXPECT_EQ(r.status, c.status) << json::serialize(c.body) << ": " << r.Describe();
    EXPECT_EQ(r.ErrorCode(), c.code) << r.Describe();
  }
  HttpResult missing = http_->Patch(
      StreamPath("nothing"),
      json::value(json::object{{"expectedLayoutRevision", 1}, {"routingLeaseMs", 60000}}));
  EXPECT_EQ(missing.ErrorCode(), "STREAM_NOT_FOUND") << missing.Describe();
  EXPECT_EQ(Stream(), before) << "a refused patch changed the layout";

  HttpResult ok = patch(
      {{"expectedLayoutRevision", rev}, {"routingLeaseMs", 60000}, {"routingRefreshMs", 7000}});
  ASSERT_EQ(ok.status, 200) << ok.Describe();
  EXPECT_EQ(JsonInt(ok.json, "routingLeaseMs"), 60000) << ok.body;
  EXPECT_EQ(JsonInt(ok.json, "routingRefreshMs"), 7000) << ok.body;
  EXPECT_EQ(JsonInt(ok.json, "revision"), rev + 1);
  EXPECT_EQ(JsonInt(ok.json, "version"), JsonInt(before, "version") + 1);
  EXPECT_EQ(ok.json.at("generations"), before.at("generations"));
  HttpResult r = http_->Get(StreamPath(kP) + "/routing");
  EXPECT_EQ(JsonInt(r.json, "routingLeaseMs"), 60000) << r.body;
  EXPECT_EQ(JsonInt(r.json, "refreshIntervalMs"), 7000) << r.body;
  // The same values again: answered, nothing written.
  HttpResult same = patch({{"expectedLayoutRevision", rev + 1}, {"routingLeaseMs", 60000}});
  ASSERT_EQ(same.status, 200) << same.Describe();
  EXPECT_EQ(JsonInt(same.json, "revision"), rev + 1);
  // The group's own routing keeps the group's config (docs/protocol.md deviation 28).
  HttpResult group = http_->Get(RoutingPath(kP, "billing"));
  EXPECT_EQ(JsonInt(group.json, "routingLeaseMs"), 30000) << group.body;
}

// §7 for the layout: corrupt or of an unknown schema, it fails closed and is not overwritten;
// groups of the stream keep working (their own keys are intact).
TEST_F(LayoutTest, ACorruptLayoutFailsClosedAndIsNotOverwritten) {
  ASSERT_TRUE(CreateGroup(*http_, kP, "billing", 2));
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"layout", "{\"stream\":"}, {"schemaVersion", "9"}}) {
    SCOPED_TRACE(field);
    const std::map<std::string, std::string> original = HGetAll(*cli_, LayoutKey(kP));
    ASSERT_EQ(cli_->Run({"HSET", LayoutKey(kP), field, value}).integer, 0);
    HttpResult view = http_->Get(StreamPath(kP));
    EXPECT_EQ(view.status, 503) << view.Describe();
    EXPECT_EQ(view.ErrorCode(), "METADATA_UNREADABLE") << view.Describe();
    HttpResult routing = http_->Get(StreamPath(kP) + "/routing");  // producers fail closed
    EXPECT_EQ(routing.ErrorCode(), "METADATA_UNREADABLE") << routing.Describe();
    HttpResult patched = http_->Patch(
        StreamPath(kP),
        json::value(json::object{{"expectedLayoutRevision", 1}, {"routingLeaseMs", 60000}}));
    EXPECT_EQ(patched.ErrorCode(), "METADATA_UNREADABLE") << patched.Describe();
    HttpResult create =
        http_->Post("/v1/groups", json::value(json::object{{"stream", kP}, {"group", "audit"}}));
    EXPECT_EQ(create.ErrorCode(), "METADATA_UNREADABLE") << create.Describe();
    EXPECT_EQ(http_->Get(GroupPath(kP, "audit")).status, 404);
    EXPECT_EQ(HGet(*cli_, LayoutKey(kP), field), value) << "the corrupt field was overwritten";
    Consumer c("c1");
    EXPECT_EQ(Beat(*http_, c, kP, "billing").status, 200);
    ASSERT_EQ(cli_->Run({"HSET", LayoutKey(kP), field, original.at(field)}).integer, 0);
  }
  EXPECT_EQ(Groups(Stream()), std::vector<std::string>{"billing"});
}

}  // namespace
}  // namespace rsc::integration
