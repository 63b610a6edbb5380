// SPEC §13.1 D2: a generation's shard keys, spread over a cluster's masters.
#include "core/shard_keys.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/key_slot.h"
#include "core/layout.h"
#include "core/layout_codec.h"

namespace rsc {
namespace {

// The slot map of `redis-cli --cluster create` with three masters.
SlotPlacement ThreeMasters() {
  SlotPlacement m(3);
  for (int s = 0; s < kClusterSlots; ++s) m[s <= 5460 ? 0 : s <= 10922 ? 1 : 2].push_back(s);
  return m;
}

size_t MasterOf(const SlotPlacement& masters, int slot) {
  for (size_t i = 0; i < masters.size(); ++i) {
    for (int s : masters[i]) {
      if (s == slot) return i;
    }
  }
  return masters.size();
}

std::vector<int32_t> Ids(int32_t from, int32_t n) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i) ids.push_back(from + i);
  return ids;
}

TEST(ShardKeys, OneServerKeepsTheV1Keys) {
  EXPECT_EQ(ChooseShardKeys("orders", {0, 1, 7}, {}),
            (std::vector<std::string>{"{orders:0}", "{orders:1}", "{orders:7}"}));
}

// CL2's goal for a new stream of 16 shards on 3 masters: max/min ≤ 1.3 (6/5/5 = 1.2), and
// every shard of one master in one slot of it (their live reads combine into one read).
TEST(ShardKeys, SixteenShardsSpreadOverThreeMastersOneSlotEach) {
  const SlotPlacement masters = ThreeMasters();
  const std::vector<std::string> keys = ChooseShardKeys("orders", Ids(0, 16), masters);
  ASSERT_EQ(keys.size(), 16u);
  std::map<size_t, std::set<int>> slots_per_master;
  std::map<size_t, int> shards_per_master;
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_TRUE(IsShardKeyOf("orders", static_cast<int32_t>(i), keys[i])) << keys[i];
    EXPECT_NE(keys[i], ShardStreamKey("orders", static_cast<int32_t>(i))) << "not tagged";
    const int slot = KeySlot(keys[i]);
    const size_t m = MasterOf(masters, slot);
    ASSERT_LT(m, masters.size());
    slots_per_master[m].insert(slot);
    ++shards_per_master[m];
  }
  ASSERT_EQ(shards_per_master.size(), 3u);
  for (const auto& [m, n] : shards_per_master) {
    EXPECT_TRUE(n == 5 || n == 6) << "master " << m << " has " << n;
    EXPECT_EQ(slots_per_master[m].size(), 1u) << "master " << m;
  }
  // Deterministic, and the next generation of the stream uses the same slot per master.
  EXPECT_EQ(ChooseShardKeys("orders", Ids(0, 16), masters), keys);
  std::set<int> gen0_slots, gen1_slots;
  for (const auto& k : keys) gen0_slots.insert(KeySlot(k));
  for (const auto& k : ChooseShardKeys("orders", Ids(16, 5), masters)) {
    gen1_slots.insert(KeySlot(k));
  }
  EXPECT_EQ(gen0_slots, gen1_slots);
}

// Streams of one shard do not all land on the first master.
TEST(ShardKeys, StreamsOfOneShardSpreadOverTheMasters) {
  const SlotPlacement masters = ThreeMasters();
  std::map<size_t, int> per_master;
  for (int i = 0; i < 60; ++i) {
    const auto keys = ChooseShardKeys("s" + std::to_string(i), {0}, masters);
    ++per_master[MasterOf(masters, KeySlot(keys[0]))];
  }
  ASSERT_EQ(per_master.size(), 3u);
  for (const auto& [m, n] : per_master) EXPECT_GE(n, 8) << "master " << m;
}

RC_GTEST_PROP(ShardKeys, EveryKeyIsInItsMastersSlotAndParsesBack, ()) {
  const int n_masters = *rc::gen::inRange(1, 6);
  SlotPlacement masters(static_cast<size_t>(n_masters));
  // Random non-empty slot sets: every slot to a random master, then no master empty.
  for (int s = 0; s < kClusterSlots; s += *rc::gen::inRange(1, 200)) {
    masters[static_cast<size_t>(*rc::gen::inRange(0, n_masters))].push_back(s);
  }
  for (auto& m : masters) {  // a master without slots takes one from the largest
    if (!m.empty()) continue;
    auto& largest =
        *std::max_element(masters.begin(), masters.end(),
                          [](const auto& a, const auto& b) { return a.size() < b.size(); });
    m.push_back(largest.back());
    largest.pop_back();
  }
  for (auto& m : masters) std::sort(m.begin(), m.end());
  const std::string stream = *rc::gen::element<std::string>("orders", "a.b:c-1", "x");
  const int32_t first = *rc::gen::inRange(0, 100000);
  const int32_t count = *rc::gen::inRange(1, 20);
  const auto keys = ChooseShardKeys(stream, Ids(first, count), masters);
  std::map<size_t, int> per_master;
  for (int32_t i = 0; i < count; ++i) {
    const std::string& key = keys[static_cast<size_t>(i)];
    RC_ASSERT(IsShardKeyOf(stream, first + i, key));
    RC_ASSERT(!IsShardKeyOf(stream, first + i + 1, key));
    const size_t m = MasterOf(masters, KeySlot(key));
    RC_ASSERT(m < masters.size());
    ++per_master[m];
  }
  int lo = count, hi = 0;
  for (int m = 0; m < n_masters; ++m) {
    lo = std::min(lo, per_master[static_cast<size_t>(m)]);
    hi = std::max(hi, per_master[static_cast<size_t>(m)]);
  }
  RC_ASSERT(hi - lo <= 1);
}

TEST(ShardKeys, OnlyTheStreamsOwnShardKeysAreAccepted) {
  struct Row {
    const char* stream;
    int32_t id;
    const char* key;
    bool ok;
  };
  const Row rows[] = {
      {"orders", 3, "{orders:3}", true},
      {"orders", 3, "{orders:3.a9}", true},
      {"orders", 3, "{orders:3.12345678}", true},
      {"orders", 3, "{orders:3.123456789}", false},  // tag too long
      {"orders", 3, "{orders:3.A}", false},          // not [0-9a-z]
      {"orders", 3, "{orders:3.}", false},           // empty tag
      {"orders", 3, "{orders:4}", false},            // another shard
      {"orders", 3, "{orders:30}", false},
      {"orders", 3, "{orders:3}x", false},
      {"orders", 3, "orders:3", false},
      {"orders", 3, "{other:3}", false},
      {"orders", 3, "redis-stream:coord:{orders}:layout", false},
      {"a:1", 2, "{a:1:2}", true},
      {"a", 1, "{a:1:2}", false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(IsShardKeyOf(r.stream, r.id, r.key), r.ok) << r.stream << " " << r.id << " " << r.key;
  }
}

// A layout naming a key that is not its shard's is corrupt: it would route producers to a key
// no group reads. Decoding it fails closed (SPEC §7).
TEST(ShardKeys, ALayoutNamingAForeignKeyIsRefused) {
  Layout l = DeriveGeneration0("orders", 2, GroupConfig{}, {}, {}, "t").value();
  l.generations[0].shards[1].stream = "{billing:1}";
  EXPECT_FALSE(CheckLayoutInvariants(l).ok());
  auto decoded = DecodeLayout(EncodeLayout(l));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, ErrorCode::kMetadataUnreadable);
  EXPECT_NE(decoded.error().message.find("{billing:1}"), std::string::npos)
      << decoded.error().message;
}

TEST(ShardKeys, ANewStreamOnAClusterGetsSpreadKeys) {
  auto l = DeriveGeneration0("orders", 16, GroupConfig{}, {}, ThreeMasters(), "t");
  ASSERT_TRUE(l.ok()) << l.error().message;
  std::set<size_t> masters;
  for (const LayoutShard& s : l->generations[0].shards) {
    masters.insert(MasterOf(ThreeMasters(), KeySlot(s.stream)));
  }
  EXPECT_EQ(masters.size(), 3u);
  auto next = DecideReshard(*l, 5, ThreeMasters(), "t2");
  ASSERT_TRUE(next.ok()) << next.error().message;
  for (const LayoutShard& s : next->generations[1].shards) {
    EXPECT_TRUE(IsShardKeyOf("orders", s.id, s.stream));
    EXPECT_NE(s.stream, ShardStreamKey("orders", s.id));
  }
}

// A stream without a layout record is derived from its groups with the groups' own keys (a
// restore of a cluster stream's export keeps them); a group that read a later generation
// means the layout of a resharded stream was lost: fail closed (RS6), never rebuild
// generation 0 over sealed keys.
TEST(ShardKeys, DerivingFromGroupsKeepsTheirKeysOrFailsClosed) {
  ExistingGroup a{"a", 2, 5, GroupConfig{}, {{0, "{orders:0.x1}"}, {1, "{orders:1.y2}"}}, 0};
  auto l = DeriveGeneration0("orders", 0, GroupConfig{}, {a}, ThreeMasters(), "t");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->generations[0].shards,
            (std::vector<LayoutShard>{{0, "{orders:0.x1}"}, {1, "{orders:1.y2}"}}));

  ExistingGroup v1{"b", 3, 1, GroupConfig{}, {}, 0};  // a v1 record: keys {P:s}
  l = DeriveGeneration0("orders", 0, GroupConfig{}, {a, v1}, {}, "t");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->generations[0].shards[1].stream, "{orders:1.y2}");
  EXPECT_EQ(l->generations[0].shards[2].stream, "{orders:2}");

  ExistingGroup resharded = a;
  resharded.newest_generation = 1;
  auto lost = DeriveGeneration0("orders", 0, GroupConfig{}, {v1, resharded}, {}, "t");
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.error().code, ErrorCode::kMetadataUnreadable);
  EXPECT_NE(lost.error().message.find("Stream layout lost"), std::string::npos);

  ExistingGroup other{"c", 2, 1, GroupConfig{}, {{1, "{orders:1.zz}"}}, 0};
  auto disagree = DeriveGeneration0("orders", 0, GroupConfig{}, {a, other}, {}, "t");
  ASSERT_FALSE(disagree.ok());
  EXPECT_EQ(disagree.error().code, ErrorCode::kMetadataUnreadable);
}

}  // namespace
}  // namespace rsc
