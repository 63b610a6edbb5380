#include "client/reader_node.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

// The CLIENT UNBLOCK races. The live thread sends a blocking read and blocks in it; the command
// thread sends the unblock. Two orders can go wrong, and neither may leave a reader waiting up
// to BLOCK or answered wrongly:
// * The unblock reaches Redis before the read does (the read is still in the socket): Redis
//   answers 0, nothing was unblocked. While that same read (live_gen_) is still in flight the
//   unblock is sent again after 1, 2, 4 ... ms.
// * The unblock reaches Redis after its read returned and the next read started: it cuts that
//   next read instead. An unblock is only sent while its read is in flight (checked under mu_
//   just before the pipeline is written), so this takes a read returning in that round trip.
//   The cut read returns nil before its BLOCK ran out, which RunLive tells from a timeout by
//   the clock; its readers are carried over into the following read, not answered. So a stale
//   unblock costs one extra XREADGROUP and answers nobody.
// Whichever read an unblock hits, every reader gets exactly one answer: each read is answered
// (or carried over) once, by the live thread, from the list of readers it was sent with.

namespace rsc::client {
namespace {

using std::chrono::milliseconds;

// Dead-letter and XACK in one step, so a message is never both lost (XACK without the
// dead letter) nor dead-lettered twice by a retry after a partial failure. An error in
// XADD aborts the script before the XACK. Both keys share the shard's hash tag.
constexpr const char* kDeadLetterScript =
    "local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))\n"
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
    "return id\n";

// A CLIENT UNBLOCK that came before its read reached the server is sent again after 1, 2,
// 4 ... ms, at most this far apart: the read is normally a moment behind.
constexpr milliseconds kUnblockRetryMax{100};
constexpr milliseconds kUnblockGrace{2};

// A write to a connection that Stop() shut down (or that the peer reset) fails with EPIPE and
// raises SIGPIPE at the writing thread. Blocked in the port's threads, the signal stays
// pending there instead of killing the application; the write reports the error.
void BlockSigpipe() {
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
}

using redis::Reply;

ReaderReply Unexpected(const ReaderCommand& cmd, const Reply& r) {
  return ReaderReply::Error(
      ReaderReply::Kind::kError,
      fmt::format("{}: unexpected reply {}", ReaderCommandName(cmd.kind), r.DebugString()));
}

// [[id, [f, v, ...] | nil], ...]: a nil field list is an entry trimmed from the stream while
// it was pending. The strings are moved out of the reply (entries carry the payloads).
std::vector<ReaderEntry> ParseEntries(Reply& entries) {
  std::vector<ReaderEntry> out;
  out.reserve(entries.elements.size());
  for (Reply& e : entries.elements) {
    if (!e.IsArray() || e.elements.size() < 2) continue;
    ReaderEntry entry;
    entry.id = std::move(e.elements[0].str);
    Reply& f = e.elements[1];
    if (!f.IsArray()) {
      entry.deleted = true;
    } else {
      entry.fields.reserve(f.elements.size() / 2);
      for (size_t j = 0; j + 1 < f.elements.size(); j += 2) {
        entry.fields.emplace_back(std::move(f.elements[j].str), std::move(f.elements[j + 1].str));
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// [stream, [entries]]: one stream of an XREADGROUP reply.
bool IsStreamReply(const Reply& s) {
  return s.IsArray() && s.elements.size() >= 2 && s.elements[0].IsString() &&
         s.elements[1].IsArray();
}

// [[stream, [[id, [f, v, ...] | nil], ...]]] (RESP2; a map under RESP3, never used here).
ReaderReply ParseRead(const ReaderCommand& cmd, Reply& r) {
  ReaderReply out;
  if (r.IsNil()) {  // BLOCK timed out
    out.kind = ReaderReply::Kind::kNil;
    return out;
  }
  if (!r.IsArray() || r.elements.empty() || !IsStreamReply(r.elements[0])) {
    return Unexpected(cmd, r);
  }
  out.entries = ParseEntries(r.elements[0].elements[1]);
  return out;
}

// A reply to `cmd` that is not an error reply, as the core reads it.
ReaderReply Parse(const ReaderCommand& cmd, Reply& r) {
  ReaderReply out;
  switch (cmd.kind) {
    case ReaderCommandKind::kCreateGroup:
    case ReaderCommandKind::kDeadLetter:
      return out;
    case ReaderCommandKind::kAutoClaim:
      if (!r.IsArray() || r.elements.size() < 2 || !r.elements[0].IsString() ||
          !r.elements[1].IsArray()) {
        return Unexpected(cmd, r);
      }
      out.cursor = std::move(r.elements[0].str);
      out.count = static_cast<int64_t>(r.elements[1].elements.size());
      return out;
    case ReaderCommandKind::kPendingPage:
    case ReaderCommandKind::kCheckForeign:
      if (!r.IsArray()) return Unexpected(cmd, r);
      for (Reply& e : r.elements) {
        if (!e.IsArray() || e.elements.size() < 2) continue;
        out.ids.push_back(std::move(e.elements[0].str));
        if (!out.lowest_owner) out.lowest_owner = e.elements[1].str;
      }
      return out;
    case ReaderCommandKind::kClaim:
      if (!r.IsArray()) return Unexpected(cmd, r);
      out.count = static_cast<int64_t>(r.elements.size());
      return out;
    case ReaderCommandKind::kReadPending:
    case ReaderCommandKind::kReadLive:
      return ParseRead(cmd, r);
    case ReaderCommandKind::kAck:
      if (!r.IsInteger()) return Unexpected(cmd, r);
      out.count = r.integer;
      return out;
  }
  return out;
}

bool IsRedirect(const Reply& reply) { return reply.ErrorIs("MOVED") || reply.ErrorIs("ASK"); }

// A cluster's redirection where the port took the server for a single one: said plainly, since
// "MOVED 1234 10.0.0.2:6379" alone reads like a bug. The cluster detection (INFO cluster) was
// refused or answered by a proxy.
std::optional<std::string> ClusterRefusal(const Reply& reply) {
  if (!IsRedirect(reply) && !reply.ErrorIs("CROSSSLOT")) return std::nullopt;
  return fmt::format(
      "the server answered as a Redis Cluster node ({}) but was taken for a single server: "
      "the cluster detection (INFO) was refused; grant the user +info",
      reply.str);
}

ReaderReply Nil() {
  ReaderReply r;
  r.kind = ReaderReply::Kind::kNil;
  return r;
}

}  // namespace

std::vector<std::string> ReaderCommandArgs(const ReaderCoreConfig& c, const ReaderCommand& cmd) {
  const std::string count = std::to_string(cmd.count);
  switch (cmd.kind) {
    case ReaderCommandKind::kCreateGroup:
      if (!c.create_key) return {"XGROUP", "CREATE", c.stream, c.group, "0"};
      return {"XGROUP", "CREATE", c.stream, c.group, "0", "MKSTREAM"};
    case ReaderCommandKind::kAutoClaim:
      return {"XAUTOCLAIM", c.stream, c.group, c.consumer_name, "0",
              cmd.cursor,   "COUNT",  count,   "JUSTID"};
    case ReaderCommandKind::kPendingPage:
      return {"XPENDING", c.stream, c.group, cmd.cursor, "+", count};
    case ReaderCommandKind::kClaim: {
      std::vector<std::string> args{"XCLAIM", c.stream, c.group, c.consumer_name, "0"};
      args.insert(args.end(), cmd.ids.begin(), cmd.ids.end());
      args.emplace_back("JUSTID");
      return args;
    }
    case ReaderCommandKind::kReadPending:
      return {"XREADGROUP", "GROUP",   c.group,  c.consumer_name, "COUNT",
              count,        "STREAMS", c.stream, cmd.cursor};
    case ReaderCommandKind::kReadLive:
      return {"XREADGROUP", "GROUP",  c.group, c.consumer_name,
              "COUNT",      count,    "BLOCK", std::to_string(cmd.block_ms),
              "STREAMS",    c.stream, ">"};
    case ReaderCommandKind::kCheckForeign:
      return {"XPENDING", c.stream, c.group, "-", "+", "1"};
    case ReaderCommandKind::kAck: {
      std::vector<std::string> args{"XACK", c.stream, c.group};
      args.insert(args.end(), cmd.ids.begin(), cmd.ids.end());
      return args;
    }
    case ReaderCommandKind::kDeadLetter: {
      std::vector<std::string> args{"EVAL",  kDeadLetterScript, "2", c.stream, c.dead_letter_stream,
                                    c.group, cmd.entry->id};
      for (const auto& [f, v] : cmd.entry->fields) args.insert(args.end(), {f, v});
      args.insert(args.end(),
                  {"rsc-source-stream", c.stream, "rsc-source-id", cmd.entry->id, "rsc-group",
                   c.group, "rsc-error", cmd.error, "rsc-attempts", std::to_string(cmd.attempts)});
      return args;
    }
  }
  return {};
}

ReaderReply ParseReaderReply(const ReaderCommand& command, Reply& reply) {
  if (std::optional<std::string> hint = ClusterRefusal(reply)) {
    return ReaderReply::Error(ReaderReply::Kind::kError,
                              fmt::format("{}: {}", ReaderCommandName(command.kind), *hint));
  }
  if (reply.IsError()) return ReaderReply::Error(ReaderReply::Kind::kError, std::move(reply.str));
  return Parse(command, reply);
}

namespace {

// Polling (reader_node.h): the pause between empty poll rounds doubles from 1 ms up to
// kPollPauseMax, plus kPollPauseMax per further kPollStreamsPerStep streams polled (so a
// master with 300 idle shards is asked about 3,000 times a second, not 15,000), capped.
constexpr milliseconds kPollPauseMax{20};
constexpr size_t kPollStreamsPerStep = 64;
constexpr milliseconds kPollPauseCap{200};

}  // namespace

ReaderNode::ReaderNode(redis::ConnectionOptions redis, bool cluster, Hooks hooks)
    : command_timeout_(redis.command_timeout),
      cluster_(cluster),
      hooks_(std::move(hooks)),
      command_conn_(redis),
      live_conn_(redis) {}

ReaderNode::~ReaderNode() { Stop(); }

void ReaderNode::Start() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || command_thread_.joinable()) return;
    stats_.threads = 2;
  }
  command_thread_ = std::thread([this] { RunCommands(); });
  live_thread_ = std::thread([this] { RunLive(); });
}

void ReaderNode::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  halted_ = true;
  command_cv_.notify_all();
  live_cv_.notify_all();
  // Whatever either thread is blocked in (a read with a long BLOCK, a reply timeout) returns
  // now with a transport error, which nobody is told about.
  command_conn_.Interrupt();
  live_conn_.Interrupt();
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (command_thread_.joinable()) command_thread_.join();
  if (live_thread_.joinable()) live_thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  command_open_ = false;
  live_open_ = false;
  stats_.threads = 0;
}

void ReaderNode::Enqueue(NodeRead read) {
  std::vector<NodeRead> one;
  one.push_back(std::move(read));
  Enqueue(std::move(one));
}

void ReaderNode::Enqueue(std::vector<NodeRead> reads) {
  if (reads.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    live_queue_.insert(live_queue_.end(), std::make_move_iterator(reads.begin()),
                       std::make_move_iterator(reads.end()));
    arrived_ = true;
    // A reader came back while the others wait in a blocked read: cut that read short so
    // this one joins the next, instead of waiting up to BLOCK for its turn. Only once the
    // read has been out for kUnblockGrace: a read that finds entries returns by then on
    // its own (a backlog), and cutting it would cost a command per returning reader.
    if (live_busy_ && live_round_.blocking) RequestUnblockLocked(live_sent_at_ + kUnblockGrace);
  }
  live_cv_.notify_one();
}

void ReaderNode::Enqueue(NodeCommand command) {
  Queued q;
  q.type = Queued::Type::kCommand;
  q.command = std::move(command);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    command_queue_.push_back(std::move(q));
  }
  command_cv_.notify_one();
}

void ReaderNode::Cancel(uint64_t token, bool now) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return;
  for (auto it = live_queue_.begin(); it != live_queue_.end(); ++it) {
    if (it->token != token) continue;
    // Answered by the command thread, which is never blocked for long: the live thread may
    // be inside a read, and the caller must not get an answer synchronously.
    NodeRead read = std::move(*it);
    live_queue_.erase(it);
    AnswerUnsentLocked(std::move(read), /*may_ack=*/!now);
    return;
  }
  if (!live_busy_) return;
  for (Bucket& bucket : live_round_.buckets) {
    for (NodeRead& read : bucket.reads) {
      if (read.token != token) continue;
      read.cancelled = true;
      if (!now) {
        // A poll round comes back within a round trip anyway.
        if (live_round_.blocking) RequestUnblockLocked();
        return;
      }
      live_cut_ = true;
      lock.unlock();
      live_conn_.Cut();  // thread-safe: the live thread's command returns at once
      return;
    }
  }
}

bool ReaderNode::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return command_queue_.empty() && !unblock_retry_ && live_queue_.empty() && !live_busy_ &&
         active_ == 0;
}

ReaderRedisStats ReaderNode::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReaderRedisStats s = stats_;
  s.connections = (command_open_ ? 1 : 0) + (live_open_ ? 1 : 0);
  s.nodes = s.connections > 0 ? 1 : 0;
  return s;
}

void ReaderNode::RequestUnblockLocked(std::optional<Clock::time_point> not_before) {
  // Without the live connection's id (CLIENT ID refused, say by an ACL) the read just runs
  // its course: later, never wrong.
  if (!live_busy_ || !live_round_.blocking || live_unblock_requested_ || !live_client_id_) return;
  live_unblock_requested_ = true;
  Queued q;
  q.type = Queued::Type::kUnblock;
  q.gen = live_gen_;
  if (not_before && *not_before > Clock::now()) {
    // Sent by the command thread at that time if the read is still out (as a retry is).
    unblock_retry_ = std::move(q);
    unblock_retry_at_ = *not_before;
  } else {
    command_queue_.push_back(std::move(q));
  }
  command_cv_.notify_one();
}

void ReaderNode::Deliver(std::vector<ReaderAnswer>& answers) {
  // Stop() promised the owner silence: it may be tearing down what the hook reaches.
  if (!answers.empty() && !halted_) hooks_.answered(answers);
  answers.clear();
}

void ReaderNode::Bounce(std::vector<NodeCommand> commands, std::vector<NodeRead> reads) {
  if (commands.empty() && reads.empty()) return;
  if (halted_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.redirects += static_cast<int64_t>(commands.size() + reads.size());
  }
  hooks_.bounced(std::move(commands), std::move(reads));
}

void ReaderNode::Failed() {
  if (!halted_ && hooks_.failed) hooks_.failed();
}

void ReaderNode::RunCommands() {
  BlockSigpipe();
  for (;;) {
    std::vector<Queued> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (stopping_) return;
        if (!command_queue_.empty()) break;
        if (!unblock_retry_) {
          command_cv_.wait(lock);
        } else if (Clock::now() < unblock_retry_at_) {
          command_cv_.wait_until(lock, unblock_retry_at_);
        } else {
          break;
        }
      }
      if (unblock_retry_ && Clock::now() >= unblock_retry_at_) {
        batch.push_back(std::move(*unblock_retry_));
        unblock_retry_.reset();
      }
      while (!command_queue_.empty() && batch.size() < kMaxPipeline) {
        batch.push_back(std::move(command_queue_.front()));
        command_queue_.pop_front();
      }
      ++active_;
      // An unblock goes out only while the read it was asked for is in flight, with the
      // live connection's current id. It can still reach Redis after that read returned and
      // hit the next one: RunLive tells such an early return from a timeout.
      for (Queued& q : batch) {
        if (q.type != Queued::Type::kUnblock) continue;
        q.command.args.clear();
        if (live_busy_ && live_round_.blocking && live_gen_ == q.gen && live_client_id_) {
          q.command.args = {"CLIENT", "UNBLOCK", std::to_string(*live_client_id_), "TIMEOUT"};
        }
      }
    }
    ExecuteBatch(batch);
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
  }
}

void ReaderNode::ExecuteBatch(std::vector<Queued>& batch) {
  static const redis::Command kAsking{"ASKING"};
  std::vector<ReaderAnswer> answers;
  answers.reserve(batch.size());
  // A cancelled queued read first, before the pipeline: nothing to wait for.
  for (const Queued& q : batch) {
    if (q.type != Queued::Type::kAnswerNil) continue;
    ReaderReply nil = Nil();
    if (q.acked) nil.count = *q.acked;
    if (!q.refused.empty()) nil = ReaderReply::Error(ReaderReply::Kind::kTransport, q.refused);
    answers.push_back({q.command.token, std::move(nil)});
  }
  Deliver(answers);
  std::vector<const redis::Command*> cmds;
  int64_t unblocks = 0;
  int64_t sent_commands = 0;
  for (const Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil || q.command.args.empty()) continue;
    if (q.command.asking) cmds.push_back(&kAsking);
    cmds.push_back(&q.command.args);
    if (q.type == Queued::Type::kUnblock) {
      ++unblocks;
    } else {
      ++sent_commands;
    }
  }
  std::string error;
  bool ok = false;
  if (!cmds.empty()) {
    // Reader commands include writes (XACK, XCLAIM, the dead-letter script); a reply lost
    // after sending is a transport failure to the core either way.
    Status sent = command_conn_.Send(cmds, redis::CommandKind::kWrite);
    ok = sent.ok();
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) {
      command_open_ = true;
      stats_.commands += sent_commands;
      stats_.unblocks += unblocks;
    } else {
      error = sent.error().message;
      command_open_ = false;
    }
  }
  const bool failed = !cmds.empty() && !ok;
  bool failed_later = false;
  // After a transport failure every later reply of the pipeline is lost too. The answers go
  // out together after the pipeline (one hand-over to the owner rather than one per reply).
  std::vector<NodeCommand> bounced;
  auto receive = [&]() -> std::optional<redis::Reply> {
    if (!ok) return std::nullopt;
    Result<redis::Reply> r = command_conn_.Receive();
    if (r.ok()) return std::move(r).value();
    // The connection dropped itself; the next batch reconnects.
    ok = false;
    failed_later = true;
    error = "Redis pipeline failed: " + r.error().message;
    std::lock_guard<std::mutex> lock(mu_);
    command_open_ = false;
    return std::nullopt;
  };
  for (Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil || q.command.args.empty()) continue;  // answered
    if (q.command.asking) (void)receive();                                       // ASKING's +OK
    std::optional<redis::Reply> reply = receive();
    if (q.type == Queued::Type::kCommand) {
      if (reply && cluster_ && IsRedirect(*reply)) {
        q.command.redirect = std::move(reply->str);
        bounced.push_back(std::move(q.command));
        continue;
      }
      ReaderCommand as;
      as.kind = q.command.kind;
      answers.push_back(
          {q.command.token, reply ? ParseReaderReply(as, *reply)
                                  : ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
      continue;
    }
    // CLIENT UNBLOCK answers 1 when it unblocked the client, 0 when the client was not
    // blocked: the read may still be on its way to Redis. Try again while it is in flight.
    const bool unblocked = reply && reply->IsInteger() && reply->integer == 1;
    const bool refused = reply && reply->IsError();
    if (unblocked || refused) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (live_busy_ && live_round_.blocking && live_gen_ == q.gen) {
      const milliseconds wait =
          std::min(kUnblockRetryMax, milliseconds(int64_t{1} << std::min(q.attempt, 7)));
      unblock_retry_at_ = Clock::now() + wait;
      ++q.attempt;
      unblock_retry_ = std::move(q);
      // This thread waits for it itself: no notify needed.
    }
  }
  Deliver(answers);
  Bounce(std::move(bounced), {});
  if (failed || failed_later) Failed();
}

bool ReaderNode::EnsureLive(std::string* error) {
  if (live_ready_) {
    // A socket the server closed while idle would be replaced by the round's own command,
    // silently, and the CLIENT ID known here would then name a client that is gone (or, after
    // a restart, someone else). Replace it here and learn the new id.
    if (live_conn_.Ready().ok() && live_conn_.reconnects() == live_reconnects_) return true;
    live_ready_ = false;
    std::lock_guard<std::mutex> lock(mu_);
    live_client_id_.reset();
  }
  // The id lets the command connection cut this connection's blocked read short.
  Result<redis::Reply> id = live_conn_.Run({"CLIENT", "ID"}, redis::CommandKind::kRead);
  if (!id.ok()) {
    *error = id.error().message;
    std::lock_guard<std::mutex> lock(mu_);
    live_open_ = false;
    return false;
  }
  live_reconnects_ = live_conn_.reconnects();
  std::lock_guard<std::mutex> lock(mu_);
  live_open_ = true;
  if (id->IsInteger()) {
    live_client_id_ = id->integer;
  } else {
    live_client_id_.reset();
  }
  live_ready_ = true;
  return true;
}

milliseconds ReaderNode::PollPauseMaxLocked() const {
  const auto steps = static_cast<int64_t>(live_queue_.size() / kPollStreamsPerStep);
  return std::min(kPollPauseCap, kPollPauseMax * (1 + steps));
}

void ReaderNode::RunLive() {
  BlockSigpipe();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      live_cv_.wait(lock, [&] { return stopping_ || !live_queue_.empty(); });
      if (stopping_) return;
      if (poll_pause_.count() > 0 && !arrived_) {
        // Polling and nothing came last round: wait, but not past a reader's deadline, and
        // not once a reader comes back.
        Clock::time_point wake = poll_resume_at_;
        for (const NodeRead& r : live_queue_) wake = std::min(wake, r.deadline);
        live_cv_.wait_until(lock, wake, [&] { return stopping_ || arrived_; });
        if (stopping_) return;
      }
    }
    std::string error;
    const bool connected = EnsureLive(&error);
    std::vector<ReaderAnswer> answers;
    bool round = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      const Clock::time_point now = Clock::now();
      // A read whose block time ran out while it waited (behind another group's read, carried
      // over from a read cut short, or polled without entries) gets the timeout it asked for.
      for (auto it = live_queue_.begin(); it != live_queue_.end();) {
        if (it->deadline <= now) {
          if (it->ack_args.empty() && !it->acked) {
            answers.push_back({it->token, Nil()});
          } else {
            AnswerUnsentLocked(std::move(*it), /*may_ack=*/false);
          }
          it = live_queue_.erase(it);
        } else {
          ++it;
        }
      }
      if (!connected) {
        for (const NodeRead& r : live_queue_) {
          answers.push_back({r.token, ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
        }
        live_queue_.clear();
      } else if (!live_queue_.empty() &&
                 (poll_pause_.count() == 0 || arrived_ || now >= poll_resume_at_)) {
        round = ChooseRoundLocked();
      }
      ++active_;
    }
    Deliver(answers);
    if (!connected) Failed();
    if (round) RunRound();
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
  }
}

bool ReaderNode::ChooseRoundLocked() {
  live_round_ = LiveRound{};
  arrived_ = false;
  bool one_bucket = true;
  if (cluster_) {
    const NodeRead& first = live_queue_.front();
    for (const NodeRead& r : live_queue_) {
      if (r.asking || r.slot != first.slot || r.group != first.group ||
          r.consumer_name != first.consumer_name) {
        one_bucket = false;
        break;
      }
    }
  }
  if (one_bucket) {
    ChooseBlockingLocked(Clock::now());
  } else {
    ChoosePollsLocked();
  }
  if (live_round_.buckets.empty()) return false;
  live_busy_ = true;
  live_sent_at_ = Clock::now();
  ++live_gen_;
  live_unblock_requested_ = false;
  return true;
}

void ReaderNode::ChooseBlockingLocked(Clock::time_point now) {
  // One (group, consumer name) per command; another pair than the last one goes first, so
  // two pairs take turns.
  size_t first = 0;
  for (size_t i = 0; i < live_queue_.size(); ++i) {
    if (std::tie(live_queue_[i].group, live_queue_[i].consumer_name) !=
        std::tie(last_pair_.first, last_pair_.second)) {
      first = i;
      break;
    }
  }
  last_pair_ = {live_queue_[first].group, live_queue_[first].consumer_name};
  Bucket bucket;
  std::set<std::string> streams;
  int count = 0;
  for (auto it = live_queue_.begin() + static_cast<ptrdiff_t>(first); it != live_queue_.end();) {
    // Redis would answer a stream named twice twice: the second read waits its turn.
    if (it->group != last_pair_.first || it->consumer_name != last_pair_.second ||
        !streams.insert(it->stream).second) {
      ++it;
      continue;
    }
    count = count == 0 ? it->count : std::min(count, it->count);
    bucket.reads.push_back(std::move(*it));
    it = live_queue_.erase(it);
  }
  // No reader waits past its own block time, not even one left in the queue.
  Clock::time_point until = bucket.reads.front().deadline;
  for (const NodeRead& r : bucket.reads) until = std::min(until, r.deadline);
  for (const NodeRead& r : live_queue_) until = std::min(until, r.deadline);
  const milliseconds block =
      std::max(milliseconds(1), std::chrono::ceil<milliseconds>(until - now));
  bucket.args = {"XREADGROUP",     "GROUP",
                 last_pair_.first, last_pair_.second,
                 "COUNT",          std::to_string(std::max(1, count)),
                 "BLOCK",          std::to_string(block.count()),
                 "STREAMS"};
  for (const NodeRead& r : bucket.reads) bucket.args.push_back(r.stream);
  bucket.args.insert(bucket.args.end(), bucket.reads.size(), ">");
  AddPipelinedLocked(bucket);
  ++stats_.live_reads;
  stats_.live_read_streams += static_cast<int64_t>(bucket.reads.size());
  live_round_.blocking = true;
  live_round_.block = block;
  live_round_.buckets.push_back(std::move(bucket));
}

void ReaderNode::ChoosePollsLocked() {
  // One non-blocking read per (group, consumer name, slot); a read after ASKING alone.
  std::map<std::tuple<std::string, std::string, int>, size_t> index;
  std::set<std::pair<size_t, std::string>> named;  // (bucket, stream)
  for (auto it = live_queue_.begin(); it != live_queue_.end();) {
    size_t b = 0;
    if (it->asking) {
      b = live_round_.buckets.size();
      live_round_.buckets.emplace_back().asking = true;
    } else {
      auto [pos, added] =
          index.try_emplace({it->group, it->consumer_name, it->slot}, live_round_.buckets.size());
      if (added) live_round_.buckets.emplace_back();
      b = pos->second;
      // Redis would answer a stream named twice twice: the second read waits its turn.
      if (!named.emplace(b, it->stream).second) {
        ++it;
        continue;
      }
    }
    live_round_.buckets[b].reads.push_back(std::move(*it));
    it = live_queue_.erase(it);
  }
  for (Bucket& bucket : live_round_.buckets) {
    int count = bucket.reads.front().count;
    for (const NodeRead& r : bucket.reads) count = std::min(count, r.count);
    bucket.args = {"XREADGROUP",
                   "GROUP",
                   bucket.reads.front().group,
                   bucket.reads.front().consumer_name,
                   "COUNT",
                   std::to_string(std::max(1, count)),
                   "STREAMS"};
    for (const NodeRead& r : bucket.reads) bucket.args.push_back(r.stream);
    bucket.args.insert(bucket.args.end(), bucket.reads.size(), ">");
    AddPipelinedLocked(bucket);
    ++stats_.polls;
  }
  live_round_.blocking = false;
}

void ReaderNode::AddPipelinedLocked(Bucket& bucket) {
  for (size_t i = 0; i < bucket.reads.size(); ++i) {
    NodeRead& read = bucket.reads[i];
    if (!read.ack_args.empty()) {
      bucket.acks.push_back(std::move(read.ack_args));
      bucket.acks_of.push_back(i);
      read.ack_args.clear();
    }
    if (read.check) {
      bucket.checks.push_back({"XPENDING", read.stream, read.group, "-", "+", "1"});
      bucket.checks_of.push_back(i);
    }
  }
}

void ReaderNode::AnswerUnsentLocked(NodeRead read, bool may_ack) {
  Queued q;
  q.command.token = read.token;
  if (read.ack_args.empty()) {
    q.type = Queued::Type::kAnswerNil;
    q.acked = read.acked;
  } else if (!may_ack) {
    // C4: an abandoned shard's lease may have ended, and a read whose block time ran out
    // may have been bounded by it: its XACK is not sent; the batch stays pending and is
    // handled again by whoever reads the shard next.
    q.type = Queued::Type::kAnswerNil;
    q.refused =
        "the read carrying the batch's XACK was not sent (abandoned, or its block "
        "time ran out first): the XACK was dropped";
  } else {
    q.type = Queued::Type::kCommand;
    q.command.kind = ReaderCommandKind::kAck;
    q.command.key = read.stream;
    q.command.args = std::move(read.ack_args);
  }
  command_queue_.push_back(std::move(q));
  command_cv_.notify_one();
}

bool ReaderNode::SendRound(std::vector<BucketReplies>& replies, std::string* error) {
  static const redis::Command kAsking{"ASKING"};
  // The round's commands are not changed by anyone while it is in flight: read them unlocked.
  // Per bucket, in this order: its XACKs, ASKING, the read, its checks.
  std::vector<const redis::Command*> cmds;
  bool writes = false;
  for (const Bucket& bucket : live_round_.buckets) {
    for (const redis::Command& ack : bucket.acks) cmds.push_back(&ack);
    writes = writes || !bucket.acks.empty();
    if (bucket.asking) cmds.push_back(&kAsking);
    cmds.push_back(&bucket.args);
    for (const redis::Command& check : bucket.checks) cmds.push_back(&check);
  }
  // A lost reply to an XACK is a transport failure to the core either way.
  Status sent =
      live_conn_.Send(cmds, writes ? redis::CommandKind::kWrite : redis::CommandKind::kRead);
  if (!sent.ok()) {
    *error = sent.error().message;
    return false;
  }
  auto receive = [&](std::optional<redis::Reply>* into, std::optional<milliseconds> timeout) {
    Result<redis::Reply> r = timeout ? live_conn_.Receive(*timeout) : live_conn_.Receive();
    if (!r.ok()) {
      *error = (live_round_.blocking ? "" : "Redis pipeline failed: ") + r.error().message;
      return false;
    }
    *into = std::move(r).value();
    return true;
  };
  for (size_t i = 0; i < live_round_.buckets.size(); ++i) {
    const Bucket& bucket = live_round_.buckets[i];
    BucketReplies& out = replies[i];
    out.acks.resize(bucket.acks.size());
    out.checks.resize(bucket.checks.size());
    for (auto& ack : out.acks) {
      if (!receive(&ack, std::nullopt)) return false;
    }
    std::optional<redis::Reply> asking;
    if (bucket.asking && !receive(&asking, std::nullopt)) return false;
    // A blocking read is answered within its BLOCK plus the command timeout.
    std::optional<milliseconds> wait;
    if (live_round_.blocking) wait = live_round_.block + command_timeout_;
    if (!receive(&out.read, wait)) return false;
    for (auto& check : out.checks) {
      if (!receive(&check, std::nullopt)) return false;
    }
  }
  return true;
}

void ReaderNode::ApplyAcksLocked(Bucket& bucket, BucketReplies& replies, const std::string& error,
                                 std::vector<ReaderAnswer>* answers) {
  if (bucket.acks_of.empty()) return;
  std::vector<bool> failed(bucket.reads.size(), false);
  for (size_t k = 0; k < bucket.acks_of.size(); ++k) {
    NodeRead& read = bucket.reads[bucket.acks_of[k]];
    std::optional<redis::Reply>& reply = replies.acks[k];
    if (reply && reply->IsInteger()) {
      read.acked = reply->integer;
      continue;
    }
    // The XACK failed: the batch stays pending, and so do the entries this read brought.
    ReaderCommand as;
    as.kind = ReaderCommandKind::kAck;
    answers->push_back(
        {read.token, reply ? ParseReaderReply(as, *reply)
                           : ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
    failed[bucket.acks_of[k]] = true;
  }
  // Those readers are answered: out of the bucket (and its checks' indexes with them).
  std::vector<size_t> new_index(bucket.reads.size());
  std::vector<NodeRead> kept;
  for (size_t i = 0; i < bucket.reads.size(); ++i) {
    new_index[i] = kept.size();
    if (!failed[i]) kept.push_back(std::move(bucket.reads[i]));
  }
  std::vector<size_t> checks_of;
  std::vector<std::optional<redis::Reply>> checks;
  for (size_t k = 0; k < bucket.checks_of.size(); ++k) {
    if (failed[bucket.checks_of[k]]) continue;
    checks_of.push_back(new_index[bucket.checks_of[k]]);
    checks.push_back(std::move(replies.checks[k]));
  }
  bucket.reads = std::move(kept);
  bucket.checks_of = std::move(checks_of);
  replies.checks = std::move(checks);
}

void ReaderNode::ApplyChecks(const Bucket& bucket, BucketReplies& replies,
                             std::vector<ReaderAnswer>* answers, size_t first) {
  std::unordered_map<uint64_t, const NodeRead*> acked;
  std::unordered_map<uint64_t, std::optional<redis::Reply>*> checks;
  for (const NodeRead& read : bucket.reads) {
    if (read.acked) acked.emplace(read.token, &read);
  }
  for (size_t k = 0; k < bucket.checks_of.size(); ++k) {
    checks.emplace(bucket.reads[bucket.checks_of[k]].token, &replies.checks[k]);
  }
  if (acked.empty() && checks.empty()) return;
  for (size_t i = first; i < answers->size(); ++i) {
    ReaderAnswer& a = (*answers)[i];
    if (!a.reply.ok()) continue;  // the core drops the entries; a count would not be read
    if (auto it = acked.find(a.token); it != acked.end()) a.reply.count = *it->second->acked;
    auto it = checks.find(a.token);
    if (it == checks.end()) continue;
    std::optional<redis::Reply>& reply = *it->second;
    ReaderCommand as;
    as.kind = ReaderCommandKind::kCheckForeign;
    if (!reply) {  // the connection failed after the read's reply
      a.reply = ReaderReply::Error(ReaderReply::Kind::kTransport, "no reply to the check");
      continue;
    }
    ReaderReply check = ParseReaderReply(as, *reply);
    if (!check.ok()) {  // the entries stay pending: read again after the setup
      a.reply = std::move(check);
      continue;
    }
    a.reply.lowest_owner = std::move(check.lowest_owner);
    a.reply.checked = true;
  }
}

void ReaderNode::RunRound() {
  std::vector<BucketReplies> replies(live_round_.buckets.size());
  std::string error;
  const Clock::time_point sent_at = Clock::now();
  (void)SendRound(replies, &error);
  // Redis starts the BLOCK when the command arrives, after sent_at: a nil reply earlier
  // than this was an unblock, not a timeout.
  const bool timed_out = Clock::now() >= sent_at + live_round_.block;
  const bool transport_failed = !error.empty();
  std::vector<ReaderAnswer> answers;
  std::vector<NodeRead> bounced;
  bool recut = false;
  bool report_failure = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    LiveRound round = std::move(live_round_);
    live_round_ = LiveRound{};
    live_busy_ = false;
    if (transport_failed) {  // the connection dropped itself: reconnect for the next read
      live_ready_ = false;
      live_open_ = false;
      live_client_id_.reset();
    }
    std::vector<NodeRead> carry;
    bool found = false;
    for (size_t i = 0; i < round.buckets.size(); ++i) {
      ApplyAcksLocked(round.buckets[i], replies[i], error, &answers);
      const size_t first = answers.size();
      redis::Reply cut;  // nil
      redis::Reply* reply = replies[i].read ? &*replies[i].read : nullptr;
      bool as_timed_out = timed_out;
      if (!reply && live_cut_) {
        // Our own cut: answered like an unblocked read (the cancelled readers kNil, the
        // others carried over), not as a failure of Redis.
        reply = &cut;
        as_timed_out = false;
      }
      if (round.blocking) {
        AnswerBlockingLocked(round.buckets[i].reads, reply, error, as_timed_out, &answers, &carry,
                             &bounced);
      } else {
        AnswerPollLocked(round.buckets[i].reads, reply, error, &answers, &carry, &bounced, &found);
      }
      ApplyChecks(round.buckets[i], replies[i], &answers, first);
    }
    // Carried-over readers go first in the next round, in their order.
    live_queue_.insert(live_queue_.begin(), std::make_move_iterator(carry.begin()),
                       std::make_move_iterator(carry.end()));
    if (round.blocking || found || transport_failed) {
      poll_pause_ = milliseconds(0);
    } else {
      poll_pause_ = std::min(PollPauseMaxLocked(), std::max(milliseconds(1), poll_pause_ * 2));
      poll_resume_at_ = Clock::now() + poll_pause_;
    }
    if (!transport_failed && live_cut_) {
      // The cut came after the replies: the socket is shut down all the same.
      recut = true;
      live_ready_ = false;
      live_open_ = false;
      live_client_id_.reset();
    }
    report_failure = transport_failed && !live_cut_;
    live_cut_ = false;
  }
  if (recut) live_conn_.Disconnect();  // reconnect for the next read
  Deliver(answers);
  Bounce({}, std::move(bounced));
  if (report_failure) Failed();
}

void ReaderNode::AnswerReadErrorLocked(std::vector<NodeRead>& reads, redis::Reply& reply,
                                       std::vector<ReaderAnswer>* answers,
                                       std::vector<NodeRead>* bounced) {
  if (cluster_ && IsRedirect(reply)) {
    // A multi-stream read shares one slot, so the redirection holds for all of them.
    for (NodeRead& read : reads) {
      read.redirect = reply.str;
      read.asking = false;
      bounced->push_back(std::move(read));
    }
    return;
  }
  // NOGROUP names the key: "NOGROUP No such key 's' or consumer group 'G' in XREADGROUP
  // with GROUP option". Only that reader must recreate its group.
  const std::string text = ClusterRefusal(reply).value_or(reply.str);
  const NodeRead* named = nullptr;
  int matches = 0;
  for (const NodeRead& read : reads) {
    if (text.find("key '" + read.stream + "'") != std::string::npos) {
      named = &read;
      ++matches;
    }
  }
  for (const NodeRead& read : reads) {
    if (matches != 1 || &read == named) {
      answers->push_back({read.token, ReaderReply::Error(ReaderReply::Kind::kError, text)});
    } else {
      answers->push_back({read.token, Nil()});
    }
  }
}

void ReaderNode::AnswerBlockingLocked(std::vector<NodeRead>& reads, redis::Reply* reply,
                                      const std::string& error, bool timed_out,
                                      std::vector<ReaderAnswer>* answers,
                                      std::vector<NodeRead>* carry,
                                      std::vector<NodeRead>* bounced) {
  auto all = [&](const ReaderReply& r) {
    for (const NodeRead& read : reads) answers->push_back({read.token, r});
  };
  ReaderCommand as;
  as.kind = ReaderCommandKind::kReadLive;
  if (reply == nullptr) {
    all(ReaderReply::Error(ReaderReply::Kind::kTransport, error));
    return;
  }
  if (reply->IsError()) {
    AnswerReadErrorLocked(reads, *reply, answers, bounced);
    return;
  }
  if (reply->IsNil()) {
    if (timed_out) {
      all(Nil());
      return;
    }
    // Cut short by CLIENT UNBLOCK, ours for this read or a late one meant for the previous
    // read. Readers that did not ask to stop go into the next read with the rest of their
    // block time, so a cut never answers (and brings back) readers who are still waiting.
    const Clock::time_point now = Clock::now();
    for (NodeRead& read : reads) {
      if (read.cancelled || read.deadline <= now) {
        answers->push_back({read.token, Nil()});
      } else {
        read.cancelled = false;
        carry->push_back(std::move(read));
      }
    }
    return;
  }
  if (!reply->IsArray() ||
      !std::all_of(reply->elements.begin(), reply->elements.end(), IsStreamReply)) {
    all(Unexpected(as, *reply));
    return;
  }
  std::unordered_map<std::string_view, redis::Reply*> by_stream;
  for (redis::Reply& s : reply->elements) by_stream.emplace(s.elements[0].str, &s.elements[1]);
  for (const NodeRead& read : reads) {
    ReaderReply r = Nil();
    if (auto it = by_stream.find(read.stream); it != by_stream.end()) {
      r.kind = ReaderReply::Kind::kOk;
      r.entries = ParseEntries(*it->second);
    }
    answers->push_back({read.token, std::move(r)});
  }
}

void ReaderNode::AnswerPollLocked(std::vector<NodeRead>& reads, redis::Reply* reply,
                                  const std::string& error, std::vector<ReaderAnswer>* answers,
                                  std::vector<NodeRead>* carry, std::vector<NodeRead>* bounced,
                                  bool* found) {
  ReaderCommand as;
  as.kind = ReaderCommandKind::kReadLive;
  if (reply == nullptr) {
    for (const NodeRead& read : reads) {
      answers->push_back({read.token, ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
    }
    return;
  }
  if (reply->IsError()) {
    AnswerReadErrorLocked(reads, *reply, answers, bounced);
    return;
  }
  if (!reply->IsNil() &&
      (!reply->IsArray() ||
       !std::all_of(reply->elements.begin(), reply->elements.end(), IsStreamReply))) {
    for (const NodeRead& read : reads) answers->push_back({read.token, Unexpected(as, *reply)});
    return;
  }
  std::unordered_map<std::string_view, redis::Reply*> by_stream;
  if (reply->IsArray()) {
    for (redis::Reply& s : reply->elements) {
      if (!s.elements[1].elements.empty()) by_stream.emplace(s.elements[0].str, &s.elements[1]);
    }
  }
  // Readers without entries are polled again, unless they asked to stop or their block time
  // is up.
  const Clock::time_point now = Clock::now();
  for (NodeRead& read : reads) {
    if (auto it = by_stream.find(read.stream); it != by_stream.end()) {
      ReaderReply r;
      r.kind = ReaderReply::Kind::kOk;
      r.entries = ParseEntries(*it->second);
      answers->push_back({read.token, std::move(r)});
      *found = true;
    } else if (read.cancelled || read.deadline <= now) {
      answers->push_back({read.token, Nil()});
    } else {
      // Polled again as it was, after ASKING again if so: the slot is still migrating.
      carry->push_back(std::move(read));
    }
  }
}

}  // namespace rsc::client
