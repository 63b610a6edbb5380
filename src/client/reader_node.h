#pragma once
// ReaderNode: the reader commands of every shard served by one Redis node (one server, or one
// master of a cluster). Internal to ReaderRedis (reader_redis.h), which routes each reader's
// commands to the node serving its stream and follows the cluster's redirections. Whatever
// the number of shards, a node holds exactly two hiredis connections, each with one thread:
//
// * The command connection carries every command but the live read (XGROUP CREATE,
//   XAUTOCLAIM, XPENDING, XCLAIM, the pending read, XACK, the dead-letter script). Its thread
//   takes everything queued (at most kMaxPipeline), writes it in one pipeline and answers
//   each command as its reply is read. It also carries the node's own CLIENT UNBLOCKs.
// * The live-read connection carries the readers' `XREADGROUP ... STREAMS s >`. Reads that
//   can share one command — the same (group, consumer name) and, on a cluster, the same hash
//   slot (a multi-key command cannot span slots) — are combined into one blocking
//   `XREADGROUP GROUP G me COUNT <min> BLOCK <min> STREAMS s1 s2 ... > > ...`, so N idle
//   shards cost one blocked command, not N. On one server every read of a pair can share.
//   On one server a read may also carry its reader's XACK (NodeRead::ack_args) and late-read
//   check (NodeRead::check): the round then writes, in one pipeline, every carried XACK, the
//   combined read, and every carried `XPENDING s G - + 1`, and each reader's answer holds its
//   XACK's count (ReaderReply::count) and its check (lowest_owner, checked). A failed XACK or
//   check answers only its reader, with the error. An XACK is sent once: a reader carried over
//   to the next read keeps the count; a read taken out of the queue unsent by a drain sends
//   its XACK alone over the command connection, one taken out by an abandon or by its block
//   time running out (either may be the lease's end, C4) drops it and is answered kTransport.
// * Polling (a cluster node whose queued reads span several slots, or a read that must be
//   sent after ASKING): a blocking read would stall the others, so the node sends one
//   non-blocking read per (group, consumer name, slot) in one pipeline, answers the readers
//   that got entries, and polls the rest again after a pause that grows from 1 ms while
//   nothing comes (kPollPauseMax, longer for many streams) and is skipped when a reader comes
//   back. Until issue 12's layout lets the coordinator give a master's shards one slot, a
//   cluster master with several shards is polled.
//
// A blocked combined read while another reader's live read is queued (a reader came back
// after handling its batch) or while one of its readers is cancelled is cut short with
// `CLIENT UNBLOCK <live connection's id> TIMEOUT` from the command connection, at most once per
// read, so a returning reader waits about one round trip, not up to BLOCK.
//
// Answers of a live read, per reader:
// * Entries of its stream in the reply: kOk with the entries.
// * A blocking read's array reply without its stream (other streams had entries): kNil.
// * A nil reply at or after the read's BLOCK (a timeout): kNil for all. Everyone is answered
//   at once, which keeps the readers' reads in step, so they keep sharing one command.
// * A nil reply before the BLOCK ran out (the node's CLIENT UNBLOCK — or a stale one meant
//   for an earlier read, see reader_node.cc): cancelled readers and readers whose own block
//   time is up get kNil; the others are not answered but go into the next read with what is
//   left of their block time. A polled reader without entries is carried over the same way.
// * An error reply that names one reader's stream ("NOGROUP No such key 's' ..."): kError for
//   that reader, kNil for the others; an error that names none: kError for all.
// * A redirection (cluster: MOVED or ASK): nobody is answered here; the reads or commands
//   go back to the owner (Hooks::bounced), which sends them to the right node.
// * A transport failure: kTransport for all; the connection reconnects for the next read, and
//   Hooks::failed tells the owner (a failover may have moved the node's slots).
// A reader's live read is answered within its own block_ms after it was queued, give or take
// a round trip and the command timeout (the core's ReadBudgetMs relies on this) — provided the
// live connection's CLIENT ID is known; without it (an ACL refusing CLIENT) a read that
// arrives while another blocks waits for that one and may come back late, with kNil.
//
// Ordering: the commands of one token are sent and answered in Enqueue order as long as they
// go over one connection (one FIFO queue each). A live read and another command of the same
// token take different connections, so a token must not submit its next command before the
// previous one was answered — which is how a ReaderCore drives it anyway.
//
// Threads: the hooks run on the command thread (for every command but the live read, and for
// a cancelled queued live read) or on the live thread; never under the node's lock. They must
// not block long (they stall every shard behind that connection) and must not call Stop.

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
  int64_t commands = 0;           // reader commands written to a command connection
  int64_t live_reads = 0;         // blocking `XREADGROUP ... >` commands actually sent
  int64_t live_read_streams = 0;  // sum of the streams named by them
  int64_t polls = 0;              // non-blocking `XREADGROUP ... >` commands sent (polling)
  int64_t unblocks = 0;           // CLIENT UNBLOCKs sent
  int64_t redirects = 0;          // commands and reads sent again after MOVED or ASK
  int connections = 0;            // connections currently open (two per node at most)
  int threads = 0;                // threads running
  int nodes = 0;                  // nodes (servers or cluster masters) with connections
  int retired_nodes = 0;          // nodes stopped since: no longer masters (failovers)
};

// One answer: the token of a command and its reply.
struct ReaderAnswer {
  uint64_t token;
  ReaderReply reply;
};

// A reader command other than the live read, with its wire args.
struct NodeCommand {
  uint64_t token = 0;
  ReaderCommandKind kind = ReaderCommandKind::kCreateGroup;
  std::string key;  // the shard stream: routes the command
  std::vector<std::string> args;
  bool asking = false;   // send ASKING first (an ASK redirection)
  int redirects = 0;     // redirections followed so far
  std::string redirect;  // bounced: the MOVED/ASK reply text
};

// A reader's live read, queued, in flight, or bounced.
struct NodeRead {
  using Clock = std::chrono::steady_clock;
  uint64_t token = 0;
  std::string stream;
  std::string group;
  std::string consumer_name;
  int slot = 0;  // the stream's hash slot on a cluster; 0 on one server
  int count = 0;
  Clock::time_point deadline;  // queued + block_ms: answered by then at the latest
  // One server only (ReaderRedis::SingleServer): sent in front of the read in its pipeline,
  // then cleared; `acked` keeps its count for the read's answer (a read carried over to the
  // next round does not XACK again).
  std::vector<std::string> ack_args;
  std::optional<int64_t> acked;
  bool check = false;  // XPENDING stream G - + 1 behind the read (ReaderCommand::check_foreign)
  bool cancelled = false;
  bool asking = false;
  int redirects = 0;
  std::string redirect;
};

class ReaderNode {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // Answers of one pipeline or one read, together (required).
    std::function<void(std::vector<ReaderAnswer>& answers)> answered;
    // Commands and reads redirected by a cluster (MOVED/ASK), unanswered (cluster only).
    std::function<void(std::vector<NodeCommand> commands, std::vector<NodeRead> reads)> bounced;
    // A connection of this node failed (optional).
    std::function<void()> failed;
  };

  static constexpr size_t kMaxPipeline = 1000;

  // `redis.command_timeout`: the socket timeout of every command; a blocking read gets its
  // BLOCK on top. `cluster`: combine reads only within a slot, hand redirections to
  // Hooks::bounced. Nothing connects before Start().
  ReaderNode(redis::ConnectionOptions redis, bool cluster, Hooks hooks);
  ~ReaderNode();  // Stop()
  ReaderNode(const ReaderNode&) = delete;
  ReaderNode& operator=(const ReaderNode&) = delete;

  void Start();
  // Cuts both connections and joins the threads; returns within about a round trip even with
  // a read blocked. Outstanding commands get no answer; no hook runs once Stop() returned.
  void Stop();
  void Enqueue(NodeCommand command);
  // At most one per token at a time.
  void Enqueue(NodeRead read);
  // Several at once: the next live read takes them all together (reads held until the
  // port knew its server go out as one combined read, not one alone and the rest after a
  // CLIENT UNBLOCK or its block time).
  void Enqueue(std::vector<NodeRead> reads);
  // As ReaderRedis::Cancel.
  void Cancel(uint64_t token, bool now);
  // Nothing queued, in flight or being answered: Stop() would drop no answer. The owner
  // retires a node only if it is idle and nothing can reach it any more.
  bool Idle() const;
  ReaderRedisStats Stats() const;

 private:
  // An entry of the command queue.
  struct Queued {
    enum class Type {
      kCommand,    // a reader command, answered with ParseReaderReply
      kUnblock,    // CLIENT UNBLOCK of live read `gen`; nobody is answered
      kAnswerNil,  // nothing to send: answer `command.token` kNil (a cancelled queued read)
    };
    Type type = Type::kCommand;
    NodeCommand command;
    std::optional<int64_t> acked;  // kAnswerNil: the count of the XACK the read carried
    std::string refused;           // kAnswerNil: answer kTransport with this instead
    uint64_t gen = 0;              // kUnblock
    int attempt = 0;               // kUnblock: retries so far
  };
  // One command of a live round: the reads it names.
  struct Bucket {
    std::vector<NodeRead> reads;
    std::vector<std::string> args;
    bool asking = false;  // sent after ASKING
    // One server: the XACKs some reads carry, sent in front of the read, and the late-read
    // checks sent behind it; `*_of`: the index in `reads` of each one's reader.
    std::vector<redis::Command> acks, checks;
    std::vector<size_t> acks_of, checks_of;
  };
  // The replies of one bucket (nullopt: lost to a transport failure).
  struct BucketReplies {
    std::vector<std::optional<redis::Reply>> acks, checks;
    std::optional<redis::Reply> read;
  };
  // What one live round sends: a blocking combined read (one bucket), or a pipeline of polls.
  struct LiveRound {
    std::vector<Bucket> buckets;
    bool blocking = false;
    std::chrono::milliseconds block{0};
  };

  void RunCommands();
  void RunLive();
  // Sends one pipeline; answers the commands as the replies come in.
  void ExecuteBatch(std::vector<Queued>& batch);
  // Connects the live connection and learns its CLIENT ID if it is not connected.
  bool EnsureLive(std::string* error);
  // Chooses the reads of the next round (from live_queue_ into live_round_); false: none.
  bool ChooseRoundLocked();
  void ChooseBlockingLocked(Clock::time_point now);
  void ChoosePollsLocked();
  // Moves the XACKs and checks of the bucket's reads into it (after its reads are chosen).
  static void AddPipelinedLocked(Bucket& bucket);
  // A read taken out of the live queue unsent (cancelled, or its block time ran out while it
  // waited): answered kNil by the command thread, with the count of an XACK an earlier round
  // sent for it. An XACK it carries that was not sent yet goes alone when `may_ack` (a
  // drain: the lease still runs), and its reply is the read's answer (no entries), so the
  // batch it settles is not handled twice; otherwise (an abandon, whose lease may have
  // ended; a block time that may have been the lease's end) it is dropped and the read
  // answered kTransport: the batch stays pending (C4 before at-least-once's duplicates).
  void AnswerUnsentLocked(NodeRead read, bool may_ack);
  // Sends live_round_ and hands out its answers.
  void RunRound();
  // Sends the round's commands; false (and `error`) on a transport failure.
  bool SendRound(std::vector<BucketReplies>& replies, std::string* error);
  // Before a bucket is answered: its XACKs' counts go into the reads (a failed XACK answers
  // its reader at once, with the error); after: the answers in `answers` from `first` on get
  // their XACK's count and their check's result.
  void ApplyAcksLocked(Bucket& bucket, BucketReplies& replies, const std::string& error,
                       std::vector<ReaderAnswer>* answers);
  static void ApplyChecks(const Bucket& bucket, BucketReplies& replies,
                          std::vector<ReaderAnswer>* answers, size_t first);
  // Answers of a blocking read that returned `reply` (nullptr: transport failure, `error`);
  // readers to carry over go to `carry`, redirected ones to `bounced`.
  void AnswerBlockingLocked(std::vector<NodeRead>& reads, redis::Reply* reply,
                            const std::string& error, bool timed_out,
                            std::vector<ReaderAnswer>* answers, std::vector<NodeRead>* carry,
                            std::vector<NodeRead>* bounced);
  // Answers of one poll (one bucket); `found`: some reader got entries.
  void AnswerPollLocked(std::vector<NodeRead>& reads, redis::Reply* reply, const std::string& error,
                        std::vector<ReaderAnswer>* answers, std::vector<NodeRead>* carry,
                        std::vector<NodeRead>* bounced, bool* found);
  // An error reply to a read: redirected (cluster), or kError for the reader it names (kNil
  // for the others), or kError for all.
  void AnswerReadErrorLocked(std::vector<NodeRead>& reads, redis::Reply& reply,
                             std::vector<ReaderAnswer>* answers, std::vector<NodeRead>* bounced);
  // Queues a CLIENT UNBLOCK for the blocking read in flight, unless one was queued already.
  void RequestUnblockLocked(std::optional<Clock::time_point> not_before = std::nullopt);
  void Deliver(std::vector<ReaderAnswer>& answers);
  void Bounce(std::vector<NodeCommand> commands, std::vector<NodeRead> reads);
  void Failed();
  std::chrono::milliseconds PollPauseMaxLocked() const;

  const std::chrono::milliseconds command_timeout_;
  const bool cluster_;
  const Hooks hooks_;

  // Each used by its own thread only (plus Interrupt()/Cut() from other threads).
  redis::Connection command_conn_;
  redis::Connection live_conn_;
  bool live_ready_ = false;      // live thread only: connected and CLIENT ID asked
  int64_t live_reconnects_ = 0;  // live thread only: live_conn_.reconnects() when it was asked

  // Set by Stop() before it cuts the connections: no hook from then on.
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
  std::deque<NodeRead> live_queue_;
  // The round in flight (from choosing its readers until its replies are handled), its
  // number, and whether a CLIENT UNBLOCK was queued for it. Guarded by mu_, except that the
  // live thread reads the buckets' args unlocked while it sends them (nobody changes them).
  LiveRound live_round_;
  bool live_busy_ = false;
  Clock::time_point live_sent_at_;  // when the round in flight was chosen
  uint64_t live_gen_ = 0;
  bool live_unblock_requested_ = false;
  bool live_cut_ = false;                  // Cancel(now) cut the round in flight at the socket
  std::optional<int64_t> live_client_id_;  // guarded by mu_; unset while disconnected
  // Polling: the pause before the next poll round, and reads queued since the last round
  // (a returning reader ends the pause). Guarded by mu_.
  std::chrono::milliseconds poll_pause_{0};
  Clock::time_point poll_resume_at_;
  bool arrived_ = false;
  // (group, consumer name) of the last combined read: another pair goes next. Live thread.
  std::pair<std::string, std::string> last_pair_;
  ReaderRedisStats stats_;  // guarded by mu_
  // Threads between taking work and handing out its answers. Guarded by mu_.
  int active_ = 0;
  bool command_open_ = false;  // guarded by mu_
  bool live_open_ = false;     // guarded by mu_

  std::mutex join_mu_;  // serializes Start/Stop's thread handling
  std::thread command_thread_;
  std::thread live_thread_;
};

// The Redis wire form of a single reader command (kReadLive: the one-stream blocking form;
// the node combines live reads itself).
std::vector<std::string> ReaderCommandArgs(const ReaderCoreConfig& config,
                                           const ReaderCommand& command);
// A reply to `command` as the core reads it: an error reply is kError with its text; a nil
// reply to a read is kNil; a reply of the wrong shape is kError ("... unexpected reply").
// Only command.kind is used. Strings are moved out of `reply`.
ReaderReply ParseReaderReply(const ReaderCommand& command, redis::Reply& reply);

}  // namespace rsc::client
