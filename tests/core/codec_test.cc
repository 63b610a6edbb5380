// The aggregate codec for the per-revoke version stamps (revokeVersion, sinceVersion):
// they round-trip, records written before they existed still decode (and keep the old
// rule until their next write), and inconsistent values are refused (L3).

#include "core/codec.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "core_harness.h"

namespace rsc::testing {
namespace {

// A after B joined: shards 2 and 3 revoking from A to B, stamped with the join's version.
struct Revoking {
  CoreHarness h{4};
  FakeMember a{"A"}, b{"B"};
  Revoking() {
    a.Observe(Ok(h.Heartbeat(a.Request())));
    a.Observe(Ok(h.Heartbeat(a.Request())));
    b.Observe(Ok(h.Heartbeat(b.Request())));
  }
};

std::string Without(std::string json, const std::string& field) {
  // Removes every `,"field":<int>` (the encoder writes these fields after others).
  for (size_t at; (at = json.find(",\"" + field + "\":")) != std::string::npos;) {
    size_t end = at + field.size() + 4;
    while (end < json.size() && (std::isdigit(static_cast<unsigned char>(json[end])) != 0)) ++end;
    json.erase(at, end - at);
  }
  return json;
}

TEST(AggregateCodec, RevokeVersionIsStampedAndRoundTrips) {
  Revoking t;
  const GroupMetadata& m = t.h.meta();
  EXPECT_EQ(m.shards[0].revoke_version, 0);
  EXPECT_EQ(m.shards[2].revoke_version, m.version.value()) << "B's join began the revoke";
  EXPECT_EQ(m.shards[3].revoke_version, m.version.value());
  auto back = DecodeAggregate(EncodeAggregate(m));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, m);
}

TEST(AggregateCodec, OlderRecordWithoutTheFieldDecodesAndKeepsTheOldRule) {
  Revoking t;
  const std::string old = Without(EncodeAggregate(t.h.meta()), "revokeVersion");
  ASSERT_EQ(old.find("revokeVersion"), std::string::npos);
  auto back = DecodeAggregate(old);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->shards[2].revoke_version, 0);
  // With no stamp, a report of any version releases the shard, as before the field.
  t.h.mutable_meta() = *back;
  HeartbeatRequest report = t.a.Request();
  report.metadata_version = 1;  // older than the write that began the revoke
  report.lineage = t.h.meta().lineage_history.front().token;
  report.owned_shards = {0, 1};
  report.revoking_shards = {{2, RevokeState::kRevoked}};
  (void)Ok(t.h.Heartbeat(report));
  EXPECT_NE(t.h.meta().shards[2].owner, "A");
  // The write stamped the revoke still open (shard 3): the same old report now counts as
  // stale for it.
  EXPECT_EQ(t.h.meta().shards[3].revoke_version, t.h.meta().version.value());
  report.revoking_shards = {{3, RevokeState::kRevoked}};
  (void)t.h.Heartbeat(report);
  EXPECT_TRUE(t.h.LastEventsHave(EventKind::kStaleRevokeIgnored));
  EXPECT_EQ(t.h.meta().shards[3].owner, "A");
}

TEST(AggregateCodec, InconsistentRevokeVersionIsUnreadable) {
  Revoking t;
  GroupMetadata bad = t.h.meta();
  bad.shards[0].revoke_version = 1;  // shard 0 is not revoking
  auto r = DecodeAggregate(EncodeAggregate(bad));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMetadataUnreadable);
  EXPECT_NE(r.error().message.find("revokeVersion"), std::string::npos) << r.error().message;
  bad = t.h.meta();
  bad.shards[2].revoke_version = bad.version.value() + 1;  // from the future
  r = DecodeAggregate(EncodeAggregate(bad));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("revokeVersion"), std::string::npos) << r.error().message;
}

// Counters and times outside the ranges decisions can continue from are unreadable on
// load (L3: fail closed, counted), each message naming the field.
TEST(AggregateCodec, CountersAndTimesOutOfRangeAreUnreadableNamingTheField) {
  Revoking t;
  struct Case {
    const char* field;
    void (*doctor)(GroupMetadata&);
  };
  const Case cases[] = {
      {"metadataVersion",
       [](GroupMetadata& m) {
         m.version = MetadataVersion(kMaxCounter + 1);
         m.lineage_history = {LineageEntry{m.version, m.lineage}};
       }},
      {"assignmentEpoch",
       [](GroupMetadata& m) { m.assignment_epoch = AssignmentEpoch(INT64_MAX); }},
      {"members[0].epoch", [](GroupMetadata& m) { m.members[0].epoch = MemberEpoch(INT64_MAX); }},
      {"roundsStarted", [](GroupMetadata& m) { m.rounds_started = kMaxCounter + 1; }},
      {"shards[2].revokeSinceMs",
       [](GroupMetadata& m) { m.shards[2].revoke_since_ms = INT64_MAX; }},
      {"members[1].joinedMs", [](GroupMetadata& m) { m.members[1].joined_ms = kMaxTimeMs + 1; }},
  };
  for (const Case& c : cases) {
    GroupMetadata bad = t.h.meta();
    c.doctor(bad);
    auto r = DecodeAggregate(EncodeAggregate(bad));
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.error().code, ErrorCode::kMetadataUnreadable) << c.field;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace rsc::testing
