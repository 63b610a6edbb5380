#include "sim/mutants.h"

#include <algorithm>

#include "core/decide.h"

namespace rsc::sim {

const std::vector<MutantInfo>& Mutants() {
  static const std::vector<MutantInfo> kMutants = {
      {"assign_before_revoke", "K1", "S1",
       "a shard's new target owns it in the same write, before the old owner revoked it"},
      {"bump_version_on_rollback", "M2/M10", "S7",
       "a client version above the stored one is trusted: the stored version is raised to it"},
      {"k4_no_conflict_revoke", "K4", "S11",
       "shards a member claims that the state does not give it are left out of revokeShards"},
      {"k5_accept_stale_epoch", "K5", "S10",
       "a heartbeat with a member epoch below the recorded one is answered as current"},
      {"m5_drop_blockers", "M5", "S12",
       "shards members claim against the stored ownership during a round are not blocked"},
      {"m6_end_round_early", "M6", "S13",
       "a correction round ends as soon as no blocker is left (no sync, no member lease)"},
      {"m8_ignore_lineage", "M8", "S7",
       "a request's lineage is not compared with the stored history (divergence unseen)"},
      {"r32_answer_before_cas", "R3.2", "S6",
       "a heartbeat is answered from its decision although the CAS did not apply"},
      {"steady_renewal_unchecked", "R3.2", "S1",
       "a batch of steady heartbeats is answered from the cached aggregate although the renewal "
       "script refused it (the group changed, a member was due or a section ran)"},
      {"c1_lease_from_receive", "C1", "S1",
       "the consumer counts its assignment lease from the answer's arrival, not the send"},
      {"c8_release_taken_at_once", "C8", "S1",
       "a stuck shard taken from its owner is released 1 ms after the take, not once every "
       "grant on it ended"},
      {"c7_skip_takeover", "C7", "S4",
       "a new owner does not take over the previous owner's pending entries"},
      {"c4_handle_after_lease", "C4", "S1",
       "a reader goes on handling and XACKing its batch after its lease ended or an abandon"},
      {"rs3_children_early", "RS3", "S4",
       "every shard of a sealed generation is recorded complete at once, so children are "
       "assigned before their parents are read to their end"},
      {"pr5_ignore_routing_lease", "PR3/PR5", "S5",
       "the producer treats every routing answer as valid forever (never fails closed)"},
  };
  return kMutants;
}

const MutantInfo* FindMutant(std::string_view name) {
  for (const MutantInfo& m : Mutants()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

namespace {

bool Blocked(const GroupMetadata& m, int32_t shard) {
  if (!m.round) return false;
  return std::any_of(m.round->blockers.begin(), m.round->blockers.end(),
                     [&](const Blocker& b) { return b.shard.value() == shard; });
}

// A mutant that rewrites the state each decision writes.
class StateMutant : public Decider {
 public:
  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    return Mutated(stored, Decider::Heartbeat(stored, live, req, env));
  }
  Decision<Unit> Tick(const GroupMetadata& stored, const Liveness& live,
                      const Env& env) const override {
    return Mutated(stored, Decider::Tick(stored, live, env));
  }
  Decision<GroupView> Patch(const GroupMetadata& stored, const Liveness& live,
                            const PatchGroupRequest& req, const Env& env) const override {
    return Mutated(stored, Decider::Patch(stored, live, req, env));
  }
  Decision<Unit> Fence(const GroupMetadata& stored, const Liveness& live, const MemberId& member,
                       const Env& env) const override {
    return Mutated(stored, Decider::Fence(stored, live, member, env));
  }

 protected:
  // Rewrites `next` (a state the real decision is about to write; already stamped).
  virtual void Mutate(const GroupMetadata& stored, GroupMetadata& next) const = 0;

 private:
  template <class R>
  Decision<R> Mutated(const GroupMetadata& stored, Decision<R> d) const {
    if (d.next) Mutate(stored, *d.next);
    return d;
  }
};

// K1: the target owns a shard at once, whether or not the owner revoked it.
class AssignBeforeRevoke : public StateMutant {
  void Mutate(const GroupMetadata&, GroupMetadata& next) const override {
    for (ShardState& sh : next.shards) {
      if (!sh.target.empty() && sh.owner != sh.target && !Blocked(next, sh.id)) {
        sh.owner = sh.target;
        sh.revoke_since_ms = 0;
        sh.revoke_version = 0;
      }
    }
  }
};

// RS3: parents are recorded complete without looking in Redis (as RecordCompletions does
// for a real completion: no owner, no target), so their children are assigned at once.
class ChildrenEarly : public StateMutant {
  void Mutate(const GroupMetadata&, GroupMetadata& next) const override {
    for (ShardState& sh : next.shards) {
      if (sh.generation >= next.active_generation || sh.completed) continue;
      sh.completed = true;
      sh.owner.clear();
      sh.target.clear();
      sh.revoke_since_ms = 0;
      sh.revoke_version = 0;
      sh.taken_ms = 0;
      sh.release_at_ms = 0;
    }
  }
};

// C8: a taken shard is released almost at once, not after the last grant on it ended.
class ReleaseTakenAtOnce : public StateMutant {
  void Mutate(const GroupMetadata&, GroupMetadata& next) const override {
    for (ShardState& sh : next.shards) {
      if (sh.taken_ms != 0) sh.release_at_ms = std::min(sh.release_at_ms, sh.taken_ms + 1);
    }
  }
};

// M5: blockers this decision recorded are dropped.
class DropBlockers : public StateMutant {
  void Mutate(const GroupMetadata& stored, GroupMetadata& next) const override {
    if (!next.round) return;
    std::erase_if(next.round->blockers, [&](const Blocker& b) {
      if (!stored.round) return true;
      return std::none_of(
          stored.round->blockers.begin(), stored.round->blockers.end(),
          [&](const Blocker& o) { return o.shard == b.shard && o.member == b.member; });
    });
  }
};

// M6: a round without blockers is over — whether or not every member synced, and before a
// member lease passed. Applied to the state each decision starts from and to the state it
// writes, and the answer's status derived again without the round (as ViewFor would), so a
// retry decided on the written state gets the same answer.
class EndRoundEarly : public Decider {
  static GroupMetadata Ended(GroupMetadata m) {
    if (m.round && m.round->blockers.empty()) m.round.reset();
    return m;
  }
  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    Decision<HeartbeatResponse> d = Decider::Heartbeat(Ended(stored), live, req, env);
    if (d.next) d.next = Ended(*d.next);
    const GroupMetadata view = d.next ? *d.next : Ended(stored);
    if (d.response.ok() && !view.round) {
      HeartbeatResponse& r = d.response.value();
      const VersionCheck vc =
          CheckClientVersion(view, req.metadata_version, req.lineage, env.now_ms);
      const bool sync = vc == VersionCheck::kAhead || vc == VersionCheck::kDiverged ||
                        vc == VersionCheck::kUnproven;
      // The real status rule on the round-less view (a second copy of it here once missed
      // RS3's waiting children, and the mutant's runs deadlocked instead of being caught).
      if (r.member_epoch != -1) r.status = AnswerStatus(view, r, sync);
    }
    return d;
  }
  Decision<Unit> Tick(const GroupMetadata& stored, const Liveness& live,
                      const Env& env) const override {
    Decision<Unit> d = Decider::Tick(Ended(stored), live, env);
    if (d.next) d.next = Ended(*d.next);
    return d;
  }
};

// M2/M10: a client ahead of the store is believed; the decision runs on the store raised to
// the client's version (so it is answered like a current client).
class BumpVersionOnRollback : public Decider {
  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    if (req.metadata_version <= stored.version.value() || req.metadata_version >= kMaxCounter) {
      return Decider::Heartbeat(stored, live, req, env);
    }
    GroupMetadata trusted = stored;
    trusted.version = MetadataVersion(req.metadata_version);
    trusted.lineage = req.lineage;
    trusted.lineage_history = {LineageEntry{trusted.version, trusted.lineage}};
    return Decider::Heartbeat(trusted, live, req, env);
  }
};

// K4: shards a member holds against the state are not listed for it to drain.
class NoConflictRevoke : public Decider {
  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    Decision<HeartbeatResponse> d = Decider::Heartbeat(stored, live, req, env);
    if (!d.response.ok()) return d;
    const GroupMetadata& view = d.next ? *d.next : stored;
    HeartbeatResponse& r = d.response.value();
    std::erase_if(r.revoke_shards, [&](int32_t s) {
      const ShardState* sh = view.FindShard(s);
      return sh == nullptr || sh->owner != req.member_id.str();
    });
    if (r.status == HeartbeatStatus::kDrain && r.revoke_shards.empty()) {
      r.status = (!r.pending_shards.empty() || view.round) ? HeartbeatStatus::kRevokePending
                                                           : HeartbeatStatus::kOk;
    }
    return d;
  }
};

// K5: a member epoch below the recorded one is taken as the recorded one.
class AcceptStaleEpoch : public Decider {
  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    const Member* mem = stored.FindMember(req.member_id);
    if (mem == nullptr || req.member_epoch < 1 || req.member_epoch >= mem->epoch.value()) {
      return Decider::Heartbeat(stored, live, req, env);
    }
    HeartbeatRequest current = req;
    current.member_epoch = mem->epoch.value();
    return Decider::Heartbeat(stored, live, current, env);
  }
};

// M8: a version inside the lineage window is taken with the stored token, whatever it sent.
class IgnoreLineage : public Decider {
  Decision<HeartbeatResponse> Heartbeat(const GroupMetadata& stored, const Liveness& live,
                                        const HeartbeatRequest& req,
                                        const Env& env) const override {
    HeartbeatRequest r = req;
    for (const LineageEntry& e : stored.lineage_history) {
      if (e.version.value() == req.metadata_version) r.lineage = e.token;
    }
    return Decider::Heartbeat(stored, live, r, env);
  }
};

}  // namespace

std::unique_ptr<Decider> MakeMutantDecider(std::string_view name) {
  if (name == "assign_before_revoke") return std::make_unique<AssignBeforeRevoke>();
  if (name == "bump_version_on_rollback") return std::make_unique<BumpVersionOnRollback>();
  if (name == "k4_no_conflict_revoke") return std::make_unique<NoConflictRevoke>();
  if (name == "k5_accept_stale_epoch") return std::make_unique<AcceptStaleEpoch>();
  if (name == "m5_drop_blockers") return std::make_unique<DropBlockers>();
  if (name == "m6_end_round_early") return std::make_unique<EndRoundEarly>();
  if (name == "m8_ignore_lineage") return std::make_unique<IgnoreLineage>();
  if (name == "c8_release_taken_at_once") return std::make_unique<ReleaseTakenAtOnce>();
  if (name == "rs3_children_early") return std::make_unique<ChildrenEarly>();
  return nullptr;
}

void ClientMutant::OnHeartbeatAnswer(HeartbeatResponse& resp, TimeMs sent, TimeMs now) const {
  if (name == "c1_lease_from_receive" && now > sent) resp.assignment_lease_ms += now - sent;
}

void ClientMutant::OnRoutingAnswer(RoutingResponse& resp) const {
  if (name == "pr5_ignore_routing_lease") resp.routing_lease_ms = 24LL * 3600 * 1000;
}

bool ClientMutant::SkipsTakeover() const { return name == "c7_skip_takeover"; }

namespace {

// c4_handle_after_lease: the reader's lease check for the batch in hand always passes.
class HandlesAfterLease : public client::ReaderCore {
 public:
  using client::ReaderCore::ReaderCore;

 protected:
  bool MayHandle() const override { return true; }
};

}  // namespace

std::unique_ptr<client::ReaderCore> ClientMutant::MakeReader(client::ReaderCoreConfig config,
                                                             client::ReaderContext* context,
                                                             client::DeliveryStats* stats,
                                                             bool has_predecessor) const {
  if (name == "c4_handle_after_lease") {
    return std::make_unique<HandlesAfterLease>(std::move(config), context, stats, has_predecessor);
  }
  return std::make_unique<client::ReaderCore>(std::move(config), context, stats, has_predecessor);
}

bool ClientMutant::AnswersBeforeCas() const { return name == "r32_answer_before_cas"; }

bool ClientMutant::RenewsUnchecked() const { return name == "steady_renewal_unchecked"; }

}  // namespace rsc::sim
