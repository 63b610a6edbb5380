// The consumer runtime as the library runs it: client::ConsumerRuntime over a Platform
// (platform.h). In production (Consumer::Create, consumer_create.cc) that is the operating
// system's: hiredis (client::ReaderRedis: two connections per Redis node whatever the number
// of shards, one blocking multi-stream XREADGROUP for every live read on one server), the HTTP
// transport, OS threads and the steady clock. The simulator makes this same facade on its
// platform (sim/sim_consumer.cc: fibers, the simulated network and Redis, a jumping clock).
// Threads: the timer thread, the HTTP thread, the reader port's threads (ReaderRedis: one,
// plus two per node) and up to `handler_threads` handler threads — none per shard.
//
// Locks (the platform's SyncPort): `mu_` guards the runtime and every field marked so. Every
// input reaches the runtime under mu_, from whichever thread it arrives on (a Redis reply on a
// Redis thread, a handler result on the handler thread that made the call), so a handler
// thread goes straight on to the next message of its shard without a hand-off. The clock is
// read under mu_, so `now` never decreases between inputs. Nothing blocks under mu_: port
// calls only queue work; what could call back (a cancelled read answered at once), block
// (saving the version) or run user code (on_event) runs after mu_ is released (Flush). Events
// are queued under mu_ and delivered in that order under `emit_mu_` (lock order: emit_mu_
// before mu_). Version saves run one at a time under `save_mu_` (taken before mu_, never while
// waiting).

#include "rsc/consumer.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>

#include "client/client_options.h"
#include "client/client_status.h"
#include "client/consumer_factory.h"
#include "client/consumer_runtime.h"
#include "client/handler_pool.h"
#include "client/platform.h"
#include "core/check.h"
#include "core/protocol.h"

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

using Lock = std::unique_lock<SyncPort::Mutex>;

ConsumerError Invalid(std::string message) {
  return ConsumerError{ConsumerErrorCode::kInvalidArgument, std::move(message)};
}

// One thread that performs HTTP requests in order (heartbeats and routing look-ups: at most
// one of each is outstanding), through the platform (each request bounded by the client's
// HTTP timeout).
class HttpWorker {
 public:
  using Done = std::function<void(uint64_t call, client::HttpOutcome outcome)>;
  HttpWorker(client::Platform& platform, Done done)
      : platform_(platform),
        done_(std::move(done)),
        mu_(platform.Sync().NewMutex()),
        cv_(platform.Sync().NewCondVar()) {}
  ~HttpWorker() { Stop(); }

  void Start() {
    thread_ = platform_.StartThread("rsc-http", [this] { Run(); });
  }
  void Submit(uint64_t call, client::HttpCall request) {
    Lock lock(*mu_);
    queue_.emplace_back(call, std::move(request));
    cv_->NotifyAll();
  }
  void Stop() {
    {
      Lock lock(*mu_);
      stop_ = true;
      cv_->NotifyAll();
    }
    if (thread_) thread_->Join();
    thread_.reset();
  }

 private:
  void Run() {
    Lock lock(*mu_);
    for (;;) {
      while (!stop_ && queue_.empty()) cv_->Wait(*mu_);
      if (stop_) return;
      auto [call, request] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      done_(call, platform_.Request(request));
      lock.lock();
    }
  }

  client::Platform& platform_;
  const Done done_;
  const std::unique_ptr<SyncPort::Mutex> mu_;
  const std::unique_ptr<SyncPort::CondVar> cv_;
  std::deque<std::pair<uint64_t, client::HttpCall>> queue_;  // guarded by mu_
  bool stop_ = false;                                        // guarded by mu_
  std::unique_ptr<client::Platform::Thread> thread_;         // Start() and Stop() only
};

}  // namespace

class Consumer::Impl : public client::ConsumerPorts {
 public:
  Impl(ConsumerOptions options, MessageHandler handler, int endpoint_count, ObservedVersion seed,
       std::unique_ptr<client::Platform> platform)
      : platform_(std::move(platform)),
        options_(std::move(options)),
        handler_(std::move(handler)),
        member_id_(platform_->NewMemberId()),
        mu_(platform_->Sync().NewMutex()),
        cv_(platform_->Sync().NewCondVar()),
        saved_(seed),
        save_mu_(platform_->Sync().NewMutex()),
        emit_mu_(platform_->Sync().NewMutex()),
        redis_(platform_->OpenReaders([this](std::vector<client::ReaderAnswer>& answers) {
          Lock lock(*mu_);
          for (client::ReaderAnswer& a : answers) {
            runtime_->OnRedisReply(a.token, std::move(a.reply));
          }
          Flush(lock);
        })),
        pool_(options_.handler_threads, *platform_),
        http_(*platform_,
              [this](uint64_t call, client::HttpOutcome outcome) {
                Lock lock(*mu_);
                if (runtime_) runtime_->OnHttp(call, std::move(outcome));
                Flush(lock);
              }),
        join_mu_(platform_->Sync().NewMutex()) {
    RSC_CHECK(redis_ != nullptr);  // a platform for consumers opens reader connections
    runtime_ = std::make_unique<client::ConsumerRuntime>(
        client::ConsumerRuntimeOptionsOf(options_, member_id_),
        client::ConsumerCoreOptionsOf(options_, member_id_, endpoint_count, seed,
                                      platform_->NewSeed()),
        this, &stats_);
  }

  ~Impl() override { Stop(); }

  void Start() {
    Lock lock(*mu_);
    if (started_ || stop_requested_) return;
    started_ = true;
    redis_->Start();
    http_.Start();
    thread_ = platform_->StartThread("rsc-timer", [this] { TimerLoop(); });
  }

  void Stop() {
    {
      Lock lock(*mu_);
      stop_requested_ = true;
      if (!started_) stopped_ = true;
      cv_->NotifyAll();
    }
    Lock join_lock(*join_mu_);
    {
      Lock lock(*mu_);
      if (!thread_ || joined_) return;
    }
    thread_->Join();
    // Exited: every reader finished (its last command came back, its last handler call
    // returned), so nothing is waiting on these any more.
    redis_->Stop();
    http_.Stop();
    platform_->CloseRequests();  // the coordinator connections kept alive between requests
    pool_.Stop();
    Lock lock(*mu_);
    joined_ = true;
    stopped_ = true;
  }

  ConsumerStatus Status() const {
    Lock lock(*mu_);
    const client::ReaderRedisStats redis = redis_->Stats();
    // The clock reads are judged with (rounded up), so the lease shown is never longer
    // than the one MayRead grants.
    return client::ConsumerStatusOf(
        options_, *runtime_, stats_, platform_->NowMs(true),
        client::ConsumerPortFacts{
            .started = started_,
            .stopped = stopped_,
            .member_id = member_id_,
            .coordinator_endpoint = platform_->EndpointName(runtime_->endpoint()),
            .threads = 2 + redis.threads + pool_.threads(),  // timer, HTTP, Redis, handlers
            .redis_connections = redis.connections,
        });
  }

  const client::ConsumerRuntime& runtime() const { return *runtime_; }

  // ── client::ConsumerPorts (called under mu_) ──
  TimeMs NowMs(bool round_up) override { return platform_->NowMs(round_up); }

  void Http(uint64_t call, const client::HttpCall& request) override {
    http_.Submit(call, request);
  }

  void Redis(uint64_t reader, const client::ReaderCoreConfig& config,
             const client::ReaderCommand& command) override {
    redis_->Submit(reader, config, command);
  }

  bool PipelinesLiveReads() override { return redis_->SingleServer(); }

  void Handle(uint64_t reader, Message message) override {
    // Decided on a handler thread (the previous message's result came in): that thread makes
    // the call next, at once. Otherwise the call may wait for a thread, and is made only if
    // the shard may still be handled then (not abandoned, its lease not ended, C4).
    const bool waits = !pool_.InWorker();
    pool_.Submit(reader, [this, reader, waits, message = std::move(message)] {
      if (waits) {
        Lock lock(*mu_);
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
      Lock lock(*mu_);
      runtime_->OnHandled(reader, result);
      Flush(lock);
    });
  }

  void ReaderStopping(uint64_t reader, bool abandon, client::AbandonCause cause) override {
    stopping_.emplace_back(reader, abandon);
    platform_->ReaderStopping(*runtime_, reader, abandon, cause);
  }

  void SaveVersion(const ObservedVersion& version) override { pending_save_ = version; }

  void Observe(uint64_t reader, ConsumerEvent event) override {
    event.t_us = platform_->NowUs();
    platform_->ObserveConsumer(*runtime_, reader, event);
    outbox_.push_back(std::move(event));
  }

  void BeforeAnswer(HeartbeatResponse& answer, TimeMs sent_ms) override {
    platform_->BeforeAnswer(answer, sent_ms);
  }

  std::unique_ptr<client::ReaderCore> MakeReader(client::ReaderCoreConfig config,
                                                 client::ReaderContext* context,
                                                 client::DeliveryStats* stats,
                                                 bool has_predecessor) override {
    return platform_->MakeReader(std::move(config), context, stats, has_predecessor);
  }

  void AfterInput() override { platform_->AfterInput(*runtime_); }

 private:
  // After an input (mu_ held): performs what had to wait for mu_ to be released, delivers
  // the queued events, and wakes the timer thread if the runtime now wants it earlier.
  // Returns with `lock` released.
  void Flush(Lock& lock) {
    std::vector<std::pair<uint64_t, bool>> stopping;
    stopping.swap(stopping_);
    const bool save = pending_save_ && !(*pending_save_ == saved_) && options_.version_store;
    const bool wake = runtime_->NextWakeupMs() < timer_wake_at_ || runtime_->exited();
    if (wake) cv_->NotifyAll();
    const bool events = !outbox_.empty();
    lock.unlock();
    for (const auto& [reader, abandon] : stopping) {
      // A call still waiting for a handler thread is not made for an abandoned shard.
      if (abandon && pool_.Withdraw(reader)) {
        Lock relock(*mu_);
        runtime_->OnWithdrawn(reader);
        Flush(relock);
      }
      // An abandoned reader ends now (its blocked read is cut at the socket); a drained one
      // has its read cut short by an unblock.
      redis_->Cancel(reader, abandon);
    }
    if (save) SaveLatest();
    if (events) Emit();
  }

  // C5: saves the newest version the runtime asked to keep, one save at a time, so an
  // older version never lands after a newer one. A thread that finds a save running goes
  // on (Redis and handler threads must not queue behind an fsync): the running one saves
  // whatever is newest when it is done. A failed save is retried after the next input.
  void SaveLatest() {
    Lock saving(*save_mu_, std::try_to_lock);
    if (!saving.owns_lock()) return;
    for (;;) {
      ObservedVersion version;
      {
        Lock lock(*mu_);
        if (!pending_save_ || *pending_save_ == saved_) return;
        version = *pending_save_;
      }
      std::string error;
      if (!options_.version_store->Save(options_.stream, options_.group, version, &error)) return;
      Lock lock(*mu_);
      saved_ = version;
    }
  }

  // Delivers queued events in the order they were queued; the hook runs without mu_.
  // The two buffers swap, so both keep their capacity (no allocation per batch of events).
  void Emit() {
    Lock emit_lock(*emit_mu_);
    {
      Lock lock(*mu_);
      emitting_.swap(outbox_);
    }
    for (const ConsumerEvent& e : emitting_) {
      try {
        options_.on_event(e);
      } catch (...) {  // NOLINT(bugprone-empty-catch): documented as swallowed
      }
    }
    emitting_.clear();
  }

  // The timer thread: starts the runtime, runs its timers, asks it to shut down, and ends
  // once it exited.
  void TimerLoop() {
    Lock lock(*mu_);
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
      if (platform_->NowMs(false) >= runtime_->NextWakeupMs()) {
        runtime_->Tick();
        Flush(lock);
        lock.lock();
        if (runtime_->exited()) break;
      }
      // At least 1 ms: a timer that stays due is not spun on. A wake-up before the timer is
      // due (a poke, a stop, or none: waits may end early) goes round the loop again.
      const TimeMs wake = runtime_->NextWakeupMs();
      timer_wake_at_ = wake;
      const TimeMs wait = std::clamp<TimeMs>(wake - platform_->NowMs(false), 1, 1000);
      if (!(stop_requested_ && !shutdown_asked) && !runtime_->exited()) {
        cv_->WaitFor(*mu_, std::chrono::milliseconds(wait));
      }
      timer_wake_at_ = std::numeric_limits<TimeMs>::max();
    }
    // Left (or gave up) and every reader finished — also after a kStop policy stop that no
    // Stop() asked for: nothing runs any more.
    stopped_ = true;
  }

  // Declared first: everything below uses it, so it goes last.
  const std::unique_ptr<client::Platform> platform_;
  const ConsumerOptions options_;
  const MessageHandler handler_;
  const std::string member_id_;
  client::DeliveryStats stats_;  // thread-safe itself

  const std::unique_ptr<SyncPort::Mutex> mu_;
  const std::unique_ptr<SyncPort::CondVar> cv_;       // wakes the timer thread (stop, earlier
                                                      // timers, exit)
  std::unique_ptr<client::ConsumerRuntime> runtime_;  // guarded by mu_
  bool started_ = false;                              // guarded by mu_
  bool stop_requested_ = false;                       // guarded by mu_
  bool stopped_ = false;                              // guarded by mu_
  bool joined_ = false;                               // guarded by mu_
  TimeMs timer_wake_at_ = 0;                          // guarded by mu_
  std::vector<std::pair<uint64_t, bool>> stopping_;   // guarded by mu_: (reader, abandon)
  std::optional<ObservedVersion> pending_save_;       // guarded by mu_
  ObservedVersion saved_;                             // guarded by mu_
  // Held by the one thread saving (SaveLatest); taken before mu_.
  const std::unique_ptr<SyncPort::Mutex> save_mu_;
  std::vector<ConsumerEvent> outbox_;               // guarded by mu_
  const std::unique_ptr<SyncPort::Mutex> emit_mu_;  // orders event delivery
  std::vector<ConsumerEvent> emitting_;             // guarded by emit_mu_

  const std::unique_ptr<client::ReaderPort> redis_;
  client::HandlerPool pool_;
  HttpWorker http_;

  const std::unique_ptr<SyncPort::Mutex> join_mu_;    // serializes joining thread_
  std::unique_ptr<client::Platform::Thread> thread_;  // set by Start() under mu_
};

namespace client {

ConsumerResult<std::unique_ptr<Consumer>> ConsumerAccess::Create(
    ConsumerOptions options, MessageHandler handler, const ConsumerPlatformFactory& make_platform) {
  CheckedEndpoints checked;
  if (auto error = CheckConsumerOptions(options, static_cast<bool>(handler), &checked)) {
    return Invalid(std::move(*error));
  }
  std::string error;
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, options.group, &seed, &error)) {
    return Invalid("cannot load the observed metadata version: " + error);
  }
  const int endpoint_count = static_cast<int>(checked.coordinators.size());
  std::unique_ptr<Platform> platform = make_platform(options, std::move(checked));
  auto impl = std::make_unique<Consumer::Impl>(std::move(options), std::move(handler),
                                               endpoint_count, seed, std::move(platform));
  return std::unique_ptr<Consumer>(new Consumer(std::move(impl)));
}

const ConsumerRuntime& ConsumerAccess::Runtime(const Consumer& consumer) {
  return consumer.impl_->runtime();
}

}  // namespace client

Consumer::Consumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Consumer::~Consumer() { Stop(); }
void Consumer::Start() { impl_->Start(); }
void Consumer::Stop() { impl_->Stop(); }
ConsumerStatus Consumer::Status() const { return impl_->Status(); }

}  // namespace rsc
