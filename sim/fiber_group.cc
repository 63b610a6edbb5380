#include "sim/fiber_group.h"

#include "core/check.h"

namespace rsc::sim {

namespace {

class FiberThread : public client::Platform::Thread {
 public:
  FiberThread(std::map<Fiber*, std::vector<Fiber*>>& joiners, Fiber* fiber)
      : joiners_(joiners), fiber_(fiber) {}
  void Join() override {
    if (fiber_->finished()) return;
    Fiber* me = Fiber::Current();
    RSC_CHECK(me != nullptr);  // the scheduler cannot wait
    joiners_[fiber_].push_back(me);
    while (!fiber_->finished()) me->Yield();  // woken once it ended (Spawn)
  }

 private:
  std::map<Fiber*, std::vector<Fiber*>>& joiners_;
  Fiber* fiber_;
};

}  // namespace

Fiber* FiberGroup::Spawn(std::function<void()> body) {
  fibers_.push_back(std::make_unique<Fiber>([this, body = std::move(body)] {
    body();
    // Its joiners go on once it has ended (the wake-up is an event after this switch).
    auto it = joiners_.find(Fiber::Current());
    if (it == joiners_.end()) return;
    for (Fiber* j : it->second) Wake(j);
    joiners_.erase(it);
  }));
  Fiber* f = fibers_.back().get();
  Wake(f);
  return f;
}

std::unique_ptr<client::Platform::Thread> FiberGroup::StartThread(std::function<void()> body) {
  return std::make_unique<FiberThread>(joiners_, Spawn(std::move(body)));
}

void FiberGroup::Wake(Fiber* f) {
  if (frozen_ || tearing_down_) return;  // RunToEnd resumes it
  world_.After(0, [this, f] {
    if (!f->finished() && !frozen_) f->Resume();
  });
}

void FiberGroup::WakeAll() {
  for (const auto& f : fibers_) Wake(f.get());
}

void FiberGroup::ParkUntil(const std::shared_ptr<bool>& done) {
  Fiber* me = Fiber::Current();
  RSC_CHECK(me != nullptr);
  while (!*done && !killed_ && !tearing_down_) me->Yield();
  if (!*done && tearing_down_) YieldOnce();
}

void FiberGroup::YieldOnce() {
  // While tearing down, a wait ends at once but still gives the other fibers their turn: a
  // loop whose every call fails at once (a request re-sent without a pause, because the
  // clock that paces it runs ahead) must not keep RunToEnd from the fiber that ends it.
  Fiber* me = Fiber::Current();
  RSC_CHECK(me != nullptr);
  me->Yield();
}

void FiberGroup::Sleep(TimeMs ms) {
  if (tearing_down_) {
    YieldOnce();
    return;
  }
  if (killed_) return;
  auto done = std::make_shared<bool>(false);
  Fiber* me = Fiber::Current();
  RSC_CHECK(me != nullptr);
  // Resumed by the timer's own event (no second event at the same instant).
  world_.After(ms, [this, me, done] {
    *done = true;
    if (!me->finished() && !frozen_ && !tearing_down_) me->Resume();
  });
  ParkUntil(done);
}

void FiberGroup::RunToEnd(const std::function<void()>& between) {
  tearing_down_ = true;
  for (int round = 0;; ++round) {
    RSC_CHECK(round < 100000);  // a fiber that never ends
    if (between) between();
    bool running = false;
    for (size_t i = 0; i < fibers_.size(); ++i) {  // a fiber may spawn another
      if (fibers_[i]->finished()) continue;
      running = true;
      fibers_[i]->Resume();
    }
    if (!running) return;
  }
}

}  // namespace rsc::sim
