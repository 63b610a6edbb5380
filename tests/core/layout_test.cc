// SPEC §13.1 D1–D3: the stream layout's rules and its stored JSON form.
#include "core/layout.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/layout_codec.h"

namespace rsc {
namespace {

Layout NewStream(int32_t n, const std::string& group = "g") {
  auto l = DeriveGeneration0("orders", n, GroupConfig{}, {}, {}, "tok0");
  EXPECT_TRUE(l.ok()) << l.error().message;
  int32_t count = 0;
  auto added = DecideAddGroup(*l, group, n, &count, "tok1");
  EXPECT_TRUE(added.ok() && added->has_value());
  return **added;
}

TEST(Layout, Generation0OfANewStreamUsesTheV1Keys) {
  auto l = DeriveGeneration0("orders", 3, GroupConfig{}, {}, {}, "tok");
  ASSERT_TRUE(l.ok()) << l.error().message;
  ASSERT_EQ(l->generations.size(), 1u);
  const Generation& g = l->generations[0];
  EXPECT_EQ(g.generation, 0);
  EXPECT_EQ(g.state, GenerationState::kActive);
  ASSERT_EQ(g.shards.size(), 3u);
  for (int32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(g.shards[s].id, s);
    EXPECT_EQ(g.shards[s].stream, ShardStreamKey("orders", s));  // D2: no migration
  }
  EXPECT_TRUE(l->groups.empty());
  EXPECT_EQ(l->version, 1);
  EXPECT_EQ(l->Active(), &l->generations[0]);
}

TEST(Layout, ANewStreamNeedsAShardCount) {
  auto l = DeriveGeneration0("orders", 0, GroupConfig{}, {}, {}, "tok");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ErrorCode::kInvalidRequest);
  EXPECT_NE(l.error().message.find("shardCount is required"), std::string::npos);
  auto big = DeriveGeneration0("orders", kMaxShards + 1, GroupConfig{}, {}, {}, "tok");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kInvalidRequest);
}

// D2: a v1 stream whose groups had different shard counts gets the largest; its version
// starts above every group's metadataVersion (D1), so version stores never see it go back.
TEST(Layout, AV1StreamIsDerivedFromItsGroups) {
  GroupConfig c;
  c.routing_lease_ms = 20000;
  c.routing_refresh_ms = 2000;
  std::vector<ExistingGroup> groups = {{"b", 8, 40, c}, {"a", 16, 7, GroupConfig{}}};
  auto l = DeriveGeneration0("orders", 0, GroupConfig{}, groups, {}, "tok");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->generations[0].shards.size(), 16u);
  EXPECT_EQ(l->groups, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(l->version, 41);
  EXPECT_EQ(l->routing_lease_ms, 20000);  // the first group found
  EXPECT_EQ(l->routing_refresh_ms, 2000);
}

// D3: adopting the layout, as a table.
TEST(Layout, AddGroupAdoptsOrRefusesTheLayout) {
  const Layout l = NewStream(4, "a");
  struct Row {
    const char* group;
    int32_t count;
    bool ok;
    bool writes;
    ErrorCode code;
  } rows[] = {
      {"b", 0, true, true, ErrorCode::kInternal},          // no shardCount: adopts 4
      {"b", 4, true, true, ErrorCode::kInternal},          // the same count
      {"b", 8, false, false, ErrorCode::kLayoutMismatch},  // another count: never two layouts
      {"a", 0, true, false, ErrorCode::kInternal},         // already listed: nothing to write
      {"a", 2, false, false, ErrorCode::kLayoutMismatch},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.group) + "/" + std::to_string(r.count));
    int32_t count = -1;
    auto d = DecideAddGroup(l, r.group, r.count, &count, "tok2");
    ASSERT_EQ(d.ok(), r.ok);
    if (!r.ok) {
      EXPECT_EQ(d.error().code, r.code);
      EXPECT_NE(d.error().message.find("has 4 shards"), std::string::npos) << d.error().message;
      continue;
    }
    EXPECT_EQ(count, 4);
    EXPECT_EQ(d->has_value(), r.writes);
    if (d->has_value()) {
      EXPECT_TRUE((*d)->HasGroup(r.group));
      EXPECT_EQ((*d)->version, l.version + 1);
      EXPECT_EQ((*d)->lineage, "tok2");
      EXPECT_TRUE(CheckLayoutInvariants(**d).ok());
    }
  }
}

TEST(Layout, RemoveGroup) {
  Layout l = NewStream(4, "a");
  int32_t count = 0;
  l = **DecideAddGroup(l, "b", 0, &count, "t");
  std::optional<Layout> alone = DecideRemoveGroup(l, "b", "t3");
  ASSERT_TRUE(alone.has_value());
  EXPECT_EQ(alone->groups, std::vector<std::string>{"a"});
  EXPECT_GT(alone->version, l.version);
  EXPECT_FALSE(DecideRemoveGroup(*alone, "b", "t4").has_value());  // not listed: no write
}

TEST(LayoutCodec, RoundTripsAndIsStrict) {
  Layout l = NewStream(3, "g");
  l.generations[0].state = GenerationState::kSealed;
  Generation g1;
  g1.generation = 1;
  g1.state = GenerationState::kActive;
  g1.shards = {{7, "{orders:7}"}, {9, "{orders:9.x}"}};  // gaps are allowed (D2)
  l.generations.push_back(g1);
  ASSERT_TRUE(CheckLayoutInvariants(l).ok()) << CheckLayoutInvariants(l).error().message;
  auto back = DecodeLayout(EncodeLayout(l));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, l);

  struct Bad {
    std::string edit_from, edit_to, expect;
  } bads[] = {
      {"\"state\":\"ACTIVE\"", "\"state\":\"LIVE\"", "unknown state 'LIVE'"},
      {"\"state\":\"ACTIVE\"", "\"state\":\"SEALED\"", "0 ACTIVE generations"},
      {"\"id\":9", "\"id\":2", "is not above"},
      {"{orders:9.x}", "{orders:7}", "is not a key of shard 9"},  // D2
      {"{orders:9.x}", "{billing:9}", "is not a key of shard 9"},
      {"\"shardCount\":2", "\"shardCount\":3", "shards lists 2"},
      {"\"version\":2", "\"version\":\"2\"", "must be an integer"},
      {"\"groups\":[\"g\"]", "\"groups\":[\"g\",\"g\"]", "not sorted and unique"},
      {"\"groups\":[\"g\"]", "\"groups\":[7]", "groups[0]: must be a string"},
      {"\"hash\":\"jump-xxh64\"", "\"hash\":\"crc\"", "jump-xxh64"},
  };
  const std::string good = EncodeLayout(l);
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.edit_to);
    std::string text = good;
    const size_t at = text.find(b.edit_from);
    ASSERT_NE(at, std::string::npos) << good;
    text.replace(at, b.edit_from.size(), b.edit_to);
    auto r = DecodeLayout(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kMetadataUnreadable);
    EXPECT_NE(r.error().message.find(b.expect), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(DecodeLayout("not json").ok());
  EXPECT_FALSE(DecodeLayout("[]").ok());
}

TEST(LayoutCodec, TheStoredHashIsChecked) {
  const std::string json = EncodeLayout(NewStream(2));
  auto ok = DecodeLayoutHash("orders", {json, "3", "1"});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->revision.value(), 3);
  struct Row {
    LayoutHashFields f;
    std::string stream, expect;
  } rows[] = {
      {{json, "3", "2"}, "orders", "schemaVersion 2 is not supported"},
      {{json, "3", std::nullopt}, "orders", "schemaVersion (absent)"},
      {{json, "x", "1"}, "orders", "revision 'x'"},
      {{json, "0", "1"}, "orders", "revision '0'"},
      {{std::nullopt, "3", "1"}, "orders", "layout field is absent"},
      {{"{", "3", "1"}, "orders", "malformed JSON"},
      {{json, "3", "1"}, "other", "names stream 'orders'"},
  };
  for (const Row& r : rows) {
    auto d = DecodeLayoutHash(r.stream, r.f);
    ASSERT_FALSE(d.ok()) << r.expect;
    EXPECT_EQ(d.error().code, ErrorCode::kMetadataUnreadable);
    EXPECT_NE(d.error().message.find(r.expect), std::string::npos) << d.error().message;
  }
}

// Property: whatever sequence of adds and removes, the layout stays valid, lists exactly the
// groups added and not removed, and its version only grows.
RC_GTEST_PROP(LayoutProps, AddRemoveKeepsTheInvariants,
              (const std::vector<std::pair<bool, int>>& ops)) {
  Layout l = NewStream(5, "g0");
  std::set<std::string> expected = {"g0"};
  for (const auto& [add, which] : ops) {
    const std::string g = "g" + std::to_string(((which % 6) + 6) % 6);
    const int64_t before = l.version;
    if (add) {
      int32_t count = 0;
      auto d = DecideAddGroup(l, g, 0, &count, "t");
      RC_ASSERT(d.ok());
      RC_ASSERT(count == 5);
      if (*d) l = **d;
      expected.insert(g);
    } else {
      if (auto d = DecideRemoveGroup(l, g, "t")) l = *d;
      expected.erase(g);
    }
    RC_ASSERT(l.version >= before);
    RC_ASSERT(CheckLayoutInvariants(l).ok());
  }
  RC_ASSERT(std::vector<std::string>(expected.begin(), expected.end()) == l.groups);
  auto back = DecodeLayout(EncodeLayout(l));
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == l);
}

}  // namespace
}  // namespace rsc
