#include "client/consumer_reader.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
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

bool IsError(const redisReply* r, std::string_view prefix) {
  return r != nullptr && r->type == REDIS_REPLY_ERROR &&
         std::string_view(r->str, r->len).starts_with(prefix);
}

// "ms-seq" → "ms-(seq+1)": the smallest id after `id` (XPENDING before Redis 6.2 has no
// exclusive ranges).
std::string NextId(const std::string& id) {
  const size_t dash = id.find('-');
  uint64_t ms = 0;
  uint64_t seq = 0;
  std::from_chars(id.data(), id.data() + dash, ms);
  std::from_chars(id.data() + dash + 1, id.data() + id.size(), seq);
  if (seq == UINT64_MAX) return fmt::format("{}-0", ms + 1);
  return fmt::format("{}-{}", ms, seq + 1);
}

}  // namespace

void DeliveryStats::SetHandlerError(std::string e) {
  std::lock_guard<std::mutex> lock(mu_);
  last_handler_error_ = std::move(e);
}
void DeliveryStats::SetRedisError(std::string e) {
  std::lock_guard<std::mutex> lock(mu_);
  last_redis_error_ = std::move(e);
}
std::string DeliveryStats::handler_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_handler_error_;
}
std::string DeliveryStats::redis_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_redis_error_;
}

ShardReader::ShardReader(ReaderConfig config, const MessageHandler* handler, ReaderHost* host,
                         DeliveryStats* stats, std::shared_ptr<ShardReader> predecessor)
    : config_(std::move(config)),
      handler_(handler),
      host_(host),
      stats_(stats),
      predecessor_(std::move(predecessor)),
      redis_(config_.redis, config_.redis_timeout) {}

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

bool ShardReader::Stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drain_ || abandon_;
}

bool ShardReader::Abandoned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abandon_;
}

bool ShardReader::Pause(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return drain_ || abandon_; });
}

void ShardReader::Run() {
  // A write to a connection that Abandon() shut down (or that the peer reset) fails with
  // EPIPE and raises SIGPIPE at the writing thread. Blocked in this thread, the signal
  // stays pending here instead of killing the application; the write reports the error.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  const End end = RunLoop();
  // Nothing more is read or handled by this reader: the last read and the last handler
  // call have returned. Reported before OnDrained, so the release precedes the REVOKED
  // report and with it any handoff of the shard.
  if (acquired_) {
    std::string detail = "drained";
    if (end == End::kAbandoned) {
      std::lock_guard<std::mutex> lock(mu_);
      detail = abandon_reason_;
    }
    Emit(ConsumerEventKind::kRelease, {}, std::move(detail));
  }
  if (end == End::kDrained) host_->OnDrained(this);
  redis_.Reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
  }
  cv_.notify_all();
}

bool ShardReader::WaitForPredecessor() {
  // The previous reader of this shard (abandoned at lease end, say, and restarted by the
  // same OK) may still be inside a handler call. Reading before it ends would hand the
  // same entries to two handler calls at once and break per-key order.
  while (predecessor_ && !predecessor_->WaitFinished(std::chrono::milliseconds(50))) {
    if (Stopping()) return false;
  }
  predecessor_.reset();
  return true;
}

void ShardReader::Emit(ConsumerEventKind kind, std::string id, std::string detail,
                       const StreamFields* fields, int attempt) {
  if (!config_.observe) return;
  ConsumerEvent e;
  e.kind = kind;
  e.t_us = SteadyNowUs();
  e.shard = config_.shard;
  e.stream = config_.stream;
  e.id = std::move(id);
  e.detail = std::move(detail);
  if (fields != nullptr) e.fields = *fields;
  e.attempt = attempt;
  host_->Observe(std::move(e));
}

ShardReader::End ShardReader::RunLoop() {
  if (!WaitForPredecessor()) {
    // Nothing was read, so nothing is in flight: a drain is complete at once.
    return Abandoned() ? End::kAbandoned : End::kDrained;
  }
  // From here on the shard may be read: reported before the first read (the takeover).
  acquired_ = true;
  Emit(ConsumerEventKind::kAcquire);
  Stage stage = Stage::kSetup;
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (abandon_) return End::kAbandoned;
      // Every batch XACKs what it completed before the next loop turn: drained.
      if (drain_) return End::kDrained;
    }
    if (halted_) {
      Pause(std::chrono::milliseconds(1000));
      continue;
    }
    if (stage == Stage::kSetup) {
      // The takeover claims entries: like a read, only inside the lease (C1/C4). A reader
      // whose connection failed after its lease ended must not steal the next owner's
      // pending entries.
      if (host_->ReadBudgetMs(config_.shard) <= 0) {
        Pause(std::chrono::milliseconds(20));
        continue;
      }
      if (!Setup()) {
        Pause(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        continue;
      }
      backoff = std::chrono::milliseconds(100);
      stage = Stage::kPending;
      pending_cursor_ = "0";
    }
    // C1/C4: ask before every read, and never block past the lease.
    const int64_t budget_ms = host_->ReadBudgetMs(config_.shard);
    if (budget_ms <= 0) {
      // Not READING any more or the lease ended: the core's stop/abandon is on its way.
      Pause(std::chrono::milliseconds(20));
      continue;
    }
    std::vector<Entry> batch;
    bool no_group = false;
    if (!Read(stage, budget_ms, &batch, &no_group)) {
      stage = Stage::kSetup;
      if (!no_group) {
        Pause(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      }
      continue;
    }
    if (stage == Stage::kPending) {
      if (batch.empty()) {
        stage = Stage::kLive;
        last_foreign_check_ = std::chrono::steady_clock::now();
        continue;
      }
      pending_cursor_ = batch.back().id;
    } else if (!batch.empty() ||
               std::chrono::steady_clock::now() - last_foreign_check_ >= kIdleForeignCheck) {
      // Before handling new entries, make sure no other consumer of G holds older ones (see
      // ForeignPending); an idle shard checks now and then, so none stays stranded.
      bool foreign = false;
      if (!ForeignPending(&foreign)) {
        stage = Stage::kSetup;
        Pause(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        continue;
      }
      last_foreign_check_ = std::chrono::steady_clock::now();
      if (foreign) {
        // Claim them (with this batch, which is ours already) and read the pending list
        // again from the start: everything is then handled in stream order.
        stage = Stage::kSetup;
        continue;
      }
    }
    bool interrupted = false;
    Process(batch, &interrupted);
    // Entries left unhandled stay in our pending list: after an interruption read that list
    // again from the start rather than new entries (order first).
    if (interrupted) {
      stage = Stage::kPending;
      pending_cursor_ = "0";
    }
  }
}

bool ShardReader::Setup() {
  std::string error;
  if (!redis_.Ensure(&error)) {
    RedisFailed(error);
    return false;
  }
  return CreateGroup() && TakeOver();
}

bool ShardReader::CreateGroup() {
  // The coordinator never touches stream keys (C7): the consumer group on each shard stream
  // is ours to create. From id 0, so entries published before any consumer existed count.
  std::string error;
  RedisReplyPtr r =
      redis_.Command({"XGROUP", "CREATE", config_.stream, config_.group, "0", "MKSTREAM"}, &error);
  if (!r) {
    RedisFailed(error);
    return false;
  }
  if (r->type == REDIS_REPLY_ERROR && !IsError(r.get(), "BUSYGROUP")) {
    RedisFailed(
        fmt::format("XGROUP CREATE {} {}: {}", config_.stream, config_.group, ReplyText(r.get())));
    return false;
  }
  return true;
}

bool ShardReader::TakeOver() {
  // C7: everything pending on this stream in group G — the previous owner's unacknowledged
  // entries, and our own from an earlier reader — becomes ours before we read anything
  // new. The coordinator started this shard only after the previous owner released it or
  // expired (K1), so min-idle-time 0 steals nothing from a live reader.
  std::string cursor = "0-0";
  for (;;) {
    if (Stopping() || host_->ReadBudgetMs(config_.shard) <= 0) return false;
    std::string error;
    Emit(ConsumerEventKind::kRead, {}, "XAUTOCLAIM");
    RedisReplyPtr r =
        redis_.Command({"XAUTOCLAIM", config_.stream, config_.group, config_.consumer_name, "0",
                        cursor, "COUNT", std::to_string(config_.max_batch), "JUSTID"},
                       &error);
    if (!r) {
      RedisFailed(error);
      return false;
    }
    if (IsError(r.get(), "ERR unknown command")) return TakeOverWithXclaim();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      RedisFailed(
          fmt::format("XAUTOCLAIM {}: unexpected reply {}", config_.stream, ReplyText(r.get())));
      return false;
    }
    stats_->claimed.fetch_add(static_cast<int64_t>(r->element[1]->elements));
    cursor = ReplyText(r->element[0]);
    if (cursor == "0-0") return true;
  }
}

bool ShardReader::ForeignPending(bool* foreign) {
  // A previous owner's XREADGROUP can reach Redis after our takeover: delayed in the
  // network, sent by a process that was paused between its lease check and the send, or
  // answered from state a failover rolled back. Redis then hands new entries to that
  // consumer name, whose reader is gone: without this check they would stay in its pending
  // list forever, and we would go on with later entries of the same keys. The shard is ours
  // while our lease runs (the caller just read inside it), so any entry pending for
  // another consumer name is one of those. Our own pending list holds only the batch just
  // read (every earlier batch was XACKed or sent us back to the pending stage), so the
  // lowest pending entry of the group is enough to tell.
  std::string error;
  RedisReplyPtr r =
      redis_.Command({"XPENDING", config_.stream, config_.group, "-", "+", "1"}, &error);
  if (!r || r->type != REDIS_REPLY_ARRAY) {
    RedisFailed(r ? fmt::format("XPENDING {}: {}", config_.stream, ReplyText(r.get())) : error);
    return false;
  }
  *foreign = false;
  if (r->elements == 0) return true;
  const redisReply* e = r->element[0];
  if (e->type == REDIS_REPLY_ARRAY && e->elements >= 2) {
    *foreign = ReplyText(e->element[1]) != config_.consumer_name;
  }
  if (*foreign) stats_->foreign_claims.fetch_add(1);
  return true;
}

bool ShardReader::TakeOverWithXclaim() {
  // Redis < 6.2: walk the pending list with XPENDING and XCLAIM each page.
  std::string start = "-";
  for (;;) {
    if (Stopping() || host_->ReadBudgetMs(config_.shard) <= 0) return false;
    std::string error;
    Emit(ConsumerEventKind::kRead, {}, "XPENDING");
    RedisReplyPtr r = redis_.Command(
        {"XPENDING", config_.stream, config_.group, start, "+", std::to_string(config_.max_batch)},
        &error);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
      RedisFailed(r ? fmt::format("XPENDING {}: {}", config_.stream, ReplyText(r.get())) : error);
      return false;
    }
    if (r->elements == 0) return true;
    std::vector<std::string> claim{"XCLAIM", config_.stream, config_.group, config_.consumer_name,
                                   "0"};
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1)
        claim.push_back(ReplyText(e->element[0]));
    }
    if (claim.size() == 5) return true;
    start = NextId(claim.back());
    claim.push_back("JUSTID");
    Emit(ConsumerEventKind::kRead, {}, "XCLAIM");
    RedisReplyPtr c = redis_.Command(claim, &error);
    if (!c || c->type != REDIS_REPLY_ARRAY) {
      RedisFailed(c ? fmt::format("XCLAIM {}: {}", config_.stream, ReplyText(c.get())) : error);
      return false;
    }
    stats_->claimed.fetch_add(static_cast<int64_t>(c->elements));
  }
}

bool ShardReader::Read(Stage stage, int64_t budget_ms, std::vector<Entry>* batch, bool* no_group) {
  std::vector<std::string> args{"XREADGROUP",          "GROUP", config_.group,
                                config_.consumer_name, "COUNT", std::to_string(config_.max_batch)};
  std::optional<std::chrono::milliseconds> timeout;
  if (stage == Stage::kLive) {
    // BLOCK 0 would mean "forever": at least 1 ms, at most what the lease leaves.
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(config_.block.count(), budget_ms));
    args.insert(args.end(), {"BLOCK", std::to_string(block)});
    timeout = config_.redis_timeout + std::chrono::milliseconds(block);
  }
  args.insert(args.end(), {"STREAMS", config_.stream,
                           stage == Stage::kLive ? std::string(">") : pending_cursor_});
  std::string error;
  Emit(ConsumerEventKind::kRead, {}, "XREADGROUP");
  RedisReplyPtr r = redis_.Command(args, &error, timeout);
  if (!r) {
    RedisFailed(error);
    return false;
  }
  if (r->type == REDIS_REPLY_NIL) return true;  // BLOCK timed out
  if (r->type == REDIS_REPLY_ERROR) {
    // NOGROUP: the stream or the group was deleted under us; Setup recreates it at once.
    *no_group = IsError(r.get(), "NOGROUP");
    RedisFailed(fmt::format("XREADGROUP {}: {}", config_.stream, ReplyText(r.get())));
    return false;
  }
  // [[stream, [[id, [f, v, ...] | nil], ...]]] (RESP2; a map under RESP3, never used here).
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->elements < 2 ||
      r->element[0]->element[1]->type != REDIS_REPLY_ARRAY) {
    RedisFailed(fmt::format("XREADGROUP {}: unexpected reply", config_.stream));
    return false;
  }
  const redisReply* entries = r->element[0]->element[1];
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2) continue;
    Entry entry;
    entry.id = ReplyText(e->element[0]);
    const redisReply* f = e->element[1];
    if (f->type != REDIS_REPLY_ARRAY) {
      entry.deleted = true;
    } else {
      for (size_t j = 0; j + 1 < f->elements; j += 2) {
        entry.fields.emplace_back(ReplyText(f->element[j]), ReplyText(f->element[j + 1]));
      }
    }
    batch->push_back(std::move(entry));
  }
  return true;
}

void ShardReader::Process(const std::vector<Entry>& batch, bool* interrupted) {
  std::vector<std::string> acks;
  for (const Entry& entry : batch) {
    // Lease ended (C4) or abandoned: stop at once, XACK nothing; the next owner (or the
    // next start here) takes these entries over.
    if (Abandoned() || !host_->MayProcess(config_.shard)) {
      *interrupted = true;
      return;
    }
    if (entry.deleted) {  // trimmed while pending: nothing to hand over, just settle it
      acks.push_back(entry.id);
      continue;
    }
    const Outcome outcome = Handle(entry);
    if (outcome == Outcome::kDone) acks.push_back(entry.id);
    if (outcome == Outcome::kGaveUp) {
      *interrupted = true;
      break;
    }
  }
  if (acks.empty() || Abandoned() || !host_->MayProcess(config_.shard)) return;
  if (!Ack(acks)) *interrupted = true;
}

ShardReader::Outcome ShardReader::Handle(const Entry& entry) {
  Message msg{config_.shard, config_.stream, entry.id, entry.fields, 0};
  auto backoff = config_.retry_initial;
  for (;;) {
    ++msg.attempt;
    HandlerResult result;
    Emit(ConsumerEventKind::kDeliver, entry.id, {}, &entry.fields, msg.attempt);
    try {
      result = (*handler_)(msg);
    } catch (const std::exception& e) {
      result = HandlerResult::Fail(std::string("handler threw: ") + e.what());
    } catch (...) {
      result = HandlerResult::Fail("handler threw a non-std exception");
    }
    if (result.ok) {
      stats_->handled.fetch_add(1);
      return Outcome::kDone;
    }
    stats_->handler_failures.fetch_add(1);
    stats_->SetHandlerError(fmt::format("shard {} entry {} attempt {}: {}", config_.shard, entry.id,
                                        msg.attempt, result.error));
    const bool exhausted =
        config_.policy != HandlerErrorPolicy::kRetry && msg.attempt >= config_.max_attempts;
    if (exhausted && config_.policy == HandlerErrorPolicy::kStop) {
      halted_ = true;
      host_->OnHandlerGaveUp(config_.shard, stats_->handler_error());
      return Outcome::kGaveUp;
    }
    // A drain, an abandon or the lease end cut retries short: the entry stays pending and
    // whoever starts this shard next takes it over (C7).
    if (Stopping() || !host_->MayProcess(config_.shard)) return Outcome::kGaveUp;
    if (exhausted) {
      // kDeadLetter. A Redis failure is retried here: moving on would break the order of
      // the entries after it only if we XACKed them, which we do per batch — but the
      // dead letter must exist before this entry is settled.
      while (!DeadLetter(entry, result.error, msg.attempt)) {
        if (!Pause(backoff) || !host_->MayProcess(config_.shard)) return Outcome::kGaveUp;
        backoff = std::min(backoff * 2, config_.retry_max);
      }
      stats_->dead_lettered.fetch_add(1);
      stats_->acked.fetch_add(1);
      Emit(ConsumerEventKind::kAck, entry.id, "dead_letter");
      return Outcome::kDeadLettered;
    }
    if (!Pause(backoff)) return Outcome::kGaveUp;
    backoff = std::min(backoff * 2, config_.retry_max);
  }
}

bool ShardReader::DeadLetter(const Entry& entry, const std::string& error, int attempts) {
  std::string err;
  if (!redis_.Ensure(&err)) {
    RedisFailed(err);
    return false;
  }
  std::vector<std::string> args{"EVAL",         kDeadLetterScript,          "2",
                                config_.stream, config_.dead_letter_stream, config_.group,
                                entry.id};
  for (const auto& [f, v] : entry.fields) args.insert(args.end(), {f, v});
  args.insert(args.end(),
              {"rsc-source-stream", config_.stream, "rsc-source-id", entry.id, "rsc-group",
               config_.group, "rsc-error", error, "rsc-attempts", std::to_string(attempts)});
  RedisReplyPtr r = redis_.Command(args, &err);
  if (!r) {
    RedisFailed(err);
    return false;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    RedisFailed(fmt::format("dead letter of {} {} to {}: {}", config_.stream, entry.id,
                            config_.dead_letter_stream, ReplyText(r.get())));
    return false;
  }
  return true;
}

bool ShardReader::Ack(const std::vector<std::string>& ids) {
  std::vector<std::string> args{"XACK", config_.stream, config_.group};
  args.insert(args.end(), ids.begin(), ids.end());
  std::string error;
  RedisReplyPtr r = redis_.Command(args, &error);
  if (!r || r->type != REDIS_REPLY_INTEGER) {
    // The entries stay pending and are handled again after the reconnect (at least once).
    RedisFailed(r ? fmt::format("XACK {}: {}", config_.stream, ReplyText(r.get())) : error);
    return false;
  }
  stats_->acked.fetch_add(r->integer);
  for (const std::string& id : ids) Emit(ConsumerEventKind::kAck, id, "xack");
  return true;
}

void ShardReader::RedisFailed(const std::string& error) {
  stats_->SetRedisError(fmt::format("shard {}: {}", config_.shard, error));
}

}  // namespace rsc::client
