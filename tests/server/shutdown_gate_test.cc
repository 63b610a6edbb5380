// ShutdownGate tests (SPEC S1). No sleeps: threads are sequenced with latches and the
// gate's own condition variable; time only enters as an explicit deadline.

#include "server/shutdown_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <thread>
#include <vector>

namespace rsc {
namespace {

using Clock = std::chrono::steady_clock;

TEST(ShutdownGate, OpenGateGrantsGuardsAndCountsThem) {
  ShutdownGate gate;
  EXPECT_FALSE(gate.terminating());
  {
    auto a = gate.Enter();
    auto b = gate.Enter();
    ASSERT_TRUE(a && b);
    EXPECT_EQ(gate.in_flight(), 2);
  }
  EXPECT_EQ(gate.in_flight(), 0);
}

TEST(ShutdownGate, TerminatingRefusesNewGuards) {
  ShutdownGate gate;
  gate.BeginTerminate();
  gate.BeginTerminate();  // idempotent
  EXPECT_TRUE(gate.terminating());
  EXPECT_FALSE(gate.Enter().has_value());
  EXPECT_EQ(gate.in_flight(), 0);
}

TEST(ShutdownGate, InFlightGuardSurvivesTerminate) {
  ShutdownGate gate;
  auto g = gate.Enter();
  ASSERT_TRUE(g);
  gate.BeginTerminate();
  EXPECT_EQ(gate.in_flight(), 1);
  // A deadline in the past: reports busy without blocking.
  EXPECT_FALSE(gate.WaitIdle(Clock::now() - std::chrono::seconds(1)));
  g.reset();
  EXPECT_TRUE(gate.WaitIdle(Clock::now() - std::chrono::seconds(1)));
}

TEST(ShutdownGate, GuardMoveReleasesOnce) {
  ShutdownGate gate;
  std::optional<ShutdownGate::Guard> a = gate.Enter();
  ShutdownGate::Guard b = std::move(*a);
  a.reset();  // moved-from guard releases nothing
  EXPECT_EQ(gate.in_flight(), 1);
  std::optional<ShutdownGate::Guard> c = gate.Enter();
  EXPECT_EQ(gate.in_flight(), 2);
  b = std::move(*c);  // b's old hold is released, c's is taken over
  EXPECT_EQ(gate.in_flight(), 1);
  c.reset();
  EXPECT_EQ(gate.in_flight(), 1);
}

TEST(ShutdownGate, WaitIdleWakesWhenLastGuardEnds) {
  ShutdownGate gate;
  std::latch entered(1);
  std::promise<void> release;
  std::thread worker([&] {
    auto g = gate.Enter();
    entered.count_down();
    release.get_future().wait();
  });
  entered.wait();
  gate.BeginTerminate();
  auto waiter = std::async(std::launch::async,
                           [&] { return gate.WaitIdle(Clock::now() + std::chrono::hours(1)); });
  // The waiter is inside WaitIdle, and cannot finish while the worker holds its guard.
  while (gate.idle_waiters() == 0) std::this_thread::yield();
  EXPECT_EQ(gate.in_flight(), 1);
  EXPECT_EQ(waiter.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "WaitIdle returned while a guard was alive";
  EXPECT_EQ(gate.idle_waiters(), 1);
  release.set_value();
  EXPECT_TRUE(waiter.get());
  worker.join();
  EXPECT_EQ(gate.in_flight(), 0);
  EXPECT_EQ(gate.idle_waiters(), 0);
}

TEST(ShutdownGate, ConcurrentEnterAndTerminateNeverLeaks) {
  ShutdownGate gate;
  constexpr int kThreads = 8;
  std::latch start(kThreads + 1);
  std::atomic<int> granted_after_terminate{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int k = 0; k < 2000; ++k) {
        bool was_terminating = gate.terminating();
        auto g = gate.Enter();
        // Once terminating has been observed, no guard may be granted.
        if (was_terminating && g) granted_after_terminate.fetch_add(1);
      }
    });
  }
  start.arrive_and_wait();
  gate.BeginTerminate();
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted_after_terminate.load(), 0);
  EXPECT_FALSE(gate.Enter().has_value());
  EXPECT_EQ(gate.in_flight(), 0);
  EXPECT_TRUE(gate.WaitIdle(Clock::now()));
}

}  // namespace
}  // namespace rsc
