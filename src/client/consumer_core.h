#pragma once
// ConsumerCore: the consumer side of the heartbeat protocol (SPEC §4.1, C1–C8, M4) as a
// sans-IO state machine (ENGINEERING §1, in the style of quinn-proto and h11).
//
// ── Why it looks like this ────────────────────────────────────────────────────────
// The coordinator can only guarantee "one reader per shard" if every consumer obeys a few
// local rules exactly: read only what the latest successful answer assigned, only inside a
// lease counted from the heartbeat's *send* time, start new shards only on OK, and release
// a revoked shard (REVOKED) only after its in-flight work is finished or abandoned. Those
// rules are easy to state and easy to break in a threaded runtime full of sockets and
// timers, so they live here, in one object with no I/O, no threads, no clock and no global
// RNG. Every method takes `now` (the runtime's *monotonic* clock, in ms) and returns the
// actions the runtime must perform. The same object runs in production and in the
// deterministic simulator, and the tests drive it with a hand-held clock.
//
// The invariant the core enforces (RSC_CHECK after every event, and property-tested):
//   the set of shards the runtime may read == the set of shards in local state READING, and
//   s is READING ⇒ s ∈ assignedShards of the latest successful response ∧ now < lease end
//                  ∧ s was started under an OK (or kept from one while still assigned).
// The runtime learns that set only from actions: `start` adds a shard, `stop` and `abandon`
// remove it. Before every XREADGROUP it should still ask MayRead(s, now) or
// ReadBudgetMs(s, now) (and cap BLOCK by the budget), because time passes between Ticks.
//
// ── Local shard states ───────────────────────────────────────────────────────────
//   absent ──start (OK only, C2)──▶ READING
//   READING ──revoked / no longer assigned──▶ DRAINING   (stop: no new reads,
//                                                          finish in-flight work, XACK)
//   DRAINING ──OnShardDrained──▶ REVOKED                  (reported until unlisted, C3)
//   DRAINING ──lease end / fenced──▶ abandon ──▶ REVOKED (lease end) or absent (fenced)
//   DRAINING ──its own lease end (taken, C8)──▶ abandon ──▶ REVOKED
//   READING ──lease end (C4) / fenced / unknown──▶ abandon ──▶ absent
// An abandoned shard is also STOPPING until the runtime confirms, with OnShardDrained, that
// the abandoned work has really stopped (its last command came back, its last handler call
// returned): meanwhile it is reported DRAINING, whatever its state above, and not started.
//   absent ──listed in revokeShards──▶ REVOKED at once    (docs/protocol.md §4 C3)
//   REVOKED ──a successful response no longer lists it in revokeShards──▶ absent
// DRAINING never goes back to READING, and REVOKED only through absence: an OK that lists
// the shard assigned and no longer in revokeShards first forgets it, then starts it — a
// fresh start with takeover (C7). Failing heartbeats never resume anything (C3). A DRAINING
// shard that the coordinator hands back keeps draining (its in-flight work must settle
// first), becomes REVOKED (a harmless duplicate, I2), and is restarted by the next OK that
// assigns it.
//
// ── The protocol as this client sees it ──────────────────────────────────────────
//   t0   Start(t0)               → SendHeartbeat{epoch 0}                        (join)
//   t0+δ 200 OK epoch 1 assigned [0,1] lease 8000
//                                → start [0,1] (each with takeover, C7)
//                                  lease end := t0 + 8000 (send time, C1)
//   t1   Tick (interval due)     → SendHeartbeat{epoch 1, owned [0,1]}
//   t1+δ 200 DRAIN revoke [1]    → stop [1]                  (1 is DRAINING, reported so)
//   t2   OnShardDrained(1)       → SendHeartbeat{owned [0], revoking [1:REVOKED]} (at once)
//   t2+δ 200 OK assigned [0]     → 1 forgotten (no longer listed)
//   ...  503s / timeouts         → retries with backoff, endpoint rotation (C6); shard 0 is
//                                  read until its lease end, shard 1 never comes back (C3)
//   tL   Tick at lease end       → abandon [0] (fail closed, C4); heartbeats continue
//   tL+δ 200 OK assigned [0]     → start [0] (fresh start with takeover, C2 + C7)
//   tS   Shutdown(tS)            → stop [0]; OnShardDrained(0)
//                                → SendHeartbeat{epoch -1, revoking [0:REVOKED]}   (leave)
//        200 OK epoch -1         → left
//
// ── Decisions (and why) ──────────────────────────────────────────────────────────
// * The request and its send time come out of the same call (the SendHeartbeat action)
//   instead of a separate OnHeartbeatSent: the recorded send time can only be *earlier*
//   than the real one, so the lease can only be shorter — safe — and the runtime cannot
//   forget to report it. Exactly one outcome (response or error) is expected per
//   SendHeartbeat, in order; at most one heartbeat is in flight. The runtime must time a
//   request out itself (report kUnknownResult) and drop any late answer; an outcome with
//   nothing in flight is ignored (losing an answer is always safe).
// * Transport failures (connect refused, reset, timeout after sending) are reported as
//   ErrorCode::kUnknownResult: same reaction as COORDINATOR_TERMINATING (C6).
// * At lease end a DRAINING shard is abandoned too (its in-flight work is stopped without
//   XACK) and becomes REVOKED: after our lease the coordinator may, once our member lease
//   ends, hand the shard to someone else, and work still running then would overlap theirs.
// * UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH and an unexpected `memberEpoch: -1` drop every
//   shard (abandon READING and DRAINING, forget REVOKED) and rejoin with epoch
//   0 at once; repeated failures back off. Whatever the join answer lists in revokeShards
//   is then reported REVOKED at once (docs/protocol.md §3.4).
// * A newly REVOKED shard (drained, or revoked while not read) triggers a heartbeat at once
//   (unless backing off) so its new owner is not kept waiting an interval.
// * Clean shutdown keeps ordinary heartbeats going while shards drain (the member must not
//   expire mid-drain), and sends the leave only once nothing is DRAINING, so no read can
//   follow the first leave. Leave answers other than `memberEpoch: -1` (DRAIN) are handled
//   by reporting the listed shards REVOKED and leaving again.
// * Backoff: C6 errors rotate to the next endpoint and retry at once until every endpoint
//   was tried since the last success, then back off; other retryable errors back off on
//   the same endpoint. Delays double from `backoff_initial_ms` up to `backoff_max_ms`, with
//   "equal jitter" (uniform in [d/2, d]) from a seeded splitmix64, so runs replay exactly.
// * C5: the observed (version, lineage) is raised by any 200 with a version ≥ ours and
//   replaced, even by a lower one, on SYNC_METADATA (M4). Each change is emitted as a
//   `version_changed` action, the hook a VersionStore (include/rsc/) hangs off.
// * C8 (feature "shard-lease", sent on every heartbeat): a shard an answer lists in
//   takenShards was taken from us (we kept it draining past rebalanceTimeoutMs). From the
//   first such answer on, the shard has its own lease: the member lease as it was BEFORE
//   that answer (the last grant on it came from an earlier answer), never renewed again
//   while we hold it, whatever later answers list. At its end the shard is abandoned like
//   at a member lease end (no further handler call, no XACK), the rest of the member goes
//   on. A READING shard listed there is stopped, and a listed shard is never started.
// * `start` carries no stream key: the runtime maps shard → stream from routing
//   (docs/protocol.md C7 — never computed), so this core needs no routing state.
//
// Thread safety: none. The runtime owns one ConsumerCore per group membership and calls it
// from one thread (or under one mutex).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/protocol.h"
#include "core/result.h"
#include "core/types.h"

namespace rsc::client {

// ── Actions ────────────────────────────────────────────────────────────────────
// Send `request` to coordinator endpoint `endpoint` (an index into the configured list) —
// POST .../heartbeat, or .../leave when `leave` — and report the outcome with
// OnHeartbeatResponse or OnHeartbeatError.
struct SendHeartbeat {
  HeartbeatRequest request;
  int endpoint = 0;
  bool leave = false;
  bool operator==(const SendHeartbeat&) const = default;
};

// The observed (metadataVersion, lineage) changed (C5): persist it if a VersionStore is
// configured.
struct ObservedVersionChanged {
  int64_t metadata_version = 0;
  std::string lineage;
  bool operator==(const ObservedVersionChanged&) const = default;
};

// What the runtime must do after one event, performed in field order. A record of lists
// rather than a list of variants: the order between kinds is fixed (a shard is never
// started by the event that abandons it, nor both stopped and abandoned by one event),
// and g++ 12 warns falsely
// (-Wmaybe-uninitialized) on vectors of variants holding strings.
struct ConsumerActions {
  // 1. Stop these at once: no new reads, no further handler calls, no XACK (fail closed at
  //    lease end, fenced, unknown member). Once the command already sent has come back and
  //    the handler call already running has returned, call OnShardDrained(shard): until
  //    then the shard is reported DRAINING, never REVOKED, and is not started again — a
  //    read still in flight (an XREADGROUP blocking at Redis) could otherwise take entries
  //    after the coordinator handed the shard on (found by the simulator, seed 17).
  std::vector<int32_t> abandon;
  // 2. Stop new reads; finish (or abandon) in-flight work, XACK what completed, then call
  //    OnShardDrained(shard) (DRAIN, no longer assigned, shutdown).
  std::vector<int32_t> stop;
  // 3. Start reading (XREADGROUP on the shard's stream, taken from routing). Every start
  //    is a fresh start from local absence, so each one first takes over the previous
  //    owner's pending entries (XAUTOCLAIM from 0-0, or XPENDING + XCLAIM) — C7. There is
  //    no per-start flag on purpose: a flag that is always true invites a runtime to skip
  //    the takeover on some path.
  std::vector<int32_t> start;
  // 4. Persist the observed version (C5).
  std::optional<ObservedVersionChanged> version_changed;
  // 5. Send a heartbeat (at most one is in flight).
  std::optional<SendHeartbeat> send;
  // 6. The leave completed (memberEpoch -1), or the member is gone while shutting down:
  //    the core is finished.
  bool left = false;

  bool empty() const {
    return abandon.empty() && stop.empty() && start.empty() && !version_changed && !send && !left;
  }
};

// ── Configuration, state, metrics ─────────────────────────────────────────────────
struct ConsumerCoreOptions {
  MemberId member_id;       // a UUID the runtime generates once per process (SPEC §4.1)
  std::string instance_id;  // static membership; empty = dynamic member
  int endpoint_count = 1;   // number of configured coordinator endpoints (C6), ≥ 1
  // C5: the version store's last value, if any.
  int64_t initial_metadata_version = 0;
  std::string initial_lineage;
  // Heartbeat interval until the first response tells the group's value.
  int64_t initial_heartbeat_interval_ms = 1000;
  // Bounded exponential backoff with jitter (C6, 503/500).
  int64_t backoff_initial_ms = 100;
  int64_t backoff_max_ms = 2000;
  uint64_t jitter_seed = 0;
};

enum class LocalShardState { kReading, kDraining, kRevoked };
std::string_view LocalShardStateName(LocalShardState s);

enum class ConsumerPhase {
  kIdle,     // before Start
  kJoining,  // memberEpoch 0: join sent or due (also after UNKNOWN/FENCED)
  kMember,   // memberEpoch ≥ 1
  kLeaving,  // Shutdown called: draining, then leaving
  kLeft,     // leave confirmed (or never started)
};
std::string_view ConsumerPhaseName(ConsumerPhase p);

struct ConsumerCounters {
  int64_t heartbeats_sent = 0;
  int64_t responses_ok = 0;                       // 200s of any status
  int64_t responses_by_status[4] = {0, 0, 0, 0};  // indexed by HeartbeatStatus
  int64_t errors = 0;
  int64_t lease_expirations = 0;  // C4 fail-closed events
  int64_t rejoins = 0;            // drops after UNKNOWN/FENCED/-1
  int64_t endpoint_switches = 0;
  int64_t shards_started = 0;
  int64_t shards_drained = 0;
  int64_t shards_abandoned = 0;
  int64_t shards_taken = 0;    // abandoned at their own lease end after a take (C8)
  int64_t stray_outcomes = 0;  // responses/errors/drains the core had no use for
};

// SPEC §11 consumer signals, as of `now`.
struct ConsumerStatus {
  ConsumerPhase phase = ConsumerPhase::kIdle;
  int64_t member_epoch = 0;
  int64_t assignment_epoch = 0;
  int64_t metadata_version = 0;
  std::string lineage;
  int64_t lease_remaining_ms = 0;  // 0 without a lease or after it ended
  bool failed_closed = false;      // the lease ended without renewal (until the next 200)
  std::vector<int32_t> reading, draining, revoked;
  std::vector<int32_t> stopping;  // abandoned; the runtime has not reported the work stopped
  std::vector<int32_t> taken;     // taken from us (C8): held under their own, final lease
  int revoking_count = 0;         // draining + revoked
  int endpoint = 0;
  int consecutive_failures = 0;
  std::optional<ErrorCode> last_error;         // of the latest failed heartbeat
  std::optional<HeartbeatStatus> last_status;  // of the latest 200
  ConsumerCounters counters;
};

class ConsumerCore {
 public:
  explicit ConsumerCore(ConsumerCoreOptions options);

  // ── Events. Each returns the actions to perform, in order. `now` never decreases. ──
  // Joins: the first heartbeat (memberEpoch 0) is due at once.
  ConsumerActions Start(TimeMs now);
  // Timers: lease end (C4) and heartbeat/backoff due. Call at NextWakeupMs() at the latest.
  ConsumerActions Tick(TimeMs now);
  // A 200 answer to the heartbeat in flight.
  ConsumerActions OnHeartbeatResponse(const HeartbeatResponse& resp, TimeMs now);
  // The heartbeat in flight failed: an error body's code, or kUnknownResult for any
  // transport failure (connect, reset, timeout).
  ConsumerActions OnHeartbeatError(ErrorCode code, TimeMs now);
  // All in-flight work of a shard in an earlier `stop` has finished and been XACKed — or,
  // for a shard in an earlier `abandon`, has stopped (nothing of it runs any more).
  ConsumerActions OnShardDrained(int32_t shard, TimeMs now);
  // RS3 (layout-v2): the reader of `shard` XACKed its seal entry, so the shard is read to its
  // end. Reported in completedShards (at once, then on every heartbeat) until an answer no
  // longer lists the shard; ignored for a shard not held.
  ConsumerActions OnShardCompleted(int32_t shard, TimeMs now);
  // Clean shutdown: drain every shard, then leave until memberEpoch -1 (`left`).
  ConsumerActions Shutdown(TimeMs now);

  // ── Queries ──
  // The earliest time Tick may have something to do.
  TimeMs NextWakeupMs() const;
  // Whether the runtime may issue a new read on `shard` at `now` (READING, inside lease).
  bool MayRead(int32_t shard, TimeMs now) const;
  // How long a read issued at `now` may block (0: must not read).
  int64_t ReadBudgetMs(int32_t shard, TimeMs now) const;
  // Whether work already read on `shard` may still be handled and XACKed at `now`: its
  // lease (the member lease, or a taken shard's own, C8) has not ended.
  bool MayProcess(int32_t shard, TimeMs now) const;
  // The lease end that bounds work on `shard`: the member lease, or for a shard taken from
  // us the earlier of that and its own (C8). nullopt without a lease.
  std::optional<TimeMs> LeaseEndOf(int32_t shard) const;
  std::optional<LocalShardState> StateOf(int32_t shard) const;
  std::vector<int32_t> ReadingShards() const;
  ConsumerPhase phase() const { return phase_; }
  int64_t member_epoch() const { return member_epoch_; }
  int64_t metadata_version() const { return observed_version_; }
  const std::string& lineage() const { return observed_lineage_; }
  bool heartbeat_in_flight() const { return in_flight_.has_value(); }
  // When the heartbeat in flight was sent (the `now` of the event that emitted it): the
  // time its answer's lease counts from (C1).
  std::optional<TimeMs> in_flight_sent_ms() const {
    return in_flight_ ? std::optional<TimeMs>(in_flight_->sent_ms) : std::nullopt;
  }
  std::optional<TimeMs> lease_end() const { return lease_end_; }
  int endpoint() const { return endpoint_; }
  // The request the next heartbeat would carry (for tests and debugging).
  HeartbeatRequest PeekRequest() const { return BuildRequest(); }
  ConsumerStatus Status(TimeMs now) const;

 private:
  struct InFlight {
    TimeMs sent_ms = 0;
    bool leave = false;
  };

  // Shared prologue/epilogue of every event.
  void Begin(TimeMs now, ConsumerActions& out);
  void Finish(TimeMs now, ConsumerActions& out);

  void FailClosedIfLeaseEnded(TimeMs now, ConsumerActions& out);
  void AbandonTakenShards(TimeMs now, ConsumerActions& out);
  void NoteTakenShards(const HeartbeatResponse& resp, std::optional<TimeMs> lease_before);
  void MaybeSendHeartbeat(TimeMs now, ConsumerActions& out);
  HeartbeatRequest BuildRequest() const;
  void ApplyShards(const HeartbeatResponse& resp, bool may_start, ConsumerActions& out);
  void ApplyVersion(const HeartbeatResponse& resp, ConsumerActions& out);
  void DropAll(ConsumerActions& out);
  void MarkRevoked(int32_t shard);
  void ScheduleRetry(ErrorCode code, TimeMs now);
  int64_t BackoffMs(int attempt);
  uint64_t NextRandom();
  bool AssignedInLast(int32_t shard) const;
  bool HasDraining() const;
  void CheckInvariants(TimeMs now) const;

  const ConsumerCoreOptions options_;
  ConsumerPhase phase_ = ConsumerPhase::kIdle;
  int64_t member_epoch_ = 0;
  int64_t assignment_epoch_ = 0;
  int64_t observed_version_ = 0;
  std::string observed_lineage_;

  std::map<int32_t, LocalShardState> shards_;
  // Abandoned shards whose work the runtime has not yet reported stopped (see `abandon`).
  // Reported DRAINING and never started while listed; kept across DropAll.
  std::set<int32_t> stopping_;
  // Sealed shards read to their end, reported in completedShards (RS3).
  std::set<int32_t> completed_;
  std::vector<int32_t> last_assigned_;  // sorted; of the latest successful response
  std::optional<TimeMs> lease_end_;     // send time of that response + assignmentLeaseMs
  // C8: shards taken from us → their own lease end (fixed at the first takenShards answer).
  // Kept until the shard is gone locally (forgotten and its work stopped).
  std::map<int32_t, TimeMs> taken_lease_;
  bool failed_closed_ = false;

  std::optional<InFlight> in_flight_;
  TimeMs next_heartbeat_ms_ = 0;
  int64_t heartbeat_interval_ms_;
  bool report_now_ = false;  // a shard became REVOKED: report it without waiting
  bool leave_started_ = false;

  int endpoint_ = 0;
  int consecutive_failures_ = 0;
  std::optional<ErrorCode> last_error_;
  std::optional<HeartbeatStatus> last_status_;
  uint64_t rng_state_;
  TimeMs last_now_ = 0;
  ConsumerCounters counters_;
};

}  // namespace rsc::client
