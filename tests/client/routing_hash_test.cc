// Routing hash "jump-xxh64" (SPEC R5.2): the published test vectors of docs/routing.md,
// asserted verbatim, plus rapidcheck properties of jump consistent hashing.

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/decide.h"
#include "core/protocol.h"
#include "rsc/routing.h"

namespace rsc {
namespace {

struct Vector {
  std::string key;
  uint64_t xxh64;
  std::array<int32_t, 5> shards;  // for kShardCounts
};

constexpr std::array<int32_t, 5> kShardCounts = {1, 2, 8, 16, 1000};

// The very table of docs/routing.md ("Test vectors"); keep the two in sync.
const std::vector<Vector>& Vectors() {
  static const auto* v = new std::vector<Vector>{
      {"", 0xef46db3751d8e999ULL, {0, 1, 7, 7, 332}},                // "" (empty)
      {"a", 0xd24ec4f1a98c6e5bULL, {0, 1, 6, 8, 894}},               // a
      {"b", 0x78452aa11af39f9bULL, {0, 1, 2, 2, 745}},               // b
      {"abc", 0x44bc2cf5ad770999ULL, {0, 0, 6, 14, 722}},            // abc
      {"0", 0x633457081244afecULL, {0, 0, 4, 4, 718}},               // 0
      {"1", 0xb7b41276360564d4ULL, {0, 1, 2, 2, 957}},               // 1
      {"42", 0x6de6f5d076d742b9ULL, {0, 1, 1, 1, 37}},               // 42
      {"key", 0x447762562de14334ULL, {0, 1, 1, 10, 159}},            // key
      {"user:1", 0xd9c7c4609e6080f3ULL, {0, 0, 2, 2, 182}},          // user:1
      {"user:2", 0x337be5a0c611350aULL, {0, 0, 0, 0, 377}},          // user:2
      {"order-1001", 0x7f0d44660bee9accULL, {0, 0, 6, 14, 872}},     // order-1001
      {"order-1002", 0x5795eb4d3ba23371ULL, {0, 1, 5, 10, 534}},     // order-1002
      {"Hello, World!", 0xc49aacf8080fe47fULL, {0, 1, 4, 14, 915}},  // Hello, World!
      {"the quick brown fox jumps over the lazy dog",
       0xed714233c5a9a792ULL,
       {0, 0, 0, 0, 37}},  // the quick brown fox jumps over the lazy dog
      {"caf\xc3\xa9", 0x9a40a9b974d85a6aULL, {0, 0, 7, 7, 877}},  // café (UTF-8 63 61 66 c3 a9)
      {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
       0x7179a19f3719f5e1ULL,
       {0, 1, 1, 1, 932}},                                             // 日本語 (UTF-8, 9 bytes)
      {"\xf0\x9f\x9a\x80", 0x9c2eef218fef6af5ULL, {0, 1, 6, 8, 715}},  // 🚀 (UTF-8 f0 9f 9a 80)
      {std::string("a\0b", 3),
       0xb51b25d68d1338c1ULL,
       {0, 1, 6, 12, 121}},  // NUL byte "a\0b" (3 bytes)
      {std::string(32, 'x'), 0xe2df261fc2ec30ebULL, {0, 1, 3, 15, 698}},   // 32 × "x"
      {std::string(1000, 'k'), 0xae25fb8a8c18f17eULL, {0, 0, 6, 6, 538}},  // 1000 × "k"
  };
  return *v;
}

TEST(RoutingHash, PublishedVectorsXxh64) {
  for (const Vector& v : Vectors()) {
    EXPECT_EQ(RoutingKeyHash(v.key), v.xxh64) << "key of " << v.key.size() << " bytes";
  }
}

TEST(RoutingHash, PublishedVectorsShards) {
  for (const Vector& v : Vectors()) {
    for (size_t i = 0; i < kShardCounts.size(); ++i) {
      EXPECT_EQ(ShardForKey(v.key, kShardCounts[i]), v.shards[i])
          << "key of " << v.key.size() << " bytes, shardCount " << kShardCounts[i];
      EXPECT_EQ(JumpConsistentHash(v.xxh64, kShardCounts[i]), v.shards[i]);
    }
  }
}

// docs/routing.md publishes the same table; a drift between the two fails here.
TEST(RoutingHash, DocsTableMatchesTheseVectors) {
  std::ifstream in(std::string(RSC_SOURCE_DIR) + "/docs/routing.md");
  ASSERT_TRUE(in) << "docs/routing.md not found";
  std::string line;
  size_t rows = 0;
  while (std::getline(in, line)) {
    // | # | key | bytes | `xxh64` | n=1 | n=2 | n=8 | n=16 | n=1000 |
    if (line.size() < 3 || line[0] != '|' || !std::isdigit(static_cast<unsigned char>(line[2]))) {
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(cell);
    ASSERT_GE(cells.size(), 9u) << line;
    const size_t n = cells.size();
    const size_t index = std::stoul(cells[0]) - 1;
    ASSERT_LT(index, Vectors().size()) << line;
    const Vector& v = Vectors()[index];
    EXPECT_EQ(std::stoul(cells[n - 7]), v.key.size()) << line;
    const std::string hex = cells[n - 6].substr(cells[n - 6].find('`') + 1, 16);
    EXPECT_EQ(std::stoull(hex, nullptr, 16), v.xxh64) << line;
    for (size_t i = 0; i < kShardCounts.size(); ++i) {
      EXPECT_EQ(std::stoi(cells[n - 5 + i]), v.shards[i]) << line;
    }
    ++rows;
  }
  EXPECT_EQ(rows, Vectors().size());
}

// Anchors independent of this implementation: XXH64 of "" and "a" from the xxHash reference,
// and jump-hash vectors published by another implementation (Microsoft's TypeScript one).
TEST(RoutingHash, IndependentReferenceValues) {
  EXPECT_EQ(RoutingKeyHash(""), 0xef46db3751d8e999ULL);
  EXPECT_EQ(RoutingKeyHash("a"), 0xd24ec4f1a98c6e5bULL);
  EXPECT_EQ(JumpConsistentHash(10863919174838991ULL, 11), 6);
  EXPECT_EQ(JumpConsistentHash(2016238256797177309ULL, 11), 3);
}

TEST(RoutingHash, DegenerateBucketCountsNeverIndexOutOfRange) {
  EXPECT_EQ(JumpConsistentHash(12345, 0), 0);
  EXPECT_EQ(JumpConsistentHash(12345, -3), 0);
  EXPECT_EQ(JumpConsistentHash(0, 1), 0);
}

// The name the client checks routing answers against is the one the coordinator sends —
// taken from a routing answer the coordinator core actually builds, not a literal.
TEST(RoutingHash, NameMatchesTheCoordinator) {
  CreateGroupRequest create{"orders", "billing", 4, GroupConfig{}};
  Result<GroupMetadata> m = DecideCreate(create, Env{1000, "nonce0123456789ab", ""});
  ASSERT_TRUE(m.ok());
  Decision<RoutingResponse> d = DecideRouting(*m, 0, "", 1000);
  ASSERT_TRUE(d.response.ok());
  EXPECT_EQ(d.response->hash, kJumpXxh64);
  EXPECT_EQ(std::string_view(kRoutingHashName), kJumpXxh64);
}

RC_GTEST_PROP(RoutingHash, ShardIsInRange, (const std::string& key)) {
  const int32_t n = *rc::gen::inRange<int32_t>(1, 4097);
  const int32_t s = ShardForKey(key, n);
  RC_ASSERT(s >= 0);
  RC_ASSERT(s < n);
}

// R5.2: growing the shard count from n to m only moves a key onto a new shard (>= n).
RC_GTEST_PROP(RoutingHash, GrowingOnlyMovesKeysOntoNewShards, (const std::string& key)) {
  const int32_t n = *rc::gen::inRange<int32_t>(1, 4096);
  const int32_t m = *rc::gen::inRange<int32_t>(n + 1, 4097);
  const int32_t before = ShardForKey(key, n);
  const int32_t after = ShardForKey(key, m);
  RC_ASSERT(after == before || after >= n);
}

RC_GTEST_PROP(RoutingHash, GrowingByOneMovesOnlyOntoTheNewShard, (uint64_t h)) {
  const int32_t n = *rc::gen::inRange<int32_t>(1, 4096);
  const int32_t before = JumpConsistentHash(h, n);
  const int32_t after = JumpConsistentHash(h, n + 1);
  RC_ASSERT(after == before || after == n);
}

// Balance, loosely: 10000 keys over 8 shards put 1250 ± 20% on each.
TEST(RoutingHash, SpreadsKeysEvenly) {
  std::array<int, 8> counts{};
  for (int i = 0; i < 10000; ++i) ++counts[ShardForKey("key-" + std::to_string(i), 8)];
  for (int c : counts) {
    EXPECT_GT(c, 1000);
    EXPECT_LT(c, 1500);
  }
}

}  // namespace
}  // namespace rsc
