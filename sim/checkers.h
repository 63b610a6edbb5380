#pragma once
// Invariant checkers over a History (sim/history.h): the same code judges the
// deterministic simulator (fed after every simulated step) and the JSONL logs of real
// processes (tests/e2e, tests/chaos). SPEC §10 / issue 4: S1–S9, L1–L2.
//
// Usage: construct with the run's parameters, Add() every event in time order (events
// with equal t_us in the order they happened), call Finish() once the run has settled.
// Add() reports a violation as soon as it is detectable, so the simulator can stop at the
// step that broke the rule and print the trace that led there. Checking goes on after a
// violation (each Add() returns at most one; an overlap or a skipped key is reported once).
// Cost: O(log n) per event (O(shards) for lease and L1 bookkeeping); memory grows with
// acked-but-undelivered messages, distinct decisions and processes, not with all events.
//
// ── What the checkers assume of a history (the logging contract) ──
// "Add order" is the order of happening; t_us is the stamp each event carries (a publish
// carries the time its XADD was SENT, so t_us need not be monotonic: "now" is the largest
// t_us seen). proc = the process an event is about (kCrash names the victim, whoever logs
// it); a proc is live from its first event until its kCrash/kStop. kStart.detail = the
// instance id (static membership), "" if none.
//
// Holding: proc P holds shard s from kAcquire(P,s) until kRelease(P,s) (shard -1 = every
// shard it holds), kCrash(P) or kStop(P). Each holding window has a lease end: the
// kAcquire's lease_end_us, else P's member-wide lease (the last kLease with shard -1);
// kLease(P,s) sets that window's lease end, kLease(P,-1) sets the member-wide lease and
// every window P holds — except a window pinned by a kLease(P,s) with detail "taken" (a
// shard taken from P has its own, final lease, C8). A lease end < 0 is unknown and treated
// as unbounded. A window is
// ACTIVE at t iff held and t < its lease end. A consumer that fails closed at lease end
// and resumes a shard only on a new grant must log kRelease ("abandoned"): a held window
// that merely expired becomes active again when a kLease extends it.
//
// Rollback taint: kFault "failover", "snapshot_restore" or "rollback" at tr taints every
// live proc (unless taint_on_rollback_fault is off; then a kTaint(P) at tr taints P alone and
// marks only P's holdings — the simulator's narrow form); a kHeartbeat of P with sent_us > tr
// (latest such fault) and a status decided from stored state (OK, REVOKE_PENDING, DRAIN,
// SYNC_METADATA, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, or empty) untaints P. Transient errors
// (REDIS_UNAVAILABLE, …) do not: the process has not learnt the truth yet. The same fault also
// marks the current and last holdings of every shard whose lease had not ended at tr (what Redis
// lost may include that holder's grant, report or expiry, also for a process already dead), and
// so does a holding that a tainted P acquires later (it started under a grant from before the
// rollback: a runtime that waits for routing starts its reader late); a lease renewal of that
// window while its process is untainted clears the mark (K4: an answer decided after the loss
// that still lets it keep the shard means the coordinator knows).
//
// S1 no split ownership. An overlap begins when a window of P becomes active while
//    another proc Q has an active window on the same shard: at kAcquire(P,s,t), at a
//    kLease that makes an expired window of P active again, or (defensively) at a kRead.
//    It is a violation unless P or Q is tainted at that moment, or P's or Q's window is
//    still marked by a rollback (see above) (then overlaps_excused).
//    Each overlapping pair is judged once until one of them stops holding. Also S1: a
//    kRead(P,s,t) by a P that does not hold s, or with t ≥ the window's lease end ("read
//    outside lease"). Also S1 (C4, with check_deliveries_in_lease): a kDeliver(P,s,t) by a
//    P that does not hold s, or with t ≥ the window's lease end ("handled outside lease").
//    Also S1 (C1, when answers carry grant_ms): a kAcquire or kLease whose lease end lies
//    beyond the latest grant of that process (an answered kHeartbeat's sent_us +
//    grant_ms) — a lease the process computed but no coordinator gave.
// S2 handoff justified. At kAcquire(P,s,t), for every other proc Q that holds or last held
//    s (before the acquire), one of: Q released s with detail "drained", "revoked" or
//    "fenced"; Q released s (any detail) and a heartbeat of Q sent after that release was
//    answered from stored state before t (it carried the REVOKED report of a shard Q no
//    longer reads, C3); Q's lease end for s ≤ t (expired, abandoned, crashed or stopped
//    after it);
//    a kFault "fence" for Q's member at or after Q acquired s; Q crashed/stopped and P
//    has Q's non-empty instance id (static membership takeover), or another process
//    started with Q's instance id at or after Q acquired s (the successor took Q's place
//    and may hand the shard on without reading it). A Q still active is S1's
//    business, not S2's. Unjustified while P or Q is tainted (or Q's holding was marked
//    by a rollback): handoffs_excused. Each acquire that follows another proc counts as
//    one handoff.
// S3 (check_delivery, at Finish) every kPublish (key, seq) has a kDeliver with the same
//    (key, seq), unless each of its stream entries (shard, id) got a kLost:
//    lost_by_rollback counts those (only acked publishes not delivered before the loss). An
//    entry a rollback-excused zombie's last read took into its pending list is no excuse:
//    the shard's owner reclaims it (the late-read check, C7), so it must be delivered too.
// S4 per-key order. The first kDeliver of (key, seq) requires every lower seq of that key
//    that was publish-acked earlier in Add order, and not lost, to be delivered already
//    (Jepsen's poll-skip). Later deliveries of a (key, seq) are redeliveries, never S4.
//    Not judged on a shard while an S1 overlap a rollback excused is in progress there, nor
//    for a delivery made under a holding a rollback marked (a grant Redis may have lost, not
//    renewed since): such a zombie may read a child shard after the rollback reopened its
//    parent, which the coordinators then seal again behind new entries — RS3 cannot hold for
//    a grant they no longer know (found by the simulator, seed 8364602991614660239). Either
//    way a skip not reported counts in skips_excused.
// S5 every kPublish has t_us < lease_end_us (lease_end_us < 0 = unknown lease: also S5),
//    and, once the producer logged kRouting answers, t_us < the latest end of a routing
//    grant (sent_us + grant_ms of a kRouting): the producer's own lease sum is not trusted.
// S6 (check_coordinator) a kDecision with status OK/REVOKE_PENDING/DRAIN/SYNC_METADATA
//    must derive from a committed revision: a kCommit with the same revision, version
//    and lineage was added before it (revision 1 with no kCommit is the create). Commits
//    are known by (revision, version, lineage), never by revision alone, because a
//    rollback lets the same revision be committed again with other content; nothing is
//    forgotten at a rollback (a decision may be sent after the rollback of the write it
//    answered from). And two such decisions with the same (member, req_digest) decided on
//    the same commit (revision, version, lineage) must have the same resp_digest (R3.3).
//    Error statuses (any other status, e.g. REDIS_UNAVAILABLE) are skipped.
// S7 (check_coordinator) stored_version / lineage of a kDecision = the committed state the
//    response was built from, after the decision's own write if it made one (M10). If
//    req_version > stored_version, or req_version == stored_version and req_lineage ≠
//    lineage (both non-empty), a non-error answer must be SYNC_METADATA with version ==
//    stored_version (syncs_after_rollback). Always on (client side, M8): per proc, once a
//    kHeartbeat answered (v, L), a later non-error, non-SYNC_METADATA answer with version v
//    must carry L; a SYNC_METADATA answer resets what the proc knows (it adopts the truth).
// S8 (check_coordinator) between kFault "key_delete" and kFault "restore" (or "create"):
//    no kCommit and no kDecision with a non-error status (never rebuilt from clients).
// S9 kMutexEnter/kMutexExit per proc (a crash or stop exits): a second proc entering while
//    another is inside counts mutex_double_entries — never a violation by itself (the CAS
//    is what serializes; SPEC §8 S2).
// S10 (check_coordinator) K5: a kDecision heartbeat answer (OK/REVOKE_PENDING/DRAIN/
//    SYNC_METADATA) to a request with req_epoch ≥ 1 below the epoch the answer carries.
// S11 (check_coordinator, when the decision lists them) K4: every shard the request claims
//    (claimed) is in the answer's assigned or revoked list (unless the answer's memberEpoch
//    is -1, "you left": the member drops everything).
// S12 (check_coordinator, when recorded) M5: in a decision whose state has a round
//    (in_round 1), every claimed shard the member does not own there (owned) is among its
//    blockers there (blocked), unless that state does not have the shard at all (absent: a
//    retired generation's, or one a rollback of the layout lost — a blocker holds back a
//    shard's grant, and there is none). (The simulator leaves in_round unknown for an
//    unproven request: its claims are no evidence and block nothing.)
// S13 (check_coordinator, when recorded) M6: a kCommit that ends a correction round
//    (round_age_ms ≥ 0) comes at least member_lease_us − clock_skew_us after the round
//    began: a client that held shards under a lost grant and has not been heard from has by
//    then either been heard or lost its lease (K2).
// L1 (shards > 0 and convergence_bound_us > 0) after kFault "heal" at th there must be an
//    instant ≤ th + convergence_bound_us (checked after every event) at which every shard
//    0..shards-1 is held by exactly one proc, with an active window. An event with
//    t_us > the deadline before that is a violation, and so is a pending check at Finish()
//    (a run must last the bound after its last heal). A kFault after a heal re-arms the
//    check from that fault (counted in l1_rearms): convergence is never dropped silently.
// L2 after kFault "coordinators_down" at td (until "coordinators_up"): a kRead with t ≥ td
//    + max_assignment_lease_us, a kLease or kAcquire granting a lease end > td +
//    max_assignment_lease_us, or a kPublish with t_us ≥ td + max_routing_lease_us is a
//    violation (each part only when its bound is > 0).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/history.h"

namespace rsc::sim {

struct CheckerConfig {
  int32_t shards = 0;  // shard count of the group (L1: every shard must be held)
  // Upper bounds of the leases granted in the run (µs): L2 (consumers stop reading within
  // max_assignment_lease_us of the last coordinator going down, producers stop publishing
  // within max_routing_lease_us).
  int64_t max_assignment_lease_us = 0;
  int64_t max_routing_lease_us = 0;
  // Upper bound of any member lease in the run (µs): used by L2 and by how long a crashed
  // or partitioned holder may be assumed to still read. Not read by the checkers yet: every
  // holding window carries its own lease end (kAcquire / kLease).
  int64_t member_lease_us = 0;
  // L1: after the last fault healed (a kFault with detail "heal"), the group must converge
  // (every shard held by exactly one live consumer, inside its lease) within this.
  int64_t convergence_bound_us = 0;
  // A rollback fault (failover, snapshot_restore, rollback) taints every live process and
  // marks every holding (what real-process runs can say). The simulator knows whose view
  // went back and emits kTaint per process instead: it sets this to false.
  bool taint_on_rollback_fault = true;
  // How far apart the coordinators' wall clocks may be (S13 compares times two of them wrote).
  int64_t clock_skew_us = 0;
  // Which families to check. Logs of real processes lack coordinator-side events, so
  // S6/S7/S8 are off there.
  bool check_coordinator = true;
  // S3 needs the end state: every acked publish must have been delivered by Finish().
  bool check_delivery = true;
  // S1 for kDeliver: no handler call outside the holding window's lease (C4). Needs the
  // lease check and the event's stamp to be one instant, as in the simulator; a real
  // process stamps its event a moment after the check, so its logs leave it off.
  bool check_deliveries_in_lease = false;
};

struct Violation {
  std::string invariant;  // "S1", …, "L2"
  std::string message;    // human-readable, names processes, shard, times
  int64_t t_us = 0;
  size_t event_index = 0;  // index into the events given to Add()
};

// Counts the checkers keep (reported in docs/testing.md and by the `sim` CLI).
struct CheckerCounters {
  int64_t events = 0;
  int64_t intervals = 0;             // closed holding intervals (acquire … release/crash)
  int64_t handoffs = 0;              // a shard acquired after another member held it
  int64_t publishes = 0;             // acked publishes
  int64_t delivered_unique = 0;      // distinct (key, seq) delivered
  int64_t redeliveries = 0;          // deliveries of an already delivered (key, seq)
  int64_t lost_by_rollback = 0;      // acked publishes destroyed by an injected rollback (S3)
  int64_t overlaps_excused = 0;      // S1 overlaps involving a holder tainted by a rollback
  int64_t skips_excused = 0;         // S4 skips under an excused overlap or a lost grant
  int64_t mutex_double_entries = 0;  // S9: two coordinators inside the mutex at once
  int64_t refused_publishes = 0;
  int64_t syncs_after_rollback = 0;  // S7: rollbacks answered with SYNC_METADATA
  int64_t handoffs_excused = 0;      // S2: unjustified handoffs a rollback explains
  int64_t l1_rearms = 0;             // faults after a heal that restarted L1's clock
};

class Checker {
 public:
  explicit Checker(CheckerConfig config);
  ~Checker();
  Checker(Checker&&) noexcept;
  Checker& operator=(Checker&&) noexcept;

  std::optional<Violation> Add(const HistEvent& e);
  std::vector<Violation> Finish();
  const CheckerCounters& counters() const;
  // Items the checker holds (processes, holding records, pending deliveries, delivered
  // intervals, commits, retried answers): bounded by what is in flight, not by the run.
  size_t TrackedItems() const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// Convenience: runs a whole history in the given order (merge JSONL files first with a
// stable sort by t_us), Finish() included.
struct CheckReport {
  std::vector<Violation> violations;
  CheckerCounters counters;
};
CheckReport CheckHistory(const History& events, const CheckerConfig& config);

}  // namespace rsc::sim
