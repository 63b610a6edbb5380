#pragma once
// rsc::Producer: publishes keyed messages to a sharded Redis Stream managed by an
// rsc-coordinator (SPEC §5). Each message goes to the shard its key hashes to
// ("jump-xxh64", rsc/routing.h) with XADD on that shard's stream key, which the coordinator
// publishes in its routing metadata (R2.5: clients never compute stream keys).
//
// Routing cache and lease (SPEC PR1–PR5): a background thread refreshes the routing every
// `refreshIntervalMs` (and at once when a publish finds it stale). The cache stays usable
// for `routingLeaseMs` counted from the send time of the last successful refresh; when that
// lease ends without a successful refresh (coordinator outage, group deleted), every publish
// fails closed with ProducerErrorCode::kRoutingExpired and a message naming when the lease
// ended and the last refresh error, until a refresh succeeds again.
//
// Coordinator endpoints are tried in order: on a connection failure, an unreadable answer or
// any 5xx the refresh moves on to the next endpoint (at once for COORDINATOR_TERMINATING,
// after a short jittered backoff otherwise; a 4xx such as GROUP_NOT_FOUND ends the round,
// since every coordinator would say the same); a round that fails on every endpoint is retried with
// exponential backoff, never less often than the refresh interval (SPEC C6, PR4).
//
// Reshards (SPEC RS2, D3, docs/protocol.md PR6): XADDs are sent with NOMKSTREAM (Redis ≥
// 6.2), so a missing key is never created. Once a reshard seals the shards a publish was
// routed to, Redis refuses the XADD ("exhausted the last possible ID": nothing written); a
// missing key answers nil (nothing written). The
// producer then refreshes at once and sends the entry again on the new generation, in order
// with the other refused entries of its batch, while the routing lease it was routed under
// lasts; the caller sees no failure (kStaleRouting only if the lease ends first). A publish
// whose reply was lost is never re-sent (kUnknownResult): it could be there twice.
//
// Thread safety: all methods may be called from any thread. Publishes share one Redis
// connection per node (one server, or each master of a Redis Cluster) and are serialized on
// them (use PublishBatch for throughput). Close() (or the
// destructor) stops the background thread; publishes after it fail with kClosed.
//
// Delivery: a successful Publish returns the entry id Redis assigned. kUnknownResult means
// the XADD was sent but no reply arrived: the entry may or may not exist (at-least-once
// producers retry; consumers see a duplicate then).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rsc/version_store.h"

namespace rsc {

// One code per distinct caller reaction.
enum class ProducerErrorCode {
  kInvalidArgument,   // fix the call or the options; never retried as-is
  kNoRouting,         // no routing fetched yet (coordinator unreachable since start, group
                      // missing): retry later
  kRoutingExpired,    // PR5: routing lease ended without a refresh: fail closed, retry later
  kStaleRouting,      // PR2: the cached routing cannot route this key; a refresh is under
                      // way: retry shortly
  kRedisError,        // Redis answered the XADD with an error: not written
  kRedisUnavailable,  // no Redis connection: not written
  kUnknownResult,     // XADD sent, no reply (timeout, connection lost): may be written
  kClosed,            // Close() was called
};
std::string_view ProducerErrorCodeName(ProducerErrorCode code);

struct ProducerError {
  ProducerErrorCode code;
  std::string message;
};

// A value or a ProducerError.
template <class T>
class [[nodiscard]] ProducerResult {
 public:
  ProducerResult(T value) : v_(std::move(value)) {}              // NOLINT: implicit by design
  ProducerResult(ProducerError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // Precondition: ok() (value) / !ok() (error); std::bad_variant_access otherwise.
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const ProducerError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ProducerError> v_;
};

// Field/value pairs of one stream entry, in order. At least one pair.
using StreamFields = std::vector<std::pair<std::string, std::string>>;

struct ProducerMessage {
  std::string key;  // routing key (hashed as bytes)
  StreamFields fields;
};

// One acknowledged XADD, reported to ProducerOptions::on_publish: what an audit needs to
// check that the producer published only under a valid routing lease (PR5) and where the
// message went.
struct PublishEvent {
  std::string key;
  StreamFields fields;
  int32_t shard = 0;
  std::string stream;            // the shard stream key it was appended to
  std::string id;                // the entry id Redis assigned
  int64_t metadata_version = 0;  // of the routing the key was routed with
  // std::chrono::steady_clock in microseconds since its epoch (CLOCK_MONOTONIC on Linux):
  // when the XADD was sent (taken right before the connection writes it; for a pipelined
  // batch, before the shard's batch is written), when its reply arrived, and when the
  // routing lease it was routed under ends.
  int64_t sent_us = 0;
  int64_t acked_us = 0;
  int64_t routing_lease_end_us = 0;
};
// Runs on the publishing thread, inside Publish / PublishBatch, once per acknowledged
// message (in reply order) before the call returns. It must be quick, must not throw
// (exceptions are swallowed) and must not call into the Producer.
using PublishEventHandler = std::function<void(const PublishEvent&)>;

struct ProducerOptions {
  // rsc-coordinator endpoints, "host:port" or "http://host:port"; tried in order.
  // http_timeout bounds each request but not a host name's look-up, which waits as long as
  // the system resolver does: where that may hang, give addresses.
  std::vector<std::string> coordinator_endpoints;
  // Sent as `Authorization: Bearer <token>` on every routing refresh: the coordinator's
  // member token once it enforces the member role (SPEC O4, docs/protocol.md 2.1). Printable
  // ASCII without blanks, at most 1024 characters. Empty: no header.
  std::string coordinator_token;
  std::string stream;  // stream prefix P
  // Empty (recommended): route by the stream, GET /v1/streams/{P}/routing (SPEC D4): the
  // layout's shards, version and routing lease, whatever groups the stream has, and a
  // reshard's new generation as soon as it is ACTIVE. A group name: that group's routing,
  // GET /v1/groups/{P}/{G}/routing (for coordinators older than the stream route; a
  // deleted group then stops the producer at its lease end).
  std::string group;
  // redis://[user[:password]@]host[:port][/db] of the Redis holding the shard streams.
  std::string redis_url;
  // Optional: keeps the highest observed metadata version across restarts (SPEC C5/M8).
  std::shared_ptr<VersionStore> version_store;

  std::chrono::milliseconds http_timeout{2000};   // one routing request
  std::chrono::milliseconds redis_timeout{2000};  // connect and each reply
  // Publishes made before the first routing arrived wait this long for it.
  std::chrono::milliseconds first_routing_wait{5000};
  // Backoff between failed refresh rounds (doubles up to max; also capped by the
  // refresh interval so a lease is not lost to a long backoff).
  std::chrono::milliseconds retry_initial{100};
  std::chrono::milliseconds retry_max{5000};
  // Pause before trying the next endpoint after a connection error, an unreadable answer or
  // a 5xx.
  std::chrono::milliseconds endpoint_backoff{20};

  // Optional observability hook: every acknowledged XADD (see PublishEvent).
  PublishEventHandler on_publish;
};

// SPEC §11 producer signals, plus publish counters.
struct ProducerMetrics {
  std::string stream;  // ProducerOptions::stream and ::group: whose metrics these are
  std::string group;
  bool has_routing = false;
  int64_t metadata_version = 0;  // of the routing cache
  int32_t shard_count = 0;
  int64_t routing_cache_age_ms = 0;  // since the send time of the last successful refresh
  int64_t lease_remaining_ms = 0;    // 0 once expired (publishes fail closed)
  int64_t refresh_failures = 0;
  int64_t consecutive_refresh_failures = 0;
  int64_t refreshes_ok = 0;
  int64_t sync_adoptions = 0;
  int64_t publishes_ok = 0;
  int64_t publishes_failed = 0;
  int64_t publishes_refused_expired = 0;  // PR5 refusals
  // RS2: waits for a newer routing after Redis refused XADDs to a sealed shard (a reshard);
  // the refused entries were sent again, unseen by the caller.
  int64_t seal_refresh_waits = 0;
  std::string last_refresh_error;
  std::string current_endpoint;
};

namespace client {
struct ProducerAccess;
}  // namespace client

class Producer {
 public:
  // Validates the options, loads the version store, and starts the refresh thread. Does
  // not wait for the coordinator or Redis (publishes do, see first_routing_wait).
  static ProducerResult<std::unique_ptr<Producer>> Create(ProducerOptions options);

  ~Producer();  // Close()
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // XADD <shard stream> * field value ... on the shard of `key`. Returns the entry id.
  ProducerResult<std::string> Publish(std::string_view key, const StreamFields& fields);
  // Publishes many messages in one pipeline per Redis node (one round trip on a single
  // server, one per master on a cluster). Results are in the order of `messages`; messages
  // of one key keep their order. All messages are routed with the same routing snapshot at
  // the start of the call.
  std::vector<ProducerResult<std::string>> PublishBatch(
      const std::vector<ProducerMessage>& messages);

  // Waits until a routing is cached (true) or `timeout` passes (false).
  bool WaitForRouting(std::chrono::milliseconds timeout);
  ProducerMetrics Metrics() const;

  // Stops the refresh thread and closes connections. Idempotent. May wait up to
  // http_timeout for a routing request in flight.
  void Close();

  class Impl;

 private:
  friend struct client::ProducerAccess;  // the library's factory (and the simulator's)
  explicit Producer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc
