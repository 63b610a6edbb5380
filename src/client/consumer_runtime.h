#pragma once
// ConsumerRuntime: the whole consumer runtime as one single-threaded, sans-IO object (issue
// 10). It drives the ConsumerCore (membership, leases, shard states) and one ReaderCore per
// shard being read, and decides everything in between: which reader starts, waits for its
// predecessor, drains or is abandoned (and why), when routing is fetched and from where, the
// heartbeat's wire form and how an answer or an error is read, when a clean shutdown gives
// up, and what is reported. Both the library (consumer.cc, over hiredis, the HTTP transport
// and threads) and the simulator (sim/sim_consumer.cc, over the simulated network, Redis and
// clock) run this class; they differ only in their ConsumerPorts.
//
// Inputs: Start, Shutdown, Tick (timers and clock jumps), OnHttp, OnRedisReply, OnHandled.
// Outputs: calls to the ConsumerPorts (HTTP requests, reader commands, handler calls, saves
// of the observed version, events). A port call never calls back into the runtime
// synchronously; its outcome comes back later through one of the On* inputs, tagged with the
// id the call carried. The runtime is not thread-safe: the driver serialises every call
// (consumer.cc holds one mutex around them) and must call Tick() by NextWakeupMs().
//
// Rules it keeps (docs/consumer.md, docs/protocol.md C1–C8):
// * never two readers of a shard in the process: a new reader of a shard waits until the
//   previous one finished (its last command came back, its last handler call returned);
// * a shard leaves the core's DRAINING state only when its reader really finished — a
//   drained reader after its last XACK, an abandoned one after its in-flight work stopped;
// * shard stream keys come from routing (C7: never computed); a started shard whose key is
//   not known yet waits for it, retried with backoff on another endpoint (C6);
// * a shard that the core abandons while the lease was still valid because the coordinator
//   fenced the member (memberEpoch -1, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) is released
//   as "fenced"; every other abandon is "abandoned" (the lease, or a taken shard's own lease,
//   ended), "shutdown" when a clean leave gave up.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/consumer_core.h"
#include "client/reader_core.h"
#include "client/runtime_ports.h"
#include "core/protocol.h"
#include "rsc/consumer.h"
#include "rsc/version_store.h"

namespace rsc::client {

// Why a reader is abandoned (its release detail, and the simulator's probes).
enum class AbandonCause { kLeaseEnd, kFenced, kOther, kShutdown };

// What the runtime asks of its environment. Called from inside the runtime's inputs.
class ConsumerPorts {
 public:
  virtual ~ConsumerPorts() = default;
  // Local monotonic milliseconds (never decreasing). `round_up`: for lease checks a driver
  // whose clock has sub-millisecond precision rounds up, so a lease is never judged longer
  // than it is.
  virtual TimeMs NowMs(bool round_up) = 0;
  // Sends an HTTP request; the port bounds it by its timeout and answers OnHttp(call, …).
  virtual void Http(uint64_t call, const HttpCall& request) = 0;
  // Sends a reader command; answered by OnRedisReply(reader, …) exactly once.
  virtual void Redis(uint64_t reader, const ReaderCoreConfig& config,
                     const ReaderCommand& command) = 0;
  // Whether Redis() takes a live read with an XACK in front and an XPENDING behind, sent in
  // one pipeline on one connection (ReaderContext::PipelinedLive).
  virtual bool PipelinesLiveReads() { return false; }
  // Calls the handler on another thread/fiber; answered by OnHandled(reader, …).
  virtual void Handle(uint64_t reader, Message message) = 0;
  // The reader is being drained or abandoned: a port may cut its blocking read short.
  virtual void ReaderStopping(uint64_t /*reader*/, bool /*abandon*/, AbandonCause /*cause*/) {}
  // C5: the observed version changed; persist it (a failed save is the port's to retry).
  virtual void SaveVersion(const ObservedVersion& /*version*/) {}
  // An observability event (only with ConsumerRuntimeOptions::observe); t_us is not
  // stamped, times inside are local (NowMs) µs. `reader` is 0 for the runtime's own events.
  virtual void Observe(uint64_t /*reader*/, ConsumerEvent /*event*/) {}
  // Test seam: the simulator's mutants may alter an answer before the core sees it.
  virtual void BeforeAnswer(HeartbeatResponse& /*answer*/, TimeMs /*sent_ms*/) {}
  // Test seam: builds a shard's reader (the simulator's reader mutants replace it).
  virtual std::unique_ptr<ReaderCore> MakeReader(ReaderCoreConfig config, ReaderContext* context,
                                                 DeliveryStats* stats, bool has_predecessor);
  // After every input, once the runtime is quiet (the simulator records history here).
  virtual void AfterInput() {}
};

struct ConsumerRuntimeOptions {
  std::string stream;  // P
  // Every reader's configuration: group G, consumer name, batch, block, handler policy,
  // observe. shard, stream and dead_letter_stream are set per shard.
  ReaderCoreConfig reader;
  std::string dead_letter_suffix = ":dlq";
  TimeMs shutdown_timeout_ms = 15000;
};

// A reader as the driver may see it.
struct ReaderInfo {
  uint64_t id = 0;
  int32_t shard = 0;
  std::string stream;
  bool acquired = false;
  bool draining = false;
  bool abandoned = false;
  bool command_in_flight = false;
};

class ConsumerRuntime {
 public:
  // `ports` and `stats` must outlive the runtime.
  ConsumerRuntime(ConsumerRuntimeOptions options, ConsumerCoreOptions core_options,
                  ConsumerPorts* ports, DeliveryStats* stats);
  ~ConsumerRuntime();
  ConsumerRuntime(const ConsumerRuntime&) = delete;
  ConsumerRuntime& operator=(const ConsumerRuntime&) = delete;

  // ── inputs ──
  void Start();
  // Clean shutdown (C3): drain, report REVOKED, leave; gives up after shutdown_timeout_ms
  // (then every reader is abandoned, "shutdown"). Idempotent.
  void Shutdown();
  // Timers that are due (reader sleeps, the core's heartbeat and lease, routing retries, the
  // shutdown give-up); also after the clock jumped.
  void Tick();
  void OnHttp(uint64_t call, HttpOutcome outcome);
  void OnRedisReply(uint64_t reader, ReaderReply reply);
  void OnHandled(uint64_t reader, const HandlerResult& result);
  // The port withdrew a handler call it had not started (the reader was abandoned first).
  void OnWithdrawn(uint64_t reader);
  // For a port whose handler calls may wait for a thread: whether the call handed out to
  // `reader` may still start now (not abandoned, the shard's lease has not ended, C4).
  bool MayStartHandler(uint64_t reader);

  // ── state ──
  // When Tick() must run next (local ms; max() = only on an input).
  TimeMs NextWakeupMs() const;
  // Left the group (or gave up) and every reader finished: nothing runs any more.
  bool exited() const { return exiting_ && readers_.empty(); }
  bool shutting_down() const { return give_up_at_.has_value(); }
  const ConsumerCore& core() const { return core_; }
  std::vector<ReaderInfo> Readers() const;
  std::optional<ReaderInfo> Reader(uint64_t id) const;
  const std::string& last_error() const { return last_error_; }  // "" after a heartbeat
  const std::string& stop_error() const { return stop_error_; }  // kStop gave up
  // The endpoint of the heartbeat in flight or the next one.
  int endpoint() const { return core_.endpoint(); }

 private:
  struct ReaderState;
  class Context;

  TimeMs Now() const;
  void Apply(const ConsumerActions& actions, std::optional<TimeMs> lease_before,
             AbandonCause cause);
  AbandonCause CauseBefore(std::optional<TimeMs> lease_before) const;
  void SendHeartbeat(const SendHeartbeat& send);
  void OnHeartbeatOutcome(const HttpOutcome& outcome);
  void OnRoutingOutcome(const HttpOutcome& outcome);
  void MaybeFetchRouting();
  void StartRouted();
  void ObserveHeartbeat(const std::optional<HeartbeatResponse>& answer, ErrorCode error,
                        const std::string& message);
  void ObserveLeases(std::optional<TimeMs> lease_before);

  ReaderState* Find(uint64_t id);
  ReaderState* Current(int32_t shard);
  void StartReader(int32_t shard);
  void DrainReader(ReaderState& r);
  void AbandonReader(ReaderState& r, AbandonCause cause);
  void CancelSleep(ReaderState& r);
  void Step(ReaderState& r);
  void FinishReader(ReaderState& r);
  void BeginGiveUp();
  // Runs what the inputs left to do (readers to step, shards to report drained, a stop
  // the handler policy asked for) until nothing is left; then AfterInput.
  void Settle();

  const ConsumerRuntimeOptions options_;
  ConsumerPorts* const ports_;
  DeliveryStats* const stats_;
  const std::string base_path_;
  const int endpoint_count_;
  ConsumerCore core_;

  uint64_t next_call_ = 1;
  std::optional<uint64_t> heartbeat_call_;
  bool heartbeat_leave_ = false;
  int64_t heartbeat_held_epoch_ = -1;
  TimeMs heartbeat_sent_ = 0;
  std::optional<uint64_t> routing_call_;
  TimeMs next_routing_ms_ = 0;
  int routing_failures_ = 0;
  int routing_endpoint_ = 0;

  uint64_t next_reader_ = 1;
  std::map<uint64_t, std::unique_ptr<ReaderState>> readers_;  // unfinished ones
  std::map<int32_t, uint64_t> current_;                       // shard → its newest reader
  std::map<int32_t, std::string> routing_;                    // shard → stream key (C7)
  std::set<int32_t> coordinator_keys_;  // shards whose key an answer's `streams` gave (C9 f)
  std::set<int32_t> unrouted_;          // READING, waiting for their stream key
  std::set<uint64_t> runnable_;
  std::set<std::pair<TimeMs, uint64_t>> sleeps_;  // (until, reader) of sleeping readers
  std::vector<int32_t> drained_;                  // shards to report drained to the core
  std::vector<int32_t> sealed_;                   // shards to report complete (RS3)
  std::set<int32_t> reported_taken_;
  std::optional<TimeMs> give_up_at_;
  bool exiting_ = false;
  bool stop_asked_ = false;  // the handler policy asked for a stop
  bool settling_ = false;
  std::string last_error_;
  std::string stop_error_;
};

}  // namespace rsc::client
