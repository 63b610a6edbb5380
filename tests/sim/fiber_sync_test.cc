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

#include "sim/fiber_group.h"

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

// The handler pool wakes one idle thread per task (client/handler_pool.cc): NotifyOne must not
// wake every idle fiber, and the one it wakes is the longest waiting.
TEST(FiberSync, NotifyOneWakesOnlyTheLongestWaiter) {
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto mu = sync.NewMutex();
  auto cv = sync.NewCondVar();
  std::vector<std::string> woke;
  std::vector<std::unique_ptr<Fiber>> fibers;
  for (const char* name : {"first", "second", "third"}) {
    fibers.push_back(std::make_unique<Fiber>([&, name] {
      std::unique_lock<SyncPort::Mutex> lock(*mu);
      cv->Wait(*mu);
      woke.push_back(fmt::format("{} at {}", name, w.now()));
    }));
  }
  for (size_t i = 0; i < fibers.size(); ++i) {
    w.After(static_cast<TimeMs>(i), [&, i] { fibers[i]->Resume(); });
  }
  w.After(10, [&] { cv->NotifyOne(); });
  w.After(20, [&] { cv->NotifyOne(); });
  w.RunUntil(100);
  EXPECT_EQ(woke, (std::vector<std::string>{"first at 10", "second at 20"}));
  EXPECT_FALSE(fibers[2]->finished());
  w.After(0, [&] { cv->NotifyAll(); });
  w.RunUntil(200);
  EXPECT_TRUE(fibers[2]->finished());
}

// A process's local clock jumped forward (sim/sim_consumer.cc, sim_producer.cc): a timed wait
// ends at once, as wait_for on the steady clock would once the jump passed its deadline; a wait
// without a timeout goes on waiting for its notify.
TEST(FiberSync, AClockJumpEndsTheTimedWaitsOnly) {
  World w(1, Buggify::Mode::kAllOff);
  FiberSync sync(w, nullptr);
  auto mu = sync.NewMutex();
  auto cv = sync.NewCondVar();
  TimeMs timed_woke = -1;
  TimeMs untimed_woke = -1;
  std::unique_ptr<Fiber> timed, untimed;
  timed = std::make_unique<Fiber>([&] {
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    cv->WaitFor(*mu, std::chrono::milliseconds(1000));
    timed_woke = w.now();
  });
  untimed = std::make_unique<Fiber>([&] {
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    cv->Wait(*mu);
    untimed_woke = w.now();
  });
  w.After(0, [&] { timed->Resume(); });
  w.After(0, [&] { untimed->Resume(); });
  w.After(30, [&] { sync.EndTimedWaits(); });
  w.After(500, [&] { cv->NotifyAll(); });
  w.RunUntil(2000);
  EXPECT_EQ(timed_woke, 30);
  EXPECT_EQ(untimed_woke, 500);
}

// A crashed consumer is frozen (sim/sim_consumer.h): no event resumes its fibers, whatever
// was due — not a sleep's end, a timed wait's timeout or a notify.
TEST(FiberGroup, AFrozenGroupRunsNothingUntilItsTeardown) {
  World w(1, Buggify::Mode::kAllOff);
  FiberGroup group(w);
  FiberSync sync(w, nullptr, &group);
  auto mu = sync.NewMutex();
  auto cv = sync.NewCondVar();
  std::vector<std::string> log;
  group.Spawn([&] {
    group.Sleep(10);
    log.push_back(fmt::format("slept to {}", w.now()));
  });
  group.Spawn([&] {
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    cv->WaitFor(*mu, std::chrono::milliseconds(20));
    log.push_back(fmt::format("wait ended at {}", w.now()));
  });
  w.After(5, [&] { group.Freeze(); });
  w.After(6, [&] { cv->NotifyAll(); });
  w.RunUntil(1000);
  EXPECT_TRUE(log.empty()) << log.front();
  group.RunToEnd(nullptr);  // the end of the run: both end, their waits cut short
  EXPECT_EQ(log, (std::vector<std::string>{"slept to 1000", "wait ended at 1000"}));
}

// The end of a run (FiberGroup::RunToEnd): a fiber whose every call fails at once without a
// pause (a dead process re-sending a request its clock says is due) still lets the fiber that
// ends its loop run; without the turn each wait gives (YieldOnce) this test never returns.
TEST(FiberGroup, TeardownEndsALoopThatOnlyAnotherFiberCanStop) {
  World w(1, Buggify::Mode::kAllOff);
  FiberGroup group(w);
  FiberSync sync(w, nullptr, &group);
  auto mu = sync.NewMutex();
  auto cv = sync.NewCondVar();
  bool stop = false;
  int calls = 0;
  group.Spawn([&] {  // the HTTP thread: each request "fails at once" (a park that ends now)
    while (!stop) {
      auto never = std::make_shared<bool>(false);
      group.ParkUntil(never);
      ++calls;
    }
  });
  group.Spawn([&] {  // Stop(): waits, then ends the loop
    std::unique_lock<SyncPort::Mutex> lock(*mu);
    cv->Wait(*mu);
    stop = true;
  });
  w.After(5, [&] { group.Freeze(); });
  w.RunUntil(100);
  group.RunToEnd(nullptr);
  EXPECT_TRUE(stop);
  EXPECT_GE(calls, 1);
}

}  // namespace
}  // namespace rsc::sim
