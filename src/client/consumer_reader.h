#pragma once
// ShardReader: the thread that drives one shard's ReaderCore (client/reader_core.h) over a
// hiredis connection of its own, for one `start` action of the ConsumerCore. Every decision —
// the takeover, the stage order, the lease checks, the late-read reclaim, the handler error
// policy, drain and abandon — is the core's (the simulator drives the same core); this file
// only carries its commands to Redis (and parses the replies), calls the handler, sleeps and
// waits for the previous reader of the shard.
//
// Two ways to end, both driven by the runtime's coordinator thread:
// * Drain(): no new reads; the batch in flight is finished and XACKed; then
//   host->OnDrained(this) is called once from the reader thread and the thread ends.
// * Abandon(reason): no further handler calls, no XACK; a Redis command in flight is cut
//   (RedisConn::Interrupt), so the thread ends as soon as the current handler call, if
//   any, returns. Nothing is reported to the host but the release event.
//
// Observability (config.observe): the core's ConsumerEvents go to host->Observe, stamped
// here (reader_core.h lists them).
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

#include "client/reader_core.h"
#include "client/redis_conn.h"
#include "rsc/consumer.h"

namespace rsc::client {

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
  // The core's view of the runtime (ReaderContext), forwarded to the host.
  class Context : public ReaderContext {
   public:
    explicit Context(ShardReader* reader) : reader_(reader) {}
    int64_t ReadBudgetMs(int32_t shard) override;
    bool MayProcess(int32_t shard) override;
    TimeMs NowMs() override;
    void OnHandlerGaveUp(int32_t shard, const std::string& error) override;
    void Observe(ConsumerEvent event) override;

   private:
    ShardReader* reader_;
  };

  void Run();
  // Hands a Drain()/Abandon() requested from another thread to the core.
  void SyncStops();
  ReaderReply Execute(const ReaderCommand& command);
  HandlerResult CallHandler(const Message& message);
  // Sleeps up to `d`, or until Drain/Abandon.
  void Pause(std::chrono::milliseconds d);

  const ReaderConfig config_;
  const MessageHandler* const handler_;
  ReaderHost* const host_;
  DeliveryStats* const stats_;
  std::shared_ptr<ShardReader> predecessor_;  // reset once it finished (reader thread only)

  // Used by the reader thread only.
  RedisConn redis_;
  Context context_;
  ReaderCore core_;

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
