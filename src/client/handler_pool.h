#pragma once
// HandlerPool: the consumer's bounded set of threads that call the message handler (issue
// 10: no thread per shard). Threads start on demand, up to `max_threads`, and stay until
// Stop(). A task carries its reader's token so that a call still waiting for a thread can be
// withdrawn when its shard is abandoned — otherwise handlers that hang on other shards would
// keep an abandoned shard's reader waiting for a call that will never be made.
//
// Per-shard order needs nothing here: a reader hands out one call at a time. A task submitted
// from inside a running task (the next message of the same shard, decided when the previous
// call's result came in) runs next on the same thread, without a hand-off to another thread.
//
// Thread safety: every method may be called from any thread. Tasks run without the pool's
// lock held.
//
// Its threads, lock and condition variable are the platform's (platform.h): OS threads in
// production, fibers in the simulator, which runs this pool as shipped.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "client/platform.h"

namespace rsc::client {

class HandlerPool {
 public:
  // `platform` must outlive the pool.
  HandlerPool(int max_threads, Platform& platform);
  ~HandlerPool();  // Stop()
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Queues `task` (or, from inside a task, runs it next on the same thread); ignored after
  // Stop().
  void Submit(uint64_t token, std::function<void()> task);
  // Whether the caller runs inside one of this pool's tasks.
  bool InWorker() const;
  // Removes the queued task of `token` if it has not started: true if one was removed.
  bool Withdraw(uint64_t token);
  // No new tasks; queued ones are dropped; waits for the running ones, joins the threads.
  void Stop();
  int threads() const;
  int busy() const;

 private:
  struct Task {
    uint64_t token = 0;
    std::function<void()> run;
  };
  // One pool thread: who it is (Platform::CurrentThread) and, while it runs a task, the slot
  // for the task submitted from inside it.
  struct Worker {
    std::unique_ptr<Platform::Thread> thread;
    const void* id = nullptr;
    std::function<void()>* next = nullptr;
  };
  void Work(Worker* me);
  Worker* WorkerLocked() const;  // the caller's Worker, or nullptr

  const int max_threads_;
  Platform& platform_;
  const std::unique_ptr<SyncPort::Mutex> mu_;
  const std::unique_ptr<SyncPort::CondVar> cv_;
  std::deque<Task> queue_;                          // guarded by mu_
  std::vector<std::unique_ptr<Worker>> workers_;    // guarded by mu_
  int idle_ = 0;                                    // guarded by mu_
  bool stopping_ = false;                           // guarded by mu_
  const std::unique_ptr<SyncPort::Mutex> stop_mu_;  // serialises Stop()
};

}  // namespace rsc::client
