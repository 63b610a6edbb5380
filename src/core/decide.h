#pragma once
// The coordinator core: pure decisions over the Redis-recorded group state machine.
//
// ── Why it looks like this ────────────────────────────────────────────────────────
// The coordinator is stateless; Redis holds every decision (SPEC §3). Each workflow is
//   lock → load → Decide*(stored, request, env) → CAS write → respond from the written state
// and every function here is the middle step: a pure function of the loaded metadata,
// the loaded liveness deadlines, the request and `env` (the frozen `now` plus a fresh
// random lineage token chosen by the shell). No I/O, no clock, no RNG: the same inputs
// give the same outputs, which is what lets tests and the simulator run it directly.
//
// A response is a *view* of the committed state, never a one-shot command (R3.3): the
// decision computes `next` and derives the response from `next`. If the write fails the
// response is discarded; if the write succeeds and the response is lost, the retried
// request loads `next` and gets the same view again (scenarios 1, 3, 7).
//
// ── The ownership model ──────────────────────────────────────────────────────────
// Every shard has an `owner` (the member allowed to read it) and a `target` (where the
// sticky balanced assignment wants it). For member m:
//   assignedShards = { s : owner=m ∧ target=m }      may read
//   revokeShards   = { s : owner=m ∧ target≠m }      DRAIN: stop reading, report REVOKED
//   pendingShards  = { s : target=m ∧ owner≠m }      wait: someone else still holds it
// A shard passes from owner A to target B only when A reported it REVOKED or A expired —
// also after A was fenced for draining past the rebalance timeout (a client without the
// `shard-lease` feature): a fence releases nothing by itself, because A's DRAIN answers
// renewed its lease for the work it is still finishing (K1, docs/protocol.md deviation 23)
// — or when a shard A kept draining past that timeout was taken from A alone and its
// release time (takenMs + memberLeaseMs: every grant on it ended) passed (C8). Because a
// consumer's assignment lease (from its heartbeat's send time) is shorter than the member
// lease the coordinator records from the heartbeat's arrival, an expired member has
// already stopped reading (K2).
//
// ── A rebalance, as a timeline ───────────────────────────────────────────────────
//   t0  A owns {0,1,2,3}                         target A:{0,1,2,3}
//   t1  B joins            write: target A:{0,1} B:{2,3}, epoch+1; B gets pending {2,3}
//   t2  A heartbeats       response: DRAIN revoke [2,3] (derived from the written state)
//   t3  A finishes in-flight work for 2,3, XACKs, heartbeats revoking [2:REVOKED,3:REVOKED]
//                          write: owner(2)=owner(3)=B
//   t4  B heartbeats       response: OK assigned [2,3] → B starts reading (C2)
// A lost response at t2 or t3 is harmless: the next heartbeat sees the same state.
//
// ── Metadata regression (M1–M10) ─────────────────────────────────────────────────
// Redis can lose recent writes (failover, restore). A client that reports a version above
// the stored one, or a version/lineage pair the stored history does not know (M8), has
// seen state Redis no longer has. The coordinator never trusts the client to rebuild it:
// it records a correction round, answers SYNC_METADATA with the stored truth, records as
// blockers the shards members claim against the stored ownership, and returns OK again
// only when every live member has synced and every blocker has released, expired or been
// fenced (M6). Until then no member starts new reads.

#include <optional>
#include <string>
#include <vector>

#include "core/liveness.h"
#include "core/metadata.h"
#include "core/protocol.h"
#include "core/result.h"

namespace rsc {

struct GroupIndex;  // core/group_index.h

// Frozen inputs a shell supplies per attempt.
struct Env {
  TimeMs now_ms = 0;
  std::string fresh_lineage;  // random nonce for the token of the version this decision commits
  // A fresh random secret, used only when the group has no lineage key yet (create, restore
  // of an older export, the first write of an older record). Empty: the group stays
  // without one (every claimed version is then taken as genuine, as before keys existed).
  std::string fresh_key;
  // Optional, never changes a decision: an index of the stored aggregate the shell decides
  // on (core/group_index.h). Used only when the decision's `stored` is the very object it
  // was built from; everything else (a next state, a rewritten copy) is scanned.
  const GroupIndex* index = nullptr;
};

// Facts a decision reports for logs and metrics (SPEC §11). Never affects the state.
enum class EventKind {
  kMemberJoined,
  kMemberRejoined,        // rejoin of a known member id or tombstone (epoch raised)
  kStaticMemberReplaced,  // instanceId took over an old member's place (no rebalance)
  kMemberLeft,
  kMemberExpired,
  kMemberFenced,
  // A stuck shard was taken from its owner (C8): detail names the release time.
  kShardTaken,
  kVersionRegression,  // client version > stored (M2, M9)
  kLineageDivergence,  // same/windowed version, other lineage token (M8)
  // A client version ahead or diverged whose token this group never issued: answered with
  // the stored truth, but not taken as evidence of lost writes (lineage_token.h).
  kUnprovenVersion,
  kRoundStarted,
  kRoundEnded,
  kBlockerRecorded,
  kStaleRevokeIgnored,
  kShardReleased,
  kShardAssigned,
  kTargetChanged,
  // SPEC §13: the group adopted a layout revision (detail: generations), a sealed shard
  // was found read to its end for this group, or found incomplete again.
  kLayoutAdopted,
  kParentCompleted,
  kParentReopened,
  // Stream ticks (group "" in the key): a sealed shard found without its seal and sealed
  // again (RS2: a failover lost it); a retired generation's keys emptied to tombstones and the
  // generation dropped from the layout (RS5); a retired key kept because it no longer ends
  // with its seal (a failover lost the seal: an operator decides, runbook 7a).
  kParentResealed,
  kGenerationDeleted,
  kRetiredKeyKept,
  // RS6: the layout was found behind its streams (its ACTIVE generation sealed, or entries
  // above its highest id) and written forward from a seal's `rsc-next`; or it could not be,
  // and the stream's routing fails closed until an operator restores it (runbook 7e).
  kLayoutRolledForward,
  kLayoutBehind,
  // A key of the ACTIVE generation of a resharded stream was missing and was created with
  // its groups' consumer groups (readers of such a stream do not create keys, C9 (f)).
  kShardKeyRecreated,
  // Such a key was found missing but the layout read before had moved on when read again
  // (a rollback between the two reads, e.g. a snapshot restore): nothing created; the next
  // pass looks again with the layout Redis now holds.
  kShardKeyRecreateDeferred,
  // A group's adoption of a layout, or its record of completions, was not written: the
  // layout read before the group's load was not the one Redis held when read again after
  // it (a rollback between the two reads). The next pass reads it again.
  kLayoutAdoptionDeferred,
  // A decision's next state broke an invariant: nothing written, the group fails closed
  // (METADATA_UNREADABLE) and the process keeps serving the others. Detail: the invariant.
  kInvariantViolation,
};
std::string_view EventKindName(EventKind k);

struct Event {
  EventKind kind;
  std::string member;
  int32_t shard = -1;
  std::string detail;
};

template <class R>
struct Decision {
  std::optional<GroupMetadata> next;  // nullopt: the aggregate is not written
  LivenessUpdate liveness;            // written atomically with the revision check
  Result<R> response;
  std::vector<Event> events;
};

// The status of an answer built from `m` with these lists (docs/protocol.md 3.3):
// SYNC_METADATA when `sync`, DRAIN with shards to drain, REVOKE_PENDING during a round or
// while a pending shard waits for its owner to release it (not for a child waiting for its
// parents, RS3), OK otherwise.
HeartbeatStatus AnswerStatus(const GroupMetadata& m, const HeartbeatResponse& r, bool sync);

// Heartbeat, join (member_epoch 0) and leave (member_epoch -1): SPEC §4.
Decision<HeartbeatResponse> DecideHeartbeat(const GroupMetadata& stored, const Liveness& live,
                                            const HeartbeatRequest& req, const Env& env);

// The full decision path without the steady-state shortcut; tests compare the two.
Decision<HeartbeatResponse> DecideHeartbeatFullForTest(const GroupMetadata& stored,
                                                       const Liveness& live,
                                                       const HeartbeatRequest& req, const Env& env);

// Periodic maintenance: expiry, rebalance-timeout fencing, blocker expiry, round
// completion. Response is Unit; `next` set only when something changed.
Decision<Unit> DecideTick(const GroupMetadata& stored, const Liveness& live, const Env& env);

// What the coordinator found in Redis about a sealed shard for this group (RS3): complete
// when its Redis consumer group delivered the seal and has nothing pending.
struct ShardCompletion {
  int32_t shard = 0;
  bool complete = false;
};

// A stream-driven pass over one group (SPEC §13, docs/design/resharding.md): adopts
// `layout` at `layout_revision` when the group has not (new generations' shards are added,
// waiting for their parents; retired generations' shards removed; the ACTIVE generation
// becomes the one routing names), records `completions` of shards of sealed generations,
// then applies time and settles like a tick. A layout whose ACTIVE generation is older than
// the group's is not adopted (it is behind the streams, RS6): kLayoutAdopted is not emitted
// and the error names it, nothing is written.
Decision<Unit> DecideLayoutTick(const GroupMetadata& stored, const Liveness& live,
                                const Layout& layout, int64_t layout_revision,
                                const std::vector<ShardCompletion>& completions, const Env& env);

// A group being created or restored takes its stream's layout as it is (RS5: every
// unretired generation, oldest first) — part of that write, so no version of its own. A
// restored group keeps the state of the shards it had, gets the newer generations' shards
// free (waiting for their parents, RS3) and loses the dropped generations'. Fails when the
// layout's ACTIVE generation is older than the group's (RS6).
Status AdoptLayoutInPlace(GroupMetadata& group, const Layout& layout, int64_t layout_revision);

// Producer routing refresh (§5.1). Never writes (I3); `sync` per R5.1.
Decision<RoutingResponse> DecideRouting(const GroupMetadata& stored, int64_t observed_version,
                                        const std::string& observed_lineage, TimeMs now_ms);

// What a create is made over. A group still listed in the index whose metadata key is gone
// (METADATA_MISSING) was lost, and members of that lost incarnation may still read under
// their last assignment leases.
enum class CreateOver { kNothing, kLostKey };
// Admin: create a new group aggregate (validated names, shard count, config). Over a lost
// key the group starts in a correction round, as a restore does: no member gets OK until
// one member lease has passed, so no shard is granted while an old lease may run (M6).
Result<GroupMetadata> DecideCreate(const CreateGroupRequest& req, const Env& env,
                                   CreateOver over = CreateOver::kNothing);
// Admin PATCH: config only, validated. A shard count is refused (SPEC RS1: the stream is
// resharded with POST /v1/streams/{P}/reshard); CheckPatchRequest says so before the caller
// loads anything. Revision checked by caller.
Status CheckPatchRequest(const GroupKey& key, const PatchGroupRequest& req);
Decision<GroupView> DecidePatch(const GroupMetadata& stored, const Liveness& live,
                                const PatchGroupRequest& req, const Env& env);
// Admin fence of one member (§9).
Decision<Unit> DecideFence(const GroupMetadata& stored, const Liveness& live,
                           const MemberId& member, const Env& env);
// Operator restore (L2): the imported aggregate under a fresh lineage whose history
// holds only the new version, so every client that saw anything else resyncs.
Result<GroupMetadata> DecideRestore(const GroupMetadata& imported, const Env& env);

// Read-only group view (§9), with leaseRemainingMs from the full liveness map.
GroupView MakeGroupView(const GroupMetadata& m, StoreRevision revision, const Liveness& live,
                        TimeMs now_ms);

// Shard sets of one member derived from the ownership model above.
struct MemberShards {
  std::vector<int32_t> assigned, pending, revoke;
};
MemberShards ShardsOf(const GroupMetadata& m, const MemberId& id);

// Classification of a client's (version, lineage) against the stored history (M2, M8).
// kAhead / kDiverged: evidence that Redis lost writes (the token proves this group issued
// it, core/lineage_token.h). kUnproven: ahead or diverged, but the token does not verify —
// the client is told the stored truth (SYNC_METADATA, `sync: true`), nothing more.
enum class VersionCheck { kCurrent, kLagging, kAhead, kDiverged, kUnproven };
VersionCheck CheckClientVersion(const GroupMetadata& m, int64_t version, const std::string& lineage,
                                TimeMs now_ms);
// Whether a claim of (version, token) counts as issued by this group (see lineage_key).
bool LineageProven(const GroupMetadata& m, int64_t version, const std::string& lineage,
                   TimeMs now_ms);

}  // namespace rsc
