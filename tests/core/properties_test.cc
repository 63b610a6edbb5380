// Property tests over random request sequences against the pure core (SPEC §10 level 1):
// after every step, no split ownership (K1/K2), structural invariants, balanced targets
// (K3), and identical answers to a repeated request with no further write (I1).

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/group_index.h"
#include "core_harness.h"

namespace rsc::testing {
namespace {

struct Client {
  FakeMember fm;
  TimeMs lease_end = 0;
  bool alive = true;
  int generation = 0;
  // Holds shards under a grant a Redis rollback erased and has not heartbeated since.
  // No coordinator can know about such a grant until the client reports it (the version
  // it sends is then ahead and a correction round starts), so the split check leaves
  // these out; after that report the check covers them again. See docs/design.
  bool tainted = false;
};

struct Step {
  int kind;
  int who;
  int arg;
};

void showValue(const Step& s, std::ostream& os) {
  static const char* kNames[] = {"hb",      "hb",   "hb",       "hb",      "hb-lost",
                                 "advance", "tick", "crash",    "leave",   "coord-crash",
                                 "fence",   "grow", "snapshot", "rollback"};
  os << kNames[s.kind] << "(" << s.who << "," << s.arg << ")";
}

struct Model {
  CoreHarness h;
  std::vector<Client> clients;
  std::optional<CoreHarness::Snapshot> snapshot;
  bool allow_rollback;

  Model(int32_t shards, int n, bool rollback) : h(shards), allow_rollback(rollback) {
    for (int i = 0; i < n; ++i) {
      Client c;
      c.fm.id = "m" + std::to_string(i) + "-0";
      if (i % 2 == 0) c.fm.instance = "inst-" + std::to_string(i);
      clients.push_back(c);
    }
  }

  void FailClosed() {
    for (Client& c : clients) {
      if (c.lease_end <= h.now()) c.fm.owned.clear();  // C4: stop every read at lease end
    }
  }

  void Heartbeat(Client& c, bool lose) {
    if (!c.alive) return;
    const TimeMs sent = h.now();
    const HeartbeatRequest req = c.fm.Request();
    CheckShortcutMatchesFullPath(req);
    auto r = h.Heartbeat(req);
    CheckRepeatIsIdentical(req, r);
    if (lose) return;
    if (!r.ok()) {
      RC_LOG() << "heartbeat error: " << r.error().message << "\n";
      RC_ASSERT(r.error().code == ErrorCode::kUnknownMemberId ||
                r.error().code == ErrorCode::kFencedMemberEpoch);
      c.fm.Forget();  // drop all shards now, rejoin
      return;
    }
    if (r->member_epoch == -1) {  // left
      c.alive = false;
      c.fm.owned.clear();
      return;
    }
    c.lease_end = sent + r->assignment_lease_ms;  // C1: from send time
    c.fm.Observe(*r);
    c.tainted = false;
  }

  // The steady-state shortcut must decide exactly like the full path.
  void CheckShortcutMatchesFullPath(const HeartbeatRequest& req) {
    const Env env{h.now(), "cmp"};
    auto fast = DecideHeartbeat(h.meta(), h.Live(), req, env);
    auto full = DecideHeartbeatFullForTest(h.meta(), h.Live(), req, env);
    RC_ASSERT(fast.next == full.next);
    RC_ASSERT(fast.liveness.set == full.liveness.set);
    RC_ASSERT(fast.liveness.remove == full.liveness.remove);
    RC_ASSERT(fast.response.ok() == full.response.ok());
    if (fast.response.ok()) RC_ASSERT(fast.response.value() == full.response.value());
    CheckIndexedMatchesFullPath(req, full);
  }

  // The same decision with an index of the stored aggregate (core/group_index.h), whose
  // contents are what the scans it replaces compute.
  void CheckIndexedMatchesFullPath(const HeartbeatRequest& req,
                                   const Decision<HeartbeatResponse>& full) {
    const GroupMetadata& m = h.meta();
    const GroupIndex index = BuildGroupIndex(m);
    TimeMs due = std::numeric_limits<TimeMs>::max();
    for (const ShardState& sh : m.shards) {
      if (sh.revoke_since_ms != 0) {
        due = std::min(due, sh.revoke_since_ms + m.config.rebalance_timeout_ms);
      }
      if (sh.taken_ms != 0) due = std::min(due, sh.release_at_ms);
    }
    RC_ASSERT(index.next_due_ms == due);
    for (const Member& mem : m.members) {
      const GroupIndex::PerMember* e = index.For(m, mem);
      RC_ASSERT(e != nullptr);
      const MemberShards scanned = ShardsOf(m, mem.id);
      RC_ASSERT(e->shards.assigned == scanned.assigned);
      RC_ASSERT(e->shards.pending == scanned.pending);
      RC_ASSERT(e->shards.revoke == scanned.revoke);
      std::vector<int32_t> taken;
      for (const ShardState& sh : m.shards) {
        if (sh.taken_ms != 0 && sh.owner == mem.id.str()) taken.push_back(sh.id);
      }
      RC_ASSERT(e->taken == taken);
    }
    const GroupMetadata copy = m;  // another object: the index must not be read for it
    if (!copy.members.empty()) RC_ASSERT(index.For(copy, copy.members.front()) == nullptr);
    const Env env{h.now(), "cmp", {}, &index};
    auto indexed = DecideHeartbeat(m, h.Live(), req, env);
    RC_ASSERT(indexed.next == full.next);
    RC_ASSERT(indexed.liveness.set == full.liveness.set);
    RC_ASSERT(indexed.liveness.remove == full.liveness.remove);
    RC_ASSERT(indexed.response.ok() == full.response.ok());
    if (indexed.response.ok()) RC_ASSERT(indexed.response.value() == full.response.value());
  }

  void CheckRepeatIsIdentical(const HeartbeatRequest& req, const Result<HeartbeatResponse>& r) {
    auto again = DecideHeartbeat(h.meta(), h.Live(), req, Env{h.now(), "repeat"});
    RC_ASSERT(again.response.ok() == r.ok());
    if (r.ok()) {
      RC_ASSERT(again.response.value() == r.value());
    } else {
      RC_ASSERT(again.response.error().code == r.error().code);
    }
    RC_ASSERT(!again.next.has_value());
  }

  void Apply(const Step& st) {
    Client& c = clients[static_cast<size_t>(st.who) % clients.size()];
    switch (st.kind) {
      case 0:
      case 1:
      case 2:
      case 3:
        Heartbeat(c, false);
        break;
      case 4:
        Heartbeat(c, true);
        break;
      case 5:
        h.Advance(st.arg % 4000);
        break;
      case 6:
        h.Tick();
        break;
      case 7: {  // process crash; restart with a new member id (same instance id)
        c.fm.Forget();
        c.lease_end = 0;
        c.alive = true;
        c.fm.id = c.fm.id.substr(0, c.fm.id.find('-')) + "-" + std::to_string(++c.generation);
        c.fm.version = 0;
        c.fm.lineage.clear();
        break;
      }
      case 8: {  // clean leave: drain everything, then leave
        if (!c.alive || c.fm.epoch <= 0) break;
        for (int32_t s : c.fm.owned) c.fm.revoking.push_back({s, RevokeState::kRevoked});
        c.fm.owned.clear();
        HeartbeatRequest req = c.fm.Request();
        req.member_epoch = -1;
        auto r = h.Heartbeat(req);
        CheckRepeatIsIdentical(req, r);
        if (r.ok() && r->member_epoch == -1) c.alive = false;
        break;
      }
      case 9:
        (void)h.HeartbeatCrashBeforeWrite(c.fm.Request());
        break;
      case 10: {
        auto d = DecideFence(h.meta(), h.Live(), MemberId(c.fm.id), h.NextEnv());
        h.Apply(d);
        break;
      }
      case 11: {  // an admin write that changes no assignment (the shard count changes only
                  // by resharding: tests/core/generations_test.cc has that property)
        PatchGroupRequest p;
        p.config = h.meta().config;
        h.Apply(DecidePatch(h.meta(), h.Live(), p, h.NextEnv()));
        break;
      }
      case 12:
        if (allow_rollback) snapshot = h.Save();
        break;
      case 13:
        if (allow_rollback && snapshot) {
          h.RollbackTo(*snapshot);
          const Liveness live = h.Live();
          for (Client& x : clients) {
            const VersionCheck vc =
                CheckClientVersion(h.meta(), x.fm.version, x.fm.lineage, h.now());
            if (vc == VersionCheck::kAhead || vc == VersionCheck::kDiverged) x.tainted = true;
            // A lost liveness renewal is just as invisible (it changes no version): if the
            // restored deadline ends before the lease this client holds, the coordinator
            // may expire it while it reads (docs/design/README.md "liveness under rollback";
            // found by a random seed of this property, kept below).
            auto it = live.deadline_ms.find(x.fm.id);
            const TimeMs restored = it == live.deadline_ms.end() ? 0 : it->second;
            if (x.lease_end > h.now() && restored < x.lease_end) x.tainted = true;
          }
        }
        break;
    }
    FailClosed();
  }

  void CheckInvariantsHold() {
    Status st = CheckInvariants(h.meta());
    RC_ASSERT(st.ok());
    // No split ownership: a shard is read by at most one client holding a lease.
    std::map<int32_t, std::vector<std::string>> readers;
    for (const Client& c : clients) {
      if (!c.alive || c.lease_end <= h.now() || c.tainted) continue;
      for (int32_t s : c.fm.owned) readers[s].push_back(c.fm.id);
    }
    for (const auto& [s, who] : readers) {
      if (who.size() > 1) {
        RC_FAIL("split ownership of shard " + std::to_string(s) + " by " + who[0] + " and " +
                who[1] + " at t=" + std::to_string(h.now()));
      }
    }
    // K3: balanced targets among eligible members.
    std::map<std::string, int> load;
    for (const Member& m : h.meta().members) {
      if (!m.fenced && !m.leaving) load[m.id.str()] = 0;
    }
    for (const ShardState& s : h.meta().shards) {
      if (load.empty()) {
        RC_ASSERT(s.target.empty());
      } else {
        RC_ASSERT(!s.target.empty());
        load[s.target]++;
      }
    }
    if (!load.empty()) {
      int lo = INT32_MAX, hi = 0;
      for (const auto& [id, n] : load) {
        lo = std::min(lo, n);
        hi = std::max(hi, n);
      }
      RC_ASSERT(hi - lo <= 1);
    }
  }
};

rc::Gen<Step> GenStep() {
  return rc::gen::build<Step>(rc::gen::set(&Step::kind, rc::gen::inRange(0, 14)),
                              rc::gen::set(&Step::who, rc::gen::inRange(0, 8)),
                              rc::gen::set(&Step::arg, rc::gen::inRange(0, 100000)));
}

RC_GTEST_PROP(CoreProperties, NoSplitOwnershipBalancedTargetsIdempotentAnswers, ()) {
  const int32_t shards = *rc::gen::inRange(1, 13);
  const int members = *rc::gen::inRange(1, 6);
  const auto steps = *rc::gen::container<std::vector<Step>>(GenStep());
  Model model(shards, members, /*rollback=*/false);
  for (const Step& st : steps) {
    model.Apply(st);
    model.CheckInvariantsHold();
  }
}

RC_GTEST_PROP(CoreProperties, NoSplitOwnershipEvenWithRedisRollbacks, ()) {
  const int32_t shards = *rc::gen::inRange(1, 9);
  const int members = *rc::gen::inRange(1, 5);
  const auto steps = *rc::gen::container<std::vector<Step>>(GenStep());
  Model model(shards, members, /*rollback=*/true);
  for (const Step& st : steps) {
    model.Apply(st);
    model.CheckInvariantsHold();
  }
}

// Found by a random run of the property above (rapidcheck, in a full ctest run): the snapshot
// is taken after m1's join, m1's renewal at +2576 ms is lost by the rollback, and the restored
// deadline (join + 10 s) ends 576 ms before the lease m1 holds; m0 joins at +10 s, m1 is expired
// and m0 gets shard 0 while m1 still reads it. Redis lost an acknowledged write: no version
// shows it, so the coordinator cannot know — the client is excluded from the split check
// until it hears an answer decided after the loss, exactly as for a lost grant.
TEST(CoreProperties, LostLivenessRenewalTaintsTheClientWhoseLeaseOutlivesTheRestoredDeadline) {
  Model model(1, 4, /*rollback=*/true);
  const std::vector<Step> steps = {{1, 1, 0},    {12, 0, 0},    {5, 0, 2576}, {1, 5, 0},
                                   {5, 0, 3931}, {5, 0, 51493}, {13, 0, 0}};
  for (const Step& st : steps) model.Apply(st);
  Client& m1 = model.clients[1];
  EXPECT_EQ(m1.fm.owned, V({0}));
  EXPECT_GT(m1.lease_end, model.h.now()) << "m1 still holds its lease";
  EXPECT_TRUE(m1.tainted) << "its renewal was lost: the restored deadline ends first";
  model.Apply(Step{1, 0, 0});  // m0 joins: m1 expires, m0 gets shard 0
  EXPECT_EQ(model.clients[0].fm.owned, V({0}));
  model.CheckInvariantsHold();  // not a split among clients the coordinator can know about
  model.Apply(Step{1, 1, 0});   // m1 hears UNKNOWN_MEMBER_ID: drops everything
  EXPECT_TRUE(m1.fm.owned.empty());
  EXPECT_EQ(m1.fm.epoch, 0) << "it rejoins next";
  model.CheckInvariantsHold();
}

// Liveness: with well-behaved members heartbeating and no faults, every shard ends up
// read by exactly one member within a bounded number of heartbeat rounds.
RC_GTEST_PROP(CoreProperties, ConvergesWhenFaultsStop, ()) {
  const int32_t shards = *rc::gen::inRange(1, 13);
  const int members = *rc::gen::inRange(1, 6);
  const auto steps = *rc::gen::container<std::vector<Step>>(GenStep());
  Model model(shards, members, /*rollback=*/true);
  for (const Step& st : steps) model.Apply(st);
  for (Client& c : model.clients) {
    if (!c.alive) c.fm.Forget();  // those that left rejoin
    c.alive = true;
  }
  // Enough rounds for expiry of ghosts (member lease), a correction round and handoffs.
  for (int round = 0; round < 40; ++round) {
    model.h.Advance(500);
    for (Client& c : model.clients) {
      if (!c.alive) {  // a late leave completed: the process joins again
        c.fm.Forget();
        c.alive = true;
      }
      model.Heartbeat(c, false);
    }
    model.FailClosed();
    model.CheckInvariantsHold();
  }
  std::set<int32_t> read;
  for (const Client& c : model.clients) {
    for (int32_t s : c.fm.owned) read.insert(s);
  }
  RC_ASSERT(static_cast<int32_t>(read.size()) == model.h.meta().shard_count);
  RC_ASSERT(!model.h.meta().round.has_value());
}

}  // namespace
}  // namespace rsc::testing
