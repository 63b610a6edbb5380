#pragma once
// Fiber: runs a body on a stack of its own, in strict alternation with the scheduler.
//
// Why: the simulator runs the REAL GroupService, whose store calls are synchronous. To let
// simulated time pass inside a critical section (a slow Redis call, a mutex that expires
// under a paused coordinator, two coordinators interleaving their load → decide → CAS), a
// store call must be able to stop in the middle and resume later. The body therefore runs
// on a stack of its own: Resume() switches to it and returns when the fiber calls Yield() or
// ends; Yield() switches back. Everything runs on the scheduler's thread, one at a time, so
// the run is as deterministic as plain single-threaded code.
//
// How: Boost.Context (`boost::context::fiber`, its assembly fcontext switch) on a stack we map
// ourselves (a guard page below it). Fibers used to be threads handing control over through a
// condition variable (two futex calls and a trip through the kernel's scheduler per switch, a
// quarter of rsc-sim's time), then glibc's ucontext, whose swapcontext makes a system call
// per switch to save the signal mask (3.6% of rsc-sim's time once the consumer's threads
// became fibers, measured with perf); a switch is now a register save and restore in user
// space. Under AddressSanitizer or ThreadSanitizer the switch is glibc's ucontext again: their
// fiber interfaces need a notice right before and right after every switch, and Boost's
// fcontext runs code of its own on the fiber's stack at its creation and after its body
// returned, where no notice can go (Boost.Context itself requires its ucontext backend for
// ASan). The switches are announced to both sanitizers; checked under the asan preset and,
// for the switch code alone, under TSan (docs/testing.md).
//
// Rules: only the scheduler calls Resume(); only the fiber calls Yield(). A fiber body must
// not block on anything but Yield() (a std::mutex held by a parked fiber would deadlock the
// scheduler): the waits of the code it runs go through a port that parks instead
// (GroupService's through sim/fiber_sync.h). An exception must not leave the body (it ends
// the process, as it did on a thread). The destructor requires the body to have finished.

#include <cstddef>
#include <functional>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <ucontext.h>
#define RSC_FIBER_UCONTEXT 1
#else
#include <boost/context/fiber.hpp>
#endif

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
  std::function<void()> body_;
  char* mapping_ = nullptr;  // mmap'd: a guard page, then the stack
  size_t mapping_size_ = 0;
  char* stack_ = nullptr;  // the stack's lowest address (above the guard page)
  size_t stack_size_ = 0;
#ifdef RSC_FIBER_UCONTEXT
  static void Entry(unsigned hi, unsigned lo) noexcept;
  ucontext_t fiber_ctx_{};
  ucontext_t scheduler_ctx_{};
#else
  boost::context::fiber Entry(boost::context::fiber&& scheduler);
  boost::context::fiber fiber_;      // the fiber where it stopped (empty while it runs)
  boost::context::fiber scheduler_;  // the scheduler where it resumed us (while it runs)
#endif
  Fiber* scheduler_current_ = nullptr;  // Current() on the scheduler while the fiber runs
  bool running_ = false;
  bool finished_ = false;
  // Sanitizer bookkeeping (unused otherwise): the scheduler's stack as AddressSanitizer
  // reported it, each side's fake-stack handle across a switch, ThreadSanitizer's fibers.
  const void* scheduler_stack_ = nullptr;
  size_t scheduler_stack_size_ = 0;
  void* scheduler_fake_ = nullptr;
  void* fiber_fake_ = nullptr;
  void* tsan_fiber_ = nullptr;
  void* tsan_scheduler_ = nullptr;
};

}  // namespace rsc::sim
