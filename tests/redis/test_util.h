#pragma once
// Helpers shared by the redis adapter tests: valid aggregates and a per-suite server.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/metadata.h"
#include "redis/redis_store.h"
#include "redis/redis_url.h"
#include "support/redis_process.h"

namespace rsc::redis::testing {

// A GroupMetadata that passes CheckInvariants: shards dealt round-robin to `members`
// (owner == target), one lineage entry for `version`.
inline GroupMetadata MakeMeta(const GroupKey& key, int32_t shard_count,
                              std::vector<std::string> members = {}, int64_t version = 1) {
  GroupMetadata m;
  m.key = key;
  m.shard_count = shard_count;
  m.version = MetadataVersion(version);
  m.lineage = "lineage-" + std::to_string(version);
  m.lineage_history = {LineageEntry{m.version, m.lineage}};
  m.assignment_epoch = AssignmentEpoch(1);
  m.created_ms = 1'700'000'000'000;
  m.updated_ms = m.created_ms;
  std::sort(members.begin(), members.end());
  for (const std::string& id : members) {
    Member mem;
    mem.id = MemberId(id);
    mem.epoch = MemberEpoch(1);
    mem.joined_ms = m.created_ms;
    m.members.push_back(mem);
  }
  for (int32_t s = 0; s < shard_count; ++s) {
    ShardState sh;
    sh.id = s;
    sh.stream = ShardStreamKey(key.stream, s);
    m.shards.push_back(std::move(sh));
  }
  for (size_t s = 0; s < m.shards.size() && !members.empty(); ++s) {
    m.shards[s].owner = members[s % members.size()];
    m.shards[s].target = m.shards[s].owner;
  }
  return m;
}

// `m` advanced to the next committed version (as a decision would write it).
inline GroupMetadata NextVersion(GroupMetadata m) {
  m.version = MetadataVersion(m.version.value() + 1);
  m.lineage = "lineage-" + std::to_string(m.version.value());
  m.lineage_history.push_back(LineageEntry{m.version, m.lineage});
  m.updated_ms += 1000;
  return m;
}

inline std::unique_ptr<RedisStore> OpenStore(const std::string& url,
                                             RedisStoreOptions options = {}) {
  auto parsed = ParseRedisUrl(url);
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  if (!parsed.ok()) return nullptr;
  auto store = RedisStore::Open(*parsed, options);
  EXPECT_TRUE(store.ok()) << (store.ok() ? "" : store.error().message);
  if (!store.ok()) return nullptr;
  return std::move(store.value());
}

// One redis-server per test suite; FLUSHALL before every test.
class SharedRedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new rsc::testing::RedisProcess();
    ASSERT_TRUE(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->running()) << "a previous test left the server stopped";
    cli_ = server_->Cli();
    ASSERT_NE(cli_, nullptr);
    ASSERT_TRUE(cli_->Run({"FLUSHALL"}).ok());
    store_ = OpenStore(server_->Url());
    ASSERT_NE(store_, nullptr);
  }

  static rsc::testing::RedisProcess* server_;
  std::unique_ptr<rsc::testing::RedisCli> cli_;
  std::unique_ptr<RedisStore> store_;
};

inline rsc::testing::RedisProcess* SharedRedisTest::server_ = nullptr;

// gtest-friendly error text.
template <class T>
std::string Describe(const Result<T>& r) {
  if (r.ok()) return "ok";
  return std::string(ErrorCodeName(r.error().code)) + ": " + r.error().message;
}

}  // namespace rsc::redis::testing
