#pragma once
// SimCoordinator: one incarnation of a coordinator process running the REAL request path —
// the HTTP Api (routing, validation, ShutdownGate), GroupService (local monitor → Redis
// mutex → load → decide → CAS → respond) and the pure core — over the simulated Redis.
//
// How it runs: requests queue up and a few worker fibers (sim/fiber.h; CoordContext::
// workers, 1–4) take them in order, like a coordinator's worker threads: while one is parked
// in a Redis call another takes the next request, so a group's heartbeats queue up behind
// the one deciding a batch and are decided as the next batch (GroupService's group commit,
// batches larger than one), and ticks run beside requests. The group monitors and the
// heartbeat queue park fibers instead of blocking a thread (sim/fiber_sync.h). GroupService's
// store calls go through
// CoordStore (sim_coordinator.cc), a MetadataStore whose every call crosses the simulated
// network to SimRedis: latency makes simulated time pass inside the critical section (the
// fiber parks), so other coordinators interleave, mutexes expire under slow holders and
// CASes conflict for real. CoordStore is also where the process can die at the write
// boundaries — after taking the mutex, right before the CAS, after the CAS before the
// answer — and where a CAS can apply with its reply lost (UNKNOWN_RESULT).
//
// A crashed incarnation stops having effects at once: every later store call fails
// without reaching Redis (so GroupService unwinds, and the mutex it held stays until its
// TTL), and no answer is sent. Its fiber is unwound later, and the object is kept until the
// end of the run because scheduled events may still name it.
//
// What it records (sim/history.h): kStart/kStop/kCrash, kMutexEnter (mutex granted) and
// kMutexExit (unlock sent, or death), kDecision for every heartbeat/leave/routing answer
// it sends (with the stored version and the revision the answer derives from, and digests
// of request and answer), kCommit is recorded by SimRedis when a write applies. In a batch,
// each heartbeat's facts are those of its own decision (the state after the decisions
// before it), taken by a Decider wrapper, and the revision is the batch's write.

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/api.h"
#include "server/group_service.h"
#include "server/metrics.h"
#include "server/shutdown_gate.h"
#include "sim/fiber.h"
#include "sim/fiber_sync.h"
#include "sim/network.h"
#include "sim/sim_cluster.h"
#include "sim/sim_redis.h"
#include "sim/world.h"

namespace rsc::sim {

// Simulated time 0 on the coordinators' wall clocks (2023-11-14).
inline constexpr TimeMs kWallEpochMs = 1'700'000'000'000;

struct CoordContext {
  World* world = nullptr;
  SimRedis* redis = nullptr;
  SimCluster* cluster = nullptr;  // the cluster the readers see (D2's placement), or null
  Network* net = nullptr;
  GroupKey group;
  GroupServiceOptions service;
  TimeMs tick_interval_ms = 1000;
  TimeMs redis_timeout_ms = 1000;  // a lost Redis reply is noticed after this
  TimeMs grace_ms = 5000;          // terminating: exit at the latest after this
  int workers = 1;                 // worker fibers per process
  // The incarnation ended (crash or clean exit). Called from inside the process (maybe its
  // fiber): it may only schedule events.
  std::function<void(int slot)> on_exit;
};

struct HttpCall {
  HttpRequest request;
  // Sends the answer back (called by the worker; routes it through the network).
  std::function<void(const HttpResponse&)> reply;
};

class SimCoordinator {
 public:
  SimCoordinator(CoordContext& ctx, int slot, int incarnation, TimeMs skew_ms);
  ~SimCoordinator();
  SimCoordinator(const SimCoordinator&) = delete;
  SimCoordinator& operator=(const SimCoordinator&) = delete;

  const std::string& name() const { return name_; }
  const std::string& node() const { return node_; }
  int slot() const { return slot_; }
  // Running and not yet exited (it may be terminating).
  bool alive() const { return !crashed_ && !exited_; }
  bool terminating() const { return terminating_; }
  // Inside a request or tick (a worker is not waiting for work).
  bool busy() const;

  // ── scheduler side ──
  void Receive(HttpCall call);
  // SIGTERM: new requests get 503 COORDINATOR_TERMINATING, queued ones finish, then exit.
  void Terminate();
  void Crash(const std::string& why);
  void set_skew(TimeMs skew_ms) { skew_ms_ = skew_ms; }
  // The process stalls (a GC pause, a descheduled VM) right before its next CAS.
  void Stall(TimeMs ms) { stall_ms_ += ms; }
  TimeMs skew() const { return skew_ms_; }
  // End of the run: unwinds the worker without further effects.
  void Teardown();

 private:
  class Store;
  class Recorder;
  class SkewedClock : public Clock {
   public:
    explicit SkewedClock(SimCoordinator& c) : c_(c) {}
    // Wall-clock ms since the epoch: a fixed date plus simulated time plus this process's
    // skew (bounded, see SimParams::skew_bound_ms).
    TimeMs NowMs() override { return kWallEpochMs + c_.ctx_.world->now() + c_.skew_ms_; }

   private:
    SimCoordinator& c_;
  };
  class Tokens : public TokenSource {
   public:
    explicit Tokens(World& w) : w_(w) {}
    std::string NewToken() override { return w_.rng().Hex(16); }

   private:
    World& w_;
  };
  class Observer;
  class RecordingDecider;
  struct Worker {
    size_t index = 0;
    std::unique_ptr<Fiber> fiber;
    bool idle = true;  // waits for work (not parked in a call)
    bool in_heartbeat = false;
  };

  // The worker whose fiber is running (only callable from a worker fiber).
  Worker& Me();
  int BusyWorkers() const;
  void WorkerMain(Worker& w);
  void Wake();
  void ScheduleTick();
  void RunTick();
  void MaybeExit();
  void Exit();
  void Sleep(TimeMs ms);
  void Emit(HistEvent e);

  CoordContext& ctx_;
  const int slot_;
  const std::string node_;
  const std::string name_;
  TimeMs skew_ms_;
  TimeMs stall_ms_ = 0;
  bool crashed_ = false;
  bool exited_ = false;
  bool terminating_ = false;
  bool exit_requested_ = false;  // the worker loops return
  bool tick_queued_ = false;
  std::deque<std::function<void()>> queue_;

  SkewedClock clock_;
  Tokens tokens_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Observer> observer_;
  std::unique_ptr<FiberSync> sync_;
  std::unique_ptr<FiberSync> tick_sync_;
  std::unique_ptr<SyncPort::Mutex> tick_pass_;  // held by the worker running a tick pass
  std::unique_ptr<RecordingDecider> decider_;
  std::unique_ptr<GroupService> service_;
  std::unique_ptr<Recorder> recorder_;
  ShutdownGate gate_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Api> api_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace rsc::sim
