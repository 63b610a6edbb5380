// The coordinator token of the client library (SPEC O4): ConsumerOptions and
// ProducerOptions::coordinator_token must be a token the coordinator can accept, since it
// travels in a header line; Create refuses anything else before a thread starts. That it
// is sent (and a wrong one refused) is tested end to end through `rsc produce` and
// `rsc consume` (tests/integration/cli_test.cc, MonitorTokenReadsMemberTokenProducesAndConsumes).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/http_transport.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"

namespace rsc {
namespace {

const std::vector<std::string> kBadTokens = {"has blank",   "line\r\nInjected: x",
                                             "tab\there",   std::string("nul\0x", 5),
                                             "caf\xc3\xa9", std::string(1025, 't')};

TEST(CoordinatorToken, BearerHeaderIsSentOnlyForAToken) {
  EXPECT_TRUE(client::BearerHeaders("").empty());
  const auto h = client::BearerHeaders("member-token-0123456789");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].first, "Authorization");
  EXPECT_EQ(h[0].second, "Bearer member-token-0123456789");
  EXPECT_TRUE(client::IsValidBearerToken(std::string(1024, 't')));
  EXPECT_FALSE(client::IsValidBearerToken(""));
  for (const std::string& bad : kBadTokens) EXPECT_FALSE(client::IsValidBearerToken(bad));
}

TEST(CoordinatorToken, ConsumerCreateRefusesATokenThatCannotBeSent) {
  for (const std::string& bad : kBadTokens) {
    ConsumerOptions o;
    o.coordinator_endpoints = {"127.0.0.1:1"};
    o.coordinator_token = bad;
    o.stream = "orders";
    o.group = "billing";
    o.redis_url = "redis://127.0.0.1:1";
    auto c = Consumer::Create(o, [](const Message&) { return HandlerResult::Ok(); });
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().code, ConsumerErrorCode::kInvalidArgument);
    EXPECT_NE(c.error().message.find("coordinator_token"), std::string::npos) << c.error().message;
  }
}

TEST(CoordinatorToken, ProducerCreateRefusesATokenThatCannotBeSent) {
  for (const std::string& bad : kBadTokens) {
    ProducerOptions o;
    o.coordinator_endpoints = {"127.0.0.1:1"};
    o.coordinator_token = bad;
    o.stream = "orders";
    o.group = "billing";
    o.redis_url = "redis://127.0.0.1:1";
    auto p = Producer::Create(o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().code, ProducerErrorCode::kInvalidArgument);
    EXPECT_NE(p.error().message.find("coordinator_token"), std::string::npos) << p.error().message;
  }
}

}  // namespace
}  // namespace rsc
