#pragma once
// SyncPort: the blocking waits of code the simulator runs on fibers, behind a port (issue 10).
//
// GroupService blocks in two places: a group's in-process monitor (held across the whole
// lock → load → decide → CAS section, so across Redis calls) and the heartbeat queue's
// condition variable (a heartbeat waits while another thread decides its batch). The
// producer (client/producer.cc) blocks on its routing state and its Redis connections.
// Production blocks the thread (Os()). The simulator runs several workers per coordinator,
// and a producer's refresh loop and publishing threads, as fibers that park inside Redis and
// HTTP calls (sim/fiber.h); a fiber blocked on an OS mutex that a parked fiber holds would
// stop the whole simulation, so there these waits park the fiber instead (sim/fiber_sync.h).
// Short critical sections that never span a call that may park keep std::mutex.
//
// Mutex has the standard lock/try_lock/unlock names, so std::unique_lock and
// std::lock_guard work with it.

#include <chrono>
#include <memory>

namespace rsc {

class SyncPort {
 public:
  class Mutex {
   public:
    virtual ~Mutex() = default;
    virtual void lock() = 0;
    virtual bool try_lock() = 0;
    virtual void unlock() = 0;
  };
  class CondVar {
   public:
    virtual ~CondVar() = default;
    // The caller holds `m`: unlocks it, waits for a NotifyAll, locks it again. May return
    // without a notify (callers re-check their condition, as with std::condition_variable).
    virtual void Wait(Mutex& m) = 0;
    // The same, returning after at most `timeout` (of the port's clock: simulated time in the
    // simulator) if no NotifyAll came first.
    virtual void WaitFor(Mutex& m, std::chrono::milliseconds timeout) = 0;
    virtual void NotifyAll() = 0;
    // Wakes at least one waiter (the default wakes them all: waits may return spuriously).
    virtual void NotifyOne() { NotifyAll(); }
  };

  virtual ~SyncPort() = default;
  virtual std::unique_ptr<Mutex> NewMutex() = 0;
  // A condition variable used only with mutexes of this port.
  virtual std::unique_ptr<CondVar> NewCondVar() = 0;

  // std::mutex and std::condition_variable.
  static SyncPort& Os();
};

}  // namespace rsc
