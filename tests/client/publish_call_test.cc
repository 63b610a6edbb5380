// PublishCall (client/publish_call.h): one PublishBatch's decisions, driven here with routes
// and replies made by hand — no Redis, no coordinator, no clock. The library's driver over a
// real Redis is tested in producer_integration_test.cc (seals, missing keys, lease ends) and
// the simulator runs the same class inside the library's producer (sim/sim_producer.cc).

#include "client/publish_call.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rsc::client {
namespace {

using redis::Reply;

const StreamFields kFields = {{"f", "v"}};
const StreamFields kEmpty = {};
constexpr const char* kSealed =
    "ERR The stream has exhausted the last possible ID, unable to add more items";

RouteTarget Route(int32_t shard, int64_t version, TimeMs lease_end) {
  return RouteTarget{shard, "{P}:" + std::to_string(shard), version, lease_end};
}

std::vector<ProducerResult<RouteTarget>> Routes(std::vector<RouteTarget> targets) {
  std::vector<ProducerResult<RouteTarget>> out;
  for (RouteTarget& t : targets) out.emplace_back(std::move(t));
  return out;
}

Result<Reply> Id(const std::string& id) { return Reply::Bulk(id); }
Result<Reply> Error(const std::string& text) { return Reply::Error(text); }
Result<Reply> Nil() { return Reply::Nil(); }

TEST(PublishCall, EachEntryIsWrittenByItsRouteInInputOrder) {
  PublishCall call({"a", "b", "c"}, {&kFields, &kEmpty, &kFields});
  ASSERT_FALSE(call.done());
  EXPECT_EQ(call.RouteKeys(), (std::vector<std::string_view>{"a", "c"}))
      << "an entry without fields is refused before routing";
  bool nomkstream = true;
  std::vector<redis::KeyedCommand> cmds =
      call.Write(Routes({Route(1, 5, 900), Route(0, 5, 800)}), OkStatus(), nomkstream);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0].key, "{P}:1");
  EXPECT_EQ(cmds[0].cmd, (redis::Command{"XADD", "{P}:1", "NOMKSTREAM", "*", "f", "v"}));
  EXPECT_EQ(cmds[1].key, "{P}:0");
  EXPECT_EQ(call.write_lease_end_ms(), 800) << "the earliest lease of the write";
  std::vector<Result<Reply>> replies;
  replies.push_back(Id("1-1"));
  replies.push_back(Id("2-1"));
  PublishCall::Outcome out = call.OnReplies(std::move(replies), false, &nomkstream);
  ASSERT_EQ(out.written, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(call.result(0).value(), "1-1");
  EXPECT_EQ(call.route(0).shard, 1);
  EXPECT_EQ(call.route(2).shard, 0);
  ASSERT_TRUE(call.done());
  std::vector<ProducerResult<std::string>> results = call.TakeResults();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].value(), "1-1");
  EXPECT_EQ(results[1].error().code, ProducerErrorCode::kInvalidArgument);
  EXPECT_EQ(results[2].value(), "2-1");
}

TEST(PublishCall, ARouteErrorOrADownConnectionWritesNothing) {
  PublishCall routed({"a", "b"}, {&kFields, &kFields});
  std::vector<ProducerResult<RouteTarget>> routes;
  routes.emplace_back(ProducerError{ProducerErrorCode::kRoutingExpired, "lease ended"});
  routes.emplace_back(Route(0, 5, 800));
  std::vector<redis::KeyedCommand> cmds =
      routed.Write(std::move(routes), MakeError(ErrorCode::kRedisUnavailable, "refused"), true);
  EXPECT_TRUE(cmds.empty());
  ASSERT_TRUE(routed.done());
  std::vector<ProducerResult<std::string>> results = routed.TakeResults();
  EXPECT_EQ(results[0].error().code, ProducerErrorCode::kRoutingExpired);
  EXPECT_EQ(results[1].error().code, ProducerErrorCode::kRedisUnavailable);
}

// A lost reply may have been written (never sent again); an unsent one was not — and when the
// lease ended before the write, that is stale routing (PR5), not Redis being down.
TEST(PublishCall, LostRepliesAreUnknownAndUnsentOnesSayWhy) {
  for (bool lease_ended : {false, true}) {
    PublishCall call({"a", "b"}, {&kFields, &kFields});
    bool nomkstream = true;
    ASSERT_EQ(
        call.Write(Routes({Route(0, 5, 800), Route(1, 5, 800)}), OkStatus(), nomkstream).size(),
        2u);
    std::vector<Result<Reply>> replies;
    replies.push_back(MakeError(ErrorCode::kUnknownResult, "reset after sending"));
    replies.push_back(MakeError(ErrorCode::kRedisUnavailable, "not sent"));
    EXPECT_TRUE(call.OnReplies(std::move(replies), lease_ended, &nomkstream).written.empty());
    ASSERT_TRUE(call.done());
    std::vector<ProducerResult<std::string>> results = call.TakeResults();
    EXPECT_EQ(results[0].error().code, ProducerErrorCode::kUnknownResult);
    EXPECT_EQ(results[1].error().code, lease_ended ? ProducerErrorCode::kStaleRouting
                                                   : ProducerErrorCode::kRedisUnavailable);
  }
}

// RS2, D3: entries a seal or a missing key refused wait for a routing other than the one they
// were refused under — asking for refreshes meanwhile — and go again in input order, until the
// lease of the routing the wait began under ends.
TEST(PublishCall, RefusedEntriesGoAgainOnANewerRoutingUntilTheFirstLeaseEnds) {
  PublishCall call({"a", "b", "c"}, {&kFields, &kFields, &kFields});
  bool nomkstream = true;
  ASSERT_EQ(call.Write(Routes({Route(0, 5, 1000), Route(1, 5, 1000), Route(2, 5, 1000)}),
                       OkStatus(), nomkstream)
                .size(),
            3u);
  std::vector<Result<Reply>> replies;
  replies.push_back(Error(kSealed));
  replies.push_back(Id("7-1"));
  replies.push_back(Nil());
  PublishCall::Outcome out = call.OnReplies(std::move(replies), false, &nomkstream);
  EXPECT_EQ(out.written.size(), 1u);
  EXPECT_EQ(out.sealed, 1);
  EXPECT_EQ(out.missing, 1);
  ASSERT_TRUE(call.waiting());

  PublishCall::Wait w = call.OnWait(900, 5);
  EXPECT_EQ(w.what, PublishCall::Wait::What::kRefresh) << "still version 5: ask again";
  EXPECT_EQ(w.sleep_ms, PublishCall::kSealRetryMs);
  w = call.OnWait(950, 5);
  EXPECT_EQ(w.sleep_ms, 50) << "not past the lease end";
  w = call.OnWait(960, 6);
  EXPECT_EQ(w.what, PublishCall::Wait::What::kRouteAgain);
  EXPECT_EQ(call.RouteKeys(), (std::vector<std::string_view>{"a", "c"}));

  // Refused again on version 6 (with a later lease): the first wait's lease still bounds it.
  ASSERT_EQ(
      call.Write(Routes({Route(3, 6, 5000), Route(4, 6, 5000)}), OkStatus(), nomkstream).size(),
      2u);
  replies.clear();
  replies.push_back(Error(kSealed));
  replies.push_back(Id("8-1"));
  call.OnReplies(std::move(replies), false, &nomkstream);
  ASSERT_TRUE(call.waiting());
  w = call.OnWait(1000, 6);
  EXPECT_EQ(w.what, PublishCall::Wait::What::kGiveUp);
  ASSERT_TRUE(call.done());
  std::vector<ProducerResult<std::string>> results = call.TakeResults();
  EXPECT_EQ(results[0].error().code, ProducerErrorCode::kStaleRouting);
  EXPECT_EQ(results[1].value(), "7-1");
  EXPECT_EQ(results[2].value(), "8-1");
}

// Redis < 6.2 reads NOMKSTREAM as the entry id: that entry goes again at once without it, and
// so do the entries a stale target refused in the same write (input order), without a wait.
TEST(PublishCall, AServerWithoutNomkstreamGetsTheEntriesAgainAtOnce) {
  PublishCall call({"a", "b"}, {&kFields, &kFields});
  bool nomkstream = true;
  ASSERT_EQ(
      call.Write(Routes({Route(0, 5, 1000), Route(1, 5, 1000)}), OkStatus(), nomkstream).size(),
      2u);
  std::vector<Result<Reply>> replies;
  replies.push_back(Error(kSealed));
  replies.push_back(Error("ERR Invalid stream ID specified as stream command argument"));
  call.OnReplies(std::move(replies), false, &nomkstream);
  EXPECT_FALSE(nomkstream);
  ASSERT_FALSE(call.waiting());
  ASSERT_FALSE(call.done());
  EXPECT_EQ(call.RouteKeys(), (std::vector<std::string_view>{"a", "b"}));
  std::vector<redis::KeyedCommand> cmds =
      call.Write(Routes({Route(0, 5, 1000), Route(1, 5, 1000)}), OkStatus(), nomkstream);
  EXPECT_EQ(cmds[1].cmd, (redis::Command{"XADD", "{P}:1", "*", "f", "v"}));
}

TEST(PublishCall, GivingUpKeepsWhatWasNotWrittenFailed) {
  PublishCall call({"a"}, {&kFields});
  bool nomkstream = true;
  ASSERT_EQ(call.Write(Routes({Route(0, 5, 1000)}), OkStatus(), nomkstream).size(), 1u);
  std::vector<Result<Reply>> replies;
  replies.push_back(Nil());
  call.OnReplies(std::move(replies), false, &nomkstream);
  ASSERT_TRUE(call.waiting());
  call.GiveUp();
  ASSERT_TRUE(call.done());
  EXPECT_EQ(call.TakeResults()[0].error().code, ProducerErrorCode::kStaleRouting);
}

}  // namespace
}  // namespace rsc::client
