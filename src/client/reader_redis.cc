#include "client/reader_redis.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

// The CLIENT UNBLOCK races. The live thread sends a read and blocks in it; the command thread
// sends the unblock. Two orders can go wrong, and neither may leave a reader waiting up to
// BLOCK or answered wrongly:
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

// A Redis Cluster's refusal, said plainly: the readers do not follow a cluster yet
// (docs/design/cluster-data-plane.md), and "MOVED 1234 10.0.0.2:6379" alone reads like a bug.
std::optional<std::string> ClusterRefusal(const Reply& reply) {
  if (!reply.ErrorIs("MOVED") && !reply.ErrorIs("ASK") && !reply.ErrorIs("CROSSSLOT")) {
    return std::nullopt;
  }
  return fmt::format(
      "the shard stream is on a Redis Cluster ({}); the consumer does not support "
      "Redis Cluster yet, give it a single server",
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

ReaderRedis::ReaderRedis(redis::ConnectionOptions redis, Done done)
    : command_timeout_(redis.command_timeout),
      done_(std::move(done)),
      command_conn_(redis),
      live_conn_(redis) {}

ReaderRedis::~ReaderRedis() { Stop(); }

void ReaderRedis::Start() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || command_thread_.joinable()) return;
  }
  command_thread_ = std::thread([this] { RunCommands(); });
  live_thread_ = std::thread([this] { RunLive(); });
}

void ReaderRedis::Stop() {
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
}

void ReaderRedis::Submit(uint64_t token, const ReaderCoreConfig& config,
                         const ReaderCommand& command) {
  if (command.kind == ReaderCommandKind::kReadLive) {
    LiveRead read;
    read.token = token;
    read.stream = config.stream;
    read.group = config.group;
    read.consumer_name = config.consumer_name;
    read.count = command.count;
    read.deadline = Clock::now() + milliseconds(std::max<TimeMs>(1, command.block_ms));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      live_queue_.push_back(std::move(read));
      // A reader came back while the others wait in a blocked read: cut that read short so
      // this one joins the next, instead of waiting up to BLOCK for its turn. Only once the
      // read has been out for kUnblockGrace: a read that finds entries returns by then on
      // its own (a backlog), and cutting it would cost a command per returning reader.
      if (live_busy_) RequestUnblockLocked(live_sent_at_ + kUnblockGrace);
    }
    live_cv_.notify_one();
    return;
  }
  Queued q;
  q.type = Queued::Type::kCommand;
  q.token = token;
  q.kind = command.kind;
  q.args = ReaderCommandArgs(config, command);  // command.entry is valid only now
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    command_queue_.push_back(std::move(q));
  }
  command_cv_.notify_one();
}

void ReaderRedis::Cancel(uint64_t token, bool now) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return;
  for (auto it = live_queue_.begin(); it != live_queue_.end(); ++it) {
    if (it->token != token) continue;
    live_queue_.erase(it);
    // Answered by the command thread, which is never blocked for long: the live thread may
    // be inside a read, and the caller must not get `done` synchronously.
    Queued q;
    q.type = Queued::Type::kAnswerNil;
    q.token = token;
    command_queue_.push_back(std::move(q));
    command_cv_.notify_one();
    return;
  }
  for (LiveRead& read : live_in_flight_) {
    if (read.token != token) continue;
    read.cancelled = true;
    if (!now) {
      RequestUnblockLocked();
      return;
    }
    live_cut_ = true;
    lock.unlock();
    live_conn_.Cut();  // thread-safe: the live thread's Command returns at once
    return;
  }
}

ReaderRedisStats ReaderRedis::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReaderRedisStats s = stats_;
  s.connections = (command_open_ ? 1 : 0) + (live_open_ ? 1 : 0);
  return s;
}

void ReaderRedis::RequestUnblockLocked(std::optional<Clock::time_point> not_before) {
  // Without the live connection's id (CLIENT ID refused, say by an ACL) the read just runs
  // its course: later, never wrong.
  if (!live_busy_ || live_unblock_requested_ || !live_client_id_) return;
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

void ReaderRedis::Deliver(uint64_t token, ReaderReply reply) {
  // Stop() promised the owner silence: it may be tearing down what `done` reaches.
  if (halted_) return;
  done_(token, std::move(reply));
}

void ReaderRedis::Deliver(std::vector<Answer>& answers) {
  if (answers.empty()) return;
  if (batch_done_) {
    if (!halted_) batch_done_(answers);
  } else {
    for (Answer& a : answers) Deliver(a.token, std::move(a.reply));
  }
  answers.clear();
}

void ReaderRedis::RunCommands() {
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
      // An unblock goes out only while the read it was asked for is in flight, with the
      // live connection's current id. It can still reach Redis after that read returned and
      // hit the next one: RunLive tells such an early return from a timeout.
      for (Queued& q : batch) {
        if (q.type != Queued::Type::kUnblock) continue;
        q.args.clear();
        if (live_busy_ && live_gen_ == q.gen && live_client_id_) {
          q.args = {"CLIENT", "UNBLOCK", std::to_string(*live_client_id_), "TIMEOUT"};
        }
      }
    }
    ExecuteBatch(batch);
  }
}

void ReaderRedis::ExecuteBatch(std::vector<Queued>& batch) {
  const bool any_sent = std::any_of(batch.begin(), batch.end(), [](const Queued& q) {
    return q.type != Queued::Type::kAnswerNil && !q.args.empty();
  });
  // A cancelled queued read first: nothing to wait for.
  for (const Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil) Deliver(q.token, Nil());
  }
  std::string error;
  bool ok = false;
  if (any_sent) {
    std::vector<const redis::Command*> cmds;
    int64_t unblocks = 0;
    for (const Queued& q : batch) {
      if (q.type == Queued::Type::kAnswerNil || q.args.empty()) continue;
      cmds.push_back(&q.args);
      if (q.type == Queued::Type::kUnblock) ++unblocks;
    }
    // Reader commands include writes (XACK, XCLAIM, the dead-letter script); a reply lost
    // after sending is a transport failure to the core either way.
    Status sent = command_conn_.Send(cmds, redis::CommandKind::kWrite);
    ok = sent.ok();
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) {
      command_open_ = true;
      stats_.commands += static_cast<int64_t>(cmds.size()) - unblocks;
      stats_.unblocks += unblocks;
    } else {
      error = sent.error().message;
      command_open_ = false;
    }
  }
  // After a transport failure every later reply of the pipeline is lost too. The answers go
  // out together after the pipeline (one hand-over to the owner rather than one per reply).
  std::vector<Answer> answers;
  answers.reserve(batch.size());
  for (Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil || q.args.empty()) continue;  // answered, dropped
    std::optional<redis::Reply> reply;
    if (ok) {
      Result<redis::Reply> r = command_conn_.Receive();
      if (r.ok()) {
        reply = std::move(r).value();
      } else {
        // The connection dropped itself; the next batch reconnects.
        ok = false;
        error = "Redis pipeline failed: " + r.error().message;
        std::lock_guard<std::mutex> lock(mu_);
        command_open_ = false;
      }
    }
    if (q.type == Queued::Type::kCommand) {
      ReaderCommand as;
      as.kind = q.kind;
      answers.push_back({q.token, reply
                                      ? ParseReaderReply(as, *reply)
                                      : ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
      continue;
    }
    // CLIENT UNBLOCK answers 1 when it unblocked the client, 0 when the client was not
    // blocked: the read may still be on its way to Redis. Try again while it is in flight.
    const bool unblocked = reply && reply->IsInteger() && reply->integer == 1;
    const bool refused = reply && reply->IsError();
    if (unblocked || refused) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (live_busy_ && live_gen_ == q.gen) {
      const milliseconds wait =
          std::min(kUnblockRetryMax, milliseconds(int64_t{1} << std::min(q.attempt, 7)));
      unblock_retry_at_ = Clock::now() + wait;
      ++q.attempt;
      unblock_retry_ = std::move(q);
      // This thread waits for it itself: no notify needed.
    }
  }
  Deliver(answers);
}

bool ReaderRedis::EnsureLive(std::string* error) {
  if (live_ready_) return true;
  // The id lets the command connection cut this connection's blocked read short. The
  // command connects first if it must.
  Result<redis::Reply> id = live_conn_.Run({"CLIENT", "ID"}, redis::CommandKind::kRead);
  if (!id.ok()) {
    *error = id.error().message;
    std::lock_guard<std::mutex> lock(mu_);
    live_open_ = false;
    return false;
  }
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

void ReaderRedis::RunLive() {
  BlockSigpipe();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      live_cv_.wait(lock, [&] { return stopping_ || !live_queue_.empty(); });
      if (stopping_) return;
    }
    std::string error;
    const bool connected = EnsureLive(&error);
    std::vector<Answer> answers;
    std::vector<std::string> args;
    milliseconds block{0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      const Clock::time_point now = Clock::now();
      // A read whose block time ran out while it waited (behind another group's read, or
      // carried over from a read cut short) gets the timeout it asked for.
      for (auto it = live_queue_.begin(); it != live_queue_.end();) {
        if (it->deadline <= now) {
          answers.push_back({it->token, Nil()});
          it = live_queue_.erase(it);
        } else {
          ++it;
        }
      }
      if (!connected) {
        for (const LiveRead& r : live_queue_) {
          answers.push_back({r.token, ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
        }
        live_queue_.clear();
      } else if (!live_queue_.empty()) {
        // One (group, consumer name) per command; another pair than the last one goes first,
        // so two pairs take turns.
        size_t first = 0;
        for (size_t i = 0; i < live_queue_.size(); ++i) {
          if (std::tie(live_queue_[i].group, live_queue_[i].consumer_name) !=
              std::tie(last_pair_.first, last_pair_.second)) {
            first = i;
            break;
          }
        }
        last_pair_ = {live_queue_[first].group, live_queue_[first].consumer_name};
        std::set<std::string> streams;
        int count = 0;
        for (auto it = live_queue_.begin() + static_cast<ptrdiff_t>(first);
             it != live_queue_.end();) {
          // Redis would answer a stream named twice twice: the second read waits its turn.
          if (it->group != last_pair_.first || it->consumer_name != last_pair_.second ||
              !streams.insert(it->stream).second) {
            ++it;
            continue;
          }
          count = count == 0 ? it->count : std::min(count, it->count);
          live_in_flight_.push_back(std::move(*it));
          it = live_queue_.erase(it);
        }
        // No reader waits past its own block time, not even one left in the queue.
        Clock::time_point until = live_in_flight_.front().deadline;
        for (const LiveRead& r : live_in_flight_) until = std::min(until, r.deadline);
        for (const LiveRead& r : live_queue_) until = std::min(until, r.deadline);
        block = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(until - now));
        args = {"XREADGROUP",     "GROUP",
                last_pair_.first, last_pair_.second,
                "COUNT",          std::to_string(std::max(1, count)),
                "BLOCK",          std::to_string(block.count()),
                "STREAMS"};
        for (const LiveRead& r : live_in_flight_) args.push_back(r.stream);
        args.insert(args.end(), live_in_flight_.size(), ">");
        live_busy_ = true;
        live_sent_at_ = Clock::now();
        ++live_gen_;
        live_unblock_requested_ = false;
        ++stats_.live_reads;
        stats_.live_read_streams += static_cast<int64_t>(live_in_flight_.size());
      }
    }
    Deliver(answers);
    if (args.empty()) continue;
    const Clock::time_point sent_at = Clock::now();
    Result<redis::Reply> result =
        live_conn_.Run(args, redis::CommandKind::kRead, block + command_timeout_);
    std::optional<redis::Reply> reply;
    if (result.ok()) {
      reply = std::move(result).value();
    } else {
      error = result.error().message;
    }
    bool recut = false;
    // Redis starts the BLOCK when the command arrives, after sent_at: a nil reply earlier
    // than this was an unblock, not a timeout.
    const bool timed_out = Clock::now() >= sent_at + block;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      std::vector<LiveRead> reads = std::move(live_in_flight_);
      live_in_flight_.clear();
      live_busy_ = false;
      if (!reply) {  // the connection dropped itself: reconnect for the next read
        live_ready_ = false;
        live_open_ = false;
        live_client_id_.reset();
      }
      if (!reply && live_cut_) {
        // Our own cut: answered like an unblocked read (the cancelled readers kNil, the
        // others carried over), not as a failure of Redis.
        redis::Reply cut;  // nil
        answers = AnswerLiveLocked(reads, &cut, error, false);
      } else {
        answers = AnswerLiveLocked(reads, reply ? &*reply : nullptr, error, timed_out);
      }
      if (reply && live_cut_) {
        // The cut came after the reply: the socket is shut down all the same.
        recut = true;
        live_ready_ = false;
        live_open_ = false;
        live_client_id_.reset();
      }
      live_cut_ = false;
    }
    if (recut) live_conn_.Disconnect();  // reconnect for the next read
    Deliver(answers);
  }
}

std::vector<ReaderRedis::Answer> ReaderRedis::AnswerLiveLocked(std::vector<LiveRead>& reads,
                                                               redis::Reply* reply,
                                                               const std::string& error,
                                                               bool timed_out) {
  std::vector<Answer> answers;
  auto all = [&](const ReaderReply& r) {
    for (const LiveRead& read : reads) answers.push_back({read.token, r});
  };
  ReaderCommand as;
  as.kind = ReaderCommandKind::kReadLive;
  if (reply == nullptr) {
    all(ReaderReply::Error(ReaderReply::Kind::kTransport, error));
    return answers;
  }
  if (reply->IsError()) {
    // NOGROUP names the key: "NOGROUP No such key 's' or consumer group 'G' in XREADGROUP
    // with GROUP option". Only that reader must recreate its group.
    const std::string text = ClusterRefusal(*reply).value_or(reply->str);
    const LiveRead* named = nullptr;
    int matches = 0;
    for (const LiveRead& read : reads) {
      if (text.find("key '" + read.stream + "'") != std::string::npos) {
        named = &read;
        ++matches;
      }
    }
    if (matches != 1) {
      all(ReaderReply::Error(ReaderReply::Kind::kError, text));
      return answers;
    }
    for (const LiveRead& read : reads) {
      answers.push_back({read.token, &read == named
                                         ? ReaderReply::Error(ReaderReply::Kind::kError, text)
                                         : Nil()});
    }
    return answers;
  }
  if (reply->IsNil()) {
    if (timed_out) {
      all(Nil());
      return answers;
    }
    // Cut short by CLIENT UNBLOCK, ours for this read or a late one meant for the previous
    // read. Readers that did not ask to stop go into the next read with the rest of their
    // block time, so a cut never answers (and brings back) readers who are still waiting.
    const Clock::time_point now = Clock::now();
    for (auto it = reads.rbegin(); it != reads.rend(); ++it) {
      if (it->cancelled || it->deadline <= now) {
        answers.push_back({it->token, Nil()});
      } else {
        it->cancelled = false;
        live_queue_.push_front(std::move(*it));
      }
    }
    std::reverse(answers.begin(), answers.end());
    return answers;
  }
  if (!reply->IsArray() ||
      !std::all_of(reply->elements.begin(), reply->elements.end(), IsStreamReply)) {
    all(Unexpected(as, *reply));
    return answers;
  }
  std::unordered_map<std::string_view, redis::Reply*> by_stream;
  for (redis::Reply& s : reply->elements) by_stream.emplace(s.elements[0].str, &s.elements[1]);
  for (const LiveRead& read : reads) {
    ReaderReply r = Nil();
    if (auto it = by_stream.find(read.stream); it != by_stream.end()) {
      r.kind = ReaderReply::Kind::kOk;
      r.entries = ParseEntries(*it->second);
    }
    answers.push_back({read.token, std::move(r)});
  }
  return answers;
}

}  // namespace rsc::client
