#include "sim/fiber_sync.h"

#include <algorithm>
#include <optional>

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
    const void* me = Holder();
    RSC_CHECK(owner_ != me);  // not recursive
    if (owner_ == nullptr) {
      owner_ = me;
      return;
    }
    // The scheduler cannot park: it may take a mutex only while no fiber holds it (a
    // producer's Metrics() read between events; no fiber parks holding that mutex).
    Fiber* fiber = &Me();
    if (sync_.contended_probe() != nullptr) sync_.world().probes().Hit(sync_.contended_probe());
    waiters_.push_back(fiber);
    while (owner_ != fiber) Park();  // unlock() hands it over and wakes us
  }
  bool try_lock() override {
    if (owner_ != nullptr) return false;
    owner_ = Holder();
    return true;
  }
  void unlock() override {
    RSC_CHECK(owner_ == Holder());
    if (waiters_.empty()) {
      owner_ = nullptr;
      return;
    }
    Fiber* next = waiters_.front();
    waiters_.pop_front();
    owner_ = next;
    sync_.WakeLater(next);
  }

 private:
  // The calling fiber, or the scheduler (a tag of its own).
  static const void* Holder() {
    static const char scheduler = 0;
    Fiber* f = Fiber::Current();
    return f != nullptr ? static_cast<const void*>(f) : &scheduler;
  }

  FiberSync& sync_;
  const void* owner_ = nullptr;
  std::deque<Fiber*> waiters_;
};

class FiberSync::FiberCondVar : public SyncPort::CondVar {
 public:
  explicit FiberCondVar(FiberSync& sync) : sync_(sync), waiters_(std::make_shared<Waiters>()) {}
  ~FiberCondVar() override { RSC_CHECK(waiters_->empty()); }

  void Wait(SyncPort::Mutex& m) override { WaitUntil(m, std::nullopt); }
  void WaitFor(SyncPort::Mutex& m, std::chrono::milliseconds timeout) override {
    WaitUntil(m, std::max<TimeMs>(0, timeout.count()));
  }
  void NotifyAll() override {
    for (const Waiter& w : *waiters_) sync_.WakeLater(w.fiber);
    waiters_->clear();
  }

 private:
  struct Waiter {
    Fiber* fiber;
    uint64_t seq;  // this wait (a timer finds only the wait that armed it)
  };
  using Waiters = std::deque<Waiter>;

  // `timeout`: simulated ms, or none. A timer that fires takes the waiter out as a notify
  // would; it holds the list weakly, so a timer outliving the condition variable finds nothing.
  void WaitUntil(SyncPort::Mutex& m, std::optional<TimeMs> timeout) {
    Fiber* me = &Me();
    const uint64_t seq = ++seq_;
    waiters_->push_back({me, seq});
    if (timeout) {
      std::weak_ptr<Waiters> weak = waiters_;
      FiberSync& sync = sync_;
      sync_.world().After(*timeout, [weak, seq, &sync] {
        std::shared_ptr<Waiters> waiters = weak.lock();
        if (!waiters) return;
        for (auto it = waiters->begin(); it != waiters->end(); ++it) {
          if (it->seq != seq) continue;
          Fiber* f = it->fiber;
          waiters->erase(it);
          sync.WakeLater(f);
          return;
        }
      });
    }
    m.unlock();
    auto waiting = [&] {
      return std::any_of(waiters_->begin(), waiters_->end(),
                         [&](const Waiter& w) { return w.seq == seq; });
    };
    while (waiting()) Park();
    m.lock();
  }

  FiberSync& sync_;
  std::shared_ptr<Waiters> waiters_;
  uint64_t seq_ = 0;
};

std::unique_ptr<SyncPort::Mutex> FiberSync::NewMutex() {
  return std::make_unique<FiberMutex>(*this);
}
std::unique_ptr<SyncPort::CondVar> FiberSync::NewCondVar() {
  return std::make_unique<FiberCondVar>(*this);
}

}  // namespace rsc::sim
