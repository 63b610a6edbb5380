// The coordinator against a real 3-master Redis Cluster (SPEC §10 level 2): every key of a
// group shares the {P:G} hash tag, so each script runs on one node; groups spread over
// the masters; the index set lives in its own slot.

#include <gtest/gtest.h>

#include <set>

#include "integration/harness.h"
#include "support/redis_process.h"

namespace rsc::integration {
namespace {

TEST(ClusterTest, CoordinatorServesGroupsSpreadOverThreeMasters) {
  rsc::testing::Cluster3 cluster;
  ASSERT_TRUE(cluster.Start());
  CoordinatorOptions o;
  o.redis_url = cluster.Url();
  CoordinatorProcess coord(o);
  ASSERT_TRUE(coord.Start());
  rsc::testing::HttpClient http(coord.Port());
  std::set<std::string> nodes_used;
  for (int g = 0; g < 6; ++g) {
    const std::string group = "g" + std::to_string(g);
    auto created =
        http.Post("/v1/groups", R"({"stream":"orders","group":")" + group + R"(","shardCount":4})");
    ASSERT_EQ(created.status, 201) << created.body << coord.LogTail();
    const std::string path = "/v1/groups/orders/" + group + "/heartbeat";
    auto join = http.Post(path, R"({"memberId":"m1","memberEpoch":0})");
    ASSERT_EQ(join.status, 200) << join.body;
    EXPECT_EQ(join.json.at("status").as_string(), "OK");
    EXPECT_EQ(join.json.at("assignedShards").as_array().size(), 4u);
    // Which master holds this group's metadata?
    const std::string key = "redis-stream:coord:{orders:" + group + "}:metadata";
    for (size_t i = 0; i < cluster.size(); ++i) {
      auto cli = cluster.node(i).Cli();
      if (cli->Run({"EXISTS", key}).integer == 1) nodes_used.insert(cluster.node(i).Address());
    }
  }
  EXPECT_GE(nodes_used.size(), 2u) << "six groups should spread over the masters";
  auto list = http.Get("/v1/groups");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json.at("groups").as_array().size(), 6u);
}

}  // namespace
}  // namespace rsc::integration
