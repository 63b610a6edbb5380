#pragma once
// SimProducer: one incarnation of a producer process — the library's rsc::Producer as shipped
// (src/client/producer.cc: its refresh thread, its publish path with the routing-lease check
// right before each pipeline, its locks and waits, over client::ProducerRuntime and
// client::PublishCall) made on a simulated platform (client/platform.h): fibers that park in
// simulated time (sim/fiber.h, sim/fiber_sync.h) for its threads, the simulated HTTP network
// with the client's timeout, the XADDs in wire form on the simulated Redis (sim/wire_redis.h),
// a version store in the process's slot, and a local monotonic clock that only jumps forward.
// This file holds only those ports, the application below and the history recording.
//
// The application: two publishing threads (fibers) per process, over a few keys each with its
// own sequence number; a call publishes one to three keys, and a key's next message is
// published only once the call that carried the previous one ended with it written (a failed
// or unknown XADD is published again later with the same sequence number, so duplicates are
// possible, reordering is not).
//
// History: kStart, kPublish for each entry written (reported by the producer's on_publish
// hook; t = when its XADD was SENT, with the routing lease end of the route it went by),
// kPublishRefused for each entry a call ended without writing (detail: the error code),
// kRouting for each routing answer, kStop/kCrash.
//
// A crash: nothing the process does reaches the network, Redis, its version store or the
// history from then on; its fibers are woken, find every port failing at once, and end (the
// producer is closed by a fiber of its own, so its refresh thread returns).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rsc/producer.h"
#include "sim/fiber_group.h"
#include "sim/fiber_sync.h"
#include "sim/services.h"

namespace rsc::sim {

struct ProducerParams {
  GroupKey group;
  int endpoint_count = 1;
  TimeMs http_timeout_ms = 2000;
  TimeMs publish_min_ms = 20;
  TimeMs publish_max_ms = 200;
  int keys = 4;
};

struct ProducerSlot {
  int index = 0;
  std::string node;  // "producer-<index>"
  int incarnations = 0;
  bool version_store = false;
  // Routes by the stream (GET /v1/streams/{P}/routing, D4) rather than by the group: every
  // odd slot, so runs with two or more producers mix both kinds.
  bool by_stream = false;
  ObservedVersion stored;
  std::map<std::string, int64_t> next_seq;  // per key: next sequence number to publish
};

class SimProducer {
 public:
  SimProducer(Services& env, const ProducerParams& params, ProducerSlot& slot);
  // The end of the run (no event runs any more): every fiber is resumed until it ends.
  ~SimProducer();
  SimProducer(const SimProducer&) = delete;
  SimProducer& operator=(const SimProducer&) = delete;

  void Start();
  void Crash(const std::string& why);
  void JumpClock(TimeMs forward_ms);
  void StopPublishing() { publishing_ = false; }
  bool dead() const { return dead_; }
  // The library's producer (the metrics scrape registers it).
  const Producer& producer() const { return *producer_; }
  const std::string& name() const { return name_; }

 private:
  class Platform;  // client::Platform over the simulation
  class Executor;  // redis::Executor: the XADDs in wire form
  class Store;     // VersionStore: the slot's saved version

  TimeMs LocalNow() const;
  HistEvent Event(HistKind kind) const;
  void PublisherMain();
  void PublishOne();
  // The producer's on_publish hook: one entry written.
  void OnPublished(const PublishEvent& event);
  // Probes of what the producer's metrics show changed.
  void NoteMetrics();

  Services& env_;
  const ProducerParams& p_;
  ProducerSlot& slot_;
  const std::string name_;
  FiberGroup fibers_;  // every fiber of the process (killed at a crash)
  FiberSync sync_;     // the producer's locks and waits
  TimeMs offset_;
  const int endpoint_rotation_;  // the process lists coordinator i as its endpoint i - this
  bool dead_ = false;
  bool publishing_ = true;
  std::set<std::string> in_flight_;  // keys of a call in progress
  // The write in progress (one at a time: the producer holds its Redis lock): when it was
  // sent, and the local clock's offset then (a lease end is turned into simulated time as
  // the producer believed it when it wrote; a clock jump before the reply must not move it).
  TimeMs write_sent_ = 0;
  TimeMs write_offset_ = 0;
  int64_t seen_seal_waits_ = 0;
  int64_t seen_sync_adoptions_ = 0;

  std::unique_ptr<Producer> producer_;  // the library's, on Platform
};

}  // namespace rsc::sim
