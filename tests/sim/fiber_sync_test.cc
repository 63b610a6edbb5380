// sim/fiber_sync.h: GroupService's and the producer's blocking waits for the simulator's
// fibers. A wait parks the fiber and the release wakes the next one through an event, so a
// simulated coordinator can run several workers, and a simulated producer its threads,
// without blocking the scheduler thread.

#include "sim/fiber_sync.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace rsc::sim {
namespace {

TEST(FiberSync, AMonitorHeldAcrossAParkIsHandedOverInArrivalOrder) {
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto monitor = sync.NewMutex();
  std::vector<std::string> log;
  std::unique_ptr<Fiber> a, b, c;
  auto body = [&](const char* name, std::unique_ptr<Fiber>& self, TimeMs hold) {
    return [&, name, hold] {
      std::lock_guard<SyncPort::Mutex> lock(*monitor);
      log.push_back(fmt::format("{} in at {}", name, w.now()));
      w.Sleep(*self, hold);  // a Redis call inside the section: the fiber parks
      log.push_back(fmt::format("{} out at {}", name, w.now()));
    };
  };
  a = std::make_unique<Fiber>(body("a", a, 10));
  b = std::make_unique<Fiber>(body("b", b, 5));
  c = std::make_unique<Fiber>(body("c", c, 5));
  w.After(0, [&] { a->Resume(); });
  w.After(1, [&] { c->Resume(); });  // c asks first, b second: c gets it first
  w.After(2, [&] { b->Resume(); });
  w.RunUntil(100);
  ASSERT_TRUE(a->finished() && b->finished() && c->finished());
  EXPECT_EQ(log, (std::vector<std::string>{"a in at 0", "a out at 10", "c in at 10", "c out at 15",
                                           "b in at 15", "b out at 20"}));
}

TEST(FiberSync, TryLockNeverParks) {
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto monitor = sync.NewMutex();
  bool second_got_it = true;
  std::unique_ptr<Fiber> holder, prober;
  holder = std::make_unique<Fiber>([&] {
    std::lock_guard<SyncPort::Mutex> lock(*monitor);
    w.Sleep(*holder, 10);
  });
  prober = std::make_unique<Fiber>([&] {
    second_got_it = monitor->try_lock();
    if (second_got_it) monitor->unlock();
  });
  w.After(0, [&] { holder->Resume(); });
  w.After(1, [&] { prober->Resume(); });
  w.RunUntil(100);
  ASSERT_TRUE(holder->finished() && prober->finished());
  EXPECT_FALSE(second_got_it) << "a tick's try_lock must fail while a request holds the monitor";
}

TEST(FiberSync, AWaiterRunsOnlyAfterTheNotifyAndHoldsTheMutexAgain) {
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto mu = sync.NewMutex();
  auto cv = sync.NewCondVar();
  bool ready = false;
  TimeMs woke_at = -1;
  std::unique_ptr<Fiber> waiter, leader;
  waiter = std::make_unique<Fiber>([&] {
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    while (!ready) cv->Wait(*mu);
    woke_at = w.now();
  });  // the unique_lock unlocks here: FiberMutex::unlock checks the waiter holds it again
  leader = std::make_unique<Fiber>([&] {
    w.Sleep(*leader, 7);  // deciding the batch
    std::lock_guard<SyncPort::Mutex> lock(*mu);
    ready = true;
    cv->NotifyAll();
    EXPECT_EQ(woke_at, -1) << "the notify only schedules the wake-up";
  });
  w.After(0, [&] { waiter->Resume(); });
  w.After(0, [&] { leader->Resume(); });
  w.RunUntil(100);
  ASSERT_TRUE(waiter->finished() && leader->finished());
  EXPECT_EQ(woke_at, 7);
}

TEST(FiberSync, ATimedWaitEndsAtItsTimeoutOrAtTheNotifyWhicheverComesFirst) {
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto mu = sync.NewMutex();
  auto cv = sync.NewCondVar();
  TimeMs timed_out_at = -1;
  TimeMs notified_at = -1;
  std::unique_ptr<Fiber> sleeper, waiter, notifier;
  sleeper = std::make_unique<Fiber>([&] {
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    cv->WaitFor(*mu, std::chrono::milliseconds(25));  // nobody notifies before 25
    timed_out_at = w.now();
  });
  waiter = std::make_unique<Fiber>([&] {
    w.Sleep(*waiter, 30);
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    cv->WaitFor(*mu, std::chrono::milliseconds(1000));
    notified_at = w.now();
  });
  notifier = std::make_unique<Fiber>([&] {
    w.Sleep(*notifier, 40);
    std::lock_guard<SyncPort::Mutex> lock(*mu);
    cv->NotifyAll();
  });
  w.After(0, [&] { sleeper->Resume(); });
  w.After(0, [&] { waiter->Resume(); });
  w.After(0, [&] { notifier->Resume(); });
  w.RunUntil(2000);  // the waiter's own timer (at 1030) fires too and must find nothing
  ASSERT_TRUE(sleeper->finished() && waiter->finished() && notifier->finished());
  EXPECT_EQ(timed_out_at, 25);
  EXPECT_EQ(notified_at, 40);
}

TEST(FiberSync, TheSchedulerMayTakeAMutexNoFiberHolds) {
  // A simulated producer's Metrics() is read between events (the metrics scrape), off any
  // fiber: it locks the producer's state mutex, which no fiber holds across a park.
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto mu = sync.NewMutex();
  {
    std::lock_guard<SyncPort::Mutex> lock(*mu);  // on the scheduler: not a fiber
  }
  bool fiber_got_it = false;
  std::unique_ptr<Fiber> f = std::make_unique<Fiber>([&] {
    std::lock_guard<SyncPort::Mutex> lock(*mu);
    fiber_got_it = true;
  });
  f->Resume();
  EXPECT_TRUE(fiber_got_it);
  EXPECT_TRUE(mu->try_lock());  // and released by the fiber
  mu->unlock();
}

TEST(FiberSync, AFiberResumedBeforeItsTurnParksAgain) {
  // The end-of-run teardown resumes every unfinished fiber in turn: one waiting for the
  // monitor must not take it while another holds it.
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto monitor = sync.NewMutex();
  bool holder_done = false;
  bool waiter_saw_holder_done = false;
  std::unique_ptr<Fiber> holder, waiter;
  holder = std::make_unique<Fiber>([&] {
    std::lock_guard<SyncPort::Mutex> lock(*monitor);
    holder->Yield();  // parked with no event to resume it (like a crashed process's call)
    holder_done = true;
  });
  waiter = std::make_unique<Fiber>([&] {
    std::lock_guard<SyncPort::Mutex> lock(*monitor);
    waiter_saw_holder_done = holder_done;
  });
  holder->Resume();
  waiter->Resume();  // parks: the monitor is held
  ASSERT_FALSE(waiter->finished());
  waiter->Resume();  // spurious: still not its turn
  ASSERT_FALSE(waiter->finished());
  holder->Resume();  // unlocks and hands the monitor to the waiter
  ASSERT_TRUE(holder->finished());
  waiter->Resume();
  ASSERT_TRUE(waiter->finished());
  EXPECT_TRUE(waiter_saw_holder_done);
}

// The fibers themselves (sim/fiber.h): strict alternation with the scheduler, Current() on
// each side, and a body that uses far more stack than the coordinator's workers do (at most
// 16 KiB measured; the stack is 1 MiB).
int StackHungry(int depth) {
  volatile int frame[256];  // 1 KiB a frame: 400 KiB at depth 400
  frame[0] = depth;
  return depth == 0 ? frame[0] : StackHungry(depth - 1) + frame[0];
}

TEST(Fiber, RunsInStrictAlternationWithTheSchedulerOnItsOwnStack) {
  std::vector<std::string> log;
  std::unique_ptr<Fiber> a, b;
  auto body = [&](const char* name, std::unique_ptr<Fiber>& self) {
    return [&, name] {
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(Fiber::Current(), self.get());
        log.push_back(fmt::format("{}{} {}", name, i, StackHungry(400)));
        self->Yield();
      }
    };
  };
  a = std::make_unique<Fiber>(body("a", a));
  b = std::make_unique<Fiber>(body("b", b));
  EXPECT_EQ(Fiber::Current(), nullptr);
  for (int round = 0; round < 3; ++round) {
    a->Resume();
    EXPECT_EQ(Fiber::Current(), nullptr);
    b->Resume();
    log.push_back(fmt::format("scheduler {}", round));
  }
  ASSERT_TRUE(a->finished() && b->finished());
  EXPECT_EQ(log, (std::vector<std::string>{"a0 80200", "b0 80200", "scheduler 0", "a1 80200",
                                           "b1 80200", "scheduler 1", "scheduler 2"}));
}

}  // namespace
}  // namespace rsc::sim
