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
#include "support/wait.h"

namespace rsc::testing {
namespace {

using namespace std::chrono_literals;

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
  Result<bool> Seal(const std::string& key, int32_t generation,
                    const std::string& successor) override {
    return inner_.Seal(key, generation, successor);
  }
  std::vector<Result<StreamTop>> Tops(const std::vector<std::string>& keys) override {
    return inner_.Tops(keys);
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

// A GroupService over `store` with `admin` as its StreamAdmin, a fixed clock, and its events
// recorded.
struct TestService {
  TestService(MetadataStore& store, StreamAdmin& admin)
      : service(store, clock, tokens, events, Options(admin), nullptr) {}
  static GroupServiceOptions Options(StreamAdmin& admin) {
    GroupServiceOptions o;
    o.streams = &admin;
    return o;
  }
  FixedClock clock;
  RandomTokens tokens;
  EventLog events;
  GroupService service;
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
  TestService t(*store.value(), admin);
  GroupService& service = t.service;
  EventLog& events = t.events;
  const GroupKey key{"orders", "billing"};

  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(cli->Run({"XADD", "{orders:" + std::to_string(s) + "}", "*", "k", "v"}).ok());
  }
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  auto resharded = service.Reshard("orders", stream->revision, 3, nullptr);
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
  auto loaded = store.value()->Load(key, t.clock.NowMs());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  for (const ShardState& s : loaded->meta->shards) {
    if (s.generation == 0) {
      EXPECT_TRUE(s.completed) << "parent " << s.id;
    }
  }
}

// RS2's barrier as the tick runs it: with a replica that does not acknowledge (stopped), a
// reshard is recorded PREPARING but nothing is sealed — the layout could still be lost to a
// failover. Once the replica is back, the next pass seals and activates. Without the barrier
// the seal would be written (its own WAIT fails only after the XADD).
TEST(StreamTick, NothingIsSealedBeforeAReplicaHasThePreparingLayout) {
  RedisProcess master;
  ASSERT_TRUE(master.Start());
  RedisProcessOptions ro;
  ro.replicaof_port = master.Port();
  RedisProcess replica(ro);
  ASSERT_TRUE(replica.Start());
  auto cli = master.Cli();
  ASSERT_NE(cli, nullptr);
  // Streaming: the replica acknowledged a fresh write (see tests/redis/stream_admin_test.cc).
  ASSERT_TRUE(WaitFor(
      [&] {
        return cli->Run({"SET", "probe", "1"}).ok() && cli->Run({"WAIT", "1", "100"}).integer == 1;
      },
      20s, "the replica to acknowledge the master's writes"));
  auto url = redis::ParseRedisUrl(master.Url());
  ASSERT_TRUE(url.ok());
  redis::RedisStoreOptions so;
  so.replica_wait = std::chrono::milliseconds(300);
  auto store = redis::RedisStore::Open(*url, so);
  ASSERT_TRUE(store.ok()) << store.error().message;
  redis::RedisStreamAdmin admin(store.value()->executor(), std::chrono::milliseconds(300));
  TestService t(*store.value(), admin);
  GroupService& service = t.service;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  auto sealed = [&](const std::string& key) {
    const CliReply r = cli->Run({"XREVRANGE", key, "+", "-", "COUNT", "1"});
    return r.ok() && r.elements.size() == 1 && r.elements[0].elements[0].str == kSealId;
  };
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());

  replica.Pause();
  auto resharded = service.Reshard("orders", stream->revision, 3, nullptr);  // runs a pass itself
  const Status paused_pass = service.StreamTick("orders");
  replica.Resume();
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  EXPECT_FALSE(paused_pass.ok()) << "a pass sealed or went on without the replica";
  EXPECT_FALSE(sealed("{orders:0}")) << "sealed before a replica had the PREPARING layout";
  EXPECT_FALSE(sealed("{orders:1}"));
  ASSERT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
            GenerationState::kPreparing);

  ASSERT_TRUE(WaitFor([&] { return service.StreamTick("orders").ok(); }, 20s,
                      "a pass succeeds once the replica acknowledges again"));
  EXPECT_TRUE(sealed("{orders:0}"));
  EXPECT_TRUE(sealed("{orders:1}"));
  EXPECT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
            GenerationState::kActive);
}

}  // namespace
}  // namespace rsc::testing
