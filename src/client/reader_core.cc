#include "client/reader_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "core/stream_admin.h"

namespace rsc::client {
namespace {

// "ms-seq" → "ms-(seq+1)": the smallest id after `id` (XPENDING before Redis 6.2 has no
// exclusive ranges). None after the last possible id (a seal, RS2): it is terminal, and
// "the id after it" must never wrap to 0-0, which would walk the pending list forever.
std::optional<std::string> NextId(const std::string& id) {
  const size_t dash = id.find('-');
  if (dash == std::string::npos) return id + "-1";
  uint64_t ms = 0;
  uint64_t seq = 0;
  std::from_chars(id.data(), id.data() + dash, ms);
  std::from_chars(id.data() + dash + 1, id.data() + id.size(), seq);
  if (seq < UINT64_MAX) return fmt::format("{}-{}", ms, seq + 1);
  if (ms < UINT64_MAX) return fmt::format("{}-0", ms + 1);
  return std::nullopt;
}

ReaderAction Idle() { return ReaderAction{}; }

// Stream ids in Redis's order: (ms, seq), both unsigned 64-bit. nullopt: not an id.
std::optional<std::pair<uint64_t, uint64_t>> IdKey(const std::string& id) {
  const size_t dash = id.find('-');
  if (dash == std::string::npos) return std::nullopt;
  uint64_t ms = 0;
  uint64_t seq = 0;
  auto [p1, e1] = std::from_chars(id.data(), id.data() + dash, ms);
  auto [p2, e2] = std::from_chars(id.data() + dash + 1, id.data() + id.size(), seq);
  if (e1 != std::errc() || e2 != std::errc() || p1 != id.data() + dash ||
      p2 != id.data() + id.size()) {
    return std::nullopt;
  }
  return std::make_pair(ms, seq);
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

std::string_view ReaderCommandName(ReaderCommandKind kind) {
  switch (kind) {
    case ReaderCommandKind::kCreateGroup:
      return "XGROUP CREATE";
    case ReaderCommandKind::kAutoClaim:
      return "XAUTOCLAIM";
    case ReaderCommandKind::kPendingPage:
    case ReaderCommandKind::kCheckForeign:
      return "XPENDING";
    case ReaderCommandKind::kClaim:
      return "XCLAIM";
    case ReaderCommandKind::kReadPending:
    case ReaderCommandKind::kReadLive:
      return "XREADGROUP";
    case ReaderCommandKind::kAck:
      return "XACK";
    case ReaderCommandKind::kDeadLetter:
      return "dead letter";
  }
  return "?";
}

ReaderCore::ReaderCore(ReaderCoreConfig config, ReaderContext* context, DeliveryStats* stats,
                       bool has_predecessor)
    : config_(std::move(config)),
      context_(context),
      stats_(stats),
      waiting_predecessor_(has_predecessor) {}

// ── inputs ─────────────────────────────────────────────────────────────────────────

void ReaderCore::OnPredecessorFinished() { waiting_predecessor_ = false; }

void ReaderCore::Drain() { drain_ = true; }

void ReaderCore::Abandon(std::string reason) {
  if (!abandon_) abandon_reason_ = std::move(reason);
  abandon_ = true;
}

void ReaderCore::OnWake() {
  if (await_ == Await::kWake) await_ = Await::kNone;
}

void ReaderCore::OnReply(ReaderReply reply) {
  if (await_ != Await::kReply) return;
  await_ = Await::kNone;
  // Abandoned: nothing the reply brings is handled or XACKed (MayHandle says no), and the
  // entries it took stay in our pending list for whoever starts the shard next (C7). A
  // transport error is then the driver cutting the command short, not a failure.
  if (!reply.ok() && !abandon_) RecordRedisError(reply);
  switch (in_flight_) {
    case ReaderCommandKind::kCreateGroup:
      if (!reply.ok() && !reply.error.starts_with("BUSYGROUP")) {
        Failed(reply);
        return;
      }
      stage_ = Stage::kClaim;
      claim_cursor_ = "0-0";
      claim_last_page_ = false;
      return;
    case ReaderCommandKind::kAutoClaim:
    case ReaderCommandKind::kPendingPage:
    case ReaderCommandKind::kClaim:
      OnClaimReply(reply);
      return;
    case ReaderCommandKind::kReadPending:
      OnReadReply(reply, false);
      return;
    case ReaderCommandKind::kReadLive:
      if (acks_with_read_) {
        acks_with_read_ = false;
        // The XACK went first: failed, the batch stays pending and is read again (at least
        // once) and the read's entries with it; confirmed, it counts as an XACK reply.
        if (!reply.ok()) {
          Failed(reply);
          return;
        }
        OnAckReply(reply);
      }
      OnReadReply(reply, true);
      return;
    case ReaderCommandKind::kCheckForeign:
      OnForeignReply(reply);
      return;
    case ReaderCommandKind::kAck:
      OnAckReply(reply);
      return;
    case ReaderCommandKind::kDeadLetter:
      OnDeadLetterReply(reply);
      return;
  }
}

void ReaderCore::OnClaimReply(const ReaderReply& reply) {
  if (in_flight_ == ReaderCommandKind::kAutoClaim && reply.kind == ReaderReply::Kind::kError &&
      reply.error.starts_with("ERR unknown command")) {
    // Redis < 6.2: walk the pending list with XPENDING and XCLAIM each page.
    stage_ = Stage::kClaimPage;
    claim_cursor_ = "-";
    claim_ids_.clear();
    claim_last_page_ = false;
    return;
  }
  if (!reply.ok()) {
    Failed(reply);
    return;
  }
  bool done = false;
  switch (in_flight_) {
    case ReaderCommandKind::kAutoClaim:
      stats_->claimed.fetch_add(reply.count);
      claim_cursor_ = reply.cursor;
      done = reply.cursor == "0-0";
      break;
    case ReaderCommandKind::kPendingPage:
      done = reply.ids.empty();
      if (!done) {
        claim_ids_ = reply.ids;
        if (std::optional<std::string> next = NextId(reply.ids.back())) {
          claim_cursor_ = *std::move(next);
        } else {
          claim_last_page_ = true;  // the page ends at the seal: nothing can follow it
        }
      }
      break;
    default:  // kClaim
      stats_->claimed.fetch_add(reply.count);
      claim_ids_.clear();
      done = claim_last_page_;
      break;
  }
  if (!done) return;
  // Everything pending on the shard in G is ours: read it from the start, then new entries.
  stage_ = Stage::kPending;
  pending_cursor_ = "0";
  backoff_ms_ = kBackoffInitialMs;
}

void ReaderCore::OnReadReply(ReaderReply& reply, bool live) {
  if (!reply.ok()) {
    Failed(reply);
    return;
  }
  if (!live) {
    if (reply.entries.empty()) {
      stage_ = Stage::kLive;
      last_foreign_check_ = context_->NowMs();
      return;
    }
    pending_cursor_ = reply.entries.back().id;
    batch_ = std::move(reply.entries);
    next_ = 0;
    batch_active_ = true;
    return;
  }
  full_batch_ = static_cast<int>(reply.entries.size()) >= config_.max_batch;
  if (reply.checked) {  // the check came behind the read, in its pipeline
    batch_ = std::move(reply.entries);
    next_ = 0;
    OnForeignReply(reply);
    return;
  }
  // New entries are handled only after the late-read check; an idle shard checks now and
  // then too, so that nothing stays stranded while no entry comes.
  if (reply.entries.empty() && context_->NowMs() - last_foreign_check_ < kIdleForeignCheckMs) {
    return;
  }
  batch_ = std::move(reply.entries);
  next_ = 0;
  foreign_check_ = true;
}

void ReaderCore::OnForeignReply(const ReaderReply& reply) {
  foreign_check_ = false;
  if (!reply.ok()) {
    Failed(reply);
    return;
  }
  last_foreign_check_ = context_->NowMs();
  if (LateReadFound(reply)) {
    // Claim them (with this batch, which is ours already) and read our pending list again
    // from the start: everything is then handled in stream order.
    stats_->foreign_claims.fetch_add(1);
    batch_.clear();
    stage_ = Stage::kSetup;
    full_batch_ = false;
    return;
  }
  if (batch_.empty()) return;
  batch_active_ = true;
}

bool ReaderCore::LateReadFound(const ReaderReply& check) const {
  // Our own pending list holds only the batch just read (every earlier batch was XACKed or
  // sent us back to the pending stage), so the lowest pending entry of the group tells:
  // * another consumer name's: a previous owner's late read;
  // * our own, below the batch (or with no batch): an earlier reader of this process under
  //   the same name read it after our takeover — its blocked read was cut at the socket for
  //   an abandon, and Redis served it before the close reached it (the reply went nowhere).
  //   An id that does not parse counts as below: read again, never skipped.
  if (!check.lowest_owner) return false;
  if (*check.lowest_owner != config_.consumer_name) return true;
  if (!check.lowest_id) return false;
  if (batch_.empty()) return true;
  const auto lowest = IdKey(*check.lowest_id);
  const auto first = IdKey(batch_.front().id);
  return !lowest || !first || *lowest < *first;
}

void ReaderCore::OnAckReply(const ReaderReply& reply) {
  const bool reread = ack_then_reread_;
  ack_then_reread_ = false;
  if (!reply.ok()) {
    // The entries stay pending and are handled again after the reconnect (at least once).
    Interrupt();
    return;
  }
  // The seal is no message of the application's: not counted.
  stats_->acked.fetch_add(std::max<int64_t>(0, reply.count - (seal_in_acks_ ? 1 : 0)));
  for (const std::string& id : acks_) {
    if (id != kSealId) Emit(ConsumerEventKind::kAck, id, "xack");
  }
  acks_.clear();
  if (seal_in_acks_) {
    // RS3: the seal is XACKed, so everything before it was handled and XACKed (each batch
    // is, in order, before the next read): the shard is read to its end for this group.
    // Reading goes on (nothing can follow the seal) until the coordinator, having checked
    // it in Redis, takes the shard out of the assignment; if a failover lost the seal,
    // whatever stale producers wrote meanwhile is still read.
    seal_in_acks_ = false;
    context_->OnSealed(config_.shard);
  }
  if (reread) Interrupt();
}

void ReaderCore::OnDeadLetterReply(const ReaderReply& reply) {
  if (!reply.ok()) {
    // A Redis failure is retried: the dead letter must exist before the entry is settled.
    retry_backoff_ms_ = std::max<TimeMs>(retry_backoff_ms_, config_.retry_initial_ms);
    sleep_first_ = retry_backoff_ms_;
    retry_backoff_ms_ = std::min(retry_backoff_ms_ * 2, config_.retry_max_ms);
    return;
  }
  stats_->dead_lettered.fetch_add(1);
  stats_->acked.fetch_add(1);
  Emit(ConsumerEventKind::kAck, batch_[next_].id, "dead_letter");
  dead_letter_.reset();
  attempt_ = 0;
  ++next_;
}

void ReaderCore::OnWithdrawn() {
  if (await_ != Await::kHandler) return;
  await_ = Await::kNone;
  Cut();
}

void ReaderCore::OnHandled(const HandlerResult& result) {
  if (await_ != Await::kHandler) return;
  await_ = Await::kNone;
  const ReaderEntry& entry = batch_[next_];
  if (result.ok) {
    stats_->handled.fetch_add(1);
    acks_.push_back(entry.id);
    attempt_ = 0;
    ++next_;
    return;
  }
  stats_->handler_failures.fetch_add(1);
  stats_->SetHandlerError(fmt::format("shard {} entry {} attempt {}: {}", config_.shard, entry.id,
                                      attempt_, result.error));
  const bool exhausted =
      config_.policy != HandlerErrorPolicy::kRetry && attempt_ >= config_.max_attempts;
  if (exhausted && config_.policy == HandlerErrorPolicy::kStop) {
    halted_ = true;
    context_->OnHandlerGaveUp(config_.shard, stats_->handler_error());
    Cut();
    return;
  }
  // A drain, an abandon or the lease end cut retries short: the entry stays pending and
  // whoever starts this shard next takes it over (C7).
  if (drain_ || !MayHandle()) {
    Cut();
    return;
  }
  if (exhausted) {  // kDeadLetter
    dead_letter_ = result.error;
    retry_backoff_ms_ = config_.retry_initial_ms;
    return;
  }
  sleep_first_ = retry_backoff_ms_;
  retry_backoff_ms_ = std::min(retry_backoff_ms_ * 2, config_.retry_max_ms);
}

// ── decisions ─────────────────────────────────────────────────────────────────────────

ReaderAction ReaderCore::Next() {
  for (;;) {
    if (std::optional<ReaderAction> a = Step()) return *std::move(a);
  }
}

std::optional<ReaderAction> ReaderCore::Step() {
  if (finished_ || await_ != Await::kNone) return Idle();
  // Abandoned: a batch in hand ends at once in Process/CheckForeign (MayHandle is false).
  if (abandon_ && !batch_active_ && !foreign_check_) return Finish(false);
  if (waiting_predecessor_) {
    // The previous reader of this shard may still be inside a handler call: reading before
    // it ends would hand the same entries to two calls at once and break per-key order.
    if (drain_) return Finish(true);  // nothing was read: drained at once
    return Idle();
  }
  if (!acquired_) {
    acquired_ = true;
    Emit(ConsumerEventKind::kAcquire);
  }
  if (sleep_first_) {
    const TimeMs ms = *sleep_first_;
    sleep_first_.reset();
    if (!drain_ && !abandon_) return Sleep(ms);  // a drain or abandon cuts a backoff short
  }
  if (foreign_check_) return CheckForeign();
  if (batch_active_) return Process();
  // Every batch XACKs what it completed before the next read: drained.
  if (drain_) return Finish(true);
  if (halted_) return Idle();  // kStop gave up: wait for the drain (or the abandon)
  // C1/C4: ask before every claim and read, and never block past the lease.
  const int64_t budget = context_->ReadBudgetMs(config_.shard);
  if (budget <= 0) return Sleep(kLeaseWaitMs);  // the core's stop/abandon is on its way
  return ReadOrClaim(budget);
}

ReaderAction ReaderCore::ReadOrClaim(int64_t budget_ms) {
  ReaderCommand c;
  c.count = config_.max_batch;
  switch (stage_) {
    case Stage::kSetup:
      // C7 step 1: the group from id 0, so that entries published before any consumer
      // existed count (the coordinator creates it too; BUSYGROUP is success). Without
      // create_key a missing key fails this command, retried after a backoff (C9 (f)).
      c.kind = ReaderCommandKind::kCreateGroup;
      return Command(std::move(c));
    case Stage::kClaim:
      // C7: everything pending on the shard in G — the previous owner's unacknowledged
      // entries and our own from an earlier reader — becomes ours before anything new is
      // read. The coordinator started the shard only after the previous owner released it
      // or expired (K1), so min-idle-time 0 steals nothing from a live reader.
      c.kind = ReaderCommandKind::kAutoClaim;
      c.cursor = claim_cursor_;
      Emit(ConsumerEventKind::kRead, {}, "XAUTOCLAIM");
      return Command(std::move(c));
    case Stage::kClaimPage:
      if (!claim_ids_.empty()) {
        c.kind = ReaderCommandKind::kClaim;
        c.ids = claim_ids_;
        Emit(ConsumerEventKind::kRead, {}, "XCLAIM");
      } else {
        c.kind = ReaderCommandKind::kPendingPage;
        c.cursor = claim_cursor_;
        Emit(ConsumerEventKind::kRead, {}, "XPENDING");
      }
      return Command(std::move(c));
    case Stage::kPending:
      c.kind = ReaderCommandKind::kReadPending;
      c.cursor = pending_cursor_;
      Emit(ConsumerEventKind::kRead, {}, "XREADGROUP");
      return Command(std::move(c));
    case Stage::kLive:
      c.kind = ReaderCommandKind::kReadLive;
      // BLOCK 0 would mean "forever": at least 1 ms, at most what the lease leaves.
      c.block_ms = std::max<TimeMs>(1, std::min<TimeMs>(config_.block_ms, budget_ms));
      c.check_foreign = full_batch_ && context_->PipelinedLive();
      Emit(ConsumerEventKind::kRead, {}, "XREADGROUP");
      return Command(std::move(c));
  }
  return Idle();
}

std::optional<ReaderAction> ReaderCore::CheckForeign() {
  // A previous owner's XREADGROUP can reach Redis after our takeover: delayed in the
  // network, sent by a process paused between its lease check and the send, or answered
  // from state a failover rolled back. Redis then hands new entries to that consumer name,
  // whose reader is gone: without this check they would stay in its pending list forever,
  // and we would go on with later entries of the same keys. The shard is ours while our
  // lease runs, so any entry pending for another consumer name is one of those.
  if (!MayHandle()) {
    // The lease ended: the batch would not be handled. Without one, reading goes on (after
    // the budget check, which stops it); with one, the pending list is read again later.
    if (batch_.empty()) {
      foreign_check_ = false;
    } else {
      Interrupt();
    }
    return std::nullopt;
  }
  ReaderCommand c;
  c.kind = ReaderCommandKind::kCheckForeign;
  c.count = 1;
  Emit(ConsumerEventKind::kRead, {}, "XPENDING");
  return Command(std::move(c));
}

std::optional<ReaderAction> ReaderCore::Process() {
  if (!cut_ && next_ < batch_.size()) {
    // Lease ended (C4) or abandoned: stop at once, XACK nothing; the next owner (or the
    // next start here) takes these entries over.
    if (!MayHandle()) {
      Interrupt();
      return std::nullopt;
    }
    const ReaderEntry& entry = batch_[next_];
    if (entry.deleted) {  // trimmed while pending: nothing to hand over, just settle it
      acks_.push_back(entry.id);
      ++next_;
      return std::nullopt;
    }
    if (entry.id == kSealId) {
      // RS2/RS3: the seal is never handed to the application; XACKed with the entries
      // before it, it completes the shard. Nothing can follow it in the stream.
      acks_.push_back(entry.id);
      seal_in_acks_ = true;
      ++next_;
      return std::nullopt;
    }
    if (dead_letter_) {
      if (drain_ || !MayHandle()) {
        Cut();
        return std::nullopt;
      }
      ReaderCommand c;
      c.kind = ReaderCommandKind::kDeadLetter;
      c.entry = &entry;
      c.error = *dead_letter_;
      c.attempts = attempt_;
      return Command(std::move(c));
    }
    if (attempt_ > 0 && drain_) {  // a retry that a drain cut short
      Cut();
      return std::nullopt;
    }
    if (attempt_ == 0) retry_backoff_ms_ = config_.retry_initial_ms;
    ++attempt_;
    Emit(ConsumerEventKind::kDeliver, entry.id, {}, &entry.fields, attempt_);
    ReaderAction a;
    a.kind = ReaderAction::Kind::kDeliver;
    a.message = Message{config_.shard, config_.stream, entry.id, entry.fields, attempt_};
    await_ = Await::kHandler;
    return a;
  }
  // The batch is done, or cut short: XACK what the handler completed.
  batch_active_ = false;
  const bool cut = cut_;
  cut_ = false;
  if (!acks_.empty()) {
    if (MayHandle()) {
      if (!cut) {
        if (std::optional<ReaderAction> read = AckWithRead()) return read;
      }
      ack_then_reread_ = cut;
      ReaderCommand c;
      c.kind = ReaderCommandKind::kAck;
      c.ids = acks_;
      return Command(std::move(c));
    }
    Interrupt();  // the lease ended: the entries stay pending, read again from the start
    return std::nullopt;
  }
  if (cut) {
    Interrupt();
  } else {
    batch_.clear();
    next_ = 0;
  }
  return std::nullopt;
}

std::optional<ReaderAction> ReaderCore::AckWithRead() {
  // Only the plain case: a drain, a seal or a halt needs the XACK's answer before anything
  // else, and a pending-list batch is followed by another pending read.
  if (!full_batch_ || stage_ != Stage::kLive || seal_in_acks_ || drain_ || halted_ ||
      !context_->PipelinedLive()) {
    return std::nullopt;
  }
  // C1/C4 as for any read; MayHandle was just checked for the XACK.
  const int64_t budget = context_->ReadBudgetMs(config_.shard);
  if (budget <= 0) return std::nullopt;
  ReaderAction a = ReadOrClaim(budget);
  a.command.ids = acks_;
  acks_with_read_ = true;
  return a;
}

bool ReaderCore::MayHandle() const { return !abandon_ && context_->MayProcess(config_.shard); }

ReaderAction ReaderCore::Command(ReaderCommand command) {
  in_flight_ = command.kind;
  await_ = Await::kReply;
  ReaderAction a;
  a.kind = ReaderAction::Kind::kCommand;
  a.command = std::move(command);
  return a;
}

ReaderAction ReaderCore::Sleep(TimeMs ms) {
  await_ = Await::kWake;
  ReaderAction a;
  a.kind = ReaderAction::Kind::kSleep;
  a.sleep_ms = ms;
  return a;
}

ReaderAction ReaderCore::Finish(bool drained) {
  finished_ = true;
  // Nothing more is read or handled by this reader: the last command and the last handler
  // call have returned. Reported before the driver reports the drain, so the release
  // precedes the REVOKED report and with it any handoff of the shard.
  if (acquired_) Emit(ConsumerEventKind::kRelease, {}, drained ? "drained" : abandon_reason_);
  ReaderAction a;
  a.kind = ReaderAction::Kind::kFinished;
  a.drained = drained;
  return a;
}

void ReaderCore::Failed(const ReaderReply& reply) {
  stage_ = Stage::kSetup;
  full_batch_ = false;
  acks_with_read_ = false;
  batch_.clear();
  next_ = 0;
  acks_.clear();
  seal_in_acks_ = false;
  batch_active_ = false;
  foreign_check_ = false;
  cut_ = false;
  attempt_ = 0;
  dead_letter_.reset();
  claim_ids_.clear();
  // NOGROUP: the stream or the group was deleted under us; the setup recreates it at once.
  if (reply.kind == ReaderReply::Kind::kError && reply.error.starts_with("NOGROUP")) return;
  sleep_first_ = backoff_ms_;
  backoff_ms_ = std::min(backoff_ms_ * 2, kBackoffMaxMs);
}

void ReaderCore::Interrupt() {
  full_batch_ = false;
  batch_.clear();
  next_ = 0;
  acks_.clear();
  seal_in_acks_ = false;
  batch_active_ = false;
  foreign_check_ = false;
  cut_ = false;
  attempt_ = 0;
  dead_letter_.reset();
  stage_ = Stage::kPending;
  pending_cursor_ = "0";
}

void ReaderCore::Cut() { cut_ = true; }

void ReaderCore::Emit(ConsumerEventKind kind, std::string id, std::string detail,
                      const StreamFields* fields, int attempt) {
  if (!config_.observe) return;
  ConsumerEvent e;
  e.kind = kind;
  e.shard = config_.shard;
  e.stream = config_.stream;
  e.id = std::move(id);
  e.detail = std::move(detail);
  if (fields != nullptr) e.fields = *fields;
  e.attempt = attempt;
  context_->Observe(std::move(e));
}

void ReaderCore::RecordRedisError(const ReaderReply& reply) {
  // Expected answers, not failures: the group exists; a server without XAUTOCLAIM.
  if (reply.kind == ReaderReply::Kind::kError &&
      ((in_flight_ == ReaderCommandKind::kCreateGroup && reply.error.starts_with("BUSYGROUP")) ||
       (in_flight_ == ReaderCommandKind::kAutoClaim &&
        reply.error.starts_with("ERR unknown command")))) {
    return;
  }
  stats_->SetRedisError(fmt::format("shard {}: {} {}: {}", config_.shard,
                                    ReaderCommandName(in_flight_), config_.stream, reply.error));
}

}  // namespace rsc::client
