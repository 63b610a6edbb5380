// client/client_options.h: the checks Consumer::Create and Producer::Create run on the
// user's options (each bad field named, the first one found), and what the runtimes are built
// with — the functions the simulator builds its clients through too.

#include "client/client_options.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace rsc::client {
namespace {

using std::chrono::milliseconds;

ConsumerOptions GoodConsumer() {
  ConsumerOptions o;
  o.coordinator_endpoints = {"http://coord-a:7700", "[::1]:7701"};
  o.stream = "orders";
  o.group = "billing";
  o.redis_url = "redis://127.0.0.1:6379/0";
  return o;
}

ProducerOptions GoodProducer() {
  ProducerOptions o;
  o.coordinator_endpoints = {"coord-a:7700"};
  o.stream = "orders";
  o.redis_url = "redis://127.0.0.1:6379";
  return o;
}

std::string ConsumerError(const std::function<void(ConsumerOptions&)>& change) {
  ConsumerOptions o = GoodConsumer();
  change(o);
  CheckedEndpoints checked;
  return CheckConsumerOptions(o, true, &checked).value_or("");
}

TEST(ClientOptions, AValidConsumerConfigurationIsParsed) {
  CheckedEndpoints checked;
  ASSERT_FALSE(CheckConsumerOptions(GoodConsumer(), true, &checked).has_value());
  ASSERT_EQ(checked.coordinators.size(), 2u);
  EXPECT_EQ(checked.coordinators[0].ToString(), "coord-a:7700");
  EXPECT_EQ(checked.coordinators[1].ToString(), "[::1]:7701");
  EXPECT_EQ(checked.redis.port, 6379);
  EXPECT_EQ(CheckConsumerOptions(GoodConsumer(), false, &checked).value_or(""),
            "no message handler");
}

TEST(ClientOptions, EachBadConsumerOptionIsNamed) {
  const std::vector<std::pair<std::function<void(ConsumerOptions&)>, std::string>> cases = {
      {[](ConsumerOptions& o) { o.stream = "a b"; }, "not a valid stream prefix"},
      {[](ConsumerOptions& o) { o.group = ""; }, "not a valid group name"},
      {[](ConsumerOptions& o) { o.instance_id = "has space"; }, "instance_id must match"},
      {[](ConsumerOptions& o) { o.coordinator_endpoints.clear(); }, "no coordinator endpoints"},
      {[](ConsumerOptions& o) { o.coordinator_token = "a b"; }, "coordinator_token must be"},
      {[](ConsumerOptions& o) { o.coordinator_endpoints = {"https://c:1"}; }, "https"},
      {[](ConsumerOptions& o) { o.coordinator_endpoints = {"c:0"}; }, "bad host or port"},
      {[](ConsumerOptions& o) { o.redis_url = "http://x"; }, "redis"},
      {[](ConsumerOptions& o) { o.max_batch = 0; }, "max_batch must be in 1..10000"},
      {[](ConsumerOptions& o) { o.block = milliseconds(0); }, "block must be >= 1 ms"},
      {[](ConsumerOptions& o) { o.handler_threads = 2000; }, "handler_threads must be"},
      {[](ConsumerOptions& o) { o.max_attempts = 0; }, "max_attempts must be >= 1"},
      {[](ConsumerOptions& o) { o.handler_retry_max = milliseconds(1); }, "handler_retry_initial"},
      {[](ConsumerOptions& o) { o.backoff_max = milliseconds(1); }, "backoff_initial must be"},
      {[](ConsumerOptions& o) { o.http_timeout = milliseconds(0); }, "http_timeout and"},
      {[](ConsumerOptions& o) { o.dead_letter_suffix = "{x}"; }, "dead_letter_suffix must be"},
  };
  for (const auto& [change, expected] : cases) {
    const std::string error = ConsumerError(change);
    EXPECT_NE(error.find(expected), std::string::npos) << "got: '" << error << "'";
  }
  // The first problem is the one named.
  EXPECT_NE(ConsumerError([](ConsumerOptions& o) {
              o.stream = "a b";
              o.max_batch = 0;
            }).find("stream"),
            std::string::npos);
}

TEST(ClientOptions, TheConsumerRuntimeIsBuiltFromTheOptions) {
  ConsumerOptions o = GoodConsumer();
  o.max_batch = 7;
  o.block = milliseconds(250);
  o.on_handler_error = HandlerErrorPolicy::kDeadLetter;
  ConsumerRuntimeOptions r = ConsumerRuntimeOptionsOf(o, "m-1");
  EXPECT_EQ(r.stream, "orders");
  EXPECT_EQ(r.reader.group, "billing");
  EXPECT_EQ(r.reader.consumer_name, "m-1") << "the member id names the consumer by default";
  EXPECT_EQ(r.reader.max_batch, 7);
  EXPECT_EQ(r.reader.block_ms, 250);
  EXPECT_EQ(r.reader.policy, HandlerErrorPolicy::kDeadLetter);
  EXPECT_FALSE(r.reader.observe) << "no event hook, no events";
  o.consumer_name = "billing-7";
  o.on_event = [](const ConsumerEvent&) {};
  r = ConsumerRuntimeOptionsOf(o, "m-1");
  EXPECT_EQ(r.reader.consumer_name, "billing-7");
  EXPECT_TRUE(r.reader.observe);
  const ConsumerCoreOptions c =
      ConsumerCoreOptionsOf(o, "m-1", 2, ObservedVersion{12, "abc"}, /*jitter_seed=*/9);
  EXPECT_EQ(c.member_id, MemberId("m-1"));
  EXPECT_EQ(c.endpoint_count, 2);
  EXPECT_EQ(c.initial_metadata_version, 12);
  EXPECT_EQ(c.initial_lineage, "abc");
  EXPECT_EQ(c.backoff_initial_ms, 100);
  EXPECT_EQ(c.jitter_seed, 9u);
}

TEST(ClientOptions, ProducerChecksAndRuntime) {
  CheckedEndpoints checked;
  ProducerOptions o = GoodProducer();
  EXPECT_FALSE(CheckProducerOptions(o, &checked).has_value()) << "a producer needs no group";
  EXPECT_EQ(ProducerVersionStoreGroup(o), kStreamRoutingGroup) << "routes by the stream (D4)";
  o.group = "bad group";
  EXPECT_NE(CheckProducerOptions(o, &checked).value_or("").find("group"), std::string::npos);
  o.group = "billing";
  EXPECT_EQ(ProducerVersionStoreGroup(o), "billing");
  o.retry_max = milliseconds(10);
  EXPECT_NE(CheckProducerOptions(o, &checked).value_or("").find("retry_initial"),
            std::string::npos);
  o.retry_max = milliseconds(800);
  o.endpoint_backoff = milliseconds(30);
  const ProducerRuntimeOptions r = ProducerRuntimeOptionsOf(o, 3, 2);
  EXPECT_EQ(r.group, "billing");
  EXPECT_EQ(r.endpoint_count, 3);
  EXPECT_EQ(r.first_endpoint, 2);
  EXPECT_EQ(r.endpoint_backoff_ms, 30);
  EXPECT_EQ(r.core.max_retry_ms, 800);
}

}  // namespace
}  // namespace rsc::client
