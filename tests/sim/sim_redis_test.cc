// The simulated Redis's model of WAIT (sim/sim_redis.h, SPEC RS2): a write is acknowledged
// when the replica applies it, in log order, and an acknowledged write survives a failover
// while an unacknowledged one may not. The simulated coordinator's seal and layout barrier
// wait on it (sim/sim_coordinator.cc AwaitReplica), as production's RunAcknowledged does.

#include "sim/sim_redis.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/decide.h"

namespace rsc::sim {
namespace {

bool Sealed(SimRedis& r, const std::string& key) { return r.Tops({key})[0].sealed; }

TEST(SimRedisWait, AWriteIsAcknowledgedOnceTheReplicaAppliesItInLogOrder) {
  World w(7, Buggify::Mode::kAllOff);
  SimRedis r(w);
  r.set_max_lag_ms(300);
  w.RunUntil(1000);
  ASSERT_TRUE(r.Seal("{orders:0}", 1, "").ok());
  const uint64_t first = r.write_offset();
  ASSERT_GT(first, 0u);
  const TimeMs first_at = r.AcknowledgedAt(first);
  EXPECT_GE(first_at, 1000);
  EXPECT_LE(first_at, 1300);
  ASSERT_TRUE(r.Seal("{orders:1}", 1, "").ok());
  const uint64_t second = r.write_offset();
  EXPECT_EQ(second, first + 1);
  // Never out of order: a later write is acknowledged no earlier than an older one.
  EXPECT_GE(r.AcknowledgedAt(second), first_at);
  w.RunUntil(r.AcknowledgedAt(second));
  r.CatchUp();
  EXPECT_EQ(r.replication_backlog(), 0u);
  EXPECT_EQ(r.AcknowledgedAt(first), w.now());
  EXPECT_EQ(r.AcknowledgedAt(second), w.now());
}

TEST(SimRedisWait, AnAcknowledgedSealSurvivesAFailoverAndAnUnacknowledgedOneIsLost) {
  World w(11, Buggify::Mode::kAllOff);
  SimRedis r(w);
  r.set_max_lag_ms(0);
  w.RunUntil(100);
  ASSERT_TRUE(r.Seal("{orders:0}", 1, "").ok());
  EXPECT_EQ(r.AcknowledgedAt(r.write_offset()), w.now()) << "no lag: acknowledged at once";
  // The replica falls behind by seconds: WAIT 1 1000 would time out on this seal.
  r.Stall(/*until=*/10000, /*lag=*/5000);
  ASSERT_TRUE(r.Seal("{orders:1}", 1, "").ok());
  EXPECT_GT(r.AcknowledgedAt(r.write_offset()), w.now() + 1000);
  w.RunUntil(200);
  r.Failover(/*down_ms=*/50);
  EXPECT_TRUE(Sealed(r, "{orders:0}")) << "acknowledged before the failover";
  EXPECT_FALSE(Sealed(r, "{orders:1}")) << "the promoted replica never had it";
}

// The commits S6 judges answers against (sim/sim_redis.cc EmitCommit): a batch of heartbeats
// writes several versions at once, each decision's in the written lineage history, and each
// is recorded as committed at the write's revision — but only a history that continues the
// replaced version one step at a time; one a broken decision made up commits its last
// version alone (the bump_version_on_rollback mutant copies a client's claimed version in).
class SimRedisCommits : public ::testing::Test {
 protected:
  static constexpr TimeMs kNow = 1'700'000'000'000;
  static GroupMetadata Next(GroupMetadata m, int64_t version) {
    m.version = MetadataVersion(version);
    m.lineage = "l" + std::to_string(version);
    m.lineage_history.push_back({m.version, m.lineage});
    return m;
  }
  // (version, lineage) of every commit recorded at `revision`.
  std::vector<std::pair<int64_t, std::string>> CommitsAt(int64_t revision) const {
    std::vector<std::pair<int64_t, std::string>> out;
    for (const HistEvent& e : w_.history()) {
      if (e.kind == HistKind::kCommit && e.revision == revision)
        out.emplace_back(e.version, e.lineage);
    }
    return out;
  }
  // Creates the group (version 1) and writes `next` over it; the write's revision.
  int64_t CreateThenWrite(const GroupMetadata& created, const GroupMetadata& next) {
    auto rev = r_.Create("coord-0#1", created, kNow);
    EXPECT_TRUE(rev.ok());
    auto cas = r_.CompareAndSet("coord-0#1", created.key, *rev, &next, {}, kNow);
    EXPECT_TRUE(cas.ok() && cas->applied);
    return cas->revision.value();
  }
  GroupMetadata Created() const {
    return DecideCreate(CreateGroupRequest{"orders", "g1", 4, {}}, Env{kNow, "l1"}).value();
  }

  World w_{1, Buggify::Mode::kAllOff};
  SimRedis r_{w_};
};

TEST_F(SimRedisCommits, ABatchedWriteCommitsEveryVersionItsDecisionsWrote) {
  const GroupMetadata created = Created();
  const int64_t v = created.version.value();
  const GroupMetadata next = Next(Next(Next(created, v + 1), v + 2), v + 3);
  const int64_t rev = CreateThenWrite(created, next);
  EXPECT_EQ(CommitsAt(rev),
            (std::vector<std::pair<int64_t, std::string>>{{v + 1, "l" + std::to_string(v + 1)},
                                                          {v + 2, "l" + std::to_string(v + 2)},
                                                          {v + 3, "l" + std::to_string(v + 3)}}));
}

TEST_F(SimRedisCommits, AMadeUpHistoryCommitsOnlyTheWrittenVersion) {
  const GroupMetadata created = Created();
  const int64_t v = created.version.value();
  // A client claimed version v + 8; the write copies it into the history, then v + 9.
  const GroupMetadata next = Next(Next(created, v + 8), v + 9);
  const int64_t rev = CreateThenWrite(created, next);
  EXPECT_EQ(CommitsAt(rev),
            (std::vector<std::pair<int64_t, std::string>>{{v + 9, "l" + std::to_string(v + 9)}}));
}

}  // namespace
}  // namespace rsc::sim
