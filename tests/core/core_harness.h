#pragma once
// A deterministic, in-memory driver of the pure coordinator core for tests: it plays the
// role of the shell (load → decide → commit) with a manual clock and a counter-based
// lineage source, and lets a test lose responses, roll Redis back to a snapshot, or skip
// commits (a coordinator crash before the write).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/decide.h"
#include "core/group_index.h"
#include "core/lineage_token.h"

namespace rsc::testing {

class CoreHarness {
 public:
  explicit CoreHarness(int32_t shards, GroupConfig config = {}) {
    CreateGroupRequest req{"orders", "billing", shards, config};
    auto m = DecideCreate(req, NextEnv());
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    meta_ = std::move(m).value();
  }

  // Tokens are keyed (core/lineage_token.h): the group gets its key at create.
  Env NextEnv() {
    ++tokens_;
    return Env{now_, fmt::format("nonce{:011d}", tokens_), "harness-lineage-key-0001"};
  }
  void Advance(int64_t ms) { now_ += ms; }
  TimeMs now() const { return now_; }
  const GroupMetadata& meta() const { return meta_; }
  GroupMetadata& mutable_meta() { return meta_; }
  int writes() const { return writes_; }

  Liveness Live() const {
    Liveness l;
    l.deadline_ms = deadlines_;
    l.complete = true;
    return l;
  }

  template <class R>
  void Apply(const Decision<R>& d) {
    if (d.next) {
      meta_ = *d.next;
      ++writes_;
    }
    for (const auto& [id, dl] : d.liveness.set) deadlines_[id] = dl;
    for (const auto& id : d.liveness.remove) deadlines_.erase(id);
  }

  // Full round trip: decide and commit. Returns the response (which the test may
  // choose to "lose" simply by not using it).
  // Decided as the coordinator does, with an index of the stored aggregate
  // (core/group_index.h), and checked against the same decision without it.
  Result<HeartbeatResponse> Heartbeat(const HeartbeatRequest& req) {
    const Env env = NextEnv();
    const GroupIndex index = BuildGroupIndex(meta_);
    Env indexed = env;
    indexed.index = &index;
    auto d = DecideHeartbeat(meta_, Live(), req, indexed);
    const auto scanned = DecideHeartbeat(meta_, Live(), req, env);
    EXPECT_TRUE(d.next == scanned.next && d.liveness.set == scanned.liveness.set &&
                d.liveness.remove == scanned.liveness.remove &&
                d.response.ok() == scanned.response.ok() &&
                (!d.response.ok() || d.response.value() == scanned.response.value()))
        << "the indexed heartbeat decided differently from the scanning one";
    Apply(d);
    last_events_ = d.events;
    return d.response;
  }
  // Decide but do not commit: a coordinator that crashed before its CAS.
  Result<HeartbeatResponse> HeartbeatCrashBeforeWrite(const HeartbeatRequest& req) {
    return DecideHeartbeat(meta_, Live(), req, NextEnv()).response;
  }
  void Tick() {
    auto d = DecideTick(meta_, Live(), NextEnv());
    Apply(d);
    last_events_ = d.events;
  }
  const std::vector<Event>& last_events() const { return last_events_; }
  bool LastEventsHave(EventKind k) const {
    for (const Event& e : last_events_) {
      if (e.kind == k) return true;
    }
    return false;
  }

  struct Snapshot {
    GroupMetadata meta;
    std::map<std::string, TimeMs> deadlines;
  };
  Snapshot Save() const { return Snapshot{meta_, deadlines_}; }
  void RollbackTo(const Snapshot& s) {
    meta_ = s.meta;
    deadlines_ = s.deadlines;
  }

 private:
  GroupMetadata meta_;
  std::map<std::string, TimeMs> deadlines_;
  TimeMs now_ = 1'000'000;
  int64_t tokens_ = 0;
  int writes_ = 0;
  std::vector<Event> last_events_;
};

// A minimal well-behaved consumer's view for driving the harness: it tracks what it
// reads and what it drains, and builds its next heartbeat from the last response.
struct FakeMember {
  std::string id;
  std::string instance;
  int64_t epoch = 0;
  int64_t version = 0;
  std::string lineage;
  std::vector<int32_t> owned;
  std::vector<RevokingReport> revoking;

  HeartbeatRequest Request() const {
    HeartbeatRequest r;
    r.member_id = MemberId(id);
    r.member_epoch = epoch;
    r.instance_id = instance;
    r.metadata_version = version;
    r.lineage = lineage;
    r.owned_shards = owned;
    r.revoking_shards = revoking;
    return r;
  }

  // Applies a response the way the consumer rules C1–C5 say, draining instantly.
  void Observe(const HeartbeatResponse& r) {
    epoch = r.member_epoch;
    if (r.metadata_version > version || r.status == HeartbeatStatus::kSyncMetadata) {
      version = r.metadata_version;
      lineage = r.lineage;
    }
    std::vector<int32_t> keep;
    for (int32_t s : owned) {
      if (std::find(r.assigned_shards.begin(), r.assigned_shards.end(), s) !=
          r.assigned_shards.end()) {
        keep.push_back(s);
      } else {
        revoking.push_back({s, RevokeState::kRevoked});  // drained instantly
      }
    }
    for (int32_t s : r.revoke_shards) {
      // A shard to revoke that it holds is drained; one it never read (e.g. its join
      // response was lost) is released at once: both are reported REVOKED (C3).
      std::erase(keep, s);
      bool reported = false;
      for (const RevokingReport& rr : revoking) reported = reported || rr.shard == s;
      if (!reported) revoking.push_back({s, RevokeState::kRevoked});
    }
    // Forget REVOKED reports the coordinator no longer lists as ours.
    std::erase_if(revoking, [&](const RevokingReport& rr) {
      return std::find(r.revoke_shards.begin(), r.revoke_shards.end(), rr.shard) ==
                 r.revoke_shards.end() &&
             std::find(r.assigned_shards.begin(), r.assigned_shards.end(), rr.shard) ==
                 r.assigned_shards.end();
    });
    if (r.status == HeartbeatStatus::kOk) {
      for (int32_t s : r.assigned_shards) {
        if (std::find(keep.begin(), keep.end(), s) == keep.end()) keep.push_back(s);
        // Read again: an old REVOKED report of it is no longer true (a real consumer never
        // lists a shard both owned and revoking; the HTTP layer rejects such a request).
        std::erase_if(revoking, [&](const RevokingReport& rr) { return rr.shard == s; });
      }
    }
    std::sort(keep.begin(), keep.end());
    owned = keep;
  }
  void Forget() {  // process restart or UNKNOWN/FENCED: drop everything, rejoin
    epoch = 0;
    owned.clear();
    revoking.clear();
  }
};

inline HeartbeatResponse Ok(const Result<HeartbeatResponse>& r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? ""
                                 : std::string(ErrorCodeName(r.error().code)) + ": " +
                                       r.error().message);
  return r.ok() ? r.value() : HeartbeatResponse{};
}

inline std::vector<int32_t> V(std::initializer_list<int32_t> l) { return l; }

}  // namespace rsc::testing
