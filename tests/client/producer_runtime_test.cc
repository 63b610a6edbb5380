// ProducerRuntime (issue 10) over scripted ports: the refresh round over the endpoints (C6),
// what a 4xx and a 503 COORDINATOR_TERMINATING change, where the next round starts, and what
// an XADD's reply means for the caller. No threads, no I/O, an injected clock.

#include "client/producer_runtime.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "core/protocol_json.h"

namespace rsc::client {
namespace {

class ScriptedPorts : public ProducerPorts {
 public:
  TimeMs now = 5'000'000;
  std::deque<std::pair<uint64_t, HttpCall>> http;
  std::vector<ObservedVersion> saved;
  int routings_observed = 0;

  TimeMs NowMs(bool /*round_up*/) override { return now; }
  void Http(uint64_t call, const HttpCall& request) override { http.emplace_back(call, request); }
  double Random() override { return 0.5; }
  void SaveVersion(const ObservedVersion& version) override { saved.push_back(version); }
  void ObserveRouting(const RoutingResponse& /*answer*/, TimeMs /*sent_ms*/) override {
    ++routings_observed;
  }
};

HttpOutcome Routing(int64_t version) {
  RoutingResponse r;
  r.metadata_version = version;
  r.lineage = "L";
  r.shard_count = 2;
  r.shards = {{0, "{P:0}"}, {1, "{P:1}"}};
  r.routing_lease_ms = 30000;
  r.refresh_interval_ms = 5000;
  return HttpOutcome{200, SerializeRoutingResponse(r), "", "ep"};
}

HttpOutcome Refused(int status, ErrorCode code) {
  return HttpOutcome{status, SerializeError(MakeError(code, "no")), "", "ep"};
}

class ProducerRuntimeTest : public ::testing::Test {
 protected:
  ProducerRuntimeTest()
      : runtime_(ProducerRuntimeOptions{.stream = "P",
                                        .group = "G",
                                        .endpoint_count = 3,
                                        .first_endpoint = 1,
                                        .endpoint_backoff_ms = 100,
                                        .core = {}},
                 &ports_) {}

  std::pair<uint64_t, HttpCall> Take() {
    EXPECT_FALSE(ports_.http.empty()) << "no request was sent";
    if (ports_.http.empty()) return {};
    auto h = ports_.http.front();
    ports_.http.pop_front();
    return h;
  }

  ScriptedPorts ports_;
  ProducerRuntime runtime_;
};

TEST_F(ProducerRuntimeTest, TheFirstRoundAsksTheFirstEndpointAndAnAnswerIsAdopted) {
  runtime_.Tick();
  auto [call, request] = Take();
  EXPECT_EQ(request.endpoint, 1);
  EXPECT_EQ(request.target, "/v1/groups/P/G/routing?observedVersion=0");
  runtime_.OnHttp(call, Routing(4));
  EXPECT_TRUE(runtime_.has_routing());
  EXPECT_EQ(ports_.routings_observed, 1);
  ASSERT_EQ(ports_.saved.size(), 1u);  // C5: the observed version moved to 4
  EXPECT_EQ(ports_.saved[0].metadata_version, 4);
  const auto routes = runtime_.Route({"a", "b"});
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_TRUE(routes[0].ok() && routes[1].ok());
}

TEST_F(ProducerRuntimeTest, AFailedEndpointIsFollowedByTheNextAfterAPause) {
  runtime_.Tick();
  auto first = Take();
  runtime_.OnHttp(first.first, HttpOutcome{0, "", "connection refused", "ep1"});
  EXPECT_TRUE(ports_.http.empty()) << "the next endpoint was asked without a pause";
  ASSERT_TRUE(runtime_.NextWakeupMs().has_value());
  EXPECT_EQ(*runtime_.NextWakeupMs(), ports_.now + 100);  // 100/2 + 0.5 * 100
  ports_.now += 100;
  runtime_.Tick();
  auto second = Take();
  EXPECT_EQ(second.second.endpoint, 2);
  runtime_.OnHttp(second.first, Routing(4));
  EXPECT_EQ(runtime_.current_endpoint(), 2);  // the next round starts where it worked
}

TEST_F(ProducerRuntimeTest, TerminatingMovesOnAtOnceAndA4xxEndsTheRound) {
  runtime_.Tick();
  auto first = Take();
  runtime_.OnHttp(first.first, Refused(503, ErrorCode::kCoordinatorTerminating));
  auto second = Take();  // no pause after a 503 TERMINATING
  EXPECT_EQ(second.second.endpoint, 2);
  runtime_.OnHttp(second.first, Refused(404, ErrorCode::kGroupNotFound));
  EXPECT_TRUE(ports_.http.empty()) << "a 4xx must end the round";
  EXPECT_NE(runtime_.core().last_refresh_error().find("GROUP_NOT_FOUND"), std::string::npos)
      << runtime_.core().last_refresh_error();
  EXPECT_EQ(runtime_.core().Metrics(ports_.now).consecutive_failures, 1);
}

TEST_F(ProducerRuntimeTest, ARoundThatFailsEverywhereNamesEveryEndpointAndMovesOn) {
  runtime_.Tick();
  for (int i = 0; i < 3; ++i) {
    auto h = Take();
    runtime_.OnHttp(h.first, HttpOutcome{0, "", "timed out", "ep" + std::to_string(i)});
    ports_.now += 200;
    runtime_.Tick();
  }
  const std::string& error = runtime_.core().last_refresh_error();
  EXPECT_NE(error.find("every coordinator endpoint: ep0: timed out; ep1: timed out; ep2"),
            std::string::npos)
      << error;
  EXPECT_EQ(runtime_.current_endpoint(), 2);  // started on 1: the next round starts on 2
  const auto routes = runtime_.Route({"a"});
  ASSERT_FALSE(routes[0].ok());
  EXPECT_EQ(routes[0].error().code, ProducerErrorCode::kNoRouting);
}

TEST_F(ProducerRuntimeTest, ALateAnswerOfAnAbandonedRequestIsIgnored) {
  runtime_.Tick();
  auto first = Take();
  runtime_.OnHttp(first.first, HttpOutcome{0, "", "timed out", "ep1"});
  runtime_.OnHttp(first.first, Routing(4));  // the same call answered after its timeout
  EXPECT_FALSE(runtime_.has_routing());
}

TEST(ProducerRuntimePublish, AnXaddReplyMeansWrittenRefusedOrUnknown) {
  const auto id = ProducerRuntime::PublishOutcome({XaddReply::Kind::kId, "1-0"}, "{P:0}");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id.value(), "1-0");
  const auto refused =
      ProducerRuntime::PublishOutcome({XaddReply::Kind::kError, "OOM no memory"}, "{P:0}");
  EXPECT_EQ(refused.error().code, ProducerErrorCode::kRedisError);
  EXPECT_NE(refused.error().message.find("XADD to {P:0} refused: OOM"), std::string::npos);
  const auto unknown =
      ProducerRuntime::PublishOutcome({XaddReply::Kind::kNoReply, "reset"}, "{P:0}");
  EXPECT_EQ(unknown.error().code, ProducerErrorCode::kUnknownResult);
  const auto odd = ProducerRuntime::PublishOutcome({XaddReply::Kind::kUnexpected, "3"}, "{P:0}");
  EXPECT_EQ(odd.error().code, ProducerErrorCode::kRedisError);
}

// PR6 (SPEC RS2, D3): only replies that say nothing was written — a seal's refusal, a nil
// for a missing key under NOMKSTREAM — send the entry again on newer routing; an error of
// another kind is the caller's, and an XADD whose reply was lost is never sent again.
TEST(ProducerRuntimePublish, OnlyAStaleTargetIsSentAgain) {
  const XaddReply sealed{XaddReply::Kind::kError,
                         "ERR The stream has exhausted the last possible ID, unable to add more "
                         "items"};
  const XaddReply missing{XaddReply::Kind::kNil, "nil"};
  for (const XaddReply& r : {sealed, missing}) {
    EXPECT_TRUE(ProducerRuntime::IsStaleTarget(r)) << r.text;
    const auto out = ProducerRuntime::PublishOutcome(r, "{P:0}");
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, ProducerErrorCode::kStaleRouting) << out.error().message;
    EXPECT_NE(out.error().message.find("nothing was written"), std::string::npos);
  }
  EXPECT_FALSE(ProducerRuntime::IsStaleTarget({XaddReply::Kind::kError, "OOM no memory"}));
  EXPECT_FALSE(ProducerRuntime::IsStaleTarget({XaddReply::Kind::kNoReply, "reset"}));
  EXPECT_FALSE(ProducerRuntime::IsStaleTarget({XaddReply::Kind::kId, "1-0"}));
}

}  // namespace
}  // namespace rsc::client
