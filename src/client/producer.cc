// The producer as the library runs it: client::ProducerRuntime (refresh rounds over the
// endpoints, routing, what an XADD's reply means) and client::PublishCall (one PublishBatch's
// attempts) driven by a refresh thread and the publishing threads, over a Platform
// (platform.h): in production the operating system's (a thread, the HTTP transport, the
// connection layer's executor: one pipeline per Redis node — one server, or each slot's master
// on a Redis Cluster, detected on the first publish; MOVED/ASK/TRYAGAIN followed per entry,
// which is safe since a redirected XADD did not run), in the simulator a simulated one (fibers,
// the simulated network, Redis and clock). This whole file runs in both.
//
// Locks (the platform's SyncPort): `redis_mu_` serializes use of the Redis connections; `mu_`
// guards the runtime and the refresh state. Order: redis_mu_ before mu_. The refresh thread
// takes only mu_ and never holds it during I/O; publishes hold mu_ only to route.

#include "rsc/producer.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "client/client_options.h"
#include "client/client_status.h"
#include "client/platform.h"
#include "client/producer_factory.h"
#include "client/producer_runtime.h"
#include "client/publish_call.h"
#include "core/protocol.h"
#include "core/sync.h"

namespace rsc {

namespace {

using client::RouteTarget;
using redis::CommandKind;
using redis::Reply;

ProducerError Err(ProducerErrorCode code, std::string message) {
  return ProducerError{code, std::move(message)};
}

}  // namespace

class Producer::Impl : public client::ProducerPorts {
 public:
  using Lock = std::unique_lock<SyncPort::Mutex>;

  Impl(ProducerOptions options, int endpoint_count, std::unique_ptr<client::Platform> platform)
      : options_(std::move(options)),
        platform_(std::move(platform)),
        mu_(platform_->Sync().NewMutex()),
        cv_(platform_->Sync().NewCondVar()),
        redis_mu_(platform_->Sync().NewMutex()),
        runtime_(client::ProducerRuntimeOptionsOf(options_, endpoint_count, /*first_endpoint=*/0),
                 this) {}

  ~Impl() override { Close(); }

  void SeedObserved(const ObservedVersion& v) {
    Lock lock(*mu_);
    runtime_.SeedObserved(v);
  }

  void Start() {
    thread_ = platform_->StartThread("rsc-refresh", [this] { RefreshLoop(); });
  }

  void Close() {
    {
      Lock lock(*mu_);
      if (closed_) return;
      closed_ = true;
    }
    cv_->NotifyAll();
    if (thread_) thread_->Join();
    Lock lock(*redis_mu_);
    redis_.reset();
  }

  // ── client::ProducerPorts (called under mu_) ──
  TimeMs NowMs(bool round_up) override { return platform_->NowMs(round_up); }
  // Performed by the refresh thread once mu_ is released (RefreshLoop).
  void Http(uint64_t call, const client::HttpCall& request) override {
    pending_http_.emplace(call, request);
  }
  double Random() override { return platform_->Random(); }
  void SaveVersion(const ObservedVersion& version) override { pending_save_ = version; }
  void ObserveRouting(const RoutingResponse& answer, TimeMs sent_ms) override {
    platform_->ObserveRouting(answer, sent_ms);
  }
  void BeforeRouting(RoutingResponse& answer) override { platform_->BeforeRouting(answer); }

  bool WaitForRouting(std::chrono::milliseconds timeout) {
    Lock lock(*mu_);
    WaitUntil(lock, platform_->NowMs(false) + timeout.count(),
              [&] { return closed_ || runtime_.has_routing(); });
    return runtime_.has_routing();
  }

  // Routes all keys at one instant. Waits for the first routing if there is none yet.
  // Requires redis_mu_ held by the caller (so the lease is checked right before sending).
  std::vector<ProducerResult<RouteTarget>> RouteAll(const std::vector<std::string_view>& keys) {
    Lock lock(*mu_);
    if (!runtime_.has_routing() && !closed_) {
      WaitUntil(lock, platform_->NowMs(false) + options_.first_routing_wait.count(),
                [&] { return closed_ || runtime_.has_routing(); });
    }
    if (closed_) {
      return std::vector<ProducerResult<RouteTarget>>(
          keys.size(), Err(ProducerErrorCode::kClosed, "producer is closed"));
    }
    std::vector<ProducerResult<RouteTarget>> out = runtime_.Route(keys);
    const bool wake = std::any_of(out.begin(), out.end(), [](const auto& r) {
      return !r.ok() && r.error().code == ProducerErrorCode::kStaleRouting;
    });
    lock.unlock();
    if (wake) cv_->NotifyAll();  // PR2: the refresh thread re-evaluates at once
    return out;
  }

  // Drives a PublishCall (client/publish_call.h: every decision of the call is there): routes
  // under mu_, writes over the executor with the routing-lease check right before each
  // pipeline, and waits for a newer routing on cv_.
  std::vector<ProducerResult<std::string>> PublishBatch(
      const std::vector<std::string_view>& keys, const std::vector<const StreamFields*>& fields) {
    if (keys.empty()) return {};
    auto closed = [&] {
      return std::vector<ProducerResult<std::string>>(
          keys.size(), Err(ProducerErrorCode::kClosed, "producer is closed"));
    };
    if (IsClosed()) return closed();
    Lock redis_lock(*redis_mu_);
    // Again with redis_mu_ held: Close() resets the executor under it, so a publish that
    // raced Close() and lost must not open a new one (nothing would ever close it).
    if (IsClosed()) return closed();
    client::PublishCall call(keys, fields);
    while (!call.done()) {
      if (call.waiting()) {
        WaitForNewRouting(call);
        continue;
      }
      // Opened before routing; the connections come up before the routing lease is checked
      // again right before each pipeline is written (before_write below).
      const Status opened = OpenRedis();
      bool nomkstream = nomkstream_.load();
      std::vector<redis::KeyedCommand> cmds =
          call.Write(RouteAll(call.RouteKeys()), opened, nomkstream);
      if (cmds.empty()) continue;
      // Per node one pipeline, commands in input order: entries of one key (one shard, one
      // slot) keep their order. On a cluster each goes to its slot's master (SPEC CL1).
      const TimeMs lease_end_ms = call.write_lease_end_ms();
      bool lease_ended = false;
      const int64_t sent_us = platform_->NowUs();
      std::vector<Result<Reply>> replies = redis_->RunBatch(cmds, CommandKind::kWrite, [&] {
        lease_ended = lease_ended || platform_->NowMs(true) >= lease_end_ms;
        return !lease_ended;
      });
      const client::PublishCall::Outcome outcome =
          call.OnReplies(std::move(replies), lease_ended, &nomkstream);
      if (!nomkstream) nomkstream_.store(false);
      if (!options_.on_publish) continue;
      for (size_t i : outcome.written) {
        const RouteTarget& route = call.route(i);
        ReportPublished(PublishEvent{std::string(keys[i]), *fields[i], route.shard, route.stream,
                                     call.result(i).value(), route.metadata_version, sent_us,
                                     platform_->NowUs(), route.lease_end_ms * 1000});
      }
    }
    std::vector<ProducerResult<std::string>> results = call.TakeResults();
    return Count(results);
  }

  // Entries refused by a stale target wait for a routing newer than the one they were
  // refused under: a refresh is asked for again every kSealRetryMs (PR2 spacing applies).
  void WaitForNewRouting(client::PublishCall& call) {
    Lock lock(*mu_);
    for (;;) {
      if (closed_) return call.GiveUp();
      const auto& routing = runtime_.core().routing();
      const client::PublishCall::Wait w =
          call.OnWait(platform_->NowMs(false),
                      routing ? std::optional<int64_t>(routing->metadata_version) : std::nullopt);
      if (w.what != client::PublishCall::Wait::What::kRefresh) return;
      runtime_.OnStaleTarget();
      seal_retries_.fetch_add(1);
      cv_->NotifyAll();  // the refresh thread re-evaluates at once
      cv_->WaitFor(*mu_, std::chrono::milliseconds(w.sleep_ms));
    }
  }

  std::vector<ProducerResult<std::string>> Count(
      std::vector<ProducerResult<std::string>>& results) {
    for (const auto& r : results) (r.ok() ? publishes_ok_ : publishes_failed_).fetch_add(1);
    return std::move(results);
  }

  // Opens the executor on first use (auto-detecting a cluster); a failure is retried on the
  // next publish, so a producer starts while Redis is down. Requires redis_mu_.
  Status OpenRedis() {
    if (redis_) return OkStatus();
    auto opened = platform_->OpenRedis();
    if (!opened.ok()) return opened.error();
    redis_ = std::move(opened).value();
    return OkStatus();
  }

  void ReportPublished(const PublishEvent& event) const {
    try {
      options_.on_publish(event);
    } catch (...) {  // NOLINT(bugprone-empty-catch): documented as swallowed
    }
  }

  ProducerMetrics Metrics() const {
    Lock lock(*mu_);
    // The clock Publish decides with (rounded up): a refused publish never sits next to a
    // metric that still shows lease left (seen as 1 ms remaining on a loaded machine).
    return client::ProducerMetricsOf(
        options_, runtime_, platform_->NowMs(true),
        client::ProducerPortFacts{
            .publishes_ok = publishes_ok_.load(),
            .publishes_failed = publishes_failed_.load(),
            .seal_refresh_waits = seal_retries_.load(),
            .current_endpoint = platform_->EndpointName(runtime_.current_endpoint()),
        });
  }

 private:
  // Waits on cv_ until `ready` or the local clock reaches `deadline_ms`.
  template <class Ready>
  void WaitUntil(Lock& lock, TimeMs deadline_ms, Ready ready) {
    (void)lock;  // held: cv_ releases and retakes it
    for (TimeMs now = platform_->NowMs(false); !ready() && now < deadline_ms;
         now = platform_->NowMs(false)) {
      cv_->WaitFor(*mu_, std::chrono::milliseconds(deadline_ms - now));
    }
  }

  // The refresh thread: runs the runtime's timers and performs its HTTP requests and version
  // saves outside mu_.
  void RefreshLoop() {
    Lock lock(*mu_);
    while (!closed_) {
      runtime_.Tick();
      if (pending_http_) {
        const auto [call, request] = std::move(*pending_http_);
        pending_http_.reset();
        lock.unlock();
        client::HttpOutcome outcome = platform_->Request(request);
        lock.lock();
        runtime_.OnHttp(call, std::move(outcome));
        cv_->NotifyAll();  // publishers waiting for the first routing
        SaveVersion(lock);
        continue;
      }
      const std::optional<TimeMs> wake = runtime_.NextWakeupMs();
      const TimeMs wait =
          wake ? std::clamp<TimeMs>(*wake - platform_->NowMs(false), 1, 1000) : 1000;
      cv_->WaitFor(*mu_, std::chrono::milliseconds(wait));
    }
  }

  // C5 (outside mu_): a failed save is retried after the next refresh; the in-memory value
  // still rules.
  void SaveVersion(Lock& lock) {
    if (!pending_save_ || !options_.version_store) return;
    const ObservedVersion v = *pending_save_;
    lock.unlock();
    std::string error;
    const bool saved = options_.version_store->Save(
        options_.stream, client::ProducerVersionStoreGroup(options_), v, &error);
    lock.lock();
    if (saved && pending_save_ == v) pending_save_.reset();
  }

  bool IsClosed() {
    Lock lock(*mu_);
    return closed_;
  }

  const ProducerOptions options_;
  const std::unique_ptr<client::Platform> platform_;

  const std::unique_ptr<SyncPort::Mutex> mu_;
  const std::unique_ptr<SyncPort::CondVar> cv_;  // routing changes, close, PR2 wake-ups (mu_)
  const std::unique_ptr<SyncPort::Mutex> redis_mu_;
  client::ProducerRuntime runtime_;                                    // guarded by mu_
  bool closed_ = false;                                                // guarded by mu_
  std::optional<std::pair<uint64_t, client::HttpCall>> pending_http_;  // guarded by mu_
  std::optional<ObservedVersion> pending_save_;                        // guarded by mu_

  std::unique_ptr<redis::Executor> redis_;  // guarded by redis_mu_; opened on first publish
  std::unique_ptr<client::Platform::Thread> thread_;

  std::atomic<int64_t> publishes_ok_{0};
  std::atomic<int64_t> publishes_failed_{0};
  std::atomic<int64_t> seal_retries_{0};
  std::atomic<bool> nomkstream_{true};  // false once the server turned NOMKSTREAM down
};

namespace client {

ProducerResult<std::unique_ptr<Producer>> ProducerAccess::Create(
    ProducerOptions options, const ProducerPlatformFactory& make_platform) {
  auto invalid = [](std::string m) { return Err(ProducerErrorCode::kInvalidArgument, m); };
  CheckedEndpoints checked;
  if (auto error = CheckProducerOptions(options, &checked)) return invalid(*error);
  std::string error;
  ObservedVersion seed;
  if (options.version_store &&
      !options.version_store->Load(options.stream, ProducerVersionStoreGroup(options), &seed,
                                   &error)) {
    return invalid("cannot load the observed metadata version: " + error);
  }
  const int endpoint_count = static_cast<int>(checked.coordinators.size());
  std::unique_ptr<Platform> platform = make_platform(options, std::move(checked));
  auto impl =
      std::make_unique<Producer::Impl>(std::move(options), endpoint_count, std::move(platform));
  impl->SeedObserved(seed);
  impl->Start();
  return std::unique_ptr<Producer>(new Producer(std::move(impl)));
}

}  // namespace client

Producer::Producer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Producer::~Producer() { Close(); }
void Producer::Close() { impl_->Close(); }

ProducerResult<std::string> Producer::Publish(std::string_view key, const StreamFields& fields) {
  return impl_->PublishBatch({key}, {&fields}).front();
}

std::vector<ProducerResult<std::string>> Producer::PublishBatch(
    const std::vector<ProducerMessage>& messages) {
  std::vector<std::string_view> keys;
  std::vector<const StreamFields*> fields;
  keys.reserve(messages.size());
  fields.reserve(messages.size());
  for (const ProducerMessage& m : messages) {
    keys.push_back(m.key);
    fields.push_back(&m.fields);
  }
  return impl_->PublishBatch(keys, fields);
}

bool Producer::WaitForRouting(std::chrono::milliseconds timeout) {
  return impl_->WaitForRouting(timeout);
}

ProducerMetrics Producer::Metrics() const { return impl_->Metrics(); }

}  // namespace rsc
