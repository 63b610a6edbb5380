// The stream tick (GroupService::StreamTick, SPEC RS3) against a real redis-server, driven
// directly so a test can act between its steps: a completion observed in Redis is applied
// to the group under the group's mutex, never from an observation older than what a
// member's completedShards hint recorded meanwhile.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redis/redis_store.h"
#include "redis/redis_stream_admin.h"
#include "redis/redis_url.h"
#include "server/group_service.h"
#include "server/system.h"
#include "support/redis_process.h"

namespace rsc::testing {
namespace {

class FixedClock : public Clock {
 public:
  TimeMs NowMs() override { return 1'900'000'000'000; }
};

// The production StreamAdmin with a hook that runs inside one Progress call, between
// Redis's answer and the caller seeing it (the moment a concurrent hint can slip in).
class HookedAdmin : public StreamAdmin {
 public:
  explicit HookedAdmin(StreamAdmin& inner) : inner_(inner) {}
  Status CreateConsumerGroup(const std::string& key, const std::string& group) override {
    return inner_.CreateConsumerGroup(key, group);
  }
  Result<bool> Seal(const std::string& key, int32_t generation) override {
    return inner_.Seal(key, generation);
  }
  Result<GroupProgress> Progress(const std::string& key, const std::string& group) override {
    Result<GroupProgress> p = inner_.Progress(key, group);
    std::function<void()> hook;
    std::swap(hook, once_);
    if (hook) hook();
    return p;
  }
  Result<bool> TrimSealed(const std::string& key, int32_t generation) override {
    return inner_.TrimSealed(key, generation);
  }
  void RunOnceInNextProgress(std::function<void()> hook) { once_ = std::move(hook); }

 private:
  StreamAdmin& inner_;
  std::function<void()> once_;
};

class EventLog : public ServiceObserver {
 public:
  void OnEvents(const GroupKey&, const std::vector<Event>& events) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events) kinds_.push_back(e.kind);
  }
  int Count(EventKind kind) {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(std::count(kinds_.begin(), kinds_.end(), kind));
  }

 private:
  std::mutex mu_;
  std::vector<EventKind> kinds_;
};

// Reads `key` to its end as consumer `name` of `group` and acknowledges everything, the
// seal included, as a consumer's reader does.
void Drain(RedisCli& cli, const std::string& key, const std::string& group) {
  for (;;) {
    CliReply r = cli.Run({"XREADGROUP", "GROUP", group, "a", "COUNT", "100", "STREAMS", key, ">"});
    if (r.type != CliReply::Type::kArray || r.elements.empty()) return;
    const auto& entries = r.elements[0].elements[1].elements;
    if (entries.empty()) return;
    for (const CliReply& e : entries) cli.Run({"XACK", key, group, e.elements[0].str});
  }
}

TEST(StreamTick, AnOlderObservationNeverReopensAParentAHintRecordedComplete) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start());
  auto cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  auto url = redis::ParseRedisUrl(redis.Url());
  ASSERT_TRUE(url.ok());
  auto store = redis::RedisStore::Open(*url, {});
  ASSERT_TRUE(store.ok()) << store.error().message;
  redis::RedisStreamAdmin real(store.value()->executor());
  HookedAdmin admin(real);
  FixedClock clock;
  RandomTokens tokens;
  EventLog events;
  GroupServiceOptions options;
  options.streams = &admin;
  GroupService service(*store.value(), clock, tokens, events, options, nullptr);
  const GroupKey key{"orders", "billing"};

  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}).ok());
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(cli->Run({"XADD", "{orders:" + std::to_string(s) + "}", "*", "k", "v"}).ok());
  }
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  auto resharded = service.Reshard("orders", stream->revision, 3);
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  ASSERT_TRUE(service.StreamTick("orders").ok());  // sealed and activated

  // The tick observes shard 0 incomplete; before it applies that, the member reads both
  // parents to their end and its hint records them complete.
  admin.RunOnceInNextProgress([&] {
    Drain(*cli, "{orders:0}", "billing");
    Drain(*cli, "{orders:1}", "billing");
    HeartbeatRequest hint;
    hint.member_id = MemberId("a");
    hint.instance_id = "i-a";
    hint.features = {"layout-v2", "shard-lease"};
    hint.completed_shards = {0, 1};
    (void)service.Heartbeat(key, hint);
  });
  ASSERT_TRUE(service.StreamTick("orders").ok());

  EXPECT_EQ(events.Count(EventKind::kParentCompleted), 2);
  EXPECT_EQ(events.Count(EventKind::kParentReopened), 0)
      << "the tick applied its observation from before the hint";
  auto loaded = store.value()->Load(key, clock.NowMs());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  for (const ShardState& s : loaded->meta->shards) {
    if (s.generation == 0) {
      EXPECT_TRUE(s.completed) << "parent " << s.id;
    }
  }
}

}  // namespace
}  // namespace rsc::testing
