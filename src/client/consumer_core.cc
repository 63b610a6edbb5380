#include "client/consumer_core.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/check.h"

namespace rsc::client {
namespace {

bool Contains(const std::vector<int32_t>& sorted, int32_t s) {
  return std::binary_search(sorted.begin(), sorted.end(), s);
}

std::vector<int32_t> SortedSet(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Errors whose remedy is another coordinator process (C6): the one we asked is going away
// or could not be reached.
bool SwitchesEndpoint(ErrorCode code) {
  return code == ErrorCode::kCoordinatorTerminating || code == ErrorCode::kUnknownResult;
}

}  // namespace

std::string_view LocalShardStateName(LocalShardState s) {
  switch (s) {
    case LocalShardState::kReading:
      return "READING";
    case LocalShardState::kDraining:
      return "DRAINING";
    case LocalShardState::kRevoked:
      return "REVOKED";
  }
  return "?";
}

std::string_view ConsumerPhaseName(ConsumerPhase p) {
  switch (p) {
    case ConsumerPhase::kIdle:
      return "idle";
    case ConsumerPhase::kJoining:
      return "joining";
    case ConsumerPhase::kMember:
      return "member";
    case ConsumerPhase::kLeaving:
      return "leaving";
    case ConsumerPhase::kLeft:
      return "left";
  }
  return "?";
}

ConsumerCore::ConsumerCore(ConsumerCoreOptions options)
    : options_(std::move(options)),
      heartbeat_interval_ms_(options_.initial_heartbeat_interval_ms),
      rng_state_(options_.jitter_seed) {
  RSC_CHECK(!options_.member_id.empty());
  RSC_CHECK(options_.endpoint_count >= 1);
  RSC_CHECK(options_.initial_heartbeat_interval_ms > 0);
  RSC_CHECK(options_.backoff_initial_ms > 0);
  RSC_CHECK(options_.backoff_max_ms >= options_.backoff_initial_ms);
  observed_version_ = options_.initial_metadata_version;
  observed_lineage_ = options_.initial_lineage;
}

// ── Events ───────────────────────────────────────────────────────────────────────

ConsumerActions ConsumerCore::Start(TimeMs now) {
  ConsumerActions out;
  if (phase_ != ConsumerPhase::kIdle) return out;
  last_now_ = now;
  phase_ = ConsumerPhase::kJoining;
  member_epoch_ = 0;
  next_heartbeat_ms_ = now;
  Finish(now, out);
  return out;
}

ConsumerActions ConsumerCore::Tick(TimeMs now) {
  ConsumerActions out;
  Begin(now, out);
  Finish(now, out);
  return out;
}

ConsumerActions ConsumerCore::OnHeartbeatResponse(const HeartbeatResponse& resp, TimeMs now) {
  ConsumerActions out;
  Begin(now, out);
  if (!in_flight_ || phase_ == ConsumerPhase::kIdle || phase_ == ConsumerPhase::kLeft) {
    ++counters_.stray_outcomes;
    Finish(now, out);
    return out;
  }
  const InFlight sent = *in_flight_;
  in_flight_.reset();
  ++counters_.responses_ok;
  ++counters_.responses_by_status[static_cast<int>(resp.status)];
  consecutive_failures_ = 0;
  last_error_.reset();
  last_status_ = resp.status;
  assignment_epoch_ = resp.assignment_epoch;
  if (resp.heartbeat_interval_ms > 0) heartbeat_interval_ms_ = resp.heartbeat_interval_ms;
  ApplyVersion(resp, out);

  if (resp.member_epoch == -1) {
    // Not (or no longer) in the group because this id left (docs/protocol.md §3.5/3.6).
    DropAll(out);
    if (sent.leave || phase_ == ConsumerPhase::kLeaving) {
      phase_ = ConsumerPhase::kLeft;
      out.left = true;
      CheckInvariants(now);
      return out;
    }
    // We never asked to leave: whatever the coordinator thinks, rejoin rather than run
    // without a membership.
    ++counters_.rejoins;
    phase_ = ConsumerPhase::kJoining;
    member_epoch_ = 0;
    next_heartbeat_ms_ = now;
    Finish(now, out);
    return out;
  }

  // A leave answer carries the epoch we held; keep ours (the leave sends -1 anyway).
  if (!sent.leave) {
    member_epoch_ = resp.member_epoch;
    if (phase_ == ConsumerPhase::kJoining) phase_ = ConsumerPhase::kMember;
  }
  NoteTakenShards(resp, lease_end_);
  // C1: the lease runs from the *send* time of the request this answers.
  lease_end_ = sent.sent_ms + resp.assignment_lease_ms;
  last_assigned_ = SortedSet(resp.assigned_shards);
  const bool lease_valid = now < *lease_end_;
  if (lease_valid) failed_closed_ = false;
  // C2: new shards only on OK, never while leaving, never on an answer that is already
  // past its own lease (a very slow answer).
  const bool may_start = resp.status == HeartbeatStatus::kOk && phase_ == ConsumerPhase::kMember &&
                         !sent.leave && lease_valid;
  // A late answer whose lease already ended fails closed *before* its shard lists are
  // applied, so no shard is both stopped and abandoned by one event.
  FailClosedIfLeaseEnded(now, out);
  ApplyShards(resp, may_start, out);
  next_heartbeat_ms_ = std::max(now, sent.sent_ms + heartbeat_interval_ms_);
  Finish(now, out);
  return out;
}

ConsumerActions ConsumerCore::OnHeartbeatError(ErrorCode code, TimeMs now) {
  ConsumerActions out;
  Begin(now, out);
  if (!in_flight_ || phase_ == ConsumerPhase::kIdle || phase_ == ConsumerPhase::kLeft) {
    ++counters_.stray_outcomes;
    Finish(now, out);
    return out;
  }
  in_flight_.reset();
  ++counters_.errors;
  ++consecutive_failures_;
  last_error_ = code;

  if (code == ErrorCode::kUnknownMemberId || code == ErrorCode::kFencedMemberEpoch) {
    // Drop all shards now (docs/protocol.md §4): someone else may be handed them as soon
    // as the coordinator's records allow, so nothing here may keep reading or processing.
    DropAll(out);
    if (phase_ == ConsumerPhase::kLeaving && code == ErrorCode::kUnknownMemberId) {
      // Shutting down and no longer a member: nothing is left to release.
      phase_ = ConsumerPhase::kLeft;
      out.left = true;
      CheckInvariants(now);
      return out;
    }
    ++counters_.rejoins;
    if (phase_ != ConsumerPhase::kLeaving) {
      phase_ = ConsumerPhase::kJoining;
      member_epoch_ = 0;
    }
    // Rejoin (or, when leaving, leave) at once; back off only if that keeps failing, e.g.
    // two live processes sharing one instanceId fencing each other.
    next_heartbeat_ms_ =
        now + (consecutive_failures_ <= 1 ? 0 : BackoffMs(consecutive_failures_ - 1));
  } else {
#if defined(RSC_MUTATION_RESUME_REVOKING_ON_FAILURE)
    // MUTANT (built only as sim/ rsc-sim-mutant-resume_revoking_on_failure, never into the
    // product): a failed heartbeat puts revoking shards back to reading (breaks C3).
    if (phase_ == ConsumerPhase::kMember && lease_end_ && now < *lease_end_) {
      for (auto& [s, st] : shards_) {
        if (st == LocalShardState::kReading || stopping_.contains(s)) continue;
        st = LocalShardState::kReading;
        last_assigned_.push_back(s);
        out.start.push_back(s);
      }
      last_assigned_ = SortedSet(last_assigned_);
    }
#endif
    // Everything else is retried; the lease is not renewed, so C4 fails us closed at lease
    // end if the failures last (GROUP_NOT_FOUND, METADATA_MISSING/UNREADABLE, 5xx, ...).
    ScheduleRetry(code, now);
  }
  Finish(now, out);
  return out;
}

ConsumerActions ConsumerCore::OnShardDrained(int32_t shard, TimeMs now) {
  ConsumerActions out;
  Begin(now, out);
  auto it = shards_.find(shard);
  if (stopping_.erase(shard) > 0) {
    // The abandoned work has stopped: a REVOKED for it is true from now on (and the shard
    // may be started again by a later OK). Report at once what waited for this.
    if (it != shards_.end() && it->second == LocalShardState::kRevoked) report_now_ = true;
    if (phase_ == ConsumerPhase::kLeaving && !HasDraining()) report_now_ = true;
  } else if (it == shards_.end() || it->second != LocalShardState::kDraining) {
    // A runtime duplicate: nothing to do.
    ++counters_.stray_outcomes;
  } else {
    ++counters_.shards_drained;
    MarkRevoked(shard);
  }
  Finish(now, out);
  return out;
}

ConsumerActions ConsumerCore::OnShardCompleted(int32_t shard, TimeMs now) {
  ConsumerActions out;
  Begin(now, out);
  // Only a shard we still hold: a completion found after a drain or a drop is stale, and
  // whoever holds the shard now reports it. A new completion is reported at once (RS3):
  // the children of the shard wait for it.
  if (shards_.contains(shard) && completed_.insert(shard).second) report_now_ = true;
  Finish(now, out);
  return out;
}

ConsumerActions ConsumerCore::Shutdown(TimeMs now) {
  ConsumerActions out;
  if (phase_ == ConsumerPhase::kIdle) {
    phase_ = ConsumerPhase::kLeft;
    out.left = true;
    return out;
  }
  Begin(now, out);
  if (phase_ == ConsumerPhase::kLeft || phase_ == ConsumerPhase::kLeaving) {
    Finish(now, out);
    return out;
  }
  phase_ = ConsumerPhase::kLeaving;
  for (auto& [s, st] : shards_) {
    if (st == LocalShardState::kReading) {
      st = LocalShardState::kDraining;
      out.stop.push_back(s);
    }
  }
  // Nothing to drain: leave at once. Otherwise ordinary heartbeats continue on their
  // schedule (so the member does not expire mid-drain) and the last drain triggers the
  // leave through report_now_.
  if (!HasDraining()) next_heartbeat_ms_ = now;
  Finish(now, out);
  return out;
}

// ── Queries ──────────────────────────────────────────────────────────────────────

TimeMs ConsumerCore::NextWakeupMs() const {
  TimeMs t = std::numeric_limits<TimeMs>::max();
  if (phase_ == ConsumerPhase::kIdle || phase_ == ConsumerPhase::kLeft) return t;
  if (!in_flight_) {
    t = (report_now_ && consecutive_failures_ == 0) ? std::min(last_now_, next_heartbeat_ms_)
                                                    : next_heartbeat_ms_;
  }
  const bool holding = std::any_of(shards_.begin(), shards_.end(), [](const auto& entry) {
    return entry.second != LocalShardState::kRevoked;
  });
  if (lease_end_ && holding) t = std::min(t, *lease_end_);
  for (const auto& [s, end] : taken_lease_) {
    auto it = shards_.find(s);
    if (it != shards_.end() && it->second != LocalShardState::kRevoked && !stopping_.contains(s)) {
      t = std::min(t, end);
    }
  }
  return t;
}

bool ConsumerCore::MayRead(int32_t shard, TimeMs now) const {
  auto it = shards_.find(shard);
  return it != shards_.end() && it->second == LocalShardState::kReading && MayProcess(shard, now);
}

int64_t ConsumerCore::ReadBudgetMs(int32_t shard, TimeMs now) const {
  return MayRead(shard, now) ? *LeaseEndOf(shard) - now : 0;
}

bool ConsumerCore::MayProcess(int32_t shard, TimeMs now) const {
  const std::optional<TimeMs> end = LeaseEndOf(shard);
  return end && now < *end;
}

std::optional<TimeMs> ConsumerCore::LeaseEndOf(int32_t shard) const {
  auto it = taken_lease_.find(shard);
  if (it == taken_lease_.end() || !lease_end_) return lease_end_;
  return std::min(*lease_end_, it->second);
}

std::optional<LocalShardState> ConsumerCore::StateOf(int32_t shard) const {
  auto it = shards_.find(shard);
  if (it == shards_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> ConsumerCore::ReadingShards() const {
  std::vector<int32_t> v;
  for (const auto& [s, st] : shards_) {
    if (st == LocalShardState::kReading) v.push_back(s);
  }
  return v;
}

ConsumerStatus ConsumerCore::Status(TimeMs now) const {
  ConsumerStatus st;
  st.phase = phase_;
  st.member_epoch = member_epoch_;
  st.assignment_epoch = assignment_epoch_;
  st.metadata_version = observed_version_;
  st.lineage = observed_lineage_;
  st.lease_remaining_ms = lease_end_ ? std::max<int64_t>(0, *lease_end_ - now) : 0;
  st.failed_closed = failed_closed_;
  for (const auto& [s, state] : shards_) {
    switch (state) {
      case LocalShardState::kReading:
        st.reading.push_back(s);
        break;
      case LocalShardState::kDraining:
        st.draining.push_back(s);
        break;
      case LocalShardState::kRevoked:
        st.revoked.push_back(s);
        break;
    }
  }
  st.stopping.assign(stopping_.begin(), stopping_.end());
  for (const auto& [s, end] : taken_lease_) st.taken.push_back(s);
  st.revoking_count = static_cast<int>(st.draining.size() + st.revoked.size());
  st.endpoint = endpoint_;
  st.consecutive_failures = consecutive_failures_;
  st.last_error = last_error_;
  st.last_status = last_status_;
  st.counters = counters_;
  return st;
}

// ── Internals ────────────────────────────────────────────────────────────────────

void ConsumerCore::Begin(TimeMs now, ConsumerActions& out) {
  RSC_CHECK(now >= last_now_);  // the runtime's clock is monotonic
  last_now_ = now;
  FailClosedIfLeaseEnded(now, out);
}

void ConsumerCore::Finish(TimeMs now, ConsumerActions& out) {
  // A taken shard's own lease is kept until the shard is gone here (forgotten, work stopped).
  std::erase_if(taken_lease_, [&](const auto& kv) {
    return !shards_.contains(kv.first) && !stopping_.contains(kv.first);
  });
  MaybeSendHeartbeat(now, out);
  CheckInvariants(now);
}

void ConsumerCore::FailClosedIfLeaseEnded(TimeMs now, ConsumerActions& out) {
  AbandonTakenShards(now, out);
  if (!lease_end_ || now < *lease_end_) return;
  if (!failed_closed_) {
    failed_closed_ = true;
    ++counters_.lease_expirations;
  }
  // C4: stop every read. READING shards are simply gone: the coordinator still records
  // us as owner, and its next answer either re-assigns them (fresh start on OK) or lists
  // them in revokeShards (then REVOKED at once). DRAINING shards lose their in-flight work
  // too — it must not overlap a new owner's — which is what "abandon" means in C3, so they
  // are REVOKED from here on.
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (it->second == LocalShardState::kRevoked) {
      ++it;
      continue;
    }
    out.abandon.push_back(it->first);
    stopping_.insert(it->first);
    ++counters_.shards_abandoned;
    if (it->second == LocalShardState::kReading) {
      it = shards_.erase(it);
    } else {
      it->second = LocalShardState::kRevoked;
      report_now_ = true;
      ++it;
    }
  }
}

void ConsumerCore::NoteTakenShards(const HeartbeatResponse& resp,
                                   std::optional<TimeMs> lease_before) {
  // C8: every answer that granted a taken shard came before the first one that lists it
  // taken, so the lease we held before this answer is the last grant on it. Only a shard
  // we hold has anything to bound.
  for (int32_t s : resp.taken_shards) {
    if (taken_lease_.contains(s) || !lease_before) continue;
    auto it = shards_.find(s);
    const bool held = (it != shards_.end() && it->second != LocalShardState::kRevoked);
    if (held || stopping_.contains(s)) taken_lease_[s] = *lease_before;
  }
}

void ConsumerCore::AbandonTakenShards(TimeMs now, ConsumerActions& out) {
  // C8: a taken shard's own lease ended: abandon it as at a member lease end (C4) — no
  // further handler call, no XACK — and report it REVOKED once its work has stopped. The
  // member's other shards are not touched.
  for (const auto& [s, end] : taken_lease_) {
    if (now < end || stopping_.contains(s)) continue;
    auto it = shards_.find(s);
    if (it == shards_.end() || it->second == LocalShardState::kRevoked) continue;
    out.abandon.push_back(s);
    stopping_.insert(s);
    ++counters_.shards_abandoned;
    ++counters_.shards_taken;
    if (it->second == LocalShardState::kReading) {
      shards_.erase(it);
    } else {
      it->second = LocalShardState::kRevoked;
      report_now_ = true;
    }
  }
}

void ConsumerCore::MaybeSendHeartbeat(TimeMs now, ConsumerActions& out) {
  if (phase_ == ConsumerPhase::kIdle || phase_ == ConsumerPhase::kLeft) return;
  if (in_flight_) return;
  // A fresh REVOKED is worth a heartbeat of its own (its new owner waits for it), but it
  // does not cut a backoff short.
  if (report_now_ && consecutive_failures_ == 0) {
    next_heartbeat_ms_ = std::min(next_heartbeat_ms_, now);
  }
  if (now < next_heartbeat_ms_) return;
  const bool leave = phase_ == ConsumerPhase::kLeaving && !HasDraining();
  HeartbeatRequest req = BuildRequest();
  if (leave) {
    // No read may follow the first leave: nothing is READING (Shutdown drained it all and
    // leaving starts nothing) and nothing is DRAINING (checked above).
    RSC_CHECK(req.owned_shards.empty());
    req.member_epoch = -1;
    leave_started_ = true;
  }
  in_flight_ = InFlight{now, leave};
  report_now_ = false;
  ++counters_.heartbeats_sent;
  out.send = SendHeartbeat{std::move(req), endpoint_, leave};
}

HeartbeatRequest ConsumerCore::BuildRequest() const {
  HeartbeatRequest req;
  req.member_id = options_.member_id;
  req.member_epoch = member_epoch_;
  req.instance_id = options_.instance_id;
  req.assignment_epoch = assignment_epoch_;
  req.metadata_version = observed_version_;  // C5: highest observed (or synced) pair
  req.lineage = observed_lineage_;
  req.features = {kFeatureLayoutV2, kFeatureShardLease};  // sorted, as parsed
  req.completed_shards.assign(completed_.begin(), completed_.end());
  std::map<int32_t, RevokeState> revoking;
  for (const auto& [s, st] : shards_) {
    switch (st) {
      case LocalShardState::kReading:
        req.owned_shards.push_back(s);
        break;
      case LocalShardState::kDraining:
        revoking[s] = RevokeState::kDraining;
        break;
      case LocalShardState::kRevoked:
        revoking[s] = RevokeState::kRevoked;
        break;
    }
  }
  // Abandoned work that has not stopped yet is in-flight work: DRAINING, not REVOKED.
  for (int32_t s : stopping_) revoking[s] = RevokeState::kDraining;
  for (const auto& [s, state] : revoking) req.revoking_shards.push_back({s, state});
  return req;
}

void ConsumerCore::ApplyShards(const HeartbeatResponse& resp, bool may_start,
                               ConsumerActions& out) {
  const std::vector<int32_t> revoke = SortedSet(resp.revoke_shards);
  const std::vector<int32_t> taken = SortedSet(resp.taken_shards);
  // C1/C3/M4: a shard we read that is revoked or no longer assigned stops new reads now;
  // in-flight work settles before it is reported REVOKED. Whatever the status says. So
  // does a shard taken from us (C8).
  for (auto& [s, st] : shards_) {
    if (st == LocalShardState::kReading &&
        (Contains(revoke, s) || !AssignedInLast(s) || Contains(taken, s))) {
      st = LocalShardState::kDraining;
      out.stop.push_back(s);
    }
  }
  // RS3: a completion is reported until an answer no longer lists the shard.
  std::erase_if(completed_, [&](int32_t s) {
    return !Contains(resp.assigned_shards, s) && !Contains(resp.pending_shards, s) &&
           !Contains(revoke, s);
  });
  // C3: REVOKED is repeated until a successful answer stops listing the shard.
  std::erase_if(shards_, [&](const auto& kv) {
    return kv.second == LocalShardState::kRevoked && !Contains(revoke, kv.first);
  });
  // C3 clarification: a revoked shard we do not hold (fenced, restarted, lease ended) is
  // released already — say so at once, or its new owner waits for our expiry.
  for (int32_t s : revoke) {
    if (!shards_.contains(s)) MarkRevoked(s);
  }
  // C2: start what an OK assigns and we do not hold. A shard still DRAINING stays so
  // (its old work has to settle first); once REVOKED and unlisted it starts on a later OK.
  if (!may_start) return;
  for (int32_t s : last_assigned_) {
    if (shards_.contains(s) || Contains(revoke, s) || stopping_.contains(s) || Contains(taken, s)) {
      continue;
    }
    shards_[s] = LocalShardState::kReading;
    taken_lease_.erase(s);  // a take applied to the holding that ended; this one is fresh
    ++counters_.shards_started;
    out.start.push_back(s);  // fresh start: takeover first (C7)
  }
}

void ConsumerCore::ApplyVersion(const HeartbeatResponse& resp, ConsumerActions& out) {
  // C5 + M4: raise on any answer, replace (even downwards) on SYNC_METADATA — a client
  // that keeps reporting the lost higher version never counts as synced.
  const bool take =
      resp.status == HeartbeatStatus::kSyncMetadata || resp.metadata_version >= observed_version_;
  if (!take) return;
  if (resp.metadata_version == observed_version_ && resp.lineage == observed_lineage_) return;
  observed_version_ = resp.metadata_version;
  observed_lineage_ = resp.lineage;
  out.version_changed = ObservedVersionChanged{observed_version_, observed_lineage_};
}

void ConsumerCore::DropAll(ConsumerActions& out) {
  for (const auto& [s, st] : shards_) {
    if (st != LocalShardState::kRevoked) {
      out.abandon.push_back(s);
      stopping_.insert(s);
      ++counters_.shards_abandoned;
    }
  }
  shards_.clear();
  completed_.clear();
  last_assigned_.clear();
  lease_end_.reset();
  failed_closed_ = false;
  report_now_ = false;
}

void ConsumerCore::MarkRevoked(int32_t shard) {
  shards_[shard] = LocalShardState::kRevoked;
  // A STOPPING shard is still reported DRAINING: its REVOKED goes out when it stops.
  if (!stopping_.contains(shard)) report_now_ = true;
}

void ConsumerCore::ScheduleRetry(ErrorCode code, TimeMs now) {
  int64_t delay = 0;
  if (SwitchesEndpoint(code)) {
    // C6: retry at once on the next endpoint; once every endpoint has been tried since the
    // last success, back off (a rolling update or an outage affects them all).
    const int n = options_.endpoint_count;
    if (n > 1) {
      endpoint_ = (endpoint_ + 1) % n;
      ++counters_.endpoint_switches;
    }
    const int free_tries = n - 1;
    delay = consecutive_failures_ <= free_tries ? 0 : BackoffMs(consecutive_failures_ - free_tries);
  } else {
    delay = BackoffMs(consecutive_failures_);
  }
  next_heartbeat_ms_ = now + delay;
}

int64_t ConsumerCore::BackoffMs(int attempt) {
  RSC_CHECK(attempt >= 1);
  const int shift = std::min(attempt - 1, 30);
  int64_t d = options_.backoff_initial_ms;
  for (int i = 0; i < shift && d < options_.backoff_max_ms; ++i) d *= 2;
  d = std::min(d, options_.backoff_max_ms);
  // Equal jitter: uniform in [d/2, d], so retries of many consumers spread out while the
  // delay stays bounded by backoff_max_ms.
  const int64_t lo = d / 2;
  const uint64_t span = static_cast<uint64_t>(d - lo) + 1;
  return lo + static_cast<int64_t>(NextRandom() % span);
}

uint64_t ConsumerCore::NextRandom() {
  // splitmix64: tiny, seedable, good enough for jitter; keeps runs replayable.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool ConsumerCore::AssignedInLast(int32_t shard) const { return Contains(last_assigned_, shard); }

bool ConsumerCore::HasDraining() const {
  if (!stopping_.empty()) return true;
  for (const auto& [s, st] : shards_) {
    if (st == LocalShardState::kDraining) return true;
  }
  return false;
}

void ConsumerCore::CheckInvariants(TimeMs now) const {
  for (const auto& [s, st] : shards_) {
    if (st != LocalShardState::kReading) continue;
    RSC_CHECK(!stopping_.contains(s));  // never started while abandoned work runs
    // C1: assigned by the latest successful answer and inside its lease.
    RSC_CHECK(AssignedInLast(s));
    RSC_CHECK(lease_end_.has_value() && now < *lease_end_);
    RSC_CHECK(MayProcess(s, now));  // a taken shard is never READING past its own lease
    // Only a member reads: not while joining, leaving (no read after the leave), or left.
    RSC_CHECK(phase_ == ConsumerPhase::kMember);
    RSC_CHECK(!leave_started_);
  }
}

}  // namespace rsc::client
