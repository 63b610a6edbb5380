// ConsumerRuntime (issue 10) over scripted ports: the decisions between the ConsumerCore and
// the readers that the library and the simulator now share — the heartbeat's wire form, the
// routing look-up and its retries, the start of readers, the release reason of an abandon,
// the predecessor rule, and the kStop policy. No threads, no I/O, an injected clock.

#include "client/consumer_runtime.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/reader_node.h"
#include "core/protocol_json.h"

namespace rsc::client {
namespace {

struct SentHttp {
  uint64_t call = 0;
  HttpCall request;
};
struct SentRedis {
  uint64_t reader = 0;
  std::string stream;
  ReaderCommand command;
  bool create_key = true;
};

class ScriptedPorts : public ConsumerPorts {
 public:
  TimeMs now = 1'000'000;
  std::deque<SentHttp> http;
  std::deque<SentRedis> redis;
  std::deque<std::pair<uint64_t, Message>> handled;
  std::vector<ConsumerEvent> events;
  std::vector<std::pair<uint64_t, bool>> stopping;  // (reader, abandon)

  TimeMs NowMs(bool /*round_up*/) override { return now; }
  void Http(uint64_t call, const HttpCall& request) override { http.push_back({call, request}); }
  void Redis(uint64_t reader, const ReaderCoreConfig& config,
             const ReaderCommand& command) override {
    redis.push_back({reader, config.stream, command, config.create_key});
  }
  void Handle(uint64_t reader, Message message) override {
    handled.emplace_back(reader, std::move(message));
  }
  void ReaderStopping(uint64_t reader, bool abandon, AbandonCause /*cause*/) override {
    stopping.emplace_back(reader, abandon);
  }
  void Observe(uint64_t /*reader*/, ConsumerEvent event) override {
    events.push_back(std::move(event));
  }

  SentHttp TakeHttp() {
    EXPECT_FALSE(http.empty()) << "no HTTP request was sent";
    if (http.empty()) return {};
    SentHttp h = http.front();
    http.pop_front();
    return h;
  }
  std::vector<std::string> Releases() const {
    std::vector<std::string> out;
    for (const ConsumerEvent& e : events) {
      if (e.kind == ConsumerEventKind::kRelease) out.push_back(e.detail);
    }
    return out;
  }
};

HttpOutcome Answer(const HeartbeatResponse& r) {
  return HttpOutcome{200, SerializeHeartbeatResponse(r), "", "ep"};
}

HeartbeatResponse Ok(std::vector<int32_t> shards, int64_t epoch = 1) {
  HeartbeatResponse r;
  r.status = HeartbeatStatus::kOk;
  r.member_id = MemberId("m-1");
  r.member_epoch = epoch;
  r.assignment_epoch = 1;
  r.metadata_version = 3;
  r.lineage = "L";
  r.assigned_shards = std::move(shards);
  r.heartbeat_interval_ms = 1000;
  r.assignment_lease_ms = 5000;
  return r;
}

HttpOutcome Routing(int32_t count) {
  RoutingResponse r;
  r.metadata_version = 3;
  r.lineage = "L";
  r.shard_count = count;
  for (int32_t s = 0; s < count; ++s) r.shards.push_back({s, "{P:" + std::to_string(s) + "}"});
  r.routing_lease_ms = 30000;
  r.refresh_interval_ms = 5000;
  return HttpOutcome{200, SerializeRoutingResponse(r), "", "ep"};
}

class ConsumerRuntimeTest : public ::testing::Test {
 protected:
  ConsumerRuntimeTest() {
    ConsumerRuntimeOptions o;
    o.stream = "P";
    o.reader.group = "G";
    o.reader.consumer_name = "me";
    o.reader.max_batch = 10;
    o.reader.block_ms = 1000;
    o.reader.policy = HandlerErrorPolicy::kStop;
    o.reader.max_attempts = 1;
    o.reader.observe = true;
    o.shutdown_timeout_ms = 3000;
    ConsumerCoreOptions c;
    c.member_id = MemberId("m-1");
    c.endpoint_count = 2;
    c.jitter_seed = 7;
    runtime_ = std::make_unique<ConsumerRuntime>(o, c, &ports_, &stats_);
  }

  // Start, answer the first heartbeat with `shards`, answer the routing look-up.
  void Join(std::vector<int32_t> shards) {
    runtime_->Start();
    const SentHttp hb = ports_.TakeHttp();
    ASSERT_EQ(hb.request.target, "/v1/groups/P/G/heartbeat");
    runtime_->OnHttp(hb.call, Answer(Ok(shards)));
    const SentHttp routing = ports_.TakeHttp();
    ASSERT_EQ(routing.request.method, "GET");
    runtime_->OnHttp(routing.call, Routing(8));
  }

  // Answers every outstanding reader command until each reader reads live (or is idle).
  void AnswerSetupCommands() {
    for (int i = 0; i < 100 && !ports_.redis.empty(); ++i) {
      SentRedis c = ports_.redis.front();
      if (c.command.kind == ReaderCommandKind::kReadLive) return;
      ports_.redis.pop_front();
      ReaderReply reply;
      if (c.command.kind == ReaderCommandKind::kAutoClaim) reply.cursor = "0-0";
      runtime_->OnRedisReply(c.reader, reply);
    }
  }

  ScriptedPorts ports_;
  DeliveryStats stats_;
  std::unique_ptr<ConsumerRuntime> runtime_;
};

TEST_F(ConsumerRuntimeTest, AnAssignmentIsRoutedThenEveryShardCreatesItsGroupOnTheRoutedKey) {
  runtime_->Start();
  const SentHttp hb = ports_.TakeHttp();
  EXPECT_EQ(hb.request.method, "POST");
  EXPECT_EQ(hb.request.endpoint, 0);
  EXPECT_TRUE(ParseHeartbeatRequest(hb.request.body).ok()) << hb.request.body;
  EXPECT_TRUE(ports_.redis.empty());
  runtime_->OnHttp(hb.call, Answer(Ok({2, 5})));
  // C7: the stream keys come from routing; nothing is read before it answers.
  EXPECT_TRUE(ports_.redis.empty());
  const SentHttp routing = ports_.TakeHttp();
  EXPECT_EQ(routing.request.target, "/v1/groups/P/G/routing?observedVersion=3&lineage=L");
  runtime_->OnHttp(routing.call, Routing(8));
  ASSERT_EQ(ports_.redis.size(), 2u);
  EXPECT_EQ(ports_.redis[0].command.kind, ReaderCommandKind::kCreateGroup);
  EXPECT_EQ(ports_.redis[0].stream, "{P:2}");
  EXPECT_EQ(ports_.redis[1].stream, "{P:5}");
  EXPECT_TRUE(ports_.redis[0].create_key) << "a stream never resharded: MKSTREAM as before";
  EXPECT_EQ(runtime_->Readers().size(), 2u);
}

// C9 (f): a shard whose key an answer's `streams` gave (the stream was resharded) is read
// without creating its key: after a Redis restore to before the key existed, a reader still
// holding the shard must not re-create a key a stale producer would then write (simulator
// seed 20261598). The XGROUP CREATE goes out without MKSTREAM.
TEST_F(ConsumerRuntimeTest, AShardOfAReshardedStreamIsReadWithoutCreatingItsKey) {
  runtime_->Start();
  const SentHttp hb = ports_.TakeHttp();
  HeartbeatResponse r = Ok({9});
  r.streams = {{9, "{P:9}"}};
  runtime_->OnHttp(hb.call, Answer(r));
  ASSERT_EQ(ports_.redis.size(), 1u) << "the answer named the key: no routing look-up needed";
  EXPECT_EQ(ports_.redis[0].command.kind, ReaderCommandKind::kCreateGroup);
  EXPECT_EQ(ports_.redis[0].stream, "{P:9}");
  EXPECT_FALSE(ports_.redis[0].create_key);
  ReaderCoreConfig config;
  config.stream = "{P:9}";
  config.group = "G";
  config.create_key = false;
  ReaderCommand create;
  create.kind = ReaderCommandKind::kCreateGroup;
  EXPECT_EQ(ReaderCommandArgs(config, create),
            (std::vector<std::string>{"XGROUP", "CREATE", "{P:9}", "G", "0"}));
  config.create_key = true;
  EXPECT_EQ(ReaderCommandArgs(config, create),
            (std::vector<std::string>{"XGROUP", "CREATE", "{P:9}", "G", "0", "MKSTREAM"}));
}

TEST_F(ConsumerRuntimeTest, AFailedRoutingLookUpIsRetriedOnTheNextEndpointAfterABackoff) {
  runtime_->Start();
  const SentHttp hb = ports_.TakeHttp();
  runtime_->OnHttp(hb.call, Answer(Ok({0})));
  const SentHttp first = ports_.TakeHttp();
  EXPECT_EQ(first.request.endpoint, 0);
  runtime_->OnHttp(first.call, HttpOutcome{0, "", "connection refused", "ep0"});
  EXPECT_NE(runtime_->last_error().find("routing from ep0: connection refused"), std::string::npos)
      << runtime_->last_error();
  runtime_->Tick();
  EXPECT_TRUE(ports_.http.empty()) << "retried before its backoff";
  ports_.now += 200;
  runtime_->Tick();
  const SentHttp second = ports_.TakeHttp();
  EXPECT_EQ(second.request.endpoint, 1);  // C6: the next endpoint
  runtime_->OnHttp(second.call, Routing(8));
  ASSERT_EQ(ports_.redis.size(), 1u);
  EXPECT_EQ(ports_.redis[0].stream, "{P:0}");
}

TEST_F(ConsumerRuntimeTest, ALeaseEndReleasesAsAbandonedOnlyOnceTheReadsCameBack) {
  Join({0, 1});
  AnswerSetupCommands();
  ASSERT_EQ(ports_.redis.size(), 2u);  // both read live
  // The lease ends (no renewal): both abandoned; their blocking reads are cut by the port.
  ports_.now += 6000;
  runtime_->Tick();
  ASSERT_EQ(ports_.stopping.size(), 2u);
  EXPECT_TRUE(ports_.stopping[0].second);
  // Nothing is released before the reads in flight came back.
  EXPECT_TRUE(ports_.Releases().empty());
  EXPECT_EQ(runtime_->Readers().size(), 2u);
  for (const SentRedis& c : ports_.redis) runtime_->OnRedisReply(c.reader, ReaderReply{});
  ports_.redis.clear();
  EXPECT_EQ(ports_.Releases(), (std::vector<std::string>{"abandoned", "abandoned"}));
  EXPECT_TRUE(runtime_->Readers().empty());
}

TEST_F(ConsumerRuntimeTest, FencedWhileTheLeaseRunsIsReleasedAsFenced) {
  Join({0});
  AnswerSetupCommands();
  ports_.now += 1000;
  runtime_->Tick();  // the next heartbeat is due
  const SentHttp hb = ports_.TakeHttp();
  runtime_->OnHttp(
      hb.call,
      HttpOutcome{409, SerializeError(MakeError(ErrorCode::kFencedMemberEpoch, "old")), "", "ep"});
  for (const SentRedis& c : ports_.redis) runtime_->OnRedisReply(c.reader, ReaderReply{});
  EXPECT_EQ(ports_.Releases(), (std::vector<std::string>{"fenced"}));
}

TEST_F(ConsumerRuntimeTest, ANewReaderOfAShardWaitsForThePreviousOneToFinish) {
  Join({0});
  AnswerSetupCommands();
  ASSERT_EQ(ports_.redis.size(), 1u);
  const uint64_t first = ports_.redis.front().reader;
  // Lease end: abandoned with its blocking read still out.
  ports_.now += 6000;
  runtime_->Tick();
  // A late answer gives the member the shard again while the old read is still out: the
  // core keeps the shard DRAINING until the old reader really finished, so nothing new reads.
  const SentHttp hb = ports_.TakeHttp();
  runtime_->OnHttp(hb.call, Answer(Ok({0}, 2)));
  for (const SentRedis& c : ports_.redis) EXPECT_EQ(c.reader, first) << "a second reader read";
  runtime_->OnRedisReply(first, ReaderReply{});
  ports_.redis.clear();
  EXPECT_EQ(ports_.Releases(), (std::vector<std::string>{"abandoned"}));
}

// A port whose handler calls may wait for a thread asks before making one (C4): a call
// handed out under the lease is not made once the lease ended or the shard was abandoned.
TEST_F(ConsumerRuntimeTest, AHandlerCallThatWaitedIsNotMadeAfterTheLeaseEnded) {
  Join({0});
  AnswerSetupCommands();
  ASSERT_EQ(ports_.redis.size(), 1u);
  const SentRedis live = ports_.redis.front();
  ports_.redis.clear();
  ReaderReply batch;
  batch.entries.push_back(ReaderEntry{"1-0", false, {{"k", "v"}}});
  runtime_->OnRedisReply(live.reader, batch);
  ReaderReply mine;
  mine.lowest_owner = "me";
  runtime_->OnRedisReply(live.reader, mine);  // the late-read check
  ASSERT_EQ(ports_.handled.size(), 1u);
  EXPECT_TRUE(runtime_->MayStartHandler(live.reader));
  ports_.now += 5000;  // the lease (sent at Join + 5000 ms) has ended; no Tick yet
  EXPECT_FALSE(runtime_->MayStartHandler(live.reader));
  // Withdrawn: nothing is XACKed, and once abandoned the reader ends with no command out.
  runtime_->OnWithdrawn(live.reader);
  runtime_->Tick();
  for (const SentRedis& c : ports_.redis) {
    EXPECT_NE(c.command.kind, ReaderCommandKind::kAck) << "a withdrawn call was acknowledged";
  }
  EXPECT_EQ(ports_.Releases(), (std::vector<std::string>{"abandoned"}));
}

TEST_F(ConsumerRuntimeTest, TheStopPolicyShutsTheRuntimeDownAndLeaves) {
  Join({0});
  AnswerSetupCommands();
  ASSERT_EQ(ports_.redis.size(), 1u);
  const SentRedis live = ports_.redis.front();
  ports_.redis.clear();
  ReaderReply batch;
  batch.entries.push_back(ReaderEntry{"1-0", false, {{"k", "v"}}});
  runtime_->OnRedisReply(live.reader, batch);
  // The late-read check comes first, then the handler call.
  ASSERT_EQ(ports_.redis.size(), 1u);
  EXPECT_EQ(ports_.redis.front().command.kind, ReaderCommandKind::kCheckForeign);
  ReaderReply mine;
  mine.lowest_owner = "me";
  runtime_->OnRedisReply(live.reader, mine);
  ports_.redis.clear();
  ASSERT_EQ(ports_.handled.size(), 1u);
  runtime_->OnHandled(live.reader, HandlerResult::Fail("poison"));
  EXPECT_EQ(runtime_->stop_error().find("poison") != std::string::npos, true)
      << runtime_->stop_error();
  EXPECT_TRUE(runtime_->shutting_down());
  // The shard is drained (nothing XACKed: the entry stays pending), then the member leaves.
  for (int i = 0; i < 10 && !ports_.redis.empty(); ++i) {
    SentRedis c = ports_.redis.front();
    ports_.redis.pop_front();
    EXPECT_NE(c.command.kind, ReaderCommandKind::kAck);
    runtime_->OnRedisReply(c.reader, ReaderReply{});
  }
  SentHttp leave;
  for (int i = 0; i < 5 && leave.request.target.empty(); ++i) {
    if (ports_.http.empty()) {
      ports_.now += 100;
      runtime_->Tick();
      continue;
    }
    SentHttp h = ports_.TakeHttp();
    if (h.request.target.ends_with("/leave")) {
      leave = h;
    } else {
      runtime_->OnHttp(h.call, Answer(Ok({})));
    }
  }
  ASSERT_EQ(leave.request.target, "/v1/groups/P/G/leave");
  HeartbeatResponse left = Ok({}, -1);
  runtime_->OnHttp(leave.call, Answer(left));
  EXPECT_TRUE(runtime_->exited());
}

TEST_F(ConsumerRuntimeTest, ACleanShutdownThatIsNeverAnsweredGivesUpAndAbandons) {
  Join({0});
  AnswerSetupCommands();
  const uint64_t reader = ports_.redis.front().reader;
  runtime_->Shutdown();
  EXPECT_TRUE(runtime_->shutting_down());
  // The drain cuts the blocking read; it comes back; the shard is reported REVOKED.
  runtime_->OnRedisReply(reader, ReaderReply{});
  EXPECT_EQ(ports_.Releases(), (std::vector<std::string>{"drained"}));
  // No coordinator answers any more: after shutdown_timeout the runtime gives up.
  ports_.now += 3000;
  runtime_->Tick();
  EXPECT_TRUE(runtime_->exited());
}

}  // namespace
}  // namespace rsc::client
