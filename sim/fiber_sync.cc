#include "sim/fiber_sync.h"

#include <algorithm>
#include <optional>

#include "core/check.h"
#include "sim/fiber_group.h"

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
  if (group_ != nullptr) {
    group_->Wake(f);
    return;
  }
  world_.After(0, [f] {
    if (!f->finished()) f->Resume();
  });
}

bool FiberSync::tearing_down() const { return group_ != nullptr && group_->tearing_down(); }

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
  explicit FiberCondVar(FiberSync& sync) : sync_(sync), waiters_(std::make_shared<Waiters>()) {
    sync_.condvars_.push_back(this);
  }
  ~FiberCondVar() override {
    RSC_CHECK(waiters_->empty());
    std::erase(sync_.condvars_, this);
  }

  void Wait(SyncPort::Mutex& m) override { WaitUntil(m, std::nullopt); }
  void WaitFor(SyncPort::Mutex& m, std::chrono::milliseconds timeout) override {
    WaitUntil(m, std::max<TimeMs>(0, timeout.count()));
  }
  void NotifyAll() override {
    for (const Waiter& w : *waiters_) sync_.WakeLater(w.fiber);
    waiters_->clear();
  }
  void NotifyOne() override {  // the longest waiting
    if (waiters_->empty()) return;
    sync_.WakeLater(waiters_->front().fiber);
    waiters_->pop_front();
  }
  // Ends every timed wait now (FiberSync::EndTimedWaits).
  void EndTimed() {
    for (auto it = waiters_->begin(); it != waiters_->end();) {
      if (!it->timed) {
        ++it;
        continue;
      }
      sync_.WakeLater(it->fiber);
      it = waiters_->erase(it);
    }
  }

 private:
  friend class FiberSync;
  struct Waiter {
    Fiber* fiber;
    uint64_t seq;  // this wait (a timer finds only the wait that armed it)
    bool timed;
  };
  using Waiters = std::deque<Waiter>;

  // `timeout`: simulated ms, or none. A timer that fires takes the waiter out as a notify
  // would; it holds the list weakly, so a timer outliving the condition variable finds nothing.
  void WaitUntil(SyncPort::Mutex& m, std::optional<TimeMs> timeout) {
    Fiber* me = &Me();
    if (sync_.tearing_down()) {  // RunToEnd resumes every fiber: the wait ends early
      m.unlock();
      Park();
      m.lock();
      return;
    }
    const uint64_t seq = ++seq_;
    waiters_->push_back({me, seq, timeout.has_value()});
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
    while (waiting() && !sync_.tearing_down()) Park();
    if (waiting()) {  // the teardown began while it waited
      std::erase_if(*waiters_, [&](const Waiter& w) { return w.seq == seq; });
    }
    m.lock();
  }

  FiberSync& sync_;
  std::shared_ptr<Waiters> waiters_;
  uint64_t seq_ = 0;
};

void FiberSync::EndTimedWaits() {
  for (FiberCondVar* cv : condvars_) cv->EndTimed();
}

std::unique_ptr<SyncPort::Mutex> FiberSync::NewMutex() {
  return std::make_unique<FiberMutex>(*this);
}
std::unique_ptr<SyncPort::CondVar> FiberSync::NewCondVar() {
  return std::make_unique<FiberCondVar>(*this);
}

}  // namespace rsc::sim
