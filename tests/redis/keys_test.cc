// Key layout (SPEC R2.1, R2.2), cluster slots and the local script hash.

#include "redis/keys.h"

#include <gtest/gtest.h>

#include "redis/cluster.h"
#include "redis/sha1.h"

namespace rsc::redis {
namespace {

TEST(KeysTest, LayoutMatchesSpec) {
  GroupKey k{"orders", "billing"};
  EXPECT_EQ(MetadataKey(k), "redis-stream:coord:{orders:billing}:metadata");
  EXPECT_EQ(LivenessKey(k), "redis-stream:coord:{orders:billing}:liveness");
  EXPECT_EQ(LockKey(k), "redis-stream:coord:{orders:billing}:lock");
  EXPECT_EQ(kIndexKey, "redis-stream:coord:groups");
}

TEST(KeysTest, AllKeysOfAGroupShareOneSlot) {
  GroupKey k{"eu:orders.v2", "g-1"};
  const int slot = KeySlot(MetadataKey(k));
  EXPECT_EQ(KeySlot(LivenessKey(k)), slot);
  EXPECT_EQ(KeySlot(LockKey(k)), slot);
  EXPECT_EQ(slot, KeySlot(k.Tag()));
}

TEST(KeysTest, IndexMembersSplitAtLastColon) {
  auto k = ParseIndexMember("eu:orders:billing");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->stream, "eu:orders");
  EXPECT_EQ(k->group, "billing");
  EXPECT_FALSE(ParseIndexMember("nocolon").has_value());
  EXPECT_FALSE(ParseIndexMember(":g").has_value());
  EXPECT_FALSE(ParseIndexMember("p:").has_value());
}

TEST(KeysTest, MetadataKeyParsesBack) {
  GroupKey k{"a:b", "c"};
  auto parsed = ParseMetadataKey(MetadataKey(k));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, k);
  EXPECT_FALSE(ParseMetadataKey(LivenessKey(k)).has_value());
  EXPECT_FALSE(ParseMetadataKey("redis-stream:coord:groups").has_value());
  EXPECT_FALSE(ParseMetadataKey("other:{a:b}:metadata").has_value());
}

TEST(ClusterSlotTest, MatchesTheClusterSpecVectors) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);             // the spec's check value
  EXPECT_EQ(Crc16("6789", Crc16("12345")), 0x31C3);  // continued from a prefix (D2 tag search)
  EXPECT_EQ(KeySlot("foo"), 12182);                  // CLUSTER KEYSLOT foo
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}"));
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));  // empty first tag: whole key hashed
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
}

TEST(Sha1Test, KnownVectors) {
  EXPECT_EQ(Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(Sha1Hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // Lengths around the padding boundaries (one or two final blocks).
  EXPECT_EQ(Sha1Hex(std::string(55, 'a')), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(Sha1Hex(std::string(56, 'a')), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(Sha1Hex(std::string(63, 'a')), "03f09f5b158a7a8cdad920bddc29b81c18a551f5");
  EXPECT_EQ(Sha1Hex(std::string(64, 'a')), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
  EXPECT_EQ(Sha1Hex(std::string(119, 'a')), "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56");
  EXPECT_EQ(Sha1Hex(std::string(120, 'a')), "f34c1488385346a55709ba056ddd08280dd4c6d6");
}

}  // namespace
}  // namespace rsc::redis
