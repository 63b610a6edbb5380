#include "client/handler_pool.h"

#include <pthread.h>

#include <algorithm>

namespace rsc::client {

namespace {
// The pool whose task this thread runs, and that task's successor slot.
thread_local const HandlerPool* tls_pool = nullptr;
thread_local std::function<void()>* tls_next = nullptr;
}  // namespace

HandlerPool::HandlerPool(int max_threads) : max_threads_(std::max(1, max_threads)) {}

HandlerPool::~HandlerPool() { Stop(); }

bool HandlerPool::InWorker() const { return tls_pool == this; }

void HandlerPool::Submit(uint64_t token, std::function<void()> task) {
  if (tls_pool == this && tls_next != nullptr && !*tls_next) {
    *tls_next = std::move(task);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    queue_.push_back(Task{token, std::move(task)});
    // A thread more only when none is idle: a consumer with a fast handler keeps few.
    if (idle_ < static_cast<int>(queue_.size()) &&
        static_cast<int>(threads_.size()) < max_threads_) {
      threads_.emplace_back([this] { Work(); });
      pthread_setname_np(threads_.back().native_handle(), "rsc-handler");
      return;
    }
  }
  cv_.notify_one();
}

bool HandlerPool::Withdraw(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [token](const Task& t) { return t.token == token; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

void HandlerPool::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

int HandlerPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

int HandlerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size()) - idle_;
}

void HandlerPool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) return;
    std::function<void()> run = std::move(queue_.front().run);
    queue_.pop_front();
    lock.unlock();
    std::function<void()> next;
    tls_pool = this;
    tls_next = &next;
    while (run) {
      run();
      run = std::move(next);
      next = nullptr;
    }
    tls_pool = nullptr;
    tls_next = nullptr;
    lock.lock();
  }
}

}  // namespace rsc::client
