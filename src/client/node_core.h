#pragma once
// NodeCore: every decision of one Redis node's reader connections (reader_node.h) as a
// single-threaded, sans-IO object: which commands go out together, which live reads are
// combined into one XREADGROUP (or polled), when a blocked read is cut short with CLIENT
// UNBLOCK and when that unblock is sent again, which XACKs and late-read checks ride in a
// live read's pipeline, and how each reply answers which reader (carried over, bounced,
// answered nil, kTransport or kError). It holds no socket, no thread and no clock: times come
// in as arguments, replies come in as values, and what goes out is returned.
//
// Drivers: ReaderNode (hiredis connections, a command thread and a live thread, one mutex
// around the core) and the simulator (its network, Redis and clock). They differ only in how
// they send and wait.
//
// The two connections (see reader_node.h for the whole contract):
// * Command connection: TakeCommands → AnswerUnsent (answers that need no Redis) →
//   CommandWire → send → OnCommandsSent → replies → AnswerCommands + RetryUnblocks.
//   CommandDue says when there is something to take.
// * Live connection: OnLiveConnected/OnLiveLost track its CLIENT ID; LiveDue says when to
//   run PrepareRound (which answers reads whose block time ran out and chooses the next round);
//   round() is then sent (RoundWire), OnRoundSent once it is out, and its replies go to
//   OnRoundReplies; NextRoundFirst(its RoundEnd) says whether the next round is chosen and
//   sent before that round's answers are handed out. Only one round is in flight at a time.
//
// Every reader answer, bounce and failure an input produces goes into its Output, which the
// driver hands to the owner (outside any lock of its own).

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/reader_core.h"
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

// A reader's command as a node takes it (ReaderRedis::Submit; the simulator's port): the live
// read with its deadline `now + block_ms` and, when `pipelined` (one server), the XACK of
// command.ids in front of it; any other command with its wire args (command.entry need only
// be valid during the call). `slot`: the stream's hash slot on a cluster, else 0.
NodeRead MakeNodeRead(uint64_t token, const ReaderCoreConfig& config, const ReaderCommand& command,
                      int slot, std::chrono::steady_clock::time_point now);
NodeCommand MakeNodeCommand(uint64_t token, const ReaderCoreConfig& config,
                            const ReaderCommand& command);

class NodeCore {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  static constexpr size_t kMaxPipeline = 1000;

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
    int count = 0;        // the read's COUNT
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
  // What an input hands to the owner.
  struct Output {
    std::vector<ReaderAnswer> answers;
    std::vector<NodeCommand> bounced_commands;  // redirected (cluster), unanswered
    std::vector<NodeRead> bounced_reads;
    bool failed = false;  // a connection failed (Hooks::failed)
    bool empty() const {
      return answers.empty() && bounced_commands.empty() && bounced_reads.empty() && !failed;
    }
  };
  // How a round ended, for the driver's connection.
  struct RoundEnd {
    bool lost = false;        // the connection dropped (a transport failure or our cut)
    bool disconnect = false;  // our cut came after the replies: close the socket all the same
    // A reader got as many entries as it asked for (a backlog).
    bool full = false;
  };
  // Asked right after OnRoundReplies: whether the driver chooses and sends the next round
  // now (PrepareRound), before it hands that round's answers out. Yes when the round was a
  // backlog (`end.full`, not lost) and readers came back while it was out (a round is due).
  // Handing the answers out steps every reader they answer, which takes a while in a
  // backlog; with the next round already at Redis, Redis and the driver work at the same time
  // instead of taking turns. Only in a backlog: outside one, the readers answered come back
  // while the next round is out, and a blocking round would be cut short for them.
  bool NextRoundFirst(const RoundEnd& end) const {
    return end.full && !end.lost && LiveDue() == TimePoint::min();
  }

  // `cluster`: combine reads only within a slot, hand redirections back (Output::bounced_*).
  explicit NodeCore(bool cluster) : cluster_(cluster) {}

  // ── the owner's inputs ──
  // True: the command connection has new work (a CLIENT UNBLOCK was asked for).
  bool Enqueue(std::vector<NodeRead> reads, TimePoint now);
  void Enqueue(NodeCommand command);
  // As ReaderRedis::Cancel. True: the driver must cut the live connection's read at the
  // socket now (the round's replies then come back lost, and are answered as a cut). At most
  // once per round, and only once the round is out (OnRoundSent): before that the socket may
  // be idle, or replaced by the send's reconnect, and a cut would hit the wrong read. The
  // driver cuts before any other input reaches the core (ReaderNode: under its mutex).
  bool Cancel(uint64_t token, bool now);
  // Nothing queued or in flight.
  bool Idle() const;
  ReaderRedisStats Stats() const { return stats_; }

  // ── the command connection ──
  // When there is something to take: TimePoint::min() = now; nullopt = only after an input.
  std::optional<TimePoint> CommandDue() const;
  // The next batch (at most kMaxPipeline). Its unblocks get their args here, and only while
  // the read they were asked for is still in flight (otherwise none: not sent).
  std::vector<Queued> TakeCommands(TimePoint now);
  // Answers the batch's entries that need no Redis (cancelled queued reads). Stateless.
  static void AnswerUnsent(const std::vector<Queued>& batch, Output* out);
  // The batch's wire commands in order (ASKING before a command that asks for it), and how
  // many reader commands and unblocks they hold.
  static std::vector<const redis::Command*> CommandWire(const std::vector<Queued>& batch,
                                                        int64_t* commands, int64_t* unblocks);
  void OnCommandsSent(int64_t commands, int64_t unblocks);
  // `replies`: one per wire command (nullopt from a transport failure on: `error`). Answers
  // or bounces the batch's reader commands. Reads no state (drivers may call it unlocked).
  void AnswerCommands(std::vector<Queued>& batch, std::vector<std::optional<redis::Reply>>& replies,
                      const std::string& error, Output* out) const;
  // Then, with AnswerCommands' output: counts the redirections and sends again the unblocks
  // that came too early. CLIENT UNBLOCK answers 1 when it unblocked the client, 0 when the
  // client was not blocked: the read may still be on its way to Redis, so while it is in
  // flight the unblock goes again after 1, 2, 4 ... ms.
  void OnCommandReplies(std::vector<Queued>& batch,
                        const std::vector<std::optional<redis::Reply>>& replies, const Output& out,
                        TimePoint now);

  // ── the live connection ──
  // Connected; its CLIENT ID (nullopt: unknown, an unblock is never sent).
  void OnLiveConnected(std::optional<int64_t> client_id) { live_client_id_ = client_id; }
  void OnLiveLost() { live_client_id_.reset(); }
  // When PrepareRound is due: TimePoint::min() = now; nullopt = only after an input.
  std::optional<TimePoint> LiveDue() const;
  // Answers the reads whose block time ran out (all of them kTransport if !connected, with
  // `error`) and chooses the next round. True: round() is to be sent now.
  bool PrepareRound(TimePoint now, bool connected, const std::string& error, Output* out);
  const LiveRound& round() const { return live_round_; }
  // The round's wire commands: per bucket its XACKs, ASKING, the read, its checks. `writes`:
  // it holds an XACK.
  static std::vector<const redis::Command*> RoundWire(const LiveRound& round, bool* writes);
  // The round is written. True: a Cancel(now) came while it was being chosen or written; the
  // driver cuts the live connection now.
  bool OnRoundSent();
  // The round's replies (nullopt from a transport failure on: `error`); `timed_out`: the
  // blocking read's reply came when its BLOCK had run out (an earlier nil is an unblock).
  RoundEnd OnRoundReplies(std::vector<BucketReplies>& replies, const std::string& error,
                          bool timed_out, TimePoint now, Output* out);

 private:
  void ChooseRound(TimePoint now);
  void ChooseBlocking(TimePoint now);
  void ChoosePolls();
  static void AddPipelined(Bucket& bucket);
  // A read taken out of the live queue unsent (cancelled, or its block time ran out while
  // it waited): see node_core.cc.
  void AnswerUnsent(NodeRead read, bool may_ack);
  void ApplyAcks(Bucket& bucket, BucketReplies& replies, const std::string& error,
                 Output* out) const;
  static void ApplyChecks(const Bucket& bucket, BucketReplies& replies,
                          std::vector<ReaderAnswer>* answers, size_t first);
  void AnswerBlocking(std::vector<NodeRead>& reads, redis::Reply* reply, const std::string& error,
                      bool timed_out, TimePoint now, Output* out, std::vector<NodeRead>* carry);
  void AnswerPoll(std::vector<NodeRead>& reads, redis::Reply* reply, const std::string& error,
                  TimePoint now, Output* out, std::vector<NodeRead>* carry, bool* found);
  void AnswerReadError(std::vector<NodeRead>& reads, redis::Reply& reply, Output* out);
  // Queues a CLIENT UNBLOCK for the blocking read in flight, unless one was queued already.
  // True: it was.
  bool RequestUnblock(TimePoint now, std::optional<TimePoint> not_before = std::nullopt);
  std::chrono::milliseconds PollPauseMax() const;

  const bool cluster_;
  std::deque<Queued> command_queue_;
  // A CLIENT UNBLOCK that found the read not blocked yet (it was still on its way to the
  // server), to send again at `unblock_retry_at_`.
  std::optional<Queued> unblock_retry_;
  TimePoint unblock_retry_at_;
  // Live reads not sent yet, oldest first.
  std::deque<NodeRead> live_queue_;
  // The round in flight (from choosing its readers until its replies are handled), its
  // number, and whether a CLIENT UNBLOCK was queued for it.
  LiveRound live_round_;
  bool live_busy_ = false;
  TimePoint live_sent_at_;  // when the round in flight was chosen
  uint64_t live_gen_ = 0;
  bool live_unblock_requested_ = false;
  bool live_sent_ = false;  // the round in flight is written (OnRoundSent)
  bool live_cut_ = false;   // Cancel(now) asked to cut the round in flight at the socket
  std::optional<int64_t> live_client_id_;
  // Polling: the pause before the next poll round, and reads queued since the last round
  // (a returning reader ends the pause).
  std::chrono::milliseconds poll_pause_{0};
  TimePoint poll_resume_at_;
  bool arrived_ = false;
  // (group, consumer name) of the last combined read: another pair goes next.
  std::pair<std::string, std::string> last_pair_;
  ReaderRedisStats stats_;
};

}  // namespace rsc::client
