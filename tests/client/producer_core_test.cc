// ProducerCore (SPEC §5.2 PR1–PR5, R5.1, §10.1 scenario 10): driven with injected
// monotonic time, no I/O, no sleeps.

#include "client/producer_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "rsc/routing.h"

namespace rsc::client {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kLease = 30000;
constexpr int64_t kInterval = 5000;

RoutingResponse Routing(int64_t version, std::string lineage, int32_t shards = 4, bool sync = false,
                        int64_t lease = kLease, int64_t interval = kInterval) {
  RoutingResponse r;
  r.metadata_version = version;
  r.lineage = std::move(lineage);
  r.shard_count = shards;
  for (int32_t s = 0; s < shards; ++s) {
    r.shards.push_back(RoutingShard{s, "{orders:" + std::to_string(s) + "}"});
  }
  r.routing_lease_ms = lease;
  r.refresh_interval_ms = interval;
  r.sync = sync;
  return r;
}

// Runs one refresh cycle at `now`: Tick must ask for a refresh, answered by `resp` (sent at
// `now`, processed `latency` later).
void Refresh(ProducerCore& core, TimeMs now, const RoutingResponse& resp, TimeMs latency = 0) {
  std::optional<RefreshRouting> a = core.Tick(now);
  ASSERT_TRUE(a.has_value()) << "no refresh due at " << now;
  core.OnRoutingResponse(resp, now, now + latency);
}

void FailRefresh(ProducerCore& core, TimeMs now, const std::string& error) {
  std::optional<RefreshRouting> a = core.Tick(now);
  ASSERT_TRUE(a.has_value()) << "no refresh due at " << now;
  core.OnRoutingFailure(now, error, 0.5);
}

// Drives Tick from `from` to `to` in 1 ms steps; returns the times a refresh was asked for,
// failing each with `error` (or answering with `resp` when given).
std::vector<TimeMs> DriveTicks(ProducerCore& core, TimeMs from, TimeMs to,
                               const std::optional<RoutingResponse>& resp,
                               const std::string& error = "connect: refused") {
  std::vector<TimeMs> at;
  for (TimeMs t = from; t <= to; ++t) {
    if (core.Tick(t)) {
      at.push_back(t);
      if (resp) {
        core.OnRoutingResponse(*resp, t, t);
      } else {
        core.OnRoutingFailure(t, error, 0.5);
      }
    }
  }
  return at;
}

TEST(ProducerCore, FirstTickRequestsRoutingAtOnceWithObservedVersionZero) {
  ProducerCore core;
  std::optional<RefreshRouting> a = core.Tick(1000);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->observed, (ObservedVersion{0, ""}));
  EXPECT_TRUE(core.refresh_in_flight());
  EXPECT_FALSE(core.Tick(1001)) << "one refresh in flight at a time";
  EXPECT_EQ(core.NextWakeMs(), std::nullopt);
}

TEST(ProducerCore, NoRoutingBeforeFirstResponseNamesLastError) {
  ProducerCore core;
  RouteResult r = core.Route("k", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, RouteErrorKind::kNoRouting);
  FailRefresh(core, 0, "connect 127.0.0.1:1: Connection refused");
  r = core.Route("k", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, RouteErrorKind::kNoRouting);
  EXPECT_THAT(r.error().message, HasSubstr("Connection refused"));
}

TEST(ProducerCore, RoutesWithTheJumpXxh64HashOverTheCachedShards) {
  ProducerCore core;
  Refresh(core, 0, Routing(7, "L7", 16));
  for (const std::string key : {"", "a", "order-1001", "user:2"}) {
    RouteResult r = core.Route(key, 1);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value().shard, ShardForKey(key, 16));
    EXPECT_EQ(r.value().stream, "{orders:" + std::to_string(ShardForKey(key, 16)) + "}");
    EXPECT_EQ(r.value().metadata_version, 7);
  }
}

// PR1, table-driven over (lease, interval): the next refresh is due `interval` after the
// send time (half the lease when the answer's interval is unusable), always before lease
// end, and it comes although every publish in between succeeds.
TEST(ProducerCore, PR1_RefreshesBeforeLeaseEndsEvenWhilePublishesSucceed) {
  struct Case {
    int64_t lease, interval, expected_due;
  };
  for (const Case& c : {Case{30000, 5000, 5000}, Case{1500, 300, 300}, Case{1000, 999, 999},
                        Case{1000, 1000, 500}, Case{1000, 0, 500}, Case{1000, 5000, 500}}) {
    SCOPED_TRACE("lease " + std::to_string(c.lease) + " interval " + std::to_string(c.interval));
    ProducerCore core;
    const TimeMs t0 = 100;
    Refresh(core, t0, Routing(3, "L3", 4, false, c.lease, c.interval), /*latency=*/40);
    EXPECT_EQ(core.NextWakeMs(), t0 + c.expected_due);
    for (TimeMs t = t0; t < t0 + c.expected_due; t += 7) {
      EXPECT_TRUE(core.Route("key", t).ok());  // publishes succeed ...
      EXPECT_FALSE(core.Tick(t));              // ... and nothing is due yet
    }
    std::optional<RefreshRouting> a = core.Tick(t0 + c.expected_due);
    ASSERT_TRUE(a) << "refresh must be requested while the cache is still valid";
    EXPECT_LT(t0 + c.expected_due, *core.lease_end());
    EXPECT_EQ(a->observed, (ObservedVersion{3, "L3"}));
  }
}

TEST(ProducerCore, PR1_SameVersionAnswerRenewsLeaseFromItsSendTime) {
  ProducerCore core;
  Refresh(core, 0, Routing(3, "L3"));
  EXPECT_EQ(core.lease_end(), kLease);
  Refresh(core, kInterval, Routing(3, "L3"), /*latency=*/900);
  EXPECT_EQ(core.lease_end(), kInterval + kLease);
  EXPECT_EQ(core.Metrics(kInterval + 900).refreshes_ok, 2);
}

// The lease is counted from the *send* time: a slow answer must not stretch it.
TEST(ProducerCore, LeaseCountedFromSendTimeNotReceiveTime) {
  ProducerCore core;
  ASSERT_TRUE(core.Tick(1000));
  core.OnRoutingResponse(Routing(1, "L1"), /*sent_at=*/1000, /*now=*/1000 + 20000);
  EXPECT_EQ(core.lease_end(), 1000 + kLease);
  EXPECT_TRUE(core.Route("k", 1000 + kLease - 1).ok());
  EXPECT_FALSE(core.Route("k", 1000 + kLease).ok());
}

TEST(ProducerCore, PR3_NewerVersionReplacesCache) {
  ProducerCore core;
  Refresh(core, 0, Routing(3, "L3", 4));
  Refresh(core, kInterval, Routing(4, "L4", 8));
  EXPECT_EQ(core.routing()->metadata_version, 4);
  EXPECT_EQ(core.routing()->shard_count, 8);
  EXPECT_EQ(core.observed(), (ObservedVersion{4, "L4"}));
  EXPECT_EQ(core.Route("order-1001", kInterval).value().shard, ShardForKey("order-1001", 8));
}

TEST(ProducerCore, PR3_OlderVersionDoesNotReplaceCache) {
  struct Case {
    const char* name;
    RoutingResponse answer;
  };
  for (const Case& c : {Case{"older version", Routing(4, "L4", 2)},
                        Case{"same version, other lineage", Routing(5, "X5", 2)}}) {
    SCOPED_TRACE(c.name);
    ProducerCore core;
    Refresh(core, 0, Routing(5, "L5", 8));
    Refresh(core, kInterval, c.answer);
    EXPECT_EQ(core.routing()->metadata_version, 5);
    EXPECT_EQ(core.routing()->lineage, "L5");
    EXPECT_EQ(core.routing()->shard_count, 8);
    EXPECT_EQ(core.observed(), (ObservedVersion{5, "L5"}));
    // Neither replaced nor renewed: the lease still ends where the v5 answer put it, and the
    // ignored answer counts as a failed refresh (retried with backoff).
    EXPECT_EQ(core.lease_end(), kLease);
    EXPECT_EQ(core.Metrics(kInterval).stale_responses, 1);
    EXPECT_EQ(core.Metrics(kInterval).refresh_failures, 1);
    EXPECT_THAT(core.last_refresh_error(), HasSubstr("PR3"));
    EXPECT_LT(*core.NextWakeMs(), kInterval + kInterval);
  }
}

// R5.1: sync:true is the stored truth, adopted even when older, and it lowers the observed
// version sent with the next refresh.
TEST(ProducerCore, PR3_SyncTrueReplacesWithOlderVersion) {
  ProducerCore core;
  core.SeedObserved(ObservedVersion{41, "L41"});
  Refresh(core, 0, Routing(41, "L41", 8));
  Refresh(core, kInterval, Routing(39, "R39", 4, /*sync=*/true));
  EXPECT_EQ(core.routing()->metadata_version, 39);
  EXPECT_EQ(core.routing()->shard_count, 4);
  EXPECT_EQ(core.observed(), (ObservedVersion{39, "R39"}));
  EXPECT_EQ(core.lease_end(), kInterval + kLease);
  EXPECT_EQ(core.Metrics(kInterval).sync_adoptions, 1);
  std::optional<RefreshRouting> next = core.Tick(2 * kInterval);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->observed, (ObservedVersion{39, "R39"}));
}

TEST(ProducerCore, ObservedVersionIsTheHighestSeenAndIsSentWithRefreshes) {
  ProducerCore core;
  core.SeedObserved(ObservedVersion{10, "S10"});
  core.SeedObserved(ObservedVersion{9, "S9"});  // seeding only raises
  std::optional<RefreshRouting> a = core.Tick(0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->observed, (ObservedVersion{10, "S10"}));
  // Without a cache any usable answer is taken (nothing newer to protect), but the observed
  // version stays the highest seen until a sync answer says otherwise.
  core.OnRoutingResponse(Routing(8, "L8"), 0, 0);
  EXPECT_EQ(core.routing()->metadata_version, 8);
  EXPECT_EQ(core.observed(), (ObservedVersion{10, "S10"}));
}

TEST(ProducerCore, PR4_RefreshFailsLeaseValidKeepsPublishing) {
  ProducerCore core;
  Refresh(core, 0, Routing(3, "L3"));
  // The coordinator goes away at the first scheduled refresh; every retry fails.
  std::vector<TimeMs> attempts = DriveTicks(core, kInterval, kLease - 1, std::nullopt);
  ASSERT_GE(attempts.size(), 5u);
  for (TimeMs t = kInterval; t < kLease; t += 997) {
    RouteResult r = core.Route("user:1", t);
    ASSERT_TRUE(r.ok()) << "t=" << t << ": " << r.error().message;
    EXPECT_EQ(r.value().metadata_version, 3);
  }
  // Retries never back off past the refresh interval (a lease is not lost to a backoff).
  for (size_t i = 1; i < attempts.size(); ++i) {
    EXPECT_LE(attempts[i] - attempts[i - 1], kInterval);
  }
  const ProducerCoreMetrics m = core.Metrics(kLease - 1);
  EXPECT_EQ(m.refresh_failures, static_cast<int64_t>(attempts.size()));
  EXPECT_EQ(m.lease_remaining_ms, 1);
  EXPECT_EQ(m.cache_age_ms, kLease - 1);
}

TEST(ProducerCore, PR5_RefreshFailsLeaseExpiredFailsClosedWithClearError) {
  ProducerCore core;
  Refresh(core, 1000, Routing(3, "L3"));
  DriveTicks(core, 1000 + kInterval, 1000 + kLease + 2000, std::nullopt,
             "HTTP 503 REDIS_UNAVAILABLE: redis down");
  EXPECT_TRUE(core.Route("k", 1000 + kLease - 1).ok());
  for (TimeMs t : {1000 + kLease, 1000 + kLease + 1, 1000 + kLease + 2000}) {
    RouteResult r = core.Route("k", t);
    ASSERT_FALSE(r.ok()) << "t=" << t << " must fail closed (PR5)";
    EXPECT_EQ(r.error().kind, RouteErrorKind::kRoutingExpired);
    EXPECT_THAT(r.error().message, HasSubstr("routing lease expired"));
    EXPECT_THAT(r.error().message, HasSubstr("ended at steady " + std::to_string(1000 + kLease)));
    EXPECT_THAT(r.error().message, HasSubstr("REDIS_UNAVAILABLE: redis down"));
    EXPECT_THAT(r.error().message, HasSubstr("PR5"));
  }
  EXPECT_EQ(core.Metrics(1000 + kLease + 2000).lease_remaining_ms, 0);
  EXPECT_EQ(core.Metrics(1000 + kLease + 2000).expired_routes, 3);
}

TEST(ProducerCore, PR5_ASuccessfulRefreshAfterExpiryReopensPublishing) {
  ProducerCore core;
  Refresh(core, 0, Routing(3, "L3"));
  DriveTicks(core, kInterval, kLease + 100, std::nullopt);
  ASSERT_FALSE(core.Route("k", kLease + 100).ok());
  std::vector<TimeMs> at = DriveTicks(core, kLease + 101, kLease + 10000, Routing(3, "L3"));
  ASSERT_FALSE(at.empty());
  EXPECT_TRUE(core.Route("k", at.front()).ok());
  EXPECT_EQ(core.Metrics(at.front()).consecutive_failures, 0);
}

TEST(ProducerCore, PR2_StaleRoutingOnPublishRefreshesAtOnce) {
  ProducerCore core;
  Refresh(core, 0, Routing(3, "L3"));
  EXPECT_FALSE(core.Tick(1000));
  core.OnPublishError(PublishErrorKind::kStaleRouting, 1000);
  EXPECT_EQ(core.NextWakeMs(), 1000);
  std::optional<RefreshRouting> a = core.Tick(1000);
  ASSERT_TRUE(a) << "PR2: refresh at once, not at the next interval";
  core.OnRoutingResponse(Routing(4, "L4", 8), 1000, 1010);
  EXPECT_EQ(core.routing()->shard_count, 8);
  EXPECT_EQ(core.NextWakeMs(), 1000 + kInterval) << "back to the normal cadence";
  EXPECT_EQ(core.Metrics(1010).publish_refreshes, 1);
}

// A stale-routing report that arrives while a refresh is in flight is not answered by that
// refresh (it was sent before the report): another one follows at once.
TEST(ProducerCore, PR2_ReportDuringInFlightRefreshTriggersAnotherAfterIt) {
  ProducerCore core;
  Refresh(core, 0, Routing(3, "L3"));
  ASSERT_TRUE(core.Tick(kInterval));
  core.OnPublishError(PublishErrorKind::kVersionMismatch, kInterval + 5);
  EXPECT_FALSE(core.Tick(kInterval + 5)) << "still one in flight";
  core.OnRoutingResponse(Routing(3, "L3"), kInterval, kInterval + 10);
  // Due at once, but no closer than min_refresh_spacing_ms (50) to the previous request.
  EXPECT_EQ(core.NextWakeMs(), kInterval + 50);
  EXPECT_TRUE(core.Tick(kInterval + 50));
  core.OnRoutingResponse(Routing(3, "L3"), kInterval + 50, kInterval + 52);
  EXPECT_EQ(core.NextWakeMs(), kInterval + 50 + kInterval);
}

TEST(ProducerCore, PR2_BurstsOfReportsAreSpacedOut) {
  ProducerCore core(ProducerCoreOptions{100, 5000, 50});
  Refresh(core, 0, Routing(3, "L3"));
  core.OnPublishError(PublishErrorKind::kStaleRouting, 10);
  EXPECT_EQ(core.NextWakeMs(), 50) << "no closer than min_refresh_spacing_ms to the last one";
  EXPECT_FALSE(core.Tick(49));
  EXPECT_TRUE(core.Tick(50));
}

TEST(ProducerCore, FailedRefreshBacksOffExponentiallyWithJitterAndCap) {
  struct Case {
    double jitter;
    std::vector<TimeMs> delays;  // between consecutive attempts, no cache yet
  };
  for (const Case& c :
       {Case{1.0, {100, 200, 400, 800, 1000, 1000}}, Case{0.0, {50, 100, 200, 400, 500, 500}}}) {
    SCOPED_TRACE("jitter " + std::to_string(c.jitter));
    ProducerCore core(ProducerCoreOptions{100, 1000, 50});
    TimeMs t = 0;
    for (TimeMs expected : c.delays) {
      ASSERT_TRUE(core.Tick(t));
      core.OnRoutingFailure(t, "down", c.jitter);
      EXPECT_EQ(*core.NextWakeMs() - t, expected);
      t = *core.NextWakeMs();
    }
  }
}

TEST(ProducerCore, UnusableResponsesAreRefreshFailuresAndKeepTheCache) {
  struct Case {
    const char* name;
    RoutingResponse resp;
    const char* error;
  };
  RoutingResponse wrong_hash = Routing(9, "L9");
  wrong_hash.hash = "crc32-mod";
  RoutingResponse missing_shard = Routing(9, "L9");
  missing_shard.shards.pop_back();
  RoutingResponse duplicate = Routing(9, "L9");
  duplicate.shards[1].id = 0;
  RoutingResponse empty_stream = Routing(9, "L9");
  empty_stream.shards[2].stream = "";
  RoutingResponse no_lease = Routing(9, "L9");
  no_lease.routing_lease_ms = 0;
  RoutingResponse zero_shards = Routing(9, "L9", 0);
  for (const Case& c : {Case{"unknown hash", wrong_hash, "not supported"},
                        Case{"shard missing", missing_shard, "shards listed"},
                        Case{"duplicate id", duplicate, "repeated"},
                        Case{"empty stream", empty_stream, "empty stream"},
                        Case{"no lease", no_lease, "routingLeaseMs"},
                        Case{"zero shards", zero_shards, "out of range"}}) {
    SCOPED_TRACE(c.name);
    ProducerCore core;
    Refresh(core, 0, Routing(3, "L3"));
    Refresh(core, kInterval, c.resp);
    EXPECT_EQ(core.routing()->metadata_version, 3);
    EXPECT_EQ(core.lease_end(), kLease);
    EXPECT_THAT(core.last_refresh_error(), HasSubstr(c.error));
    EXPECT_EQ(core.observed(), (ObservedVersion{3, "L3"}));
  }
}

TEST(ProducerCore, MetricsReportCacheAgeLeaseAndFailures) {
  ProducerCore core;
  ProducerCoreMetrics m = core.Metrics(0);
  EXPECT_FALSE(m.has_routing);
  EXPECT_EQ(m.lease_remaining_ms, 0);
  Refresh(core, 100, Routing(3, "L3"));
  FailRefresh(core, 100 + kInterval, "boom");
  m = core.Metrics(100 + kInterval + 1);
  EXPECT_TRUE(m.has_routing);
  EXPECT_EQ(m.metadata_version, 3);
  EXPECT_EQ(m.cache_age_ms, kInterval + 1);
  EXPECT_EQ(m.lease_remaining_ms, kLease - kInterval - 1);
  EXPECT_EQ(m.refresh_failures, 1);
  EXPECT_EQ(m.consecutive_failures, 1);
  EXPECT_EQ(m.refreshes_ok, 1);
}

// SPEC §10.1 scenario 10, client side: routing is fresh, the coordinator becomes
// unreachable, publishes keep working inside the lease (PR4), fail closed with a clear error
// once it ends (PR5), and work again after the coordinator returns.
TEST(ProducerCore, Scenario10_ProducerCacheExpiresDuringCoordinatorOutageFailsClosed) {
  ProducerCore core;
  TimeMs now = 0;
  Refresh(core, now, Routing(12, "L12", 8));
  const TimeMs outage_start = 2 * kInterval;
  DriveTicks(core, 1, outage_start - 1, Routing(12, "L12", 8));  // healthy refreshes
  const TimeMs last_ok = kInterval;  // the last refresh sent before the outage
  ASSERT_EQ(core.lease_end(), last_ok + kLease);
  DriveTicks(core, outage_start, last_ok + kLease + 5000, std::nullopt,
             "connect 10.0.0.7:8080: Connection refused");
  for (now = outage_start; now < last_ok + kLease; now += 250) {
    ASSERT_TRUE(core.Route("order-1001", now).ok()) << "PR4 at " << now;
  }
  for (; now < last_ok + kLease + 5000; now += 250) {
    RouteResult r = core.Route("order-1001", now);
    ASSERT_FALSE(r.ok()) << "PR5 at " << now;
    EXPECT_EQ(r.error().kind, RouteErrorKind::kRoutingExpired);
    EXPECT_THAT(r.error().message, HasSubstr("Connection refused"));
  }
  // The coordinator is back.
  std::vector<TimeMs> at =
      DriveTicks(core, last_ok + kLease + 5001, last_ok + kLease + 20000, Routing(12, "L12", 8));
  ASSERT_FALSE(at.empty());
  EXPECT_TRUE(core.Route("order-1001", at.front()).ok());
}

// Random event sequences; after every step: a route succeeds only inside the lease of the
// last confirming answer (SPEC §10.2: no publish with routing older than its lease allows),
// routes by jump-xxh64 over the cached shard count, and the cached version never goes down
// except by a sync answer.
RC_GTEST_PROP(ProducerCore, RandomEventsNeverRouteOutsideTheLease, ()) {
  ProducerCore core(ProducerCoreOptions{*rc::gen::inRange<int64_t>(1, 200),
                                        *rc::gen::inRange<int64_t>(200, 3000),
                                        *rc::gen::inRange<int64_t>(0, 100)});
  TimeMs now = *rc::gen::inRange<int64_t>(0, 1000000);
  std::optional<TimeMs> confirmed_lease_end;
  std::optional<RefreshRouting> in_flight;
  TimeMs in_flight_sent = 0;
  int64_t cached_version = -1;
  const int steps = *rc::gen::inRange(1, 200);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(0, 3000);
    const int op = *rc::gen::inRange(0, 5);
    if (op == 0 && !in_flight) {
      in_flight = core.Tick(now);
      in_flight_sent = now;
    } else if (op == 1 && in_flight) {
      const int64_t v = *rc::gen::inRange<int64_t>(1, 20);
      const bool sync = *rc::gen::inRange(0, 4) == 0;
      const int64_t lease = *rc::gen::inRange<int64_t>(10, 5000);
      RoutingResponse resp = Routing(v, "L" + std::to_string(v), *rc::gen::inRange(1, 32), sync,
                                     lease, *rc::gen::inRange<int64_t>(1, lease));
      core.OnRoutingResponse(resp, in_flight_sent, now);
      const bool adopted = sync || v > cached_version;
      const bool confirmed = !adopted && v == cached_version;
      if (adopted || confirmed) {
        if (!adopted) RC_ASSERT(core.routing()->metadata_version == cached_version);
        confirmed_lease_end = in_flight_sent + lease;
        if (adopted) cached_version = v;
      }
      in_flight.reset();
    } else if (op == 2 && in_flight) {
      core.OnRoutingFailure(now, "down", *rc::gen::inRange(0, 101) / 100.0);
      in_flight.reset();
    } else if (op == 3) {
      core.OnPublishError(PublishErrorKind::kStaleRouting, now);
    } else {
      const std::string key = *rc::gen::arbitrary<std::string>();
      RouteResult r = core.Route(key, now);
      if (r.ok()) {
        RC_ASSERT(confirmed_lease_end.has_value());
        RC_ASSERT(now < *confirmed_lease_end);
        RC_ASSERT(r.value().shard == ShardForKey(key, core.routing()->shard_count));
        RC_ASSERT(r.value().metadata_version == cached_version);
      } else {
        RC_ASSERT(!confirmed_lease_end || now >= *confirmed_lease_end);
      }
    }
    RC_ASSERT(core.lease_end() == confirmed_lease_end);
    if (core.has_routing()) RC_ASSERT(core.routing()->metadata_version == cached_version);
    RC_ASSERT(core.refresh_in_flight() == in_flight.has_value());
  }
}

}  // namespace
}  // namespace rsc::client
