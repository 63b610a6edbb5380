#include "core/sync.h"

#include <condition_variable>
#include <mutex>

namespace rsc {

namespace {

class OsMutex : public SyncPort::Mutex {
 public:
  void lock() override { mu_.lock(); }
  bool try_lock() override { return mu_.try_lock(); }
  void unlock() override { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class OsCondVar : public SyncPort::CondVar {
 public:
  void Wait(SyncPort::Mutex& m) override {
    // The port hands out only OsMutex, so the wait can use std::condition_variable (cheaper
    // than condition_variable_any's internal mutex) on the mutex the caller holds.
    std::unique_lock<std::mutex> lock(static_cast<OsMutex&>(m).native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held by the caller's lock object
  }
  void WaitFor(SyncPort::Mutex& m, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(static_cast<OsMutex&>(m).native(), std::adopt_lock);
    cv_.wait_for(lock, timeout);
    lock.release();
  }
  void NotifyAll() override { cv_.notify_all(); }
  void NotifyOne() override { cv_.notify_one(); }

 private:
  std::condition_variable cv_;
};

class OsSync : public SyncPort {
 public:
  std::unique_ptr<Mutex> NewMutex() override { return std::make_unique<OsMutex>(); }
  std::unique_ptr<CondVar> NewCondVar() override { return std::make_unique<OsCondVar>(); }
};

}  // namespace

SyncPort& SyncPort::Os() {
  static OsSync os;
  return os;
}

}  // namespace rsc
