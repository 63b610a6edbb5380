// The heartbeat group commit's queue (GroupService::HeartbeatAsync / Heartbeat, issue 14)
// against a real redis-server: a heartbeat queued behind a leader holds no thread and is
// answered, with those queued beside it, in the leader's next batch; a blocking caller
// that led hands the lead to a blocking waiter next in line; a batch that throws is
// answered with errors and leaves the queue usable.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/core_harness.h"
#include "redis/redis_store.h"
#include "redis/redis_url.h"
#include "server/group_service.h"
#include "server/system.h"
#include "support/redis_process.h"

namespace rsc::testing {
namespace {

using std::chrono::seconds;

class ManualClock : public Clock {
 public:
  TimeMs NowMs() override { return now; }
  std::atomic<TimeMs> now{1'900'000'000'000};
};

// Counts steady renewals (one per steady batch) and can hold the thread that made one.
class Gate : public ServiceObserver {
 public:
  void OnSteadyRenewal(const GroupKey&, bool applied) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (applied) ++renewals_;
    if (throw_next_) {
      throw_next_ = false;
      throw std::runtime_error("observer failed");
    }
    if (!hold_) return;
    held_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !hold_; });
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
    held_ = false;
  }
  bool WaitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return held_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  void OnHeartbeatQueued(const GroupKey&, size_t waiting) override {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_ = waiting;
    cv_.notify_all();
  }
  bool WaitQueued(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return waiting_ >= n; });
  }
  void ThrowNext() {
    std::lock_guard<std::mutex> lock(mu_);
    throw_next_ = true;
  }
  int renewals() {
    std::lock_guard<std::mutex> lock(mu_);
    return renewals_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  bool held_ = false;
  bool throw_next_ = false;
  int renewals_ = 0;
  size_t waiting_ = 0;
};

struct Member : FakeMember {
  explicit Member(std::string name) { id = std::move(name); }
};

// What one HeartbeatAsync callback saw.
struct Answer {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  std::thread::id thread;
  std::optional<Result<HeartbeatResponse>> result;

  CoordinatorApi::HeartbeatDone Done() {
    return [this](Result<HeartbeatResponse> r) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      thread = std::this_thread::get_id();
      result = std::move(r);
      cv.notify_all();
    };
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, seconds(10), [&] { return calls > 0; });
  }
};

const GroupKey kKey{"orders", "billing"};

class HeartbeatQueue : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis.Start());
    auto parsed = redis::ParseRedisUrl(redis.Url());
    ASSERT_TRUE(parsed.ok());
    auto s = redis::RedisStore::Open(*parsed, {});
    ASSERT_TRUE(s.ok());
    store = std::move(s).value();
    service =
        std::make_unique<GroupService>(*store, clock, tokens, gate, GroupServiceOptions{}, nullptr);
    ASSERT_TRUE(service->CreateGroup({"orders", "billing", 4, {}}, nullptr).ok());
    // Settle a, b, c, d on one shard each, so every later heartbeat is steady.
    for (int round = 0; round < 20; ++round) {
      bool calm = true;
      for (Member* m : {&a, &b, &c, &d}) {
        auto r = service->Heartbeat(kKey, m->Request());
        ASSERT_TRUE(r.ok()) << r.error().message;
        m->Observe(*r);
        calm = calm && r->status == HeartbeatStatus::kOk && r->revoke_shards.empty() &&
               r->pending_shards.empty();
      }
      if (calm) break;
    }
    for (Member* m : {&a, &b, &c, &d}) ASSERT_EQ(m->owned.size(), 1u) << m->id;
    clock.now += 1000;
  }
  void TearDown() override { gate.Release(); }

  RedisProcess redis;
  ManualClock clock;
  RandomTokens tokens;
  Gate gate;
  std::unique_ptr<redis::RedisStore> store;
  std::unique_ptr<GroupService> service;
  Member a{"a"}, b{"b"}, c{"c"}, d{"d"};
};

TEST_F(HeartbeatQueue, QueuedHeartbeatsHoldNoThreadAndAreAnsweredInTheLeadersNextBatch) {
  gate.Hold();
  const int before = gate.renewals();
  Answer first;
  std::thread::id leader_id;
  std::thread leader([&] {
    leader_id = std::this_thread::get_id();
    service->HeartbeatAsync(kKey, a.Request(), first.Done());
  });
  ASSERT_TRUE(gate.WaitHeld()) << "the leader never reached its renewal";

  // Each call returns at once: the request waits in the queue, not on this thread.
  Answer queued[3];
  Member* members[3] = {&b, &c, &d};
  for (int i = 0; i < 3; ++i)
    service->HeartbeatAsync(kKey, members[i]->Request(), queued[i].Done());
  for (auto& q : queued) {
    std::lock_guard<std::mutex> lock(q.mu);
    EXPECT_EQ(q.calls, 0) << "answered before the leader's batch ended";
  }

  gate.Release();
  leader.join();  // it leads until the queue is empty
  ASSERT_TRUE(first.Wait());
  EXPECT_EQ(first.calls, 1);
  ASSERT_TRUE(first.result->ok()) << first.result->error().message;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(queued[i].Wait()) << members[i]->id << " was never answered";
    EXPECT_EQ(queued[i].calls, 1);
    EXPECT_EQ(queued[i].thread, leader_id) << "answered by the leader";
    ASSERT_TRUE(queued[i].result->ok()) << queued[i].result->error().message;
    EXPECT_EQ((*queued[i].result)->status, HeartbeatStatus::kOk);
    EXPECT_EQ((*queued[i].result)->member_id.str(), members[i]->id);
  }
  EXPECT_EQ(gate.renewals() - before, 2) << "the leader's own batch, then one for the three";
}

TEST_F(HeartbeatQueue, ABlockingLeaderHandsTheLeadToABlockingWaiterNextInLine) {
  gate.Hold();
  const int before = gate.renewals();
  std::thread first([&] { EXPECT_TRUE(service->Heartbeat(kKey, a.Request()).ok()); });
  ASSERT_TRUE(gate.WaitHeld());
  // b blocks in Heartbeat behind the held leader; d queues behind b without a thread.
  std::thread::id second_id;
  std::thread second([&] {
    second_id = std::this_thread::get_id();
    EXPECT_TRUE(service->Heartbeat(kKey, b.Request()).ok());
  });
  ASSERT_TRUE(gate.WaitQueued(1));
  Answer late;
  service->HeartbeatAsync(kKey, d.Request(), late.Done());
  ASSERT_TRUE(gate.WaitQueued(2));

  gate.Release();
  first.join();  // a's caller returns with its answer: it does not lead b's batch
  second.join();
  ASSERT_TRUE(late.Wait());
  ASSERT_TRUE(late.result->ok()) << late.result->error().message;
  EXPECT_EQ(late.thread, second_id) << "b's caller led the batch with b and d";
  EXPECT_EQ(gate.renewals() - before, 2) << "a's batch, then b's and d's";
}

TEST_F(HeartbeatQueue, ABatchThatThrowsIsAnsweredWithErrorsAndTheQueueGoesOn) {
  gate.ThrowNext();
  Answer failed;
  service->HeartbeatAsync(kKey, a.Request(), failed.Done());
  ASSERT_TRUE(failed.Wait());
  ASSERT_FALSE(failed.result->ok());
  EXPECT_EQ(failed.result->error().code, ErrorCode::kInternal);
  // The queue has no leader left behind: the next heartbeat is led and answered.
  auto r = service->Heartbeat(kKey, b.Request());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, HeartbeatStatus::kOk);
}

}  // namespace
}  // namespace rsc::testing
