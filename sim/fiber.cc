#include "sim/fiber.h"

#include "core/check.h"

namespace rsc::sim {

namespace {
thread_local Fiber* t_current = nullptr;  // set once on each fiber's own thread
}  // namespace

Fiber* Fiber::Current() { return t_current; }

Fiber::Fiber(std::function<void()> body) : body_(std::move(body)) {
  thread_ = std::thread([this] { Main(); });
}

Fiber::~Fiber() {
  RSC_CHECK(finished_);
  thread_.join();
}

void Fiber::Main() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return fiber_turn_; });
  }
  t_current = this;
  body_();
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  fiber_turn_ = false;
  cv_.notify_all();
}

void Fiber::Resume() {
  std::unique_lock<std::mutex> lock(mu_);
  RSC_CHECK(!finished_ && !fiber_turn_);
  fiber_turn_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return !fiber_turn_; });
}

void Fiber::Yield() {
  std::unique_lock<std::mutex> lock(mu_);
  fiber_turn_ = false;
  cv_.notify_all();
  cv_.wait(lock, [&] { return fiber_turn_; });
}

}  // namespace rsc::sim
