#include "core/decide.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/assignment.h"
#include "core/check.h"
#include "core/group_index.h"
#include "core/lineage_token.h"

namespace rsc {

std::string_view EventKindName(EventKind k) {
  switch (k) {
    case EventKind::kMemberJoined:
      return "member_joined";
    case EventKind::kMemberRejoined:
      return "member_rejoined";
    case EventKind::kStaticMemberReplaced:
      return "static_member_replaced";
    case EventKind::kMemberLeft:
      return "member_left";
    case EventKind::kMemberExpired:
      return "member_expired";
    case EventKind::kMemberFenced:
      return "member_fenced";
    case EventKind::kShardTaken:
      return "shard_taken";
    case EventKind::kVersionRegression:
      return "version_regression";
    case EventKind::kLineageDivergence:
      return "lineage_divergence";
    case EventKind::kUnprovenVersion:
      return "unproven_version";
    case EventKind::kRoundStarted:
      return "round_started";
    case EventKind::kRoundEnded:
      return "round_ended";
    case EventKind::kBlockerRecorded:
      return "blocker_recorded";
    case EventKind::kStaleRevokeIgnored:
      return "stale_revoke_ignored";
    case EventKind::kShardReleased:
      return "shard_released";
    case EventKind::kShardAssigned:
      return "shard_assigned";
    case EventKind::kTargetChanged:
      return "target_changed";
    case EventKind::kLayoutAdopted:
      return "layout_adopted";
    case EventKind::kParentCompleted:
      return "parent_completed";
    case EventKind::kParentReopened:
      return "parent_reopened";
    case EventKind::kParentResealed:
      return "parent_resealed";
    case EventKind::kGenerationDeleted:
      return "generation_deleted";
    case EventKind::kRetiredKeyKept:
      return "retired_key_kept";
    case EventKind::kLayoutRolledForward:
      return "layout_rolled_forward";
    case EventKind::kLayoutBehind:
      return "layout_behind";
    case EventKind::kShardKeyRecreated:
      return "shard_key_recreated";
    case EventKind::kShardKeyRecreateDeferred:
      return "shard_key_recreate_deferred";
    case EventKind::kLayoutAdoptionDeferred:
      return "layout_adoption_deferred";
    case EventKind::kInvariantViolation:
      return "invariant_violation";
  }
  return "unknown";
}

bool LineageProven(const GroupMetadata& m, int64_t version, const std::string& lineage,
                   TimeMs now_ms) {
  if (m.lineage_key.empty()) return true;  // a record from before keys: as before
  // Young key: a client may still hold a token the group issued under an earlier key (the
  // group was lost and created again, or got its key after the client's last answer). Its
  // lease from that time ends within one member lease of the key's first write.
  if (now_ms < m.lineage_key_since_ms + m.config.member_lease_ms) return true;
  return VerifyLineageToken(m.lineage_key, m.key, version, lineage);
}

VersionCheck CheckClientVersion(const GroupMetadata& m, int64_t version, const std::string& lineage,
                                TimeMs now_ms) {
  auto evidence = [&](VersionCheck vc) {
    return LineageProven(m, version, lineage, now_ms) ? vc : VersionCheck::kUnproven;
  };
  if (version > m.version.value()) return evidence(VersionCheck::kAhead);
  if (version == 0 && lineage.empty()) return VersionCheck::kLagging;  // fresh process
  const auto& h = m.lineage_history;
  if (!h.empty() && version >= h.front().version.value()) {
    const auto& e = h[static_cast<size_t>(version - h.front().version.value())];
    if (e.token != lineage) return evidence(VersionCheck::kDiverged);
    return version == m.version.value() ? VersionCheck::kCurrent : VersionCheck::kLagging;
  }
  return VersionCheck::kLagging;  // older than the window: ordinary lag (M8)
}

MemberShards ShardsOf(const GroupMetadata& m, const MemberId& id) {
  MemberShards out;
  const std::string& me = id.str();
  for (const ShardState& sh : m.shards) {
    const int32_t s = sh.id;
    if (sh.owner == me && sh.target == me) {
      out.assigned.push_back(s);
    } else if (sh.owner == me) {
      out.revoke.push_back(s);
    } else if (sh.target == me) {
      out.pending.push_back(s);
    }
  }
  return out;
}

namespace {

// Mutable working copy plus the bookkeeping every decision shares.
struct Work {
  GroupMetadata next;
  LivenessUpdate liveness;
  std::vector<Event> events;
  TimeMs now = 0;
  bool round_started = false;

  void Emit(EventKind k, const std::string& member, int32_t shard = -1, std::string d = {}) {
    events.push_back(Event{k, member, shard, std::move(d)});
  }
};

bool Declares(const HeartbeatRequest& req, const char* feature) {
  return std::find(req.features.begin(), req.features.end(), feature) != req.features.end();
}
bool DeclaresShardLease(const HeartbeatRequest& req) { return Declares(req, kFeatureShardLease); }

bool IsBlocked(const GroupMetadata& m, int32_t shard) {
  if (!m.round) return false;
  for (const Blocker& b : m.round->blockers) {
    if (b.shard.value() == shard) return true;
  }
  return false;
}

enum class Gone { kExpired, kFenced, kLeft };

void AddTombstone(GroupMetadata& m, const Member& member, Gone how, TimeMs now) {
  std::erase_if(m.tombstones, [&](const Tombstone& t) { return t.id == member.id; });
  m.tombstones.push_back(
      Tombstone{member.id, member.epoch, how == Gone::kFenced, how == Gone::kLeft, now});
  while (m.tombstones.size() > kTombstoneLimit) m.tombstones.erase(m.tombstones.begin());
}

// Removes a member entirely: its ownership is released (callers guarantee that is safe:
// it reported REVOKED, expired, or owns nothing), its blockers and round sync dropped.
void RemoveMember(Work& w, const MemberId& id, Gone how) {
  GroupMetadata& m = w.next;
  const Member* mem = m.FindMember(id);
  if (!mem) return;
  AddTombstone(m, *mem, how, w.now);
  for (ShardState& sh : m.shards) {
    const int32_t s = sh.id;
    if (sh.owner == id.str()) {
      sh.owner.clear();
      sh.taken_ms = 0;
      sh.release_at_ms = 0;
      w.Emit(EventKind::kShardReleased, id.str(), s, "member removed");
    }
    if (sh.target == id.str()) sh.target.clear();
  }
  if (m.round) {
    std::erase_if(m.round->blockers,
                  [&](const Blocker& b) { return b.member == id && b.until_ms == 0; });
    std::erase(m.round->synced, id);
  }
  std::erase_if(m.members, [&](const Member& x) { return x.id == id; });
  w.liveness.remove.push_back(id.str());
}

void FenceMember(Work& w, Member& mem, const std::string& why) {
  if (mem.fenced) return;
  mem.fenced = true;
  mem.epoch = MemberEpoch(mem.epoch.value() + 1);
  w.Emit(EventKind::kMemberFenced, mem.id.str(), -1, why);
}

// Recomputes targets, hands free shards to their targets, keeps revokeSinceMs in step,
// removes leaving members that own nothing and ends a finished correction round.
void Settle(Work& w) {
  GroupMetadata& m = w.next;
  std::vector<std::string> eligible;
  for (const Member& mem : m.members) {
    if (!mem.fenced && !mem.leaving) eligible.push_back(mem.id.str());
  }
  // K3 balances the shards that can be assigned (RS3); shards waiting for their parents
  // get targets of their own (shown as pendingShards) but are handed to nobody yet, and
  // completed shards are targeted to no one (an owner drains them).
  const std::vector<bool> assignable = m.AssignableShards();
  std::vector<std::string> targets;
  if (std::all_of(assignable.begin(), assignable.end(), [](bool a) { return a; })) {
    targets = ComputeTargets(m.shards, eligible);  // one generation, nothing completed
  } else {
    std::vector<ShardState> now_shards, later_shards;
    std::vector<size_t> now_index, later_index;
    for (size_t i = 0; i < m.shards.size(); ++i) {
      if (assignable[i]) {
        now_shards.push_back(m.shards[i]);
        now_index.push_back(i);
      } else if (!m.shards[i].completed) {
        later_shards.push_back(m.shards[i]);
        later_index.push_back(i);
      }
    }
    targets.resize(m.shards.size());
    const std::vector<std::string> now_targets = ComputeTargets(now_shards, eligible);
    for (size_t k = 0; k < now_index.size(); ++k) targets[now_index[k]] = now_targets[k];
    const std::vector<std::string> later_targets = ComputeTargets(later_shards, eligible);
    for (size_t k = 0; k < later_index.size(); ++k) {
      // A shard whose parent reopened (a failover lost the seal or acks) while a member read
      // it is drained: its parent's redeliveries come first (RS3, RS4).
      const bool owned = !m.shards[later_index[k]].owner.empty();
      targets[later_index[k]] = owned ? std::string() : later_targets[k];
    }
  }
  bool target_changed = false;
  for (size_t s = 0; s < m.shards.size(); ++s) {
    if (m.shards[s].target != targets[s]) {
      m.shards[s].target = targets[s];
      target_changed = true;
    }
  }
  if (target_changed) {
    m.assignment_epoch = AssignmentEpoch(m.assignment_epoch.value() + 1);
    w.Emit(EventKind::kTargetChanged, "", -1,
           fmt::format("assignmentEpoch {}", m.assignment_epoch.value()));
  }
  for (size_t i = 0; i < m.shards.size(); ++i) {
    ShardState& sh = m.shards[i];
    const int32_t s = sh.id;
    if (sh.owner.empty()) {  // a take ends with the ownership it was about (C8)
      sh.taken_ms = 0;
      sh.release_at_ms = 0;
    }
    // K1: a free shard goes to its target; nothing else ever moves ownership forward. A
    // shard whose parents have not completed for this group goes to nobody (RS3).
    if (sh.owner.empty() && !sh.target.empty() && assignable[i] && !IsBlocked(m, s)) {
      sh.owner = sh.target;
      w.Emit(EventKind::kShardAssigned, sh.owner, s);
    }
    const bool revoking = !sh.owner.empty() && sh.owner != sh.target;
    if (!revoking) {
      sh.revoke_since_ms = 0;
      sh.revoke_version = 0;
    } else if (sh.revoke_since_ms == 0) {
      sh.revoke_since_ms = std::max<TimeMs>(w.now, 1);
    }
  }
  // Leaving members that hold nothing are gone.
  std::vector<MemberId> done;
  for (const Member& mem : m.members) {
    if (!mem.leaving) continue;
    bool holds = false;
    for (const ShardState& sh : m.shards) holds = holds || sh.owner == mem.id.str();
    if (!holds) done.push_back(mem.id);
  }
  for (const MemberId& id : done) {
    RemoveMember(w, id, Gone::kLeft);
    w.Emit(EventKind::kMemberLeft, id.str());
  }
  // M6: the round ends when every live member synced and no blocker remains.
  if (m.round && m.round->blockers.empty()) {
    bool all = true;
    for (const Member& mem : m.members) {
      if (mem.fenced) continue;
      all = all && std::binary_search(m.round->synced.begin(), m.round->synced.end(), mem.id);
    }
    // The round also lasts at least one member lease: a client that held shards under
    // ownership Redis lost, and has not heartbeated since the round began, has by then
    // either been seen (recording a blocker) or lost its lease (K2 applies to it too).
    const bool long_enough = w.now >= m.round->started_ms + m.config.member_lease_ms;
    if (all && long_enough && !w.round_started) {
      w.Emit(EventKind::kRoundEnded, "", -1, fmt::format("round {}", m.round->id));
      m.round.reset();
    }
  }
}

// Time-driven transitions that any request loading the group applies (SPEC §4.4):
// expiry, rebalance-timeout fencing, expiry of blockers held by unknown members.
void ApplyTime(Work& w, const Liveness& live) {
  GroupMetadata& m = w.next;
  std::vector<MemberId> expired;
  for (const Member& mem : m.members) {
    auto it = live.deadline_ms.find(mem.id.str());
    const bool known = it != live.deadline_ms.end();
    if ((known && it->second <= w.now) || (!known && live.complete)) expired.push_back(mem.id);
  }
  for (const MemberId& id : expired) {
    const Member* mem = m.FindMember(id);
    RemoveMember(w, id, mem && mem->fenced ? Gone::kFenced : Gone::kExpired);
    w.Emit(EventKind::kMemberExpired, id.str());
  }
  for (ShardState& sh : m.shards) {
    const int32_t s = sh.id;
    // C8: a taken shard is released once every grant on it has ended; Settle hands it on.
    if (sh.taken_ms != 0 && sh.release_at_ms <= w.now) {
      w.Emit(EventKind::kShardReleased, sh.owner, s, "taken shard released");
      sh.owner.clear();
      sh.taken_ms = 0;
      sh.release_at_ms = 0;
      continue;
    }
    if (sh.owner.empty() || sh.owner == sh.target || sh.revoke_since_ms == 0) continue;
    if (sh.revoke_since_ms + m.config.rebalance_timeout_ms > w.now) continue;
    Member* owner = m.FindMember(MemberId(sh.owner));
    RSC_CHECK(owner != nullptr);
    if (owner->shard_lease) {
      // Rebalance timeout, v2 (SPEC §4.4 per shard, docs/design/stuck-shards.md): the shard
      // alone is taken. Every answer that granted it was decided before this write (the
      // CAS orders them) and counted its lease from an earlier send time, so the last grant
      // ends before takenMs + the assignment lease it was granted under + the K2 skew
      // margin. memberLeaseMs bounds that as it bounds expiry: it is at least
      // assignmentLeaseMs + 1000, and DecidePatch keeps it at least the previous config's
      // assignmentLeaseMs + 1000, so a lease granted before a PATCH is covered too.
      if (sh.taken_ms == 0) {
        sh.taken_ms = w.now;
        sh.release_at_ms = w.now + m.config.member_lease_ms;
        w.Emit(EventKind::kShardTaken, sh.owner, s,
               fmt::format("draining past rebalanceTimeoutMs; released at {}", sh.release_at_ms));
      }
      continue;
    }
    // v1 (a client without `shard-lease`): the owner is fenced (its heartbeats are refused
    // from now on, so its liveness deadline is no longer renewed) and its shards are
    // released when it expires, by the loop above. Not at once: every DRAIN answer renewed
    // the member's assignment lease (C1, from the heartbeat's send time), so work it still
    // runs on a draining shard may legitimately go on until that lease ends — and K2 puts
    // that before the liveness deadline. Releasing at the fence would let the new owner's
    // reads overlap it (found by tests/client's hanging-handler test).
    FenceMember(w, *owner, fmt::format("shard {} draining past rebalanceTimeoutMs", s));
  }
  if (m.round) {
    std::erase_if(m.round->blockers, [&](const Blocker& b) {
      if (b.until_ms != 0) return b.until_ms <= w.now;
      return m.FindMember(b.member) == nullptr;
    });
  }
}

// The token of `m.version`: keyed when the group has a key (core/lineage_token.h).
std::string NewLineage(const GroupMetadata& m, const Env& env) {
  if (m.lineage_key.empty()) return env.fresh_lineage;
  return IssueLineageToken(m.lineage_key, m.key, m.version.value(), env.fresh_lineage);
}

// Stamps version, lineage and history onto `next` (called once per committing decision).
void Stamp(const GroupMetadata& stored, GroupMetadata& next, const Env& env) {
  next.version = MetadataVersion(stored.version.value() + 1);
  if (next.lineage_key.empty() && !env.fresh_key.empty()) {  // a record from before keys
    next.lineage_key = env.fresh_key;
    next.lineage_key_since_ms = env.now_ms;
  }
  next.lineage = NewLineage(next, env);
  next.updated_ms = env.now_ms;
  next.lineage_history.push_back(LineageEntry{next.version, next.lineage});
  while (next.lineage_history.size() > kLineageWindow) {
    next.lineage_history.erase(next.lineage_history.begin());
  }
  if (next.round && next.round->started_version.value() == 0) {
    next.round->started_version = next.version;
  }
  // A revoke or blocker this write begins is stamped with this write's version, which
  // every answer that tells a client about it carries (see ApplyRevokedReports).
  for (ShardState& sh : next.shards) {
    if (sh.revoke_since_ms != 0 && sh.revoke_version == 0) sh.revoke_version = next.version.value();
  }
  if (next.round) {
    for (Blocker& b : next.round->blockers) {
      if (b.since_version == 0) b.since_version = next.version.value();
    }
  }
}

// A decision whose next state breaks an invariant writes nothing: the group fails closed
// (its requests are answered METADATA_UNREADABLE until an operator restores it) and the
// process goes on serving every other group. The invariant checks stay: they are what
// keeps a corrupt or exhausted record (e.g. a restore at metadataVersion 2^63-2, which
// once aborted every coordinator that decided for the group) from ever being written.
template <class R>
Decision<R> FailClosed(const GroupMetadata& stored, const std::string& why,
                       std::vector<Event> events) {
  events.push_back(Event{EventKind::kInvariantViolation, "", -1, why});
  return Decision<R>{
      std::nullopt,
      {},
      MakeError(ErrorCode::kMetadataUnreadable,
                fmt::format("group {} fails closed: a decision on its stored state would break "
                            "an invariant ({}); nothing was written; inspect it and restore it "
                            "(docs/runbook.md \"Metadata key loss or corruption\")",
                            stored.key.Tag(), why)),
      std::move(events)};
}

template <class R>
Decision<R> Commit(const GroupMetadata& stored, Work&& w, const Env& env, Result<R> response) {
  // An id is never both removed and set: a member removed and re-added in one decision
  // (expired, then rejoined) keeps its new deadline whatever order the store applies.
  for (const auto& [id, dl] : w.liveness.set) std::erase(w.liveness.remove, id);
  Decision<R> d{std::nullopt, std::move(w.liveness), std::move(response), std::move(w.events)};
  if (!(w.next == stored)) {
    Stamp(stored, w.next, env);
    Status inv = CheckInvariants(w.next);
    if (!inv.ok()) return FailClosed<R>(stored, inv.error().message, std::move(d.events));
    d.next = std::move(w.next);
  }
  return d;
}

void StartRoundIfNeeded(Work& w) {
  GroupMetadata& m = w.next;
  if (m.round) return;
  CorrectionRound r;
  r.id = ++m.rounds_started;
  r.started_ms = w.now;
  r.started_version = MetadataVersion(0);  // stamped with the committed version
  m.round = std::move(r);
  w.round_started = true;
  w.Emit(EventKind::kRoundStarted, "", -1, fmt::format("round {}", m.round->id));
}

void RecordBlocker(Work& w, int32_t shard, const MemberId& member, TimeMs until) {
  // A blocker holds back a shard's grant: a claim of a shard the group does not have (a
  // retired generation's, or one a rollback lost; K4 lists it to drain) has none to hold.
  if (w.next.FindShard(shard) == nullptr) return;
  auto& bl = w.next.round->blockers;
  for (const Blocker& b : bl) {
    if (b.shard.value() == shard && b.member == member) return;
  }
  bl.push_back(Blocker{ShardId(shard), member, until});
  std::sort(bl.begin(), bl.end(), [](const Blocker& a, const Blocker& b) {
    return std::tie(a.shard, a.member) < std::tie(b.shard, b.member);
  });
  w.Emit(EventKind::kBlockerRecorded, member.str(), shard);
}

bool IsRegression(VersionCheck vc);

// Whether the shard claims of a member unknown to the stored state may be recorded as
// blockers. Such a claimant is reading under a grant Redis lost, or it is confused or lying;
// what it can hold back is bounded either way:
// - a claim with a token this group never issued (unproven) is not evidence of anything;
// - an incarnation the stored state already removed (tombstone epoch >= its epoch: it
//   expired — K2 ended its lease —, left, was replaced, or already had its claims blocked
//   once) holds no lease that needs protecting, and must not renew its blockers;
// - with proven evidence of lost writes (ahead or diverged), the claim is recorded: the
//   grant it read under was lost, and its lease ends within one member lease;
// - otherwise (its version is ordinary lag) only during the first member lease of an active
//   round: a grant lost to the rollback that round answers was made before the round
//   began, so any lease from it has ended by then.
bool UnknownClaimMayBlock(const GroupMetadata& m, VersionCheck vc, const HeartbeatRequest& req,
                          TimeMs now) {
  if (vc == VersionCheck::kUnproven) return false;
  const Tombstone* tomb = m.FindTombstone(req.member_id);
  if (tomb && tomb->epoch.value() >= req.member_epoch) return false;
  if (IsRegression(vc)) return true;
  return m.round && now < m.round->started_ms + m.config.member_lease_ms;
}

// Tombstones an unknown claimant's incarnation once its claims are blocked, so they are
// never recorded again (UnknownClaimMayBlock). It is answered UNKNOWN_MEMBER_ID and rejoins
// with a higher epoch.
void MarkClaimed(GroupMetadata& m, const MemberId& id, MemberEpoch epoch, TimeMs now) {
  std::erase_if(m.tombstones, [&](const Tombstone& t) { return t.id == id; });
  Tombstone t{id, epoch, /*fenced=*/false, /*left=*/false, now};
  t.claimed = true;
  m.tombstones.push_back(std::move(t));
  while (m.tombstones.size() > kTombstoneLimit) m.tombstones.erase(m.tombstones.begin());
}

}  // namespace

HeartbeatStatus AnswerStatus(const GroupMetadata& m, const HeartbeatResponse& r, bool sync) {
  if (sync) return HeartbeatStatus::kSyncMetadata;
  if (!r.revoke_shards.empty()) return HeartbeatStatus::kDrain;
  const bool waiting_for_handover =
      std::any_of(r.pending_shards.begin(), r.pending_shards.end(), [&](int32_t id) {
        // RS3: a child waiting for its parents is listed as pending but leaves the status
        // unchanged — the member must start reading the parents (C2 needs OK).
        const ShardState* st = m.FindShard(id);
        return st != nullptr && m.Assignable(*st);
      });
  if (m.round || waiting_for_handover) return HeartbeatStatus::kRevokePending;
  return HeartbeatStatus::kOk;
}

namespace {

// `index`: IndexOf(env.index, m) — the same sets without scanning every shard.
HeartbeatResponse ViewFor(const GroupMetadata& m, const Member& mem,
                          const std::vector<int32_t>& conflicts, bool sync,
                          const GroupIndex* index) {
  HeartbeatResponse r;
  const GroupIndex::PerMember* indexed = index != nullptr ? index->For(m, mem) : nullptr;
  MemberShards sh = indexed != nullptr ? indexed->shards : ShardsOf(m, mem.id);
  r.member_id = mem.id;
  r.member_epoch = mem.epoch.value();
  r.assignment_epoch = m.assignment_epoch.value();
  r.metadata_version = m.version.value();
  r.lineage = m.lineage;
  r.assigned_shards = std::move(sh.assigned);
  r.pending_shards = std::move(sh.pending);
  r.revoke_shards = std::move(sh.revoke);
  std::vector<int32_t> extra = conflicts;
  // Every blocker this member holds is listed too, whether or not this request claims the
  // shard: after a rollback the blocker can be back while the client has long forgotten
  // the shard, and only a REVOKED report (C3: sent at once for a shard it does not read)
  // clears it. Found by the coupled simulation (seed 246426208741818).
  if (m.round) {
    for (const Blocker& b : m.round->blockers) {
      if (b.member == mem.id) extra.push_back(b.shard.value());
    }
  }
  r.revoke_shards.insert(r.revoke_shards.end(), extra.begin(), extra.end());
  std::sort(r.revoke_shards.begin(), r.revoke_shards.end());
  r.revoke_shards.erase(std::unique(r.revoke_shards.begin(), r.revoke_shards.end()),
                        r.revoke_shards.end());
  if (indexed != nullptr) {
    r.taken_shards = indexed->taken;
  } else {
    for (const ShardState& st : m.shards) {
      if (st.taken_ms != 0 && st.owner == mem.id.str()) r.taken_shards.push_back(st.id);
    }
  }
  // D2: once the stream was resharded, the key of every named shard (a sealed generation's
  // shards are in no routing answer). Never resharded: none, the keys are in routing.
  const bool resharded = indexed != nullptr
                             ? index->resharded
                             : std::any_of(m.shards.begin(), m.shards.end(),
                                           [](const ShardState& st) { return st.generation != 0; });
  std::vector<int32_t> named = r.assigned_shards;
  named.insert(named.end(), r.pending_shards.begin(), r.pending_shards.end());
  named.insert(named.end(), r.revoke_shards.begin(), r.revoke_shards.end());
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  for (int32_t id : named) {
    const ShardState* st = m.FindShard(id);
    if (st != nullptr && resharded) r.streams.push_back(RoutingShard{id, st->stream});
  }
  r.heartbeat_interval_ms = m.config.heartbeat_interval_ms;
  r.assignment_lease_ms = m.config.assignment_lease_ms;
  r.status = AnswerStatus(m, r, sync);
  return r;
}

// Synced with a round: the client reports a version of this lineage (checked apart) at or
// after the round began. A round recorded by this decision is not stamped yet (0).
bool SyncedWith(const CorrectionRound& round, int64_t client_version) {
  return round.started_version.value() != 0 && client_version >= round.started_version.value();
}

// The response view is computed after Stamp, so it is built by a deferred step.
struct HeartbeatPlan {
  std::optional<Error> error;
  MemberId member;
  // The request itself: the K4 conflicts listed in the answer are computed in
  // CommitHeartbeat against the state the answer derives from (see there).
  const HeartbeatRequest* request = nullptr;
  bool left = false;
  // The client's reported pair: whether the answer is SYNC_METADATA is judged against the
  // state it is derived from (after this decision's write), so a retry decided on that
  // state answers the same (R3.3, S6).
  int64_t client_version = 0;
  std::string client_lineage;
};

bool IsRegression(VersionCheck vc);
bool NeedsSync(VersionCheck vc);
std::vector<int32_t> Conflicts(const GroupMetadata& m, const MemberId& id,
                               const HeartbeatRequest& req);

Decision<HeartbeatResponse> CommitHeartbeat(const GroupMetadata& stored, Work&& w, const Env& env,
                                            const HeartbeatPlan& plan) {
  Decision<HeartbeatResponse> d =
      Commit<HeartbeatResponse>(stored, std::move(w), env, HeartbeatResponse{});
  if (!d.response.ok()) return d;  // failed closed
  const GroupMetadata& view = d.next ? *d.next : stored;
  if (plan.error) {
    d.response = *plan.error;
    return d;
  }
  // Ahead, diverged or unproven: the answer is the stored truth (M2), whether or not the
  // claim is evidence.
  const bool regression =
      NeedsSync(CheckClientVersion(view, plan.client_version, plan.client_lineage, env.now_ms));
  const Member* mem = view.FindMember(plan.member);
  if (plan.left || !mem) {
    HeartbeatResponse r;
    // M2 holds for a leave too: a client ahead of (or diverging from) the state this answer
    // is derived from is told the stored truth. Judged on `view`, not on the state before
    // this decision's write: a leave that started a correction round raised the version,
    // and its retry — decided on `view` — must get the same answer (R3.3; found by
    // CoreProperties, seed 5444126114175033182).
    const bool sync = regression;
    r.status = sync ? HeartbeatStatus::kSyncMetadata : HeartbeatStatus::kOk;
    r.member_id = plan.member;
    r.member_epoch = -1;
    r.assignment_epoch = view.assignment_epoch.value();
    r.metadata_version = view.version.value();
    r.lineage = view.lineage;
    r.heartbeat_interval_ms = view.config.heartbeat_interval_ms;
    r.assignment_lease_ms = view.config.assignment_lease_ms;
    d.response = r;
    return d;
  }
  // SYNC_METADATA when the client diverges from `view` (M2) or `view` holds a correction
  // round the client has not synced with (M3): exactly what a retry decided on `view`
  // answers. Judging it on the state before the write (as the round bookkeeping must) let
  // a late request from before the round — answered SYNC in the write that ended the
  // round — get OK on its retry (S6, simulator seed 4460115182493809583).
  const bool sync = regression || (view.round && !SyncedWith(*view.round, plan.client_version));
  // K4 conflicts, likewise, against `view`: this decision's Settle may have handed the member
  // a free shard it reported (a rejoin still draining its old incarnation's shard); judged
  // before the write that shard was listed as a conflict (DRAIN) while the retry, decided
  // on the written state where the member owns it, got OK (S6, simulator seed
  // 4437484523665089528). Settle only adds ownership, so this list is a subset of the one
  // before the write and no blocker it recorded is missed.
  std::vector<int32_t> conflicts;
  if (plan.request != nullptr) conflicts = Conflicts(view, plan.member, *plan.request);
  d.response = ViewFor(view, *mem, conflicts, sync, IndexOf(env.index, view));
  return d;
}

void InsertMember(GroupMetadata& m, Member mem) {
  auto it = std::lower_bound(m.members.begin(), m.members.end(), mem.id,
                             [](const Member& a, const MemberId& k) { return a.id < k; });
  m.members.insert(it, std::move(mem));
}

// Applies REVOKED reports (C3): only those matching stored ownership or a recorded
// blocker count; anything else is a duplicate or stale report and is ignored (I2, M5).
//
// A report also has to be as new as what it releases: its request must report (in the
// stored lineage) at least the version of the write that began the revoke or recorded the
// blocker. Every answer that told the client to drain carried that version, so a genuine
// report always does; a report sent before it answered an earlier revoke of the same
// shard. Such a request can still reach a coordinator — delayed in the network, or held
// by a paused coordinator and served after the client gave up on it — after the member
// got the shard back and read it again; releasing on it handed the shard to a new owner
// while the old one read it (S1, simulator seed 458260817779326665). A client from a lost
// lineage (regression) is answered SYNC_METADATA first; its next report counts.
void ApplyRevokedReports(Work& w, const MemberId& id, const std::vector<RevokingReport>& reps,
                         int64_t report_version, bool regression) {
  GroupMetadata& m = w.next;
  const auto current = [&](int64_t since) { return !regression && report_version >= since; };
  for (const RevokingReport& r : reps) {
    if (r.state != RevokeState::kRevoked || m.FindShard(r.shard) == nullptr) continue;
    ShardState& sh = *m.FindShard(r.shard);
    bool applied = false;
    if (sh.owner == id.str() && sh.target != id.str() && current(sh.revoke_version)) {
      sh.owner.clear();
      sh.revoke_since_ms = 0;
      sh.revoke_version = 0;
      sh.taken_ms = 0;
      sh.release_at_ms = 0;
      applied = true;
      w.Emit(EventKind::kShardReleased, id.str(), r.shard, "REVOKED");
    }
    if (m.round) {
      const size_t before = m.round->blockers.size();
      std::erase_if(m.round->blockers, [&](const Blocker& b) {
        return b.shard.value() == r.shard && b.member == id && current(b.since_version);
      });
      applied = applied || before != m.round->blockers.size();
    }
    if (!applied) {
      // Says why when the report matched a revoke it is too old for (logs, probes).
      const bool too_old = sh.owner == id.str() && sh.target != id.str() && !regression;
      w.Emit(EventKind::kStaleRevokeIgnored, id.str(), r.shard,
             too_old ? "older than its revoke" : "");
    }
  }
}

// Shards the member says it holds (reading, or draining with in-flight work) that the
// stored ownership does not give it (K4). Sorted, unique. A shard the group does not have
// is listed too: a retired generation's, or a newer generation's after a rollback of the
// layout (found by the simulator with reshards, seed 3: the member went on reading it).
std::vector<int32_t> Conflicts(const GroupMetadata& m, const MemberId& id,
                               const HeartbeatRequest& req) {
  std::set<int32_t> held(req.owned_shards.begin(), req.owned_shards.end());
  for (const RevokingReport& r : req.revoking_shards) {
    if (r.state == RevokeState::kDraining) held.insert(r.shard);
  }
  std::vector<int32_t> out;
  for (int32_t s : held) {
    const ShardState* sh = m.FindShard(s);
    if (sh == nullptr || sh->owner != id.str()) out.push_back(s);
  }
  return out;
}

// Evidence that Redis lost writes (M2, M8): starts a round, records blockers.
bool IsRegression(VersionCheck vc) {
  return vc == VersionCheck::kAhead || vc == VersionCheck::kDiverged;
}

// The client is told the stored truth: evidence, or a claim this group never issued.
bool NeedsSync(VersionCheck vc) { return IsRegression(vc) || vc == VersionCheck::kUnproven; }

void EmitRegression(Work& w, VersionCheck vc, const std::string& who, int64_t version) {
  if (vc == VersionCheck::kAhead) {
    w.Emit(EventKind::kVersionRegression, who, -1,
           fmt::format("client version {} > stored {}", version, w.next.version.value()));
  } else if (vc == VersionCheck::kDiverged) {
    w.Emit(EventKind::kLineageDivergence, who, -1,
           fmt::format("client version {} lineage differs from stored history", version));
  } else if (vc == VersionCheck::kUnproven) {
    w.Emit(EventKind::kUnprovenVersion, who, -1,
           fmt::format("client version {} (stored {}) with a token this group never issued: "
                       "told the stored truth, not taken as lost writes",
                       version, w.next.version.value()));
  }
}

}  // namespace

namespace {

// True when the full decision would change nothing but this member's deadline: a live,
// unfenced member at its epoch, consistent version, no round, nothing due in time, no
// REVOKED report that releases anything, no shard claimed against the stored ownership.
// The stored state is always a fixed point of Settle (every writer ends with it; restore
// starts a round, which excludes this path), so skipping Settle is exact. Checked against
// the full path on random sequences in tests/core/properties_test.cc.
bool IsSteadyHeartbeat(const GroupMetadata& m, const Liveness& live, const HeartbeatRequest& req,
                       TimeMs now, const GroupIndex* index) {
  if (m.round || req.member_epoch <= 0) return false;
  const Member* mem = m.FindMember(req.member_id);
  if (!mem || mem->fenced || mem->leaving || mem->epoch.value() != req.member_epoch) return false;
  const VersionCheck vc = CheckClientVersion(m, req.metadata_version, req.lineage, now);
  if (vc != VersionCheck::kCurrent && vc != VersionCheck::kLagging) return false;
  // Nothing due: no expiry (complete maps list everyone; partial maps only due entries).
  if (live.complete) {
    if (live.deadline_ms.size() != m.members.size()) return false;
  }
  for (const auto& [id, dl] : live.deadline_ms) {
    if (dl <= now) return false;
  }
  if (index != nullptr) {
    if (index->next_due_ms <= now) return false;  // the scan below, precomputed
  } else {
    for (const ShardState& sh : m.shards) {
      if (sh.revoke_since_ms != 0 && sh.revoke_since_ms + m.config.rebalance_timeout_ms <= now) {
        return false;
      }
      if (sh.taken_ms != 0 && sh.release_at_ms <= now) return false;  // a release is due
    }
  }
  if (mem->shard_lease != DeclaresShardLease(req)) return false;  // the record changes
  if (mem->layout_v2 != Declares(req, kFeatureLayoutV2)) return false;
  const std::string& me = req.member_id.str();
  // A shard claimed (read or draining) that the group does not have is a K4 conflict too:
  // the full path lists it (a retired generation's, or one a rollback of the layout lost).
  for (const RevokingReport& r : req.revoking_shards) {
    const ShardState* sh = m.FindShard(r.shard);
    if (sh == nullptr) {
      if (r.state == RevokeState::kDraining) return false;
      continue;
    }
    if (r.state == RevokeState::kRevoked && sh->owner == me && sh->target != me) return false;
    if (r.state == RevokeState::kDraining && sh->owner != me) return false;
  }
  for (int32_t s : req.owned_shards) {
    const ShardState* sh = m.FindShard(s);
    if (sh == nullptr || sh->owner != me) return false;
  }
  return true;
}

Decision<HeartbeatResponse> DecideHeartbeatFull(const GroupMetadata& stored, const Liveness& live,
                                                const HeartbeatRequest& req, const Env& env);

}  // namespace

Decision<HeartbeatResponse> DecideHeartbeat(const GroupMetadata& stored, const Liveness& live,
                                            const HeartbeatRequest& req, const Env& env) {
  // A shard both owned and revoking is a contradiction the HTTP layer already rejects
  // (protocol_json.cc); refused here too, so no caller can make a REVOKED report release a
  // shard its reporter says it still reads.
  for (const RevokingReport& rr : req.revoking_shards) {
    if (std::find(req.owned_shards.begin(), req.owned_shards.end(), rr.shard) !=
        req.owned_shards.end()) {
      return {std::nullopt,
              {},
              MakeError(ErrorCode::kInvalidRequest,
                        fmt::format("shard {} is listed twice (in ownedShards and "
                                    "revokingShards)",
                                    rr.shard)),
              {}};
    }
  }
  const GroupIndex* index = IndexOf(env.index, stored);
  if (!IsSteadyHeartbeat(stored, live, req, env.now_ms, index)) {
    return DecideHeartbeatFull(stored, live, req, env);
  }
  Decision<HeartbeatResponse> d{std::nullopt, {}, HeartbeatResponse{}, {}};
  d.liveness.set.emplace_back(req.member_id.str(), env.now_ms + stored.config.member_lease_ms);
  for (const RevokingReport& r : req.revoking_shards) {
    if (r.state == RevokeState::kRevoked) {
      d.events.push_back(Event{EventKind::kStaleRevokeIgnored, req.member_id.str(), r.shard, {}});
    }
  }
  d.response = ViewFor(stored, *stored.FindMember(req.member_id), {}, false, index);
  return d;
}

Decision<HeartbeatResponse> DecideHeartbeatFullForTest(const GroupMetadata& stored,
                                                       const Liveness& live,
                                                       const HeartbeatRequest& req,
                                                       const Env& env) {
  return DecideHeartbeatFull(stored, live, req, env);
}

namespace {

Decision<HeartbeatResponse> DecideHeartbeatFull(const GroupMetadata& stored, const Liveness& live,
                                                const HeartbeatRequest& req, const Env& env) {
  Work w{stored, {}, {}, env.now_ms};
  HeartbeatPlan plan;
  plan.client_version = req.metadata_version;
  plan.client_lineage = req.lineage;
  plan.member = req.member_id;
  ApplyTime(w, live);
  GroupMetadata& m = w.next;
  const VersionCheck vc = CheckClientVersion(stored, req.metadata_version, req.lineage, env.now_ms);
  const bool regression = IsRegression(vc);  // evidence of lost writes: rounds, blockers
  // Nothing an unproven request says changes state: no REVOKED report applies, no claim
  // blocks, and it never counts as synced. Its answer is the stored truth (CommitHeartbeat).
  const bool untrusted = regression || vc == VersionCheck::kUnproven;
  EmitRegression(w, vc, req.member_id.str(), req.metadata_version);
  const TimeMs deadline = env.now_ms + m.config.member_lease_ms;

  // ── leave ──
  // A leave is a heartbeat with epoch -1 (SPEC §4.1), so M2 applies: a leaving client that
  // reports a version Redis lost gets SYNC_METADATA (with the stored version), and, when it
  // is still a member, the loss starts a correction round like any heartbeat's would.
  // Found by the simulator (seed 8): "left" used to be answered OK whatever the version.
  if (req.member_epoch == -1) {
    Member* mem = m.FindMember(req.member_id);
    if (!mem) {
      plan.left = true;  // already gone: leaving is idempotent
      Settle(w);
      return CommitHeartbeat(stored, std::move(w), env, plan);
    }
    if (req.leave_epoch > 0 && req.leave_epoch < mem->epoch.value()) {  // K5 on leave too
      Settle(w);
      plan.error = MakeError(ErrorCode::kFencedMemberEpoch,
                             fmt::format("leave with memberEpoch {} is fenced (current {})",
                                         req.leave_epoch, mem->epoch.value()));
      return CommitHeartbeat(stored, std::move(w), env, plan);
    }
    if (regression) StartRoundIfNeeded(w);
    // Mark it leaving and move its targets away first, so the REVOKED reports it sends
    // with the leave release its shards in this same write.
    const bool fenced = mem->fenced;
    mem->leaving = true;
    if (!fenced) w.liveness.set.emplace_back(req.member_id.str(), deadline);
    Settle(w);
    if (m.FindMember(req.member_id)) {
      ApplyRevokedReports(w, req.member_id, req.revoking_shards, req.metadata_version, untrusted);
      Settle(w);
    }
    plan.left = m.FindMember(req.member_id) == nullptr;
    return CommitHeartbeat(stored, std::move(w), env, plan);
  }

  Member* mem = m.FindMember(req.member_id);
  // ── join ──
  if (req.member_epoch == 0) {
    if (mem && mem->fenced) {
      // A fenced member rejoining keeps what it still owns until it reports REVOKED or
      // expires; it gets a new epoch so any older incarnation stays fenced (K5).
      mem->fenced = false;
      mem->leaving = false;
      mem->epoch = MemberEpoch(mem->epoch.value() + 1);
      // The new incarnation reads nothing (it abandoned every shard on FENCED) and reports
      // the shards it still owns REVOKED as soon as their abandoned work has stopped: give
      // it a fresh drain window, or the overdue drain that fenced the old incarnation would
      // fence this one at once.
      for (ShardState& sh : m.shards) {
        if (sh.owner == mem->id.str() && sh.revoke_since_ms != 0) {
          sh.revoke_since_ms = std::max<TimeMs>(env.now_ms, 1);
        }
      }
      w.Emit(EventKind::kMemberRejoined, mem->id.str());
    } else if (!mem) {
      Member* old = nullptr;
      if (!req.instance_id.empty()) {
        for (Member& x : m.members) {
          if (x.instance_id == req.instance_id && !x.fenced && !x.leaving) old = &x;
        }
      }
      const Tombstone* tomb = m.FindTombstone(req.member_id);
      Member fresh;
      fresh.id = req.member_id;
      fresh.instance_id = req.instance_id;
      fresh.joined_ms = env.now_ms;
      fresh.epoch = MemberEpoch(tomb ? tomb->epoch.value() + 1 : 1);
      std::erase_if(m.tombstones, [&](const Tombstone& t) { return t.id == req.member_id; });
      if (old) {
        // Static membership: the restarted process takes the old member's place and
        // shards without a rebalance; the old identity is fenced (K5).
        const MemberId old_id = old->id;
        fresh.epoch = MemberEpoch(std::max(fresh.epoch.value(), old->epoch.value() + 1));
        for (ShardState& sh : m.shards) {
          if (sh.owner == old_id.str()) sh.owner = fresh.id.str();
          if (sh.target == old_id.str()) sh.target = fresh.id.str();
        }
        if (m.round) {
          // The old process's claims stay blocked until its lease must have ended; they are
          // not moved to the new process, which never read those shards and so would never
          // report them REVOKED (that stalled the round: regression test
          // StaticMembership.ReplacedMembersBlockersExpireWithItsLease).
          for (Blocker& b : m.round->blockers) {
            if (b.member == old_id && b.until_ms == 0) {
              b.until_ms = env.now_ms + m.config.member_lease_ms;
            }
          }
          std::erase(m.round->synced, old_id);
        }
        AddTombstone(m, *old, Gone::kFenced, env.now_ms);
        std::erase_if(m.members, [&](const Member& x) { return x.id == old_id; });
        w.liveness.remove.push_back(old_id.str());
        w.Emit(EventKind::kStaticMemberReplaced, fresh.id.str(), -1, "replaces " + old_id.str());
      } else {
        w.Emit(tomb ? EventKind::kMemberRejoined : EventKind::kMemberJoined, fresh.id.str());
      }
      InsertMember(m, std::move(fresh));
    }
    // else: a retried join of a live member; answered like a heartbeat (idempotent).
    mem = m.FindMember(req.member_id);
  } else {
    // ── heartbeat of an existing member ──
    if (!mem) {
      // A member unknown to the stored state that claims shards may be reading them under
      // ownership Redis lost: block those shards until its lease must have ended (M5), and
      // tell it to drop everything. What such a claimant can block is bounded
      // (UnknownClaimMayBlock) and never renewed: its incarnation is tombstoned `claimed`.
      std::vector<int32_t> claims = Conflicts(m, req.member_id, req);
      if (!claims.empty() && UnknownClaimMayBlock(m, vc, req, env.now_ms)) {
        if (regression) StartRoundIfNeeded(w);
        for (int32_t s : claims) RecordBlocker(w, s, req.member_id, deadline);
        MarkClaimed(m, req.member_id, MemberEpoch(req.member_epoch), env.now_ms);
      }
      Settle(w);
      const Tombstone* tomb = m.FindTombstone(req.member_id);
      if (tomb && tomb->left) {
        plan.left = true;  // it left cleanly; a late heartbeat is told so again
        return CommitHeartbeat(stored, std::move(w), env, plan);
      }
      plan.error = (tomb && tomb->fenced)
                       ? MakeError(ErrorCode::kFencedMemberEpoch,
                                   fmt::format("member {} was fenced; rejoin with memberEpoch 0",
                                               req.member_id.str()))
                       : MakeError(ErrorCode::kUnknownMemberId,
                                   fmt::format("member {} is not in the group; rejoin with "
                                               "memberEpoch 0",
                                               req.member_id.str()));
      return CommitHeartbeat(stored, std::move(w), env, plan);
    }
    if (mem->fenced || req.member_epoch < mem->epoch.value() ||
        (req.member_epoch > mem->epoch.value() && !regression)) {
      Settle(w);
      plan.error = MakeError(
          ErrorCode::kFencedMemberEpoch,
          fmt::format("memberEpoch {} is fenced (current {}{}); drop all shards and rejoin",
                      req.member_epoch, mem->epoch.value(), mem->fenced ? ", fenced" : ""));
      return CommitHeartbeat(stored, std::move(w), env, plan);
    }
  }

  // ── a live member's heartbeat (or join) ──
  w.liveness.set.emplace_back(req.member_id.str(), deadline);
  if (Member* me = m.FindMember(req.member_id)) {
    me->shard_lease = DeclaresShardLease(req);
    me->layout_v2 = Declares(req, kFeatureLayoutV2);
  }
  ApplyRevokedReports(w, req.member_id, req.revoking_shards, req.metadata_version, untrusted);
  plan.request = &req;
  if (regression) StartRoundIfNeeded(w);
  if (m.round) {
    if (vc != VersionCheck::kUnproven) {
      for (int32_t s : Conflicts(m, req.member_id, req)) RecordBlocker(w, s, req.member_id, 0);
    }
    // The answer is SYNC_METADATA unless the member has synced (judged in CommitHeartbeat).
    if (!untrusted && SyncedWith(*m.round, req.metadata_version)) {
      auto& sv = m.round->synced;
      auto it = std::lower_bound(sv.begin(), sv.end(), req.member_id);
      if (it == sv.end() || *it != req.member_id) sv.insert(it, req.member_id);
    }
  }
  Settle(w);
  return CommitHeartbeat(stored, std::move(w), env, plan);
}

}  // namespace

Decision<Unit> DecideTick(const GroupMetadata& stored, const Liveness& live, const Env& env) {
  Work w{stored, {}, {}, env.now_ms};
  ApplyTime(w, live);
  Settle(w);
  return Commit<Unit>(stored, std::move(w), env, Unit{});
}

namespace {

// The layout's non-retired shards become the group's: existing ones keep their state, new
// ones start free (waiting for their parents), retired ones leave. Returns false when the
// layout is behind the group (its ACTIVE generation is older than the group's).
bool AdoptLayout(Work& w, const Layout& layout, int64_t layout_revision) {
  GroupMetadata& m = w.next;
  const Generation* active = layout.Active();
  if (active == nullptr || active->generation < m.active_generation) return false;
  std::vector<ShardState> shards;
  for (const Generation& g : layout.generations) {
    if (g.state == GenerationState::kRetired) continue;
    for (const LayoutShard& ls : g.shards) {
      ShardState sh;
      if (const ShardState* old = m.FindShard(ls.id)) sh = *old;
      sh.id = ls.id;
      sh.generation = g.generation;
      sh.stream = ls.stream;
      shards.push_back(std::move(sh));
    }
  }
  for (const ShardState& old : m.shards) {
    const bool kept =
        std::binary_search(shards.begin(), shards.end(), old,
                           [](const ShardState& a, const ShardState& b) { return a.id < b.id; });
    if (!kept && !old.owner.empty()) {
      w.Emit(EventKind::kShardReleased, old.owner, old.id, "generation retired");
    }
  }
  m.shards = std::move(shards);
  m.active_generation = active->generation;
  m.shard_count = static_cast<int32_t>(active->shards.size());
  m.layout_revision = layout_revision;
  if (m.round) {  // a blocker on a shard that left the group has nothing left to block
    std::erase_if(m.round->blockers,
                  [&](const Blocker& b) { return m.FindShard(b.shard.value()) == nullptr; });
  }
  w.Emit(
      EventKind::kLayoutAdopted, "", -1,
      fmt::format("layout revision {}, active generation {}", layout_revision, active->generation));
  return true;
}

void RecordCompletions(Work& w, const std::vector<ShardCompletion>& completions) {
  GroupMetadata& m = w.next;
  for (const ShardCompletion& c : completions) {
    ShardState* sh = m.FindShard(c.shard);
    if (sh == nullptr || sh->generation >= m.active_generation || sh->completed == c.complete) {
      continue;  // not a sealed shard of this group, or nothing new
    }
    sh->completed = c.complete;
    if (c.complete) {
      // Read to its end: nothing is left to read (RS3). Its owner, if any, is told to drain
      // it like any revoke (Settle) and keeps it until it reports REVOKED or its lease ends.
      // Cleared here, the owner's grants would still run unrecorded, and a reopen (a failover
      // lost the acks, or a stale check) could hand the shard to another member meanwhile:
      // two readers (S1, simulator seed 9204068676931625525).
      sh->target.clear();
      w.Emit(EventKind::kParentCompleted, "", sh->id);
    } else {
      w.Emit(EventKind::kParentReopened, "", sh->id, "found incomplete again in Redis");
    }
  }
}

}  // namespace

Status AdoptLayoutInPlace(GroupMetadata& group, const Layout& layout, int64_t layout_revision) {
  Work w{group, {}, {}, 0};
  if (!AdoptLayout(w, layout, layout_revision)) {
    return MakeError(ErrorCode::kMetadataUnreadable,
                     fmt::format("the layout of stream '{}' has no ACTIVE generation, or one "
                                 "older than group {}'s generation {} (RS6)",
                                 layout.stream, group.key.Tag(), group.active_generation));
  }
  RSC_RETURN_IF_ERROR(CheckInvariants(w.next));
  group = std::move(w.next);
  return OkStatus();
}

Decision<Unit> DecideLayoutTick(const GroupMetadata& stored, const Liveness& live,
                                const Layout& layout, int64_t layout_revision,
                                const std::vector<ShardCompletion>& completions, const Env& env) {
  Work w{stored, {}, {}, env.now_ms};
  // The layout is read outside the group's mutex (a stream tick, a completion hint): another
  // coordinator may have adopted a newer revision meanwhile. An older one whose ACTIVE
  // generation is not behind the group's is such a stale read: adopting it would bring back
  // shards a later revision retired, ownerless, and hand them out while their last owner
  // may still hold a lease on them (K1; simulator seed 20266010). Nothing is written; the
  // next pass reads the layout again. An older one whose ACTIVE generation is behind is the
  // layout gone back (RS6), answered below.
  const Generation* seen_active = layout.Active();
  if (layout_revision < stored.layout_revision && seen_active != nullptr &&
      seen_active->generation >= stored.active_generation) {
    return {std::nullopt, {}, Unit{}, {}};
  }
  if (layout_revision != stored.layout_revision && !AdoptLayout(w, layout, layout_revision)) {
    const Generation* active = layout.Active();
    return {std::nullopt,
            {},
            MakeError(ErrorCode::kMetadataUnreadable,
                      fmt::format("layout of stream '{}' (revision {}) is behind group {}: its "
                                  "ACTIVE generation {} is older than the group's {} (RS6)",
                                  layout.stream, layout_revision, stored.key.Tag(),
                                  active ? active->generation : -1, stored.active_generation)),
            {}};
  }
  RecordCompletions(w, completions);
  ApplyTime(w, live);
  Settle(w);
  return Commit<Unit>(stored, std::move(w), env, Unit{});
}

Decision<RoutingResponse> DecideRouting(const GroupMetadata& stored, int64_t observed_version,
                                        const std::string& observed_lineage, TimeMs now_ms) {
  Work w{stored, {}, {}, now_ms};
  const VersionCheck vc = CheckClientVersion(stored, observed_version, observed_lineage, now_ms);
  EmitRegression(w, vc, "producer", observed_version);
  RoutingResponse r;
  r.metadata_version = stored.version.value();
  r.lineage = stored.lineage;
  r.shard_count = stored.shard_count;
  for (const ShardState* s : stored.ActiveShards())
    r.shards.push_back(RoutingShard{s->id, s->stream});
  r.generation = stored.active_generation;
  r.layout_revision = stored.layout_revision;
  r.routing_lease_ms = stored.config.routing_lease_ms;
  r.refresh_interval_ms = stored.config.routing_refresh_ms;
  r.sync = NeedsSync(vc);
  return Decision<RoutingResponse>{std::nullopt, {}, r, std::move(w.events)};
}

Result<GroupMetadata> DecideCreate(const CreateGroupRequest& req, const Env& env, CreateOver over) {
  if (!IsValidStreamName(req.stream)) {
    return MakeError(ErrorCode::kInvalidRequest, "stream must match [A-Za-z0-9._:-]{1,200}");
  }
  if (!IsValidGroupName(req.group)) {
    return MakeError(ErrorCode::kInvalidRequest, "group must match [A-Za-z0-9._-]{1,128}");
  }
  if (req.shard_count < 1 || req.shard_count > kMaxShards) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("shardCount must be between 1 and {}", kMaxShards));
  }
  RSC_RETURN_IF_ERROR(ValidateConfig(req.config));
  GroupMetadata m;
  m.key = GroupKey{req.stream, req.group};
  m.shard_count = req.shard_count;
  m.config = req.config;
  m.version = MetadataVersion(1);
  m.lineage_key = env.fresh_key;
  m.lineage_key_since_ms = env.now_ms;
  m.lineage = NewLineage(m, env);
  m.lineage_history = {LineageEntry{m.version, m.lineage}};
  m.assignment_epoch = AssignmentEpoch(1);
  m.created_ms = env.now_ms;
  m.updated_ms = env.now_ms;
  for (int32_t s = 0; s < req.shard_count; ++s) {
    ShardState sh;
    sh.id = s;
    sh.stream = ShardStreamKey(req.stream, s);
    m.shards.push_back(std::move(sh));
  }
  if (over == CreateOver::kLostKey) {
    // The lost incarnation's clients may hold assignment leases granted just before the
    // loss (up to assignmentLeaseMs, < memberLeaseMs by K2). The round, like a restore's,
    // holds OK back for one member lease from now (simulator seed 8431395707449856820).
    m.round = CorrectionRound{++m.rounds_started, env.now_ms, m.version, {}, {}};
  }
  RSC_RETURN_IF_ERROR(CheckInvariants(m));
  return m;
}

Status CheckPatchRequest(const GroupKey& key, const PatchGroupRequest& req) {
  if (!req.shard_count) return OkStatus();
  // v1 grew shardCount in place; that broke per-key order and, on a stream with two groups,
  // lost the new shards' messages for the other group (SPEC §13). Resharding is per stream.
  return MakeError(ErrorCode::kInvalidRequest,
                   fmt::format("shardCount is not changed by PATCH: reshard the stream with POST "
                               "/v1/streams/{}/reshard (SPEC RS1)",
                               key.stream));
}

Decision<GroupView> DecidePatch(const GroupMetadata& stored, const Liveness& live,
                                const PatchGroupRequest& req, const Env& env) {
  Work w{stored, {}, {}, env.now_ms};
  GroupMetadata& m = w.next;
  if (Status st = CheckPatchRequest(m.key, req); !st.ok())
    return {std::nullopt, {}, st.error(), {}};
  if (req.config) {
    Status st = ValidateConfig(*req.config);
    if (!st.ok()) return {std::nullopt, {}, st.error(), {}};
    // Clients may hold leases granted under the old config. Fencing releases and the
    // minimum round length rely on rebalanceTimeoutMs and memberLeaseMs outlasting any
    // assignment lease in force, so a change must also respect the old leases; shrinking
    // further takes two PATCHes, one old lease apart (docs/runbook.md).
    const GroupConfig& old = stored.config;
    if (req.config->member_lease_ms < old.assignment_lease_ms + kMinLeaseMarginMs ||
        req.config->rebalance_timeout_ms < old.member_lease_ms) {
      return {
          std::nullopt,
          {},
          MakeError(ErrorCode::kInvalidRequest,
                    fmt::format("config change too large at once: memberLeaseMs must stay >= "
                                "the current assignmentLeaseMs ({}) + {} ms and "
                                "rebalanceTimeoutMs >= the current memberLeaseMs ({}); "
                                "shrink in steps one lease apart",
                                old.assignment_lease_ms, kMinLeaseMarginMs, old.member_lease_ms)),
          {}};
    }
    m.config = *req.config;
  }
  ApplyTime(w, live);
  Settle(w);
  Decision<GroupView> d = Commit<GroupView>(stored, std::move(w), env, GroupView{});
  if (!d.response.ok()) return d;  // failed closed
  d.response = MakeGroupView(d.next ? *d.next : stored, StoreRevision(0), live, env.now_ms);
  return d;
}

Decision<Unit> DecideFence(const GroupMetadata& stored, const Liveness& live,
                           const MemberId& member, const Env& env) {
  Work w{stored, {}, {}, env.now_ms};
  ApplyTime(w, live);
  Member* mem = w.next.FindMember(member);
  if (!mem) {
    return {std::nullopt,
            {},
            MakeError(ErrorCode::kUnknownMemberId,
                      fmt::format("member {} is not in the group", member.str())),
            {}};
  }
  // Its shards are released when it expires (its heartbeats are refused from now on, so
  // its lease runs out) or reports them REVOKED in a leave; nothing is released here.
  FenceMember(w, *mem, "fenced by operator");
  Settle(w);
  return Commit<Unit>(stored, std::move(w), env, Unit{});
}

Result<GroupMetadata> DecideRestore(const GroupMetadata& imported, const Env& env) {
  // An export is outside input: the same rules as create apply (names become Redis keys).
  if (!IsValidStreamName(imported.key.stream) || !IsValidGroupName(imported.key.group)) {
    return MakeError(ErrorCode::kInvalidRequest,
                     "export names an invalid stream or group (SPEC R2.4)");
  }
  if (imported.shard_count > kMaxShards) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("export shardCount above {}", kMaxShards));
  }
  if (Status st = ValidateConfig(imported.config); !st.ok()) {
    return MakeError(ErrorCode::kInvalidRequest, "export config: " + st.error().message);
  }
  for (const Member& mem : imported.members) {
    if (!IsValidMemberId(mem.id.str()) ||
        (!mem.instance_id.empty() && !IsValidMemberId(mem.instance_id))) {
      return MakeError(ErrorCode::kInvalidRequest, "export holds an invalid member id");
    }
  }
  // The codec already checked the invariants (including the counter and time bounds); a
  // restore also needs room to run: every counter it continues must stay far below
  // kMaxCounter, or the group would fail closed soon after (and once crashed every
  // coordinator: metadataVersion 2^63-2 overflowed on the next write).
  if (Status st = CheckInvariants(imported); !st.ok()) {
    return MakeError(ErrorCode::kInvalidRequest, "export aggregate: " + st.error().message);
  }
  const int64_t room = kMaxCounter - kRestoreHeadroom;
  auto headroom = [&](std::string_view field, int64_t v) -> Status {
    if (v > room) {
      return MakeError(ErrorCode::kInvalidRequest,
                       fmt::format("export aggregate: {} {} leaves no room to continue (at most "
                                   "{} in a restore)",
                                   field, v, room));
    }
    return OkStatus();
  };
  RSC_RETURN_IF_ERROR(headroom("metadataVersion", imported.version.value()));
  RSC_RETURN_IF_ERROR(headroom("assignmentEpoch", imported.assignment_epoch.value()));
  RSC_RETURN_IF_ERROR(headroom("roundsStarted", imported.rounds_started));
  for (size_t i = 0; i < imported.members.size(); ++i) {
    RSC_RETURN_IF_ERROR(
        headroom(fmt::format("members[{}].epoch", i), imported.members[i].epoch.value()));
  }
  for (size_t i = 0; i < imported.tombstones.size(); ++i) {
    RSC_RETURN_IF_ERROR(
        headroom(fmt::format("tombstones[{}].epoch", i), imported.tombstones[i].epoch.value()));
  }
  GroupMetadata m = imported;
  // A restore starts a new lineage (L2): the history holds only the restored version, so
  // every client that saw any other (version, token) is answered with SYNC_METADATA.
  m.version = MetadataVersion(imported.version.value() + 1);
  // The group's key travels in its export, so tokens issued before the restore still prove
  // themselves; an export from before keys gets a fresh one.
  if (m.lineage_key.empty() && !env.fresh_key.empty()) {
    m.lineage_key = env.fresh_key;
    m.lineage_key_since_ms = env.now_ms;
  }
  m.lineage = NewLineage(m, env);
  m.lineage_history = {LineageEntry{m.version, m.lineage}};
  m.updated_ms = env.now_ms;
  // A restore is an explicit rollback: run a correction round at once, so no member gets
  // OK until every restored member has synced and a member lease has passed (M6).
  m.round = CorrectionRound{++m.rounds_started, env.now_ms, m.version, {}, {}};
  // Only a REVOKED report made after the restore releases a restored revoke: a client
  // behind the restored version counts as merely lagging, not as another lineage.
  // A drain window never starts in the future (a doctored export could otherwise postpone
  // the rebalance-timeout fence by centuries).
  for (ShardState& sh : m.shards) {
    if (sh.revoke_since_ms != 0) {
      sh.revoke_version = m.version.value();
      sh.revoke_since_ms = std::min<TimeMs>(sh.revoke_since_ms, std::max<TimeMs>(env.now_ms, 1));
    }
  }
  if (Status st = CheckInvariants(m); !st.ok()) {
    return MakeError(ErrorCode::kInvalidRequest, "export aggregate: " + st.error().message);
  }
  return m;
}

namespace {

// RS3 as the group view shows it: a shard waits while a shard of an earlier generation is
// not completed (GroupMetadata::Assignable).
std::vector<GroupGenerationView> GenerationViews(const GroupMetadata& m) {
  std::map<int32_t, GroupGenerationView> by_generation;
  for (const ShardState& sh : m.shards) {
    GroupGenerationView& g = by_generation[sh.generation];
    g.generation = sh.generation;
    g.shards.push_back(sh.id);
    if (sh.completed) g.completed.push_back(sh.id);
  }
  std::vector<GroupGenerationView> out;
  std::vector<int32_t> incomplete;  // of the generations before the current one
  for (auto& [generation, g] : by_generation) {
    std::sort(g.shards.begin(), g.shards.end());
    std::sort(g.completed.begin(), g.completed.end());
    g.waiting_for = incomplete;
    std::set_difference(g.shards.begin(), g.shards.end(), g.completed.begin(), g.completed.end(),
                        std::back_inserter(incomplete));
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

GroupView MakeGroupView(const GroupMetadata& m, StoreRevision revision, const Liveness& live,
                        TimeMs now_ms) {
  GroupView v;
  v.stream = m.key.stream;
  v.group = m.key.group;
  v.revision = revision.value();
  v.metadata_version = m.version.value();
  v.lineage = m.lineage;
  v.assignment_epoch = m.assignment_epoch.value();
  v.shard_count = m.shard_count;
  v.config = m.config;
  for (const Member& mem : m.members) {
    MemberShards sh = ShardsOf(m, mem.id);
    MemberView mv;
    mv.member_id = mem.id.str();
    mv.member_epoch = mem.epoch.value();
    mv.instance_id = mem.instance_id;
    mv.assigned_shards = std::move(sh.assigned);
    mv.pending_shards = std::move(sh.pending);
    mv.revoking_shards = std::move(sh.revoke);
    auto it = live.deadline_ms.find(mem.id.str());
    mv.lease_remaining_ms =
        it == live.deadline_ms.end() ? 0 : std::max<TimeMs>(0, it->second - now_ms);
    mv.leaving = mem.leaving;
    mv.fenced = mem.fenced;
    v.members.push_back(std::move(mv));
  }
  v.correction_round = m.round;
  v.generations = GenerationViews(m);
  std::map<int32_t, const std::vector<int32_t>*> waiting;  // generation → its parents left
  for (const GroupGenerationView& g : v.generations) waiting[g.generation] = &g.waiting_for;
  for (const ShardState& sh : m.shards) {
    ShardView s{sh.id, sh.stream, sh.generation, sh.owner, sh.target, "", {}, {}, {}, {}};
    const bool waits = !sh.completed && !waiting[sh.generation]->empty();
    if (waits) s.waiting_for = *waiting[sh.generation];
    if (sh.completed) {
      s.state = "COMPLETED";
    } else if (!sh.owner.empty() && sh.owner != sh.target) {
      s.state = "DRAINING";  // also a child whose parent reopened: waitingFor says why
    } else if (waits) {
      s.state = "WAITING_PARENTS";
    } else {
      s.state = sh.owner.empty() ? "UNASSIGNED" : "ASSIGNED";
    }
    v.shards.push_back(std::move(s));
    if (sh.taken_ms != 0) {
      v.taken_shards.push_back(TakenShardView{sh.id, sh.owner, sh.taken_ms, sh.release_at_ms});
    }
  }
  std::stable_sort(v.shards.begin(), v.shards.end(), [](const ShardView& a, const ShardView& b) {
    return a.generation < b.generation;
  });
  return v;
}

}  // namespace rsc
