#pragma once
// The environment every client integration test starts from: a real redis-server, a real
// rsc-coordinator on it, and one group created over the admin API. Shared so the tests
// cannot drift apart in how they set it up.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "rsc/consumer.h"
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

// One line on a consumer's state, for failure messages.
inline std::string DescribeConsumer(const ConsumerStatus& s) {
  std::ostringstream o;
  o << "phase=" << s.phase << " epoch=" << s.member_epoch << " reading=[";
  for (int32_t x : s.reading) o << x << " ";
  o << "] draining=" << s.draining.size() << " revoked=" << s.revoked.size()
    << " handled=" << s.messages_handled << " acked=" << s.messages_acked
    << " claimed=" << s.messages_claimed << " hb_error='" << s.last_heartbeat_error
    << "' redis_error='" << s.last_redis_error << "'";
  return o.str();
}

// The shards the consumers read between them now.
inline std::set<int32_t> ReadingUnion(std::initializer_list<const Consumer*> consumers) {
  std::set<int32_t> all;
  for (const Consumer* c : consumers) {
    for (int32_t s : c->Status().reading) all.insert(s);
  }
  return all;
}

// A consumer of `stream`/`group` on the live group's coordinator and Redis (short block and
// HTTP timeouts); nullptr (with a test failure) if it cannot be created. Not started.
inline std::unique_ptr<Consumer> MakeLiveConsumer(const CoordinatorProcess& coordinator,
                                                  const RedisProcess& redis,
                                                  const std::string& stream,
                                                  const std::string& group,
                                                  std::function<HandlerResult(const Message&)> h) {
  ConsumerOptions o;
  o.coordinator_endpoints = {"127.0.0.1:" + std::to_string(coordinator.Port())};
  o.stream = stream;
  o.group = group;
  o.redis_url = redis.Url();
  o.block = std::chrono::milliseconds(200);
  o.http_timeout = std::chrono::milliseconds(1000);
  ConsumerResult<std::unique_ptr<Consumer>> c = Consumer::Create(std::move(o), std::move(h));
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? std::move(c).value() : nullptr;
}

// A producer of `stream`/`group` that has its first routing; nullptr (with a test failure)
// otherwise.
inline std::unique_ptr<Producer> MakeLiveProducer(const CoordinatorProcess& coordinator,
                                                  const RedisProcess& redis,
                                                  const std::string& stream,
                                                  const std::string& group) {
  ProducerOptions o;
  o.coordinator_endpoints = {"127.0.0.1:" + std::to_string(coordinator.Port())};
  o.stream = stream;
  o.group = group;
  o.redis_url = redis.Url();
  ProducerResult<std::unique_ptr<Producer>> p = Producer::Create(o);
  EXPECT_TRUE(p.ok()) << p.error().message;
  if (!p.ok()) return nullptr;
  std::unique_ptr<Producer> producer = std::move(p).value();
  EXPECT_TRUE(producer->WaitForRouting(std::chrono::seconds(10)))
      << producer->Metrics().last_refresh_error;
  return producer;
}

}  // namespace rsc::testing
