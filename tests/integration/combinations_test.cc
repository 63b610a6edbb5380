// The combinations the Redis PSYNC2 postmortem warns about (SPEC §10.1, last paragraph):
// the priority scenarios run through the real GroupService against a real redis-server,
// each under every "mode":
//   Plain          — nothing else happens;
//   ScriptFlush    — the script cache is emptied before every request (the exact
//                    failure class of the postmortem: EVALSHA after a restart);
//   TwoReplicas    — requests alternate between two coordinator instances, each with its
//                    own store, connections and parse cache (1→2→1 replicas, S2);
//   RedisRestart   — redis-server is restarted (persistence on) before every request.
// Time is a manual clock injected into both coordinators, so expiry is exact and no test
// sleeps. A rollback is a real one: DUMP of the group's keys, later RESTORE … REPLACE.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/core_harness.h"
#include "redis/redis_store.h"
#include "redis/redis_url.h"
#include "server/group_service.h"
#include "server/system.h"
#include "support/redis_process.h"

namespace rsc::testing {
namespace {

enum class Mode { kPlain, kScriptFlush, kTwoReplicas, kRedisRestart };

std::string ModeName(Mode m) {
  switch (m) {
    case Mode::kPlain:
      return "Plain";
    case Mode::kScriptFlush:
      return "ScriptFlush";
    case Mode::kTwoReplicas:
      return "TwoReplicas";
    case Mode::kRedisRestart:
      return "RedisRestart";
  }
  return "?";
}

class ManualClock : public Clock {
 public:
  TimeMs NowMs() override { return now_; }
  void Advance(TimeMs ms) { now_ += ms; }
  TimeMs now_ = 1'900'000'000'000;
};

// Two coordinator instances over one real redis-server.
class ServiceHarness {
 public:
  explicit ServiceHarness(Mode mode) : mode_(mode), redis_(Options()) {
    EXPECT_TRUE(redis_.Start());
    for (int i = 0; i < 2; ++i) {
      auto url = redis::ParseRedisUrl(redis_.Url());
      auto store = redis::RedisStore::Open(*url, {});
      EXPECT_TRUE(store.ok()) << store.error().message;
      stores_.push_back(std::move(store).value());
      services_.push_back(std::make_unique<GroupService>(
          *stores_.back(), clock_, tokens_, observer_, GroupServiceOptions{}, nullptr));
    }
    CreateGroupRequest req{"orders", "billing", 4, {}};
    auto view = services_[0]->CreateGroup(req, nullptr);
    EXPECT_TRUE(view.ok()) << view.error().message;
  }

  static RedisProcessOptions Options() {
    RedisProcessOptions o;
    o.appendonly = true;  // a restart keeps the data; only the script cache is lost
    return o;
  }

  // Applies the mode's interference, then sends the heartbeat like a client would:
  // a retryable 503 (Redis just restarted) is retried a few times.
  Result<HeartbeatResponse> Heartbeat(const HeartbeatRequest& req) {
    Interfere();
    Result<HeartbeatResponse> r = MakeError(ErrorCode::kInternal, "not sent");
    for (int attempt = 0; attempt < 5; ++attempt) {
      r = Service().Heartbeat(key_, req);
      if (r.ok() || r.error().code != ErrorCode::kRedisUnavailable) break;
    }
    return r;
  }

  void Tick() {
    Interfere();
    (void)Service().Tick(key_);
  }

  void Advance(TimeMs ms) { clock_.Advance(ms); }
  TimeMs now() const { return clock_.now_; }

  // A real snapshot of the group's keys in Redis, and a real rollback to it.
  struct Snapshot {
    std::string metadata, liveness;
  };
  Snapshot Save() {
    auto cli = redis_.Cli();
    Snapshot s;
    s.metadata = cli->Run({"DUMP", kMetaKey}).str;
    s.liveness = cli->Run({"DUMP", kLiveKey}).str;
    return s;
  }
  void RollbackTo(const Snapshot& s) {
    auto cli = redis_.Cli();
    ASSERT_TRUE(cli->Run({"RESTORE", kMetaKey, "0", s.metadata, "REPLACE"}).ok());
    if (s.liveness.empty()) {
      cli->Run({"DEL", kLiveKey});
    } else {
      ASSERT_TRUE(cli->Run({"RESTORE", kLiveKey, "0", s.liveness, "REPLACE"}).ok());
    }
  }
  void DeleteMetadataKey() { redis_.Cli()->Run({"DEL", kMetaKey}); }
  bool MetadataKeyExists() { return redis_.Cli()->Run({"EXISTS", kMetaKey}).integer == 1; }

  GroupView View() {
    auto v = services_[0]->DescribeGroup(key_);
    EXPECT_TRUE(v.ok()) << v.error().message;
    return v.ok() ? *v : GroupView{};
  }
  std::string OwnerOf(int32_t shard) {
    for (const MemberView& m : View().members) {
      for (int32_t s : m.assigned_shards) {
        if (s == shard) return m.member_id;
      }
      for (int32_t s : m.revoking_shards) {
        if (s == shard) return m.member_id;
      }
    }
    return "";
  }

  Mode mode() const { return mode_; }

 private:
  static constexpr const char* kMetaKey = "redis-stream:coord:{orders:billing}:metadata";
  static constexpr const char* kLiveKey = "redis-stream:coord:{orders:billing}:liveness";

  void Interfere() {
    switch (mode_) {
      case Mode::kScriptFlush:
        ASSERT_TRUE(redis_.Cli()->Run({"SCRIPT", "FLUSH"}).ok());
        break;
      case Mode::kRedisRestart:
        ASSERT_TRUE(redis_.Restart(/*save=*/true));
        break;
      default:
        break;
    }
  }
  GroupService& Service() {
    if (mode_ != Mode::kTwoReplicas) return *services_[0];
    return *services_[next_++ % 2];
  }

  Mode mode_;
  RedisProcess redis_;
  ManualClock clock_;
  RandomTokens tokens_;
  ServiceObserver observer_;
  std::vector<std::unique_ptr<redis::RedisStore>> stores_;
  std::vector<std::unique_ptr<GroupService>> services_;
  GroupKey key_{"orders", "billing"};
  size_t next_ = 0;
};

HeartbeatResponse MustOk(const Result<HeartbeatResponse>& r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? ""
                                 : std::string(ErrorCodeName(r.error().code)) + ": " +
                                       r.error().message);
  return r.ok() ? *r : HeartbeatResponse{};
}

class Combinations : public ::testing::TestWithParam<Mode> {
 protected:
  // A owned all 4 shards; B joined; A has to drain 2 and 3.
  void Rebalanced(ServiceHarness& h, FakeMember& a, FakeMember& b) {
    a.Observe(MustOk(h.Heartbeat(a.Request())));
    a.Observe(MustOk(h.Heartbeat(a.Request())));
    ASSERT_EQ(a.owned, V({0, 1, 2, 3}));
    b.Observe(MustOk(h.Heartbeat(b.Request())));
  }
};

TEST_P(Combinations, Scenario01_DrainResponseLostSameDrainAgain) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, b{"B"};
  Rebalanced(h, a, b);
  const auto req = a.Request();
  auto lost = MustOk(h.Heartbeat(req));
  auto again = MustOk(h.Heartbeat(req));
  EXPECT_EQ(lost.status, HeartbeatStatus::kDrain);
  EXPECT_EQ(again, lost);
}

TEST_P(Combinations, Scenario03_RevokedResponseLostNewOwnerGetsShard) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, b{"B"};
  Rebalanced(h, a, b);
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  (void)MustOk(h.Heartbeat(a.Request()));  // REVOKED written, response lost
  auto rb = MustOk(h.Heartbeat(b.Request()));
  EXPECT_EQ(rb.status, HeartbeatStatus::kOk);
  EXPECT_EQ(rb.assigned_shards, V({2, 3}));
}

TEST_P(Combinations, Scenario04_OwnerExpiresWhileDrainingNewOwnerAfterExpiry) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, b{"B"};
  Rebalanced(h, a, b);
  (void)MustOk(h.Heartbeat(a.Request()));  // DRAIN, then A goes silent
  for (int i = 0; i < 9; ++i) {
    h.Advance(1000);
    b.Observe(MustOk(h.Heartbeat(b.Request())));
    ASSERT_TRUE(b.owned.empty()) << "K1: not before A's lease ends (t+" << (i + 1) << "s)";
  }
  h.Advance(1000);
  h.Tick();
  b.Observe(MustOk(h.Heartbeat(b.Request())));
  b.Observe(MustOk(h.Heartbeat(b.Request())));
  EXPECT_EQ(b.owned, V({0, 1, 2, 3}));
}

TEST_P(Combinations, Scenario05_MetadataKeyDeletedFailsClosedNeverRecreated) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"};
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  h.DeleteMetadataKey();
  for (int i = 0; i < 3; ++i) {
    auto r = h.Heartbeat(a.Request());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kMetadataMissing);
    h.Tick();
  }
  EXPECT_FALSE(h.MetadataKeyExists()) << "L1: never rebuilt from heartbeats or ticks";
}

TEST_P(Combinations, Scenario06And07_RollbackGetsSyncRepeatedIdentically) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, b{"B"};
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  auto snap = h.Save();
  b.Observe(MustOk(h.Heartbeat(b.Request())));
  a.Observe(MustOk(h.Heartbeat(a.Request())));  // A observes the newer version
  h.RollbackTo(snap);
  const auto req = a.Request();
  auto first = MustOk(h.Heartbeat(req));  // lost
  auto second = MustOk(h.Heartbeat(req));
  EXPECT_EQ(first.status, HeartbeatStatus::kSyncMetadata);
  EXPECT_EQ(second, first) << "scenario 7: the same SYNC_METADATA again";
  // M2/M10: the answer is the stored version after recording the round — it may even
  // equal the client's number, but under the stored lineage, never the client's (M8).
  EXPECT_EQ(second.metadata_version, h.View().metadata_version);
  EXPECT_NE(second.lineage, a.lineage);
}

TEST_P(Combinations, Scenario08_AfterSyncRevokePendingUntilBlockersClear) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, c{"C"};
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  auto snap = h.Save();
  c.Observe(MustOk(h.Heartbeat(c.Request())));
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  c.Observe(MustOk(h.Heartbeat(c.Request())));
  ASSERT_FALSE(c.owned.empty());
  h.RollbackTo(snap);  // C and its shards are gone from Redis
  auto cr = h.Heartbeat(c.Request());
  ASSERT_FALSE(cr.ok());
  EXPECT_EQ(cr.error().code, ErrorCode::kUnknownMemberId);
  a.Observe(MustOk(h.Heartbeat(a.Request())));  // SYNC_METADATA
  auto p = MustOk(h.Heartbeat(a.Request()));
  EXPECT_EQ(p.status, HeartbeatStatus::kRevokePending) << "C's claims still block";
  HeartbeatStatus last = p.status;
  for (int i = 0; i < 14 && last != HeartbeatStatus::kOk; ++i) {
    h.Advance(1000);
    auto r = MustOk(h.Heartbeat(a.Request()));
    a.Observe(r);
    last = r.status;
  }
  EXPECT_EQ(last, HeartbeatStatus::kOk) << "OK once C's lease must have ended (M6)";
}

TEST_P(Combinations, Scenario09_StaleRevokesDuringRoundIgnored) {
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, b{"B"};
  Rebalanced(h, a, b);
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  a.Observe(MustOk(h.Heartbeat(a.Request())));
  b.Observe(MustOk(h.Heartbeat(b.Request())));
  b.Observe(MustOk(h.Heartbeat(b.Request())));
  ASSERT_EQ(b.owned, V({2, 3}));
  FakeMember future = a;
  future.version += 7;  // a version from a lost future starts a round
  (void)MustOk(h.Heartbeat(future.Request()));
  HeartbeatRequest stale = b.Request();
  stale.revoking_shards = {{0, RevokeState::kRevoked}};
  (void)MustOk(h.Heartbeat(stale));
  EXPECT_EQ(h.OwnerOf(0), "A") << "a revoke not matching stored ownership is ignored (M5)";
}

TEST_P(Combinations, Scenario11_NewCoordinatorContinuesFromRedis) {
  // Every request of this scenario may land on a different instance (TwoReplicas) or
  // after a Redis restart; the handoff still completes from Redis alone.
  ServiceHarness h(GetParam());
  FakeMember a{"A"}, b{"B"};
  Rebalanced(h, a, b);
  for (int i = 0; i < 3; ++i) {
    a.Observe(MustOk(h.Heartbeat(a.Request())));
    b.Observe(MustOk(h.Heartbeat(b.Request())));
  }
  EXPECT_EQ(a.owned, V({0, 1}));
  EXPECT_EQ(b.owned, V({2, 3}));
}

TEST_P(Combinations, ConsumerRestartWithSameInstanceIdMidDrain) {
  // The third axis of SPEC §10.1: A restarts (same instanceId, new member id) right after
  // its DRAIN was recorded. The new process never read 2 and 3, reports them REVOKED at
  // once (C3), and B gets them without waiting for any lease.
  ServiceHarness h(GetParam());
  FakeMember a{"A1", "inst-a"}, b{"B"};
  Rebalanced(h, a, b);
  (void)MustOk(h.Heartbeat(a.Request()));  // DRAIN recorded; A1 dies
  FakeMember a2{"A2", "inst-a"};
  auto j = MustOk(h.Heartbeat(a2.Request()));
  EXPECT_EQ(j.revoke_shards, V({2, 3}));
  a2.Observe(j);
  a2.Observe(MustOk(h.Heartbeat(a2.Request())));  // REVOKED 2, 3
  auto rb = MustOk(h.Heartbeat(b.Request()));
  EXPECT_EQ(rb.status, HeartbeatStatus::kOk);
  EXPECT_EQ(rb.assigned_shards, V({2, 3}));
  auto old = h.Heartbeat(a.Request());
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().code, ErrorCode::kFencedMemberEpoch) << "the old process is fenced";
}

INSTANTIATE_TEST_SUITE_P(Psync2Lessons, Combinations,
                         ::testing::Values(Mode::kPlain, Mode::kScriptFlush, Mode::kTwoReplicas,
                                           Mode::kRedisRestart),
                         [](const auto& info) { return ModeName(info.param); });

}  // namespace
}  // namespace rsc::testing
