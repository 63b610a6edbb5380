// RedisStore across server restarts, hangs and AUTH (each test owns its redis-server).
// The PSYNC2 postmortem's lesson: the script cache and every socket can vanish between
// two calls; the store must reconnect, reload and carry on, and say UNKNOWN_RESULT only
// when a write may really have applied.

#include <gtest/gtest.h>

#include "redis/keys.h"
#include "redis/redis_store.h"
#include "redis/test_util.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::redis::testing {
namespace {

using rsc::testing::RedisProcess;
using rsc::testing::RedisProcessOptions;
using rsc::testing::WaitFor;
using std::chrono::milliseconds;
constexpr TimeMs kNow = 1'700'000'100'000;

const GroupKey kKey{"orders", "billing"};

TEST(StoreFailureTest, RestartWithSaveIsSurvivedAfterReconnect) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  auto store = OpenStore(p.Url());
  ASSERT_TRUE(store->Create(MakeMeta(kKey, 2, {"a"}), kNow).ok());
  ASSERT_TRUE(store->Load(kKey, kNow).ok());
  const int64_t reloads = store->stats().script_reloads.load();

  ASSERT_TRUE(p.Restart(/*save=*/true));  // new process: empty script cache, dead sockets

  auto loaded = store->Load(kKey, kNow);
  ASSERT_TRUE(loaded.ok()) << Describe(loaded);
  EXPECT_EQ(loaded->revision.value(), 1);
  EXPECT_EQ(store->stats().script_reloads.load(), reloads + 1);
  GroupMetadata next = NextVersion(MakeMeta(kKey, 2, {"a"}));
  auto cas = store->CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_TRUE(cas->applied);
  EXPECT_EQ(store->stats().unknown_results.load(), 0);
}

TEST(StoreFailureTest, KillAndRestartWithAofIsSurvived) {
  RedisProcessOptions opts;
  opts.appendonly = true;
  // Without fsync on every write, a busy machine can postpone the AOF write past the
  // SIGKILL and the group is really lost (a rollback, tested elsewhere); this test is
  // about surviving the restart, so the data must be durable.
  opts.extra_args = {"--appendfsync", "always"};
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto store = OpenStore(p.Url());
  ASSERT_TRUE(store->Create(MakeMeta(kKey, 2, {"a"}), kNow).ok());

  p.Kill();
  // While it is down nothing was sent: REDIS_UNAVAILABLE, never UNKNOWN_RESULT.
  auto load = store->Load(kKey, kNow);
  ASSERT_FALSE(load.ok());
  EXPECT_EQ(load.error().code, ErrorCode::kRedisUnavailable) << load.error().message;
  GroupMetadata next = NextVersion(MakeMeta(kKey, 2, {"a"}));
  auto cas = store->CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow);
  ASSERT_FALSE(cas.ok());
  EXPECT_EQ(cas.error().code, ErrorCode::kRedisUnavailable) << cas.error().message;
  auto lock = store->Lock(kKey, milliseconds(1000), milliseconds(10));
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.error().code, ErrorCode::kRedisUnavailable);

  ASSERT_TRUE(p.Start());
  ASSERT_TRUE(WaitFor([&] { return store->Load(kKey, kNow).ok(); }, milliseconds(5000),
                      "the group loads again after the restart"));
  cas = store->CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow);
  ASSERT_TRUE(cas.ok()) << Describe(cas);
  EXPECT_TRUE(cas->applied);
  EXPECT_GE(store->stats().command_errors.load(), 3);
  EXPECT_EQ(store->stats().unknown_results.load(), 0);
}

TEST(StoreFailureTest, HungServerGivesUnknownResultForWrites) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  RedisStoreOptions options;
  options.command_timeout = milliseconds(200);
  options.pool_size = 2;
  auto store = OpenStore(p.Url(), options);
  ASSERT_TRUE(store->Create(MakeMeta(kKey, 2, {"a"}), kNow).ok());
  // Warm the script cache so the CAS that is cut off below can apply when the server wakes.
  ASSERT_TRUE(store->CompareAndSet(kKey, StoreRevision(1), nullptr, {}, kNow)->applied);

  p.Pause();
  GroupMetadata next = NextVersion(MakeMeta(kKey, 2, {"a"}));
  auto cas = store->CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow);
  ASSERT_FALSE(cas.ok());
  EXPECT_EQ(cas.error().code, ErrorCode::kUnknownResult) << cas.error().message;
  EXPECT_EQ(store->stats().unknown_results.load(), 1);
  auto load = store->Load(kKey, kNow);
  ASSERT_FALSE(load.ok());
  EXPECT_EQ(load.error().code, ErrorCode::kRedisUnavailable);
  p.Resume();

  // The CAS did apply once the server woke up (that is why the result was unknown): the
  // store reads the truth, not its cache.
  Result<StoredGroup> after = MakeError(ErrorCode::kInternal, "not loaded");
  ASSERT_TRUE(WaitFor(
      [&] {
        after = store->Load(kKey, kNow);
        return after.ok() && after->revision.value() == 2;
      },
      milliseconds(5000), "the cut-off CAS to become visible as revision 2"))
      << Describe(after);
  EXPECT_TRUE(*after->meta == next);
}

TEST(StoreFailureTest, AuthFromUrlWithPassword) {
  RedisProcessOptions opts;
  opts.password = "hunter2";
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto store = OpenStore(p.Url());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Create(MakeMeta(kKey, 1), kNow).ok());
  EXPECT_TRUE(store->Load(kKey, kNow).ok());

  auto anonymous = OpenStore("redis://127.0.0.1:" + std::to_string(p.Port()));
  ASSERT_NE(anonymous, nullptr);
  auto refused = anonymous->Load(kKey, kNow);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(refused.error().message.find("NOAUTH"), std::string::npos) << refused.error().message;

  auto url = ParseRedisUrl("redis://:wrong@127.0.0.1:" + std::to_string(p.Port()));
  ASSERT_TRUE(url.ok());
  auto wrong = RedisStore::Open(*url, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_EQ(wrong.error().message.find("wrong"), std::string::npos) << "password leaked";
}

TEST(StoreFailureTest, AuthFromUrlWithAclUser) {
  RedisProcessOptions opts;
  opts.acl_user = "coordinator";
  opts.acl_password = "pw-1";
  opts.extra_args = {"--user", "default", "off"};
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  EXPECT_EQ(p.Url().rfind("redis://coordinator:pw-1@", 0), 0u);
  auto store = OpenStore(p.Url());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Create(MakeMeta(kKey, 1), kNow).ok());
  auto loaded = store->Load(kKey, kNow);
  ASSERT_TRUE(loaded.ok()) << Describe(loaded);
  auto cli = p.Cli();
  EXPECT_EQ(cli->Run({"HGET", MetadataKey(kKey), "revision"}).str, "1");
}

}  // namespace
}  // namespace rsc::redis::testing
