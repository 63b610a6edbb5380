#pragma once
// SimConsumer: one incarnation of a consumer process — the REAL ConsumerCore and the REAL
// per-shard ReaderCore (client/reader_core.h, the state machine the library's reader threads
// drive) over simulated ports: heartbeats over the simulated HTTP network with a timeout (a
// lost or late answer is UNKNOWN_RESULT, C6), reader commands against the simulated Redis
// (sim/streams.h), handlers that take simulated time, a per-slot VersionStore (C5), and a
// local monotonic clock that only jumps forward. What remains here mirrors the library's
// runtime thread (src/client/consumer.cc): applying the core's actions, routing look-ups,
// one reader per started shard that waits for the previous one, and recording history.
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

#include "client/consumer_core.h"
#include "client/reader_core.h"
#include "rsc/version_store.h"
#include "sim/services.h"

namespace rsc::sim {

struct ConsumerParams {
  GroupKey group;  // stream prefix P and consumer group G (also the Redis group name)
  int endpoint_count = 1;
  TimeMs http_timeout_ms = 2000;
  int max_batch = 10;
  TimeMs block_ms = 1000;
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
  SimConsumer(const SimConsumer&) = delete;
  SimConsumer& operator=(const SimConsumer&) = delete;

  void Start();
  void Crash(const std::string& why);
  void Shutdown();
  void JumpClock(TimeMs forward_ms);

  bool dead() const { return dead_; }
  bool shutting_down() const { return shutting_down_; }
  const std::string& name() const { return name_; }
  const std::string& member() const { return member_; }
  const client::ConsumerCore& core() const { return core_; }
  // Shards with a reader that is not yet released (for end-of-run reports).
  std::vector<int32_t> HeldShards() const;

 private:
  enum class Cause { kOther, kLeaseEnd, kFenced };
  // One shard reader: the library's ReaderCore, driven over the simulated ports. It is also
  // the core's ReaderContext.
  struct Reader : client::ReaderContext {
    SimConsumer* owner = nullptr;
    uint64_t id = 0;
    int32_t shard = 0;
    uint64_t predecessor = 0;
    std::unique_ptr<client::ReaderCore> core;
    bool done = false;
    int64_t abandoned_lease_us = -1;  // when its grant ended (the abandon), µs
    int64_t lease_us = -1;            // the lease end last recorded for its window, µs
    bool op_in_flight = false;
    uint64_t op_seq = 0;
    bool handler_running = false;
    TimeMs hang_until = 0;       // the running handler call returns no earlier than this (global)
    bool hang_in_drain = false;  // BUGGIFY consumer.stuck_drain: the drain's next call hangs
    bool sleeping = false;
    uint64_t sleep_gen = 0;
    uint64_t conn_epoch = 0;

    int64_t ReadBudgetMs(int32_t s) override;
    bool MayProcess(int32_t s) override;
    TimeMs NowMs() override;
    void OnHandlerGaveUp(int32_t s, const std::string& error) override;
    void Observe(ConsumerEvent event) override;
  };
  struct InFlightHeartbeat {
    uint64_t id = 0;
    TimeMs sent = 0;  // global
    bool leave = false;
  };

  TimeMs LocalNow() const;
  int Endpoint(int index) const;
  int64_t GlobalUs(TimeMs local) const { return (local - offset_) * 1000; }
  HistEvent Event(HistKind kind) const;
  Cause LeaseCause() const;
  void Apply(const client::ConsumerActions& a, Cause cause);
  void AfterCoreEvent();
  void ArmTimer();
  void SendHeartbeat(const client::SendHeartbeat& s);
  void OnHeartbeatReply(uint64_t id, const HttpResponse& resp);
  void OnHeartbeatTimeout(uint64_t id);
  void EmitHeartbeat(TimeMs sent, const std::string& status, int64_t version,
                     const std::string& lineage, int64_t epoch, bool leave, int64_t grant_ms = -1,
                     std::string assigned = "");
  void RequestRouting();

  Reader* Find(uint64_t id);
  Reader* Current(int32_t shard);
  void StartReader(int32_t shard);
  void Step(uint64_t id);
  void StepSoon(uint64_t id);
  void Drain(Reader& r);
  void Abandon(Reader& r, const std::string& reason);
  void CancelSleep(Reader& r);
  void Finish(Reader& r, bool drained);
  void SleepReader(Reader& r, TimeMs ms);
  void StartHandler(Reader& r, const Message& message);
  void OnHandlerReturned(uint64_t id);
  TimeMs StuckForMs();
  void SendCommand(Reader& r, const client::ReaderCommand& command);
  void Observe(Reader& r, const ConsumerEvent& event);
  void Exit();

  Services& env_;
  const ConsumerParams& p_;
  ConsumerSlot& slot_;
  const std::string name_;
  const std::string member_;
  const std::string base_path_;
  TimeMs offset_;  // local monotonic = global + offset_ (only grows)
  client::ConsumerCore core_;
  bool dead_ = false;
  bool shutting_down_ = false;
  bool exiting_ = false;
  std::optional<InFlightHeartbeat> hb_;
  uint64_t hb_seq_ = 0;
  uint64_t timer_gen_ = 0;
  std::optional<TimeMs> timer_at_;
  int64_t last_lease_us_ = -1;
  std::map<int32_t, std::string> streams_;  // from routing (never computed, C7)
  std::set<int32_t> unrouted_;              // started by the core, waiting for their stream key
  client::DeliveryStats stats_;
  bool routing_in_flight_ = false;
  uint64_t routing_seq_ = 0;
  uint64_t next_reader_ = 1;
  std::map<uint64_t, std::unique_ptr<Reader>> readers_;
  std::map<int32_t, uint64_t> current_;  // shard -> its newest reader
  TimeMs same_ms_ = -1;
  int same_ms_ticks_ = 0;
};

}  // namespace rsc::sim
