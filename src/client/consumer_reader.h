#pragma once
// ShardReader: the reader thread of one shard of a consumer (docs/consumer.md §3). It owns a
// Redis connection and performs, for one `start` action of the ConsumerCore:
//
//   wait for the previous reader of the shard to finish (never two readers on one shard)
//   XGROUP CREATE <stream> <G> 0 MKSTREAM        (BUSYGROUP ignored)
//   XAUTOCLAIM <stream> <G> <me> 0 0-0 ... JUSTID  until the cursor is 0-0   (C7 takeover;
//       XPENDING + XCLAIM when the server does not know XAUTOCLAIM)
//   XREADGROUP ... STREAMS <stream> 0, 1-2, ...  (our pending entries: the claimed ones first)
//   XREADGROUP ... BLOCK min(block, ReadBudgetMs) STREAMS <stream> >      (new entries)
//   XPENDING <stream> <G> - + 1   after each non-empty read of new entries (and every
//       second while idle): if the group's lowest pending entry belongs to another consumer
//       name, a previous owner's read reached Redis after our takeover and took entries
//       nobody will handle; the reader claims them (the takeover again) and reads its
//       pending list from the start before handling anything newer, so per-key order holds.
//
// The takeover and every read are issued only while the lease runs (ReadBudgetMs > 0).
// Each batch is handed to the handler in order and the completed entries are XACKed
// together after the batch. After any Redis failure the reader reconnects (with backoff)
// and starts over from the group creation, so entries delivered to it but not yet handled
// (a lost XREADGROUP reply) are re-read from its pending list, never stranded.
//
// Two ways to end, both driven by the runtime's coordinator thread:
// * Drain(): no new reads; the batch in flight is finished and XACKed; then
//   host->OnDrained(this) is called once from the reader thread and the thread ends.
// * Abandon(reason): no further handler calls, no XACK; a Redis command in flight is cut
//   (RedisConn::Interrupt), so the thread ends as soon as the current handler call, if
//   any, returns. Nothing is reported to the host but the release event.
// Either way the reader also stops handling a batch once host->MayProcess says the
// assignment lease has ended (C4), before the core's abandon arrives.
//
// Observability (config.observe): the reader reports ConsumerEvents through host->Observe:
// kAcquire before its first Redis read (after the predecessor finished), kRead before each
// read command, kDeliver before each handler call, kAck after each confirmed XACK, and
// kRelease once nothing more is read or handled — before OnDrained on a drain, at the end
// of the thread on an abandon. A reader that never acquired (stopped while waiting for its
// predecessor) reports neither.
//
// Thread safety: Drain, Abandon, Finished and Join may be called from any thread. The
// ReaderHost and the DeliveryStats must outlive the reader (the runtime joins every reader
// before it destroys them). Lock order: a host lock may be held when calling Drain/Abandon;
// the reader never calls the host while holding its own mutex.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/redis_conn.h"
#include "rsc/consumer.h"

namespace rsc::client {

// Delivery counters shared by all readers of one consumer.
struct DeliveryStats {
  std::atomic<int64_t> handled{0};
  std::atomic<int64_t> acked{0};
  std::atomic<int64_t> claimed{0};
  // Times a reader found entries pending for another consumer name after its takeover
  // (a previous owner's late read) and claimed them back (ShardReader::ForeignPending).
  std::atomic<int64_t> foreign_claims{0};
  std::atomic<int64_t> handler_failures{0};
  std::atomic<int64_t> dead_lettered{0};

  void SetHandlerError(std::string e);
  void SetRedisError(std::string e);
  std::string handler_error() const;
  std::string redis_error() const;

 private:
  mutable std::mutex mu_;
  std::string last_handler_error_;  // guarded by mu_
  std::string last_redis_error_;    // guarded by mu_
};

class ShardReader;

// What a reader needs from the runtime. Called from reader threads; must be thread-safe.
class ReaderHost {
 public:
  virtual ~ReaderHost() = default;
  // How long a read of `shard` issued now may block; 0 = it must not read now (the core's
  // ReadBudgetMs: READING and inside the lease).
  virtual int64_t ReadBudgetMs(int32_t shard) = 0;
  // Whether work already read may still be handled and XACKed: the lease has not ended.
  virtual bool MayProcess(int32_t shard) = 0;
  // The drain asked for by Drain() is complete (in-flight work finished and XACKed).
  virtual void OnDrained(ShardReader* reader) = 0;
  // HandlerErrorPolicy::kStop: the handler failed max_attempts times on one message.
  virtual void OnHandlerGaveUp(int32_t shard, const std::string& error) = 0;
  // An observability event (only with ReaderConfig::observe). t_us is stamped; for
  // kAcquire the host fills in the lease (assignment_epoch, lease_end_us).
  virtual void Observe(ConsumerEvent event) = 0;
};

struct ReaderConfig {
  int32_t shard = 0;
  std::string stream;  // from routing
  std::string group;   // G: the Redis consumer group
  std::string consumer_name;
  RedisTarget redis;
  std::chrono::milliseconds redis_timeout{2000};
  int max_batch = 100;
  std::chrono::milliseconds block{1000};
  HandlerErrorPolicy policy = HandlerErrorPolicy::kRetry;
  int max_attempts = 3;
  std::chrono::milliseconds retry_initial{50};
  std::chrono::milliseconds retry_max{2000};
  std::string dead_letter_stream;
  bool observe = false;  // report ConsumerEvents to host->Observe
};

class ShardReader {
 public:
  // `handler`, `host` and `stats` must outlive the reader. `predecessor` (may be null) is
  // the previous reader of the same shard: this one reads nothing until it has finished.
  ShardReader(ReaderConfig config, const MessageHandler* handler, ReaderHost* host,
              DeliveryStats* stats, std::shared_ptr<ShardReader> predecessor);
  ~ShardReader();  // Abandon() + Join()
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  void Start();
  void Drain();
  // `reason` becomes the detail of the release event ("abandoned", "fenced", "shutdown").
  void Abandon(std::string reason = "abandoned");
  bool Finished() const;
  // Waits until the thread ended, or `timeout` passed (false).
  bool WaitFinished(std::chrono::milliseconds timeout) const;
  void Join();

  int32_t shard() const { return config_.shard; }
  bool drain_requested() const;

 private:
  struct Entry {
    std::string id;
    bool deleted = false;  // listed in the pending list but trimmed from the stream
    StreamFields fields;
  };
  enum class Stage { kSetup, kPending, kLive };
  enum class Outcome { kDone, kDeadLettered, kGaveUp };
  enum class End { kDrained, kAbandoned };

  void Run();
  End RunLoop();
  bool WaitForPredecessor();
  bool Setup();
  bool CreateGroup();
  bool TakeOver();
  bool TakeOverWithXclaim();
  // Whether the group's lowest pending entry on the stream belongs to another consumer
  // name (*foreign). False on a Redis failure.
  bool ForeignPending(bool* foreign);
  bool Read(Stage stage, int64_t budget_ms, std::vector<Entry>* batch, bool* no_group);
  void Process(const std::vector<Entry>& batch, bool* interrupted);
  Outcome Handle(const Entry& entry);
  bool DeadLetter(const Entry& entry, const std::string& error, int attempts);
  bool Ack(const std::vector<std::string>& ids);
  void RedisFailed(const std::string& error);
  // Observability: stamps and reports an event of this shard (no-op unless observing).
  void Emit(ConsumerEventKind kind, std::string id = {}, std::string detail = {},
            const StreamFields* fields = nullptr, int attempt = 0);

  bool Stopping() const;  // Drain or Abandon requested
  bool Abandoned() const;
  // Sleeps up to `d`, or until Drain/Abandon. False if it was woken by them.
  bool Pause(std::chrono::milliseconds d);

  const ReaderConfig config_;
  const MessageHandler* const handler_;
  ReaderHost* const host_;
  DeliveryStats* const stats_;
  std::shared_ptr<ShardReader> predecessor_;  // reset once it finished (reader thread only)

  // Used by the reader thread only.
  RedisConn redis_;
  std::string pending_cursor_ = "0";
  // When ForeignPending last ran; an idle live shard runs it every kIdleForeignCheck.
  std::chrono::steady_clock::time_point last_foreign_check_{};
  static constexpr std::chrono::milliseconds kIdleForeignCheck{1000};
  bool halted_ = false;    // kStop gave up: read nothing more, wait for the drain
  bool acquired_ = false;  // kAcquire was reported (so a kRelease is due)

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool drain_ = false;          // guarded by mu_
  bool abandon_ = false;        // guarded by mu_
  std::string abandon_reason_;  // guarded by mu_
  bool finished_ = false;       // guarded by mu_
  std::mutex join_mu_;          // serializes Join
  std::thread thread_;
};

}  // namespace rsc::client
