// NodeCore (client/node_core.h): the decisions of one Redis node's reader connections, driven
// here with explicit times and hand-made replies — no socket, no thread, no clock. The
// threaded driver over real Redis is tested in reader_redis_test.cc and cluster_client_test.cc.

#include "client/node_core.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rsc::client {
namespace {

using namespace std::chrono_literals;
using redis::Reply;
using TimePoint = NodeCore::TimePoint;

const TimePoint kT0 = TimePoint{} + 1000s;

NodeRead Read(uint64_t token, const std::string& stream, TimePoint deadline, int count = 10) {
  NodeRead r;
  r.token = token;
  r.stream = stream;
  r.group = "g";
  r.consumer_name = "c1";
  r.count = count;
  r.deadline = deadline;
  return r;
}

// Reader `token`'s XACK of entry 1-1 of `stream`.
NodeCommand AckOf(uint64_t token, const std::string& stream) {
  NodeCommand ack;
  ack.token = token;
  ack.kind = ReaderCommandKind::kAck;
  ack.key = stream;
  ack.args = {"XACK", stream, "g", "1-1"};
  return ack;
}

Reply Nil() { return Reply::Nil(); }
Reply Str(std::string s) { return Reply::Bulk(std::move(s)); }
Reply Int(int64_t n) { return Reply::Integer(n); }
Reply Err(std::string s) { return Reply::Error(std::move(s)); }
Reply Arr(std::vector<Reply> e) { return Reply::Array(std::move(e)); }
// One stream of an XREADGROUP reply with entries `ids` (one field each).
Reply StreamOf(const std::string& stream, const std::vector<std::string>& ids) {
  std::vector<Reply> entries;
  for (const std::string& id : ids) entries.push_back(Arr({Str(id), Arr({Str("f"), Str("v")})}));
  return Arr({Str(stream), Arr(std::move(entries))});
}

const ReaderAnswer* AnswerOf(const NodeCore::Output& out, uint64_t token) {
  for (const ReaderAnswer& a : out.answers) {
    if (a.token == token) return &a;
  }
  return nullptr;
}

// A core connected with CLIENT ID 7 and one blocking round of `tokens` in flight, chosen at
// kT0 with deadlines kT0 + 1 s.
NodeCore BlockedCore(const std::vector<uint64_t>& tokens) {
  NodeCore core(/*cluster=*/false);
  core.OnLiveConnected(7);
  std::vector<NodeRead> reads;
  for (uint64_t t : tokens) reads.push_back(Read(t, "s" + std::to_string(t), kT0 + 1s));
  core.Enqueue(std::move(reads), kT0);
  NodeCore::Output out;
  EXPECT_TRUE(core.PrepareRound(kT0, true, "", &out));
  EXPECT_TRUE(out.empty());
  return core;
}

std::vector<NodeCore::BucketReplies> ReadReply(const NodeCore& core, Reply read) {
  std::vector<NodeCore::BucketReplies> replies(core.round().buckets.size());
  replies[0].read = std::move(read);
  return replies;
}

TEST(NodeCore, IdleReadsOfOnePairShareOneBlockingReadBoundedByTheEarliestDeadline) {
  NodeCore core(false);
  core.OnLiveConnected(7);
  EXPECT_FALSE(core.LiveDue().has_value());
  core.Enqueue(
      {Read(1, "s1", kT0 + 900ms, 10), Read(2, "s2", kT0 + 400ms, 3), Read(3, "s3", kT0 + 1s, 10)},
      kT0);
  EXPECT_EQ(core.LiveDue(), TimePoint::min());
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  const NodeCore::LiveRound& round = core.round();
  ASSERT_EQ(round.buckets.size(), 1u);
  EXPECT_TRUE(round.blocking);
  EXPECT_EQ(round.block, 400ms);
  EXPECT_EQ(round.buckets[0].args,
            (redis::Command{"XREADGROUP", "GROUP", "g", "c1", "COUNT", "3", "BLOCK", "400",
                            "STREAMS", "s1", "s2", "s3", ">", ">", ">"}));
  EXPECT_FALSE(core.LiveDue().has_value()) << "one round at a time";
  EXPECT_EQ(core.Stats().live_reads, 1);
  EXPECT_EQ(core.Stats().live_read_streams, 3);

  auto replies = ReadReply(core, Arr({StreamOf("s2", {"1-1", "1-2"})}));
  core.OnRoundReplies(replies, "", false, kT0 + 5ms, &out);
  ASSERT_EQ(out.answers.size(), 3u);
  EXPECT_EQ(AnswerOf(out, 2)->reply.kind, ReaderReply::Kind::kOk);
  EXPECT_EQ(AnswerOf(out, 2)->reply.entries.size(), 2u);
  EXPECT_EQ(AnswerOf(out, 1)->reply.kind, ReaderReply::Kind::kNil);
  EXPECT_EQ(AnswerOf(out, 3)->reply.kind, ReaderReply::Kind::kNil);
  EXPECT_TRUE(core.Idle());
}

TEST(NodeCore, ARoundIsFullWhenAReaderGotAllItAskedForAndOnlyThenGoesNextFirst) {
  // Readers 1 and 2 each ask for 2; reader 1 gets both (a backlog), reader 2 gets one.
  NodeCore core(false);
  core.OnLiveConnected(7);
  core.Enqueue({Read(1, "s1", kT0 + 1s, 2), Read(2, "s2", kT0 + 1s, 2)}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  auto replies = ReadReply(core, Arr({StreamOf("s1", {"1-1", "1-2"}), StreamOf("s2", {"1-3"})}));
  NodeCore::RoundEnd end = core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  EXPECT_TRUE(end.full);
  EXPECT_FALSE(core.NextRoundFirst(end)) << "nobody came back while it was out: nothing due";
  core.Enqueue({Read(3, "s3", kT0 + 1s, 2)}, kT0 + 1ms);  // (in a driver: before the replies)
  EXPECT_TRUE(core.NextRoundFirst(end));

  ASSERT_TRUE(core.PrepareRound(kT0 + 1ms, true, "", &out));
  core.Enqueue({Read(4, "s4", kT0 + 1s, 2)}, kT0 + 1ms);
  replies = ReadReply(core, Arr({StreamOf("s3", {"1-4"})}));
  end = core.OnRoundReplies(replies, "", false, kT0 + 2ms, &out);
  EXPECT_FALSE(end.full) << "a trickle: the readers answered come back into the next round";
  EXPECT_FALSE(core.NextRoundFirst(end));

  ASSERT_TRUE(core.PrepareRound(kT0 + 2ms, true, "", &out));
  core.Enqueue({Read(5, "s5", kT0 + 1s, 2)}, kT0 + 2ms);
  replies = ReadReply(core, Arr({StreamOf("s4", {"1-5", "1-6"})}));
  end = core.OnRoundReplies(replies, "reset by peer", false, kT0 + 3ms, &out);
  EXPECT_FALSE(core.NextRoundFirst(end)) << "a lost connection reconnects first";
}

TEST(NodeCore, AStreamNamedTwiceWaitsForTheNextRound) {
  NodeCore core(false);
  core.Enqueue({Read(1, "s", kT0 + 1s), Read(2, "s", kT0 + 1s)}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  EXPECT_EQ(core.round().buckets[0].reads.size(), 1u);
  EXPECT_EQ(core.round().buckets[0].reads[0].token, 1u);
}

TEST(NodeCore, AReturningReaderCutsTheBlockedReadAfterTheGraceAndTheOthersAreCarriedOver) {
  NodeCore core = BlockedCore({1, 2});
  // Reader 3 comes back 1 ms after the read went out: the unblock waits for the 2 ms grace.
  EXPECT_TRUE(core.Enqueue({Read(3, "s3", kT0 + 1s)}, kT0 + 1ms));
  EXPECT_EQ(core.CommandDue(), kT0 + 2ms);
  EXPECT_TRUE(core.TakeCommands(kT0 + 1ms).empty());
  std::vector<NodeCore::Queued> batch = core.TakeCommands(kT0 + 2ms);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].command.args, (redis::Command{"CLIENT", "UNBLOCK", "7", "TIMEOUT"}));
  int64_t commands = 0;
  int64_t unblocks = 0;
  EXPECT_EQ(NodeCore::CommandWire(batch, &commands, &unblocks).size(), 1u);
  EXPECT_EQ(unblocks, 1);
  EXPECT_FALSE(core.Enqueue({Read(4, "s4", kT0 + 1s)}, kT0 + 3ms)) << "one unblock per read";

  // The read comes back nil before its BLOCK ran out: nobody is answered, all go again.
  NodeCore::Output out;
  auto replies = ReadReply(core, Nil());
  core.OnRoundReplies(replies, "", /*timed_out=*/false, kT0 + 3ms, &out);
  EXPECT_TRUE(out.answers.empty());
  ASSERT_TRUE(core.PrepareRound(kT0 + 3ms, true, "", &out));
  EXPECT_EQ(core.round().buckets[0].reads.size(), 4u);
  EXPECT_EQ(core.round().buckets[0].reads[0].token, 1u) << "the carried-over readers first";
  EXPECT_EQ(core.round().block, 997ms);
}

TEST(NodeCore, AnUnblockThatCameTooEarlyIsSentAgainOnlyWhileItsReadIsOut) {
  NodeCore core = BlockedCore({1});
  EXPECT_TRUE(core.Enqueue({Read(2, "s2", kT0 + 1s)}, kT0 + 5ms));
  std::vector<NodeCore::Queued> batch = core.TakeCommands(kT0 + 5ms);
  ASSERT_EQ(batch.size(), 1u);
  NodeCore::Output out;
  std::vector<std::optional<Reply>> replies{Int(0)};  // not blocked yet
  core.AnswerCommands(batch, replies, "", &out);
  core.OnCommandReplies(batch, replies, out, kT0 + 6ms);
  EXPECT_TRUE(out.answers.empty());
  EXPECT_EQ(core.CommandDue(), kT0 + 7ms) << "again after 1 ms";
  // The read returns on its own before the retry: the retry goes nowhere.
  auto read = ReadReply(core, Arr({StreamOf("s1", {"1-1"})}));
  core.OnRoundReplies(read, "", false, kT0 + 6ms, &out);
  batch = core.TakeCommands(kT0 + 7ms);
  ASSERT_EQ(batch.size(), 1u);
  int64_t commands = 0;
  int64_t unblocks = 0;
  EXPECT_TRUE(NodeCore::CommandWire(batch, &commands, &unblocks).empty());
}

TEST(NodeCore, WithoutAClientIdNoUnblockIsEverAskedFor) {
  NodeCore core(false);
  core.Enqueue({Read(1, "s1", kT0 + 1s)}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  EXPECT_FALSE(core.Enqueue({Read(2, "s2", kT0 + 1s)}, kT0 + 10ms));
  EXPECT_FALSE(core.Cancel(1, false));
  EXPECT_FALSE(core.CommandDue().has_value());
}

TEST(NodeCore, ADrainedQueuedReadSendsItsXackAloneAndAnAbandonedOneDropsIt) {
  NodeCore core = BlockedCore({1});
  NodeRead drained = Read(2, "s2", kT0 + 1s);
  drained.ack_args = {"XACK", "s2", "g", "1-1"};
  NodeRead abandoned = Read(3, "s3", kT0 + 1s);
  abandoned.ack_args = {"XACK", "s3", "g", "1-1"};
  core.Enqueue({drained, abandoned}, kT0 + 1ms);
  (void)core.TakeCommands(kT0 + 2ms);  // the unblock
  EXPECT_FALSE(core.Cancel(2, /*now=*/false));
  EXPECT_FALSE(core.Cancel(3, /*now=*/true));
  std::vector<NodeCore::Queued> batch = core.TakeCommands(kT0 + 3ms);
  ASSERT_EQ(batch.size(), 2u);
  NodeCore::Output out;
  NodeCore::AnswerUnsent(batch, &out);
  ASSERT_EQ(out.answers.size(), 1u);
  EXPECT_EQ(out.answers[0].token, 3u);
  EXPECT_EQ(out.answers[0].reply.kind, ReaderReply::Kind::kTransport) << "C4: the XACK is dropped";
  int64_t commands = 0;
  int64_t unblocks = 0;
  auto wire = NodeCore::CommandWire(batch, &commands, &unblocks);
  ASSERT_EQ(wire.size(), 1u);
  EXPECT_EQ(*wire[0], (redis::Command{"XACK", "s2", "g", "1-1"}));
  std::vector<std::optional<Reply>> replies{Int(1)};
  core.AnswerCommands(batch, replies, "", &out);
  const ReaderAnswer* a = AnswerOf(out, 2);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->reply.ok());
  EXPECT_EQ(a->reply.count, 1);
}

TEST(NodeCore, AReadWhoseBlockTimeRanOutInTheQueueIsAnsweredAndItsXackDropped) {
  NodeCore core = BlockedCore({1});
  NodeRead late = Read(2, "s2", kT0 + 50ms);
  late.ack_args = {"XACK", "s2", "g", "1-1"};
  core.Enqueue({late, Read(3, "s3", kT0 + 60ms)}, kT0 + 1ms);
  NodeCore::Output out;
  auto replies = ReadReply(core, Nil());
  core.OnRoundReplies(replies, "", true, kT0 + 70ms, &out);
  EXPECT_EQ(AnswerOf(out, 1)->reply.kind, ReaderReply::Kind::kNil);
  out = {};
  EXPECT_FALSE(core.PrepareRound(kT0 + 70ms, true, "", &out));
  EXPECT_EQ(AnswerOf(out, 3)->reply.kind, ReaderReply::Kind::kNil);
  std::vector<NodeCore::Queued> batch = core.TakeCommands(kT0 + 70ms);
  NodeCore::AnswerUnsent(batch, &out);
  ASSERT_NE(AnswerOf(out, 2), nullptr);
  EXPECT_EQ(AnswerOf(out, 2)->reply.kind, ReaderReply::Kind::kTransport);
}

TEST(NodeCore, AnXackAndACheckRideWithTheReadAndAnswerItsReader) {
  NodeCore core(false);
  NodeRead r = Read(1, "s1", kT0 + 1s);
  r.ack_args = {"XACK", "s1", "g", "1-1", "1-2"};
  r.check = true;
  core.Enqueue({r, Read(2, "s2", kT0 + 1s)}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  bool writes = false;
  auto wire = NodeCore::RoundWire(core.round(), &writes);
  EXPECT_TRUE(writes);
  ASSERT_EQ(wire.size(), 3u);
  EXPECT_EQ((*wire[0])[0], "XACK");
  EXPECT_EQ((*wire[1])[0], "XREADGROUP");
  EXPECT_EQ(*wire[2], (redis::Command{"XPENDING", "s1", "g", "-", "+", "1"}));
  std::vector<NodeCore::BucketReplies> replies(1);
  replies[0].acks = {Int(2)};
  replies[0].read = Arr({StreamOf("s1", {"2-1"})});
  replies[0].checks = {Arr({Arr({Str("1-9"), Str("other"), Int(5), Int(1)})})};
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  const ReaderAnswer* a = AnswerOf(out, 1);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->reply.ok());
  EXPECT_EQ(a->reply.count, 2);
  EXPECT_TRUE(a->reply.checked);
  EXPECT_EQ(a->reply.lowest_owner, "other");
  EXPECT_EQ(AnswerOf(out, 2)->reply.kind, ReaderReply::Kind::kNil);
}

TEST(NodeCore, AFailedXackAnswersItsReaderWithTheErrorAndLeavesTheOthers) {
  NodeCore core(false);
  NodeRead r = Read(1, "s1", kT0 + 1s);
  r.ack_args = {"XACK", "s1", "g", "1-1"};
  r.check = true;
  core.Enqueue({r, Read(2, "s2", kT0 + 1s)}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  std::vector<NodeCore::BucketReplies> replies(1);
  replies[0].acks = {Err("READONLY You can't write against a read only replica.")};
  replies[0].read = Arr({StreamOf("s1", {"2-1"}), StreamOf("s2", {"2-2"})});
  replies[0].checks = {Arr({})};
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  ASSERT_EQ(out.answers.size(), 2u);
  EXPECT_EQ(AnswerOf(out, 1)->reply.kind, ReaderReply::Kind::kError);
  EXPECT_EQ(AnswerOf(out, 2)->reply.entries.size(), 1u);
}

TEST(NodeCore, NogroupNamingOneStreamErrorsOnlyThatReader) {
  NodeCore core = BlockedCore({1, 2});
  NodeCore::Output out;
  auto replies = ReadReply(
      core, Err("NOGROUP No such key 's2' or consumer group 'g' in XREADGROUP with GROUP option"));
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  EXPECT_EQ(AnswerOf(out, 1)->reply.kind, ReaderReply::Kind::kNil);
  EXPECT_EQ(AnswerOf(out, 2)->reply.kind, ReaderReply::Kind::kError);
}

TEST(NodeCore, ACancelNowCutsTheReadAndCarriesTheOthersOver) {
  NodeCore core = BlockedCore({1, 2});
  EXPECT_FALSE(core.OnRoundSent());
  EXPECT_TRUE(core.Cancel(1, /*now=*/true));
  NodeCore::Output out;
  auto replies = ReadReply(core, Nil());
  replies[0].read.reset();  // the socket was cut
  NodeCore::RoundEnd end = core.OnRoundReplies(replies, "connection cut", false, kT0 + 1ms, &out);
  EXPECT_TRUE(end.lost);
  EXPECT_FALSE(out.failed) << "our own cut is no failure of Redis";
  ASSERT_EQ(out.answers.size(), 1u);
  EXPECT_EQ(out.answers[0].token, 1u);
  EXPECT_EQ(out.answers[0].reply.kind, ReaderReply::Kind::kNil);
  EXPECT_EQ(core.LiveDue(), TimePoint::min()) << "reader 2 goes into the next read";
}

// An abandon that comes while the round is chosen but not written yet (from a hook the
// driver runs between PrepareRound and the send): cutting the socket then would shut down an
// idle connection, which the send would silently replace — the round then runs on a client
// whose CLIENT ID the core does not know, and every unblock misses. The cut waits for the send.
TEST(NodeCore, ACancelNowBeforeTheRoundIsOutCutsItOnceItIsSent) {
  NodeCore core = BlockedCore({1, 2});
  EXPECT_FALSE(core.Cancel(1, /*now=*/true)) << "nothing on the socket to cut yet";
  EXPECT_FALSE(core.Cancel(2, /*now=*/true)) << "one cut per round";
  EXPECT_TRUE(core.OnRoundSent()) << "out now: cut it";
  NodeCore::Output out;
  auto replies = ReadReply(core, Nil());
  replies[0].read.reset();
  NodeCore::RoundEnd end = core.OnRoundReplies(replies, "connection cut", false, kT0 + 1ms, &out);
  EXPECT_TRUE(end.lost);
  EXPECT_FALSE(out.failed);
  ASSERT_EQ(out.answers.size(), 2u);
  for (const ReaderAnswer& a : out.answers) EXPECT_EQ(a.reply.kind, ReaderReply::Kind::kNil);
  EXPECT_TRUE(core.Idle());
}

// A second abandon of the same round once it was cut: the socket is cut once (a second cut
// from another thread could land on the next round's socket); the reader is answered with
// the round all the same.
TEST(NodeCore, ASecondCancelNowOfACutRoundDoesNotCutAgain) {
  NodeCore core = BlockedCore({1, 2, 3});
  EXPECT_FALSE(core.OnRoundSent());
  EXPECT_TRUE(core.Cancel(1, /*now=*/true));
  EXPECT_FALSE(core.Cancel(2, /*now=*/true));
  NodeCore::Output out;
  auto replies = ReadReply(core, Nil());
  replies[0].read.reset();
  core.OnRoundReplies(replies, "connection cut", false, kT0 + 1ms, &out);
  ASSERT_EQ(out.answers.size(), 2u);
  EXPECT_NE(AnswerOf(out, 1), nullptr);
  EXPECT_NE(AnswerOf(out, 2), nullptr);
  EXPECT_EQ(AnswerOf(out, 3), nullptr) << "reader 3 is carried over";
  // The next round is a new one: its abandon cuts again.
  ASSERT_TRUE(core.PrepareRound(kT0 + 2ms, true, "", &out));
  EXPECT_FALSE(core.OnRoundSent());
  EXPECT_TRUE(core.Cancel(3, /*now=*/true));
}

// A cut asked for after the round's replies came in answers nothing more (the round is gone)
// and is not carried into the next round.
TEST(NodeCore, ACancelNowAfterTheRepliesCutsNothing) {
  NodeCore core = BlockedCore({1});
  EXPECT_FALSE(core.OnRoundSent());
  NodeCore::Output out;
  auto replies = ReadReply(core, Arr({StreamOf("s1", {"1-1"})}));
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  EXPECT_FALSE(core.Cancel(1, /*now=*/true));
  core.Enqueue({Read(2, "s2", kT0 + 1s)}, kT0 + 2ms);
  ASSERT_TRUE(core.PrepareRound(kT0 + 2ms, true, "", &out));
  EXPECT_FALSE(core.OnRoundSent()) << "no cut left over from the previous round";
}

TEST(NodeCore, ATransportFailureAnswersEveryReaderAndForgetsTheClientId) {
  NodeCore core = BlockedCore({1, 2});
  NodeCore::Output out;
  auto replies = ReadReply(core, Nil());
  replies[0].read.reset();
  NodeCore::RoundEnd end = core.OnRoundReplies(replies, "reset by peer", false, kT0 + 1ms, &out);
  EXPECT_TRUE(end.lost);
  EXPECT_TRUE(out.failed);
  EXPECT_EQ(out.answers.size(), 2u);
  for (const ReaderAnswer& a : out.answers) EXPECT_EQ(a.reply.kind, ReaderReply::Kind::kTransport);
  // The next round is out before a new CLIENT ID is known: no unblock for it.
  core.Enqueue({Read(3, "s3", kT0 + 1s)}, kT0 + 2ms);
  ASSERT_TRUE(core.PrepareRound(kT0 + 2ms, true, "", &out));
  EXPECT_FALSE(core.Enqueue({Read(4, "s4", kT0 + 1s)}, kT0 + 10ms));
}

TEST(NodeCore, UnreachableLiveConnectionAnswersTheQueuedReadsKTransport) {
  NodeCore core(false);
  core.Enqueue({Read(1, "s1", kT0 + 1s)}, kT0);
  NodeCore::Output out;
  EXPECT_FALSE(core.PrepareRound(kT0, false, "connection refused", &out));
  ASSERT_EQ(out.answers.size(), 1u);
  EXPECT_EQ(out.answers[0].reply.kind, ReaderReply::Kind::kTransport);
  EXPECT_TRUE(out.failed);
  EXPECT_TRUE(core.Idle());
}

TEST(NodeCore, OnAClusterReadsOfSeveralSlotsArePolledWithAGrowingPause) {
  NodeCore core(/*cluster=*/true);
  NodeRead a = Read(1, "{a}s", kT0 + 1s);
  a.slot = 100;
  NodeRead b = Read(2, "{b}s", kT0 + 1s);
  b.slot = 200;
  core.Enqueue({a, b}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  ASSERT_EQ(core.round().buckets.size(), 2u);
  EXPECT_FALSE(core.round().blocking);
  EXPECT_EQ(core.Stats().polls, 2);
  std::vector<NodeCore::BucketReplies> replies(2);
  replies[0].read = Nil();
  replies[1].read = Nil();
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  EXPECT_TRUE(out.answers.empty()) << "polled again";
  EXPECT_EQ(core.LiveDue(), kT0 + 2ms) << "after a 1 ms pause";
  EXPECT_FALSE(core.PrepareRound(kT0 + 1ms, true, "", &out));
  ASSERT_TRUE(core.PrepareRound(kT0 + 2ms, true, "", &out));
  replies = std::vector<NodeCore::BucketReplies>(2);
  replies[0].read = Nil();
  replies[1].read = Nil();
  core.OnRoundReplies(replies, "", false, kT0 + 3ms, &out);
  EXPECT_EQ(core.LiveDue(), kT0 + 5ms) << "the pause doubles";
  // A returning reader ends the pause.
  NodeRead c = Read(3, "{c}s", kT0 + 1s);
  c.slot = 300;
  core.Enqueue({c}, kT0 + 4ms);
  EXPECT_EQ(core.LiveDue(), TimePoint::min());
}

TEST(NodeCore, ARedirectedReadOrCommandIsBouncedAndCounted) {
  NodeCore core(/*cluster=*/true);
  core.Enqueue({Read(1, "s1", kT0 + 1s)}, kT0);
  core.Enqueue(AckOf(2, "s1"));
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  auto replies = ReadReply(core, Err("MOVED 1234 10.0.0.2:6379"));
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  ASSERT_EQ(out.bounced_reads.size(), 1u);
  EXPECT_EQ(out.bounced_reads[0].redirect, "MOVED 1234 10.0.0.2:6379");
  std::vector<NodeCore::Queued> batch = core.TakeCommands(kT0 + 1ms);
  std::vector<std::optional<Reply>> cmd_replies{Err("ASK 1234 10.0.0.3:6379")};
  core.AnswerCommands(batch, cmd_replies, "", &out);
  core.OnCommandReplies(batch, cmd_replies, out, kT0 + 2ms);
  ASSERT_EQ(out.bounced_commands.size(), 1u);
  EXPECT_TRUE(out.answers.empty());
  EXPECT_EQ(core.Stats().redirects, 2);
}

// A command bounced by MOVED leaves the batch to be sent elsewhere; the replies after it in
// the same pipeline still belong to the entries after it. Here an unblock's "not blocked
// yet" (0) must be read as such and the unblock sent again, not matched with the MOVED.
TEST(NodeCore, ABouncedCommandDoesNotShiftTheRepliesOfTheUnblocksAfterIt) {
  NodeCore core(/*cluster=*/true);
  core.OnLiveConnected(7);
  core.Enqueue({Read(1, "s1", kT0 + 1s)}, kT0);
  NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(kT0, true, "", &out));
  ASSERT_TRUE(core.round().blocking);
  core.Enqueue(AckOf(2, "s1"));
  // A drain cuts the blocked read short with an unblock (not at the socket: false).
  EXPECT_FALSE(core.Cancel(1, /*now=*/false));
  std::vector<NodeCore::Queued> batch = core.TakeCommands(kT0 + 5ms);
  ASSERT_EQ(batch.size(), 2u);
  ASSERT_EQ(batch[0].command.args, (redis::Command{"XACK", "s1", "g", "1-1"}));
  ASSERT_EQ(batch[1].command.args, (redis::Command{"CLIENT", "UNBLOCK", "7", "TIMEOUT"}));
  std::vector<std::optional<Reply>> replies{Err("MOVED 1234 10.0.0.2:6379"), Int(0)};
  core.AnswerCommands(batch, replies, "", &out);
  core.OnCommandReplies(batch, replies, out, kT0 + 6ms);
  ASSERT_EQ(out.bounced_commands.size(), 1u);
  EXPECT_EQ(out.bounced_commands[0].args, (redis::Command{"XACK", "s1", "g", "1-1"}));
  EXPECT_EQ(core.CommandDue(), kT0 + 7ms) << "the unblock that came too early goes again";
}

TEST(NodeCore, OnOneServerARedirectionIsExplainedNotFollowed) {
  NodeCore core = BlockedCore({1});
  NodeCore::Output out;
  auto replies = ReadReply(core, Err("MOVED 1234 10.0.0.2:6379"));
  core.OnRoundReplies(replies, "", false, kT0 + 1ms, &out);
  ASSERT_EQ(out.answers.size(), 1u);
  EXPECT_EQ(out.answers[0].reply.kind, ReaderReply::Kind::kError);
  EXPECT_NE(out.answers[0].reply.error.find("grant the user +info"), std::string::npos);
}

}  // namespace
}  // namespace rsc::client
