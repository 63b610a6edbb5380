#pragma once
// ReaderNode: the reader commands of every shard served by one Redis node (one server, or one
// master of a cluster). Internal to ReaderRedis (reader_redis.h), which routes each reader's
// commands to the node serving its stream and follows the cluster's redirections. Whatever
// the number of shards, a node holds exactly two hiredis connections, each with one thread.
// Every decision below is NodeCore's (node_core.h, sans-IO, also run by the simulator); this
// class only waits, sends and receives for it.
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
// In a backlog (a reader of the round got as many entries as it asked for), the readers that
// came back while a round was out go to Redis in the next round before the round's answers are
// handed out (NodeCore::NextRoundFirst): handing them out steps every reader, and Redis then
// works meanwhile instead of waiting for it. Still one round out at a time.
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
//   for an earlier read, see node_core.cc): cancelled readers and readers whose own block
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

#include "client/node_core.h"
#include "client/reader_core.h"
#include "client/reader_net.h"
#include "client/reader_wire.h"
#include "redis/connection.h"
#include "redis/reply.h"

namespace rsc::client {

class ReaderNode : public ReaderNodePort {
 public:
  using Clock = std::chrono::steady_clock;
  using Hooks = ReaderNodeHooks;

  static constexpr size_t kMaxPipeline = NodeCore::kMaxPipeline;

  // `redis.command_timeout`: the socket timeout of every command; a blocking read gets its
  // BLOCK on top. `cluster`: combine reads only within a slot, hand redirections to
  // Hooks::bounced. Nothing connects before Start().
  ReaderNode(redis::ConnectionOptions redis, bool cluster, Hooks hooks);
  ~ReaderNode() override;  // Stop()
  ReaderNode(const ReaderNode&) = delete;
  ReaderNode& operator=(const ReaderNode&) = delete;

  void Start() override;
  // Cuts both connections and joins the threads; returns within about a round trip even with
  // a read blocked. Outstanding commands get no answer; no hook runs once Stop() returned.
  void Stop() override;
  // Stop's first half, without the join: tells the threads to end and cuts the connections.
  // An owner stopping several nodes halts them all first, so their threads end side by side
  // (a thread inside a connect cannot be cut: it waits out its connect timeout).
  void Halt() override;
  void Enqueue(NodeCommand command) override;
  // At most one per token at a time.
  void Enqueue(NodeRead read);
  // Several at once: the next live read takes them all together (reads held until the
  // port knew its server go out as one combined read, not one alone and the rest after a
  // CLIENT UNBLOCK or its block time).
  void Enqueue(std::vector<NodeRead> reads) override;
  // As ReaderRedis::Cancel.
  void Cancel(uint64_t token, bool now) override;
  // Nothing queued, in flight or being answered: Stop() would drop no answer. The owner
  // retires a node only if it is idle and nothing can reach it any more.
  bool Idle() const override;
  ReaderRedisStats Stats() const override;

 private:
  void RunCommands();
  void RunLive();
  // Sends one pipeline; answers the commands as the replies come in.
  void ExecuteBatch(std::vector<NodeCore::Queued>& batch);
  // Connects the live connection and learns its CLIENT ID if it is not connected.
  bool EnsureLive(std::string* error);
  // Sends the core's round and hands out its answers; in a backlog it sends the next round
  // first (NodeCore::NextRoundFirst) and goes on with that one. One round is out at a time.
  void RunRound();
  // Writes the round chosen (false: it could not, `error` says why); ReadRound reads its
  // replies.
  bool WriteRound(const NodeCore::LiveRound& round, std::string* error);
  bool ReadRound(const NodeCore::LiveRound& round, std::vector<NodeCore::BucketReplies>& replies,
                 std::string* error);
  // Hands an input's output to the owner (outside mu_).
  void Deliver(NodeCore::Output& out);

  const std::chrono::milliseconds command_timeout_;
  const Hooks hooks_;

  // Each used by its own thread only (plus Interrupt()/Cut() from other threads).
  redis::Connection command_conn_;
  redis::Connection live_conn_;
  bool live_ready_ = false;      // live thread only: connected and CLIENT ID asked
  int64_t live_reconnects_ = 0;  // live thread only: live_conn_.reconnects() when it was asked

  // Set by Stop() before it cuts the connections: no hook from then on.
  std::atomic<bool> halted_{false};

  mutable std::mutex mu_;
  std::condition_variable command_cv_;  // the core's command work, stopping_
  std::condition_variable live_cv_;     // the core's live work, stopping_
  bool stopping_ = false;               // guarded by mu_
  // Every decision (queues, rounds, unblocks, answers). Guarded by mu_, except that the live
  // thread reads the round in flight unlocked while it sends it (nobody changes it then).
  NodeCore core_;
  // Threads between taking work and handing out its answers. Guarded by mu_.
  int active_ = 0;
  int threads_ = 0;            // guarded by mu_
  bool command_open_ = false;  // guarded by mu_
  bool live_open_ = false;     // guarded by mu_

  std::mutex join_mu_;  // serializes Start/Stop's thread handling
  std::thread command_thread_;
  std::thread live_thread_;
};

}  // namespace rsc::client
