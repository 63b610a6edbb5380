#pragma once
// SimProducer: one incarnation of a producer process — the REAL ProducerCore (routing cache,
// lease, PR1–PR5) driven by a simulated runtime that mirrors src/client/producer.cc:
// routing refreshes over HTTP tried endpoint by endpoint (C6), XADD to the routed shard's
// stream, and a local monotonic clock that only jumps forward.
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

#include "client/producer_core.h"
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
  ObservedVersion stored;
  std::map<std::string, int64_t> next_seq;  // per key: next sequence number to publish
};

class SimProducer {
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

 private:
  struct Refresh {
    uint64_t id = 0;
    TimeMs sent_local = 0;
    int endpoint = 0;
    int attempt = 0;
    ObservedVersion observed;
  };

  TimeMs LocalNow() const;
  HistEvent Event(HistKind kind) const;
  void ArmTimer();
  void OnTimer();
  void StartRefresh(const ObservedVersion& observed, int endpoint, int attempt);
  void OnRefreshOutcome(uint64_t id, const HttpResponse* resp);
  void SchedulePublish();
  void PublishOne();

  Services& env_;
  const ProducerParams& p_;
  ProducerSlot& slot_;
  const std::string name_;
  TimeMs offset_;
  client::ProducerCore core_;
  bool dead_ = false;
  bool publishing_ = true;
  std::optional<Refresh> refresh_;
  uint64_t refresh_seq_ = 0;
  int endpoint_ = 0;
  uint64_t timer_gen_ = 0;
  std::optional<TimeMs> timer_at_;
  std::set<std::string> in_flight_;  // keys with an XADD outstanding
  uint64_t conn_epoch_ = 0;
};

}  // namespace rsc::sim
