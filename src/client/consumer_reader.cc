#include "client/consumer_reader.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <exception>

#include "client/http_transport.h"  // SteadyNowUs

namespace rsc::client {
namespace {

// Dead-letter and XACK in one step, so a message is never both lost (XACK without the
// dead letter) nor dead-lettered twice by a retry after a partial failure. An error in
// XADD aborts the script before the XACK. Both keys share the shard's hash tag.
constexpr const char* kDeadLetterScript =
    "local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))\n"
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
    "return id\n";

ReaderCoreConfig CoreConfig(const ReaderConfig& c) {
  ReaderCoreConfig o;
  o.shard = c.shard;
  o.stream = c.stream;
  o.group = c.group;
  o.consumer_name = c.consumer_name;
  o.max_batch = c.max_batch;
  o.block_ms = c.block.count();
  o.policy = c.policy;
  o.max_attempts = c.max_attempts;
  o.retry_initial_ms = c.retry_initial.count();
  o.retry_max_ms = c.retry_max.count();
  o.dead_letter_stream = c.dead_letter_stream;
  o.observe = c.observe;
  return o;
}

// The Redis wire form of a reader command.
std::vector<std::string> Args(const ReaderCoreConfig& c, const ReaderCommand& cmd) {
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

ReaderReply Unexpected(const ReaderCommand& cmd, const redisReply* r) {
  return ReaderReply::Error(
      ReaderReply::Kind::kError,
      fmt::format("{}: unexpected reply {}", ReaderCommandName(cmd.kind), ReplyText(r)));
}

// [[stream, [[id, [f, v, ...] | nil], ...]]] (RESP2; a map under RESP3, never used here).
ReaderReply ParseRead(const ReaderCommand& cmd, const redisReply* r) {
  ReaderReply out;
  if (r->type == REDIS_REPLY_NIL) {  // BLOCK timed out
    out.kind = ReaderReply::Kind::kNil;
    return out;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->elements < 2 ||
      r->element[0]->element[1]->type != REDIS_REPLY_ARRAY) {
    return Unexpected(cmd, r);
  }
  const redisReply* entries = r->element[0]->element[1];
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2) continue;
    ReaderEntry entry;
    entry.id = ReplyText(e->element[0]);
    const redisReply* f = e->element[1];
    if (f->type != REDIS_REPLY_ARRAY) {
      entry.deleted = true;
    } else {
      for (size_t j = 0; j + 1 < f->elements; j += 2) {
        entry.fields.emplace_back(ReplyText(f->element[j]), ReplyText(f->element[j + 1]));
      }
    }
    out.entries.push_back(std::move(entry));
  }
  return out;
}

// A reply to `cmd` that is not an error reply, as the core reads it.
ReaderReply Parse(const ReaderCommand& cmd, const redisReply* r) {
  ReaderReply out;
  switch (cmd.kind) {
    case ReaderCommandKind::kCreateGroup:
    case ReaderCommandKind::kDeadLetter:
      return out;
    case ReaderCommandKind::kAutoClaim:
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
          r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
        return Unexpected(cmd, r);
      }
      out.cursor = ReplyText(r->element[0]);
      out.count = static_cast<int64_t>(r->element[1]->elements);
      return out;
    case ReaderCommandKind::kPendingPage:
    case ReaderCommandKind::kCheckForeign:
      if (r->type != REDIS_REPLY_ARRAY) return Unexpected(cmd, r);
      for (size_t i = 0; i < r->elements; ++i) {
        const redisReply* e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2) continue;
        out.ids.push_back(ReplyText(e->element[0]));
        if (!out.lowest_owner) out.lowest_owner = ReplyText(e->element[1]);
      }
      return out;
    case ReaderCommandKind::kClaim:
      if (r->type != REDIS_REPLY_ARRAY) return Unexpected(cmd, r);
      out.count = static_cast<int64_t>(r->elements);
      return out;
    case ReaderCommandKind::kReadPending:
    case ReaderCommandKind::kReadLive:
      return ParseRead(cmd, r);
    case ReaderCommandKind::kAck:
      if (r->type != REDIS_REPLY_INTEGER) return Unexpected(cmd, r);
      out.count = r->integer;
      return out;
  }
  return out;
}

}  // namespace

ShardReader::ShardReader(ReaderConfig config, const MessageHandler* handler, ReaderHost* host,
                         DeliveryStats* stats, std::shared_ptr<ShardReader> predecessor)
    : config_(std::move(config)),
      handler_(handler),
      host_(host),
      stats_(stats),
      predecessor_(std::move(predecessor)),
      redis_(config_.redis, config_.redis_timeout),
      context_(this),
      core_(CoreConfig(config_), &context_, stats_, predecessor_ != nullptr) {}

ShardReader::~ShardReader() {
  Abandon();
  Join();
}

void ShardReader::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ShardReader::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    drain_ = true;
  }
  cv_.notify_all();
}

void ShardReader::Abandon(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abandon_) abandon_reason_ = std::move(reason);
    abandon_ = true;
  }
  cv_.notify_all();
  // A Redis command in flight returns now instead of after its reply timeout (plus BLOCK):
  // nothing it would bring back may be used anyway, and the shard counts as ours until the
  // reader ends.
  redis_.Interrupt();
}

bool ShardReader::Finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

bool ShardReader::WaitFinished(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return finished_; });
}

void ShardReader::Join() {
  std::lock_guard<std::mutex> lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

bool ShardReader::drain_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drain_;
}

void ShardReader::Pause(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return drain_ || abandon_; });
}

void ShardReader::SyncStops() {
  bool drain = false;
  bool abandon = false;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drain = drain_;
    abandon = abandon_;
    reason = abandon_reason_;
  }
  if (drain) core_.Drain();
  if (abandon) core_.Abandon(std::move(reason));
}

void ShardReader::Run() {
  // A write to a connection that Abandon() shut down (or that the peer reset) fails with
  // EPIPE and raises SIGPIPE at the writing thread. Blocked in this thread, the signal
  // stays pending here instead of killing the application; the write reports the error.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  for (;;) {
    SyncStops();
    const ReaderAction a = core_.Next();
    switch (a.kind) {
      case ReaderAction::Kind::kIdle:
        if (core_.waiting_for_predecessor()) {
          // The previous reader of this shard (abandoned at lease end, say, and restarted by
          // the same OK) may still be inside a handler call.
          if (predecessor_->WaitFinished(std::chrono::milliseconds(50))) {
            predecessor_.reset();
            core_.OnPredecessorFinished();
          }
        } else {
          Pause(std::chrono::milliseconds(1000));  // halted: until the drain or abandon
        }
        break;
      case ReaderAction::Kind::kSleep:
        Pause(std::chrono::milliseconds(a.sleep_ms));
        core_.OnWake();
        break;
      case ReaderAction::Kind::kCommand: {
        ReaderReply reply = Execute(a.command);
        SyncStops();
        core_.OnReply(std::move(reply));
        break;
      }
      case ReaderAction::Kind::kDeliver: {
        const HandlerResult result = CallHandler(a.message);
        SyncStops();
        core_.OnHandled(result);
        break;
      }
      case ReaderAction::Kind::kFinished:
        if (a.drained) host_->OnDrained(this);
        redis_.Reset();
        {
          std::lock_guard<std::mutex> lock(mu_);
          finished_ = true;
        }
        cv_.notify_all();
        return;
    }
  }
}

ReaderReply ShardReader::Execute(const ReaderCommand& command) {
  std::string error;
  if (!redis_.Ensure(&error)) return ReaderReply::Error(ReaderReply::Kind::kTransport, error);
  std::optional<std::chrono::milliseconds> timeout;
  if (command.kind == ReaderCommandKind::kReadLive) {
    timeout = config_.redis_timeout + std::chrono::milliseconds(command.block_ms);
  }
  RedisReplyPtr r = redis_.Command(Args(core_.config(), command), &error, timeout);
  if (!r) return ReaderReply::Error(ReaderReply::Kind::kTransport, error);
  if (r->type == REDIS_REPLY_ERROR) {
    return ReaderReply::Error(ReaderReply::Kind::kError, ReplyText(r.get()));
  }
  return Parse(command, r.get());
}

HandlerResult ShardReader::CallHandler(const Message& message) {
  try {
    return (*handler_)(message);
  } catch (const std::exception& e) {
    return HandlerResult::Fail(std::string("handler threw: ") + e.what());
  } catch (...) {
    return HandlerResult::Fail("handler threw a non-std exception");
  }
}

int64_t ShardReader::Context::ReadBudgetMs(int32_t shard) {
  return reader_->host_->ReadBudgetMs(shard);
}

bool ShardReader::Context::MayProcess(int32_t shard) { return reader_->host_->MayProcess(shard); }

TimeMs ShardReader::Context::NowMs() { return SteadyNowMs(); }

void ShardReader::Context::OnHandlerGaveUp(int32_t shard, const std::string& error) {
  reader_->host_->OnHandlerGaveUp(shard, error);
}

void ShardReader::Context::Observe(ConsumerEvent event) {
  event.t_us = SteadyNowUs();
  reader_->host_->Observe(std::move(event));
}

}  // namespace rsc::client
