#pragma once
// The environment every client integration test starts from: a real redis-server, a real
// rsc-coordinator on it, and one group created over the admin API. Shared so the tests
// cannot drift apart in how they set it up.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <memory>
#include <string>

#include "rsc/producer.h"
#include "support/coordinator_process.h"
#include "support/http_client.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"

namespace rsc::testing {

// Short leases so lease-driven behaviour shows within seconds (ValidateConfig rules hold).
inline boost::json::object FastLeases() {
  return {{"heartbeatIntervalMs", 200}, {"memberLeaseMs", 2500},  {"assignmentLeaseMs", 1500},
          {"rebalanceTimeoutMs", 3000}, {"routingLeaseMs", 3000}, {"routingRefreshMs", 300}};
}

// Starts `redis`, a coordinator on it (stored in `coordinator`), and creates the group.
inline ::testing::AssertionResult StartLiveGroup(RedisProcess& redis,
                                                 std::unique_ptr<CoordinatorProcess>& coordinator,
                                                 const std::string& stream,
                                                 const std::string& group, int shards,
                                                 const boost::json::object& config) {
  if (auto r = redis.Start(); !r) return r;
  coordinator = std::make_unique<CoordinatorProcess>(CoordinatorOptions{.redis_url = redis.Url()});
  if (auto r = coordinator->Start(); !r) return r;
  HttpClient http(coordinator->Port());
  HttpResult created = http.Post(
      "/v1/groups",
      boost::json::value(boost::json::object{
          {"stream", stream}, {"group", group}, {"shardCount", shards}, {"config", config}}));
  if (created.status != 201) {
    return ::testing::AssertionFailure() << "creating the group: " << created.Describe();
  }
  return ::testing::AssertionSuccess();
}

// The value of field `name` of a stream entry, or "".
inline std::string FieldValue(const StreamFields& fields, const std::string& name) {
  for (const auto& [f, v] : fields) {
    if (f == name) return v;
  }
  return "";
}

// The same for a flat [field, value, …] reply read with RedisCli (XRANGE entries).
inline std::string FieldValue(const CliReply& fields, const std::string& name) {
  for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return fields.elements[i + 1].str;
  }
  return "";
}

}  // namespace rsc::testing
