// The stream tick (GroupService::StreamTick, SPEC RS3) against a real redis-server, driven
// directly so a test can act between its steps: a completion observed in Redis is applied
// to the group under the group's mutex, never from an observation older than what a
// member's completedShards hint recorded meanwhile.

#include <gtest/gtest.h>

#include <atomic>
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

// Time stands still unless a test moves it (a reshard's routing-lease wait, Advance).
class ManualClock : public Clock {
 public:
  TimeMs NowMs() override { return now_.load(); }
  void Advance(TimeMs ms) { now_ += ms; }

 private:
  std::atomic<TimeMs> now_{1'900'000'000'000};
};

// Past the routing-lease wait of a reshard made now (default routingLeaseMs 30 s + 1 s).
constexpr TimeMs kPastTheWaitMs = 30000 + kPrepareMarginMs;

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
    if (fail_seals_) return MakeError(ErrorCode::kRedisUnavailable, "injected: seal failed");
    return inner_.Seal(key, generation, successor);
  }
  std::vector<Result<StreamTop>> Tops(const std::vector<std::string>& keys) override {
    std::function<void()> hook;
    std::swap(hook, once_tops_);
    if (hook) hook();
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
  // Runs `hook` right before the next Tops call reads Redis (after the tick read the layout).
  void RunOnceBeforeNextTops(std::function<void()> hook) { once_tops_ = std::move(hook); }
  void FailSeals(bool fail) { fail_seals_ = fail; }

 private:
  StreamAdmin& inner_;
  std::function<void()> once_;
  std::function<void()> once_tops_;
  bool fail_seals_ = false;
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

// A GroupService over `store` with `admin` as its StreamAdmin, a manual clock, and its events
// recorded.
struct TestService {
  TestService(MetadataStore& store, StreamAdmin& admin)
      : service(store, clock, tokens, events, Options(admin), nullptr) {}
  static GroupServiceOptions Options(StreamAdmin& admin) {
    GroupServiceOptions o;
    o.streams = &admin;
    return o;
  }
  ManualClock clock;
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

// One redis-server, the production store and StreamAdmin (hooked), a GroupService over them.
class StreamTick : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    cli = redis_.Cli();
    ASSERT_NE(cli, nullptr);
    auto url = redis::ParseRedisUrl(redis_.Url());
    ASSERT_TRUE(url.ok());
    auto store = redis::RedisStore::Open(*url, {});
    ASSERT_TRUE(store.ok()) << store.error().message;
    store_ = std::move(store).value();
    real_ = std::make_unique<redis::RedisStreamAdmin>(store_->executor());
    admin_ = std::make_unique<HookedAdmin>(*real_);
    t_ = std::make_unique<TestService>(*store_, *admin_);
  }
  // Group billing of stream orders on 2 shards, resharded to 3: the new generation PREPARING.
  void CreateAndReshard() {
    GroupService& service = t_->service;
    ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
    auto stream = service.DescribeStream("orders");
    ASSERT_TRUE(stream.ok()) << stream.error().message;
    ASSERT_TRUE(service.Reshard("orders", stream->revision, 3, nullptr).ok());
  }
  // Every key with its DUMP: what a snapshot restore brings back (RestoreAll).
  using Snapshot = std::vector<std::pair<std::string, std::string>>;
  Snapshot Dump() {
    Snapshot snapshot;
    for (const CliReply& k : cli->Run({"KEYS", "*"}).elements) {
      snapshot.emplace_back(k.str, cli->Run({"DUMP", k.str}).str);
    }
    EXPECT_FALSE(snapshot.empty());
    return snapshot;
  }
  void RestoreAll(const Snapshot& snapshot) {
    ASSERT_TRUE(cli->Run({"FLUSHALL"}).ok());
    for (const auto& [key, dump] : snapshot) {
      ASSERT_TRUE(cli->Run({"RESTORE", key, "0", dump}).ok()) << key;
    }
  }

  RedisProcess redis_;
  std::unique_ptr<RedisCli> cli;
  std::unique_ptr<redis::RedisStore> store_;
  std::unique_ptr<redis::RedisStreamAdmin> real_;
  std::unique_ptr<HookedAdmin> admin_;
  std::unique_ptr<TestService> t_;
};

TEST_F(StreamTick, AnOlderObservationNeverReopensAParentAHintRecordedComplete) {
  HookedAdmin& admin = *admin_;
  GroupService& service = t_->service;
  EventLog& events = t_->events;
  const GroupKey key{"orders", "billing"};

  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(cli->Run({"XADD", "{orders:" + std::to_string(s) + "}", "*", "k", "v"}).ok());
  }
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  auto resharded = service.Reshard("orders", stream->revision, 3, nullptr);
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  t_->clock.Advance(kPastTheWaitMs);
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
  auto loaded = store_->Load(key, t_->clock.NowMs());
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
TEST(StreamTickWithReplica, NothingIsSealedBeforeAReplicaHasThePreparingLayout) {
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
  t.clock.Advance(kPastTheWaitMs);
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

// RS4 across a rollback of the whole Redis: the new generation's keys are created only once
// every parent is sealed. A Redis put back (snapshot restore) to any point before that has
// no child key, so a producer that saw the generation ACTIVE and still routes to it is
// refused (XADD … NOMKSTREAM) instead of writing keys that are read after what it then
// writes to the unsealed parents (simulator seed 20261568). Here the seals fail: the layout
// is PREPARING, and not one child key exists.
TEST_F(StreamTick, TheNewGenerationsKeysAreCreatedOnlyOnceEveryParentIsSealed) {
  HookedAdmin& admin = *admin_;
  GroupService& service = t_->service;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());

  admin.FailSeals(true);
  auto resharded = service.Reshard("orders", stream->revision, 3, nullptr);  // runs a pass itself
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  t_->clock.Advance(kPastTheWaitMs);
  EXPECT_FALSE(service.StreamTick("orders").ok()) << "a pass went on without its seals";
  auto layout = service.DescribeStream("orders");
  ASSERT_TRUE(layout.ok());
  const Generation& child = layout->layout.generations.back();
  ASSERT_EQ(child.state, GenerationState::kPreparing);
  ASSERT_EQ(child.shards.size(), 3u);
  // A group created meanwhile adopts the PREPARING generation but creates none of its keys
  // either (its consumer groups there come with the others, after the seals).
  ASSERT_TRUE(service.CreateGroup({"orders", "audit", 2, {}}, nullptr).ok());
  EXPECT_FALSE(service.StreamTick("orders").ok());
  for (const LayoutShard& s : child.shards) {
    EXPECT_EQ(cli->Run({"EXISTS", s.stream}).integer, 0)
        << s.stream << " exists while the parents are not sealed";
  }

  admin.FailSeals(false);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  EXPECT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
            GenerationState::kActive);
  for (const LayoutShard& s : child.shards) {
    const CliReply groups = cli->Run({"XINFO", "GROUPS", s.stream});
    ASSERT_EQ(groups.type, CliReply::Type::kArray) << s.stream << ": " << groups.str;
    EXPECT_EQ(groups.elements.size(), 2u) << s.stream << " lacks a group's consumer group";
  }
}

// RS2's routing-lease wait (simulator seed 20265809): a Redis restored from a snapshot taken
// before a reshard has no trace of it, yet producers still route to the generation it made
// until their routing lease ends (PR4). A second reshard picks the same ids and keys (D2:
// highest id + 1); had it created them at once, a stale XADD … NOMKSTREAM would land there,
// after newer entries of its key. So a reshard seals and creates keys only one routing lease
// plus kPrepareMarginMs after its PREPARING write, whichever coordinator's pass comes then.
TEST_F(StreamTick, NothingIsSealedOrCreatedWithinARoutingLeaseOfThePreparingWrite) {
  GroupService& service = t_->service;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());
  const TimeMs start = t_->clock.NowMs();
  auto resharded = service.Reshard("orders", stream->revision, 3, nullptr);  // runs a pass itself
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  const Generation& prepared = resharded->layout.generations.back();
  ASSERT_EQ(prepared.state, GenerationState::kPreparing);
  EXPECT_EQ(prepared.prepared_ms, start) << "the view shows when the wait began";
  const std::vector<LayoutShard> children = prepared.shards;
  auto nothing_yet = [&](const char* when) {
    for (const char* parent : {"{orders:0}", "{orders:1}"}) {
      const CliReply last = cli->Run({"XREVRANGE", parent, "+", "-", "COUNT", "1"});
      EXPECT_TRUE(last.elements.empty() || last.elements[0].elements[0].str != kSealId)
          << parent << " sealed " << when;
    }
    for (const LayoutShard& s : children) {
      EXPECT_EQ(cli->Run({"EXISTS", s.stream}).integer, 0) << s.stream << " created " << when;
    }
    EXPECT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
              GenerationState::kPreparing)
        << when;
  };
  nothing_yet("by the request's own pass");
  // A group created meanwhile adopts the PREPARING generation and creates none of its keys.
  ASSERT_TRUE(service.CreateGroup({"orders", "audit", 2, {}}, nullptr).ok());
  t_->clock.Advance(kPastTheWaitMs - 1);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  nothing_yet("1 ms before the wait ends");

  t_->clock.Advance(1);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  auto layout = service.DescribeStream("orders");
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->layout.generations.back().state, GenerationState::kActive);
  EXPECT_EQ(layout->layout.generations.back().prepared_ms, 0) << "cleared once ACTIVE";
  for (const char* parent : {"{orders:0}", "{orders:1}"}) {
    const CliReply last = cli->Run({"XREVRANGE", parent, "+", "-", "COUNT", "1"});
    ASSERT_EQ(last.elements.size(), 1u) << parent;
    EXPECT_EQ(last.elements[0].elements[0].str, kSealId) << parent;
  }
  for (const LayoutShard& s : children) {
    const CliReply groups = cli->Run({"XINFO", "GROUPS", s.stream});
    ASSERT_EQ(groups.type, CliReply::Type::kArray) << s.stream << ": " << groups.str;
    EXPECT_EQ(groups.elements.size(), 2u) << s.stream << " lacks a group's consumer group";
  }
}

// The wait is the longest routing lease producers may hold: a group's own (producers given a
// group route by its routing, 5.1) counts, and what is recorded at the reshard holds however
// the leases change afterwards.
TEST_F(StreamTick, TheWaitIsTheLongestRoutingLeaseOfTheStreamAndItsGroups) {
  GroupService& service = t_->service;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());  // 30 s
  GroupConfig audit;
  audit.routing_lease_ms = 45000;
  audit.routing_refresh_ms = 5000;
  ASSERT_TRUE(service.CreateGroup({"orders", "audit", 2, audit}, nullptr).ok());
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());
  ASSERT_EQ(stream->layout.routing_lease_ms, 30000) << "the layout keeps the first group's";
  auto resharded = service.Reshard("orders", stream->revision, 3, nullptr);
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  EXPECT_EQ(resharded->layout.generations.back().routing_wait_ms, 45000 + kPrepareMarginMs);
  t_->clock.Advance(kPastTheWaitMs);  // past the stream's lease, not the group's
  ASSERT_TRUE(service.StreamTick("orders").ok());
  EXPECT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
            GenerationState::kPreparing);
  EXPECT_EQ(cli->Run({"EXISTS", resharded->layout.generations.back().shards[0].stream}).integer, 0);
  t_->clock.Advance(45000 - 30000);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  EXPECT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
            GenerationState::kActive);
}

// While a reshard waits, what is already SEALED is still re-sealed by every pass (a failover
// can lose a seal); only the ACTIVE generation's seal and the new keys wait.
TEST_F(StreamTick, ASealLostDuringTheWaitIsWrittenAgainAtOnce) {
  GroupService& service = t_->service;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(service.Reshard("orders", stream->revision, 3, nullptr).ok());
  t_->clock.Advance(kPastTheWaitMs);
  ASSERT_TRUE(service.StreamTick("orders").ok());  // 0 SEALED, 1 ACTIVE
  auto layout = service.DescribeStream("orders");
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->layout.generations.back().state, GenerationState::kActive);
  const std::string active_key = layout->layout.generations.back().shards[0].stream;
  ASSERT_TRUE(service.Reshard("orders", layout->revision, 2, nullptr).ok());  // waits
  // The seal of {orders:0} is lost (here with the key: Redis keeps a deleted entry's ID as
  // the stream's last one, so only a rollback loses a seal).
  ASSERT_EQ(cli->Run({"DEL", "{orders:0}"}).integer, 1);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  const CliReply last = cli->Run({"XREVRANGE", "{orders:0}", "+", "-", "COUNT", "1"});
  ASSERT_EQ(last.elements.size(), 1u);
  EXPECT_EQ(last.elements[0].elements[0].str, kSealId) << "not re-sealed during the wait";
  EXPECT_EQ(t_->events.Count(EventKind::kParentResealed), 1);
  const CliReply active_last = cli->Run({"XREVRANGE", active_key, "+", "-", "COUNT", "1"});
  EXPECT_TRUE(active_last.elements.empty() || active_last.elements[0].elements[0].str != kSealId)
      << "the ACTIVE generation was sealed during the wait";
}

// A generation stamped by a clock far ahead (or read by a coordinator whose clock went back)
// is stamped again with the reading clock, so it waits one more lease, not until that clock
// catches up.
TEST_F(StreamTick, AWaitStampedByAClockAheadIsStampedAgainNotWaitedOut) {
  GroupService& service = t_->service;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());
  ManualClock ahead;
  ahead.Advance(24LL * 3600 * 1000);  // a day ahead
  GroupService skewed(*store_, ahead, t_->tokens, t_->events, TestService::Options(*admin_),
                      nullptr);
  auto resharded = skewed.Reshard("orders", stream->revision, 3, nullptr);
  ASSERT_TRUE(resharded.ok()) << resharded.error().message;
  ASSERT_EQ(resharded->layout.generations.back().prepared_ms, ahead.NowMs());
  ASSERT_TRUE(service.StreamTick("orders").ok());
  auto layout = service.DescribeStream("orders");
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->layout.generations.back().state, GenerationState::kPreparing);
  EXPECT_EQ(layout->layout.generations.back().prepared_ms, t_->clock.NowMs()) << "restamped";
  t_->clock.Advance(kPastTheWaitMs);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  EXPECT_EQ(service.DescribeStream("orders")->layout.generations.back().state,
            GenerationState::kActive);
}

// C9 (f) has readers of a resharded stream create no keys, so the tick creates a missing key
// of the ACTIVE generation (an operator's DEL) with every group's consumer group; an
// event counts it. A stream never resharded is left to its readers, as before.
TEST_F(StreamTick, AMissingKeyOfAReshardedStreamIsCreatedWithItsGroups) {
  GroupService& service = t_->service;
  TestService& t = *t_;
  ASSERT_TRUE(service.CreateGroup({"orders", "billing", 2, {}}, nullptr).ok());
  ASSERT_TRUE(service.CreateGroup({"orders", "audit", 2, {}}, nullptr).ok());

  ASSERT_EQ(cli->Run({"DEL", "{orders:1}"}).integer, 1);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  EXPECT_EQ(cli->Run({"EXISTS", "{orders:1}"}).integer, 0)
      << "a stream never resharded: its readers create the key (MKSTREAM), the tick does not";

  auto stream = service.DescribeStream("orders");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(service.Reshard("orders", stream->revision, 3, nullptr).ok());
  t.clock.Advance(kPastTheWaitMs);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  auto layout = service.DescribeStream("orders");
  ASSERT_TRUE(layout.ok());
  const Generation& active = layout->layout.generations.back();
  ASSERT_EQ(active.state, GenerationState::kActive);
  const std::string key = active.shards[1].stream;
  ASSERT_EQ(cli->Run({"DEL", key}).integer, 1);
  ASSERT_EQ(t.events.Count(EventKind::kShardKeyRecreated), 0);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  const CliReply groups = cli->Run({"XINFO", "GROUPS", key});
  ASSERT_EQ(groups.type, CliReply::Type::kArray) << key << " was not created: " << groups.str;
  EXPECT_EQ(groups.elements.size(), 2u) << key << " lacks a group's consumer group";
  EXPECT_EQ(t.events.Count(EventKind::kShardKeyRecreated), 1);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  EXPECT_EQ(t.events.Count(EventKind::kShardKeyRecreated), 1) << "created again though there";
}

// Found by the simulator (seed 15524999770511949606, S4): the tick read the layout with the
// new generation ACTIVE, then a snapshot restore took Redis back to where that generation was
// still PREPARING (its keys not yet created, its parents not yet sealed), then the tick read
// the tops, found the new keys missing and created them. A producer still routed by an answer
// from before the restore wrote a child, then, routed by the restored layout, the open parent
// (read first). The tick now reads the layout again before creating a key and acts only on
// the same one (shard_key_recreate_deferred otherwise).
TEST_F(StreamTick, AKeyIsNotRecreatedFromALayoutARollbackOvertookBetweenTheReads) {
  GroupService& service = t_->service;
  TestService& t = *t_;
  CreateAndReshard();
  // The snapshot: the layout with the new generation PREPARING, the group, the parents
  // unsealed, no child keys.
  const Snapshot snapshot = Dump();
  t.clock.Advance(kPastTheWaitMs);
  ASSERT_TRUE(service.StreamTick("orders").ok());
  auto active = service.DescribeStream("orders");
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->layout.generations.back().state, GenerationState::kActive);
  std::vector<std::string> children;
  for (const LayoutShard& s : active->layout.generations.back().shards) {
    children.push_back(s.stream);
  }
  const std::string seal_id = "18446744073709551615-18446744073709551615";

  // The restore, between the tick's layout read and its tops read.
  admin_->RunOnceBeforeNextTops([&] { RestoreAll(snapshot); });
  Status tick = service.StreamTick("orders");
  ASSERT_TRUE(tick.ok()) << tick.error().message;
  for (const std::string& child : children) {
    EXPECT_EQ(cli->Run({"EXISTS", child}).integer, 0)
        << child << " was created while its parents are open and the layout says PREPARING";
  }
  EXPECT_EQ(t.events.Count(EventKind::kShardKeyRecreated), 0);
  EXPECT_EQ(t.events.Count(EventKind::kShardKeyRecreateDeferred), 1);

  // The next pass acts on the restored layout: the reshard goes on, seals first (RS2).
  ASSERT_TRUE(service.StreamTick("orders").ok());
  auto after = service.DescribeStream("orders");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->layout.generations.back().state, GenerationState::kActive);
  for (const LayoutShard& s : after->layout.generations.front().shards) {
    const CliReply last = cli->Run({"XREVRANGE", s.stream, "+", "-", "COUNT", "1"});
    ASSERT_EQ(last.type, CliReply::Type::kArray);
    ASSERT_EQ(last.elements.size(), 1u) << s.stream;
    EXPECT_EQ(last.elements[0].elements[0].str, seal_id) << s.stream << " is not sealed";
  }
  for (const std::string& child : children) EXPECT_EQ(cli->Run({"EXISTS", child}).integer, 1);
}

// A group is not written from a layout read before a rollback (simulator seed 82 of the
// Seed12 search): the pass seals and activates the new generation and reads that layout;
// then, while it reads the parents' progress, Redis goes back to a snapshot taken with the
// generation PREPARING. The group it loads next is the restored one; adopting the layout
// read before would put it on a generation Redis does not have, which no later pass can
// roll forward (no seal of it survived). Nothing is written; the next pass reshards again
// from what Redis holds.
TEST_F(StreamTick, AGroupDoesNotAdoptALayoutARollbackTookAwayBetweenTheReads) {
  GroupService& service = t_->service;
  TestService& t = *t_;
  const GroupKey key{"orders", "billing"};
  CreateAndReshard();
  const Snapshot snapshot = Dump();
  t.clock.Advance(kPastTheWaitMs);
  admin_->RunOnceInNextProgress([&] { RestoreAll(snapshot); });
  Status tick = service.StreamTick("orders");
  ASSERT_TRUE(tick.ok()) << tick.error().message;

  auto layout = service.DescribeStream("orders");
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->layout.generations.back().state, GenerationState::kPreparing)
      << "the hook did not restore the snapshot";
  auto group = store_->Load(key, t.clock.NowMs());
  ASSERT_TRUE(group.ok()) << group.error().message;
  EXPECT_EQ(group->meta->active_generation, 0)
      << "the group adopted generation 1, which the restored layout has PREPARING";
  EXPECT_LE(group->meta->layout_revision, layout->revision)
      << "the group records a layout revision Redis does not hold";
  EXPECT_EQ(t.events.Count(EventKind::kLayoutAdoptionDeferred), 1);

  // The next passes act on the restored layout: seal, activate, adopt.
  ASSERT_TRUE(service.StreamTick("orders").ok());
  auto after = service.DescribeStream("orders");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->layout.generations.back().state, GenerationState::kActive);
  group = store_->Load(key, t.clock.NowMs());
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->meta->active_generation, 1);
  EXPECT_EQ(group->meta->layout_revision, after->revision);
}

// The same for a completion hint (the path seed 82 took): the heartbeat reads the layout
// and the parents' progress, Redis goes back to the snapshot meanwhile, and the group it
// loads under the mutex is the restored one: the hint writes nothing.
TEST_F(StreamTick, AHintDoesNotWriteAGroupFromALayoutARollbackTookAway) {
  GroupService& service = t_->service;
  TestService& t = *t_;
  const GroupKey key{"orders", "billing"};
  CreateAndReshard();
  const Snapshot snapshot = Dump();
  t.clock.Advance(kPastTheWaitMs);
  ASSERT_TRUE(service.StreamTick("orders").ok());  // sealed, activated, adopted
  Drain(*cli, "{orders:0}", "billing");
  Drain(*cli, "{orders:1}", "billing");
  admin_->RunOnceInNextProgress([&] { RestoreAll(snapshot); });
  HeartbeatRequest hint;
  hint.member_id = MemberId("a");
  hint.instance_id = "i-a";
  hint.features = {"layout-v2", "shard-lease"};
  hint.completed_shards = {0, 1};
  (void)service.Heartbeat(key, hint);

  auto group = store_->Load(key, t.clock.NowMs());
  ASSERT_TRUE(group.ok()) << group.error().message;
  EXPECT_EQ(group->meta->active_generation, 0)
      << "the hint put the restored group on generation 1, PREPARING in the restored layout";
  for (const ShardState& s : group->meta->shards) EXPECT_FALSE(s.completed) << "shard " << s.id;
  EXPECT_EQ(t.events.Count(EventKind::kLayoutAdoptionDeferred), 1);
}

}  // namespace
}  // namespace rsc::testing
