// Level 2: the backlog in the group view and in /metrics (SPEC O1) against a real coordinator
// and Redis: per shard the lag (entries not yet delivered to the group), the pending entries
// and the oldest pending entry's idle time, read from Redis when the view is made and on
// every tick for the per-group gauges (and per shard with --shard-metrics).

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

class GroupBacklogTest : public LiveCoordinatorTest {
 protected:
  int64_t TickMs() const override { return 100; }
  std::vector<std::string> ExtraArgs() const override { return {"--shard-metrics"}; }
  const json::object& Shard(const json::value& view, int64_t id) {
    for (const json::value& s : view.at("shards").as_array()) {
      if (JsonInt(s, "id") == id) return s.as_object();
    }
    ADD_FAILURE() << "no shard " << id << " in " << JsonString(view);
    static const json::object none;
    return none;
  }
};

TEST_F(GroupBacklogTest, LagPendingAndOldestPendingPerShardInTheViewAndTheGauges) {
  ASSERT_TRUE(CreateGroup(*http_, "orders", "billing", 2, ShortLeases()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cli_->Run({"XADD", "{orders:0}", "*", "k", "v"}).ok());
  // Two of the five delivered to a consumer that does not acknowledge them.
  CliReply read = cli_->Run(
      {"XREADGROUP", "GROUP", "billing", "x", "COUNT", "2", "STREAMS", "{orders:0}", ">"});
  ASSERT_EQ(read.type, CliReply::Type::kArray) << read.ToString();

  HttpResult view = http_->Get(GroupPath("orders", "billing"));
  ASSERT_EQ(view.status, 200) << view.Describe();
  const json::object& s0 = Shard(view.json, 0);
  EXPECT_EQ(JsonStr(s0, "state"), "UNASSIGNED") << JsonString(view.json);
  EXPECT_EQ(JsonInt(s0, "generation"), 0);
  EXPECT_EQ(JsonInt(s0, "lag"), 3) << JsonString(view.json);
  EXPECT_EQ(JsonInt(s0, "pending"), 2) << JsonString(view.json);
  EXPECT_GE(JsonInt(s0, "oldestPendingMs"), 0) << JsonString(view.json);
  const json::object& s1 = Shard(view.json, 1);
  EXPECT_EQ(JsonInt(s1, "lag"), 0) << JsonString(view.json);
  EXPECT_EQ(JsonInt(s1, "pending"), 0) << JsonString(view.json);

  // The gauges follow on the next ticks: per group, and per shard (--shard-metrics).
  const std::string group = "group=\"billing\"";
  EXPECT_TRUE(
      WaitFor([&] { return Metric(*http_, "rsc_group_lag", group) == 3; }, 10s, "rsc_group_lag 3"));
  EXPECT_EQ(Metric(*http_, "rsc_group_pending", group), 2);
  EXPECT_EQ(Metric(*http_, "rsc_shard_pending", "shard=\"0\""), 2);
  EXPECT_EQ(Metric(*http_, "rsc_shard_lag", "shard=\"1\""), 0);
  // The pending entries age: the oldest one's idle time grows while nobody acknowledges it.
  EXPECT_TRUE(
      WaitFor([&] { return Metric(*http_, "rsc_group_oldest_pending_seconds", group) >= 0.3; }, 10s,
              "the oldest pending entry ages"));

  // The first two acknowledged, the other three delivered: no lag, three pending.
  for (const CliReply& e : read.elements[0].elements[1].elements) {
    ASSERT_TRUE(cli_->Run({"XACK", "{orders:0}", "billing", e.elements[0].str}).ok());
  }
  ASSERT_TRUE(
      cli_->Run({"XREADGROUP", "GROUP", "billing", "x", "STREAMS", "{orders:0}", ">"}).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        return Metric(*http_, "rsc_group_lag", group) == 0 &&
               Metric(*http_, "rsc_group_pending", group) == 3;
      },
      10s, "lag 0, three pending"));
}

}  // namespace
}  // namespace rsc::integration
