// RedisStore against a real redis-server (one per suite, FLUSHALL per test).
// Covers SPEC R2.1-R2.7, L1, L3, L5 and the liveness contract of core/liveness.h.

#include "redis/redis_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/codec.h"
#include "redis/keys.h"
#include "redis/test_util.h"

namespace rsc::redis::testing {
namespace {

using std::chrono::milliseconds;
constexpr TimeMs kNow = 1'700'000'100'000;

class RedisStoreTest : public SharedRedisTest {
 protected:
  GroupKey key_{"orders", "billing"};

  std::string HGet(const std::string& field) {
    return cli_->Run({"HGET", MetadataKey(key_), field}).str;
  }
  void Create(const GroupMetadata& m) {
    auto rev = store_->Create(m, kNow);
    ASSERT_TRUE(rev.ok()) << Describe(rev);
    ASSERT_EQ(rev->value(), 1);
  }
  StoredGroup MustLoad(TimeMs now = kNow, RedisStore* store = nullptr) {
    auto loaded = (store ? store : store_.get())->Load(key_, now);
    EXPECT_TRUE(loaded.ok()) << Describe(loaded);
    return loaded.ok() ? loaded.value() : StoredGroup{};
  }
};

TEST_F(RedisStoreTest, CreateWritesTheSpecLayoutAndLoadsBack) {
  GroupMetadata m = MakeMeta(key_, 4, {"a", "b"});
  Create(m);
  EXPECT_EQ(HGet("revision"), "1");
  EXPECT_EQ(HGet("schemaVersion"), std::to_string(kSchemaVersion));
  EXPECT_EQ(HGet("layoutVersion"), std::to_string(kLayoutVersion));
  EXPECT_EQ(HGet("updatedAt"), std::to_string(kNow));
  EXPECT_EQ(HGet("aggregate"), EncodeAggregate(m));
  EXPECT_EQ(HGet("writeToken").size(), 32u);
  EXPECT_EQ(cli_->Run({"SISMEMBER", std::string(kIndexKey), "orders:billing"}).integer, 1);

  // A fresh store (no cache) parses exactly what was written.
  auto other = OpenStore(server_->Url());
  StoredGroup g = MustLoad(kNow, other.get());
  ASSERT_NE(g.meta, nullptr);
  EXPECT_EQ(g.revision.value(), 1);
  EXPECT_EQ(*g.meta, m);
}

TEST_F(RedisStoreTest, CreateOfAnExistingGroupFailsGroupExists) {
  Create(MakeMeta(key_, 2));
  auto again = store_->Create(MakeMeta(key_, 8), kNow);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kGroupExists);
  EXPECT_EQ(MustLoad().meta->shard_count, 2);
}

TEST_F(RedisStoreTest, CasAppliesAndBumpsRevision) {
  GroupMetadata m = MakeMeta(key_, 4, {"a"});
  Create(m);
  GroupMetadata next = NextVersion(MakeMeta(key_, 4, {"a", "b"}));
  auto cas = store_->CompareAndSet(key_, StoreRevision(1), &next, {}, kNow + 5);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_TRUE(cas->applied);
  EXPECT_EQ(cas->revision.value(), 2);
  EXPECT_EQ(HGet("revision"), "2");
  EXPECT_EQ(HGet("updatedAt"), std::to_string(kNow + 5));

  auto other = OpenStore(server_->Url());
  StoredGroup g = MustLoad(kNow, other.get());
  EXPECT_EQ(g.revision.value(), 2);
  EXPECT_EQ(*g.meta, next);
}

TEST_F(RedisStoreTest, CasWithStaleRevisionChangesNothing) {
  Create(MakeMeta(key_, 4, {"a"}));
  GroupMetadata v2 = NextVersion(MakeMeta(key_, 4, {"a"}));
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), &v2, {}, kNow)->applied);
  const std::string stored = HGet("aggregate");
  const std::string token = HGet("writeToken");

  GroupMetadata stale = NextVersion(MakeMeta(key_, 4, {"a", "zombie"}));
  LivenessUpdate live;
  live.set = {{"zombie", kNow + 10'000}};
  auto cas = store_->CompareAndSet(key_, StoreRevision(1), &stale, live, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_FALSE(cas->applied);
  EXPECT_EQ(cas->revision.value(), 2);
  EXPECT_EQ(HGet("aggregate"), stored);
  EXPECT_EQ(HGet("writeToken"), token);
  EXPECT_EQ(HGet("revision"), "2");
  EXPECT_TRUE(cli_->Run({"ZSCORE", LivenessKey(key_), "zombie"}).IsNil());
  EXPECT_EQ(store_->stats().revision_conflicts.load(), 1);
  EXPECT_EQ(*MustLoad().meta, v2);
}

TEST_F(RedisStoreTest, CasOnDeletedKeyIsAConflictAndNeverRecreatesIt) {
  Create(MakeMeta(key_, 2, {"a"}));
  ASSERT_EQ(cli_->Run({"DEL", MetadataKey(key_)}).integer, 1);
  GroupMetadata next = NextVersion(MakeMeta(key_, 2, {"a"}));
  LivenessUpdate live;
  live.set = {{"a", kNow + 10'000}};
  auto cas = store_->CompareAndSet(key_, StoreRevision(1), &next, live, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_FALSE(cas->applied);
  EXPECT_EQ(cas->revision.value(), -1);
  EXPECT_EQ(cli_->Run({"EXISTS", MetadataKey(key_)}).integer, 0);
  EXPECT_EQ(cli_->Run({"EXISTS", LivenessKey(key_)}).integer, 0);
  // A liveness-only write must not resurrect anything either.
  auto live_only = store_->CompareAndSet(key_, StoreRevision(1), nullptr, live, kNow);
  ASSERT_TRUE(live_only.ok());
  EXPECT_FALSE(live_only->applied);
  EXPECT_EQ(cli_->Run({"EXISTS", LivenessKey(key_)}).integer, 0);
}

TEST_F(RedisStoreTest, LivenessOnlyWriteKeepsRevisionButStillChecksIt) {
  Create(MakeMeta(key_, 2, {"a", "b"}));
  LivenessUpdate live;
  live.set = {{"a", kNow + 100}, {"b", kNow + 200}};
  auto cas = store_->CompareAndSet(key_, StoreRevision(1), nullptr, live, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_TRUE(cas->applied);
  EXPECT_EQ(cas->revision.value(), 1);
  EXPECT_EQ(HGet("revision"), "1");
  EXPECT_EQ(cli_->Run({"ZSCORE", LivenessKey(key_), "a"}).str, std::to_string(kNow + 100));

  LivenessUpdate stale;
  stale.set = {{"a", kNow + 999}};
  stale.remove = {"b"};
  auto refused = store_->CompareAndSet(key_, StoreRevision(7), nullptr, stale, kNow);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->applied);
  EXPECT_EQ(refused->revision.value(), 1);
  EXPECT_EQ(cli_->Run({"ZSCORE", LivenessKey(key_), "a"}).str, std::to_string(kNow + 100));
  EXPECT_EQ(cli_->Run({"ZCARD", LivenessKey(key_)}).integer, 2);

  LivenessUpdate remove;
  remove.remove = {"b"};
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), nullptr, remove, kNow)->applied);
  EXPECT_EQ(cli_->Run({"ZCARD", LivenessKey(key_)}).integer, 1);
}

TEST_F(RedisStoreTest, LoadOfMissingKeyIsGroupNotFound) {
  auto loaded = store_->Load(key_, kNow);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kGroupNotFound);
}

// SPEC L1 / scenario 5: the key is gone but the index remembers the group: fail closed.
TEST_F(RedisStoreTest, LoadOfIndexedMissingKeyIsMetadataMissingAndNothingIsRecreated) {
  Create(MakeMeta(key_, 2, {"a"}));
  MustLoad();
  ASSERT_EQ(cli_->Run({"DEL", MetadataKey(key_)}).integer, 1);
  for (int i = 0; i < 2; ++i) {
    auto loaded = store_->Load(key_, kNow);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.error().code, ErrorCode::kMetadataMissing) << loaded.error().message;
    EXPECT_NE(loaded.error().message.find(MetadataKey(key_)), std::string::npos);
  }
  EXPECT_EQ(cli_->Run({"EXISTS", MetadataKey(key_)}).integer, 0);
  EXPECT_EQ(store_->stats().metadata_missing.load(), 2);
}

struct Tamper {
  std::string name;
  std::vector<std::vector<std::string>> commands;  // run with {KEY} replaced
  std::string message;                             // expected in the error
};

// SPEC L3: anything we cannot fully interpret fails closed with METADATA_UNREADABLE.
TEST_F(RedisStoreTest, UnreadableMetadataFailsClosedNamingTheProblem) {
  GroupMetadata other_group = MakeMeta(GroupKey{"orders", "other"}, 2);
  GroupMetadata broken = MakeMeta(key_, 2);
  broken.shards.pop_back();  // violates shards.size() == shard_count
  const std::vector<Tamper> cases = {
      {"corrupt json", {{"HSET", "{KEY}", "aggregate", "{not json"}}, "aggregate"},
      {"json of the wrong shape", {{"HSET", "{KEY}", "aggregate", "[1,2,3]"}}, "aggregate"},
      {"broken invariants", {{"HSET", "{KEY}", "aggregate", EncodeAggregate(broken)}}, "aggregate"},
      {"other group's aggregate",
       {{"HSET", "{KEY}", "aggregate", EncodeAggregate(other_group)}},
       "names group orders:other"},
      {"unknown schemaVersion",
       {{"HSET", "{KEY}", "schemaVersion", "2"}},
       "unknown schemaVersion 2"},
      {"unknown layoutVersion",
       {{"HSET", "{KEY}", "layoutVersion", "99"}},
       "unknown layoutVersion 99"},
      {"non-numeric schemaVersion", {{"HSET", "{KEY}", "schemaVersion", "v1"}}, "schemaVersion"},
      {"missing schemaVersion", {{"HDEL", "{KEY}", "schemaVersion"}}, "'schemaVersion' is missing"},
      {"missing layoutVersion", {{"HDEL", "{KEY}", "layoutVersion"}}, "'layoutVersion' is missing"},
      {"missing revision", {{"HDEL", "{KEY}", "revision"}}, "'revision' is missing"},
      {"non-numeric revision", {{"HSET", "{KEY}", "revision", "abc"}}, "'revision'"},
      {"missing aggregate", {{"HDEL", "{KEY}", "aggregate"}}, "'aggregate' is missing"},
      {"hash replaced by a string", {{"DEL", "{KEY}"}, {"SET", "{KEY}", "x"}}, "wrong kind"},
  };
  for (const Tamper& t : cases) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(cli_->Run({"FLUSHALL"}).ok());
    store_ = OpenStore(server_->Url());
    Create(MakeMeta(key_, 2));
    MustLoad();  // warm the cache: tampering must still be noticed
    for (auto cmd : t.commands) {
      for (auto& arg : cmd) {
        if (arg == "{KEY}") arg = MetadataKey(key_);
      }
      ASSERT_TRUE(cli_->Run(cmd).ok());
    }
    const std::string before = cli_->Run({"DUMP", MetadataKey(key_)}).str;
    auto loaded = store_->Load(key_, kNow);
    ASSERT_FALSE(loaded.ok()) << t.name;
    EXPECT_EQ(loaded.error().code, ErrorCode::kMetadataUnreadable) << Describe(loaded);
    EXPECT_NE(loaded.error().message.find(t.message), std::string::npos) << loaded.error().message;
    // Where the revision itself is unreadable, a CAS cannot match it and must not
    // overwrite anything either (L3: never overwritten automatically).
    const bool revision_unreadable =
        t.name.find("revision") != std::string::npos || t.name.find("string") != std::string::npos;
    if (revision_unreadable) {
      GroupMetadata next = NextVersion(MakeMeta(key_, 2));
      auto cas = store_->CompareAndSet(key_, StoreRevision(1), &next, {}, kNow);
      ASSERT_FALSE(cas.ok());
      EXPECT_EQ(cas.error().code, ErrorCode::kMetadataUnreadable) << Describe(cas);
      EXPECT_EQ(cli_->Run({"DUMP", MetadataKey(key_)}).str, before);
    }
  }
  EXPECT_GT(store_->stats().metadata_unreadable.load(), 0);
}

// L5 and the PSYNC2 lesson: the script cache can vanish between any two calls.
TEST_F(RedisStoreTest, ScriptFlushBetweenCallsIsSurvivedAndCounted) {
  Create(MakeMeta(key_, 2, {"a"}));
  MustLoad();
  const int64_t before = store_->stats().script_reloads.load();
  ASSERT_TRUE(cli_->Run({"SCRIPT", "FLUSH"}).ok());
  MustLoad();
  EXPECT_EQ(store_->stats().script_reloads.load(), before + 1);
  ASSERT_TRUE(cli_->Run({"SCRIPT", "FLUSH"}).ok());
  GroupMetadata next = NextVersion(MakeMeta(key_, 2, {"a"}));
  auto cas = store_->CompareAndSet(key_, StoreRevision(1), &next, {}, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_TRUE(cas->applied);
  EXPECT_EQ(store_->stats().script_reloads.load(), before + 2);
  MustLoad();  // the second flush emptied the cache of the load script too
  EXPECT_EQ(store_->stats().script_reloads.load(), before + 3);
  // Once reloaded the scripts stay cached: no further reloads.
  MustLoad();
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(2), nullptr, {}, kNow)->applied);
  EXPECT_EQ(store_->stats().script_reloads.load(), before + 3);
}

TEST_F(RedisStoreTest, LockIsExclusiveAndOnlyItsTokenUnlocks) {
  auto a = store_->Lock(key_, milliseconds(10'000), milliseconds(0));
  ASSERT_TRUE(a.ok()) << Describe(a);
  ASSERT_TRUE(a->has_value());
  auto b = store_->Lock(key_, milliseconds(10'000), milliseconds(50));
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value());
  EXPECT_EQ(store_->stats().lock_timeouts.load(), 1);

  ASSERT_TRUE(store_->Unlock(key_, "not-the-token").ok());
  EXPECT_EQ(cli_->Run({"GET", LockKey(key_)}).str, **a);

  ASSERT_TRUE(store_->Unlock(key_, **a).ok());
  EXPECT_EQ(cli_->Run({"EXISTS", LockKey(key_)}).integer, 0);
  auto c = store_->Lock(key_, milliseconds(10'000), milliseconds(0));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->has_value());
  EXPECT_NE(**c, **a);
  EXPECT_EQ(store_->stats().lock_acquired.load(), 2);
  // The mutex is the one key with a TTL (R2.3).
  EXPECT_GT(cli_->Run({"PTTL", LockKey(key_)}).integer, 0);
}

TEST_F(RedisStoreTest, ExpiredLockCanBeTaken) {
  auto a = store_->Lock(key_, milliseconds(100), milliseconds(0));
  ASSERT_TRUE(a.ok() && a->has_value());
  const auto start = std::chrono::steady_clock::now();
  auto b = store_->Lock(key_, milliseconds(10'000), milliseconds(5'000));
  ASSERT_TRUE(b.ok()) << Describe(b);
  ASSERT_TRUE(b->has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2'000));
  // The first holder's late unlock must not release the new holder's mutex.
  ASSERT_TRUE(store_->Unlock(key_, **a).ok());
  EXPECT_EQ(cli_->Run({"GET", LockKey(key_)}).str, **b);
  EXPECT_GT(store_->stats().lock_wait_us_total.load(), 0);
}

TEST_F(RedisStoreTest, LockWaiterGetsTheMutexSoonAfterRelease) {
  auto a = store_->Lock(key_, milliseconds(10'000), milliseconds(0));
  ASSERT_TRUE(a.ok() && a->has_value());
  std::atomic<int64_t> released_at_us{0};
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(100));  // the holder's section, not a sync
    released_at_us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
    ASSERT_TRUE(store_->Unlock(key_, **a).ok());
  });
  auto b = store_->Lock(key_, milliseconds(10'000), milliseconds(5'000));
  const int64_t acquired_at_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count();
  releaser.join();
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->has_value()) << "the waiter gave up although the mutex was released";
  EXPECT_GE(acquired_at_us, released_at_us.load()) << "acquired before the release";
  // "Soon": a poll interval, far from the 5 s wait and the 10 s TTL the claim is about.
  EXPECT_LT(acquired_at_us - released_at_us.load(), 1'500'000)
      << "the waiter took the mutex long after its release";
  EXPECT_EQ(cli_->Run({"GET", LockKey(key_)}).str, **b);
}

// core/liveness.h: due entries always; everything (complete) when the counts disagree.
TEST_F(RedisStoreTest, LivenessDueAndCompleteSemantics) {
  Create(MakeMeta(key_, 3, {"a", "b", "c"}));
  LivenessUpdate live;
  live.set = {{"a", kNow + 100}, {"b", kNow + 200}, {"c", kNow + 300}};
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), nullptr, live, kNow)->applied);

  StoredGroup g = MustLoad(kNow + 150);
  EXPECT_FALSE(g.liveness.complete);
  EXPECT_EQ(g.liveness.deadline_ms, (std::map<std::string, TimeMs>{{"a", kNow + 100}}));
  g = MustLoad(kNow + 50);
  EXPECT_FALSE(g.liveness.complete);
  EXPECT_TRUE(g.liveness.deadline_ms.empty());
  g = MustLoad(kNow + 300);  // inclusive: a deadline equal to now is due
  EXPECT_EQ(g.liveness.deadline_ms.size(), 3u);

  // "c" lost its deadline: counts differ, so the map is the whole set and complete.
  LivenessUpdate remove;
  remove.remove = {"c"};
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), nullptr, remove, kNow)->applied);
  for (RedisStore* s : {store_.get(), OpenStore(server_->Url()).release()}) {
    g = MustLoad(kNow + 150, s);
    EXPECT_TRUE(g.liveness.complete);
    EXPECT_EQ(g.liveness.deadline_ms,
              (std::map<std::string, TimeMs>{{"a", kNow + 100}, {"b", kNow + 200}}));
    if (s != store_.get()) delete s;
  }

  // A stray entry for a non-member also makes the counts differ.
  ASSERT_TRUE(cli_->Run({"ZADD", LivenessKey(key_), std::to_string(kNow + 300), "c"}).ok());
  ASSERT_TRUE(cli_->Run({"ZADD", LivenessKey(key_), std::to_string(kNow + 900), "ghost"}).ok());
  g = MustLoad(kNow + 150);
  EXPECT_TRUE(g.liveness.complete);
  EXPECT_EQ(g.liveness.deadline_ms.size(), 4u);

  auto all = store_->LoadAllLiveness(key_);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->complete);
  EXPECT_EQ(all->deadline_ms.at("ghost"), kNow + 900);
}

TEST_F(RedisStoreTest, ParsedAggregateIsCachedUntilTheHashIsWritten) {
  Create(MakeMeta(key_, 4, {"a"}));
  auto reader = OpenStore(server_->Url());
  StoredGroup first = MustLoad(kNow, reader.get());
  EXPECT_EQ(reader->stats().cache_misses.load(), 1);
  StoredGroup second = MustLoad(kNow, reader.get());
  EXPECT_EQ(reader->stats().cache_hits.load(), 1);
  EXPECT_EQ(first.meta.get(), second.meta.get()) << "identical load should reuse the parse";

  GroupMetadata next = NextVersion(MakeMeta(key_, 4, {"a", "b"}));
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), &next, {}, kNow)->applied);
  StoredGroup third = MustLoad(kNow, reader.get());
  EXPECT_EQ(reader->stats().cache_misses.load(), 2);
  EXPECT_EQ(third.revision.value(), 2);
  EXPECT_EQ(*third.meta, next);

  // The writer caches what it wrote: its next load needs no parse.
  const int64_t writer_misses = store_->stats().cache_misses.load();
  EXPECT_EQ(*MustLoad().meta, next);
  EXPECT_EQ(store_->stats().cache_misses.load(), writer_misses);
}

// Why the cache is keyed by writeToken, not revision: after a rollback the same revision
// number can come back with different content.
TEST_F(RedisStoreTest, CacheIsNotFooledByARevisionThatAliasesAfterRollback) {
  Create(MakeMeta(key_, 4, {"a"}));
  GroupMetadata v2 = NextVersion(MakeMeta(key_, 4, {"a"}));
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), &v2, {}, kNow)->applied);
  EXPECT_EQ(*MustLoad().meta, v2);

  // Another history reaches revision 2 with other content (as after a failover).
  GroupMetadata other = NextVersion(MakeMeta(key_, 4, {"a", "x"}));
  ASSERT_TRUE(cli_->Run({"HSET", MetadataKey(key_), "aggregate", EncodeAggregate(other), "revision",
                         "2", "writeToken", "from-another-history"})
                  .ok());
  StoredGroup g = MustLoad();
  EXPECT_EQ(g.revision.value(), 2);
  EXPECT_EQ(*g.meta, other);
}

TEST_F(RedisStoreTest, NoTtlIsEverSetOnMetadataKeys) {
  Create(MakeMeta(key_, 2, {"a"}));
  GroupMetadata next = NextVersion(MakeMeta(key_, 2, {"a"}));
  LivenessUpdate live;
  live.set = {{"a", kNow + 1000}};
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), &next, live, kNow)->applied);
  ASSERT_TRUE(store_->Restore(next, kNow).ok());
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(3), nullptr, live, kNow)->applied);
  for (const std::string& k : {MetadataKey(key_), LivenessKey(key_), std::string(kIndexKey)}) {
    EXPECT_EQ(cli_->Run({"TTL", k}).integer, -1) << k;
  }
}

TEST_F(RedisStoreTest, DeleteChecksRevisionAndRemovesEverything) {
  Create(MakeMeta(key_, 2, {"a"}));
  LivenessUpdate live;
  live.set = {{"a", kNow + 1000}};
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), nullptr, live, kNow)->applied);

  Status wrong = store_->Delete(key_, StoreRevision(5));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kRevisionConflict);
  EXPECT_NE(wrong.error().message.find("revision 1"), std::string::npos) << wrong.error().message;
  EXPECT_EQ(cli_->Run({"EXISTS", MetadataKey(key_)}).integer, 1);

  ASSERT_TRUE(store_->Delete(key_, StoreRevision(1)).ok());
  EXPECT_EQ(cli_->Run({"EXISTS", MetadataKey(key_), LivenessKey(key_)}).integer, 0);
  EXPECT_EQ(cli_->Run({"SISMEMBER", std::string(kIndexKey), key_.Tag()}).integer, 0);
  auto loaded = store_->Load(key_, kNow);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kGroupNotFound);
  Status again = store_->Delete(key_, StoreRevision(1));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kGroupNotFound);
}

TEST_F(RedisStoreTest, DeleteOfIndexedMissingKeyIsMetadataMissing) {
  Create(MakeMeta(key_, 2));
  ASSERT_EQ(cli_->Run({"DEL", MetadataKey(key_)}).integer, 1);
  Status s = store_->Delete(key_, StoreRevision(1));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kMetadataMissing);
}

TEST_F(RedisStoreTest, RestoreContinuesAboveTheStoredRevisionAndClearsLiveness) {
  Create(MakeMeta(key_, 2, {"a"}));
  GroupMetadata v2 = NextVersion(MakeMeta(key_, 2, {"a"}));
  LivenessUpdate live;
  live.set = {{"a", kNow + 1000}};
  ASSERT_TRUE(store_->CompareAndSet(key_, StoreRevision(1), &v2, live, kNow)->applied);
  const std::string old_token = HGet("writeToken");

  GroupMetadata imported = MakeMeta(key_, 6, {"q"}, 40);
  auto rev = store_->Restore(imported, kNow + 7);
  ASSERT_TRUE(rev.ok()) << Describe(rev);
  EXPECT_EQ(rev->value(), 3);
  EXPECT_NE(HGet("writeToken"), old_token);
  EXPECT_EQ(cli_->Run({"EXISTS", LivenessKey(key_)}).integer, 0);
  auto other = OpenStore(server_->Url());
  StoredGroup g = MustLoad(kNow, other.get());
  EXPECT_EQ(g.revision.value(), 3);
  EXPECT_EQ(*g.meta, imported);
  EXPECT_TRUE(g.liveness.complete) << "members without deadlines must be visible as such";

  // Restore of an absent group creates it (and indexes it); over garbage it starts at 1.
  GroupKey fresh{"orders", "fresh"};
  ASSERT_EQ(store_->Restore(MakeMeta(fresh, 1), kNow)->value(), 1);
  EXPECT_EQ(cli_->Run({"SISMEMBER", std::string(kIndexKey), fresh.Tag()}).integer, 1);
  ASSERT_TRUE(cli_->Run({"HSET", MetadataKey(fresh), "revision", "garbage"}).ok());
  ASSERT_EQ(store_->Restore(MakeMeta(fresh, 1), kNow)->value(), 1);
  ASSERT_TRUE(cli_->Run({"DEL", MetadataKey(fresh)}).ok());
  ASSERT_TRUE(cli_->Run({"SET", MetadataKey(fresh), "not a hash"}).ok());
  ASSERT_EQ(store_->Restore(MakeMeta(fresh, 1), kNow)->value(), 1);
  EXPECT_EQ(MustLoad(kNow, nullptr).revision.value(), 3);
}

TEST_F(RedisStoreTest, ListGroupsAndRebuildIndex) {
  const std::vector<GroupKey> keys = {{"eu:orders", "billing"}, {"orders", "a"}, {"orders", "b"}};
  for (const GroupKey& k : keys) ASSERT_TRUE(store_->Create(MakeMeta(k, 1), kNow).ok());
  auto listed = store_->ListGroups();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, keys);

  // The index is auxiliary: lose it, add junk, rebuild from the hashes.
  ASSERT_TRUE(cli_->Run({"DEL", std::string(kIndexKey)}).ok());
  ASSERT_TRUE(cli_->Run({"SADD", std::string(kIndexKey), "gone:group", "malformed"}).ok());
  listed = store_->ListGroups();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<GroupKey>{{"gone", "group"}}));  // malformed skipped

  auto rebuilt = store_->RebuildIndex();
  ASSERT_TRUE(rebuilt.ok()) << Describe(rebuilt);
  EXPECT_EQ(*rebuilt, keys);
  listed = store_->ListGroups();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, keys);
}

// Many writers without the mutex: the CAS alone must serialize them (R2.7: the CAS, not
// the mutex, is what keeps metadata safe).
TEST_F(RedisStoreTest, ConcurrentCasLosesNoUpdate) {
  Create(MakeMeta(key_, 2, {"a"}));
  constexpr int kThreads = 4;
  constexpr int kIncrements = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        auto g = store_->Load(key_, kNow);
        if (!g.ok()) {
          ++failures;
          return;
        }
        GroupMetadata next = NextVersion(*g->meta);
        if (next.lineage_history.size() > kLineageWindow) {
          next.lineage_history.erase(next.lineage_history.begin());
        }
        auto cas = store_->CompareAndSet(key_, g->revision, &next, {}, kNow);
        if (!cas.ok()) {
          ++failures;
          return;
        }
        if (cas->applied) ++i;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  StoredGroup g = MustLoad();
  EXPECT_EQ(g.revision.value(), 1 + kThreads * kIncrements);
  EXPECT_EQ(g.meta->version.value(), 1 + kThreads * kIncrements);
}

TEST_F(RedisStoreTest, LockedSectionsFromManyThreadsAreSerialized) {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> acquired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto token = store_->Lock(key_, milliseconds(5'000), milliseconds(5'000));
        ASSERT_TRUE(token.ok() && token->has_value());
        if (inside.fetch_add(1) != 0) ++overlaps;
        std::this_thread::sleep_for(milliseconds(1));
        inside.fetch_sub(1);
        ++acquired;
        ASSERT_TRUE(store_->Unlock(key_, **token).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(acquired.load(), 40);
}

}  // namespace
}  // namespace rsc::redis::testing
