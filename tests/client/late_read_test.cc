// A previous owner's read that reaches Redis after the new owner's takeover (found by the
// real-process chaos run, tests/chaos/chaos_test.cc, seed 3): the old reader's XREADGROUP
// ... > was delayed in the network, or sent by a process paused between its lease check
// and the send, or answered from state a failover rolled back. Redis hands the next new
// entry to the OLD consumer name; that reader is gone (or abandons the batch), so the entry
// stays in the old name's pending list. Before the fix the new owner claimed pending entries
// only when its reader started, so the entry was never delivered (S3) and later entries of
// the same key were delivered past it (S4).
//
// The late read is reproduced deterministically with a second Redis client reading as
// another consumer name of the group while the real consumer is inside a handler call:
//   1. the consumer handles entry 0 (its handler waits on a gate);
//   2. entries 1 and 2 are appended; the "ghost" consumer reads one new entry: entry 1 is
//      now pending for the ghost;
//   3. the gate opens: the consumer XACKs 0 and reads new entries — entry 2 only.
// The consumer must hand entries 0, 1, 2 to its handler in that order, and leave nothing
// pending. A second case covers the ghost taking the last entry of an otherwise idle shard.
// Run inside scripts/netns.sh.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/live_group.h"
#include "rsc/consumer.h"
#include "support/coordinator_process.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc {
namespace {

using namespace std::chrono_literals;
using rsc::testing::CliReply;
using rsc::testing::FieldValue;
using rsc::testing::WaitFor;

constexpr const char* kStream = "late";
constexpr const char* kGroup = "g";
constexpr const char* kShardStream = "{late:0}";  // one shard: every entry is on it

// The handler: records each message's seq; entry 0 waits until the gate opens.
class GatedHandler {
 public:
  HandlerResult Handle(const Message& m) {
    const int seq = std::stoi(FieldValue(m.fields, "seq"));
    std::unique_lock<std::mutex> lock(mu_);
    seqs_.push_back(seq);
    if (seq == 0) {
      in_gate_ = true;
      cv_.wait_for(lock, 20s, [&] { return open_; });
    }
    return HandlerResult::Ok();
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool in_gate() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_gate_;
  }
  std::vector<int> seqs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seqs_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  bool in_gate_ = false;
  std::vector<int> seqs_;
};

class LateRead : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, kStream, kGroup, 1,
                                             rsc::testing::FastLeases()));
    cli_ = redis_.Cli();
    ASSERT_NE(cli_, nullptr);
    ConsumerOptions o;
    o.coordinator_endpoints = {"127.0.0.1:" + std::to_string(coordinator_->Port())};
    o.stream = kStream;
    o.group = kGroup;
    o.redis_url = redis_.Url();
    o.block = 100ms;
    o.http_timeout = 1000ms;
    ConsumerResult<std::unique_ptr<Consumer>> c =
        Consumer::Create(o, [this](const Message& m) { return handler_.Handle(m); });
    ASSERT_TRUE(c.ok()) << c.error().message;
    consumer_ = std::move(c).value();
    consumer_->Start();
    ASSERT_TRUE(WaitFor([&] { return consumer_->Status().reading.size() == 1; }, 10s,
                        "the consumer reads the shard"));
  }

  void TearDown() override {
    handler_.Open();
    if (consumer_) consumer_->Stop();
  }

  std::string Add(int seq) {
    const CliReply r =
        cli_->Run({"XADD", kShardStream, "*", "key", "k", "seq", std::to_string(seq)});
    EXPECT_EQ(r.type, CliReply::Type::kString) << r.ToString();
    return r.str;
  }

  // XREADGROUP as consumer "ghost" (the late read of a previous owner): the id it got.
  std::string GhostReadsOne() {
    const CliReply r = cli_->Run(
        {"XREADGROUP", "GROUP", kGroup, "ghost", "COUNT", "1", "STREAMS", kShardStream, ">"});
    if (r.type != CliReply::Type::kArray || r.elements.empty() ||
        r.elements[0].elements.size() < 2 || r.elements[0].elements[1].elements.empty()) {
      ADD_FAILURE() << "ghost read: " << r.ToString();
      return "";
    }
    return r.elements[0].elements[1].elements[0].elements[0].str;
  }

  int64_t Pending() {
    const CliReply r = cli_->Run({"XPENDING", kShardStream, kGroup});
    return r.type == CliReply::Type::kArray && !r.elements.empty() ? r.elements[0].integer : -1;
  }

  std::string Seqs() const {
    std::string out;
    for (int s : handler_.seqs()) out += std::to_string(s) + " ";
    return out;
  }

  rsc::testing::RedisProcess redis_;
  std::unique_ptr<rsc::testing::CoordinatorProcess> coordinator_;
  std::unique_ptr<rsc::testing::RedisCli> cli_;
  GatedHandler handler_;
  std::unique_ptr<Consumer> consumer_;
};

TEST_F(LateRead, EntriesALateReadTookAreClaimedBeforeNewerOnesAreHandled) {
  Add(0);
  ASSERT_TRUE(WaitFor([&] { return handler_.in_gate(); }, 10s, "the handler holds entry 0"));
  const std::string id1 = Add(1);
  Add(2);
  ASSERT_EQ(GhostReadsOne(), id1) << "the ghost took entry 1";
  handler_.Open();
  ASSERT_TRUE(WaitFor([&] { return handler_.seqs().size() >= 3; }, 10s,
                      "entries 1 and 2 handled after entry 0"))
      << "handled: " << Seqs() << "; " << consumer_->Status().last_redis_error;
  EXPECT_EQ(handler_.seqs(), (std::vector<int>{0, 1, 2})) << "per-key order";
  EXPECT_TRUE(WaitFor([&] { return Pending() == 0; }, 5s, "nothing left pending"))
      << Pending() << " pending";
  EXPECT_GE(consumer_->Status().late_read_reclaims, 1);
}

TEST_F(LateRead, ALateReadOfTheLastEntryOfAnIdleShardIsClaimedToo) {
  Add(0);
  ASSERT_TRUE(WaitFor([&] { return handler_.in_gate(); }, 10s, "the handler holds entry 0"));
  const std::string id1 = Add(1);
  ASSERT_EQ(GhostReadsOne(), id1) << "the ghost took entry 1";
  handler_.Open();
  // Nothing new arrives: the idle reader's periodic check (every second) finds it.
  ASSERT_TRUE(WaitFor([&] { return handler_.seqs().size() >= 2; }, 5s, "entry 1 handled"))
      << "handled: " << Seqs() << "; " << consumer_->Status().last_redis_error;
  EXPECT_EQ(handler_.seqs(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(WaitFor([&] { return Pending() == 0; }, 5s, "nothing left pending"))
      << Pending() << " pending";
}

}  // namespace
}  // namespace rsc
