#pragma once
// SimConsumer: one incarnation of a consumer process — the library's consumer runtime as
// shipped (client::ConsumerRuntime: the ConsumerCore, one ReaderCore per shard, routing,
// drains, abandons, the heartbeat's wire form) over simulated ports: heartbeats over the
// simulated HTTP network with a timeout (a lost or late answer is UNKNOWN_RESULT, C6), reader
// commands against the simulated Redis (sim/streams.h), handlers that take simulated time, a
// per-slot VersionStore (C5), and a local monotonic clock that only jumps forward. This file
// holds only those ports, the BUGGIFY points of a client (slow, hung and stuck handlers) and
// the history recording.
//
// History it records (sim/history.h): kStart, kHeartbeat for every outcome of a heartbeat
// (answer, error or timeout; sent_us = send time), kLease whenever the lease end changes
// (also when a clock jump moves it in global time), and the reader core's events: kAcquire,
// kRead per claim/read command (also the XPENDING late-read check), kDeliver per handler
// call, kAck per id once XACK is confirmed, kRelease when a reader is done (after its last
// handler call returned and its last command came back); kStop after a clean exit, kCrash
// when killed.
//
// A reader that is abandoned stops handing out entries at once, but a running handler call
// finishes (it cannot be interrupted) and a command already sent comes back before the
// reader counts as released — so the release time is honest.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/consumer_runtime.h"
#include "rsc/version_store.h"
#include "sim/services.h"
#include "sim/sim_reader_node.h"

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

class SimConsumer : public client::ConsumerPorts {
 public:
  SimConsumer(Services& env, const ConsumerParams& params, ConsumerSlot& slot);
  SimConsumer(const SimConsumer&) = delete;
  SimConsumer& operator=(const SimConsumer&) = delete;

  void Start();
  void Crash(const std::string& why);
  void Shutdown();
  void JumpClock(TimeMs forward_ms);

  bool dead() const { return dead_; }
  bool shutting_down() const { return runtime_.shutting_down(); }
  const std::string& name() const { return name_; }
  const std::string& member() const { return member_; }
  const client::ConsumerCore& core() const { return runtime_.core(); }
  // As Consumer::Status() reports it (client/client_status.h), for the metrics scrape.
  ConsumerStatus Status() const;
  // Shards with a reader that is not yet released (for end-of-run reports).
  std::vector<int32_t> HeldShards() const;

  // ── client::ConsumerPorts: the simulated network, Redis, handlers and clock ──
  TimeMs NowMs(bool round_up) override;
  void Http(uint64_t call, const client::HttpCall& request) override;
  void Redis(uint64_t reader, const client::ReaderCoreConfig& config,
             const client::ReaderCommand& command) override;
  void Handle(uint64_t reader, Message message) override;
  bool PipelinesLiveReads() override { return p_.pipelined; }
  void ReaderStopping(uint64_t reader, bool abandon, client::AbandonCause cause) override;
  void SaveVersion(const ObservedVersion& version) override;
  void Observe(uint64_t reader, ConsumerEvent event) override;
  void BeforeAnswer(HeartbeatResponse& answer, TimeMs sent_ms) override;
  std::unique_ptr<client::ReaderCore> MakeReader(client::ReaderCoreConfig config,
                                                 client::ReaderContext* context,
                                                 client::DeliveryStats* stats,
                                                 bool has_predecessor) override;
  void AfterInput() override;

 private:
  // What the simulated ports keep per reader (the runtime keeps the reader itself).
  struct ReaderPort {
    client::ReaderCommandKind kind = client::ReaderCommandKind::kCreateGroup;  // the last sent
    bool checks = false;  // it carries the late-read check
    bool handler_running = false;
    TimeMs hang_until = 0;       // the running handler call returns no earlier than this (global)
    bool hang_in_drain = false;  // BUGGIFY consumer.stuck_drain: the drain's next call hangs
    int64_t lease_us = -1;       // the lease end last recorded for its window, µs
    // When its grant ended, in global µs, taken at the abandon: a later clock jump must not
    // move it (local times convert with the offset of the moment).
    int64_t abandon_lease_us = -1;
    int jumps_at_abandon = 0;
  };

  void OnReaderAnswers(std::vector<client::ReaderAnswer>& answers);
  TimeMs LocalNow() const;
  int Endpoint(int index) const;
  int64_t GlobalUs(TimeMs local) const { return (local - offset_) * 1000; }
  HistEvent Event(HistKind kind) const;
  void RecordLeases();
  void ArmTimer();
  void OnHandlerReturned(uint64_t reader);
  TimeMs StuckForMs();
  void ObserveHeartbeat(const ConsumerEvent& event);

  Services& env_;
  const ConsumerParams& p_;
  ConsumerSlot& slot_;
  const std::string name_;
  const std::string member_;
  TimeMs offset_;  // local monotonic = global + offset_ (only grows)
  // As an application configures the process (client/client_options.h checks and derives).
  const ConsumerOptions options_;
  client::DeliveryStats stats_;
  client::ConsumerRuntime runtime_;
  SimReaderNode node_;  // the reader connections: the library's NodeCore over simulated Redis
  bool dead_ = false;
  std::set<uint64_t> http_in_flight_;
  int clock_jumps_ = 0;
  TimeMs heartbeat_sent_ = 0;   // global ms: when the heartbeat in flight was sent
  int64_t last_lease_us_ = -1;  // the last member lease end, global µs (capped when dropped)
  std::map<uint64_t, ReaderPort> ports_;
  uint64_t timer_gen_ = 0;
  std::optional<TimeMs> timer_at_;
  TimeMs same_ms_ = -1;
  int same_ms_ticks_ = 0;
};

}  // namespace rsc::sim
