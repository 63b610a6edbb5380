#pragma once
// ReaderRedis: the production Redis port of the consumer runtime's reader loop. One event-loop
// runtime drives every shard's ReaderCore (client/reader_core.h) and hands the cores'
// ReaderCommands here; the replies come back through one callback. Whatever the number of
// shards, the port holds exactly two hiredis connections, each with one thread:
//
// * The command connection carries every command but the live read (XGROUP CREATE,
//   XAUTOCLAIM, XPENDING, XCLAIM, the pending read, XACK, the dead-letter script). Its thread
//   takes everything queued (at most kMaxPipeline), writes it in one pipeline and answers
//   each command as its reply is read. It also carries the port's own CLIENT UNBLOCKs.
// * The live-read connection carries the readers' `XREADGROUP ... BLOCK ... STREAMS s >`:
//   the live reads queued by all readers are combined into one
//   `XREADGROUP GROUP G me COUNT <min> BLOCK <min> STREAMS s1 s2 ... > > ...` per distinct
//   (group, consumer name), so N idle shards cost one blocked command, not N.
//
// A combined read that is blocked while another reader's live read is queued (a reader came
// back after handling its batch) or while one of its readers is cancelled is cut short with
// `CLIENT UNBLOCK <live connection's id> TIMEOUT` from the command connection, at most once per
// read, so a returning reader waits about one round trip, not up to BLOCK.
//
// Answers of a combined read, per reader:
// * Entries of its stream in the reply: kOk with the entries.
// * An array reply without its stream (other streams had entries): kNil.
// * A nil reply at or after the read's BLOCK (a timeout): kNil for all. Everyone is answered
//   at once, which keeps the readers' reads in step, so they keep sharing one command.
// * A nil reply before the BLOCK ran out (the port's CLIENT UNBLOCK — or a stale one meant
//   for an earlier read, see reader_redis.cc): cancelled readers and readers whose own block
//   time is up get kNil; the others are not answered but go into the next combined read with
//   what is left of their block time. Answering them kNil instead would make them all come
//   back at slightly different times, each return cutting the read the others just joined.
// * An error reply that names one reader's stream ("NOGROUP No such key 's' ..."): kError for
//   that reader, kNil for the others; an error that names none: kError for all.
// * A transport failure: kTransport for all; the connection reconnects for the next read.
// A reader's live read is answered within its own block_ms after Submit, give or take a round
// trip and the command timeout (the core's ReadBudgetMs relies on this) — provided the live
// connection's CLIENT ID is known; without it (an ACL refusing CLIENT) a read that arrives
// while another blocks waits for that one and may come back late, with kNil.
//
// Ordering: the commands of one token are sent and answered in Submit order as long as they
// go over one connection (one FIFO queue each). A live read and another command of the same
// token take different connections, so a token must not submit its next command before the
// previous one was answered — which is how a ReaderCore drives it anyway. Answers of
// different tokens come in no particular order.
//
// Threads: `done` runs on the command thread for every command but the live read and for a
// cancelled queued live read, and on the live thread for live reads; never under the port's
// lock. It must not block long (it stalls every shard behind that connection). Submit, Cancel
// and Stats may be called from any thread, also from inside `done`; Stop may not be called
// from inside `done` (it joins the thread running it).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/reader_core.h"
#include "redis/connection.h"
#include "redis/reply.h"

namespace rsc::client {

struct ReaderRedisStats {
  int64_t commands = 0;           // reader commands written to the command connection
  int64_t live_reads = 0;         // combined `XREADGROUP ... >` commands actually sent
  int64_t live_read_streams = 0;  // sum of the streams named by them
  int64_t unblocks = 0;           // CLIENT UNBLOCKs sent
  int connections = 0;            // connections currently open (0..2)
};

// The Redis wire form of a single reader command (kReadLive: the one-stream form; the port
// combines live reads itself).
std::vector<std::string> ReaderCommandArgs(const ReaderCoreConfig& config,
                                           const ReaderCommand& command);
// A reply to `command` as the core reads it: an error reply is kError with its text; a nil
// reply to a read is kNil; a reply of the wrong shape is kError ("... unexpected reply").
// Only command.kind is used. Strings are moved out of `reply`.
ReaderReply ParseReaderReply(const ReaderCommand& command, redis::Reply& reply);

// One answer: the token given to Submit and its reply.
struct ReaderAnswer {
  uint64_t token;
  ReaderReply reply;
};

class ReaderRedis {
 public:
  using Answer = ReaderAnswer;
  // Optional (set before Start): receives the answers of one pipeline or one combined read
  // together, instead of one `done` call each — an owner that takes a lock per call takes it
  // once per batch. Same threads and rules as `done`.
  using BatchDone = std::function<void(std::vector<ReaderAnswer>& answers)>;
  void SetBatchDone(BatchDone batch_done) { batch_done_ = std::move(batch_done); }

  // Called with the token given to Submit, exactly once per Submit (unless Stop() ran first).
  using Done = std::function<void(uint64_t token, ReaderReply reply)>;

  static constexpr size_t kMaxPipeline = 1000;

  // `redis.command_timeout`: the socket timeout of every command; a live read gets its BLOCK
  // on top. Nothing connects before Start().
  ReaderRedis(redis::ConnectionOptions redis, Done done);
  ~ReaderRedis();  // Stop()
  ReaderRedis(const ReaderRedis&) = delete;
  ReaderRedis& operator=(const ReaderRedis&) = delete;

  // Starts the two threads. Commands submitted before are sent then. Call at most once.
  void Start();
  // Cuts both connections (redis::Connection::Interrupt) and joins the threads; returns within
  // about a round trip even with a read blocked. Outstanding Submits get no reply, later ones are
  // dropped; `done` is not called once Stop() returned. Idempotent.
  void Stop();
  // Queues one command of reader `token`. `config` gives the stream, group, consumer name and
  // dead-letter stream; the wire args are built here, so command.entry (kDeadLetter) need
  // only be valid during the call. kReadLive: at most one per token at a time, block_ms ≥ 1.
  void Submit(uint64_t token, const ReaderCoreConfig& config, const ReaderCommand& command);
  // Reader `token` is being abandoned or drained: its live read, if queued and not sent yet,
  // is answered kNil at once (from the command thread); if it is part of a blocked combined
  // read, that read is cut short so its readers are answered soon. Other commands of the
  // token are left alone (they are short). No effect on an unknown token.
  //
  // `now` (an abandon: the reader must end at once, even if Redis or the network does not
  // answer): a blocked combined read it is part of is cut at the socket instead (the live
  // connection reconnects for the next read), as a reader owning its connection once did;
  // the other readers of that read are carried over to the next one, like after an unblock.
  void Cancel(uint64_t token, bool now = false);
  ReaderRedisStats Stats() const;

 private:
  using Clock = std::chrono::steady_clock;

  // An entry of the command queue.
  struct Queued {
    enum class Type {
      kCommand,    // a reader command: args, answered with ParseReaderReply
      kUnblock,    // CLIENT UNBLOCK of live read `gen`; nobody is answered
      kAnswerNil,  // nothing to send: answer `token` kNil (a cancelled queued live read)
    };
    Type type = Type::kCommand;
    uint64_t token = 0;
    ReaderCommandKind kind = ReaderCommandKind::kCreateGroup;
    std::vector<std::string> args;
    uint64_t gen = 0;  // kUnblock
    int attempt = 0;   // kUnblock: retries so far
  };

  // A reader's live read, queued or part of the combined read in flight.
  struct LiveRead {
    uint64_t token = 0;
    std::string stream;
    std::string group;
    std::string consumer_name;
    int count = 0;
    Clock::time_point deadline;  // Submit time + block_ms: answered by then at the latest
    bool cancelled = false;
  };

  void RunCommands();
  void RunLive();
  // Sends one pipeline; calls done as the replies come in.
  void ExecuteBatch(std::vector<Queued>& batch);
  // Connects the live connection and learns its CLIENT ID if it is not connected.
  bool EnsureLive(std::string* error);
  // Answers of a combined read that returned `reply` (nullptr: transport failure, `error`);
  // puts the readers to carry over back at the front of live_queue_.
  // Strings are moved out of `reply`.
  std::vector<Answer> AnswerLiveLocked(std::vector<LiveRead>& reads, redis::Reply* reply,
                                       const std::string& error, bool timed_out);
  // Queues a CLIENT UNBLOCK for the combined read in flight, unless one was queued already.
  void RequestUnblockLocked(std::optional<Clock::time_point> not_before = std::nullopt);
  void Deliver(std::vector<Answer>& answers);
  void Deliver(uint64_t token, ReaderReply reply);

  const std::chrono::milliseconds command_timeout_;
  const Done done_;
  BatchDone batch_done_;  // set before Start(), then read-only

  // Each used by its own thread only (plus Interrupt() from Stop()).
  redis::Connection command_conn_;
  redis::Connection live_conn_;
  bool live_ready_ = false;  // live thread only: connected and CLIENT ID asked

  // Set by Stop() before it cuts the connections: no `done` from then on.
  std::atomic<bool> halted_{false};

  mutable std::mutex mu_;
  std::condition_variable command_cv_;  // command_queue_, unblock_retry_, stopping_
  std::condition_variable live_cv_;     // live_queue_, stopping_
  bool stopping_ = false;               // guarded by mu_
  std::deque<Queued> command_queue_;    // guarded by mu_
  // A CLIENT UNBLOCK that found the read not blocked yet (it was still on its way to the
  // server), to send again at `at`. Guarded by mu_.
  std::optional<Queued> unblock_retry_;
  Clock::time_point unblock_retry_at_;  // guarded by mu_
  // Live reads not sent yet, oldest first. Guarded by mu_.
  std::deque<LiveRead> live_queue_;
  // The combined read in flight (from choosing its readers until its reply is handled), its
  // number, and whether a CLIENT UNBLOCK was queued for it. Guarded by mu_.
  std::vector<LiveRead> live_in_flight_;
  bool live_busy_ = false;
  Clock::time_point live_sent_at_;  // when the read in flight was chosen
  uint64_t live_gen_ = 0;
  bool live_unblock_requested_ = false;
  bool live_cut_ = false;                  // Cancel(now) cut the read in flight at the socket
  std::optional<int64_t> live_client_id_;  // guarded by mu_; unset while disconnected
  // (group, consumer name) of the last combined read: another pair goes next. Live thread.
  std::pair<std::string, std::string> last_pair_;
  ReaderRedisStats stats_;     // guarded by mu_
  bool command_open_ = false;  // guarded by mu_
  bool live_open_ = false;     // guarded by mu_

  std::mutex join_mu_;  // serializes Start/Stop's thread handling
  std::thread command_thread_;
  std::thread live_thread_;
};

}  // namespace rsc::client
