#pragma once
// rsc::Consumer: reads the shards of a sharded Redis Stream that an rsc-coordinator assigns
// to this process, as one member of consumer group G (SPEC §4, rules C1–C7). Messages are
// delivered at least once, in stream order per shard (so per key, since a key always maps
// to one shard), to a handler the application supplies.
//
// How it works (docs/consumer.md has the details and the reasons):
// * A coordinator thread heartbeats (POST /v1/groups/{P}/{G}/heartbeat) and obeys the
//   sans-IO ConsumerCore (src/client/consumer_core.h), which decides which shards may be
//   read, when the assignment lease ends (C1, C4) and which endpoint to use next (C6).
// * One reader thread per shard being read, each with its own Redis connection. On start
//   it creates the shard's Redis consumer group (named G, XGROUP CREATE ... MKSTREAM), takes
//   over every pending entry of the previous owner (XAUTOCLAIM from 0-0; XPENDING + XCLAIM
//   on Redis < 6.2 — C7), processes them first, then XREADGROUP ... BLOCK with the block
//   capped by the remaining lease. Completed entries are XACKed after each batch.
// * Revoked shard (DRAIN) or Stop(): no new reads, the in-flight batch is finished and
//   XACKed, then the shard is reported REVOKED. Lease end without a successful heartbeat,
//   fencing, unknown member: the shard is abandoned at once (no further handler calls, no
//   XACK; the next owner's takeover redelivers those entries).
//
// Handler contract: it runs on the shard's reader thread, one message at a time per shard
// (different shards run concurrently). It must be bounded; a call is never interrupted. A
// hanging handler stalls its shard: successful heartbeats keep renewing the assignment
// lease, so an unrevoked shard just makes no progress, and a revoked one stays DRAINING
// until the coordinator fences the member for draining past rebalanceTimeoutMs (or, if
// heartbeats fail, until the lease ends). Then every shard of the member is abandoned and
// may be given to another member while the call is still running (its work then overlaps
// the new owner's, which redelivers the entry); when the call returns nothing is XACKed
// and the rest of its batch is not handled. Stop() and the destructor wait for every
// running handler call to return. It must not call Stop() or the destructor (use
// HandlerErrorPolicy::kStop). docs/consumer.md §5 has the details.
//
// Thread safety: all methods may be called from any thread except, for Stop() and the
// destructor, the handler itself.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rsc/producer.h"  // StreamFields
#include "rsc/version_store.h"

namespace rsc {

// One stream entry handed to the handler.
struct Message {
  int32_t shard = 0;
  std::string stream;  // the shard's stream key, from routing (e.g. "{orders:3}")
  std::string id;      // the entry id Redis assigned ("1700000000000-0")
  StreamFields fields;
  int attempt = 1;  // 1-based attempt of this delivery (in-place retries count up)
};

struct HandlerResult {
  bool ok = true;
  std::string error;  // why it failed (recorded in Status and in dead letters)
  static HandlerResult Ok() { return {}; }
  static HandlerResult Fail(std::string why) { return {false, std::move(why)}; }
};

// Called for every message. Throwing counts as returning Fail(what()).
using MessageHandler = std::function<HandlerResult(const Message&)>;

// What happens when the handler fails (returns !ok or throws).
enum class HandlerErrorPolicy {
  // Retry the message in place, with backoff, until it succeeds. The shard makes no
  // progress meanwhile (per-key order is never broken). If the shard is drained or
  // abandoned first, the message stays un-acked and the shard's next owner (or this
  // process on the next start) takes it over and retries it (C7).
  kRetry,
  // Retry in place up to `max_attempts`, then append it to the shard's dead-letter stream
  // and XACK it (atomically, one Lua script), and go on with the next message.
  kDeadLetter,
  // Retry in place up to `max_attempts`, then leave it un-acked and stop the whole
  // consumer cleanly (drain every shard, leave the group). Status() reports the error.
  kStop,
};
std::string_view HandlerErrorPolicyName(HandlerErrorPolicy policy);

enum class ConsumerErrorCode {
  kInvalidArgument,  // fix the options; never retried as-is
};

struct ConsumerError {
  ConsumerErrorCode code = ConsumerErrorCode::kInvalidArgument;
  std::string message;
};

// A value or a ConsumerError.
template <class T>
class [[nodiscard]] ConsumerResult {
 public:
  ConsumerResult(T value) : v_(std::move(value)) {}              // NOLINT: implicit by design
  ConsumerResult(ConsumerError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // Precondition: ok() (value) / !ok() (error); std::bad_variant_access otherwise.
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const ConsumerError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ConsumerError> v_;
};

struct ConsumerOptions {
  // rsc-coordinator endpoints, "host:port" or "http://host:port" (C6: rotated on failure).
  std::vector<std::string> coordinator_endpoints;
  std::string stream;  // stream prefix P
  std::string group;   // consumer group G (also the Redis consumer group on every shard)
  // redis://[user[:password]@]host[:port][/db] of the Redis holding the shard streams.
  std::string redis_url;
  // Static membership (SPEC K5): a restarted process with the same instance id takes its
  // old place without a rebalance. Must be unique among live processes. Empty = dynamic.
  std::string instance_id;
  // The Redis consumer name inside group G. Empty = the member id (a UUID per process).
  // Takeover claims every pending entry whoever holds it, so the name matters only for
  // XINFO / XPENDING output.
  std::string consumer_name;
  // Optional: keeps the highest observed metadata version across restarts (C5).
  std::shared_ptr<VersionStore> version_store;

  int max_batch = 100;  // COUNT of each XREADGROUP / XAUTOCLAIM, 1..10000
  // BLOCK of each XREADGROUP, further capped by the remaining assignment lease. Also bounds
  // how long a drain waits for a read in progress.
  std::chrono::milliseconds block{1000};

  HandlerErrorPolicy on_handler_error = HandlerErrorPolicy::kRetry;
  int max_attempts = 3;  // in-place attempts before kDeadLetter / kStop act, >= 1
  // Backoff between in-place attempts (doubles up to the max).
  std::chrono::milliseconds handler_retry_initial{50};
  std::chrono::milliseconds handler_retry_max{2000};
  // Dead letters of a shard go to <shard stream> + this suffix, e.g. "{orders:3}:dlq". The
  // shard stream keys are "{P:s}", so the dead-letter key carries the same hash tag and
  // lives in the shard's cluster slot (required: it is written with the XACK in one
  // script). Must not contain '{' or '}'.
  std::string dead_letter_suffix = ":dlq";

  std::chrono::milliseconds http_timeout{2000};   // one heartbeat or routing request
  std::chrono::milliseconds redis_timeout{2000};  // connect and each reply (plus BLOCK)
  // Heartbeat retry backoff (C6; doubles with jitter up to the max).
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{2000};
  // Stop() gives up on a clean leave after this long (the coordinator may be down): it then
  // abandons what is left and returns; the member expires after its member lease.
  std::chrono::milliseconds shutdown_timeout{15000};
};

// A snapshot of the consumer (SPEC §11 consumer signals plus delivery counters).
struct ConsumerStatus {
  bool started = false;
  bool stopped = false;  // Stop() finished, or kStop/shutdown completed: no more work
  std::string phase;     // "idle", "joining", "member", "leaving", "left"
  std::string member_id;
  int64_t member_epoch = 0;
  int64_t assignment_epoch = 0;
  int64_t metadata_version = 0;  // observed (C5)
  std::string lineage;
  int64_t lease_remaining_ms = 0;  // 0 without a lease or once it ended
  bool failed_closed = false;      // the lease ended without renewal (C4)
  std::vector<int32_t> reading;    // shards being read
  std::vector<int32_t> draining;
  std::vector<int32_t> revoked;
  int revoking_count = 0;  // draining + revoked
  std::string coordinator_endpoint;
  int consecutive_heartbeat_failures = 0;
  std::string last_heartbeat_error;  // "" after a success
  int64_t heartbeats_sent = 0;
  int64_t lease_expirations = 0;
  int64_t rejoins = 0;

  int64_t messages_handled = 0;  // handler calls that succeeded
  int64_t messages_acked = 0;
  int64_t messages_claimed = 0;  // taken over from previous owners (C7)
  int64_t handler_failures = 0;  // failed attempts
  int64_t dead_lettered = 0;
  std::string last_handler_error;
  std::string last_redis_error;
  // Set when HandlerErrorPolicy::kStop stopped the consumer: the handler's error.
  std::string stop_error;
};

class Consumer {
 public:
  // Validates the options and loads the version store. Starts nothing.
  static ConsumerResult<std::unique_ptr<Consumer>> Create(ConsumerOptions options,
                                                          MessageHandler handler);

  ~Consumer();  // Stop()
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Joins the group and starts the background threads. Idempotent; a consumer cannot be
  // started again after Stop().
  void Start();
  // Clean shutdown (C3, SPEC §4.4): stop new reads, finish and XACK in-flight batches, report
  // every shard REVOKED, leave the group; then join every thread. Waits at most about
  // shutdown_timeout for the leave (plus running handler calls). Idempotent.
  void Stop();
  ConsumerStatus Status() const;

  class Impl;

 private:
  explicit Consumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc
