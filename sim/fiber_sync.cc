#include "sim/fiber_sync.h"

#include <algorithm>

#include "core/check.h"

namespace rsc::sim {

namespace {

Fiber& Me() {
  Fiber* f = Fiber::Current();
  RSC_CHECK(f != nullptr);  // a wait on the scheduler thread would block the simulation
  return *f;
}

}  // namespace

void FiberSync::Park() { Me().Yield(); }

void FiberSync::WakeLater(Fiber* f) {
  world_.After(0, [f] {
    if (!f->finished()) f->Resume();
  });
}

class FiberSync::FiberMutex : public SyncPort::Mutex {
 public:
  explicit FiberMutex(FiberSync& sync) : sync_(sync) {}
  ~FiberMutex() override { RSC_CHECK(owner_ == nullptr && waiters_.empty()); }

  void lock() override {
    Fiber* me = &Me();
    RSC_CHECK(owner_ != me);  // not recursive
    if (owner_ == nullptr) {
      owner_ = me;
      return;
    }
    if (sync_.contended_probe() != nullptr) sync_.world().probes().Hit(sync_.contended_probe());
    waiters_.push_back(me);
    while (owner_ != me) Park();  // unlock() hands it over and wakes us
  }
  bool try_lock() override {
    if (owner_ != nullptr) return false;
    owner_ = &Me();
    return true;
  }
  void unlock() override {
    RSC_CHECK(owner_ == &Me());
    if (waiters_.empty()) {
      owner_ = nullptr;
      return;
    }
    owner_ = waiters_.front();
    waiters_.pop_front();
    sync_.WakeLater(owner_);
  }

 private:
  FiberSync& sync_;
  Fiber* owner_ = nullptr;
  std::deque<Fiber*> waiters_;
};

class FiberSync::FiberCondVar : public SyncPort::CondVar {
 public:
  explicit FiberCondVar(FiberSync& sync) : sync_(sync) {}
  ~FiberCondVar() override { RSC_CHECK(waiters_.empty()); }

  void Wait(SyncPort::Mutex& m) override {
    Fiber* me = &Me();
    waiters_.push_back(me);
    m.unlock();
    while (std::find(waiters_.begin(), waiters_.end(), me) != waiters_.end()) Park();
    m.lock();
  }
  void NotifyAll() override {
    for (Fiber* f : waiters_) sync_.WakeLater(f);
    waiters_.clear();
  }

 private:
  FiberSync& sync_;
  std::deque<Fiber*> waiters_;
};

std::unique_ptr<SyncPort::Mutex> FiberSync::NewMutex() {
  return std::make_unique<FiberMutex>(*this);
}
std::unique_ptr<SyncPort::CondVar> FiberSync::NewCondVar() {
  return std::make_unique<FiberCondVar>(*this);
}

}  // namespace rsc::sim
