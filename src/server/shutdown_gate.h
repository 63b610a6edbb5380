#pragma once
// ShutdownGate: the terminating mode of SPEC S1.
//
// Every request that starts work the coordinator must finish cleanly (heartbeat, leave,
// routing, admin mutations) calls Enter() first. While the gate is open it returns a
// Guard that keeps the request counted as in flight until it is destroyed; once
// BeginTerminate() has been called it returns nullopt and the caller answers 503
// COORDINATOR_TERMINATING. Requests already inside keep running: WaitIdle() lets the
// shutdown path wait for them (they release their Redis mutex on the way out) before
// the process exits.
//
// Thread safety: every method may be called from any thread. Enter() and
// BeginTerminate() are linearizable: a Guard granted before BeginTerminate() returns is
// waited for by WaitIdle(); no Guard is granted after it.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace rsc {

class ShutdownGate {
 public:
  // Proof of one in-flight request. Move-only; destroying it (or moving from it and
  // destroying the source) releases exactly once. Must not outlive its gate.
  class Guard {
   public:
    Guard(Guard&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Guard& operator=(Guard&& other) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard();

   private:
    friend class ShutdownGate;
    explicit Guard(ShutdownGate* gate) : gate_(gate) {}
    ShutdownGate* gate_;
  };

  ShutdownGate() = default;
  ShutdownGate(const ShutdownGate&) = delete;
  ShutdownGate& operator=(const ShutdownGate&) = delete;
  // Precondition: no Guard is alive.
  ~ShutdownGate() = default;

  // A guard, or nullopt once terminating.
  std::optional<Guard> Enter();

  // Enters terminating mode (idempotent). Wakes nobody but WaitIdle callers.
  void BeginTerminate();

  bool terminating() const;
  int64_t in_flight() const;
  // Callers blocked in WaitIdle right now (observability, and tests that show one blocked).
  int64_t idle_waiters() const;

  // Blocks until no guard is alive or `deadline` passes; true when idle. Does not itself
  // begin terminating (a caller normally calls BeginTerminate() first, else new guards
  // may keep it busy).
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

 private:
  void Exit();

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  bool terminating_ = false;  // guarded by mu_
  int64_t in_flight_ = 0;     // guarded by mu_
  int64_t idle_waiters_ = 0;  // guarded by mu_
};

}  // namespace rsc
