#pragma once
// ReaderCore: the per-shard reader of a consumer as a sans-IO state machine (issue 10).
// ConsumerRuntime (consumer_runtime.h) drives it, in the library (over hiredis) and in the
// simulator (over the simulated network and Redis) alike. It decides every step of docs/consumer.md
// §3 and docs/protocol.md C7; the driver only carries its commands to Redis, its deliveries to the
// handler and its sleeps to a clock, and feeds the results back.
//
// One `start` action of the ConsumerCore, in order:
//   wait for the previous reader of the shard in this process to finish (never two readers)
//   XGROUP CREATE <stream> <G> 0 [MKSTREAM]      (BUSYGROUP is fine; create_key)
//   XAUTOCLAIM <stream> <G> <me> 0 <cursor> COUNT n JUSTID until the cursor is 0-0 (C7
//       takeover; XPENDING + XCLAIM pages when the server does not know XAUTOCLAIM)
//   XREADGROUP … STREAMS <stream> <after>      our pending entries, from 0 (claimed first)
//   XREADGROUP … BLOCK min(block, budget) STREAMS <stream> >      new entries
//   XPENDING <stream> <G> - + 1   after each non-empty read of new entries (and every
//       kIdleForeignCheckMs while idle), before handling them: if the group's lowest pending
//       entry belongs to another consumer name, a previous owner's read reached Redis after
//       our takeover; take over again and re-read our pending list first (per-key order).
//   With PipelinedLive(), while reads bring full batches (a backlog): the batch's XACK, the
//       next XREADGROUP … > and its XPENDING check go in one pipeline on one connection, in
//       that order. Redis runs them in that order, so nothing changes but the round trips.
// Every claim and read is issued only while ReaderContext::ReadBudgetMs > 0 (C1/C4), and a
// live read never blocks past it. Each entry of a batch is handed to the handler in order
// (only while MayProcess); the completed ones are XACKed together after the batch. Handler
// failures follow the HandlerErrorPolicy: retry in place with backoff, dead-letter (XADD +
// XACK in one script) after max_attempts, or stop (the runtime is told, the reader reads
// nothing more and waits for its drain). A Redis failure sends the reader back to the group
// creation after a backoff (at once after NOGROUP), so entries delivered to it but not yet
// handled are re-read from its pending list, never stranded.
//
// Two ways to end: Drain() — no new reads; the batch in hand is finished and XACKed, then
// kFinished{drained}. Abandon(reason) — no further delivery, no XACK; a command or handler
// call in flight is waited for (the driver may cut a command short), then
// kFinished{abandoned}. Either way a batch stops being handled once MayProcess says the
// lease ended.
//
// Driving it: call Next() and perform what it returns; while a command, a delivery or a sleep
// is outstanding Next() returns kIdle, until the matching OnReply/OnHandled/OnWake. kIdle also
// means "nothing to do until an input": the predecessor finished (OnPredecessorFinished), a
// drain or an abandon. Drain()/Abandon() may come at any time; a driver should cut a sleep
// short when they do (then call OnWake). Not thread-safe: one driver thread/fiber owns it.
//
// Observability: with `observe`, ConsumerEvents go to ReaderContext::Observe (the driver
// stamps t_us): kAcquire before the first command, kRead before each claim or read command
// (detail "XAUTOCLAIM", "XPENDING", "XCLAIM" or "XREADGROUP"), kDeliver before each handler
// call, kAck per id after a confirmed XACK (detail "xack", or "dead_letter"), kRelease once
// nothing more is read or handled (detail "drained" or the abandon reason) just before
// kFinished. A reader that never acquired reports neither kAcquire nor kRelease.
//
// Seals (SPEC RS2/RS3, feature "layout-v2"): the entry with the last possible ID
// (kSealId) closes a shard of a sealed generation. It is never delivered and never
// reported as an ack event; it is XACKed with the batch it ends, and once that XACK is
// confirmed ReaderContext::OnSealed tells the runtime the shard is complete. The maximum
// ID is terminal: no cursor is ever computed past it.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/types.h"
#include "rsc/consumer.h"

namespace rsc::client {

// Delivery counters shared by all readers of one consumer (thread-safe).
struct DeliveryStats {
  std::atomic<int64_t> handled{0};
  std::atomic<int64_t> acked{0};
  std::atomic<int64_t> claimed{0};
  // Times a reader found entries pending for another consumer name after its takeover (a
  // previous owner's late read) and claimed them back.
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

// What the reader asks of the runtime. Called synchronously from the driver's thread.
class ReaderContext {
 public:
  virtual ~ReaderContext() = default;
  // How long a read of `shard` issued now may block; 0 = it must not read now (the
  // ConsumerCore's ReadBudgetMs: READING and inside the lease).
  virtual int64_t ReadBudgetMs(int32_t shard) = 0;
  // Whether work already read may still be handled and XACKed: the lease has not ended.
  virtual bool MayProcess(int32_t shard) = 0;
  // Local monotonic milliseconds.
  virtual TimeMs NowMs() = 0;
  // HandlerErrorPolicy::kStop: the handler failed max_attempts times on one message.
  virtual void OnHandlerGaveUp(int32_t shard, const std::string& error) = 0;
  // An observability event (only with ReaderCoreConfig::observe); t_us is not stamped.
  virtual void Observe(ConsumerEvent event) = 0;
  // RS3: the seal entry of `shard` (a sealed generation's shard) was XACKed — the shard is
  // read to its end for this group. Repeated if the seal is read again (a failover).
  virtual void OnSealed(int32_t /*shard*/) {}
  // Whether the port can send a live read's XACK before it and its late-read check after it,
  // in one pipeline on one connection (ReaderCommand::ids and check_foreign of kReadLive): a
  // backlog then costs one round trip per batch instead of three. One server only: on a
  // cluster a redirection could part the three commands. Asked before each such read.
  virtual bool PipelinedLive() { return false; }
};

struct ReaderCoreConfig {
  int32_t shard = 0;
  std::string stream;  // from routing (C7: never computed)
  std::string group;   // G: the Redis consumer group
  std::string consumer_name;
  int max_batch = 100;
  TimeMs block_ms = 1000;
  HandlerErrorPolicy policy = HandlerErrorPolicy::kRetry;
  int max_attempts = 3;
  TimeMs retry_initial_ms = 50;
  TimeMs retry_max_ms = 2000;
  std::string dead_letter_stream;
  bool observe = false;
  // C7 step 1 with MKSTREAM: the reader may create the key. False for a shard whose key a
  // heartbeat answer's `streams` gave (the stream was resharded, C9 (f)): the coordinator
  // creates those keys, and a missing one means this consumer's view is ahead of Redis (a
  // restore): creating it would let a producer that still routes there write a key read
  // after what it then writes to the older generation.
  bool create_key = true;
};

struct ReaderEntry {
  std::string id;
  bool deleted = false;  // listed in the pending list but trimmed from the stream
  StreamFields fields;
};

enum class ReaderCommandKind {
  kCreateGroup,   // XGROUP CREATE stream G 0 [MKSTREAM] (ReaderCoreConfig::create_key)
  kAutoClaim,     // XAUTOCLAIM stream G me 0 <cursor> COUNT <count> JUSTID
  kPendingPage,   // XPENDING stream G <cursor> + <count>            (before Redis 6.2)
  kClaim,         // XCLAIM stream G me 0 <ids…> JUSTID               (before Redis 6.2)
  kReadPending,   // XREADGROUP GROUP G me COUNT <count> STREAMS stream <cursor>
  kReadLive,      // XREADGROUP GROUP G me COUNT <count> BLOCK <block_ms> STREAMS stream >
                  //   with PipelinedLive(), maybe XACK stream G <ids…> in front of it and
                  //   XPENDING stream G - + 1 behind it (ReaderCommand::ids, check_foreign)
  kCheckForeign,  // XPENDING stream G - + 1
  kAck,           // XACK stream G <ids…>
  kDeadLetter,    // EVAL kDeadLetterScript 2 stream dlq G id <fields…> <rsc-* fields>
};
std::string_view ReaderCommandName(ReaderCommandKind kind);

struct ReaderCommand {
  ReaderCommandKind kind = ReaderCommandKind::kCreateGroup;
  std::string cursor;                  // kAutoClaim, kPendingPage, kReadPending
  int count = 0;                       // kAutoClaim, kPendingPage, kReadPending, kReadLive
  TimeMs block_ms = 0;                 // kReadLive (≥ 1)
  std::vector<std::string> ids;        // kClaim, kAck; kReadLive: XACKed in front of it
  bool check_foreign = false;          // kReadLive: XPENDING stream G - + 1 right behind it
  const ReaderEntry* entry = nullptr;  // kDeadLetter (valid until the reply is fed back)
  std::string error;                   // kDeadLetter: the handler's last error
  int attempts = 0;                    // kDeadLetter
};

// A command's reply, parsed by the driver's Redis port.
struct ReaderReply {
  enum class Kind {
    kOk,
    kNil,        // a blocking read timed out
    kError,      // an error reply: `error` holds its text ("NOGROUP …", "BUSYGROUP …", …)
    kTransport,  // no reply: the connection failed or timed out (`error` says why)
  };
  Kind kind = Kind::kOk;
  std::string error;
  std::string cursor;                       // kAutoClaim: the next cursor
  int64_t count = 0;                        // kAutoClaim/kClaim: ids claimed; kAck (and
                                            // kReadLive with ids): ids acked
  std::vector<std::string> ids;             // kPendingPage: the page's ids
  std::vector<ReaderEntry> entries;         // kReadPending, kReadLive
  std::optional<std::string> lowest_owner;  // kCheckForeign: owner of the lowest pending
                                            // entry of the group (none: nothing pending)
  std::optional<std::string> lowest_id;     // kCheckForeign: that entry's id
  bool checked = false;  // kReadLive with check_foreign: lowest_owner holds its answer
  // kReadLive with ids or check_foreign: an error of any of its commands makes the whole
  // reply kError (or kTransport), and its entries are dropped: they stay pending for us.

  bool ok() const { return kind == Kind::kOk || kind == Kind::kNil; }
  static ReaderReply Error(Kind kind, std::string error) {
    ReaderReply r;
    r.kind = kind;
    r.error = std::move(error);
    return r;
  }
};

struct ReaderAction {
  enum class Kind { kIdle, kCommand, kDeliver, kSleep, kFinished };
  Kind kind = Kind::kIdle;
  ReaderCommand command;  // kCommand
  Message message;        // kDeliver
  TimeMs sleep_ms = 0;    // kSleep
  bool drained = false;   // kFinished: true = drained (report it), false = abandoned
};

class ReaderCore {
 public:
  // How often an idle live shard checks for entries another consumer name holds.
  static constexpr TimeMs kIdleForeignCheckMs = 1000;
  static constexpr TimeMs kBackoffInitialMs = 100;
  static constexpr TimeMs kBackoffMaxMs = 2000;
  static constexpr TimeMs kLeaseWaitMs = 20;  // poll while the lease does not allow a read

  // `context` and `stats` must outlive the core. `has_predecessor`: another reader of the
  // shard in this process has not finished yet (OnPredecessorFinished tells when it has).
  ReaderCore(ReaderCoreConfig config, ReaderContext* context, DeliveryStats* stats,
             bool has_predecessor);
  virtual ~ReaderCore() = default;
  ReaderCore(const ReaderCore&) = delete;
  ReaderCore& operator=(const ReaderCore&) = delete;

  ReaderAction Next();
  // Taken by value: a read's entries move into the batch without a copy.
  void OnReply(ReaderReply reply);
  void OnHandled(const HandlerResult& result);
  // The delivery was withdrawn before the handler was called (the shard was abandoned while
  // the call waited for a handler thread): nothing of it counts, the entry stays pending.
  void OnWithdrawn();
  void OnWake();
  void OnPredecessorFinished();
  void Drain();
  // `reason` becomes the release detail ("abandoned", "fenced", "shutdown").
  void Abandon(std::string reason);

  const ReaderCoreConfig& config() const { return config_; }
  int32_t shard() const { return config_.shard; }
  bool waiting_for_predecessor() const { return waiting_predecessor_; }
  bool acquired() const { return acquired_; }
  bool drain_requested() const { return drain_; }
  bool abandoned() const { return abandon_; }
  bool finished() const { return finished_; }
  // A command is outstanding (sent, reply not fed back yet).
  bool command_in_flight() const { return await_ == Await::kReply; }

 protected:
  // The seam sim/mutants.cc replaces to prove that the simulator catches a broken reader:
  // whether the batch in hand may still be handled and XACKed — not abandoned, and the
  // lease has not ended (C4). Checked before each handler call, each XACK and the late-read
  // check.
  virtual bool MayHandle() const;

 private:
  enum class Stage { kSetup, kClaim, kClaimPage, kPending, kLive };
  enum class Await { kNone, kReply, kHandler, kWake, kPredecessor };

  // One step of Next(): an action, or nullopt when only the state changed.
  std::optional<ReaderAction> Step();
  ReaderAction Command(ReaderCommand command);
  ReaderAction ReadOrClaim(int64_t budget_ms);
  std::optional<ReaderAction> CheckForeign();
  // PipelinedLive(), after a full live batch: the next live read, carrying the batch's XACK
  // in front of it; nullopt when the XACK must go alone.
  std::optional<ReaderAction> AckWithRead();
  std::optional<ReaderAction> Process();
  ReaderAction Sleep(TimeMs ms);
  ReaderAction Finish(bool drained);
  // The late-read check's answer finds entries read behind our back (reader_core.cc).
  bool LateReadFound(const ReaderReply& check) const;
  void OnClaimReply(const ReaderReply& reply);
  void OnReadReply(ReaderReply& reply, bool live);
  void OnForeignReply(const ReaderReply& reply);
  void OnAckReply(const ReaderReply& reply);
  void OnDeadLetterReply(const ReaderReply& reply);
  // A command failed: back to the group creation, after a backoff unless NOGROUP.
  void Failed(const ReaderReply& reply);
  // Drops the batch in hand (nothing more of it is handled or XACKed) and reads our pending
  // list again from the start: order first.
  void Interrupt();
  // Stops handling the batch before entry `next_`: the completed entries are still XACKed
  // (if the lease allows), then the pending list is read again from the start.
  void Cut();
  void Emit(ConsumerEventKind kind, std::string id = {}, std::string detail = {},
            const StreamFields* fields = nullptr, int attempt = 0);
  void RecordRedisError(const ReaderReply& reply);

  const ReaderCoreConfig config_;
  ReaderContext* const context_;
  DeliveryStats* const stats_;

  Stage stage_ = Stage::kSetup;
  Await await_ = Await::kNone;
  ReaderCommandKind in_flight_ = ReaderCommandKind::kCreateGroup;
  bool waiting_predecessor_ = false;
  bool acquired_ = false;
  bool drain_ = false;
  bool abandon_ = false;
  std::string abandon_reason_;
  bool halted_ = false;  // kStop gave up: read nothing more, wait for the drain
  bool finished_ = false;
  TimeMs backoff_ms_ = kBackoffInitialMs;
  std::optional<TimeMs> sleep_first_;  // a backoff to sleep before the next step

  std::string claim_cursor_ = "0-0";    // kClaim: XAUTOCLAIM cursor; kClaimPage: XPENDING start
  std::vector<std::string> claim_ids_;  // kClaimPage: a page to XCLAIM next
  bool claim_last_page_ = false;        // kClaimPage: the page in hand ends at the seal
  std::string pending_cursor_ = "0";
  TimeMs last_foreign_check_ = 0;

  // The batch in hand.
  bool foreign_check_ = false;  // a live read's batch waits for the XPENDING check
  bool batch_active_ = false;
  bool cut_ = false;  // stop before next_, XACK what is done, then re-read the pending list
  bool ack_then_reread_ = false;  // the XACK in flight ends a cut batch
  bool acks_with_read_ = false;   // the live read in flight carries acks_ (PipelinedLive)
  // The last live read brought a full batch (a backlog): the next one is
  // sent with the batch's XACK in front and the late-read check behind. Otherwise (a
  // trickle, idle shards) reads go alone, so idle shards cost no extra XPENDING per read.
  bool full_batch_ = false;
  std::vector<ReaderEntry> batch_;
  size_t next_ = 0;
  std::vector<std::string> acks_;
  bool seal_in_acks_ = false;               // acks_ holds the seal entry (RS3)
  int attempt_ = 0;                         // of batch_[next_]
  TimeMs retry_backoff_ms_ = 0;             // of batch_[next_]
  std::optional<std::string> dead_letter_;  // batch_[next_] is to be dead-lettered (its error)
};

}  // namespace rsc::client
