#pragma once
// SimConsumer: one incarnation of a consumer process — the library's rsc::Consumer as shipped
// (src/client/consumer.cc: its timer and HTTP threads, its locks, version saves and events,
// the bounded handler pool of handler_pool.cc, over client::ConsumerRuntime: the
// ConsumerCore, one ReaderCore per shard, routing, drains, abandons, the heartbeat's wire
// form) made by the library's factory (ConsumerAccess::Create: the option checks and the
// version store's load, as Consumer::Create) on a simulated Platform (client/platform.h):
// fibers that park in simulated time (sim/fiber_group.h, sim/fiber_sync.h) for its threads,
// the simulated HTTP network with the client's timeout (a lost or late answer is
// UNKNOWN_RESULT, C6), its reader connections the library's ReaderRedis and NodeCore over the
// simulated Redis or cluster (sim/sim_reader_net.h), handlers that take simulated time, a per-slot
// VersionStore (C5) and a local monotonic clock that only jumps forward. This file holds only that
// platform, the handlers and BUGGIFY points of a client (slow, hung and stuck handlers) and the
// history recording (from the runtime's seams, which the facade passes on to the platform).
//
// History it records (sim/history.h): kStart, kHeartbeat for every outcome of a heartbeat
// (answer, error or timeout; sent_us = send time), kLease whenever the lease end changes
// (also when a clock jump moves it in global time), and the reader core's events: kAcquire,
// kRead per claim/read command (also the XPENDING late-read check), kDeliver per handler
// call handed out (a call still waiting for a handler thread when its shard is abandoned is
// withdrawn and never runs: the entry stays pending and is delivered again), kAck per id
// once XACK is confirmed, kRelease when a reader is done (after its last
// handler call returned and its last command came back); kStop after a clean exit, kCrash
// when killed.
//
// A reader that is abandoned stops handing out entries at once, but a running handler call
// finishes (it cannot be interrupted) and a command already sent comes back before the
// reader counts as released — so the release time is honest.
//
// A crash freezes the process: from then on nothing of it runs (no event resumes its fibers)
// and nothing it would do reaches the network, Redis, its version store or the history. At
// the end of the run its fibers are torn down (FiberGroup::RunToEnd): every port fails at
// once, every wait ends early and the local clock moves a day at every read, so the facade's
// Stop() finds every deadline of the runtime due and returns within the same instant.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/consumer_runtime.h"
#include "rsc/consumer.h"
#include "rsc/version_store.h"
#include "sim/fiber_group.h"
#include "sim/fiber_sync.h"
#include "sim/services.h"
#include "sim/sim_reader_net.h"

namespace rsc::sim {

struct ConsumerParams {
  GroupKey group;  // stream prefix P and consumer group G (also the Redis group name)
  int endpoint_count = 1;
  TimeMs http_timeout_ms = 2000;
  int max_batch = 10;
  TimeMs block_ms = 1000;
  bool pipelined = false;  // ConsumerPorts::PipelinesLiveReads
  TimeMs handler_min_ms = 1;
  TimeMs handler_max_ms = 20;
  TimeMs member_lease_ms = 10000;       // the group's, to size a hung handler
  TimeMs rebalance_timeout_ms = 30000;  // the group's, to size a hung handler
  TimeMs shutdown_timeout_ms = 10000;
  TimeMs backoff_initial_ms = 100;
  TimeMs backoff_max_ms = 2000;
};

// What survives a consumer's restarts: its address, identity policy and version store.
struct ConsumerSlot {
  int index = 0;
  std::string node;  // "consumer-<index>"
  int incarnations = 0;
  std::string instance_id;  // "" = dynamic membership
  bool version_store = false;
  ObservedVersion stored;
  int endpoint_offset = 0;  // endpoint i of the core is coordinator slot (i + offset) % n
};

class SimConsumer {
 public:
  SimConsumer(Services& env, const ConsumerParams& params, ConsumerSlot& slot);
  // The end of the run (no event runs any more): the process's fibers are torn down.
  ~SimConsumer();
  SimConsumer(const SimConsumer&) = delete;
  SimConsumer& operator=(const SimConsumer&) = delete;

  void Start();
  void Crash(const std::string& why);
  // A clean shutdown: Consumer::Stop() on a fiber of its own.
  void Shutdown();
  void JumpClock(TimeMs forward_ms);

  bool dead() const { return dead_; }
  bool shutting_down() const { return stop_asked_ || runtime().shutting_down(); }
  const std::string& name() const { return name_; }
  const std::string& member() const { return member_; }
  const client::ConsumerCore& core() const { return runtime().core(); }
  // The library's consumer (the metrics scrape registers it).
  const Consumer& consumer() const { return *consumer_; }
  // Shards with a reader that is not yet released (for end-of-run reports).
  std::vector<int32_t> HeldShards() const;

 private:
  class Platform;  // client::Platform over the simulation
  class Readers;   // client::ReaderPort: the library's ReaderRedis over SimReaderNet
  class Store;     // VersionStore: the slot's saved version

  // What the simulator keeps per reader (the runtime keeps the reader itself).
  struct ReaderNote {
    client::ReaderCommandKind kind = client::ReaderCommandKind::kCreateGroup;  // the last sent
    bool checks = false;    // it carries the late-read check
    int64_t lease_us = -1;  // the lease end last recorded for its window, µs
    // When its grant ended, in global µs, taken at the abandon: a later clock jump must not
    // move it (local times convert with the offset of the moment).
    int64_t abandon_lease_us = -1;
    int jumps_at_abandon = 0;
  };
  // The handler calls of one shard (one at a time: the facade never runs two readers of a
  // shard, and a reader hands out one call at a time).
  struct ShardHandler {
    bool running = false;
    TimeMs hang_until = 0;       // the running call returns no earlier than this (global)
    bool hang_in_drain = false;  // BUGGIFY consumer.stuck_drain: the drain's next call hangs
  };

  const client::ConsumerRuntime& runtime() const;
  TimeMs LocalNow() const;
  // The clock the facade reads: local time; while tearing down, a day later at every read.
  TimeMs ClockRead();
  int Endpoint(int index) const;
  int64_t GlobalUs(TimeMs local) const { return (local - offset_) * 1000; }
  HistEvent Event(HistKind kind) const;

  // The application's handler (on a handler fiber).
  HandlerResult HandleMessage(const Message& message);
  TimeMs StuckForMs();

  // The runtime's seams (under the facade's lock).
  void AfterInput(const client::ConsumerRuntime& runtime);
  void RecordLeases(const client::ConsumerRuntime& runtime);
  void OnReaderStopping(const client::ConsumerRuntime& runtime, uint64_t reader, bool abandon,
                        client::AbandonCause cause);
  void Observe(const client::ConsumerRuntime& runtime, uint64_t reader, const ConsumerEvent& event);
  void ObserveHeartbeat(const ConsumerEvent& event);
  // The reader connections' answers, before the facade takes them in.
  void OnReaderAnswers(std::vector<client::ReaderAnswer>& answers);

  Services& env_;
  const ConsumerParams& p_;
  ConsumerSlot& slot_;
  const std::string name_;
  const std::string member_;
  FiberGroup fibers_;  // every fiber of the process (frozen at a crash)
  FiberSync sync_;     // the facade's locks and waits
  TimeMs offset_;      // local monotonic = global + offset_ (only grows)
  TimeMs teardown_ms_ = 0;
  bool dead_ = false;
  bool stop_asked_ = false;
  int clock_jumps_ = 0;
  TimeMs heartbeat_sent_ = 0;   // global ms: when the heartbeat in flight was sent
  int64_t last_lease_us_ = -1;  // the last member lease end, global µs (capped when dropped)
  std::map<uint64_t, ReaderNote> ports_;
  std::map<int32_t, ShardHandler> handlers_;
  std::set<uint64_t> own_checked_;      // readers whose check found our own entry below its batch
  Readers* readers_ = nullptr;          // the port the facade opened (owned by it)
  std::unique_ptr<Consumer> consumer_;  // the library's, on Platform
};

}  // namespace rsc::sim
