#pragma once
// SimProducer: one incarnation of a producer process — the library's producer runtime as
// shipped (client::ProducerRuntime: the ProducerCore's routing cache and lease, PR1–PR5,
// refresh rounds endpoint by endpoint, C6, routing at one instant; client::PublishCall: a
// PublishBatch's attempts, what each XADD's reply means, the wait for a newer routing after a
// sealed shard or a missing key refused an entry, RS2, D3) over simulated ports: the
// simulated HTTP network with the client's timeout, the XADDs in wire form on the simulated
// Redis (sim/wire_redis.h), and a local monotonic clock that only jumps forward. This file
// holds only those ports, the workload below and the history recording.
//
// The workload: a few keys per producer, each with its own sequence number; a call publishes
// one to three keys, and a key's next message is published only once the call that carried
// the previous one ended with it written (a failed or unknown XADD is published again later
// with the same sequence number, so duplicates are possible, reordering is not).
//
// History: kStart, kPublish for each entry written (t = when its XADD was SENT, with the
// routing lease end of the route it went by), kPublishRefused for each entry a call ended
// without writing (detail: the error code), kStop/kCrash.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/producer_runtime.h"
#include "client/publish_call.h"
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
  // As Producer::Metrics() reports them (client/client_status.h), for the metrics scrape.
  ProducerMetrics Metrics() const;
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
  // One PublishBatch call in flight: its entries (the call holds views of them).
  struct Call {
    std::vector<std::string> keys;
    std::vector<int64_t> seqs;
    std::vector<StreamFields> fields;
    std::unique_ptr<client::PublishCall> call;
  };
  void Continue(const std::shared_ptr<Call>& call);
  // What one write's replies said: kPublish for each entry written (t = when it was sent;
  // `offset`: the local clock's offset then).
  void Record(Call& call, const client::PublishCall::Outcome& outcome, TimeMs sent, TimeMs offset);
  // The call ended: its keys may go again; each entry not written is recorded refused.
  void Finish(Call& call);

  Services& env_;
  const ProducerParams& p_;
  ProducerSlot& slot_;
  const std::string name_;
  TimeMs offset_;
  // As an application configures the process (client/client_options.h checks and derives).
  const ProducerOptions options_;
  client::ProducerRuntime runtime_;
  int64_t publishes_ok_ = 0;  // entries of finished calls, as Producer counts them
  int64_t publishes_failed_ = 0;
  int64_t seal_waits_ = 0;
  bool dead_ = false;
  bool publishing_ = true;
  std::set<uint64_t> http_in_flight_;
  uint64_t timer_gen_ = 0;
  std::optional<TimeMs> timer_at_;
  std::set<std::string> in_flight_;  // keys with an XADD outstanding
  uint64_t conn_epoch_ = 0;
};

}  // namespace rsc::sim
