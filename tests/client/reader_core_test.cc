// Unit tests of the per-shard reader state machine (client/reader_core.h): the stage order,
// the lease checks (C1/C4), the takeover and the late-read reclaim (C7), drain and abandon,
// and the handler error policies — driven by hand, with scripted replies and a hand-held
// clock. The library's reader threads and the simulator's readers drive this same class.

#include "client/reader_core.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rsc::client {
namespace {

using Kind = ReaderAction::Kind;
using Cmd = ReaderCommandKind;

class FakeContext : public ReaderContext {
 public:
  int64_t budget_ms = 5000;
  bool may_process = true;
  TimeMs now = 1'000'000;
  std::vector<ConsumerEvent> events;
  std::vector<std::string> gave_up;

  bool pipelined = false;

  int64_t ReadBudgetMs(int32_t /*shard*/) override { return budget_ms; }
  bool PipelinedLive() override { return pipelined; }
  bool MayProcess(int32_t /*shard*/) override { return may_process; }
  TimeMs NowMs() override { return now; }
  void OnHandlerGaveUp(int32_t /*shard*/, const std::string& error) override {
    gave_up.push_back(error);
  }
  void Observe(ConsumerEvent event) override { events.push_back(std::move(event)); }
  void OnSealed(int32_t shard) override { sealed.push_back(shard); }
  std::vector<int32_t> sealed;

  std::vector<std::string> Of(ConsumerEventKind kind) const {
    std::vector<std::string> out;
    for (const ConsumerEvent& e : events) {
      if (e.kind == kind) out.push_back(e.id.empty() ? e.detail : e.id);
    }
    return out;
  }
};

ReaderCoreConfig Config() {
  ReaderCoreConfig c;
  c.shard = 3;
  c.stream = "{P:3}";
  c.group = "G";
  c.consumer_name = "me";
  c.max_batch = 10;
  c.block_ms = 1000;
  c.retry_initial_ms = 50;
  c.retry_max_ms = 400;
  c.observe = true;
  return c;
}

ReaderReply Ok() { return ReaderReply{}; }

ReaderReply Entries(std::vector<std::string> ids) {
  ReaderReply r;
  for (std::string& id : ids) {
    ReaderEntry e;
    e.id = std::move(id);
    e.fields = {{"k", "v"}};
    r.entries.push_back(std::move(e));
  }
  return r;
}

ReaderReply Claimed(std::string cursor, int64_t n) {
  ReaderReply r;
  r.cursor = std::move(cursor);
  r.count = n;
  return r;
}

ReaderReply Lowest(std::optional<std::string> owner) {
  ReaderReply r;
  r.lowest_owner = std::move(owner);
  return r;
}

ReaderReply Acked(int64_t n) {
  ReaderReply r;
  r.count = n;
  return r;
}

class ReaderCoreTest : public ::testing::Test {
 protected:
  explicit ReaderCoreTest(ReaderCoreConfig config = Config(), bool has_predecessor = false)
      : core_(std::move(config), &ctx_, &stats_, has_predecessor) {}

  ReaderAction Next() { return core_.Next(); }

  // Expects the next action to be `kind` (a command) and returns it.
  ReaderCommand ExpectCommand(Cmd kind) {
    const ReaderAction a = core_.Next();
    EXPECT_EQ(a.kind, Kind::kCommand);
    EXPECT_EQ(a.command.kind, kind) << "got " << ReaderCommandName(a.command.kind);
    return a.command;
  }

  Message ExpectDeliver(const std::string& id) {
    const ReaderAction a = core_.Next();
    EXPECT_EQ(a.kind, Kind::kDeliver);
    EXPECT_EQ(a.message.id, id);
    return a.message;
  }

  // Setup, takeover (nothing to claim) and an empty pending list: the reader is live.
  void ToLive() {
    ExpectCommand(Cmd::kCreateGroup);
    core_.OnReply(Ok());
    ExpectCommand(Cmd::kAutoClaim);
    core_.OnReply(Claimed("0-0", 0));
    ExpectCommand(Cmd::kReadPending);
    core_.OnReply(Entries({}));
  }

  // A live read brings `ids`; the late-read check finds nothing foreign.
  void LiveBatch(std::vector<std::string> ids) {
    ExpectCommand(Cmd::kReadLive);
    core_.OnReply(Entries(std::move(ids)));
    ExpectCommand(Cmd::kCheckForeign);
    core_.OnReply(Lowest("me"));
  }

  FakeContext ctx_;
  DeliveryStats stats_;
  ReaderCore core_;
};

TEST_F(ReaderCoreTest, TakesOverEverythingPendingBeforeReadingAnythingNew) {
  ExpectCommand(Cmd::kCreateGroup);
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kAcquire).size(), 1U) << "acquired before the first command";
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kError, "BUSYGROUP exists"));
  ReaderCommand c = ExpectCommand(Cmd::kAutoClaim);
  EXPECT_EQ(c.cursor, "0-0");
  core_.OnReply(Claimed("17-3", 10));
  c = ExpectCommand(Cmd::kAutoClaim);
  EXPECT_EQ(c.cursor, "17-3") << "every page until the cursor is 0-0";
  core_.OnReply(Claimed("0-0", 2));
  EXPECT_EQ(stats_.claimed.load(), 12);
  c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "0") << "our pending list (the claimed entries) from the start";
  core_.OnReply(Entries({"1-0", "2-0"}));
  ExpectDeliver("1-0");
  core_.OnHandled(HandlerResult::Ok());
  ExpectDeliver("2-0");
  core_.OnHandled(HandlerResult::Ok());
  c = ExpectCommand(Cmd::kAck);
  EXPECT_EQ(c.ids, (std::vector<std::string>{"1-0", "2-0"}));
  core_.OnReply(Acked(2));
  c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "2-0") << "the pending list goes on after the last entry read";
  core_.OnReply(Entries({}));
  ExpectCommand(Cmd::kReadLive);
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kRead),
            (std::vector<std::string>{"XAUTOCLAIM", "XAUTOCLAIM", "XREADGROUP", "XREADGROUP",
                                      "XREADGROUP"}));
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kAck), (std::vector<std::string>{"1-0", "2-0"}));
}

TEST_F(ReaderCoreTest, NeitherClaimsNorReadsWithoutLeaseBudget) {
  ctx_.budget_ms = 0;
  ReaderAction a = Next();
  ASSERT_EQ(a.kind, Kind::kSleep);
  EXPECT_EQ(a.sleep_ms, ReaderCore::kLeaseWaitMs);
  EXPECT_EQ(Next().kind, Kind::kIdle) << "asleep until OnWake";
  core_.OnWake();
  EXPECT_EQ(Next().kind, Kind::kSleep) << "still no budget";
  ctx_.budget_ms = 5000;
  core_.OnWake();
  ToLive();
  ctx_.budget_ms = 0;
  core_.OnReply(Entries({}));  // ignored: nothing in flight
  EXPECT_EQ(Next().kind, Kind::kSleep) << "a live read needs the budget too";
}

TEST_F(ReaderCoreTest, LiveReadNeverBlocksPastTheLease) {
  ToLive();
  ctx_.budget_ms = 250;
  ReaderCommand c = ExpectCommand(Cmd::kReadLive);
  EXPECT_EQ(c.block_ms, 250);
  core_.OnReply(ReaderReply{.kind = ReaderReply::Kind::kNil});
  ctx_.budget_ms = 1;
  c = ExpectCommand(Cmd::kReadLive);
  EXPECT_EQ(c.block_ms, 1) << "BLOCK 0 would block forever";
  core_.OnReply(ReaderReply{.kind = ReaderReply::Kind::kNil});
  ctx_.budget_ms = 60'000;
  c = ExpectCommand(Cmd::kReadLive);
  EXPECT_EQ(c.block_ms, 1000) << "the configured block when the lease allows more";
}

TEST_F(ReaderCoreTest, NewEntriesWaitForTheLateReadCheck) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(Entries({"5-0", "6-0"}));
  ExpectCommand(Cmd::kCheckForeign);
  // A previous owner's read reached Redis after our takeover: its entries sit under its
  // name. Nothing of the batch is handled; the reader takes over again, then reads its
  // pending list (the batch included) from the start.
  core_.OnReply(Lowest("previous-owner"));
  EXPECT_EQ(stats_.foreign_claims.load(), 1);
  ExpectCommand(Cmd::kCreateGroup);
  core_.OnReply(Ok());
  ExpectCommand(Cmd::kAutoClaim);
  core_.OnReply(Claimed("0-0", 1));
  ReaderCommand c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "0");
  core_.OnReply(Entries({"4-0", "5-0", "6-0"}));
  ExpectDeliver("4-0");
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kDeliver) == std::vector<std::string>{"4-0"})
      << "the reclaimed entry first";
}

// An earlier reader of this process (the same consumer name) was abandoned with its blocked
// read cut at the socket; Redis served that read an entry before the close reached it, after
// this reader's takeover. The entry is pending under our own name, below the batch: it is
// read again from the pending list first, not skipped (S4 per-key order).
TEST_F(ReaderCoreTest, OurOwnEntryBelowTheBatchIsALateReadToo) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(Entries({"100-0", "101-0"}));
  ExpectCommand(Cmd::kCheckForeign);
  ReaderReply own = Lowest("me");
  own.lowest_id = "99-0";  // below as numbers (not as text)
  core_.OnReply(own);
  EXPECT_EQ(stats_.foreign_claims.load(), 1);
  ExpectCommand(Cmd::kCreateGroup);
}

TEST_F(ReaderCoreTest, OurOwnEntryAtTheBatchIsTheBatch) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(Entries({"10-0", "11-0"}));
  ExpectCommand(Cmd::kCheckForeign);
  ReaderReply own = Lowest("me");
  own.lowest_id = "10-0";
  core_.OnReply(own);
  EXPECT_EQ(stats_.foreign_claims.load(), 0);
  ExpectDeliver("10-0");
}

TEST_F(ReaderCoreTest, AnIdleCheckFindingOurOwnEntryReadsItAgain) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  ctx_.now += ReaderCore::kIdleForeignCheckMs;
  core_.OnReply(ReaderReply{.kind = ReaderReply::Kind::kNil});
  ExpectCommand(Cmd::kCheckForeign);
  ReaderReply own = Lowest("me");
  own.lowest_id = "100-0";  // nothing of ours is pending between batches
  core_.OnReply(own);
  EXPECT_EQ(stats_.foreign_claims.load(), 1);
  ExpectCommand(Cmd::kCreateGroup);
}

TEST_F(ReaderCoreTest, AnIdleShardChecksForLateReadsNowAndThen) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(ReaderReply{.kind = ReaderReply::Kind::kNil});
  ExpectCommand(Cmd::kReadLive);  // not yet
  ctx_.now += ReaderCore::kIdleForeignCheckMs;
  core_.OnReply(ReaderReply{.kind = ReaderReply::Kind::kNil});
  ExpectCommand(Cmd::kCheckForeign);
  core_.OnReply(Lowest(std::nullopt));
  ExpectCommand(Cmd::kReadLive);
}

TEST_F(ReaderCoreTest, LeaseEndMidBatchStopsWithoutAckAndRereadsPendingFirst) {
  ToLive();
  LiveBatch({"1-0", "2-0", "3-0"});
  ExpectDeliver("1-0");
  core_.OnHandled(HandlerResult::Ok());
  ctx_.may_process = false;  // C4: the lease ended during the call
  ctx_.budget_ms = 0;
  EXPECT_EQ(Next().kind, Kind::kSleep) << "no delivery, no XACK";
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kAck).empty());
  ctx_.may_process = true;
  ctx_.budget_ms = 5000;
  core_.OnWake();
  ReaderCommand c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "0") << "what was read and not XACKed is read again first";
}

TEST_F(ReaderCoreTest, AbandonStopsAtOnceWithoutAck) {
  ToLive();
  LiveBatch({"1-0", "2-0"});
  ExpectDeliver("1-0");
  core_.Abandon("fenced");
  EXPECT_EQ(Next().kind, Kind::kIdle) << "the handler call in flight is waited for";
  core_.OnHandled(HandlerResult::Ok());
  const ReaderAction a = Next();
  ASSERT_EQ(a.kind, Kind::kFinished);
  EXPECT_FALSE(a.drained);
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kAck).empty());
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kRelease), (std::vector<std::string>{"fenced"}));
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kDeliver), (std::vector<std::string>{"1-0"}));
}

TEST_F(ReaderCoreTest, AbandonWithAReadInFlightUsesNothingItBrings) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.Abandon("abandoned");
  EXPECT_EQ(Next().kind, Kind::kIdle);
  core_.OnReply(Entries({"1-0"}));
  const ReaderAction a = Next();
  ASSERT_EQ(a.kind, Kind::kFinished);
  EXPECT_FALSE(a.drained);
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kDeliver).empty());
}

TEST_F(ReaderCoreTest, DrainFinishesAndAcksTheBatchInHandThenReadsNothingMore) {
  ToLive();
  LiveBatch({"1-0", "2-0"});
  ExpectDeliver("1-0");
  core_.Drain();
  core_.OnHandled(HandlerResult::Ok());
  ExpectDeliver("2-0");
  core_.OnHandled(HandlerResult::Ok());
  ExpectCommand(Cmd::kAck);
  core_.OnReply(Acked(2));
  const ReaderAction a = Next();
  ASSERT_EQ(a.kind, Kind::kFinished);
  EXPECT_TRUE(a.drained);
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kRelease), (std::vector<std::string>{"drained"}));
  EXPECT_EQ(stats_.acked.load(), 2);
}

TEST_F(ReaderCoreTest, DrainCutsABackoffShort) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "connection reset"));
  EXPECT_EQ(Next().kind, Kind::kSleep);
  core_.Drain();
  core_.OnWake();
  EXPECT_EQ(Next().kind, Kind::kFinished);
}

TEST_F(ReaderCoreTest, FailuresBackOffExponentiallyButNogroupRecreatesAtOnce) {
  ToLive();
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kError, "NOGROUP no such key"));
  ExpectCommand(Cmd::kCreateGroup);  // no sleep
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "timeout"));
  ReaderAction a = Next();
  ASSERT_EQ(a.kind, Kind::kSleep);
  EXPECT_EQ(a.sleep_ms, 100);
  core_.OnWake();
  ExpectCommand(Cmd::kCreateGroup);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "timeout"));
  a = Next();
  ASSERT_EQ(a.kind, Kind::kSleep);
  EXPECT_EQ(a.sleep_ms, 200);
  EXPECT_NE(stats_.redis_error().find("timeout"), std::string::npos);
}

TEST_F(ReaderCoreTest, AFailedAckLeavesTheEntriesPendingForARead) {
  ToLive();
  LiveBatch({"1-0"});
  ExpectDeliver("1-0");
  core_.OnHandled(HandlerResult::Ok());
  ExpectCommand(Cmd::kAck);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "reset"));
  ReaderCommand c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "0");
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kAck).empty());
}

TEST_F(ReaderCoreTest, ATrimmedPendingEntryIsSettledWithoutADelivery) {
  ExpectCommand(Cmd::kCreateGroup);
  core_.OnReply(Ok());
  ExpectCommand(Cmd::kAutoClaim);
  core_.OnReply(Claimed("0-0", 1));
  ExpectCommand(Cmd::kReadPending);
  ReaderReply r = Entries({"1-0", "2-0"});
  r.entries[0].deleted = true;
  core_.OnReply(r);
  ExpectDeliver("2-0");
  core_.OnHandled(HandlerResult::Ok());
  ReaderCommand c = ExpectCommand(Cmd::kAck);
  EXPECT_EQ(c.ids, (std::vector<std::string>{"1-0", "2-0"}));
}

TEST_F(ReaderCoreTest, WithoutXautoclaimThePendingListIsClaimedPageByPage) {
  ExpectCommand(Cmd::kCreateGroup);
  core_.OnReply(Ok());
  ExpectCommand(Cmd::kAutoClaim);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kError, "ERR unknown command 'XAUTOCLAIM'"));
  ReaderCommand c = ExpectCommand(Cmd::kPendingPage);
  EXPECT_EQ(c.cursor, "-");
  ReaderReply page;
  page.ids = {"1-0", "7-18446744073709551615"};
  core_.OnReply(page);
  c = ExpectCommand(Cmd::kClaim);
  EXPECT_EQ(c.ids, page.ids);
  core_.OnReply(Acked(2));
  c = ExpectCommand(Cmd::kPendingPage);
  EXPECT_EQ(c.cursor, "8-0") << "the smallest id after the page";
  core_.OnReply(ReaderReply{});
  ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(stats_.claimed.load(), 2);
  EXPECT_TRUE(stats_.redis_error().empty()) << stats_.redis_error();
}

constexpr const char* kSeal = "18446744073709551615-18446744073709551615";

// RS2/RS3: the seal entry ends a sealed shard. It is never handed to the handler, it is
// XACKed with the entries before it, and only once that XACK is confirmed is the shard
// reported complete.
TEST_F(ReaderCoreTest, TheSealIsAckedNeverDeliveredAndCompletesTheShardOnceAcked) {
  ToLive();
  LiveBatch({"5-0", kSeal});
  ExpectDeliver("5-0");
  core_.OnHandled(HandlerResult::Ok());
  ReaderCommand c = ExpectCommand(Cmd::kAck);
  EXPECT_EQ(c.ids, (std::vector<std::string>{"5-0", kSeal}));
  EXPECT_TRUE(ctx_.sealed.empty()) << "complete only after the XACK is confirmed";
  core_.OnReply(Acked(2));
  EXPECT_EQ(ctx_.sealed, (std::vector<int32_t>{3}));
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kDeliver), (std::vector<std::string>{"5-0"}));
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kAck), (std::vector<std::string>{"5-0"}))
      << "the seal is no message of the application's";
  EXPECT_EQ(stats_.acked.load(), 1);
  // Reading goes on (nothing can follow the seal) until the coordinator unassigns it.
  ExpectCommand(Cmd::kReadLive);
}

TEST_F(ReaderCoreTest, ASealWhoseAckFailsIsNotReportedAndIsReadAgain) {
  ToLive();
  LiveBatch({kSeal});
  ReaderCommand c = ExpectCommand(Cmd::kAck);
  EXPECT_EQ(c.ids, (std::vector<std::string>{kSeal}));
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "reset"));
  EXPECT_TRUE(ctx_.sealed.empty());
  c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "0");
  core_.OnReply(Entries({kSeal}));
  c = ExpectCommand(Cmd::kAck);
  core_.OnReply(Acked(1));
  EXPECT_EQ(ctx_.sealed, (std::vector<int32_t>{3}));
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kDeliver).empty());
}

TEST_F(ReaderCoreTest, ALeaseEndBeforeTheSealsAckReportsNothing) {
  ToLive();
  LiveBatch({"5-0", kSeal});
  ExpectDeliver("5-0");
  ctx_.may_process = false;
  core_.OnHandled(HandlerResult::Ok());
  ctx_.budget_ms = 0;
  const ReaderAction a = Next();
  EXPECT_NE(a.kind, Kind::kCommand) << "no XACK after the lease ended";
  EXPECT_TRUE(ctx_.sealed.empty());
}

// The maximum ID is terminal: the page walk of servers without XAUTOCLAIM must end at a
// pending seal, not wrap around to 0-0 and claim the same page forever.
TEST_F(ReaderCoreTest, ThePendingPageWalkEndsAtASeal) {
  ExpectCommand(Cmd::kCreateGroup);
  core_.OnReply(Ok());
  ExpectCommand(Cmd::kAutoClaim);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kError, "ERR unknown command 'XAUTOCLAIM'"));
  ExpectCommand(Cmd::kPendingPage);
  ReaderReply page;
  page.ids = {"9-0", kSeal};
  core_.OnReply(page);
  ReaderCommand c = ExpectCommand(Cmd::kClaim);
  EXPECT_EQ(c.ids, page.ids);
  core_.OnReply(Acked(2));
  c = ExpectCommand(Cmd::kReadPending);
  EXPECT_EQ(c.cursor, "0");
  core_.OnReply(Entries({"9-0", kSeal}));
  ExpectDeliver("9-0");
  core_.OnHandled(HandlerResult::Ok());
  c = ExpectCommand(Cmd::kAck);
  core_.OnReply(Acked(2));
  EXPECT_EQ(ctx_.sealed, (std::vector<int32_t>{3}));
}

// PipelinedLive (one server): while live reads bring full batches, the batch's XACK rides in
// front of the next read and the late-read check behind it — one round trip per batch.
class PipelinedReader : public ReaderCoreTest {
 protected:
  PipelinedReader() : ReaderCoreTest(Small()) { ctx_.pipelined = true; }
  static ReaderCoreConfig Small() {
    ReaderCoreConfig c = Config();
    c.max_batch = 2;
    return c;
  }
  // Handles `ids` in order.
  void HandleAll(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      ExpectDeliver(id);
      core_.OnHandled(HandlerResult::Ok());
    }
  }
  static ReaderReply CheckedEntries(std::vector<std::string> ids, std::string owner,
                                    int64_t acked = 0) {
    ReaderReply r = Entries(std::move(ids));
    r.checked = true;
    r.lowest_owner = std::move(owner);
    r.count = acked;
    return r;
  }
};

TEST_F(PipelinedReader, AFullBatchSendsItsAckWithTheNextReadAndThatReadsCheckBehindIt) {
  ToLive();
  ReaderCommand c = ExpectCommand(Cmd::kReadLive);
  EXPECT_FALSE(c.check_foreign) << "not after an empty or partial read: idle shards stay cheap";
  EXPECT_TRUE(c.ids.empty());
  core_.OnReply(Entries({"5-0", "6-0"}));  // full: a backlog
  ExpectCommand(Cmd::kCheckForeign);
  core_.OnReply(Lowest("me"));
  HandleAll({"5-0", "6-0"});
  c = ExpectCommand(Cmd::kReadLive);
  EXPECT_EQ(c.ids, (std::vector<std::string>{"5-0", "6-0"}));
  EXPECT_TRUE(c.check_foreign);
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kAck).empty()) << "not confirmed yet";
  core_.OnReply(CheckedEntries({"7-0", "8-0"}, "me", 2));
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kAck), (std::vector<std::string>{"5-0", "6-0"}));
  EXPECT_EQ(stats_.acked.load(), 2);
  HandleAll({"7-0", "8-0"});  // no separate check: it came with the read
  c = ExpectCommand(Cmd::kReadLive);
  EXPECT_EQ(c.ids, (std::vector<std::string>{"7-0", "8-0"}));
  // A partial batch ends the backlog: its XACK goes alone, and so does the next read.
  core_.OnReply(CheckedEntries({"9-0"}, "me", 2));
  HandleAll({"9-0"});
  c = ExpectCommand(Cmd::kAck);
  core_.OnReply(Acked(1));
  c = ExpectCommand(Cmd::kReadLive);
  EXPECT_TRUE(c.ids.empty());
  EXPECT_FALSE(c.check_foreign);
}

TEST_F(PipelinedReader, ACheckBehindTheReadThatFindsALateReadTakesOverAgain) {
  ToLive();
  LiveBatch({"5-0", "6-0"});
  HandleAll({"5-0", "6-0"});
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(CheckedEntries({"8-0", "9-0"}, "previous-owner", 2));
  EXPECT_EQ(stats_.foreign_claims.load(), 1);
  ExpectCommand(Cmd::kCreateGroup);  // nothing of 8-0, 9-0 handled before the takeover
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kDeliver), (std::vector<std::string>{"5-0", "6-0"}));
}

TEST_F(PipelinedReader, AFailedPipelineLeavesTheBatchPendingAndReadsItAgain) {
  ToLive();
  LiveBatch({"5-0", "6-0"});
  HandleAll({"5-0", "6-0"});
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "reset"));
  EXPECT_TRUE(ctx_.Of(ConsumerEventKind::kAck).empty());
  EXPECT_EQ(stats_.acked.load(), 0);
  const ReaderAction a = Next();
  EXPECT_EQ(a.kind, Kind::kSleep);  // the backoff, then the setup and the pending list
  core_.OnWake();
  ExpectCommand(Cmd::kCreateGroup);
}

TEST_F(PipelinedReader, NoAckRidesAReadWithoutBudgetOrWhenDraining) {
  ToLive();
  LiveBatch({"5-0", "6-0"});
  HandleAll({"5-0"});
  ctx_.budget_ms = 0;  // the lease still allows the XACK, not a read
  ExpectDeliver("6-0");
  core_.OnHandled(HandlerResult::Ok());
  ReaderCommand c = ExpectCommand(Cmd::kAck);
  core_.OnReply(Acked(2));
  ctx_.budget_ms = 5000;
  ExpectCommand(Cmd::kReadLive);
  core_.OnReply(Entries({"7-0", "8-0"}));
  ExpectCommand(Cmd::kCheckForeign);
  core_.OnReply(Lowest("me"));
  HandleAll({"7-0"});
  core_.Drain();
  ExpectDeliver("8-0");
  core_.OnHandled(HandlerResult::Ok());
  c = ExpectCommand(Cmd::kAck);  // a drain's last XACK goes alone, then it finishes
  core_.OnReply(Acked(2));
  EXPECT_EQ(Next().kind, Kind::kFinished);
}

TEST_F(PipelinedReader, WithoutThePortsConsentEverythingGoesAlone) {
  ctx_.pipelined = false;  // a cluster
  ToLive();
  LiveBatch({"5-0", "6-0"});
  HandleAll({"5-0", "6-0"});
  ReaderCommand c = ExpectCommand(Cmd::kAck);
  core_.OnReply(Acked(2));
  c = ExpectCommand(Cmd::kReadLive);
  EXPECT_FALSE(c.check_foreign);
}

class ReaderPolicyTest : public ReaderCoreTest {
 protected:
  static ReaderCoreConfig With(HandlerErrorPolicy policy, int max_attempts) {
    ReaderCoreConfig c = Config();
    c.policy = policy;
    c.max_attempts = max_attempts;
    c.dead_letter_stream = "{P:3}:dlq";
    return c;
  }
};

class RetryPolicy : public ReaderPolicyTest {
 protected:
  RetryPolicy() : ReaderPolicyTest() {}
};

TEST_F(RetryPolicy, RetriesInPlaceWithBackoffUntilTheHandlerSucceeds) {
  ToLive();
  LiveBatch({"1-0", "2-0"});
  std::vector<TimeMs> sleeps;
  for (int i = 0; i < 5; ++i) {
    const Message m = ExpectDeliver("1-0");
    EXPECT_EQ(m.attempt, i + 1);
    core_.OnHandled(HandlerResult::Fail("boom"));
    const ReaderAction a = Next();
    ASSERT_EQ(a.kind, Kind::kSleep);
    sleeps.push_back(a.sleep_ms);
    core_.OnWake();
  }
  EXPECT_EQ(sleeps, (std::vector<TimeMs>{50, 100, 200, 400, 400}));
  ExpectDeliver("1-0");
  core_.OnHandled(HandlerResult::Ok());
  EXPECT_EQ(ExpectDeliver("2-0").attempt, 1);
  EXPECT_EQ(stats_.handler_failures.load(), 5);
}

TEST_F(RetryPolicy, ADrainCutsRetriesShortAndAcksOnlyWhatWasDone) {
  ToLive();
  LiveBatch({"1-0", "2-0"});
  ExpectDeliver("1-0");
  core_.OnHandled(HandlerResult::Ok());
  ExpectDeliver("2-0");
  core_.OnHandled(HandlerResult::Fail("boom"));
  EXPECT_EQ(Next().kind, Kind::kSleep);
  core_.Drain();
  core_.OnWake();
  ReaderCommand c = ExpectCommand(Cmd::kAck);
  EXPECT_EQ(c.ids, (std::vector<std::string>{"1-0"}));
  core_.OnReply(Acked(1));
  EXPECT_EQ(Next().kind, Kind::kFinished);
}

class DeadLetterPolicy : public ReaderPolicyTest {};

TEST_F(DeadLetterPolicy, MovesAMessageAsideAfterMaxAttemptsAndGoesOn) {
  ReaderCore core(With(HandlerErrorPolicy::kDeadLetter, 2), &ctx_, &stats_, false);
  auto expect = [&](Kind kind) {
    const ReaderAction a = core.Next();
    EXPECT_EQ(a.kind, kind);
    return a;
  };
  expect(Kind::kCommand);  // XGROUP CREATE
  core.OnReply(Ok());
  expect(Kind::kCommand);  // XAUTOCLAIM
  core.OnReply(Claimed("0-0", 0));
  expect(Kind::kCommand);  // pending
  core.OnReply(Entries({"1-0", "2-0"}));
  expect(Kind::kDeliver);
  core.OnHandled(HandlerResult::Fail("poison"));
  expect(Kind::kSleep);
  core.OnWake();
  EXPECT_EQ(expect(Kind::kDeliver).message.attempt, 2);
  core.OnHandled(HandlerResult::Fail("poison"));
  ReaderAction a = expect(Kind::kCommand);
  ASSERT_EQ(a.command.kind, Cmd::kDeadLetter);
  EXPECT_EQ(a.command.entry->id, "1-0");
  EXPECT_EQ(a.command.error, "poison");
  EXPECT_EQ(a.command.attempts, 2);
  core.OnReply(ReaderReply::Error(ReaderReply::Kind::kTransport, "reset"));
  expect(Kind::kSleep);  // the dead letter must exist before the entry is settled
  core.OnWake();
  a = expect(Kind::kCommand);
  ASSERT_EQ(a.command.kind, Cmd::kDeadLetter);
  core.OnReply(Ok());
  EXPECT_EQ(stats_.dead_lettered.load(), 1);
  EXPECT_EQ(expect(Kind::kDeliver).message.id, "2-0");
  core.OnHandled(HandlerResult::Ok());
  a = expect(Kind::kCommand);
  EXPECT_EQ(a.command.kind, Cmd::kAck);
  EXPECT_EQ(a.command.ids, (std::vector<std::string>{"2-0"})) << "1-0 was settled by the script";
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kAck), (std::vector<std::string>{"1-0"}));
}

class StopPolicy : public ReaderPolicyTest {};

TEST_F(StopPolicy, GivesUpAcksWhatWasDoneAndWaitsForTheDrain) {
  ReaderCore core(With(HandlerErrorPolicy::kStop, 1), &ctx_, &stats_, false);
  core.Next();
  core.OnReply(Ok());
  core.Next();
  core.OnReply(Claimed("0-0", 0));
  core.Next();
  core.OnReply(Entries({"1-0", "2-0", "3-0"}));
  EXPECT_EQ(core.Next().kind, Kind::kDeliver);
  core.OnHandled(HandlerResult::Ok());
  EXPECT_EQ(core.Next().kind, Kind::kDeliver);
  core.OnHandled(HandlerResult::Fail("fatal"));
  ASSERT_EQ(ctx_.gave_up.size(), 1U);
  EXPECT_NE(ctx_.gave_up[0].find("fatal"), std::string::npos);
  ReaderAction a = core.Next();
  ASSERT_EQ(a.kind, Kind::kCommand);
  EXPECT_EQ(a.command.ids, (std::vector<std::string>{"1-0"}));
  core.OnReply(Acked(1));
  EXPECT_EQ(core.Next().kind, Kind::kIdle) << "reads nothing more";
  EXPECT_EQ(core.Next().kind, Kind::kIdle);
  core.Drain();
  a = core.Next();
  ASSERT_EQ(a.kind, Kind::kFinished);
  EXPECT_TRUE(a.drained);
}

class ReaderWithPredecessor : public ReaderCoreTest {
 protected:
  ReaderWithPredecessor() : ReaderCoreTest(Config(), true) {}
};

TEST_F(ReaderWithPredecessor, ReadsNothingUntilThePreviousReaderFinished) {
  EXPECT_EQ(Next().kind, Kind::kIdle);
  EXPECT_TRUE(ctx_.events.empty()) << "not acquired yet";
  core_.OnPredecessorFinished();
  ExpectCommand(Cmd::kCreateGroup);
  EXPECT_EQ(ctx_.Of(ConsumerEventKind::kAcquire).size(), 1U);
}

TEST_F(ReaderWithPredecessor, ADrainWhileWaitingEndsItWithoutAnAcquire) {
  EXPECT_EQ(Next().kind, Kind::kIdle);
  core_.Drain();
  const ReaderAction a = Next();
  ASSERT_EQ(a.kind, Kind::kFinished);
  EXPECT_TRUE(a.drained);
  EXPECT_TRUE(ctx_.events.empty()) << "neither acquire nor release";
}

}  // namespace
}  // namespace rsc::client
