// CompatWatch (server/compat_watch.h): the start-up Redis compatibility check repeated from
// /readyz while the coordinator runs (issue 13: the compat-failure counter could never be
// scraped). The check is a function and the clock a hand-held one: no Redis, no sleeps.

#include "server/compat_watch.h"

#include <gtest/gtest.h>

#include <string>

namespace rsc {
namespace {

class HandClock : public Clock {
 public:
  TimeMs NowMs() override { return now; }
  TimeMs now = 1'000'000;
};

double CompatFailures(const Metrics& m) {
  const std::string text = m.Serialize();
  const std::string name = "rsc_redis_compat_failures_total ";
  const size_t at = text.find("\n" + name);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + name.size()));
}

struct Fixture {
  HandClock clock;
  Metrics metrics;
  int checks = 0;
  // What the next check finds: compatible, missing EVAL, or Redis unreachable.
  enum class Redis { kOk, kNoEval, kDown } redis = Redis::kOk;
  CompatWatch watch{[this]() -> Result<redis::CompatReport> {
                      ++checks;
                      if (redis == Redis::kDown) {
                        return MakeError(ErrorCode::kRedisUnavailable, "connection refused");
                      }
                      redis::CompatReport r;
                      r.address = "127.0.0.1:6379";
                      if (redis == Redis::kNoEval) {
                        r.missing_required.push_back("EVAL (denied by ACL: NOPERM)");
                      }
                      return r;
                    },
                    clock, metrics, /*interval_ms=*/30000};
};

TEST(CompatWatch, ChecksAtMostOncePerInterval) {
  Fixture f;
  EXPECT_TRUE(f.watch.Current().ok());
  EXPECT_EQ(f.checks, 1) << "the first call checks";
  f.clock.now += 29999;
  EXPECT_TRUE(f.watch.Current().ok());
  EXPECT_EQ(f.checks, 1) << "a verdict younger than the interval is reused";
  f.clock.now += 1;
  EXPECT_TRUE(f.watch.Current().ok());
  EXPECT_EQ(f.checks, 2);
}

TEST(CompatWatch, ARedisThatChangedIsReportedCountedAndRecovers) {
  Fixture f;
  ASSERT_TRUE(f.watch.Current().ok());
  EXPECT_EQ(CompatFailures(f.metrics), 0);
  f.redis = Fixture::Redis::kNoEval;
  f.clock.now += 30000;
  Status s = f.watch.Current();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(s.error().message.find("EVAL (denied by ACL: NOPERM)"), std::string::npos)
      << s.error().message;
  EXPECT_EQ(CompatFailures(f.metrics), 1);
  // Between checks the verdict stands without a new count.
  EXPECT_FALSE(f.watch.Current().ok());
  EXPECT_EQ(CompatFailures(f.metrics), 1);
  // Every failing check counts: the rate says "still incompatible".
  f.clock.now += 30000;
  EXPECT_FALSE(f.watch.Current().ok());
  EXPECT_EQ(CompatFailures(f.metrics), 2);
  // Fixed: ready again at the next check.
  f.redis = Fixture::Redis::kOk;
  f.clock.now += 30000;
  EXPECT_TRUE(f.watch.Current().ok());
  EXPECT_EQ(CompatFailures(f.metrics), 2);
}

TEST(CompatWatch, AnUnreachableRedisKeepsTheLastVerdict) {
  Fixture f;
  f.redis = Fixture::Redis::kNoEval;
  ASSERT_FALSE(f.watch.Current().ok());
  f.redis = Fixture::Redis::kDown;
  f.clock.now += 30000;
  EXPECT_FALSE(f.watch.Current().ok()) << "unreachable says nothing about compatibility";
  EXPECT_EQ(CompatFailures(f.metrics), 1) << "and is not counted as incompatible";
  EXPECT_EQ(f.checks, 2);
  Fixture g;
  g.redis = Fixture::Redis::kDown;
  EXPECT_TRUE(g.watch.Current().ok()) << "no verdict yet: readiness's round trip decides";
}

}  // namespace
}  // namespace rsc
