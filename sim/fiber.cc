#include "sim/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/check.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define RSC_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define RSC_FIBER_TSAN 1
#endif

namespace rsc::sim {

namespace {
// The fiber running on this thread (the scheduler's thread: fibers run on it).
thread_local Fiber* t_current = nullptr;
// Reserved, not committed: pages are touched as the stack grows. The coordinator workers
// touched at most 16 KiB of it over 40 seeds (resident pages by mincore, 2026-12-05); a thread
// had 8 MiB.
constexpr size_t kStackSize = size_t{1} << 20;

#ifndef RSC_FIBER_UCONTEXT
// Hands Boost.Context the stack the Fiber mapped (and unmaps itself).
struct MappedStack {
  char* base;
  size_t size;
  boost::context::stack_context allocate() {
    boost::context::stack_context sc;
    sc.size = size;
    sc.sp = base + size;  // stacks grow down
    return sc;
  }
  void deallocate(boost::context::stack_context& /*sc*/) noexcept {}
};
#endif
}  // namespace

Fiber* Fiber::Current() { return t_current; }

Fiber::Fiber(std::function<void()> body) : body_(std::move(body)) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  mapping_size_ = page + kStackSize;
  void* mem = mmap(nullptr, mapping_size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  RSC_CHECK(mem != MAP_FAILED);
  mapping_ = static_cast<char*>(mem);
  // An overflow faults on the guard page instead of writing over another mapping.
  RSC_CHECK(mprotect(mapping_, page, PROT_NONE) == 0);
  stack_ = mapping_ + page;
  stack_size_ = kStackSize;
#ifdef RSC_FIBER_UCONTEXT
  RSC_CHECK(getcontext(&fiber_ctx_) == 0);
  fiber_ctx_.uc_stack.ss_sp = stack_;
  fiber_ctx_.uc_stack.ss_size = stack_size_;
  fiber_ctx_.uc_link = nullptr;  // Entry never returns: it switches back itself
  // makecontext passes int arguments only: the pointer goes in two halves.
  const auto self = reinterpret_cast<uintptr_t>(this);
  makecontext(&fiber_ctx_, reinterpret_cast<void (*)()>(&Fiber::Entry), 2,
              static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu));
#else
  fiber_ = boost::context::fiber(
      std::allocator_arg, MappedStack{stack_, stack_size_},
      [this](boost::context::fiber&& scheduler) { return Entry(std::move(scheduler)); });
#endif
#ifdef RSC_FIBER_TSAN
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
  RSC_CHECK(finished_);
#ifdef RSC_FIBER_TSAN
  __tsan_destroy_fiber(tsan_fiber_);
#endif
  munmap(mapping_, mapping_size_);
}

#ifdef RSC_FIBER_UCONTEXT
void Fiber::Entry(unsigned hi, unsigned lo) noexcept {
  auto* self = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo);
#ifdef RSC_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &self->scheduler_stack_, &self->scheduler_stack_size_);
#endif
  self->body_();
  self->finished_ = true;
#ifdef RSC_FIBER_TSAN
  __tsan_switch_to_fiber(self->tsan_scheduler_, 0);
#endif
#ifdef RSC_FIBER_ASAN
  // nullptr: this stack is done with, its fake frames can go.
  __sanitizer_start_switch_fiber(nullptr, self->scheduler_stack_, self->scheduler_stack_size_);
#endif
  setcontext(&self->scheduler_ctx_);
  std::abort();  // setcontext returns only on failure
}
#else
boost::context::fiber Fiber::Entry(boost::context::fiber&& scheduler) {
  scheduler_ = std::move(scheduler);
  body_();
  finished_ = true;
  return std::move(scheduler_);  // Boost.Context switches there and frees nothing of ours
}
#endif

void Fiber::Resume() {
  RSC_CHECK(!finished_ && !running_);
  running_ = true;
  scheduler_current_ = t_current;
  t_current = this;
#ifdef RSC_FIBER_TSAN
  tsan_scheduler_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
#ifdef RSC_FIBER_ASAN
  __sanitizer_start_switch_fiber(&scheduler_fake_, stack_, stack_size_);
#endif
#ifdef RSC_FIBER_UCONTEXT
  RSC_CHECK(swapcontext(&scheduler_ctx_, &fiber_ctx_) == 0);
#else
  fiber_ = std::move(fiber_).resume();          // returns when it yields (or ends: then empty)
#endif
#ifdef RSC_FIBER_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake_, nullptr, nullptr);
#endif
  t_current = scheduler_current_;
  running_ = false;
}

void Fiber::Yield() {
  RSC_CHECK(t_current == this);
#ifdef RSC_FIBER_TSAN
  __tsan_switch_to_fiber(tsan_scheduler_, 0);
#endif
#ifdef RSC_FIBER_ASAN
  __sanitizer_start_switch_fiber(&fiber_fake_, scheduler_stack_, scheduler_stack_size_);
#endif
#ifdef RSC_FIBER_UCONTEXT
  RSC_CHECK(swapcontext(&fiber_ctx_, &scheduler_ctx_) == 0);
#else
  scheduler_ = std::move(scheduler_).resume();  // returns when the scheduler resumes us
#endif
#ifdef RSC_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fiber_fake_, &scheduler_stack_, &scheduler_stack_size_);
#endif
}

}  // namespace rsc::sim
