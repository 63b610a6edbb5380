// RedisStore against a real 3-master Redis Cluster: slot routing, every group's keys in
// one slot, index rebuild over all masters, script cache loss, MOVED and ASK.

#include "redis/cluster.h"

#include <gtest/gtest.h>

#include <set>

#include "redis/compat.h"
#include "redis/keys.h"
#include "redis/redis_store.h"
#include "redis/test_util.h"
#include "support/redis_process.h"

namespace rsc::redis::testing {
namespace {

using rsc::testing::Cluster3;
using rsc::testing::RedisCli;
constexpr TimeMs kNow = 1'700'000'100'000;

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster3();
    ASSERT_TRUE(cluster_->Start());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    for (size_t i = 0; i < cluster_->size(); ++i) {
      clis_.push_back(cluster_->node(i).Cli());
      ASSERT_NE(clis_.back(), nullptr);
      ASSERT_TRUE(clis_.back()->Run({"FLUSHALL"}).ok());
    }
    store_ = OpenStore(cluster_->Url());
    ASSERT_NE(store_, nullptr);
  }
  ClusterExecutor& executor() { return dynamic_cast<ClusterExecutor&>(store_->executor()); }
  // Index of the node that serves `key`'s slot, per the nodes themselves.
  size_t Owner(const std::string& key) {
    for (size_t i = 0; i < clis_.size(); ++i) {
      auto r = clis_[i]->Run({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(KeySlot(key))});
      auto exists = clis_[i]->Run({"EXISTS", key});
      if (r.ok() && exists.ok() && exists.integer == 1) return i;
    }
    return clis_.size();
  }

  static Cluster3* cluster_;
  std::vector<std::unique_ptr<RedisCli>> clis_;
  std::unique_ptr<RedisStore> store_;
};

Cluster3* ClusterTest::cluster_ = nullptr;

std::vector<GroupKey> ManyGroups(int n) {
  std::vector<GroupKey> keys;
  for (int i = 0; i < n; ++i)
    keys.push_back({"stream" + std::to_string(i % 3), "g" + std::to_string(i)});
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST_F(ClusterTest, OpenDetectsClusterAndSlotsMatchTheServer) {
  EXPECT_NE(store_->executor().Describe().find("cluster, 3 masters"), std::string::npos)
      << store_->executor().Describe();
  for (const std::string key : {"foo", "{user1000}.following", "redis-stream:coord:{a:b}:lock"}) {
    EXPECT_EQ(clis_[0]->Run({"CLUSTER", "KEYSLOT", key}).integer, KeySlot(key)) << key;
  }
}

TEST_F(ClusterTest, GroupsSpreadOverMastersAndWorkEndToEnd) {
  const auto keys = ManyGroups(24);
  std::set<size_t> owners;
  for (const GroupKey& k : keys) {
    SCOPED_TRACE(k.Tag());
    ASSERT_TRUE(store_->Create(MakeMeta(k, 2, {"a"}), kNow).ok());
    GroupMetadata next = NextVersion(MakeMeta(k, 2, {"a"}));
    LivenessUpdate live;
    live.set = {{"a", kNow + 10}};
    auto cas = store_->CompareAndSet(k, StoreRevision(1), &next, live, kNow);
    ASSERT_TRUE(cas.ok()) << Describe(cas);
    ASSERT_TRUE(cas->applied);
    auto loaded = store_->Load(k, kNow + 10);
    ASSERT_TRUE(loaded.ok()) << Describe(loaded);
    EXPECT_EQ(loaded->revision.value(), 2);
    EXPECT_EQ(loaded->liveness.deadline_ms.size(), 1u);
    auto token = store_->Lock(k, std::chrono::milliseconds(1000), std::chrono::milliseconds(0));
    ASSERT_TRUE(token.ok() && token->has_value());
    ASSERT_TRUE(store_->Unlock(k, **token).ok());
    // All keys of the group live on the same node.
    size_t owner = Owner(MetadataKey(k));
    ASSERT_LT(owner, clis_.size());
    EXPECT_EQ(Owner(LivenessKey(k)), owner);
    owners.insert(owner);
  }
  EXPECT_EQ(owners.size(), 3u) << "24 groups should reach every master";
  auto listed = store_->ListGroups();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, keys);

  const GroupKey& gone = keys[0];
  ASSERT_TRUE(store_->Delete(gone, StoreRevision(2)).ok());
  auto missing = store_->Load(gone, kNow);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kGroupNotFound);
}

TEST_F(ClusterTest, RebuildIndexScansEveryMaster) {
  const auto keys = ManyGroups(12);
  for (const GroupKey& k : keys) ASSERT_TRUE(store_->Create(MakeMeta(k, 1), kNow).ok());
  const size_t index_node = Owner(std::string(kIndexKey));
  ASSERT_LT(index_node, clis_.size());
  ASSERT_TRUE(clis_[index_node]->Run({"DEL", std::string(kIndexKey)}).ok());
  auto rebuilt = store_->RebuildIndex();
  ASSERT_TRUE(rebuilt.ok()) << Describe(rebuilt);
  EXPECT_EQ(*rebuilt, keys);
  EXPECT_EQ(*store_->ListGroups(), keys);
}

TEST_F(ClusterTest, ScriptFlushOnEveryNodeIsSurvived) {
  const auto keys = ManyGroups(6);
  for (const GroupKey& k : keys) ASSERT_TRUE(store_->Create(MakeMeta(k, 1), kNow).ok());
  for (auto& cli : clis_) ASSERT_TRUE(cli->Run({"SCRIPT", "FLUSH"}).ok());
  const int64_t before = store_->stats().script_reloads.load();
  for (const GroupKey& k : keys) {
    auto loaded = store_->Load(k, kNow);
    ASSERT_TRUE(loaded.ok()) << Describe(loaded);
  }
  EXPECT_GE(store_->stats().script_reloads.load(), before + 1);
  EXPECT_LE(store_->stats().script_reloads.load(), before + 3);  // once per node at most
}

// Moves the slot of `key_` from its node to another one, as redis-cli --cluster reshard
// does, checking the store follows ASK mid-migration and MOVED afterwards.
TEST_F(ClusterTest, FollowsAskDuringMigrationAndMovedAfterIt) {
  const GroupKey k{"moving", "group"};
  ASSERT_TRUE(store_->Create(MakeMeta(k, 2, {"a"}), kNow).ok());
  LivenessUpdate live;
  live.set = {{"a", kNow + 10}};
  ASSERT_TRUE(store_->CompareAndSet(k, StoreRevision(1), nullptr, live, kNow)->applied);
  ASSERT_TRUE(store_->Load(k, kNow).ok());
  const int slot = KeySlot(MetadataKey(k));
  const size_t src = Owner(MetadataKey(k));
  ASSERT_LT(src, clis_.size());
  const size_t dst = (src + 1) % clis_.size();
  auto moved_keys = clis_[src]->Run({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
  ASSERT_EQ(moved_keys.elements.size(), 2u) << moved_keys.ToString();  // hash + liveness
  std::vector<std::string> keys;
  for (const auto& e : moved_keys.elements) keys.push_back(e.str);
  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, src, dst, keys));

  // Mid-migration: the source answers ASK for keys it no longer has.
  auto during = store_->Load(k, kNow);
  ASSERT_TRUE(during.ok()) << Describe(during);
  EXPECT_GE(executor().ask_count(), 1);
  GroupMetadata next = NextVersion(MakeMeta(k, 2, {"a"}));
  auto cas = store_->CompareAndSet(k, StoreRevision(1), &next, {}, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_TRUE(cas->applied);

  ASSERT_TRUE(cluster_->FinishSlotMigration(slot, dst));
  auto after = store_->Load(k, kNow);
  ASSERT_TRUE(after.ok()) << Describe(after);
  EXPECT_EQ(after->revision.value(), 2);
  EXPECT_GE(executor().moved_count(), 1);
  EXPECT_EQ(Owner(MetadataKey(k)), dst);
  // Learned for good: no further redirections for this slot.
  const int64_t moved = executor().moved_count();
  ASSERT_TRUE(store_->Load(k, kNow).ok());
  EXPECT_EQ(executor().moved_count(), moved);
}

// The client library's batch path (SPEC CL1): one pipeline per master, answers in input
// order, and a BeforeWrite that says no leaves every command unsent.
TEST_F(ClusterTest, RunBatchAnswersInOrderAcrossMastersAndBeforeWriteCanStopIt) {
  std::vector<KeyedCommand> cmds;
  for (int i = 0; i < 60; ++i) {
    const std::string key = "{batch:" + std::to_string(i % 12) + "}";
    cmds.push_back({key, {"RPUSH", key, std::to_string(i)}});
  }
  int asked = 0;
  auto refused = executor().RunBatch(cmds, CommandKind::kWrite, [&] {
    ++asked;
    return false;
  });
  ASSERT_EQ(refused.size(), cmds.size());
  for (const auto& r : refused) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kRedisUnavailable) << r.error().message;
  }
  EXPECT_GE(asked, 2) << "asked once per master pipeline (the keys span several masters)";
  std::set<size_t> owners;
  for (int k = 0; k < 12; ++k) {
    const std::string key = "{batch:" + std::to_string(k) + "}";
    EXPECT_EQ(Owner(key), clis_.size()) << key << " was written although refused";
  }

  auto done = executor().RunBatch(cmds, CommandKind::kWrite);
  ASSERT_EQ(done.size(), cmds.size());
  for (size_t i = 0; i < done.size(); ++i) {
    ASSERT_TRUE(done[i].ok()) << Describe(done[i]);
    EXPECT_EQ(done[i]->integer, static_cast<int64_t>(i / 12 + 1)) << "list length after push " << i;
  }
  for (int k = 0; k < 12; ++k) {
    const std::string key = "{batch:" + std::to_string(k) + "}";
    const size_t owner = Owner(key);
    ASSERT_LT(owner, clis_.size());
    owners.insert(owner);
    auto items = clis_[owner]->Run({"LRANGE", key, "0", "-1"});
    std::vector<std::string> got;
    for (const auto& e : items.elements) got.push_back(e.str);
    std::vector<std::string> want;
    for (int i = k; i < 60; i += 12) want.push_back(std::to_string(i));
    EXPECT_EQ(got, want) << key;
  }
  EXPECT_EQ(owners.size(), 3u);
}

// L4 on a cluster: the write probe must run on each node checked, not bounce with MOVED.
TEST_F(ClusterTest, CompatibilityCheckWorksOnEveryMaster) {
  for (size_t i = 0; i < cluster_->size(); ++i) {
    ConnectionOptions o;
    o.port = cluster_->node(i).Port();
    Connection c(o);
    auto report = CheckCompatibility(c);
    ASSERT_TRUE(report.ok()) << Describe(report);
    EXPECT_TRUE(report->ok()) << FormatCompatReport(*report);
    EXPECT_TRUE(report->cluster_enabled);
    EXPECT_EQ(report->redis_mode, "cluster");
  }
}

}  // namespace
}  // namespace rsc::redis::testing
