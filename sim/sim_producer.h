#pragma once
// SimProducer: one incarnation of a producer process — the library's producer runtime as
// shipped (client::ProducerRuntime: the ProducerCore's routing cache and lease, PR1–PR5,
// refresh rounds endpoint by endpoint, C6, routing at one instant, what an XADD's reply
// means) over simulated ports: the simulated HTTP network with the client's timeout, XADD on
// the simulated Redis, and a local monotonic clock that only jumps forward. This file holds
// only those ports, the workload below and the history recording.
//
// The workload: a few keys per producer, each with its own sequence number; a key's next
// message is published only once the previous one was acknowledged (a failed or unknown
// XADD is retried with the same sequence number, so duplicates are possible, reordering is
// not). A publish is attempted only when Route() succeeds; a refused Route() is recorded.
//
// History: kStart, kPublish when an XADD is acknowledged (t = when it was SENT, with the
// routing lease end the producer believed in then), kPublishRefused when the core fails
// closed, kStop/kCrash.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "client/producer_runtime.h"
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

class SimProducer : public client::ProducerPorts {
 public:
  SimProducer(Services& env, const ProducerParams& params, ProducerSlot& slot);
  SimProducer(const SimProducer&) = delete;
  SimProducer& operator=(const SimProducer&) = delete;

  void Start();
  void Crash(const std::string& why);
  void JumpClock(TimeMs forward_ms);
  void StopPublishing() { publishing_ = false; }
  bool dead() const { return dead_; }
  const std::string& name() const { return name_; }

  // ── client::ProducerPorts ──
  TimeMs NowMs(bool round_up) override;
  void Http(uint64_t call, const client::HttpCall& request) override;
  double Random() override;
  void SaveVersion(const ObservedVersion& version) override;
  void ObserveRouting(const RoutingResponse& answer, TimeMs sent_ms) override;
  void BeforeRouting(RoutingResponse& answer) override;

 private:
  TimeMs LocalNow() const;
  HistEvent Event(HistKind kind) const;
  void Tick();
  void ArmTimer();
  void SchedulePublish();
  void PublishOne();

  Services& env_;
  const ProducerParams& p_;
  ProducerSlot& slot_;
  const std::string name_;
  TimeMs offset_;
  client::ProducerRuntime runtime_;
  bool dead_ = false;
  bool publishing_ = true;
  std::set<uint64_t> http_in_flight_;
  uint64_t timer_gen_ = 0;
  std::optional<TimeMs> timer_at_;
  std::set<std::string> in_flight_;  // keys with an XADD outstanding
  uint64_t conn_epoch_ = 0;
};

}  // namespace rsc::sim
