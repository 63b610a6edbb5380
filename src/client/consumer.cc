// The consumer runtime as the library runs it: client::ConsumerRuntime (the one runtime the
// simulator runs too) over production ports — hiredis (client::ReaderRedis: two
// connections per Redis node whatever the number of shards, one blocking multi-stream
// XREADGROUP for every live read on one server), the HTTP transport (one worker thread), a
// bounded pool of handler threads and the steady clock. Threads: the timer thread, the HTTP
// thread, the Redis threads (one, plus two per node) and up to `handler_threads` handler
// threads — none per shard.
//
// Locks: `mu_` guards the runtime and every field marked so. Every input reaches the
// runtime under mu_, from whichever thread it arrives on (a Redis reply on a Redis thread, a
// handler result on the handler thread that made the call), so a handler thread goes
// straight on to the next message of its shard without a hand-off. The clock is read under
// mu_, so `now` never decreases between inputs. Nothing blocks under mu_: port calls only
// queue work; what could call back (a cancelled read answered at once), block (saving the
// version) or run user code (on_event) runs after mu_ is released (Flush). Events are queued
// under mu_ and delivered in that order under `emit_mu_` (lock order: emit_mu_ before mu_).
// Version saves run one at a time under `save_mu_` (taken before mu_, never while waiting).

#include "rsc/consumer.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "client/client_options.h"
#include "client/client_status.h"
#include "client/consumer_core.h"
#include "client/consumer_runtime.h"
#include "client/handler_pool.h"
#include "client/http_transport.h"
#include "client/reader_redis.h"
#include "core/protocol.h"
#include "core/protocol_json.h"
#include "redis/redis_url.h"

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

// One thread that performs HTTP requests in order (heartbeats and routing look-ups: at most
// one of each is outstanding).
class HttpWorker {
 public:
  using Done = std::function<void(uint64_t call, client::HttpOutcome outcome)>;
  // `headers` go with every request (the coordinator token).
  HttpWorker(std::vector<std::unique_ptr<HttpTransport>>* transports,
             std::vector<std::pair<std::string, std::string>> headers, Done done)
      : transports_(transports), headers_(std::move(headers)), done_(std::move(done)) {}
  ~HttpWorker() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Run(); });
    pthread_setname_np(thread_.native_handle(), "rsc-http");
  }
  void Submit(uint64_t call, client::HttpCall request) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back(call, std::move(request));
    }
    cv_.notify_one();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    for (auto& t : *transports_) t->Close();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto [call, request] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      HttpTransport& t = *(*transports_)[static_cast<size_t>(request.endpoint)];
      const HttpReply reply = t.Request(request.method, request.target, request.body, headers_);
      done_(call,
            client::HttpOutcome{reply.status, reply.body, reply.error, t.endpoint().ToString()});
      lock.lock();
    }
  }

  std::vector<std::unique_ptr<HttpTransport>>* const transports_;  // used by this thread only
  const std::vector<std::pair<std::string, std::string>> headers_;
  const Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, client::HttpCall>> queue_;  // guarded by mu_
  bool stop_ = false;                                        // guarded by mu_
  std::thread thread_;
};

}  // namespace

class Consumer::Impl : public client::ConsumerPorts {
 public:
  Impl(ConsumerOptions options, MessageHandler handler, std::vector<HttpEndpoint> endpoints,
       redis::ConnectionOptions redis, ObservedVersion seed, std::string member_id)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        member_id_(std::move(member_id)),
        saved_(seed),
        redis_(std::move(redis),
               [this](uint64_t reader, client::ReaderReply reply) {
                 std::unique_lock<std::mutex> lock(mu_);
                 if (runtime_) runtime_->OnRedisReply(reader, std::move(reply));
                 Flush(lock);
               }),
        pool_(options_.handler_threads),
        http_(&transports_, client::BearerHeaders(options_.coordinator_token),
              [this](uint64_t call, client::HttpOutcome outcome) {
                std::unique_lock<std::mutex> lock(mu_);
                if (runtime_) runtime_->OnHttp(call, std::move(outcome));
                Flush(lock);
              }) {
    for (HttpEndpoint& ep : endpoints) {
      transports_.push_back(std::make_unique<HttpTransport>(std::move(ep), options_.http_timeout));
    }
    redis_.SetBatchDone([this](std::vector<client::ReaderAnswer>& answers) {
      std::unique_lock<std::mutex> lock(mu_);
      for (client::ReaderAnswer& a : answers) runtime_->OnRedisReply(a.token, std::move(a.reply));
      Flush(lock);
    });
    runtime_ = std::make_unique<client::ConsumerRuntime>(
        client::ConsumerRuntimeOptionsOf(options_, member_id_),
        client::ConsumerCoreOptionsOf(options_, member_id_, static_cast<int>(transports_.size()),
                                      seed, std::random_device{}()),
        this, &stats_);
  }

  ~Impl() override { Stop(); }

  void Start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_ || stop_requested_) return;
    started_ = true;
    redis_.Start();
    http_.Start();
    thread_ = std::thread([this] { TimerLoop(); });
    pthread_setname_np(thread_.native_handle(), "rsc-timer");
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_requested_ = true;
      if (!started_) stopped_ = true;
    }
    cv_.notify_all();
    std::lock_guard<std::mutex> join_lock(join_mu_);
    if (!thread_.joinable()) return;
    thread_.join();
    // Exited: every reader finished (its last command came back, its last handler call
    // returned), so nothing is waiting on these any more.
    redis_.Stop();
    http_.Stop();
    pool_.Stop();
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }

  ConsumerStatus Status() const {
    std::lock_guard<std::mutex> lock(mu_);
    const client::ReaderRedisStats redis = redis_.Stats();
    // The clock reads are judged with (rounded up), so the lease shown is never longer
    // than the one MayRead grants.
    return client::ConsumerStatusOf(
        options_, *runtime_, stats_, client::SteadyNowMsCeil(),
        client::ConsumerPortFacts{
            .started = started_,
            .stopped = stopped_,
            .member_id = member_id_,
            .coordinator_endpoint = transports_[runtime_->endpoint()]->endpoint().ToString(),
            .threads = 2 + redis.threads + pool_.threads(),  // timer, HTTP, Redis, handlers
            .redis_connections = redis.connections,
        });
  }

  // ── client::ConsumerPorts (called under mu_) ──
  TimeMs NowMs(bool round_up) override {
    return round_up ? client::SteadyNowMsCeil() : SteadyNowMs();
  }

  void Http(uint64_t call, const client::HttpCall& request) override {
    http_.Submit(call, request);
  }

  void Redis(uint64_t reader, const client::ReaderCoreConfig& config,
             const client::ReaderCommand& command) override {
    redis_.Submit(reader, config, command);
  }

  bool PipelinesLiveReads() override { return redis_.SingleServer(); }

  void Handle(uint64_t reader, Message message) override {
    // Decided on a handler thread (the previous message's result came in): that thread makes
    // the call next, at once. Otherwise the call may wait for a thread, and is made only if
    // the shard may still be handled then (not abandoned, its lease not ended, C4).
    const bool waits = !pool_.InWorker();
    pool_.Submit(reader, [this, reader, waits, message = std::move(message)] {
      if (waits) {
        std::unique_lock<std::mutex> lock(mu_);
        if (!runtime_->MayStartHandler(reader)) {
          runtime_->OnWithdrawn(reader);
          Flush(lock);
          return;
        }
      }
      HandlerResult result;
      try {
        result = handler_(message);
      } catch (const std::exception& e) {
        result = HandlerResult::Fail(std::string("handler threw: ") + e.what());
      } catch (...) {
        result = HandlerResult::Fail("handler threw a non-std exception");
      }
      std::unique_lock<std::mutex> lock(mu_);
      runtime_->OnHandled(reader, result);
      Flush(lock);
    });
  }

  void ReaderStopping(uint64_t reader, bool abandon, client::AbandonCause /*cause*/) override {
    stopping_.emplace_back(reader, abandon);
  }

  void SaveVersion(const ObservedVersion& version) override { pending_save_ = version; }

  void Observe(uint64_t /*reader*/, ConsumerEvent event) override {
    event.t_us = SteadyNowUs();
    outbox_.push_back(std::move(event));
  }

 private:
  // After an input (mu_ held): performs what had to wait for mu_ to be released, delivers
  // the queued events, and wakes the timer thread if the runtime now wants it earlier.
  // Returns with `lock` released.
  void Flush(std::unique_lock<std::mutex>& lock) {
    std::vector<std::pair<uint64_t, bool>> stopping;
    stopping.swap(stopping_);
    const bool save = pending_save_ && !(*pending_save_ == saved_) && options_.version_store;
    const bool wake = runtime_->NextWakeupMs() < timer_wake_at_ || runtime_->exited();
    if (wake) poked_ = true;
    const bool events = !outbox_.empty();
    lock.unlock();
    if (wake) cv_.notify_all();
    for (const auto& [reader, abandon] : stopping) {
      // A call still waiting for a handler thread is not made for an abandoned shard.
      if (abandon && pool_.Withdraw(reader)) {
        std::unique_lock<std::mutex> relock(mu_);
        runtime_->OnWithdrawn(reader);
        Flush(relock);
      }
      // An abandoned reader ends now (its blocked read is cut at the socket); a drained one
      // has its read cut short by an unblock.
      redis_.Cancel(reader, abandon);
    }
    if (save) SaveLatest();
    if (events) Emit();
  }

  // C5: saves the newest version the runtime asked to keep, one save at a time, so an
  // older version never lands after a newer one. A thread that finds a save running goes
  // on (Redis and handler threads must not queue behind an fsync): the running one saves
  // whatever is newest when it is done. A failed save is retried after the next input.
  void SaveLatest() {
    std::unique_lock<std::mutex> saving(save_mu_, std::try_to_lock);
    if (!saving.owns_lock()) return;
    for (;;) {
      ObservedVersion version;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!pending_save_ || *pending_save_ == saved_) return;
        version = *pending_save_;
      }
      std::string error;
      if (!options_.version_store->Save(options_.stream, options_.group, version, &error)) return;
      std::lock_guard<std::mutex> lock(mu_);
      saved_ = version;
    }
  }

  // Delivers queued events in the order they were queued; the hook runs without mu_.
  void Emit() {
    std::lock_guard<std::mutex> emit_lock(emit_mu_);
    std::vector<ConsumerEvent> events;
    {
      std::lock_guard<std::mutex> lock(mu_);
      events.swap(outbox_);
    }
    for (const ConsumerEvent& e : events) {
      try {
        options_.on_event(e);
      } catch (...) {  // NOLINT(bugprone-empty-catch): documented as swallowed
      }
    }
  }

  // The timer thread: starts the runtime, runs its timers, asks it to shut down, and ends
  // once it exited.
  void TimerLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    runtime_->Start();
    Flush(lock);
    lock.lock();
    bool shutdown_asked = false;
    while (!runtime_->exited()) {
      if (stop_requested_ && !shutdown_asked) {
        shutdown_asked = true;
        runtime_->Shutdown();
        Flush(lock);
        lock.lock();
        continue;
      }
      if (SteadyNowMs() >= runtime_->NextWakeupMs()) {
        runtime_->Tick();
        Flush(lock);
        lock.lock();
        if (runtime_->exited()) break;
      }
      // At least 1 ms: a timer that stays due is not spun on.
      const TimeMs wake = runtime_->NextWakeupMs();
      timer_wake_at_ = wake;
      poked_ = false;
      const TimeMs wait = std::clamp<TimeMs>(wake - SteadyNowMs(), 1, 1000);
      cv_.wait_for(lock, std::chrono::milliseconds(wait), [&] {
        return poked_ || (stop_requested_ && !shutdown_asked) || runtime_->exited();
      });
      timer_wake_at_ = std::numeric_limits<TimeMs>::max();
    }
    // Left (or gave up) and every reader finished — also after a kStop policy stop that no
    // Stop() asked for: nothing runs any more.
    stopped_ = true;
  }

  const ConsumerOptions options_;
  const MessageHandler handler_;
  const std::string member_id_;
  client::DeliveryStats stats_;  // thread-safe itself

  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the timer thread (stop, earlier timers, exit)
  std::unique_ptr<client::ConsumerRuntime> runtime_;  // guarded by mu_
  bool started_ = false;                              // guarded by mu_
  bool stop_requested_ = false;                       // guarded by mu_
  bool stopped_ = false;                              // guarded by mu_
  TimeMs timer_wake_at_ = 0;                          // guarded by mu_
  bool poked_ = false;  // guarded by mu_: the runtime wants the timer thread earlier
  std::vector<std::pair<uint64_t, bool>> stopping_;  // guarded by mu_: (reader, abandon)
  std::optional<ObservedVersion> pending_save_;      // guarded by mu_
  ObservedVersion saved_;                            // guarded by mu_
  std::mutex save_mu_;  // held by the one thread saving (SaveLatest); taken before mu_
  std::vector<ConsumerEvent> outbox_;  // guarded by mu_
  std::mutex emit_mu_;                 // orders event delivery

  // Immutable list after construction; used by the HTTP thread only.
  std::vector<std::unique_ptr<HttpTransport>> transports_;
  client::ReaderRedis redis_;
  client::HandlerPool pool_;
  HttpWorker http_;

  std::mutex join_mu_;  // serializes joining thread_
  std::thread thread_;
};

ConsumerResult<std::unique_ptr<Consumer>> Consumer::Create(ConsumerOptions options,
                                                           MessageHandler handler) {
  client::CheckedEndpoints checked;
  if (auto error = client::CheckConsumerOptions(options, static_cast<bool>(handler), &checked)) {
    return Invalid(std::move(*error));
  }
  std::string error;
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, options.group, &seed, &error)) {
    return Invalid("cannot load the observed metadata version: " + error);
  }
  redis::ConnectionOptions redis = redis::ConnectionOptions::FromUrl(checked.redis);
  redis.connect_timeout = options.redis_timeout;
  redis.command_timeout = options.redis_timeout;
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler),
                                     std::move(checked.coordinators), std::move(redis),
                                     std::move(seed), NewUuid());
  return std::unique_ptr<Consumer>(new Consumer(std::move(impl)));
}

Consumer::Consumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Consumer::~Consumer() { Stop(); }
void Consumer::Start() { impl_->Start(); }
void Consumer::Stop() { impl_->Stop(); }
ConsumerStatus Consumer::Status() const { return impl_->Status(); }

}  // namespace rsc
