// SPEC §13.1 D1–D3: the stream layout's rules and its stored JSON form.
#include "core/layout.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/decide.h"
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

// D3 for a restore: an export fits the stream if its shards are the stream's history,
// whatever its count; it adopts the layout after the write (GroupService::RestoreGroup).
TEST(Layout, ARestoredExportFitsTheLayoutItsShardsBelongTo) {
  const Layout l0 = NewStream(4, "a");
  auto created = DecideCreate(CreateGroupRequest{"orders", "a", 4, GroupConfig{}},
                              Env{1000, "nonce-1", "layout-test-lineage-key-1"});
  ASSERT_TRUE(created.ok()) << created.error().message;
  GroupMetadata before = *created;  // an export taken before the reshard: generation 0
  ASSERT_TRUE(AdoptLayoutInPlace(before, l0, 1).ok());
  ASSERT_TRUE(CheckRestoreFitsLayout(l0, before).ok());

  auto prepared = DecideReshard(l0, 8, SlotPlacement{}, "tok3");
  ASSERT_TRUE(prepared.ok()) << prepared.error().message;
  std::optional<Layout> l1 = DecideActivate(*prepared, "tok4");  // gen 0 SEALED, gen 1 ACTIVE
  ASSERT_TRUE(l1.has_value());
  Status fits = CheckRestoreFitsLayout(*l1, before);
  EXPECT_TRUE(fits.ok()) << "4 shards of generation 0 against an ACTIVE generation of 8: "
                         << (fits.ok() ? "" : fits.error().message);
  // Then adopted in place, part of the restore's write: its shards keep their state, the
  // children come free (waiting for their parents), no version of its own.
  GroupMetadata adopted = before;
  adopted.shards[1].owner = adopted.shards[1].target = "m1";  // a member's, kept as it is
  adopted.members.push_back(Member{MemberId("m1")});
  before.shards[1] = adopted.shards[1];
  before.members = adopted.members;
  ASSERT_TRUE(AdoptLayoutInPlace(adopted, *l1, 3).ok());
  EXPECT_EQ(adopted.version, before.version);
  EXPECT_EQ(adopted.active_generation, 1);
  EXPECT_EQ(adopted.shard_count, 8);
  EXPECT_EQ(adopted.layout_revision, 3);
  ASSERT_EQ(adopted.shards.size(), 12u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(adopted.shards[i], before.shards[i]);
  for (size_t i = 4; i < 12; ++i) {
    EXPECT_EQ(adopted.shards[i].generation, 1);
    EXPECT_TRUE(adopted.shards[i].owner.empty() && adopted.shards[i].target.empty());
    EXPECT_FALSE(adopted.Assignable(adopted.shards[i])) << "a child before its parents";
  }

  // Generation 0 retired and dropped (its keys deleted): its shards no longer matter.
  std::optional<Layout> retired = DecideRetire(*l1, 0, 5000, "tok5");
  ASSERT_TRUE(retired.has_value());
  std::optional<Layout> dropped = DecideDropRetired(*retired, 0, "tok6");
  ASSERT_TRUE(dropped.has_value());
  ASSERT_EQ(dropped->generations.front().generation, 1);
  EXPECT_TRUE(CheckRestoreFitsLayout(*dropped, before).ok());
  GroupMetadata late = before;
  ASSERT_TRUE(AdoptLayoutInPlace(late, *dropped, 4).ok());
  ASSERT_EQ(late.shards.size(), 8u) << "the dropped generation's shards left";
  EXPECT_EQ(late.shards.front().id, 4);
  EXPECT_TRUE(late.Assignable(late.shards.front())) << "no parent left to wait for";

  // An export from after the reshard against the layout from before it: the layout is
  // behind the streams (RS6), never adopted backwards.
  GroupMetadata after = *created;
  ASSERT_TRUE(AdoptLayoutInPlace(after, *l1, 2).ok());
  ASSERT_EQ(after.active_generation, 1);
  fits = CheckRestoreFitsLayout(l0, after);
  ASSERT_FALSE(fits.ok());
  EXPECT_EQ(fits.error().code, ErrorCode::kLayoutMismatch);
  EXPECT_NE(fits.error().message.find("newer than the layout's"), std::string::npos)
      << fits.error().message;

  // Another history: a shard under another key, a shard id the layout gives another
  // generation.
  GroupMetadata other_key = before;
  other_key.shards[2].stream = "{elsewhere:2}";
  fits = CheckRestoreFitsLayout(*l1, other_key);
  ASSERT_FALSE(fits.ok());
  EXPECT_EQ(fits.error().code, ErrorCode::kLayoutMismatch);
  EXPECT_NE(fits.error().message.find("shard 2 is generation 0 with key {elsewhere:2}"),
            std::string::npos)
      << fits.error().message;
  const Layout wide = NewStream(16, "a");  // ids 0..15 are generation 0 there
  fits = CheckRestoreFitsLayout(wide, after);
  ASSERT_FALSE(fits.ok());
  EXPECT_EQ(fits.error().code, ErrorCode::kLayoutMismatch) << fits.error().message;
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
