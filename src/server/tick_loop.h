#pragma once
// The periodic maintenance loop (SPEC §4.4, S1): every interval it ticks every indexed
// group (expiry, rebalance-timeout fencing, blocker expiry, round completion). Several
// replicas may run it at once: each tick is one mutex + CAS cycle, and a busy mutex means
// another party is already applying the same time-driven transitions, so it is skipped.
// Stop() is called when terminating: no new tick starts afterwards.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "server/group_service.h"

namespace rsc {

// One pass: a StreamTick per distinct stream (resharding moves on first), then a Tick per
// group; stops early once `stopped()` says so. Returns groups written. The simulator's
// coordinators run this same pass from their worker fiber.
int TickPass(GroupService& service, const std::function<bool()>& stopped);

class TickLoop {
 public:
  TickLoop(GroupService& service, std::chrono::milliseconds interval);
  ~TickLoop();
  void Start();
  void Stop();  // idempotent; waits for a tick in progress to finish
  // One pass over all groups (also used by tests). Returns groups written.
  int RunOnce();

 private:
  void Run();

  GroupService& service_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rsc
