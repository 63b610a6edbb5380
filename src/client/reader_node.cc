#include "client/reader_node.h"

#include <pthread.h>
#include <signal.h>

#include <utility>

// The driver of a NodeCore (node_core.h) over two hiredis connections and two threads. Every
// decision is the core's; this file only waits, sends, receives and hands out. The CLIENT
// UNBLOCK races are explained in node_core.cc.

namespace rsc::client {
namespace {

// A write to a connection that Stop() shut down (or that the peer reset) fails with EPIPE and
// raises SIGPIPE at the writing thread. Blocked in the port's threads, the signal stays
// pending there instead of killing the application; the write reports the error.
void BlockSigpipe() {
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
}

// Waits on `cv` until `stopping` or the core's work is due (`due`: when, from the core).
template <typename Due>
bool WaitDue(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, const bool& stopping,
             Due due) {
  for (;;) {
    if (stopping) return false;
    std::optional<ReaderNode::Clock::time_point> at = due();
    if (!at) {
      cv.wait(lock);
    } else if (ReaderNode::Clock::now() < *at) {
      cv.wait_until(lock, *at);
    } else {
      return true;
    }
  }
}

}  // namespace

ReaderNode::ReaderNode(redis::ConnectionOptions redis, bool cluster, Hooks hooks)
    : command_timeout_(redis.command_timeout),
      hooks_(std::move(hooks)),
      command_conn_(redis),
      live_conn_(redis),
      core_(cluster) {}

ReaderNode::~ReaderNode() { Stop(); }

void ReaderNode::Start() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || command_thread_.joinable()) return;
    threads_ = 2;
  }
  command_thread_ = std::thread([this] { RunCommands(); });
  pthread_setname_np(command_thread_.native_handle(), "rsc-redis-cmd");
  live_thread_ = std::thread([this] { RunLive(); });
  pthread_setname_np(live_thread_.native_handle(), "rsc-redis-live");
}

void ReaderNode::Halt() {
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
}

void ReaderNode::Stop() {
  Halt();
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (command_thread_.joinable()) command_thread_.join();
  if (live_thread_.joinable()) live_thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  command_open_ = false;
  live_open_ = false;
  threads_ = 0;
}

void ReaderNode::Enqueue(NodeRead read) {
  std::vector<NodeRead> one;
  one.push_back(std::move(read));
  Enqueue(std::move(one));
}

void ReaderNode::Enqueue(std::vector<NodeRead> reads) {
  if (reads.empty()) return;
  bool unblock = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    unblock = core_.Enqueue(std::move(reads), Clock::now());
  }
  live_cv_.notify_one();
  if (unblock) command_cv_.notify_one();
}

void ReaderNode::Enqueue(NodeCommand command) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    core_.Enqueue(std::move(command));
  }
  command_cv_.notify_one();
}

void ReaderNode::Cancel(uint64_t token, bool now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    // Cut under the mutex: the round the core means is the one on the socket now. The live
    // thread hands that round's replies to the core, and replaces the socket, only under the
    // mutex and after it; a cut made after releasing the mutex could land on the next round.
    // Cut() is thread-safe and does not block (a shutdown of the socket).
    if (core_.Cancel(token, now)) live_conn_.Cut();
  }
  command_cv_.notify_one();
}

bool ReaderNode::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_.Idle() && active_ == 0;
}

ReaderRedisStats ReaderNode::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReaderRedisStats s = core_.Stats();
  s.threads = threads_;
  s.connections = (command_open_ ? 1 : 0) + (live_open_ ? 1 : 0);
  s.nodes = s.connections > 0 ? 1 : 0;
  return s;
}

void ReaderNode::Deliver(NodeCore::Output& out) {
  // Stop() promised the owner silence: it may be tearing down what the hooks reach.
  if (halted_) return;
  if (!out.answers.empty()) hooks_.answered(out.answers);
  out.answers.clear();
  if (!out.bounced_commands.empty() || !out.bounced_reads.empty()) {
    hooks_.bounced(std::move(out.bounced_commands), std::move(out.bounced_reads));
  }
  out.bounced_commands.clear();
  out.bounced_reads.clear();
  if (out.failed && hooks_.failed) hooks_.failed();
  out.failed = false;
}

void ReaderNode::RunCommands() {
  BlockSigpipe();
  for (;;) {
    std::vector<NodeCore::Queued> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!WaitDue(lock, command_cv_, stopping_, [&] { return core_.CommandDue(); })) return;
      batch = core_.TakeCommands(Clock::now());
      ++active_;
    }
    ExecuteBatch(batch);
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
  }
}

void ReaderNode::ExecuteBatch(std::vector<NodeCore::Queued>& batch) {
  // A cancelled queued read first, before the pipeline: nothing to wait for.
  NodeCore::Output out;
  NodeCore::AnswerUnsent(batch, &out);
  Deliver(out);
  int64_t commands = 0;
  int64_t unblocks = 0;
  const std::vector<const redis::Command*> cmds =
      NodeCore::CommandWire(batch, &commands, &unblocks);
  std::vector<std::optional<redis::Reply>> replies(cmds.size());
  std::string error;
  bool failed = false;
  if (!cmds.empty()) {
    // Reader commands include writes (XACK, XCLAIM, the dead-letter script); a reply lost
    // after sending is a transport failure to the core either way.
    Status sent = command_conn_.Send(cmds, redis::CommandKind::kWrite);
    {
      std::lock_guard<std::mutex> lock(mu_);
      command_open_ = sent.ok();
      if (sent.ok()) core_.OnCommandsSent(commands, unblocks);
    }
    if (!sent.ok()) {
      error = sent.error().message;
      failed = true;
    }
    // After a transport failure every later reply of the pipeline is lost too.
    for (size_t i = 0; i < cmds.size() && !failed; ++i) {
      Result<redis::Reply> r = command_conn_.Receive();
      if (r.ok()) {
        replies[i] = std::move(r).value();
        continue;
      }
      // The connection dropped itself; the next batch reconnects.
      failed = true;
      error = "Redis pipeline failed: " + r.error().message;
      std::lock_guard<std::mutex> lock(mu_);
      command_open_ = false;
    }
  }
  // The answers go out together after the pipeline (one hand-over to the owner rather than
  // one per reply); parsed outside the lock.
  core_.AnswerCommands(batch, replies, error, &out);
  {
    std::lock_guard<std::mutex> lock(mu_);
    core_.OnCommandReplies(batch, replies, out, Clock::now());
  }
  out.failed = failed;
  Deliver(out);
}

bool ReaderNode::EnsureLive(std::string* error) {
  if (live_ready_) {
    // A socket the server closed while idle would be replaced by the round's own command,
    // silently, and the CLIENT ID known here would then name a client that is gone (or, after
    // a restart, someone else). Replace it here and learn the new id.
    if (live_conn_.Ready().ok() && live_conn_.reconnects() == live_reconnects_) return true;
    live_ready_ = false;
    std::lock_guard<std::mutex> lock(mu_);
    core_.OnLiveLost();
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
  core_.OnLiveConnected(id->IsInteger() ? std::optional<int64_t>(id->integer) : std::nullopt);
  live_ready_ = true;
  return true;
}

void ReaderNode::RunLive() {
  BlockSigpipe();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!WaitDue(lock, live_cv_, stopping_, [&] { return core_.LiveDue(); })) return;
    }
    std::string error;
    const bool connected = EnsureLive(&error);
    NodeCore::Output out;
    bool round = false;
    bool command_work = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      round = core_.PrepareRound(Clock::now(), connected, error, &out);
      // Reads answered unsent may have queued their XACK or their answer.
      command_work = core_.CommandDue() == NodeCore::TimePoint::min();
      ++active_;
    }
    if (command_work) command_cv_.notify_one();
    Deliver(out);
    if (round) RunRound();
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
  }
}

bool ReaderNode::WriteRound(const NodeCore::LiveRound& round, std::string* error) {
  bool writes = false;
  const std::vector<const redis::Command*> cmds = NodeCore::RoundWire(round, &writes);
  // A lost reply to an XACK is a transport failure to the core either way.
  Status sent =
      live_conn_.Send(cmds, writes ? redis::CommandKind::kWrite : redis::CommandKind::kRead);
  if (!sent.ok()) {
    *error = sent.error().message;
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The send replaced a socket the server had closed since EnsureLive: the CLIENT ID the
    // core knows names a client that is gone, so no unblock this round (it runs its course);
    // the next EnsureLive learns the new id.
    if (live_conn_.reconnects() != live_reconnects_) core_.OnLiveLost();
    // An abandon came while the round was being chosen or written: cut it now it is out.
    if (core_.OnRoundSent()) live_conn_.Cut();
  }
  return true;
}

bool ReaderNode::ReadRound(const NodeCore::LiveRound& round,
                           std::vector<NodeCore::BucketReplies>& replies, std::string* error) {
  auto receive = [&](std::optional<redis::Reply>* into,
                     std::optional<std::chrono::milliseconds> timeout) {
    Result<redis::Reply> r = timeout ? live_conn_.Receive(*timeout) : live_conn_.Receive();
    if (!r.ok()) {
      *error = (round.blocking ? "" : "Redis pipeline failed: ") + r.error().message;
      return false;
    }
    *into = std::move(r).value();
    return true;
  };
  for (size_t i = 0; i < round.buckets.size(); ++i) {
    const NodeCore::Bucket& bucket = round.buckets[i];
    NodeCore::BucketReplies& out = replies[i];
    out.acks.resize(bucket.acks.size());
    out.checks.resize(bucket.checks.size());
    for (auto& ack : out.acks) {
      if (!receive(&ack, std::nullopt)) return false;
    }
    std::optional<redis::Reply> asking;
    if (bucket.asking && !receive(&asking, std::nullopt)) return false;
    // A blocking read is answered within its BLOCK plus the command timeout.
    std::optional<std::chrono::milliseconds> wait;
    if (round.blocking) wait = round.block + command_timeout_;
    if (!receive(&out.read, wait)) return false;
    for (auto& check : out.checks) {
      if (!receive(&check, std::nullopt)) return false;
    }
  }
  return true;
}

void ReaderNode::RunRound() {
  std::string error;
  Clock::time_point sent_at = Clock::now();
  bool written = WriteRound(core_.round(), &error);
  for (;;) {
    // The round in flight is not changed by anyone while it is out: read it unlocked.
    const NodeCore::LiveRound& round = core_.round();
    std::vector<NodeCore::BucketReplies> replies(round.buckets.size());
    if (written) (void)ReadRound(round, replies, &error);
    // Redis starts the BLOCK when the command arrives, after sent_at: a nil reply earlier
    // than this was an unblock, not a timeout.
    const Clock::time_point now = Clock::now();
    const bool timed_out = now >= sent_at + round.block;
    NodeCore::Output out;
    NodeCore::Output early;  // answers from choosing the next round (reads that timed out)
    NodeCore::RoundEnd end;
    bool next = false;
    bool command_work = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      end = core_.OnRoundReplies(replies, error, timed_out, now, &out);
      if (end.lost) {  // reconnect for the next read
        live_ready_ = false;
        live_open_ = false;
      }
      // NodeCore::NextRoundFirst: in a backlog, the readers that came back while this round
      // was out go to Redis before this round's answers are handed out.
      if (core_.NextRoundFirst(end)) {
        next = core_.PrepareRound(now, /*connected=*/true, {}, &early);
        command_work = core_.CommandDue() == NodeCore::TimePoint::min();
      }
    }
    if (end.disconnect) live_conn_.Disconnect();
    if (command_work) command_cv_.notify_one();
    error.clear();
    if (next) {
      sent_at = Clock::now();
      written = WriteRound(core_.round(), &error);
    }
    Deliver(early);
    Deliver(out);
    if (!next) return;
  }
}

}  // namespace rsc::client
