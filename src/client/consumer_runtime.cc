#include "client/consumer_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/protocol_json.h"

namespace rsc::client {

std::unique_ptr<ReaderCore> ConsumerPorts::MakeReader(ReaderCoreConfig config,
                                                      ReaderContext* context, DeliveryStats* stats,
                                                      bool has_predecessor) {
  return std::make_unique<ReaderCore>(std::move(config), context, stats, has_predecessor);
}

// The reader's view of the runtime: the core's lease checks, the clock, the stop policy and
// the events.
class ConsumerRuntime::Context : public ReaderContext {
 public:
  Context(ConsumerRuntime* runtime, uint64_t id) : runtime_(runtime), id_(id) {}
  int64_t ReadBudgetMs(int32_t shard) override {
    return runtime_->core_.ReadBudgetMs(shard, runtime_->ports_->NowMs(true));
  }
  bool MayProcess(int32_t shard) override {
    return runtime_->core_.MayProcess(shard, runtime_->ports_->NowMs(true));
  }
  TimeMs NowMs() override { return runtime_->Now(); }
  void OnHandlerGaveUp(int32_t /*shard*/, const std::string& error) override {
    if (runtime_->stop_error_.empty()) runtime_->stop_error_ = error;
    runtime_->stop_asked_ = true;  // Settle() begins the shutdown
  }
  void Observe(ConsumerEvent event) override;
  // Queued, like a drain: the core hears of it in Settle, outside the reader's step.
  void OnSealed(int32_t shard) override { runtime_->sealed_.push_back(shard); }
  bool PipelinedLive() override { return runtime_->ports_->PipelinesLiveReads(); }

 private:
  ConsumerRuntime* const runtime_;
  const uint64_t id_;
};

struct ConsumerRuntime::ReaderState {
  uint64_t id = 0;
  int32_t shard = 0;
  uint64_t predecessor = 0;  // 0: none
  std::unique_ptr<Context> context;
  std::unique_ptr<ReaderCore> core;
  enum class Busy { kNone, kCommand, kHandler, kSleep } busy = Busy::kNone;
  TimeMs sleep_until = 0;
  bool finished = false;
  TimeMs reported_lease = -1;  // the lease end its last kAcquire/kLease event said

  ReaderInfo Info() const {
    ReaderInfo i;
    i.id = id;
    i.shard = shard;
    i.stream = core->config().stream;
    i.acquired = core->acquired();
    i.draining = core->drain_requested();
    i.abandoned = core->abandoned();
    i.command_in_flight = busy == Busy::kCommand;
    return i;
  }
};

void ConsumerRuntime::Context::Observe(ConsumerEvent event) {
  if (event.kind == ConsumerEventKind::kAcquire) {
    const ConsumerCore& core = runtime_->core_;
    event.assignment_epoch = core.Status(runtime_->Now()).assignment_epoch;
    if (const std::optional<TimeMs> end = core.LeaseEndOf(event.shard)) {
      event.lease_end_us = *end * 1000;
      if (ReaderState* r = runtime_->Find(id_)) r->reported_lease = *end;
    }
  }
  runtime_->ports_->Observe(id_, std::move(event));
}

ConsumerRuntime::ConsumerRuntime(ConsumerRuntimeOptions options, ConsumerCoreOptions core_options,
                                 ConsumerPorts* ports, DeliveryStats* stats)
    : options_(std::move(options)),
      ports_(ports),
      stats_(stats),
      base_path_("/v1/groups/" + PercentEncode(options_.stream) + "/" +
                 PercentEncode(options_.reader.group)),
      endpoint_count_(std::max(1, core_options.endpoint_count)),
      core_(std::move(core_options)) {}

ConsumerRuntime::~ConsumerRuntime() = default;

TimeMs ConsumerRuntime::Now() const { return ports_->NowMs(false); }

// ── inputs ────────────────────────────────────────────────────────────────────────

void ConsumerRuntime::Start() {
  Apply(core_.Start(Now()), std::nullopt, AbandonCause::kOther);
  Settle();
}

void ConsumerRuntime::Shutdown() {
  if (give_up_at_ || exiting_) return;
  give_up_at_ = Now() + options_.shutdown_timeout_ms;
  const std::optional<TimeMs> lease = core_.lease_end();
  Apply(core_.Shutdown(Now()), lease, CauseBefore(lease));
  Settle();
}

void ConsumerRuntime::Tick() {
  const TimeMs now = Now();
  while (!sleeps_.empty() && sleeps_.begin()->first <= now) {
    const uint64_t id = sleeps_.begin()->second;
    sleeps_.erase(sleeps_.begin());
    ReaderState* r = Find(id);
    if (r == nullptr || r->busy != ReaderState::Busy::kSleep) continue;
    r->busy = ReaderState::Busy::kNone;
    r->core->OnWake();
    runnable_.insert(id);
  }
  if (give_up_at_ && !exiting_ && now >= *give_up_at_) BeginGiveUp();
  if (!exiting_) {
    const std::optional<TimeMs> lease = core_.lease_end();
    Apply(core_.Tick(now), lease, CauseBefore(lease));
  }
  Settle();
}

void ConsumerRuntime::OnHttp(uint64_t call, HttpOutcome outcome) {
  if (heartbeat_call_ == call) {
    heartbeat_call_.reset();
    OnHeartbeatOutcome(outcome);
  } else if (routing_call_ == call) {
    routing_call_.reset();
    OnRoutingOutcome(outcome);
  }
  Settle();
}

void ConsumerRuntime::OnRedisReply(uint64_t reader, ReaderReply reply) {
  ReaderState* r = Find(reader);
  if (r == nullptr || r->busy != ReaderState::Busy::kCommand) return;
  r->busy = ReaderState::Busy::kNone;
  r->core->OnReply(std::move(reply));
  runnable_.insert(reader);
  Settle();
}

void ConsumerRuntime::OnHandled(uint64_t reader, const HandlerResult& result) {
  ReaderState* r = Find(reader);
  if (r == nullptr || r->busy != ReaderState::Busy::kHandler) return;
  r->busy = ReaderState::Busy::kNone;
  r->core->OnHandled(result);
  runnable_.insert(reader);
  Settle();
}

void ConsumerRuntime::OnWithdrawn(uint64_t reader) {
  ReaderState* r = Find(reader);
  if (r == nullptr || r->busy != ReaderState::Busy::kHandler) return;
  r->busy = ReaderState::Busy::kNone;
  r->core->OnWithdrawn();
  runnable_.insert(reader);
  Settle();
}

bool ConsumerRuntime::MayStartHandler(uint64_t reader) {
  ReaderState* r = Find(reader);
  return r != nullptr && r->busy == ReaderState::Busy::kHandler && !r->core->abandoned() &&
         core_.MayProcess(r->shard, ports_->NowMs(true));
}

TimeMs ConsumerRuntime::NextWakeupMs() const {
  TimeMs wake = exiting_ ? std::numeric_limits<TimeMs>::max() : core_.NextWakeupMs();
  if (!sleeps_.empty()) wake = std::min(wake, sleeps_.begin()->first);
  if (!unrouted_.empty() && !routing_call_ && !exiting_) wake = std::min(wake, next_routing_ms_);
  if (give_up_at_ && !exiting_) wake = std::min(wake, *give_up_at_);
  return wake;
}

std::vector<ReaderInfo> ConsumerRuntime::Readers() const {
  std::vector<ReaderInfo> out;
  out.reserve(readers_.size());
  for (const auto& [id, r] : readers_) out.push_back(r->Info());
  return out;
}

std::optional<ReaderInfo> ConsumerRuntime::Reader(uint64_t id) const {
  auto it = readers_.find(id);
  if (it == readers_.end()) return std::nullopt;
  return it->second->Info();
}

// ── the core's actions ────────────────────────────────────────────────────────────

AbandonCause ConsumerRuntime::CauseBefore(std::optional<TimeMs> lease_before) const {
  return !lease_before || Now() >= *lease_before ? AbandonCause::kLeaseEnd : AbandonCause::kOther;
}

void ConsumerRuntime::Apply(const ConsumerActions& a, std::optional<TimeMs> lease_before,
                            AbandonCause cause) {
  for (int32_t s : a.abandon) {
    unrouted_.erase(s);
    ReaderState* r = Current(s);
    if (r == nullptr) {
      drained_.push_back(s);  // never read: nothing of it runs
    } else if (!r->core->abandoned()) {
      AbandonReader(*r, cause);
    }
  }
  for (int32_t s : a.stop) {
    ReaderState* r = Current(s);
    if (r == nullptr) {
      unrouted_.erase(s);  // never read: nothing in flight
      drained_.push_back(s);
    } else if (!r->core->drain_requested() && !r->core->abandoned()) {
      DrainReader(*r);  // also during a clean shutdown: it is reported REVOKED
    }
  }
  for (int32_t s : a.start) {
    if (routing_.contains(s)) {
      StartReader(s);
    } else {
      unrouted_.insert(s);
      next_routing_ms_ = 0;
    }
  }
  if (a.version_changed) {
    ports_->SaveVersion(
        ObservedVersion{a.version_changed->metadata_version, a.version_changed->lineage});
  }
  if (a.send) SendHeartbeat(*a.send);
  if (a.left) {
    // Left (or gone while leaving): nothing may run any more. After a confirmed leave no
    // reader is left; otherwise what remains is abandoned (the member expires).
    exiting_ = true;
    for (auto& [id, r] : readers_) {
      if (!r->core->abandoned()) AbandonReader(*r, AbandonCause::kShutdown);
    }
  }
  if (lease_before != core_.lease_end()) ObserveLeases(lease_before);
}

void ConsumerRuntime::BeginGiveUp() {
  // The leave was not confirmed in time (the coordinator may be down): abandon what is left;
  // the member expires on its own.
  exiting_ = true;
  for (auto& [id, r] : readers_) {
    if (!r->core->abandoned()) AbandonReader(*r, AbandonCause::kShutdown);
  }
}

void ConsumerRuntime::Settle() {
  if (settling_) return;
  settling_ = true;
  while (!runnable_.empty() || !drained_.empty() || !sealed_.empty() ||
         (stop_asked_ && !give_up_at_)) {
    if (stop_asked_ && !give_up_at_ && !exiting_) {
      give_up_at_ = Now() + options_.shutdown_timeout_ms;
      const std::optional<TimeMs> lease = core_.lease_end();
      Apply(core_.Shutdown(Now()), lease, CauseBefore(lease));
    }
    stop_asked_ = stop_asked_ && !give_up_at_ && !exiting_;
    while (!runnable_.empty()) {
      const uint64_t id = *runnable_.begin();
      runnable_.erase(runnable_.begin());
      if (ReaderState* r = Find(id)) Step(*r);
    }
    std::vector<int32_t> sealed;
    sealed.swap(sealed_);
    for (int32_t s : sealed) {
      if (exiting_) break;
      const std::optional<TimeMs> lease = core_.lease_end();
      Apply(core_.OnShardCompleted(s, Now()), lease, CauseBefore(lease));
    }
    std::vector<int32_t> drained;
    drained.swap(drained_);
    for (int32_t s : drained) {
      if (exiting_) break;
      const std::optional<TimeMs> lease = core_.lease_end();
      Apply(core_.OnShardDrained(s, Now()), lease, CauseBefore(lease));
    }
  }
  MaybeFetchRouting();
  settling_ = false;
  ports_->AfterInput();
}

// ── heartbeats ────────────────────────────────────────────────────────────────────

void ConsumerRuntime::SendHeartbeat(const client::SendHeartbeat& send) {
  HttpCall call;
  call.endpoint = send.endpoint;
  call.method = "POST";
  heartbeat_held_epoch_ = core_.member_epoch();
  if (send.leave) {
    // /leave checks the epoch we claim against the recorded one (K5), so send the epoch we
    // hold; the core's request carries -1.
    call.target = base_path_ + "/leave";
    call.body = SerializeLeaveRequest(
        LeaveRequest{heartbeat_held_epoch_ > 0 ? heartbeat_held_epoch_ : -1, send.request});
  } else {
    call.target = base_path_ + "/heartbeat";
    call.body = SerializeHeartbeatRequest(send.request);
  }
  heartbeat_leave_ = send.leave;
  heartbeat_sent_ = core_.in_flight_sent_ms().value_or(Now());
  heartbeat_call_ = next_call_++;
  ports_->Http(*heartbeat_call_, call);
}

void ConsumerRuntime::OnHeartbeatOutcome(const HttpOutcome& outcome) {
  std::optional<HeartbeatResponse> answer;
  ErrorCode error = ErrorCode::kUnknownResult;
  std::string message;
  if (outcome.status == 200) {
    Result<HeartbeatResponse> parsed = ParseHeartbeatResponse(outcome.body);
    if (parsed.ok()) {
      answer = std::move(parsed).value();
    } else {
      // Something answered that is not a coordinator we understand: like no answer.
      message = fmt::format("{}: {}", outcome.where, parsed.error().message);
    }
  } else if (outcome.status == 0) {
    message = fmt::format("{}: {}", outcome.where, outcome.error);  // C6
  } else {
    Result<ErrorBody> err = ParseErrorBody(outcome.body);
    if (err.ok() && err->code) {
      error = *err->code;
    } else {
      // No error body we know (a proxy page, a newer code): 5xx is "try elsewhere", 4xx is
      // our fault.
      error = outcome.status >= 500 ? ErrorCode::kUnknownResult : ErrorCode::kInvalidRequest;
    }
    message = fmt::format("{}: HTTP {} {}: {}", outcome.where, outcome.status,
                          err.ok() ? err->error : std::string("?"),
                          err.ok() ? err->message : outcome.body.substr(0, 200));
  }
  // Reported before the answer's actions, so it precedes the acquires it leads to; the grant
  // as the coordinator made it (before a test seam alters the answer).
  ObserveHeartbeat(answer, error, message);
  const std::optional<TimeMs> lease_before = core_.lease_end();
  AbandonCause cause = CauseBefore(lease_before);
  if (answer) {
    ports_->BeforeAnswer(*answer, heartbeat_sent_);
    if (cause == AbandonCause::kOther && answer->member_epoch == -1) cause = AbandonCause::kFenced;
    last_error_.clear();
    // D2: an answer names the key of every shard it lists once the stream was resharded
    // (a sealed generation's shards are in no routing answer).
    // The latest answer says which keys the coordinator creates (C9 (f)): an answer
    // without `streams` (a Redis restored to before the first reshard) gives them back.
    coordinator_keys_.clear();
    for (const RoutingShard& s : answer->streams) {
      routing_[s.id] = s.stream;
      coordinator_keys_.insert(s.id);
    }
    Apply(core_.OnHeartbeatResponse(*answer, Now()), lease_before, cause);
    StartRouted();
  } else {
    if (cause == AbandonCause::kOther &&
        (error == ErrorCode::kUnknownMemberId || error == ErrorCode::kFencedMemberEpoch)) {
      cause = AbandonCause::kFenced;
    }
    last_error_ = message.empty() ? std::string(ErrorCodeName(error)) : message;
    Apply(core_.OnHeartbeatError(error, Now()), lease_before, cause);
  }
}

void ConsumerRuntime::ObserveHeartbeat(const std::optional<HeartbeatResponse>& answer,
                                       ErrorCode error, const std::string& message) {
  if (!options_.reader.observe) return;
  ConsumerEvent e;
  e.kind = ConsumerEventKind::kHeartbeat;
  e.sent_us = heartbeat_sent_ * 1000;
  if (answer) {
    e.status = std::string(HeartbeatStatusName(answer->status));
    e.member_epoch = answer->member_epoch;
    e.assignment_epoch = answer->assignment_epoch;
    e.metadata_version = answer->metadata_version;
    e.lineage = answer->lineage;
    e.assigned_shards = answer->assigned_shards;
    e.granted_lease_ms = answer->assignment_lease_ms;
    if (heartbeat_leave_) e.detail = "leave";
  } else {
    e.status = std::string(ErrorCodeName(error));
    e.detail = message;
  }
  ports_->Observe(0, std::move(e));
}

// Leases are reported per shard being read, like the simulator's history: a renewal moves
// the lease of every window being read (kLease, shard s), never that of a shard being
// abandoned — its work is stopping, and a member-wide event would give it back in a log's
// reading (found by the 10-minute chaos run, seed 53: an abandoned reader whose blocked read
// outlived a rejoin). A shard newly taken from us (C8) has its own, final lease from now on:
// said once with detail "taken".
void ConsumerRuntime::ObserveLeases(std::optional<TimeMs> /*lease_before*/) {
  if (!options_.reader.observe) return;
  const ConsumerStatus st = core_.Status(Now());
  const std::set<int32_t> taken(st.taken.begin(), st.taken.end());
  for (auto& [id, r] : readers_) {
    if (!r->core->acquired() || r->core->abandoned()) continue;
    const std::optional<TimeMs> end = core_.LeaseEndOf(r->shard);
    const bool newly_taken = taken.contains(r->shard) && !reported_taken_.contains(r->shard);
    if (!end || (*end == r->reported_lease && !newly_taken)) continue;
    r->reported_lease = *end;
    ConsumerEvent e;
    e.kind = ConsumerEventKind::kLease;
    e.shard = r->shard;
    e.stream = r->core->config().stream;
    if (taken.contains(r->shard)) e.detail = "taken";
    e.lease_end_us = *end * 1000;
    e.assignment_epoch = st.assignment_epoch;
    ports_->Observe(id, std::move(e));
  }
  reported_taken_ = taken;
}

// ── routing (C7: shard stream keys are never computed) ────────────────────────────

void ConsumerRuntime::MaybeFetchRouting() {
  if (unrouted_.empty() || routing_call_ || exiting_ || Now() < next_routing_ms_) return;
  HttpCall call;
  call.endpoint = routing_endpoint_ % endpoint_count_;
  call.method = "GET";
  call.target = base_path_ + "/routing?observedVersion=" + std::to_string(core_.metadata_version());
  if (!core_.lineage().empty()) call.target += "&lineage=" + PercentEncode(core_.lineage());
  routing_call_ = next_call_++;
  ports_->Http(*routing_call_, call);
}

void ConsumerRuntime::OnRoutingOutcome(const HttpOutcome& outcome) {
  std::optional<RoutingResponse> routing;
  std::string error;
  if (outcome.status == 200) {
    Result<RoutingResponse> parsed = ParseRoutingResponse(outcome.body);
    if (parsed.ok()) {
      routing = std::move(parsed).value();
    } else {
      error = parsed.error().message;
    }
  } else {
    error = outcome.status == 0 ? outcome.error : fmt::format("HTTP {}", outcome.status);
  }
  if (!routing) {
    ++routing_endpoint_;  // C6: try the next endpoint next time
    routing_failures_ = std::min(routing_failures_ + 1, 5);
    next_routing_ms_ = Now() + (int64_t{100} << routing_failures_);
    last_error_ = fmt::format("routing from {}: {}", outcome.where, error);
    return;
  }
  routing_failures_ = 0;
  for (const RoutingShard& s : routing->shards) routing_[s.id] = s.stream;
  StartRouted();
  next_routing_ms_ = Now() + 1000;
}

void ConsumerRuntime::StartRouted() {
  // Start the shards that were waiting for their key, if the core still wants them read.
  std::set<int32_t> waiting;
  waiting.swap(unrouted_);
  for (int32_t s : waiting) {
    if (core_.StateOf(s) != LocalShardState::kReading) continue;
    if (routing_.contains(s)) {
      StartReader(s);
    } else {
      unrouted_.insert(s);  // assigned but not in this routing yet (a growing group)
    }
  }
}

// ── readers ───────────────────────────────────────────────────────────────────────

ConsumerRuntime::ReaderState* ConsumerRuntime::Find(uint64_t id) {
  auto it = readers_.find(id);
  return it == readers_.end() ? nullptr : it->second.get();
}

ConsumerRuntime::ReaderState* ConsumerRuntime::Current(int32_t shard) {
  auto it = current_.find(shard);
  return it == current_.end() ? nullptr : Find(it->second);
}

void ConsumerRuntime::StartReader(int32_t shard) {
  auto r = std::make_unique<ReaderState>();
  r->id = next_reader_++;
  r->shard = shard;
  if (ReaderState* prev = Current(shard)) r->predecessor = prev->id;
  ReaderCoreConfig config = options_.reader;
  config.shard = shard;
  config.stream = routing_.at(shard);
  config.create_key = !coordinator_keys_.contains(shard);
  config.dead_letter_stream = config.stream + options_.dead_letter_suffix;
  r->context = std::make_unique<Context>(this, r->id);
  r->core = ports_->MakeReader(std::move(config), r->context.get(), stats_, r->predecessor != 0);
  current_[shard] = r->id;
  runnable_.insert(r->id);
  readers_[r->id] = std::move(r);
}

void ConsumerRuntime::CancelSleep(ReaderState& r) {
  if (r.busy != ReaderState::Busy::kSleep) return;
  sleeps_.erase({r.sleep_until, r.id});
  r.busy = ReaderState::Busy::kNone;  // a drain or an abandon cuts a backoff short
  r.core->OnWake();
}

void ConsumerRuntime::DrainReader(ReaderState& r) {
  r.core->Drain();
  CancelSleep(r);
  ports_->ReaderStopping(r.id, false, AbandonCause::kOther);
  runnable_.insert(r.id);
}

void ConsumerRuntime::AbandonReader(ReaderState& r, AbandonCause cause) {
  ports_->ReaderStopping(r.id, true, cause);
  const char* reason = cause == AbandonCause::kFenced     ? "fenced"
                       : cause == AbandonCause::kShutdown ? "shutdown"
                                                          : "abandoned";
  r.core->Abandon(reason);
  CancelSleep(r);
  runnable_.insert(r.id);
}

void ConsumerRuntime::Step(ReaderState& r) {
  for (;;) {
    if (r.finished || r.busy != ReaderState::Busy::kNone) return;
    ReaderAction a = r.core->Next();
    switch (a.kind) {
      case ReaderAction::Kind::kIdle:
        if (r.core->waiting_for_predecessor() &&
            (r.predecessor == 0 || Find(r.predecessor) == nullptr)) {
          r.core->OnPredecessorFinished();
          continue;
        }
        return;  // stepped again when the predecessor finishes, or on a drain/abandon
      case ReaderAction::Kind::kSleep:
        r.busy = ReaderState::Busy::kSleep;
        r.sleep_until = Now() + a.sleep_ms;
        sleeps_.insert({r.sleep_until, r.id});
        return;
      case ReaderAction::Kind::kCommand:
        r.busy = ReaderState::Busy::kCommand;
        ports_->Redis(r.id, r.core->config(), a.command);
        return;
      case ReaderAction::Kind::kDeliver:
        r.busy = ReaderState::Busy::kHandler;
        ports_->Handle(r.id, std::move(a.message));
        return;
      case ReaderAction::Kind::kFinished:
        FinishReader(r);
        return;
    }
  }
}

void ConsumerRuntime::FinishReader(ReaderState& r) {
  // Drained, or abandoned and now really stopped: either way the core is told (an abandoned
  // shard is reported DRAINING until then, consumer_core.h).
  r.finished = true;
  const uint64_t id = r.id;
  const int32_t shard = r.shard;
  if (auto cur = current_.find(shard); cur != current_.end() && cur->second == id) {
    current_.erase(cur);
  }
  for (auto& [other_id, other] : readers_) {
    if (other->predecessor == id) runnable_.insert(other_id);
  }
  drained_.push_back(shard);
  readers_.erase(id);  // `r` is gone from here on
}

}  // namespace rsc::client
