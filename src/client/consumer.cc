// The consumer runtime (the shell around ConsumerCore): one coordinator thread that performs
// the core's actions — heartbeats over HTTP, routing look-ups, starting, draining and
// abandoning shard readers, saving the observed version — and one ShardReader thread per
// shard being read (consumer_reader.h).
//
// Why one reader thread per shard rather than one thread multiplexing every shard with a
// single XREADGROUP ... STREAMS s1 s2 ...: the shard streams carry one hash tag each, so in
// Redis Cluster they live in different slots (one command cannot name them all); a slow
// handler on one shard must not hold up the others; and a drain or an abandon concerns one
// shard and must not disturb the reads of the rest. A member owns a handful of shards, so
// a thread and a connection each is cheap.
//
// Locks: `mu_` guards the core and every field marked so. It is never held during I/O or
// while joining a thread. Lock order: mu_ before a reader's own mutex (Drain/Abandon are
// called under mu_; readers call the ReaderHost methods, which take mu_, without holding
// their own). Only the coordinator thread calls the core's events, always reading the clock
// under mu_, so `now` never decreases.

#include "rsc/consumer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "client/consumer_core.h"
#include "client/consumer_reader.h"
#include "client/http_transport.h"
#include "client/redis_conn.h"
#include "core/protocol.h"
#include "core/protocol_json.h"

namespace rsc {

std::string_view HandlerErrorPolicyName(HandlerErrorPolicy policy) {
  switch (policy) {
    case HandlerErrorPolicy::kRetry:
      return "retry";
    case HandlerErrorPolicy::kDeadLetter:
      return "dead-letter";
    case HandlerErrorPolicy::kStop:
      return "stop";
  }
  return "?";
}

std::string_view ConsumerEventKindName(ConsumerEventKind kind) {
  switch (kind) {
    case ConsumerEventKind::kAcquire:
      return "acquire";
    case ConsumerEventKind::kLease:
      return "lease";
    case ConsumerEventKind::kRead:
      return "read";
    case ConsumerEventKind::kDeliver:
      return "deliver";
    case ConsumerEventKind::kAck:
      return "ack";
    case ConsumerEventKind::kRelease:
      return "release";
    case ConsumerEventKind::kHeartbeat:
      return "heartbeat";
  }
  return "?";
}

namespace {

using client::ConsumerActions;
using client::ConsumerCore;
using client::HttpEndpoint;
using client::HttpReply;
using client::HttpTransport;
using client::PercentEncode;
using client::ShardReader;
using client::SteadyNowMs;
using client::SteadyNowUs;

// A random (version 4) UUID: the member id, generated once per Consumer (SPEC §4.1).
std::string NewUuid() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;                           // version 4
  lo = (lo & ~(0xC0ULL << 56)) | (0x80ULL << 56);               // RFC 4122 variant
  const std::string h = fmt::format("{:016x}{:016x}", hi, lo);  // 32 hex digits
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

ConsumerError Invalid(std::string message) {
  return ConsumerError{ConsumerErrorCode::kInvalidArgument, std::move(message)};
}

// The outcome of one heartbeat exchange, as the core wants it.
struct HeartbeatOutcome {
  std::optional<HeartbeatResponse> response;
  ErrorCode error = ErrorCode::kUnknownResult;
  std::string message;
};

}  // namespace

class Consumer::Impl : public client::ReaderHost {
 public:
  Impl(ConsumerOptions options, MessageHandler handler, std::vector<HttpEndpoint> endpoints,
       client::RedisTarget redis, ObservedVersion seed, std::string member_id)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        redis_(std::move(redis)),
        member_id_(std::move(member_id)),
        consumer_name_(options_.consumer_name.empty() ? member_id_ : options_.consumer_name),
        base_path_("/v1/groups/" + PercentEncode(options_.stream) + "/" +
                   PercentEncode(options_.group)),
        core_(client::ConsumerCoreOptions{
            .member_id = MemberId(member_id_),
            .instance_id = options_.instance_id,
            .endpoint_count = static_cast<int>(endpoints.size()),
            .initial_metadata_version = seed.metadata_version,
            .initial_lineage = seed.lineage,
            .initial_heartbeat_interval_ms = 1000,
            .backoff_initial_ms = options_.backoff_initial.count(),
            .backoff_max_ms = options_.backoff_max.count(),
            .jitter_seed = std::random_device{}(),
        }),
        saved_(std::move(seed)) {
    for (HttpEndpoint& ep : endpoints) {
      transports_.push_back(std::make_unique<HttpTransport>(std::move(ep), options_.http_timeout));
    }
  }

  ~Impl() override { Stop(); }

  void Start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_ || stop_requested_) return;
    started_ = true;
    thread_ = std::thread([this] { CoordinatorLoop(); });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_requested_ = true;
      if (!started_) stopped_ = true;
    }
    cv_.notify_all();
    std::lock_guard<std::mutex> join_lock(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

  ConsumerStatus Status() const {
    std::lock_guard<std::mutex> lock(mu_);
    // The clock reads are judged with (rounded up), so the lease shown is never longer
    // than the one MayRead grants.
    const client::ConsumerStatus st = core_.Status(client::SteadyNowMsCeil());
    ConsumerStatus out;
    out.started = started_;
    out.stopped = stopped_;
    out.phase = std::string(client::ConsumerPhaseName(st.phase));
    out.member_id = member_id_;
    out.member_epoch = st.member_epoch;
    out.assignment_epoch = st.assignment_epoch;
    out.metadata_version = st.metadata_version;
    out.lineage = st.lineage;
    out.lease_remaining_ms = st.lease_remaining_ms;
    out.failed_closed = st.failed_closed;
    out.reading = st.reading;
    out.draining = st.draining;
    out.revoked = st.revoked;
    out.revoking_count = st.revoking_count;
    out.taken = st.taken;
    out.shards_taken = st.counters.shards_taken;
    out.coordinator_endpoint = transports_[st.endpoint]->endpoint().ToString();
    out.consecutive_heartbeat_failures = st.consecutive_failures;
    out.last_heartbeat_error = last_heartbeat_error_;
    out.heartbeats_sent = st.counters.heartbeats_sent;
    out.lease_expirations = st.counters.lease_expirations;
    out.rejoins = st.counters.rejoins;
    out.messages_handled = stats_.handled.load();
    out.messages_acked = stats_.acked.load();
    out.messages_claimed = stats_.claimed.load();
    out.late_read_reclaims = stats_.foreign_claims.load();
    out.handler_failures = stats_.handler_failures.load();
    out.dead_lettered = stats_.dead_lettered.load();
    out.last_handler_error = stats_.handler_error();
    out.last_redis_error = stats_.redis_error();
    out.stop_error = stop_error_;
    return out;
  }

  // ── ReaderHost (reader threads) ──
  int64_t ReadBudgetMs(int32_t shard) override {
    std::lock_guard<std::mutex> lock(mu_);
    return core_.ReadBudgetMs(shard, client::SteadyNowMsCeil());
  }

  bool MayProcess(int32_t shard) override {
    std::lock_guard<std::mutex> lock(mu_);
    return core_.MayProcess(shard, client::SteadyNowMsCeil());
  }

  void OnDrained(ShardReader* reader) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      drained_.push_back({reader->shard(), reader});
    }
    cv_.notify_all();
  }

  void OnHandlerGaveUp(int32_t /*shard*/, const std::string& error) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_error_.empty()) stop_error_ = error;
      stop_requested_ = true;
    }
    cv_.notify_all();
  }

  void Observe(ConsumerEvent event) override {
    if (event.kind == ConsumerEventKind::kAcquire) {
      std::lock_guard<std::mutex> lock(mu_);
      event.assignment_epoch = core_.Status(SteadyNowMs()).assignment_epoch;
      if (const std::optional<TimeMs> end = core_.LeaseEndOf(event.shard)) {
        event.lease_end_us = *end * 1000;
      }
    }
    Emit(event);
  }

 private:
  struct Drained {
    int32_t shard = 0;
    const ShardReader* reader = nullptr;  // null: a shard that never got a reader
  };

  // Calls the observability hook; it must not throw, but a library thread must not die of it.
  void Emit(const ConsumerEvent& event) const {
    if (!options_.on_event) return;
    try {
      options_.on_event(event);
    } catch (...) {  // NOLINT(bugprone-empty-catch): documented as swallowed
    }
  }

  // The release detail of shards an event abandons: the lease had ended (C4: "abandoned")
  // or the coordinator dropped them while it ran (fenced, unknown member, memberEpoch -1:
  // "fenced"). Judged on the lease as it was BEFORE the event: a drop also clears it.
  static std::string AbandonReason(std::optional<TimeMs> lease_before) {
    return !lease_before || SteadyNowMs() >= *lease_before ? "abandoned" : "fenced";
  }

  // ── Coordinator thread ──
  void CoordinatorLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    Apply(core_.Start(SteadyNowMs()), std::nullopt);  // no lease yet
    std::optional<TimeMs> give_up_at;
    for (;;) {
      ReapRetired(lock);
      if (stop_requested_ && !give_up_at) {
        give_up_at = SteadyNowMs() + options_.shutdown_timeout.count();
        const std::optional<TimeMs> lease = core_.lease_end();
        Apply(core_.Shutdown(SteadyNowMs()), lease);
      }
      std::vector<Drained> drained;
      drained.swap(drained_);
      for (const Drained& d : drained) HandleDrained(d);
      if (core_.phase() == client::ConsumerPhase::kLeft) break;
      if (give_up_at && SteadyNowMs() >= *give_up_at) break;  // leave not confirmed in time
      const std::optional<TimeMs> lease = core_.lease_end();
      Apply(core_.Tick(SteadyNowMs()), lease);
      if (!unrouted_.empty() && SteadyNowMs() >= next_routing_ms_) RefreshRouting(lock);
      SaveVersion(lock);
      if (to_send_) {
        SendAndReport(lock);
        continue;
      }
      TimeMs wake = core_.NextWakeupMs();
      if (!unrouted_.empty()) wake = std::min(wake, next_routing_ms_);
      if (give_up_at) wake = std::min(wake, *give_up_at);
      if (!retired_.empty()) wake = std::min(wake, SteadyNowMs() + 50);  // reap soon
      const TimeMs wait = std::clamp<TimeMs>(wake - SteadyNowMs(), 1, 1000);
      cv_.wait_for(lock, std::chrono::milliseconds(wait),
                   [&] { return (stop_requested_ && !give_up_at) || !drained_.empty(); });
    }
    // Left (or gave up): nothing may run any more. After a confirmed leave no reader is
    // left; after a give-up the remaining ones are abandoned (the member expires).
    for (auto& [shard, reader] : readers_) {
      reader->Abandon("shutdown");
      retired_.push_back(std::move(reader));
    }
    readers_.clear();
    std::vector<std::shared_ptr<ShardReader>> retired;
    retired.swap(retired_);
    lock.unlock();
    for (auto& r : retired) r->Join();
    for (auto& t : transports_) t->Close();
    lock.lock();
    stopped_ = true;
  }

  // Performs one event's actions, in the core's order (consumer_core.h). `lease_before`:
  // the core's lease end before the event that produced them.
  void Apply(ConsumerActions actions, std::optional<TimeMs> lease_before) {
    const std::string reason = actions.abandon.empty() ? "" : AbandonReason(lease_before);
    for (int32_t s : actions.abandon) {
      unrouted_.erase(s);
      if (auto it = readers_.find(s); it != readers_.end()) {
        it->second->Abandon(reason);
        // The core reports the shard DRAINING until this reader's thread has ended (its
        // last command came back, its last handler call returned): ReapRetired tells it.
        abandoned_[it->second.get()] = s;
        retired_.push_back(std::move(it->second));
        readers_.erase(it);
      } else {
        drained_.push_back({s, nullptr});  // never read: nothing of it runs
      }
    }
    for (int32_t s : actions.stop) {
      if (auto it = readers_.find(s); it != readers_.end()) {
        it->second->Drain();  // stays in readers_ until it reports the drain
      } else {
        unrouted_.erase(s);  // never read: nothing in flight
        drained_.push_back({s, nullptr});
      }
    }
    for (int32_t s : actions.start) {
      if (routing_.count(s) != 0) {
        StartReader(s);
      } else {
        unrouted_.insert(s);
        next_routing_ms_ = 0;
      }
    }
    if (actions.version_changed) {
      pending_save_ = ObservedVersion{actions.version_changed->metadata_version,
                                      actions.version_changed->lineage};
    }
    if (actions.send) to_send_ = std::move(actions.send);
  }

  void StartReader(int32_t shard) {
    if (auto it = readers_.find(shard); it != readers_.end()) {
      // Not expected (every start is from local absence); be safe: never two readers.
      it->second->Abandon();
      retired_.push_back(std::move(it->second));
      readers_.erase(it);
    }
    std::shared_ptr<ShardReader> predecessor;
    for (const auto& r : retired_) {
      if (r->shard() == shard) predecessor = r;  // the latest one
    }
    client::ReaderConfig config;
    config.shard = shard;
    config.stream = routing_.at(shard);
    config.group = options_.group;
    config.consumer_name = consumer_name_;
    config.redis = redis_;
    config.redis_timeout = options_.redis_timeout;
    config.max_batch = options_.max_batch;
    config.block = options_.block;
    config.policy = options_.on_handler_error;
    config.max_attempts = options_.max_attempts;
    config.retry_initial = options_.handler_retry_initial;
    config.retry_max = options_.handler_retry_max;
    config.dead_letter_stream = config.stream + options_.dead_letter_suffix;
    config.observe = static_cast<bool>(options_.on_event);
    auto reader = std::make_shared<ShardReader>(std::move(config), &handler_, this, &stats_,
                                                std::move(predecessor));
    reader->Start();
    readers_[shard] = std::move(reader);
  }

  void HandleDrained(const Drained& d) {
    if (d.reader != nullptr) {
      auto it = readers_.find(d.shard);
      // A reader abandoned meanwhile (lease end) reports to nobody: the core moved on.
      if (it == readers_.end() || it->second.get() != d.reader) return;
      retired_.push_back(std::move(it->second));
      readers_.erase(it);
    } else if (readers_.count(d.shard) != 0) {
      return;
    }
    const std::optional<TimeMs> lease = core_.lease_end();
    Apply(core_.OnShardDrained(d.shard, SteadyNowMs()), lease);
  }

  // Joins readers whose thread ended (their join is then immediate).
  void ReapRetired(std::unique_lock<std::mutex>& lock) {
    std::vector<std::shared_ptr<ShardReader>> done;
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->Finished()) {
        done.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
    if (done.empty()) return;
    lock.unlock();
    for (auto& r : done) r->Join();
    lock.lock();
    for (auto& r : done) {
      auto it = abandoned_.find(r.get());
      if (it == abandoned_.end()) continue;
      const int32_t shard = it->second;
      abandoned_.erase(it);
      const std::optional<TimeMs> lease = core_.lease_end();
      Apply(core_.OnShardDrained(shard, SteadyNowMs()), lease);  // the abandoned work stopped
    }
    done.clear();
  }

  void SendAndReport(std::unique_lock<std::mutex>& lock) {
    const client::SendHeartbeat send = std::move(*to_send_);
    to_send_.reset();
    const int64_t held_epoch = core_.member_epoch();
    const int64_t sent_us = core_.in_flight_sent_ms().value_or(SteadyNowMs()) * 1000;
    lock.unlock();
    HeartbeatOutcome outcome = Exchange(send, held_epoch);
    lock.lock();
    const TimeMs now = SteadyNowMs();
    const std::optional<TimeMs> lease_before = core_.lease_end();
    if (options_.on_event) {
      // Reported before the answer's actions, so it precedes the acquires it leads to.
      ConsumerEvent e;
      e.kind = ConsumerEventKind::kHeartbeat;
      e.t_us = SteadyNowUs();
      e.sent_us = sent_us;
      if (outcome.response) {
        const HeartbeatResponse& r = *outcome.response;
        e.status = std::string(HeartbeatStatusName(r.status));
        e.member_epoch = r.member_epoch;
        e.assignment_epoch = r.assignment_epoch;
        e.metadata_version = r.metadata_version;
        e.lineage = r.lineage;
        e.assigned_shards = r.assigned_shards;
        e.granted_lease_ms = r.assignment_lease_ms;
        if (send.leave) e.detail = "leave";
      } else {
        e.status = std::string(ErrorCodeName(outcome.error));
        e.detail = outcome.message;
      }
      Emit(e);
    }
    if (outcome.response) {
      last_heartbeat_error_.clear();
      Apply(core_.OnHeartbeatResponse(*outcome.response, now), lease_before);
    } else {
      last_heartbeat_error_ = std::move(outcome.message);
      Apply(core_.OnHeartbeatError(outcome.error, now), lease_before);
    }
    if (options_.on_event && core_.lease_end() && core_.lease_end() != lease_before) {
      ConsumerEvent e;
      e.kind = ConsumerEventKind::kLease;
      e.t_us = SteadyNowUs();
      e.lease_end_us = *core_.lease_end() * 1000;
      e.assignment_epoch = core_.Status(now).assignment_epoch;
      Emit(e);
    }
    EmitTakenLeases(now);
  }

  // A shard newly taken from us (C8) has its own, final lease from now on: say so once, so
  // that logs judge its holding by it rather than by the member lease.
  void EmitTakenLeases(TimeMs now) {
    std::set<int32_t> taken;
    for (int32_t s : core_.Status(now).taken) {
      taken.insert(s);
      if (reported_taken_.contains(s) || !options_.on_event) continue;
      const std::optional<TimeMs> end = core_.LeaseEndOf(s);
      if (!end) continue;
      ConsumerEvent e;
      e.kind = ConsumerEventKind::kLease;
      e.t_us = SteadyNowUs();
      e.shard = s;
      e.detail = "taken";
      e.lease_end_us = *end * 1000;
      e.assignment_epoch = core_.Status(now).assignment_epoch;
      Emit(e);
    }
    reported_taken_ = std::move(taken);
  }

  // One heartbeat (or leave) request. Runs without mu_.
  HeartbeatOutcome Exchange(const client::SendHeartbeat& send, int64_t held_epoch) {
    HttpTransport& t = *transports_[static_cast<size_t>(send.endpoint)];
    std::string body;
    if (send.leave) {
      // /leave checks the epoch we claim against the recorded one (K5), so send the epoch
      // we hold; the core's request carries -1.
      body = SerializeLeaveRequest(LeaveRequest{held_epoch > 0 ? held_epoch : -1, send.request});
    } else {
      body = SerializeHeartbeatRequest(send.request);
    }
    const HttpReply reply =
        t.Request("POST", base_path_ + (send.leave ? "/leave" : "/heartbeat"), body);
    HeartbeatOutcome out;
    const std::string where = t.endpoint().ToString();
    if (reply.status == 200) {
      Result<HeartbeatResponse> parsed = ParseHeartbeatResponse(reply.body);
      if (parsed.ok()) {
        out.response = std::move(parsed).value();
      } else {
        // Something answered that is not a coordinator we understand: like no answer.
        out.message = fmt::format("{}: {}", where, parsed.error().message);
      }
      return out;
    }
    if (reply.status == 0) {
      out.message = fmt::format("{}: {}", where, reply.error);
      return out;  // kUnknownResult: connect, reset, timeout (C6)
    }
    Result<ErrorBody> err = ParseErrorBody(reply.body);
    if (err.ok() && err->code) {
      out.error = *err->code;
    } else {
      // No error body we know (a proxy page, a newer code): 5xx is "try elsewhere", 4xx is
      // our fault.
      out.error = reply.status >= 500 ? ErrorCode::kUnknownResult : ErrorCode::kInvalidRequest;
    }
    out.message = fmt::format("{}: HTTP {} {}: {}", where, reply.status,
                              err.ok() ? err->error : std::string("?"),
                              err.ok() ? err->message : reply.body.substr(0, 200));
    return out;
  }

  // Shard → stream key, from the routing endpoint (C7: never computed). Shard streams never
  // change name, so one successful look-up serves every later start of a shard it lists.
  void RefreshRouting(std::unique_lock<std::mutex>& lock) {
    const size_t index = routing_endpoint_ % transports_.size();
    std::string target =
        base_path_ + "/routing?observedVersion=" + std::to_string(core_.metadata_version());
    if (!core_.lineage().empty()) target += "&lineage=" + PercentEncode(core_.lineage());
    lock.unlock();
    const HttpReply reply = transports_[index]->Request("GET", target, "");
    std::optional<RoutingResponse> routing;
    std::string error;
    if (reply.status == 200) {
      Result<RoutingResponse> parsed = ParseRoutingResponse(reply.body);
      if (parsed.ok()) {
        routing = std::move(parsed).value();
      } else {
        error = parsed.error().message;
      }
    } else {
      error = reply.status == 0 ? reply.error : fmt::format("HTTP {}", reply.status);
    }
    lock.lock();
    if (!routing) {
      ++routing_endpoint_;  // C6: try the next endpoint next time
      routing_failures_ = std::min(routing_failures_ + 1, 5);
      next_routing_ms_ = SteadyNowMs() + (int64_t{100} << routing_failures_);
      last_heartbeat_error_ =
          fmt::format("routing from {}: {}", transports_[index]->endpoint().ToString(), error);
      return;
    }
    routing_failures_ = 0;
    for (const RoutingShard& s : routing->shards) routing_[s.id] = s.stream;
    // Start the shards that were waiting, if the core still wants them read.
    std::set<int32_t> waiting;
    waiting.swap(unrouted_);
    for (int32_t s : waiting) {
      if (core_.StateOf(s) != client::LocalShardState::kReading) continue;
      if (routing_.count(s) != 0) {
        StartReader(s);
      } else {
        unrouted_.insert(s);  // assigned but not in this routing yet (a growing group)
      }
    }
    next_routing_ms_ = SteadyNowMs() + 1000;
  }

  // C5: persist the observed version (outside mu_; a failed save is retried next turn).
  void SaveVersion(std::unique_lock<std::mutex>& lock) {
    if (!options_.version_store || !pending_save_ || *pending_save_ == saved_) return;
    const ObservedVersion v = *pending_save_;
    lock.unlock();
    std::string error;
    const bool ok = options_.version_store->Save(options_.stream, options_.group, v, &error);
    lock.lock();
    if (ok) saved_ = v;
  }

  const ConsumerOptions options_;
  const MessageHandler handler_;
  const client::RedisTarget redis_;
  const std::string member_id_;
  const std::string consumer_name_;
  const std::string base_path_;
  // Immutable list; each transport is used by the coordinator thread only.
  std::vector<std::unique_ptr<HttpTransport>> transports_;
  client::DeliveryStats stats_;  // thread-safe itself

  mutable std::mutex mu_;
  std::condition_variable cv_;        // wakes the coordinator thread (stop, drains)
  ConsumerCore core_;                 // guarded by mu_
  bool started_ = false;              // guarded by mu_
  bool stop_requested_ = false;       // guarded by mu_
  bool stopped_ = false;              // guarded by mu_
  std::string stop_error_;            // guarded by mu_
  std::string last_heartbeat_error_;  // guarded by mu_
  std::map<int32_t, std::shared_ptr<ShardReader>> readers_;  // guarded by mu_: current ones
  std::vector<std::shared_ptr<ShardReader>> retired_;        // guarded by mu_: to be joined
  std::map<const ShardReader*, int32_t> abandoned_;          // guarded by mu_: retired by `abandon`
  std::vector<Drained> drained_;                             // guarded by mu_
  std::map<int32_t, std::string> routing_;                   // guarded by mu_
  std::set<int32_t> reported_taken_;  // guarded by mu_: taken shards whose lease was emitted
  std::set<int32_t> unrouted_;        // guarded by mu_: READING, waiting for their stream key
  TimeMs next_routing_ms_ = 0;        // guarded by mu_
  int routing_failures_ = 0;          // guarded by mu_
  size_t routing_endpoint_ = 0;       // guarded by mu_
  std::optional<client::SendHeartbeat> to_send_;  // guarded by mu_
  std::optional<ObservedVersion> pending_save_;   // guarded by mu_
  ObservedVersion saved_;                         // guarded by mu_

  std::mutex join_mu_;  // serializes joining thread_
  std::thread thread_;
};

ConsumerResult<std::unique_ptr<Consumer>> Consumer::Create(ConsumerOptions options,
                                                           MessageHandler handler) {
  if (!handler) return Invalid("no message handler");
  if (!IsValidStreamName(options.stream)) {
    return Invalid("stream '" + options.stream + "' is not a valid stream prefix (SPEC R2.4)");
  }
  if (!IsValidGroupName(options.group)) {
    return Invalid("group '" + options.group + "' is not a valid group name (SPEC R2.4)");
  }
  if (!options.instance_id.empty() && !IsValidMemberId(options.instance_id)) {
    return Invalid("instance_id must match [A-Za-z0-9._:-]{1,128}");
  }
  if (options.coordinator_endpoints.empty()) return Invalid("no coordinator endpoints");
  std::vector<HttpEndpoint> endpoints;
  for (const std::string& e : options.coordinator_endpoints) {
    std::string error;
    std::optional<HttpEndpoint> ep = client::ParseHttpEndpoint(e, &error);
    if (!ep) return Invalid(error);
    endpoints.push_back(std::move(*ep));
  }
  std::string error;
  std::optional<client::RedisTarget> redis = client::ParseRedisUrl(options.redis_url, &error);
  if (!redis) return Invalid(error);
  if (options.max_batch < 1 || options.max_batch > 10000) {
    return Invalid("max_batch must be in 1..10000");
  }
  if (options.block.count() < 1) return Invalid("block must be >= 1 ms");
  if (options.max_attempts < 1) return Invalid("max_attempts must be >= 1");
  if (options.handler_retry_initial.count() < 1 ||
      options.handler_retry_max < options.handler_retry_initial) {
    return Invalid("handler_retry_initial must be >= 1 ms and at most handler_retry_max");
  }
  if (options.backoff_initial.count() < 1 || options.backoff_max < options.backoff_initial) {
    return Invalid("backoff_initial must be >= 1 ms and at most backoff_max");
  }
  if (options.http_timeout.count() < 1 || options.redis_timeout.count() < 1) {
    return Invalid("http_timeout and redis_timeout must be >= 1 ms");
  }
  if (options.dead_letter_suffix.empty() ||
      options.dead_letter_suffix.find_first_of("{}") != std::string::npos) {
    // Braces in the suffix could change the key's hash tag (cluster slot) or make the
    // dead-letter key equal the shard stream.
    return Invalid("dead_letter_suffix must be non-empty and contain no '{' or '}'");
  }
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, options.group, &seed, &error)) {
    return Invalid("cannot load the observed metadata version: " + error);
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler), std::move(endpoints),
                                     std::move(*redis), std::move(seed), NewUuid());
  return std::unique_ptr<Consumer>(new Consumer(std::move(impl)));
}

Consumer::Consumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Consumer::~Consumer() { Stop(); }
void Consumer::Start() { impl_->Start(); }
void Consumer::Stop() { impl_->Stop(); }
ConsumerStatus Consumer::Status() const { return impl_->Status(); }

}  // namespace rsc
