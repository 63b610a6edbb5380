#include "server/shutdown_gate.h"

#include "core/check.h"

namespace rsc {

ShutdownGate::Guard& ShutdownGate::Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    if (gate_ != nullptr) gate_->Exit();
    gate_ = other.gate_;
    other.gate_ = nullptr;
  }
  return *this;
}

ShutdownGate::Guard::~Guard() {
  if (gate_ != nullptr) gate_->Exit();
}

std::optional<ShutdownGate::Guard> ShutdownGate::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (terminating_) return std::nullopt;
  ++in_flight_;
  return Guard(this);
}

void ShutdownGate::BeginTerminate() {
  std::lock_guard<std::mutex> lock(mu_);
  terminating_ = true;
}

bool ShutdownGate::terminating() const {
  std::lock_guard<std::mutex> lock(mu_);
  return terminating_;
}

int64_t ShutdownGate::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

int64_t ShutdownGate::idle_waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_waiters_;
}

bool ShutdownGate::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  ++idle_waiters_;
  const bool idle = idle_cv_.wait_until(lock, deadline, [this] { return in_flight_ == 0; });
  --idle_waiters_;
  return idle;
}

void ShutdownGate::Exit() {
  std::lock_guard<std::mutex> lock(mu_);
  RSC_CHECK(in_flight_ > 0);
  if (--in_flight_ == 0) idle_cv_.notify_all();
}

}  // namespace rsc
