#pragma once
// Fiber: runs a body on its own thread in strict alternation with the scheduler thread.
//
// Why: the simulator runs the REAL GroupService, whose store calls are synchronous. To let
// simulated time pass inside a critical section (a slow Redis call, a mutex that expires
// under a paused coordinator, two coordinators interleaving their load → decide → CAS), a
// store call must be able to stop in the middle and resume later. The body therefore runs
// on a thread of its own, but exactly one of {scheduler, fiber} runs at any moment: Resume()
// hands control to the fiber and blocks until the fiber calls Yield() or ends; Yield()
// hands it back. The hand-off goes through a mutex and a condition variable, so every
// access to simulator state is ordered (ThreadSanitizer-clean) and the run is as
// deterministic as a single-threaded one.
//
// Rules: only the scheduler thread calls Resume(); only the fiber calls Yield(). A fiber
// body must not block on anything but Yield() (a std::mutex held by a parked fiber would
// deadlock the scheduler): the waits of the code it runs go through a port that parks
// instead (GroupService's through sim/fiber_sync.h). The destructor requires the body to
// have finished.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace rsc::sim {

class Fiber {
 public:
  explicit Fiber(std::function<void()> body);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Scheduler: runs the fiber until it yields or finishes.
  void Resume();
  // Fiber: gives control back to the scheduler until the next Resume().
  void Yield();
  // Scheduler: the body returned.
  bool finished() const { return finished_; }
  // The fiber whose body is running on the calling thread; nullptr on the scheduler.
  static Fiber* Current();

 private:
  void Main();

  std::function<void()> body_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool fiber_turn_ = false;  // guarded by mu_
  bool finished_ = false;    // guarded by mu_ (read by the scheduler after a hand-off)
  std::thread thread_;
};

}  // namespace rsc::sim
