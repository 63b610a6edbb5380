#include "sim/checkers.h"

// The rules are stated precisely in checkers.h; this file follows them in the same order:
// holdings and leases (S1, S2, L1, L2), deliveries (S3, S4, S5), coordinator (S6–S9).

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "sim/delivery_check.h"

namespace rsc::sim {

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
// How many (version, lineage) answers a process remembers for M8: aliasing concerns the
// versions near the highest one it reports, and this keeps memory bounded per process.
constexpr size_t kRememberedAnswers = 256;

int64_t Bound(int64_t lease_end) { return lease_end < 0 ? kUnbounded : lease_end; }

// t + d without overflow (stamps come from logs; a bound is never negative).
int64_t Plus(int64_t t, int64_t d) {
  int64_t r = 0;
  if (__builtin_add_overflow(t, d, &r)) return d > 0 ? kUnbounded : INT64_MIN;
  return r;
}

std::string LeaseText(int64_t lease_end) {
  return lease_end < 0 ? std::string("unbounded") : std::to_string(lease_end);
}

// Answers built from stored state (the rest of the statuses are error codes).
bool IsAnswer(const std::string& status) {
  return status == "OK" || status == "REVOKE_PENDING" || status == "DRAIN" ||
         status == "SYNC_METADATA";
}

// A heartbeat answer that tells a process the truth of the stored state.
bool Untaints(const std::string& status) {
  return status.empty() || IsAnswer(status) || status == "UNKNOWN_MEMBER_ID" ||
         status == "FENCED_MEMBER_EPOCH";
}

bool IsRollback(const std::string& fault) {
  return fault == "failover" || fault == "snapshot_restore" || fault == "rollback";
}

struct Hold {
  int64_t acquire_t = 0;
  int64_t lease_end = -1;
  // Set by kLease(P,s) with detail "taken" (C8): the window has its own, final lease, which
  // member-wide kLease events no longer extend.
  bool pinned = false;
};

struct Proc {
  std::string member;
  std::string instance;
  bool live = true;
  int64_t lease_end = -1;  // member-wide assignment lease (kLease with shard -1)
  bool tainted = false;
  int64_t taint_t = 0;
  // Send time of the latest heartbeat answered from stored state (S2: a report it carried).
  int64_t answered_sent_us = -1;
  // The latest end of any assignment lease a coordinator granted this process (an answered
  // heartbeat's sent_us + grant_ms), -1 while no grant is known: a lease the process
  // computes beyond it is one it was never given (C1).
  int64_t grant_end = -1;
  // The same for routing (a routing answer's sent_us + routingLeaseMs): S5.
  int64_t routing_grant_end = -1;
  // The assignedShards of its latest answered heartbeat, when logged: a renewal confirms a
  // rollback-marked window only for a shard the answer still assigns (one it was told to
  // drain stays marked while it drains — the documented window of a lost grant).
  bool assigned_known = false;
  std::set<int32_t> assigned;
  std::map<int32_t, Hold> holds;
  std::map<int64_t, std::string> answers;  // M8: version → lineage answered
};

enum class End { kHolding, kReleased, kCrashed, kStopped };

// One holding of a shard, kept after it ends until another process acquires the shard
// (S2 judges the handoff against it).
struct Record {
  std::string proc;
  std::string member;
  std::string instance;
  int64_t acquire_t = 0;
  End end = End::kHolding;
  std::string detail;
  int64_t end_t = 0;
  int64_t lease_end = -1;    // at its end (while holding: see Proc::holds)
  bool rolled_back = false;  // a rollback happened while its lease could still run
};

struct ShardState {
  std::vector<Record> records;
  std::vector<std::pair<std::string, std::string>> judged;  // overlapping pairs, judged once
  // Overlapping pairs a rollback excused so far: judged again whenever an excuse of one of
  // them lifts (it learns the truth, or a renewal confirms its grant) while both still hold.
  std::vector<std::pair<std::string, std::string>> excused;
  int32_t holders = 0;
};

}  // namespace

struct Checker::State {
  explicit State(CheckerConfig c) : cfg(std::move(c)) {}

  CheckerConfig cfg;
  CheckerCounters n;
  size_t index = 0;  // of the event being added
  int64_t now = std::numeric_limits<int64_t>::min();
  bool finished = false;
  std::optional<Violation> out;  // the first violation of the event being added

  std::unordered_map<std::string, Proc> procs;
  std::unordered_map<int32_t, ShardState> shards;
  std::unordered_map<std::string, int64_t> fenced_at;  // member → latest kFault "fence"
  std::set<int32_t> excused_overlap;                   // shards in an S1 overlap a rollback excused
  // instance id → (proc, t) of the latest kStart carrying it (static membership successors).
  std::unordered_map<std::string, std::pair<std::string, int64_t>> instance_started;
  DeliveryCheck delivery;
  // S6: commits by revision, each (version, lineage); S6 retries: identity → resp_digest.
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, std::string>>> commits;
  std::unordered_map<std::string, std::string> responses;
  bool key_deleted = false;
  int64_t key_deleted_t = 0;
  std::set<std::string> in_mutex;
  // L1
  int64_t single_held = 0;   // judged shards (Judged) held by exactly one process
  std::set<int32_t> l1_ids;  // empty: 0..cfg.shards-1
  bool l1_pending = false;
  bool healed = false;  // a heal was seen: later faults re-arm L1
  int64_t l1_heal_t = 0;
  int64_t l1_deadline = 0;
  size_t l1_index = 0;
  // L2
  bool coords_down = false;
  int64_t coords_down_t = 0;

  void Report(std::string invariant, std::string message, int64_t t) {
    if (!out) out = Violation{std::move(invariant), std::move(message), t, index};
  }

  Proc& Touch(const HistEvent& e) {
    Proc& p = procs[e.proc];
    const bool consumer = e.kind == HistKind::kStart || e.kind == HistKind::kAcquire ||
                          e.kind == HistKind::kLease || e.kind == HistKind::kRead ||
                          e.kind == HistKind::kDeliver || e.kind == HistKind::kAck ||
                          e.kind == HistKind::kRelease || e.kind == HistKind::kHeartbeat;
    if (consumer && p.member.empty()) p.member = e.member;
    return p;
  }

  // The shards L1 judges: 0..cfg.shards-1, or after a reshard the ids a kFault "shards"
  // named (the stream's newest generation; sealed ones are read to their end, owned by none).
  bool Judged(int32_t s) const {
    return l1_ids.empty() ? s >= 0 && s < cfg.shards : l1_ids.contains(s);
  }
  int32_t JudgedCount() const {
    return l1_ids.empty() ? cfg.shards : static_cast<int32_t>(l1_ids.size());
  }
  std::vector<int32_t> JudgedIds() const {
    if (!l1_ids.empty()) return {l1_ids.begin(), l1_ids.end()};
    std::vector<int32_t> out;
    for (int32_t s = 0; s < cfg.shards; ++s) out.push_back(s);
    return out;
  }
  void SetJudged(const std::string& ids) {
    l1_ids.clear();
    size_t start = 0;
    while (start < ids.size()) {
      size_t comma = ids.find(',', start);
      if (comma == std::string::npos) comma = ids.size();
      l1_ids.insert(static_cast<int32_t>(std::stol(ids.substr(start, comma - start))));
      start = comma + 1;
    }
    single_held = 0;
    for (const auto& [id, sh] : shards) {
      if (Judged(id) && sh.holders == 1) ++single_held;
    }
  }

  void AddHolders(int32_t s, ShardState& sh, int32_t delta) {
    const int32_t before = sh.holders;
    sh.holders += delta;
    if (sh.holders <= 1) excused_overlap.erase(s);
    if (!Judged(s)) return;
    if (before == 1) --single_held;
    if (sh.holders == 1) ++single_held;
  }

  // ── S1 ──
  void Overlap(const std::string& p, const std::string& q, int32_t s, int64_t t,
               std::string_view what) {
    ShardState& sh = shards[s];
    auto pair = std::minmax(p, q);
    std::pair<std::string, std::string> key(pair.first, pair.second);
    if (std::find(sh.judged.begin(), sh.judged.end(), key) != sh.judged.end()) return;
    const bool was_excused =
        std::find(sh.excused.begin(), sh.excused.end(), key) != sh.excused.end();
    const Proc& pp = procs[p];
    const Proc& qq = procs[q];
    // A holding a rollback marked (and no renewal confirmed since) is excused like a tainted
    // holder: an answer after the rollback untaints the process, but work it started under
    // the lost grant may still be stopping (found by the simulator, seed 1153).
    bool marked = false;
    for (const Record& r : sh.records) {
      if ((r.proc == p || r.proc == q) && r.end == End::kHolding && r.rolled_back) marked = true;
    }
    if (pp.tainted || qq.tainted || marked) {
      if (!was_excused) {
        ++n.overlaps_excused;
        sh.excused.push_back(std::move(key));
      }
      excused_overlap.insert(s);  // S4 is not judged on s while the overlap lasts
      return;
    }
    std::erase(sh.excused, key);
    sh.judged.push_back(std::move(key));
    const Hold& qh = qq.holds.at(s);
    Report("S1",
           fmt::format("split ownership of shard {}: {} {} at {} while {} holds it "
                       "(acquired at {}, lease until {})",
                       s, p, what, t, q, qh.acquire_t, LeaseText(qh.lease_end)),
           t);
  }

  // `name` holds `s` under a grant a rollback marked (see S4 in checkers.h).
  bool UnderALostGrant(const std::string& name, int32_t s) const {
    auto it = shards.find(s);
    if (it == shards.end()) return false;
    for (const Record& r : it->second.records) {
      if (r.proc == name && r.end == End::kHolding && r.rolled_back) return true;
    }
    return false;
  }

  // An excuse of `name` lifted (it is untainted, or a renewal cleared its window's mark):
  // every overlap of it a rollback excused is judged again if both windows are still active —
  // a split that began inside a rollback's window must not go on unjudged forever.
  void Rejudge(const std::string& name, int64_t t) {
    for (auto& [s, sh] : shards) {
      std::vector<std::pair<std::string, std::string>> again;
      for (const auto& pr : sh.excused) {
        if (pr.first == name || pr.second == name) again.push_back(pr);
      }
      for (const auto& [a, b] : again) {
        const Proc& pa = procs[a];
        const Proc& pb = procs[b];
        auto ha = pa.holds.find(s);
        auto hb = pb.holds.find(s);
        if (ha == pa.holds.end() || hb == pb.holds.end()) continue;
        if (t >= Bound(ha->second.lease_end) || t >= Bound(hb->second.lease_end)) continue;
        Overlap(a, b, s, t, "still holds it after the rollback's excuse ended");
      }
    }
  }

  // Every other process with an active window on s at t overlaps p's (now active) window.
  void CheckOthersActive(const std::string& p, int32_t s, int64_t t, std::string_view what) {
    ShardState& sh = shards[s];
    std::vector<std::string> active;
    for (const Record& r : sh.records) {
      if (r.proc == p || r.end != End::kHolding) continue;
      if (t < Bound(procs[r.proc].holds.at(s).lease_end)) active.push_back(r.proc);
    }
    for (const std::string& q : active) Overlap(p, q, s, t, what);
  }

  void SetWindowLease(const std::string& name, Proc& p, int32_t s, int64_t lease_end, int64_t t) {
    Hold& h = p.holds.at(s);
    const int64_t old = h.lease_end;
    h.lease_end = lease_end;
    bool cleared = false;
    if (!p.tainted && (!p.assigned_known || p.assigned.count(s) > 0)) {
      // A renewal decided after every rollback confirms the grant (K4 would have revoked it).
      for (Record& r : shards[s].records) {
        if (r.proc == name && r.end == End::kHolding && r.rolled_back) {
          r.rolled_back = false;
          cleared = true;
        }
      }
    }
    if (t >= Bound(old) && t < Bound(lease_end)) {
      CheckOthersActive(name, s, t, "resumed by a lease");
    }
    if (cleared) Rejudge(name, t);
  }

  // ── S2 ──
  bool Justified(const Record& r, const Proc& acquirer, int64_t t) const {
    if (r.end == End::kReleased &&
        (r.detail == "drained" || r.detail == "revoked" || r.detail == "fenced")) {
      return true;
    }
    if (Bound(r.lease_end) <= t) return true;
    // Released (here: abandoned at lease end, or dropped) and then a heartbeat sent after
    // the release was answered: that heartbeat reported the shard REVOKED if the store still
    // gave it to Q (C3: a shard it does not read is reported at once), so the handoff can
    // follow it before Q's member lease ends. Found by a 10-minute chaos run (seed 31): a
    // late OK renewed Q's lease just before its abandoned readers ended.
    if (r.end == End::kReleased) {
      auto q = procs.find(r.proc);
      if (q != procs.end() && q->second.answered_sent_us > r.end_t) return true;
    }
    if (!r.member.empty()) {
      auto f = fenced_at.find(r.member);
      if (f != fenced_at.end() && f->second >= r.acquire_t) return true;
    }
    if ((r.end == End::kCrashed || r.end == End::kStopped) && !r.instance.empty()) {
      if (r.instance == acquirer.instance) return true;
      // A successor with the dead holder's instance id took its member's place (and with it
      // the shard) after the holder got the shard; the successor may have released it to
      // someone else without ever reading it (found by the simulator, seed 57).
      auto it = instance_started.find(r.instance);
      if (it != instance_started.end() && it->second.first != r.proc &&
          it->second.second >= r.acquire_t) {
        return true;
      }
    }
    return false;
  }

  static std::string_view EndText(End e) {
    switch (e) {
      case End::kHolding:
        return "still holds it";
      case End::kReleased:
        return "released it";
      case End::kCrashed:
        return "crashed";
      case End::kStopped:
        return "stopped";
    }
    return "";
  }

  void OnAcquire(const std::string& name, Proc& p, const HistEvent& e) {
    const int32_t s = e.shard;
    const int64_t t = e.t_us;
    if (s < 0) return;
    if (coords_down && cfg.max_assignment_lease_us > 0 && e.lease_end_us >= 0 &&
        e.lease_end_us > Plus(coords_down_t, cfg.max_assignment_lease_us)) {
      Report("L2",
             fmt::format("{} acquired shard {} at {} with a lease until {}, but the "
                         "coordinators have been down since {}",
                         name, s, t, e.lease_end_us, coords_down_t),
             t);
    }
    const int64_t lease = e.lease_end_us >= 0 ? e.lease_end_us : p.lease_end;
    CheckLeaseGranted(name, p, lease, t);
    if (p.holds.count(s)) {  // acquired again while holding: a lease update
      SetWindowLease(name, p, s, lease, t);
      return;
    }
    ShardState& sh = shards[s];
    bool handoff = false;
    for (const Record& r : sh.records) {
      if (r.proc == name) continue;
      handoff = true;
      if (r.end == End::kHolding) {
        // An active holder is an overlap (S1); an expired one justifies the handoff.
        continue;
      }
      if (Justified(r, p, t)) continue;
      if (p.tainted || procs[r.proc].tainted || r.rolled_back) {
        ++n.handoffs_excused;
        continue;
      }
      Report("S2",
             fmt::format("unjustified handoff of shard {}: {} acquired it at {} but the previous "
                         "holder {} {} at {} ({}) with a lease until {}, was not fenced, and did "
                         "not report it drained/revoked",
                         s, name, t, r.proc, EndText(r.end), r.end_t,
                         r.detail.empty() ? "-" : r.detail, LeaseText(r.lease_end)),
             t);
    }
    CheckOthersActive(name, s, t, "acquired it");
    if (handoff) ++n.handoffs;
    std::erase_if(sh.records, [&](const Record& r) { return r.end != End::kHolding; });
    Record rec;
    rec.proc = name;
    rec.member = p.member;
    rec.instance = p.instance;
    rec.acquire_t = t;
    // Acquired while tainted: under a grant from before the rollback (an answer decided
    // after it would have untainted P first), which the rollback may have lost — marked like
    // the holdings that were running at the rollback.
    rec.rolled_back = p.tainted;
    sh.records.push_back(std::move(rec));
    p.holds[s] = Hold{t, lease};
    AddHolders(s, sh, +1);
  }

  void EndHold(const std::string& name, Proc& p, int32_t s, End end, const std::string& detail,
               int64_t t) {
    auto it = p.holds.find(s);
    if (it == p.holds.end()) return;
    const int64_t lease = it->second.lease_end;
    p.holds.erase(it);
    ShardState& sh = shards[s];
    for (Record& r : sh.records) {
      if (r.proc != name || r.end != End::kHolding) continue;
      r.end = end;
      r.detail = detail;
      r.end_t = t;
      r.lease_end = lease;
    }
    std::erase_if(sh.judged, [&](const auto& pr) { return pr.first == name || pr.second == name; });
    std::erase_if(sh.excused,
                  [&](const auto& pr) { return pr.first == name || pr.second == name; });
    AddHolders(s, sh, -1);
    ++n.intervals;
  }

  void EndAll(const std::string& name, Proc& p, End end, const std::string& detail, int64_t t) {
    std::vector<int32_t> held;
    for (const auto& [s, h] : p.holds) held.push_back(s);
    for (int32_t s : held) EndHold(name, p, s, end, detail, t);
  }

  void OnLease(const std::string& name, Proc& p, const HistEvent& e) {
    if (coords_down && cfg.max_assignment_lease_us > 0 &&
        Bound(e.lease_end_us) > Plus(coords_down_t, cfg.max_assignment_lease_us)) {
      Report("L2",
             fmt::format("{} extended its lease to {} at {}, but the coordinators have "
                         "been down since {}",
                         name, LeaseText(e.lease_end_us), e.t_us, coords_down_t),
             e.t_us);
    }
    CheckLeaseGranted(name, p, e.lease_end_us, e.t_us);
    if (e.shard >= 0) {
      auto it = p.holds.find(e.shard);
      if (it == p.holds.end()) return;
      if (e.detail == "taken") it->second.pinned = true;
      SetWindowLease(name, p, e.shard, e.lease_end_us, e.t_us);
      return;
    }
    p.lease_end = e.lease_end_us;
    for (const auto& [s, h] : p.holds) {
      if (!h.pinned) SetWindowLease(name, p, s, e.lease_end_us, e.t_us);
    }
  }

  void OnRead(const std::string& name, Proc& p, const HistEvent& e) {
    const int64_t t = e.t_us;
    if (coords_down && cfg.max_assignment_lease_us > 0 &&
        t >= Plus(coords_down_t, cfg.max_assignment_lease_us)) {
      Report("L2",
             fmt::format("{} read shard {} at {}, but the coordinators have been down "
                         "since {} (assignment leases are at most {} µs)",
                         name, e.shard, t, coords_down_t, cfg.max_assignment_lease_us),
             t);
    }
    if (e.shard < 0) return;
    auto it = p.holds.find(e.shard);
    if (it == p.holds.end()) {
      Report("S1", fmt::format("{} read shard {} at {} without holding it", name, e.shard, t), t);
      return;
    }
    if (t >= Bound(it->second.lease_end)) {
      Report("S1",
             fmt::format("read outside lease: {} read shard {} at {} but its lease ended "
                         "at {}",
                         name, e.shard, t, it->second.lease_end),
             t);
      return;
    }
    CheckOthersActive(name, e.shard, t, "read it");
  }

  // C4: a handler call only inside the holding window's lease.
  void OnDeliverLease(const std::string& name, Proc& p, const HistEvent& e) {
    auto it = p.holds.find(e.shard);
    if (it == p.holds.end()) {
      Report("S1",
             fmt::format("{} handled entry {} of shard {} at {} without holding it", name, e.id,
                         e.shard, e.t_us),
             e.t_us);
    } else if (e.t_us >= Bound(it->second.lease_end)) {
      Report("S1",
             fmt::format("handled outside lease: {} handled entry {} of shard {} at {} but "
                         "its lease ended at {}",
                         name, e.id, e.shard, e.t_us, it->second.lease_end),
             e.t_us);
    }
  }

  // C1, checked against the grants themselves: a lease end beyond every grant the process
  // got (sent_us + assignmentLeaseMs of an answered heartbeat) was computed from the wrong
  // start (e.g. the answer's arrival) — it reads past what any coordinator allowed.
  void CheckLeaseGranted(const std::string& name, const Proc& p, int64_t lease_end, int64_t t) {
    if (p.grant_end < 0 || lease_end < 0 || lease_end <= p.grant_end) return;
    Report("S1",
           fmt::format("{} holds a lease until {} at {}, but its latest grant ends at {} "
                       "(heartbeat send time + assignmentLeaseMs, C1)",
                       name, lease_end, t, p.grant_end),
           t);
  }

  void OnHeartbeat(const std::string& name, Proc& p, const HistEvent& e) {
    if (p.tainted && e.sent_us > p.taint_t && Untaints(e.status)) {
      p.tainted = false;
      Rejudge(name, e.t_us);
    }
    if (Untaints(e.status)) p.answered_sent_us = std::max(p.answered_sent_us, e.sent_us);
    if (IsAnswer(e.status) && e.sent_us >= 0 && e.grant_ms > 0) {
      p.grant_end = std::max(p.grant_end, Plus(e.sent_us, e.grant_ms * 1000));
    }
    if (IsAnswer(e.status)) {
      if (auto a = ParseShardList(e.assigned)) {
        p.assigned_known = true;
        p.assigned = std::set<int32_t>(a->begin(), a->end());
      }
    }
    if (e.version < 0) return;
    if (e.status == "SYNC_METADATA") {
      p.answers.clear();  // it adopts the stored state as the truth (M4)
      p.answers[e.version] = e.lineage;
      return;
    }
    if (!e.status.empty() && !IsAnswer(e.status)) return;
    auto [it, fresh] = p.answers.try_emplace(e.version, e.lineage);
    if (!fresh && it->second != e.lineage) {
      Report("S7",
             fmt::format("M8: version aliasing: {} was answered {} with version {} lineage "
                         "'{}', but earlier saw version {} with lineage '{}' (no "
                         "SYNC_METADATA in between)",
                         name, e.status.empty() ? "-" : e.status, e.version, e.lineage, e.version,
                         it->second),
             e.t_us);
    }
    if (p.answers.size() > kRememberedAnswers) p.answers.erase(p.answers.begin());
  }

  // ── S6, S7, S8 ──
  void OnCommit(const HistEvent& e) {
    if (cfg.check_coordinator && e.round_age_ms >= 0 && cfg.member_lease_us > 0 &&
        e.round_age_ms * 1000 < cfg.member_lease_us - cfg.clock_skew_us) {
      Report("S13",
             fmt::format("{} ended a correction round with revision {} after {} ms, before a "
                         "member lease ({} µs) had passed (M6)",
                         e.proc, e.revision, e.round_age_ms, cfg.member_lease_us),
             e.t_us);
    }
    if (cfg.check_coordinator && key_deleted) {
      Report("S8",
             fmt::format("commit of revision {} (version {}) at {} after the metadata key "
                         "was deleted at {} and before a restore",
                         e.revision, e.version, e.t_us, key_deleted_t),
             e.t_us);
    }
    auto& v = commits[e.revision];
    const std::pair<int64_t, std::string> c(e.version, e.lineage);
    if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
  }

  void OnDecision(const HistEvent& e) {
    if (!cfg.check_coordinator) return;
    const bool answer = IsAnswer(e.status);
    const int64_t t = e.t_us;
    if (answer && key_deleted) {
      Report("S8",
             fmt::format("{} answered {} for member {} at {} after the metadata key was "
                         "deleted at {} and before a restore",
                         e.proc, e.status, e.member, t, key_deleted_t),
             t);
    }
    if (!answer) return;
    // S10 / K5: a heartbeat with a member epoch below the member's is fenced, whatever else.
    if (e.detail == "heartbeat" && e.req_epoch >= 1 && e.epoch >= 0 && e.req_epoch < e.epoch) {
      Report("S10",
             fmt::format("{} answered {} to member {} whose request carried memberEpoch {}, "
                         "below its epoch {}: must be FENCED_MEMBER_EPOCH (K5)",
                         e.proc, e.status, e.member, e.req_epoch, e.epoch),
             t);
    }
    // S11 / K4: every shard the request claims is answered: assigned, or listed to drain.
    // S12 / M5: in a correction round, every claim against the ownership the answer derives
    // from is recorded as this member's blocker.
    // (An answer with memberEpoch -1 says "you left": every shard is dropped, nothing to list.)
    if (e.detail == "heartbeat" && e.epoch != -1) {
      const auto claimed = ParseShardList(e.claimed);
      const auto assigned = ParseShardList(e.assigned);
      const auto revoked = ParseShardList(e.revoked);
      if (claimed && assigned && revoked) {
        for (int32_t s : *claimed) {
          if (std::find(assigned->begin(), assigned->end(), s) == assigned->end() &&
              std::find(revoked->begin(), revoked->end(), s) == revoked->end()) {
            Report("S11",
                   fmt::format("{} answered {} to member {} which claims shard {}, but lists it "
                               "neither in assignedShards nor in revokeShards (K4)",
                               e.proc, e.status, e.member, s),
                   t);
            break;
          }
        }
      }
      const auto owned = ParseShardList(e.owned);
      const auto blocked = ParseShardList(e.blocked);
      if (e.in_round == 1 && claimed && owned && blocked) {
        const auto absent = ParseShardList(e.absent);
        for (int32_t s : *claimed) {
          if (std::find(owned->begin(), owned->end(), s) != owned->end()) continue;
          if (std::find(blocked->begin(), blocked->end(), s) != blocked->end()) continue;
          // A shard the state does not have cannot be blocked (K4 lists it, S11).
          if (absent && std::find(absent->begin(), absent->end(), s) != absent->end()) continue;
          Report("S12",
                 fmt::format("{} answered {} to member {} during a correction round; the member "
                             "claims shard {} against the stored ownership, but the state the "
                             "answer derives from records no blocker for it (M5)",
                             e.proc, e.status, e.member, s),
                 t);
          break;
        }
      }
    }
    // S7 / M2 / M8 on the coordinator's side.
    if (e.req_version >= 0 && e.stored_version >= 0) {
      const bool ahead = e.req_version > e.stored_version;
      const bool diverged = e.req_version == e.stored_version && !e.req_lineage.empty() &&
                            !e.lineage.empty() && e.req_lineage != e.lineage;
      if (ahead || diverged) {
        if (e.status != "SYNC_METADATA" || e.version != e.stored_version) {
          Report("S7",
                 fmt::format("{} answered {} (version {}) to member {} whose request had "
                             "version {} lineage '{}' {} the stored version {} lineage "
                             "'{}': must be SYNC_METADATA with the stored version",
                             e.proc, e.status, e.version, e.member, e.req_version, e.req_lineage,
                             ahead ? "ahead of" : "diverging from", e.stored_version, e.lineage),
                 t);
        } else {
          ++n.syncs_after_rollback;
        }
      }
    }
    // S6: derives from a committed state.
    if (e.revision < 0) {
      Report("S6",
             fmt::format("{} answered {} to member {} at {} from no revision", e.proc, e.status,
                         e.member, t),
             t);
      return;
    }
    auto c = commits.find(e.revision);
    if (c == commits.end()) {
      if (e.revision != 1) {
        Report("S6",
               fmt::format("{} answered {} to member {} at {} from revision {}, which was "
                           "never committed",
                           e.proc, e.status, e.member, t, e.revision),
               t);
        return;
      }
    } else {
      const std::pair<int64_t, std::string> mine(e.version, e.lineage);
      if (std::find(c->second.begin(), c->second.end(), mine) == c->second.end()) {
        Report("S6",
               fmt::format("{} answered {} to member {} at {} with version {} lineage "
                           "'{}', but revision {} was committed as version {} lineage '{}'",
                           e.proc, e.status, e.member, t, e.version, e.lineage, e.revision,
                           c->second.back().first, c->second.back().second),
               t);
        return;
      }
    }
    if (e.req_digest.empty()) return;
    std::string id = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", e.member, e.req_digest, e.revision,
                                 e.version, e.lineage);
    auto [it, fresh] = responses.try_emplace(std::move(id), e.resp_digest);
    if (!fresh && it->second != e.resp_digest) {
      Report("S6",
             fmt::format("{} answered a retried request of member {} (request {}) on "
                         "revision {} with response {}, but earlier with {}",
                         e.proc, e.member, e.req_digest, e.revision, e.resp_digest, it->second),
             t);
    }
  }

  // ── faults ──
  // A rollback left P's view ahead of the store: P (if live) is tainted until it hears an
  // answer decided after t, and its holdings whose lease had not ended are marked.
  void Taint(const std::string& name, Proc& p, int64_t t) {
    if (p.live) {
      p.tainted = true;
      p.taint_t = std::max(p.taint_t, t);
    }
    for (auto& [s, sh] : shards) {
      for (Record& r : sh.records) {
        if (r.proc != name) continue;
        const int64_t lease =
            r.end == End::kHolding ? procs[r.proc].holds.at(s).lease_end : r.lease_end;
        if (Bound(lease) > t) r.rolled_back = true;
      }
    }
  }

  void OnFault(const HistEvent& e) {
    const std::string& f = e.detail;
    const int64_t t = e.t_us;
    if (f == "heal") {
      healed = true;
      ArmL1(t);
    } else if (healed) {
      // A fault after the heal (an operator's restore, a late clock jump): the group must
      // converge again within the bound from it — L1 is re-armed, never silently dropped.
      ++n.l1_rearms;
      ArmL1(t);
    }
    if (f == "shards") SetJudged(e.member);
    if (IsRollback(f)) {
      if (cfg.taint_on_rollback_fault) {
        for (auto& [name, p] : procs) Taint(name, p, t);
      }
    } else if (f == "fence") {
      fenced_at[e.member] = t;
    } else if (f == "key_delete") {
      if (!key_deleted) key_deleted_t = t;
      key_deleted = true;
    } else if (f == "restore" || f == "create") {
      key_deleted = false;
    } else if (f == "coordinators_down") {
      if (!coords_down) coords_down_t = t;
      coords_down = true;
    } else if (f == "coordinators_up") {
      coords_down = false;
    }
  }

  // ── L1 ──
  void ArmL1(int64_t t) {
    if (cfg.shards <= 0 || cfg.convergence_bound_us <= 0) return;
    l1_pending = true;
    l1_heal_t = t;
    l1_deadline = Plus(t, cfg.convergence_bound_us);
    l1_index = index;
  }

  bool Converged(int64_t t) {
    if (cfg.shards <= 0 || single_held != JudgedCount()) return false;
    for (int32_t s : JudgedIds()) {
      for (const Record& r : shards[s].records) {
        if (r.end == End::kHolding && t >= Bound(procs[r.proc].holds.at(s).lease_end)) {
          return false;
        }
      }
    }
    return true;
  }

  std::string Unconverged(int64_t t) {
    std::vector<std::string> bad;
    for (int32_t s : JudgedIds()) {
      if (bad.size() >= 10) break;
      std::vector<std::string> holders;
      bool inactive = false;
      for (const Record& r : shards[s].records) {
        if (r.end != End::kHolding) continue;
        holders.push_back(r.proc);
        if (t >= Bound(procs[r.proc].holds.at(s).lease_end)) inactive = true;
      }
      if (holders.size() == 1 && !inactive) continue;
      bad.push_back(holders.empty() ? fmt::format("{}: nobody", s)
                                    : fmt::format("{}: {}{}", s, fmt::join(holders, "+"),
                                                  inactive ? " (lease ended)" : ""));
    }
    return fmt::format("{}", fmt::join(bad, "; "));
  }

  void L1Failed(int64_t t) {
    Report("L1",
           fmt::format("no convergence within {} µs of the heal at {}: shards not held "
                       "by exactly one live consumer inside its lease: {}",
                       cfg.convergence_bound_us, l1_heal_t, Unconverged(t)),
           l1_deadline);
    l1_pending = false;
  }

  std::optional<Violation> Add(const HistEvent& e) {
    index = static_cast<size_t>(n.events++);
    out.reset();
    if (l1_pending && e.t_us > l1_deadline) L1Failed(now);
    now = std::max(now, e.t_us);
    Proc* p = e.proc.empty() ? nullptr : &Touch(e);
    const std::string& name = e.proc;
    switch (e.kind) {
      case HistKind::kStart:
        if (p) {
          p->live = true;
          p->instance = e.detail;
          if (!e.detail.empty()) instance_started[e.detail] = {name, e.t_us};
        }
        break;
      case HistKind::kStop:
      case HistKind::kCrash:
        if (p) {
          const End end = e.kind == HistKind::kCrash ? End::kCrashed : End::kStopped;
          EndAll(name, *p, end, e.detail, e.t_us);
          p->live = false;
          in_mutex.erase(name);
        }
        break;
      case HistKind::kAcquire:
        if (p) OnAcquire(name, *p, e);
        break;
      case HistKind::kLease:
        if (p) OnLease(name, *p, e);
        break;
      case HistKind::kRead:
        if (p) OnRead(name, *p, e);
        break;
      case HistKind::kRelease:
        if (p && e.shard < 0) {
          EndAll(name, *p, End::kReleased, e.detail, e.t_us);
        } else if (p) {
          EndHold(name, *p, e.shard, End::kReleased, e.detail, e.t_us);
        }
        break;
      case HistKind::kHeartbeat:
        if (p) OnHeartbeat(name, *p, e);
        break;
      case HistKind::kDeliver:
        if (p && cfg.check_deliveries_in_lease) OnDeliverLease(name, *p, e);
        if (auto v = delivery.OnDeliver(
                e, n, excused_overlap.count(e.shard) > 0 || UnderALostGrant(name, e.shard))) {
          Report("S4", std::move(*v), e.t_us);
        }
        break;
      case HistKind::kAck:
        break;
      case HistKind::kPublish:
        ++n.publishes;
        if (e.lease_end_us < 0) {
          Report("S5",
                 fmt::format("{} published key '{}' seq {} at {} with no known routing "
                             "lease",
                             name, e.key, e.seq, e.t_us),
                 e.t_us);
        } else if (e.t_us >= e.lease_end_us) {
          Report("S5",
                 fmt::format("{} published key '{}' seq {} at {} on routing whose lease "
                             "ended at {}",
                             name, e.key, e.seq, e.t_us, e.lease_end_us),
                 e.t_us);
        } else if (p && p->routing_grant_end >= 0 && e.t_us >= p->routing_grant_end) {
          // PR3/PR5 against the grants themselves: the producer's own lease sum said yes.
          Report("S5",
                 fmt::format("{} published key '{}' seq {} at {}, after every routing lease "
                             "a coordinator granted it had ended (at {}; the producer believed "
                             "{})",
                             name, e.key, e.seq, e.t_us, p->routing_grant_end, e.lease_end_us),
                 e.t_us);
        }
        if (coords_down && cfg.max_routing_lease_us > 0 &&
            e.t_us >= Plus(coords_down_t, cfg.max_routing_lease_us)) {
          Report("L2",
                 fmt::format("{} published key '{}' seq {} at {}, but the coordinators "
                             "have been down since {} (routing leases are at most {} µs)",
                             name, e.key, e.seq, e.t_us, coords_down_t, cfg.max_routing_lease_us),
                 e.t_us);
        }
        delivery.OnPublish(e, index, n);
        break;
      case HistKind::kPublishRefused:
        ++n.refused_publishes;
        break;
      case HistKind::kRouting:
        if (p && e.sent_us >= 0 && e.grant_ms > 0) {
          p->routing_grant_end = std::max(p->routing_grant_end, Plus(e.sent_us, e.grant_ms * 1000));
        }
        break;
      case HistKind::kLost:
        delivery.OnLost(e, n);
        break;
      case HistKind::kCommit:
        OnCommit(e);
        break;
      case HistKind::kDecision:
        OnDecision(e);
        break;
      case HistKind::kMutexEnter:
        if (std::any_of(in_mutex.begin(), in_mutex.end(),
                        [&](const std::string& q) { return q != name; })) {
          ++n.mutex_double_entries;
        }
        in_mutex.insert(name);
        break;
      case HistKind::kMutexExit:
        in_mutex.erase(name);
        break;
      case HistKind::kFault:
        OnFault(e);
        break;
      case HistKind::kTaint:
        if (p) Taint(name, *p, e.t_us);
        break;
    }
    if (l1_pending && Converged(now)) l1_pending = false;
    return std::move(out);
  }

  std::vector<Violation> Finish() {
    std::vector<Violation> v;
    if (finished) return v;
    finished = true;
    out.reset();
    if (l1_pending) {
      index = l1_index;
      Report("L1",
             fmt::format("the run ended before convergence: within {} µs of the heal at "
                         "{} shards were not held by exactly one live consumer inside its "
                         "lease: {}",
                         cfg.convergence_bound_us, l1_heal_t, Unconverged(now)),
             l1_deadline);
      l1_pending = false;
      v.push_back(std::move(*out));
    }
    if (cfg.check_delivery) {
      if (auto missing = delivery.Undelivered()) {
        v.push_back(Violation{"S3", std::move(missing->message), missing->t_us, missing->index});
      }
    }
    return v;
  }
};

Checker::Checker(CheckerConfig config) : st_(std::make_unique<State>(std::move(config))) {}
Checker::~Checker() = default;
Checker::Checker(Checker&&) noexcept = default;
Checker& Checker::operator=(Checker&&) noexcept = default;

std::optional<Violation> Checker::Add(const HistEvent& e) { return st_->Add(e); }
std::vector<Violation> Checker::Finish() { return st_->Finish(); }
size_t Checker::TrackedItems() const {
  const State& st = *st_;
  size_t n = st.procs.size() + st.delivery.Tracked() + st.commits.size() + st.responses.size();
  for (const auto& [name, p] : st.procs) n += p.holds.size() + p.answers.size();
  for (const auto& [s, sh] : st.shards)
    n += sh.records.size() + sh.judged.size() + sh.excused.size();
  return n;
}

const CheckerCounters& Checker::counters() const { return st_->n; }

CheckReport CheckHistory(const History& events, const CheckerConfig& config) {
  Checker checker(config);
  CheckReport report;
  for (const HistEvent& e : events) {
    if (auto v = checker.Add(e)) report.violations.push_back(std::move(*v));
  }
  for (Violation& v : checker.Finish()) report.violations.push_back(std::move(v));
  report.counters = checker.counters();
  return report;
}

}  // namespace rsc::sim
