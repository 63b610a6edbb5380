// SPEC D4 in the pure core: the stream's routing answer (GET /v1/streams/{P}/routing) and
// PATCH /v1/streams/{P} (core/stream_decide.h).
#include "core/stream_decide.h"

#include <gtest/gtest.h>

#include "core/shard_keys.h"

namespace rsc {
namespace {

const SlotPlacement kOneServer{};

Layout Stream(int32_t n) {
  Layout l = DeriveGeneration0("orders", n, GroupConfig{}, {}, {}, "t0").value();
  l.groups = {"billing"};
  return l;
}

StoredLayout Stored(Layout l, int64_t revision) { return StoredLayout{StoreRevision(revision), l}; }

std::vector<int32_t> Ids(const RoutingResponse& r) {
  std::vector<int32_t> out;
  for (const RoutingShard& s : r.shards) out.push_back(s.id);
  return out;
}

TEST(StreamRouting, AnswersTheActiveGenerationWithTheLayoutsVersionAndLease) {
  Layout l = Stream(4);
  l.routing_lease_ms = 20000;
  l.routing_refresh_ms = 2000;
  auto d = DecideStreamRouting(Stored(l, 7), 0, "");
  EXPECT_FALSE(d.next.has_value()) << "routing never writes (I3)";
  ASSERT_TRUE(d.response.ok());
  const RoutingResponse& r = *d.response;
  EXPECT_EQ(r.metadata_version, l.version);
  EXPECT_EQ(r.lineage, l.lineage);
  EXPECT_EQ(r.layout_revision, 7);
  EXPECT_EQ(r.generation, 0);
  EXPECT_EQ(r.shard_count, 4);
  EXPECT_EQ(Ids(r), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(r.shards[2].stream, ShardStreamKey("orders", 2));
  EXPECT_EQ(r.routing_lease_ms, 20000);
  EXPECT_EQ(r.refresh_interval_ms, 2000);
  EXPECT_EQ(r.hash, kRoutingHashName);
  EXPECT_FALSE(r.sync);
  EXPECT_TRUE(d.events.empty());
}

// RS2: producers move to a new generation only once it is ACTIVE (its parents sealed), and
// then at once, without waiting for any group to adopt it.
TEST(StreamRouting, FollowsTheActiveGenerationThroughAReshard) {
  Layout preparing = DecideReshard(Stream(4), 2, kOneServer, "t1").value();
  auto before = DecideStreamRouting(Stored(preparing, 3), 0, "");
  EXPECT_EQ(Ids(*before.response), (std::vector<int32_t>{0, 1, 2, 3})) << "PREPARING: not yet";
  EXPECT_EQ(before.response->generation, 0);
  Layout active = *DecideActivate(preparing, "t2");
  auto after = DecideStreamRouting(Stored(active, 4), 0, "");
  EXPECT_EQ(after.response->generation, 1);
  EXPECT_EQ(after.response->shard_count, 2);
  EXPECT_EQ(Ids(*after.response), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(after.response->metadata_version, active.version);
  EXPECT_GT(active.version, preparing.version);
}

// M1/M8 for the layout: a producer that saw a newer layout (or another lineage at the same
// version) is told the stored truth with sync, and the regression is reported; an older
// version, or one without a lineage, is ordinary.
TEST(StreamRouting, SyncWhenTheProducerSawALayoutAheadOfTheStoredOne) {
  const Layout l = Stream(2);
  auto ahead = DecideStreamRouting(Stored(l, 1), l.version + 1, "x");
  EXPECT_TRUE(ahead.response->sync);
  EXPECT_EQ(ahead.response->metadata_version, l.version) << "the stored truth, never the client's";
  ASSERT_EQ(ahead.events.size(), 1u);
  EXPECT_EQ(ahead.events[0].kind, EventKind::kVersionRegression);
  auto diverged = DecideStreamRouting(Stored(l, 1), l.version, "another");
  EXPECT_TRUE(diverged.response->sync);
  ASSERT_EQ(diverged.events.size(), 1u);
  EXPECT_EQ(diverged.events[0].kind, EventKind::kLineageDivergence);
  for (auto [version, lineage] : {std::pair<int64_t, std::string>{l.version, l.lineage},
                                  {l.version, ""},
                                  {l.version - 1, "old"},
                                  {0, ""}}) {
    auto d = DecideStreamRouting(Stored(l, 1), version, lineage);
    EXPECT_FALSE(d.response->sync) << version << " " << lineage;
    EXPECT_TRUE(d.events.empty());
  }
}

TEST(PatchStream, ChangesTheRoutingLeaseAndBumpsTheVersion) {
  const Layout l = Stream(2);
  PatchStreamRequest req;
  req.routing_lease_ms = 60000;
  auto next = DecidePatchStream(l, req, "fresh");
  ASSERT_TRUE(next.ok()) << next.error().message;
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->routing_lease_ms, 60000);
  EXPECT_EQ((*next)->routing_refresh_ms, l.routing_refresh_ms);
  EXPECT_EQ((*next)->version, l.version + 1) << "producers replace their cache (PR3)";
  EXPECT_EQ((*next)->lineage, "fresh");
  EXPECT_EQ((*next)->generations, l.generations);
  EXPECT_EQ((*next)->groups, l.groups);

  req.routing_lease_ms.reset();
  req.routing_refresh_ms = 1000;
  auto refresh = DecidePatchStream(l, req, "fresh");
  ASSERT_TRUE(refresh.ok() && refresh->has_value());
  EXPECT_EQ((*refresh)->routing_refresh_ms, 1000);
}

TEST(PatchStream, TheStoredValuesWriteNothing) {
  const Layout l = Stream(2);
  PatchStreamRequest req;
  req.routing_lease_ms = l.routing_lease_ms;
  req.routing_refresh_ms = l.routing_refresh_ms;
  auto next = DecidePatchStream(l, req, "fresh");
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(PatchStream, BadValuesAreRefusedNamingTheField) {
  const Layout l = Stream(2);  // lease 30000, refresh 5000
  struct Case {
    std::optional<int64_t> lease, refresh;
    const char* message;
  };
  for (const Case& c : {Case{std::nullopt, std::nullopt, "changes nothing"},
                        Case{9, std::nullopt, "routingLeaseMs must be between 10"},
                        Case{kMaxDurationMs + 1, std::nullopt, "routingLeaseMs must be between"},
                        Case{std::nullopt, 0, "routingRefreshMs must be between"},
                        Case{4000, std::nullopt, "routingRefreshMs (5000) must be below"},
                        Case{std::nullopt, 30000, "must be below routingLeaseMs (30000)"}}) {
    PatchStreamRequest req;
    req.routing_lease_ms = c.lease;
    req.routing_refresh_ms = c.refresh;
    auto next = DecidePatchStream(l, req, "fresh");
    ASSERT_FALSE(next.ok()) << c.message;
    EXPECT_EQ(next.error().code, ErrorCode::kInvalidRequest);
    EXPECT_NE(next.error().message.find(c.message), std::string::npos) << next.error().message;
  }
}

}  // namespace
}  // namespace rsc
