#pragma once
// FiberSync: the blocking waits of GroupService and of the producer (core/sync.h) for fibers
// (sim/fiber.h).
//
// A simulated coordinator runs several worker fibers; they park inside Redis calls while
// holding a group's monitor, and wait for another worker to decide their heartbeat batch. A
// simulated producer's refresh loop and publishers are fibers too (sim/sim_producer.h).
// An OS mutex held by a parked fiber would block the scheduler thread for good, so here a
// wait parks the calling fiber (Yield) and the release schedules its resumption as an event
// at the current time (World::After(0, …)): the scheduler stays the only one that resumes
// fibers, and the order of wake-ups is the order of events, so a seed replays exactly.
//
// The mutex is handed over in FIFO order (the unlocker names the next owner), so no waiter
// starves; an OS mutex makes no such promise, but a worker's wait has the same meaning. A fiber
// resumed for any other reason (the end-of-run teardown resumes every fiber until it finishes)
// re-checks and parks again. A condition variable's WaitFor ends by an event at the timeout's
// simulated time. Only fibers may wait; the scheduler thread may take a mutex no one holds
// (it cannot park), and a contended lock there stops the run.

#include <deque>
#include <memory>
#include <vector>

#include "core/sync.h"
#include "sim/fiber.h"
#include "sim/world.h"

namespace rsc::sim {

class FiberGroup;

class FiberSync : public SyncPort {
 public:
  // `contended_probe`: hit when a lock finds its mutex held (nullptr: none). `group`: the
  // process's fibers (sim/fiber_group.h), whose wakes a frozen process does not get and whose
  // waits end early while it tears down; nullptr: fibers resumed by events only.
  FiberSync(World& world, const char* contended_probe, FiberGroup* group = nullptr)
      : world_(world), contended_probe_(contended_probe), group_(group) {}
  std::unique_ptr<Mutex> NewMutex() override;
  std::unique_ptr<CondVar> NewCondVar() override;

  // Parks the calling fiber until an event resumes it (or the teardown does).
  static void Park();
  // Resumes `f` from an event at the current time, unless it has finished by then.
  void WakeLater(Fiber* f);
  // The process's local clock jumped forward: every timed wait ends now, as on a steady clock
  // a wait_for whose deadline the jump passed would (the waiter re-reads the clock; a wait
  // that ends early is allowed by the contract).
  void EndTimedWaits();

  World& world() { return world_; }
  const char* contended_probe() const { return contended_probe_; }
  bool tearing_down() const;

 private:
  class FiberMutex;
  class FiberCondVar;
  World& world_;
  const char* contended_probe_;
  FiberGroup* group_;
  // Alive ones, in the order they were made (EndTimedWaits wakes in a replayable order).
  std::vector<FiberCondVar*> condvars_;
};

}  // namespace rsc::sim
