#pragma once
// ProducerRuntime: the producer's runtime as one single-threaded, sans-IO object (issue 10),
// driven by producer.cc (a refresh thread, HTTP requests and a Redis executor of its
// platform, client/platform.h: the operating system's, or the simulator's). It drives the
// ProducerCore (routing cache, lease, PR1–PR5) and decides what sits between the core and the
// wire:
// * a refresh round: GET .../routing?observedVersion=..&lineage=.. on the endpoint that last
//   answered, then on each other endpoint at most once (C6) after a pause of
//   endpoint_backoff/2 + U·endpoint_backoff (none after a 503 COORDINATOR_TERMINATING); a
//   4xx ends the round at once (every coordinator would say the same); the round's failure,
//   with every endpoint's error, goes to the core, and the next round starts on the next
//   endpoint;
// * routing keys for a publish at one instant (the clock rounded up, so the XADD is sent
//   inside the routing lease, PR5), with PR2's refresh asked for by a stale route;
// * what an XADD's reply means for the caller (written, refused, or unknown).
//
// Inputs: Tick (timers), OnHttp; Route is called by publishers. Not thread-safe: the driver
// serialises every call (producer.cc holds one mutex around them).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/producer_core.h"
#include "client/runtime_ports.h"
#include "rsc/producer.h"
#include "rsc/version_store.h"

namespace rsc::client {

class ProducerPorts {
 public:
  virtual ~ProducerPorts() = default;
  // Local monotonic milliseconds; `round_up` for lease decisions (see ConsumerPorts).
  virtual TimeMs NowMs(bool round_up) = 0;
  // Sends a request; its outcome comes back through OnHttp(call, …), bounded by the port's
  // timeout. Never calls back synchronously.
  virtual void Http(uint64_t call, const HttpCall& request) = 0;
  // A uniform random number in [0, 1) (pauses and retry jitter).
  virtual double Random() = 0;
  // C5: the observed version changed; persist it.
  virtual void SaveVersion(const ObservedVersion& /*version*/) {}
  // A routing answer as the coordinator made it (before the test seam below), with the
  // time its request was sent.
  virtual void ObserveRouting(const RoutingResponse& /*answer*/, TimeMs /*sent_ms*/) {}
  // Test seam: the simulator's mutants may alter an answer before the core sees it.
  virtual void BeforeRouting(RoutingResponse& /*answer*/) {}
};

struct ProducerRuntimeOptions {
  std::string stream;  // P
  std::string group;   // G; empty: the stream's routing (GET /v1/streams/{P}/routing, D4)
  int endpoint_count = 1;
  int first_endpoint = 0;
  TimeMs endpoint_backoff_ms = 100;
  ProducerCoreOptions core;
};

// One XADD's reply as the Redis port saw it (XADD key NOMKSTREAM * …).
struct XaddReply {
  // kNil: the key does not exist (NOMKSTREAM): nothing written.
  enum class Kind { kId, kError, kNoReply, kUnexpected, kNil };
  Kind kind = Kind::kId;
  std::string text;  // the id, the error text, the transport error, or the reply type
};

class ProducerRuntime {
 public:
  ProducerRuntime(ProducerRuntimeOptions options, ProducerPorts* ports);

  void SeedObserved(const ObservedVersion& version);
  // Starts a refresh round when the core wants one, or goes on with a round's next
  // endpoint once its pause ended.
  void Tick();
  void OnHttp(uint64_t call, HttpOutcome outcome);
  // When Tick must run next (nullopt: only after an input — an answer is awaited).
  std::optional<TimeMs> NextWakeupMs() const;

  // Routes `keys` at one instant. A kStaleRouting result asks for a refresh (PR2): the
  // driver should Tick at once.
  std::vector<ProducerResult<RouteTarget>> Route(const std::vector<std::string_view>& keys);
  // What an XADD's reply to `stream` means for its caller. A stale target is kStaleRouting.
  static ProducerResult<std::string> PublishOutcome(const XaddReply& reply,
                                                    const std::string& stream);
  // RS2, D3: the XADD wrote nothing because its target is stale: the shard is sealed (its
  // stream ends with the last possible ID: a reshard moved producers to a new generation)
  // or its key does not exist (nil under NOMKSTREAM: a retired shard, or a rollback that
  // lost a newer generation). The message may be sent again on a newer routing: the driver
  // calls OnStaleTarget and retries, transparently to its caller, while the routing lease
  // it was routed under lasts.
  static bool IsStaleTarget(const XaddReply& reply);
  // PR2 after a stale target: a refresh at once (no closer than min_refresh_spacing_ms to
  // the previous one; call it again while the routing has not moved on).
  void OnStaleTarget();

  const ProducerCore& core() const { return core_; }
  bool has_routing() const { return core_.has_routing(); }
  int current_endpoint() const { return current_; }
  int64_t refused_expired() const { return refused_expired_; }

 private:
  struct Round {
    ObservedVersion observed;
    int attempt = 0;
    int endpoint = 0;
    std::vector<std::string> errors;
    std::optional<uint64_t> call;  // the request in flight
    TimeMs sent_at = 0;
    std::optional<TimeMs> resume_at;  // the pause before the next endpoint ends then
  };

  void Send();
  // Ends the round: a failure for the core, the next round on the next endpoint.
  void Fail(std::string error);
  void AfterRound();

  const ProducerRuntimeOptions options_;
  ProducerPorts* const ports_;
  const std::string base_path_;
  ProducerCore core_;
  std::optional<Round> round_;
  uint64_t next_call_ = 1;
  int current_ = 0;
  int64_t refused_expired_ = 0;
  ObservedVersion saved_;
};

}  // namespace rsc::client
