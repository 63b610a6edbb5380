#include "client/handler_pool.h"

#include <algorithm>
#include <mutex>

namespace rsc::client {

HandlerPool::HandlerPool(int max_threads, Platform& platform)
    : max_threads_(std::max(1, max_threads)),
      platform_(platform),
      mu_(platform.Sync().NewMutex()),
      cv_(platform.Sync().NewCondVar()),
      stop_mu_(platform.Sync().NewMutex()) {}

HandlerPool::~HandlerPool() { Stop(); }

HandlerPool::Worker* HandlerPool::WorkerLocked() const {
  const void* me = platform_.CurrentThread();
  for (const std::unique_ptr<Worker>& w : workers_) {
    if (w->id != nullptr && w->id == me) return w.get();
  }
  return nullptr;
}

bool HandlerPool::InWorker() const {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  const Worker* w = WorkerLocked();
  return w != nullptr && w->next != nullptr;
}

void HandlerPool::Submit(uint64_t token, std::function<void()> task) {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  if (stopping_) return;
  if (Worker* w = WorkerLocked(); w != nullptr && w->next != nullptr && !*w->next) {
    *w->next = std::move(task);  // runs next on this thread, without a hand-off
    return;
  }
  queue_.push_back(Task{token, std::move(task)});
  // A thread more only when none is idle: a consumer with a fast handler keeps few.
  if (idle_ < static_cast<int>(queue_.size()) && static_cast<int>(workers_.size()) < max_threads_) {
    // Listed only once its thread runs: a start that throws leaves no worker without one.
    auto w = std::make_unique<Worker>();
    Worker* raw = w.get();
    w->thread = platform_.StartThread("rsc-handler", [this, raw] { Work(raw); });
    workers_.push_back(std::move(w));
    return;
  }
  cv_->NotifyOne();
}

bool HandlerPool::Withdraw(uint64_t token) {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [token](const Task& t) { return t.token == token; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

void HandlerPool::Stop() {
  std::lock_guard<SyncPort::Mutex> stop_lock(*stop_mu_);
  {
    std::lock_guard<SyncPort::Mutex> lock(*mu_);
    stopping_ = true;
    queue_.clear();
    cv_->NotifyAll();
  }
  // The workers stay listed until joined (a running task may still Submit and ask InWorker).
  for (size_t i = 0;; ++i) {
    Platform::Thread* t = nullptr;
    {
      std::lock_guard<SyncPort::Mutex> lock(*mu_);
      if (i >= workers_.size()) break;
      t = workers_[i]->thread.get();
    }
    t->Join();
  }
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  workers_.clear();
}

int HandlerPool::threads() const {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  return static_cast<int>(workers_.size());
}

int HandlerPool::busy() const {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  return static_cast<int>(workers_.size()) - idle_;
}

void HandlerPool::Work(Worker* me) {
  std::unique_lock<SyncPort::Mutex> lock(*mu_);
  me->id = platform_.CurrentThread();
  for (;;) {
    ++idle_;
    while (!stopping_ && queue_.empty()) cv_->Wait(*mu_);
    --idle_;
    if (stopping_) return;
    std::function<void()> run = std::move(queue_.front().run);
    queue_.pop_front();
    // `me->next` is read and written by this thread only (Submit and InWorker look at the
    // caller's own worker).
    std::function<void()> next;
    me->next = &next;
    lock.unlock();
    while (run) {
      run();
      run = std::move(next);
      next = nullptr;
    }
    lock.lock();
    me->next = nullptr;
  }
}

}  // namespace rsc::client
