#pragma once
// rsc::Consumer: reads the shards of a sharded Redis Stream that an rsc-coordinator assigns
// to this process, as one member of consumer group G (SPEC §4, rules C1–C9). Messages are
// delivered at least once, in stream order per shard (so per key, since a key always maps
// to one shard), to a handler the application supplies.
//
// How it works (docs/consumer.md has the details and the reasons):
// * One runtime (src/client/consumer_runtime.h, the one the simulator runs) obeys the sans-IO
//   ConsumerCore (src/client/consumer_core.h), which decides which shards may be read, when
//   the assignment lease ends (C1, C4) and which endpoint to use next (C6); it heartbeats
//   (POST /v1/groups/{P}/{G}/heartbeat) and drives one sans-IO reader per shard.
// * A reader, on start, creates the shard's Redis consumer group (named G, XGROUP CREATE ...
//   MKSTREAM; without MKSTREAM once the stream was resharded: the coordinator creates those
//   keys, protocol C9 (f)), takes over every pending entry of the previous owner (XAUTOCLAIM from
//   0-0; XPENDING + XCLAIM on Redis < 6.2 — C7), processes them first, then reads new entries with
//   the block capped by the remaining lease. Completed entries are XACKed after each batch.
//   Resources do not grow with the number of shards: a timer thread, an HTTP thread, a Redis
//   routing thread, two Redis threads with one connection each per Redis node (one server, or each
//   master of a Redis Cluster; on one server a single blocking XREADGROUP names every shard waiting
//   for new entries), and up to handler_threads handler threads. Each is named (rsc-timer,
//   rsc-http, rsc-redis-route, rsc-redis-cmd, rsc-redis-live, rsc-handler: docs/consumer.md §2).
// * Reshards (SPEC §13, C9): a shard of a sealed generation ends with a seal entry. It is
//   never handed to the handler; it is XACKed, the shard is reported complete and the
//   coordinator then assigns its children, so per-key order holds across a reshard.
// * Revoked shard (DRAIN) or Stop(): no new reads, the in-flight batch is finished and
//   XACKed, then the shard is reported REVOKED. Lease end without a successful heartbeat,
//   fencing, unknown member: the shard is abandoned at once (no further handler calls, no
//   XACK; the next owner's takeover redelivers those entries).
//
// Handler contract: it runs on a handler thread, one message at a time per shard, in order
// (different shards run concurrently, up to handler_threads). It must be bounded; a call is
// never interrupted. A hanging handler stalls its shard: successful heartbeats keep renewing
// the assignment lease, so an unrevoked shard just makes no progress. A revoked one stays
// DRAINING until rebalanceTimeoutMs; then the coordinator takes that shard alone from the
// member (C8): it is abandoned when its own, final lease ends, and may be given to another
// member while the call is still running (its work then overlaps the new owner's, which
// redelivers the entry); when the call returns nothing is XACKed and the rest of its batch
// is not handled. The member keeps its other shards. Stop() and the destructor wait for
// every running handler call to return. It must not call Stop() or the destructor (use
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

// ── Observability hook (docs/consumer.md §7) ──
// What the runtime reports to ConsumerOptions::on_event. Meant for tests, tracing and
// audits that must see the runtime's own view of ownership: when a shard may be read,
// what was read and handed to the handler, what was acknowledged, when the work on a
// shard was over, and what the coordinator answered.
enum class ConsumerEventKind {
  // The shard may be read from now on: emitted by its reader BEFORE its first Redis
  // read (the takeover XAUTOCLAIM), once the previous reader of the shard in this process
  // has finished. assignment_epoch, lease_end_us: the lease it is read under.
  kAcquire,
  // A shard's lease end changed: per shard being read, after each successful heartbeat
  // that renewed it (a shard being abandoned gets none); once with detail "taken" when the
  // shard is taken from this member (C8). shard, stream, lease_end_us, assignment_epoch.
  kLease,
  // A read was issued on the shard: detail = "XAUTOCLAIM", "XPENDING", "XCLAIM" or
  // "XREADGROUP". Emitted just before the command is sent.
  kRead,
  // The handler is being called: shard, stream, id, fields, attempt. Emitted just before
  // each call (so once per attempt).
  kDeliver,
  // The entry `id` is acknowledged: its XACK was confirmed by Redis (detail "xack"), or it
  // was dead-lettered and XACKed by one script (detail "dead_letter").
  kAck,
  // The shard's reader is finished: its last Redis read returned and its last handler call
  // returned; nothing more is read or handled on the shard by this reader. detail:
  // "drained" (a drain completed: in-flight work finished and XACKed), "abandoned" (the
  // lease ended), "fenced" (fenced, unknown member, or dropped by the coordinator),
  // "shutdown" (Stop() gave up waiting for a confirmed leave). An abandon is asynchronous:
  // this event comes when the reader actually ends (a running handler call returned),
  // possibly well after the shard stopped being listed in Status().reading.
  kRelease,
  // A heartbeat (or leave) exchange ended: status = the answer's status ("OK", "DRAIN",
  // "REVOKE_PENDING", "SYNC_METADATA") or the error code name ("UNKNOWN_RESULT" for a
  // transport failure, "FENCED_MEMBER_EPOCH", ...); member_epoch, assignment_epoch,
  // metadata_version, lineage of the answer; sent_us = when the request was sent (the time
  // its lease counts from); detail = the error message.
  kHeartbeat,
};
std::string_view ConsumerEventKindName(ConsumerEventKind kind);

struct ConsumerEvent {
  ConsumerEventKind kind = ConsumerEventKind::kRead;
  // std::chrono::steady_clock in microseconds since its epoch (CLOCK_MONOTONIC on Linux,
  // so stamps of different processes on one machine are comparable).
  int64_t t_us = 0;
  // All kinds but kHeartbeat. For kLease with detail "taken" (docs/protocol.md C8) the
  // shard's own, final lease: later renewals do not extend it.
  int32_t shard = -1;
  std::string stream;   // the shard's stream key
  std::string id;       // kDeliver, kAck: the entry id
  StreamFields fields;  // kDeliver
  int attempt = 0;      // kDeliver: 1-based attempt, as in Message::attempt
  int64_t assignment_epoch = -1;
  int64_t lease_end_us = -1;  // steady_clock µs, like t_us
  int64_t member_epoch = -1;
  int64_t metadata_version = -1;
  std::string lineage;
  int64_t sent_us = -1;
  std::string status;
  std::string detail;
  // kHeartbeat answers: the answer's assignedShards and assignmentLeaseMs (the grant as the
  // coordinator made it, before the library derives its lease from it).
  std::vector<int32_t> assigned_shards;
  int64_t granted_lease_ms = -1;
};

// Runs on library threads, one call at a time, in the order the runtime produced the events
// (t_us increases). It must be quick, must not throw (exceptions are swallowed), and must not
// call Stop() (it may deadlock); Status() is safe.
using ConsumerEventHandler = std::function<void(const ConsumerEvent&)>;

struct ConsumerOptions {
  // rsc-coordinator endpoints, "host:port" or "http://host:port" (C6: rotated on failure).
  // http_timeout bounds each request but not a host name's look-up, which waits as long as
  // the system resolver does (heartbeats wait with it): where that may hang, give addresses.
  std::vector<std::string> coordinator_endpoints;
  // Sent as `Authorization: Bearer <token>` on every heartbeat, leave and routing look-up:
  // the coordinator's member token once it enforces the member role (SPEC O4,
  // docs/protocol.md 2.1). Printable ASCII without blanks, at most 1024 characters. Empty: no
  // header.
  std::string coordinator_token;
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
  // BLOCK of each XREADGROUP, further capped by the remaining assignment lease. A drain does
  // not wait it out: the read in progress is cut short (CLIENT UNBLOCK).
  std::chrono::milliseconds block{1000};

  // Handlers of different shards run concurrently on a pool of at most this many threads,
  // started on demand (messages of one shard are always handled one at a time, in order).
  // A handler that never returns keeps its thread: size the pool above the number of calls
  // that may hang at once. A call that waits for a thread when its shard is abandoned is
  // withdrawn (the message stays pending for the next owner; its kDeliver event was already
  // reported).
  int handler_threads = 16;

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

  // Optional observability hook (see ConsumerEvent): every runtime event, in the order the
  // runtime produced it. Empty = nothing is built or reported.
  ConsumerEventHandler on_event;
};

// A snapshot of the consumer (SPEC §11 consumer signals plus delivery counters).
struct ConsumerStatus {
  std::string stream;  // ConsumerOptions::stream and ::group: whose status this is
  std::string group;
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
  // Shards taken from this member because it kept them draining past rebalanceTimeoutMs
  // (a stuck handler, docs/protocol.md C8): read under their own, final lease, abandoned
  // at its end while the member keeps the rest.
  std::vector<int32_t> taken;
  int64_t shards_taken = 0;  // how many were abandoned at that lease end so far
  std::string coordinator_endpoint;
  int consecutive_heartbeat_failures = 0;
  std::string last_heartbeat_error;  // "" after a success
  int64_t heartbeats_sent = 0;
  int64_t lease_expirations = 0;
  int64_t rejoins = 0;

  int64_t messages_handled = 0;  // handler calls that succeeded
  int64_t messages_acked = 0;
  int64_t messages_claimed = 0;  // taken over from previous owners (C7)
  // Times a reader found entries that a previous owner's late read took after the takeover
  // (pending for another consumer name) and claimed them back before going on.
  int64_t late_read_reclaims = 0;
  int64_t handler_failures = 0;  // failed attempts
  int64_t dead_lettered = 0;
  std::string last_handler_error;
  std::string last_redis_error;
  // Set when HandlerErrorPolicy::kStop stopped the consumer: the handler's error.
  std::string stop_error;

  // Resources, whatever the number of shards: the library's threads (timer, HTTP, Redis
  // routing, two per Redis node read from, the handler threads started so far) and open
  // Redis connections (two per node: one server, or each master of a cluster; on a cluster
  // the routing thread's slot-map connection comes on top and is not counted).
  int threads = 0;
  int redis_connections = 0;
};

namespace client {
struct ConsumerAccess;
}  // namespace client

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
  friend struct client::ConsumerAccess;  // the library's factory (and the simulator's)
  explicit Consumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc
