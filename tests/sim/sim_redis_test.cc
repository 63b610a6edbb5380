// The simulated Redis's model of WAIT (sim/sim_redis.h, SPEC RS2): a write is acknowledged
// when the replica applies it, in log order, and an acknowledged write survives a failover
// while an unacknowledged one may not. The simulated coordinator's seal and layout barrier
// wait on it (sim/sim_coordinator.cc AwaitReplica), as production's RunAcknowledged does.

#include "sim/sim_redis.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rsc::sim
