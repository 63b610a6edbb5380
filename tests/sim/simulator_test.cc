// The deterministic simulator (sim/simulation.h, issue 4): a fixed seed set must pass and
// reach every rare-path probe, a seed must replay identically, every seed that once found a
// bug is kept as a named regression test, and every deliberately broken build (a mutant)
// must be caught by the checkers within a bounded number of seeds.

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include "sim/mutants.h"
#include "sim/simulation.h"

namespace rsc::sim {
namespace {

SimResult RunSeed(uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  return RunSimulation(o);
}

void ExpectPasses(uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  const SimResult r = RunSimulation(o);
  EXPECT_FALSE(r.violation.has_value()) << FailureReport(o, r);
  EXPECT_GT(r.counters.publishes, 0) << "seed " << seed << " published nothing";
}

// A kept seed replays its run only while the simulator draws the same random numbers, so a
// regression test that asserted only "passes" stopped testing its bug at the next change of
// the simulator (issue 9). This runs from the kept seed on until a run reaches the path the
// bug was on (`reached`: a probe or counter of the run), every run passing, within a bound:
// the path is exercised, whatever the simulator draws today.
// `reshards`: operator reshards in every run (rsc-sim --reshards; -1: drawn per seed).
// `coord_workers`: worker fibers per coordinator (rsc-sim --coord-workers; 0: drawn per seed).
// `pipelined`: 1: one server, consumers pipeline backlog reads; 0: a simulated cluster
// (rsc-sim --pipelined; -1: drawn per seed).
template <class Reached>
void ExpectPassesReaching(uint64_t seed, const char* path, Reached reached, int max_runs = 300,
                          int reshards = -1, int coord_workers = 0, int pipelined = -1) {
  for (int i = 0; i < max_runs; ++i) {
    SimOptions o;
    o.seed = seed + static_cast<uint64_t>(i);
    o.reshards = reshards;
    o.coord_workers = coord_workers;
    o.pipelined = pipelined;
    const SimResult r = RunSimulation(o);
    ASSERT_FALSE(r.violation.has_value()) << FailureReport(o, r);
    if (reached(r)) {
      ::testing::Test::RecordProperty("runs_to_reach", i + 1);
      return;
    }
  }
  ADD_FAILURE() << "no run from seed " << seed << " within " << max_runs << " reached " << path;
}

void ExpectPassesReaching(uint64_t seed, const char* probe, int max_runs = 300, int reshards = -1,
                          int coord_workers = 0, int pipelined = -1) {
  ExpectPassesReaching(
      seed, probe,
      [probe](const SimResult& r) {
        auto it = r.probes.find(probe);
        return it != r.probes.end() && it->second > 0;
      },
      max_runs, reshards, coord_workers, pipelined);
}

// The default sweep: these seeds pass, and together they reach every probe (a fault model
// that silently stopped reaching a rare path fails here, not in a later investigation).
TEST(Simulator, FixedSeedSweepPassesAndReachesEveryProbe) {
  SweepTotals totals;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(kDefaultSweepSeeds); ++seed) {
    SimOptions o;
    o.seed = seed;
    const SimResult r = RunSimulation(o);
    totals.Add(r);
    ASSERT_FALSE(r.violation.has_value()) << FailureReport(o, r);
  }
  std::printf("%s", totals.Summary().c_str());
  EXPECT_GT(totals.counters.publishes, 1000);
  // S3 (checked per seed): every acked publish not destroyed by a rollback was delivered.
  // Unacknowledged entries (a lost XADD reply) may be delivered too, hence >=.
  EXPECT_GE(totals.counters.delivered_unique,
            totals.counters.publishes - totals.counters.lost_by_rollback);
  const auto unreached = totals.UnreachedProbes();
  EXPECT_TRUE(unreached.empty()) << "never reached: " << unreached.front();
  for (const char* fault :
       {"failover", "snapshot_restore", "key_delete", "restore", "script_flush", "mutex_expire",
        "partition", "clog", "coordinators_down", "skew", "fence", "heal"}) {
    EXPECT_GT(totals.faults[fault], 0) << "no " << fault << " fault in the sweep";
  }
}

TEST(Simulator, SameSeedReplaysIdentically) {
  const SimResult a = RunSeed(7);
  const SimResult b = RunSeed(7);
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.simulated_ms, b.simulated_ms);
  EXPECT_EQ(a.probes, b.probes);
  const SimResult c = RunSeed(8);
  EXPECT_NE(a.digest, c.digest) << "different seeds, different runs";
}

// ── Regression seeds: each once found a bug (the cause and fix are in the test name and
// in the product code's comments). A seed replays the same run only while the simulator
// draws the same random numbers, so each bug also has a direct unit test next to the code.

// decide.cc: a leave whose version Redis had lost was answered OK instead of SYNC_METADATA
// (M2). Unit test: tests/core/scenarios_test.cc LeaveWithALostVersionIsAnsweredSyncMetadata.
TEST(SimulatorRegression, Seed8_LeaveWithLostVersionIsAnsweredSyncMetadata) {
  ExpectPassesReaching(8, "leave_answered_sync");
}

// consumer_core.cc: a fenced member's abandoned shard was reported REVOKED while its reader
// still had an XREADGROUP … BLOCK in flight; the shard went to another member at once.
// Unit test: tests/client/consumer_core_test.cc
// AbandonedShardIsNotReportedRevokedBeforeItsWorkStopped.
// Found by the first sweeps with reshards (issue 12), seed 3: a member still draining a shard
// of a retired generation claimed it and the answer listed it nowhere (K4, S11: the group no
// longer has it; the steady fast path skipped it too). Unit test: tests/core/
// generations_test.cc K4_ClaimOfAShardTheGroupDoesNotHaveIsRevoked. (The same seed first
// found producers recreating a newer generation's key after a rollback — now XADD
// NOMKSTREAM, pinned by the streams contract test; reshard runs go without rollback faults
// for now, see simulation.cc.)
TEST(SimulatorRegression, Seed3_AClaimOfARetiredShardIsAnswered) {
  ExpectPassesReaching(3, "absent_shard_claimed");
}

// Coverage pin, not a bug: the operator's restore after a key loss sends the latest export,
// which in a run with reshards is often one from before a reshard; the group takes the
// current layout in the restore's write (protocol.md 7.3; before, such a restore was
// refused with LAYOUT_MISMATCH and the operator created the group again).
TEST(SimulatorRegression, Seed9_AnExportFromBeforeAReshardIsRestoredIntoTheLayout) {
  ExpectPassesReaching(9, "restored_across_reshard");
}

TEST(SimulatorRegression, Seed17_AbandonedShardNotRevokedWhileItsReadIsInFlight) {
  ExpectPassesReaching(17, "abandoned_with_read_in_flight");
}
TEST(SimulatorRegression, Seed66_FencedConsumerAbandonsBeforeHandoff) {
  ExpectPassesReaching(66, "abandoned_with_read_in_flight");
}

// compare_and_set.lua / MemoryStore: a coordinator paused inside its section (its mutex
// expired) wrote a member deadline from its stale clock over a later one another
// coordinator had written; the member was expired while its lease ran. Contract test:
// tests/sim/contract_test.cc LivenessRenewalNeverShortensADeadline.
TEST(SimulatorRegression, Seed137_StaleSectionNeverShortensAMemberLease) {
  ExpectPassesReaching(137, "stale_deadline_kept");
}

// compare_and_set.lua: the mutex vanished under a section; another coordinator renewed
// member c0-1 (a liveness-only write, same revision) while the section decided, on its older
// load, to expire c0-1 and hand its shards on — the CAS passed and two consumers held shard
// 0. A removal now carries the deadline its decision loaded and fails the write if the
// member was renewed since. Contract test: tests/sim/contract_test.cc
// ARemovalOfAMemberRenewedSinceTheLoadIsRefused.
// The kept seed was 93000387; the RS6 read each stream tick makes moved the draws so that no
// run within 300 of it reached the path any more, and 93000820 (a search from there) does.
// Pinned to one worker per coordinator (the simulator it was found on): with 1–4 workers
// drawn the draws moved again; the path is reached there too (3 in 1,332 sweep runs). Since
// the simulator runs the library's NodeCore (issue 10) the first run from 93000820 to reach it
// is 93000951 (run 132); since it runs PublishCall (issue 10), 93002986 (run 2,036 from
// there); since it runs the library's producer itself on a simulated platform (issue 10),
// 93005640 (run 2,655 from 93002986). Since it runs the library's ReaderRedis over a simulated
// cluster (issue 10) no run in 4,000 from there reached it with one worker; with 1–4 workers
// drawn (as every other seed runs), 93008430 (run 2,791 from 93005640): the search starts
// there.
TEST(SimulatorRegression, Seed93000387_ARenewalSinceTheLoadKeepsTheMemberAlive) {
  ExpectPassesReaching(93008430, "stale_removal_refused", 300, /*reshards=*/-1,
                       /*coord_workers=*/0);
}

// Coverage pin, not a bug (SPEC RS6): in a reshard run the layout hash alone is put back to
// before the last reshard (fault redis.layout_rollback) while the streams keep the seals;
// the next stream tick writes the lost generation back from the seals' rsc-next and the
// reshard finishes as usual — per-key order and delivery checked as in any run. Unit tests:
// tests/core/layout_behind_test.cc; integration: ReshardTest.ALayoutRolledBack….
TEST(SimulatorRegression, Seed12_ALayoutPutBackPastAReshardIsRolledForward) {
  ExpectPassesReaching(12, "layout_rolled_forward");
}

// L1, found by the search above once the coordinator's heartbeat queue changed the
// simulator's schedule (issue 14): a completion hint read the layout, waited for the
// group's mutex across a snapshot restore, and wrote the restored group onto the layout's
// lost generation; nothing could roll the layout forward to it. The group is now written
// only if the layout read again after the group's load is unchanged.
TEST(SimulatorRegression, Seed82_AGroupIsNotWrittenFromALayoutARollbackTookAway) {
  ExpectPassesReaching(82, "layout_adoption_deferred");
}

// checkers.cc (S2): a crashed holder's static-membership successor handed the shard on
// without reading it; the handoff was judged unjustified.
TEST(SimulatorRegression, Seed57_StaticSuccessorMayHandTheShardOn) {
  ExpectPassesReaching(57, "static_member_replaced");
}

// checkers.cc (S1): a failover lost liveness renewals (beyond the K2 margin), the member was
// expired while its lease ran; told UNKNOWN_MEMBER_ID (which untaints it) it was still
// stopping its abandoned reads when the shard's next owner started.
// checkers.cc (S1), found by the test command's random sweep once the simulated runtime
// started a reader only when routing had given its stream key (as src/client/consumer.cc
// does): a restarted consumer got its grant, a snapshot restore lost it, and its reader
// started under that lost grant after the rollback; told UNKNOWN_MEMBER_ID it was still
// stopping that reader when the checker judged the overlap again. A holding acquired while
// tainted is now marked like one running at the rollback. The path is rare: the search
// starts at run 317 from the found seed, the first to reach it since the simulator reshards
// (issue 12; reshard runs go without rollback faults), and allows 300 after it.
TEST(SimulatorRegression, Seed14666323561076346009_ReaderStartedUnderALostGrantStaysExcused) {
  ExpectPassesReaching(14666323561076346009ULL + 316, "an overlap a rollback excused",
                       [](const SimResult& r) { return r.counters.overlaps_excused > 0; });
}

// sim_consumer.cc: a drain's handler call hung (BUGGIFY consumer.stuck_drain), the lease
// ended under a clock jump, and a later jump came before the hung call returned; the
// window's grant, kept in local time and converted at the release, came out before the run
// began (negative: "unbounded") and read as a resumed lease next to the shard's new owner. A
// simulator bug of the one-runtime change (issue 10): the grant is converted at the abandon.
// Found by a 10-minute sweep.
TEST(SimulatorRegression, Seed327948948797536602_AbandonedGrantSurvivesALaterClockJump) {
  ExpectPassesReaching(327948948797536602ULL, "abandoned_released_after_clock_jump");
}

// decide.cc DecideCreate (S1): the metadata key was deleted 3 ms after an answer renewed
// c0's assignment lease; with no export the operator created the group again 1.3 s later,
// and a new consumer got OK with every shard while c0 still read under that lease. A create
// over a lost key now starts a correction round, as a restore does.
TEST(SimulatorRegression, Seed8431395707449856820_CreateOverALostKeyWaitsForOldLeases) {
  ExpectPassesReaching(8431395707449856820ULL, "created_over_lost_key");
}

TEST(SimulatorRegression, Seed1153_WorkStartedUnderALostGrantStaysExcused) {
  ExpectPassesReaching(1153, "an overlap a rollback excused",
                       [](const SimResult& r) { return r.counters.overlaps_excused > 0; });
}

// checkers.cc (S3/S4): in such a rollback-excused overlap the zombie's last blocked read
// took an entry into its pending list; the new owner, past its takeover, delivered later
// sequence numbers of that key. The path is rare (under one run in 300 reaches it): the
// search starts at the first run from the found seed, 8364602991614658966, that reaches it
// (run 385 when this test was written; run 156 since the simulator runs the library's reader
// core and the stuck-drain fault, issue 10; run 881 since its coordinators run the production
// tick pass and half the runs reshard without rollback faults, issue 12; run 1152 since
// it runs the library's NodeCore, issue 10; run 2071 since it runs PublishCall, issue 10;
// run 2790 since the coordinator's heartbeat queue hands the lead over, issue 14: every run
// from 2071 to 2789 passed; run 3136 since it runs the library's producer itself, issue 10:
// every run from 2790 to 3135 passed; run 5023 since it runs the library's consumer facade
// itself, issue 10: every run from 3136 to 5022 passed), so the test costs one run while the
// simulator draws the same numbers and at most 300 after it changes.
TEST(SimulatorRegression, Seed8364602991614658966_EntryStrandedByARollbackOverlap) {
  ExpectPassesReaching(8364602991614658966ULL + 5022, "late_read_reclaimed");
}

// checkers.cc (S4 under a lost grant), found by the search above once the simulator ran
// PublishCall (issue 10): a snapshot restore took Redis to before a reshard's seals, so the
// parents were open again and a producer routed by the restored layout wrote a key's next
// message into one; a consumer whose heartbeats failed since still held a child shard under
// its grant from the lost future, started that child's reader again once the coordinators
// sealed the parents and re-created the children's keys, and delivered the key's following
// message before the parent's entry. The coordinators cannot know a grant Redis lost: S4 is
// not judged for a delivery under a holding the rollback marked (skips_excused), and the
// parent's entry must still be delivered (S3).
// Unit test: CheckerS4.ASkipUnderAGrantARollbackLostIsExcused.
// Since the coordinator's heartbeat queue and the layout re-read inside a group's Mutate
// (issue 14) changed the draws, no run reached the path again: not in 300 from this seed,
// nor in 2,475 more (runs 300-1,328 and 1,500-2,947 from it, all passing) nor in 1,858 with
// --reshards 2 from 20390000 (and sweeps of thousands of seeds never counted one). A search
// that cannot find its path would fail for nothing, so this replays the seed; the rule it
// was about is pinned by the checker's unit test above.
TEST(SimulatorRegression, Seed8364602991614660239_AZombieReadsAChildBeforeItsReopenedParent) {
  ExpectPasses(8364602991614660239ULL);
}

// The simulator: a rollback resurrected a deleted key before the operator's restore (the
// guard was reset while the DEL waited for a quiet moment).
TEST(SimulatorRegression, Seed3014647248229445331_NoRollbackWhileAKeyAwaitsRestore) {
  ExpectPassesReaching(3014647248229445331ULL, "rollback_deferred_for_restore");
}

// The simulator: a failover lost the group before any export existed; nobody re-created it
// and the heal never completed.
TEST(SimulatorRegression, Seed17374015647051678407_LostGroupIsCreatedAgain) {
  ExpectPassesReaching(17374015647051678407ULL, "lost_group_created_again");
}

// The simulator: a rollback made the group re-read shard 0 from the start; the run ended
// (and judged S3) before the one consumer worked off the backlog. The end now waits for
// the last deliveries, within a bound.
TEST(SimulatorRegression, Seed13779019578390884105_EndWaitsForTheBacklog) {
  ExpectPassesReaching(13779019578390884105ULL, "end_waited_for_backlog");
}

// The simulator itself: a coordinator's worker fiber counted as idle during its first
// request, so a second request resumed it while it was parked in a Redis call.
TEST(SimulatorRegression, Seed13_CoordinatorFiberIsResumedOnlyByItsOwnWakeup) { ExpectPasses(13); }
// Found by the 2-minute ctest sweep: a consumer crashed while its XREADGROUP … BLOCK waited
// at the simulated Redis, which later served it a new entry into the dead consumer's
// pending list (S4 for that key). Real Redis frees a client's blocked reads when its
// connection closes; the simulator now does the same on a crash.
TEST(SimulatorRegression, Seed9237849144637424534_DeadConsumersBlockedReadIsFreed) {
  ExpectPassesReaching(9237849144637424534ULL, "dead_consumer_read_freed");
}

// Found by the CI run's sweep: a coordinator paused inside its section served a consumer's
// REVOKED report ~3 s late; by then the shard had gone back to that consumer and a newer
// revoke of it had begun, which the late report released — the new owner read while the
// old one still did (S1). Reports now release only revokes at most as new as the version
// they carry (decide.cc ApplyRevokedReports; StaleRevoke.* in tests/core).
TEST(SimulatorRegression, Seed458260817779326665_LateRevokedReportReleasesNoNewerRevoke) {
  ExpectPassesReaching(458260817779326665ULL, "stale_revoke_ignored");
}

// Found by the first sweep with the late-read reclaim in the simulated reader: a request
// from before a correction round, delivered late, was answered SYNC_METADATA by the write
// that ended the round, and its network duplicate — decided on that write — got OK (S6).
// The SYNC decision is now judged on the state the answer derives from
// (Scenario07.LateRequestWhoseWriteEndsTheRoundIsAnsweredLikeItsRetry).
TEST(SimulatorRegression, Seed4460115182493809583_SyncJudgedOnTheWrittenState) {
  ExpectPassesReaching(4460115182493809583ULL, "round_ended_by_heartbeat");
}

// Found by the CI sweep on a fresh checkout: a member that expired while its process still
// drained a shard rejoined reporting that shard DRAINING; the join's own write handed it the
// free shard, yet the answer listed it as a K4 conflict (DRAIN, judged before the write) while
// the retry on the same revision got OK (S6). Conflicts are now judged on the written state
// (Idempotence.RejoinStillDrainingAShardItIsHandedAgainIsAnsweredLikeItsRetry in tests/core).
TEST(SimulatorRegression, Seed4437484523665089528_ConflictsJudgedOnTheWrittenState) {
  ExpectPassesReaching(4437484523665089528ULL, "rejoin_regained_draining_shard");
}

// Found by the CI sweep (issue 12, with reshards): a parent's completion cleared its owner
// while that member still held a lease on it; its drain answers kept renewing that lease, and
// a reopen (a completion check read before the completion was recorded) handed the shard to
// the other member: two readers (S1). A completed shard is now drained by its owner like any
// revoke (GroupReshard.ACompletedParentIsDrainedNotDroppedSoAReopenWaitsForItsReader).
// The reopen that triggered it came from a completion check observed before the group's
// mutex was taken (older than the completion a hint recorded); since the stream tick observes
// again under the mutex (StreamTick.AnOlderObservationNeverReopensAParentAHintRecordedComplete)
// no simulated run reopens a parent without a Redis rollback, which reshard runs exclude
// (docs/simulator.md "Not covered"): 300 seeds from +137 reached none. The reopen path stays
// pinned by the core test above; this runs the seed on until a parent is completed and
// drained by its owner, the path the fix changed.
TEST(SimulatorRegression, Seed9204068676931625525_ACompletedParentIsDrainedNotDropped) {
  ExpectPassesReaching(9204068676931625525ULL, "parent_completed");
}

// ── Mutants: deliberately broken rules the checkers must catch (sim/mutants.h) ──

struct Mutant {
  const char* name;
  const char* invariant;
  // Seeds 1..seeds must catch it. A budget is several times the mean seeds-to-catch measured
  // from three base seeds (in the comment), so a change that merely reshuffles the
  // simulator's random draws does not hide a mutant that is still caught as often as before.
  int seeds = 20;
  // Built as its own binary (sim/CMakeLists.txt) rather than chosen with --mutant.
  bool binary = false;
};

// How ctest and gtest name a parameter (instead of its bytes).
void PrintTo(const Mutant& m, std::ostream* os) {
  *os << m.name << " (" << m.invariant << ", " << m.seeds << " seeds)";
}

std::string RunMutant(const Mutant& m, int* status) {
  const std::string bin = std::string(RSC_BINARY_DIR) + "/sim/" +
                          (m.binary ? "rsc-sim-mutant-" + std::string(m.name)
                                    : "rsc-sim --mutant " + std::string(m.name));
  const std::string cmd =
      bin + " --seeds " + std::to_string(m.seeds) + " --quiet --expect '" + m.invariant + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return "popen failed: " + cmd;
  }
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) out += buf.data();
  *status = pclose(p);
  return out;
}

class MutantIsCaught : public ::testing::TestWithParam<Mutant> {};

TEST_P(MutantIsCaught, WithinItsSeedBudget) {
  int status = 0;
  const std::string out = RunMutant(GetParam(), &status);
  EXPECT_EQ(status, 0) << out;
  // The invariant caught, one of the expected ones ("S1|S2": either).
  const size_t at = out.find("mutation caught: ");
  ASSERT_NE(at, std::string::npos) << out;
  const size_t from = at + std::string("mutation caught: ").size();
  const std::string caught = out.substr(from, out.find(' ', from) - from);
  const std::string expected = "|" + std::string(GetParam().invariant) + "|";
  EXPECT_NE(expected.find("|" + caught + "|"), std::string::npos)
      << "caught " << caught << ", expected " << GetParam().invariant << ": " << out;
  // The report a developer gets: the seed, the invariant, the trace, the replay command.
  EXPECT_NE(out.find("FAILED seed"), std::string::npos) << out;
  EXPECT_NE(out.find("last "), std::string::npos) << out;
  EXPECT_NE(out.find("replay: "), std::string::npos) << out;
  if (!GetParam().binary) {
    EXPECT_NE(out.find(std::string("--mutant ") + GetParam().name), std::string::npos)
        << "the replay command must name the mutant: " << out;
  }
}

// One per rule (issue 9): K1, K4, K5, M2/M10, M5, M6, M8, R3.2 (twice: the CAS and the
// steady renewal), C1, C3, C7, PR3/PR5.
INSTANTIATE_TEST_SUITE_P(
    Mutants, MutantIsCaught,
    ::testing::Values(
        Mutant{"assign_before_revoke", "S1", 20},  // 1, 1, 1
        // S6 too: a version the mutant raised is answered, and the commit written under it
        // names another (seed 9 at one build of the NodeCore change, issue 10; S7 at 21 since).
        Mutant{"bump_version_on_rollback", "S7|S6", 80},  // 21, 18, 8, 21
        Mutant{"k4_no_conflict_revoke", "S11", 40},       // 2, 8, 2
        Mutant{"k5_accept_stale_epoch", "S10", 80},       // 33, 2, 4
        Mutant{"m5_drop_blockers", "S12", 150},           // 39, 18, 25
        Mutant{"m6_end_round_early", "S13", 30},          // 9, 1, 5
        Mutant{"m8_ignore_lineage", "S7", 200},           // 59, 9, 33
        Mutant{"r32_answer_before_cas", "S6", 150},       // 58, 13, 6
        // Caught first as S1, S6 or S8 depending on the seed: 1, 0, 1, 0, 0.
        Mutant{"steady_renewal_unchecked", "S1", 20},
        Mutant{"c1_lease_from_receive", "S1", 20},  // 1, 1, 1
        Mutant{"c7_skip_takeover", "S4", 20},       // 1, 1, 1
        Mutant{"c4_handle_after_lease", "S1", 20},  // 2, 2, 1
        // S2 when the holder it was taken from had crashed (seed 5 since the RS6 stream-tick
        // read moved the draws), S1 while it still read. Since the simulator runs the
        // library's NodeCore (issue 10) a drain cuts the blocked read short (CLIENT UNBLOCK)
        // as production does, so a drain meets a handler call (the stuck-drain fault) only
        // mid-batch and takes are rarer: seed 14, and 156 at one build of that change.
        Mutant{"c8_release_taken_at_once", "S1|S2", 200},  // 5, 32, 5, 13, 5, 14
        // S1 when a parent's owner the mutant cleared still read it and the
        // parent, re-checked incomplete, went to another member (seed 4 since
        // reshard runs have failovers; from other bases S4 after 10, 6, 3).
        // S12 when a member still holding such a parent claims it in a
        // correction round: the mutant cleared its owner with no blocker (M5;
        // seed 4 since half the runs pipeline their backlog reads).
        Mutant{"rs3_children_early", "S4|S1|S12", 20},          // 2, 3, 1
        Mutant{"pr5_ignore_routing_lease", "S5", 20},           // 2, 1, 1
        Mutant{"resume_revoking_on_failure", "S1", 60, true}),  // 6, 21, 3, 12, 2
    [](const auto& info) { return std::string(info.param.name); });

// Every run-time mutant is tested above, and each names a rule and the invariant that
// catches it.
TEST(Mutants, EveryRunTimeMutantIsListed) {
  EXPECT_EQ(Mutants().size(), 15u);
  for (const MutantInfo& m : Mutants()) {
    EXPECT_NE(std::string(m.rule), "");
    EXPECT_NE(std::string(m.invariant), "");
    EXPECT_NE(FindMutant(m.name), nullptr);
  }
  EXPECT_EQ(FindMutant("no_such_mutant"), nullptr);
}

// Found by the CI run's sweep (checker gap): a join was committed at 34.918 s, a failover at
// 35.062 s lost it, and the answer — decided before, held up by a slow Redis call — reached
// the consumer at 35.281 s. The rollback's taint looked only at answers already heard, so a
// second consumer granted the same shards by the rolled-back store looked like S1. The
// documented window of a lost grant (no WAIT on grants, docs/protocol.md) is the same
// whether the answer arrives just before the failover or just after: the simulation now
// taints an answer to a request sent before the rollback whose view the store lost and whose
// state was committed while it was in flight (TaintAnswerAcrossRollback, probe
// answer_across_rollback_tainted). Since the simulator runs PublishCall (issue 10) the first
// run from the found seed to reach the path is run 290; since it runs the library's producer
// itself (issue 10), run 1,126 (every run from 290 on passed); since it runs the library's
// consumer facade itself (issue 10), run 1,699 (every run from 1,126 on passed); since it runs
// the library's ReaderRedis over a simulated cluster (issue 10), run 2,018 (every run from
// 1,699 on passed): the search starts there.
TEST(SimulatorRegression, Seed14721432028603566224_AnAnswerThatCrossedAFailoverIsTainted) {
  ExpectPassesReaching(14721432028603566224ULL + 2017, "answer_across_rollback_tainted");
}

// Found by a 25-minute sweep (simulator bug, L1): a layout put back past a reshard 5 s before
// the heal still named only the sealed generation at the heal, so L1 judged the sealed
// shards; the coordinator rolled the layout forward 0.3 s after the heal (RS6) and those
// shards, read to their end, were owned by no one. L1 now judges a generation that appears
// after the heal from when it appears (Simulation::WatchNewestGeneration). The path is rare
// (about one run in 2,000 with reshards): since reshard runs have every fault the draws
// moved, and 3,250 runs from the found seed (default and --reshards 2) did not reach it; the
// search started at the first --reshards 2 run after it that did, 20265583, pinned to one
// worker per coordinator and to one command at a time (the simulator it was found on;
// --coord-workers 1 --pipelined 0). Since a reshard waits one routing lease before it seals
// (seed 20265809, below), the first such run from there is 20266489 (run 907); since the
// simulator runs the library's NodeCore (issue 10), 20266886 (run 398 from 20266489). Since
// it runs PublishCall (issue 10), no run in 1,585 from there reached it; 20300405, the first
// from 20300000 that does (run 406), was where the search started. Since a backlog's next
// live round goes out before the last one's answers (NodeCore::NextRoundFirst), no run in
// 2,100 from there reached it; 20311114, the first from 20310000 that does (run 1,115), was
// where the search started. Since the coordinator's heartbeat queue and the layout re-read
// inside a group's Mutate (issue 14), no run in 300 from there reached it; 20380692, the
// first from 20380000 that does (run 693), was where the search started. Since the simulator
// runs the library's producer itself (issue 10), 20382376 (run 1,685 from there); since it
// runs the library's consumer facade itself (issue 10), 20384020 (run 1,645 from there); since
// it runs the library's ReaderRedis (issue 10; --pipelined 0 is now a simulated cluster),
// 20385432 (run 1,413 from there) is where it starts.
TEST(SimulatorRegression, Seed20263872_AGenerationRolledForwardAfterTheHealIsJudged) {
  ExpectPassesReaching(20385432, "newest_generation_after_heal", 300, /*reshards=*/2,
                       /*coord_workers=*/1, /*pipelined=*/0);
}

// reader_core.cc LateReadFound (C7 step 4), the path the simulator opened once it ran the
// library's NodeCore (issue 10): an abandon cut the live connection while its read was
// blocked at Redis, Redis served that read an entry before the close arrived, and the
// process's next reader of the shard (same consumer name) had already taken over; the
// late-read check finds the entry under our own name below its batch and reads the pending
// list again. Without that, later entries of the key were delivered first (S4). Unit tests:
// ReaderCoreTest.OurOwnEntryBelowTheBatchIsALateReadToo and its neighbours. Found by
// `rsc-sim --minutes 3 --base-seed 20280000`. The path is rare (about one run in 300): since
// the reader node cuts a round only once it is out and the simulator runs PublishCall
// (issue 10), no run in 1,437 from the found seed reached it; the search starts at 5066, the
// first run from 5000 that does (run 67). Since the simulator runs the library's consumer
// facade itself (issue 10), 6016 (run 951 from 5066); since it runs the library's ReaderRedis
// over a simulated cluster (issue 10), 6585 (run 570 from 6016).
TEST(SimulatorRegression, Seed20280039_AnEntryACutReadTookIsReclaimedUnderOurOwnName) {
  ExpectPassesReaching(6585, "own_late_read_reclaimed");
}

// Found by the Seed20263872 search once the simulator ran the library's NodeCore (issue 10;
// simulator fault model, S4): a snapshot restore took the layout to before a reshard's seals,
// and the fault redis.layout_rollback then "put back" the layout saved before the last
// reshard — newer than the restored one, a layout from the future of its streams that said a
// generation the restore had unsealed was read out; a producer routed there by the restored
// group wrote it while its children were read. The fault now only moves the layout back;
// the search starts at 20267127, the first run from the found seed to reach the refused
// put-back since the simulator's reader driver cuts a round chosen but not yet sent (run 331),
// 20267359 since it runs PublishCall (run 233 from there), 20267684 since a backlog's next
// live round goes out before the last one's answers (NodeCore::NextRoundFirst; run 326), and
// 20268123 since it runs the library's producer itself (issue 10; run 440).
TEST(SimulatorRegression, Seed20266797_ALayoutIsPutBackOnlyBackwards) {
  ExpectPassesReaching(20268123, "layout_put_back_refused_forward", 300, /*reshards=*/2,
                       /*coord_workers=*/1, /*pipelined=*/0);
}

// Found by the Seed20263872 search once pipelined runs were drawn (S4): a whole-Redis restore
// to a snapshot from before a reshard left no trace of it, producers still routed to the
// generation it made (PR4), and a second reshard within their routing lease took the same
// ids and keys (D2: highest + 1) and created them; a stale XADD … NOMKSTREAM, refused until
// then, landed in the new generation after newer entries of its key. A reshard now seals and
// creates keys one routing lease + 1 s after its PREPARING write (Generation::prepared_ms;
// the durable pin is StreamTick.NothingIsSealedOrCreatedWithinARoutingLeaseOfThePreparingWrite).
// Without the wait this search failed at 20265809; with it, it reached a reshard that reuses
// the erased generation's keys and passed. Since the simulator runs the library's NodeCore
// (issue 10) the first run from 20265583 to reach that path is 20265940 (run 358); since it
// runs PublishCall, 20266138 (run 199 from there): the search starts there.
TEST(SimulatorRegression, Seed20265809_AReshardAfterARestoreWaitsOutTheLostRouting) {
  ExpectPassesReaching(20266138, "erased_generation_keys_reused", 300, /*reshards=*/2,
                       /*coord_workers=*/1, /*pipelined=*/1);
}

// Found by CI's random sweep (S4): a stream tick read the layout with the 16 -> 10 reshard's
// generation ACTIVE, a snapshot restore then took Redis back to where it was still PREPARING
// (parents open, no child keys), and the tick, reading the tops after the restore, created
// the "missing" child keys of its stale layout. A producer still inside the routing lease of
// an answer from before the restore wrote k1-4 seq 71 to a child, then, routed by the
// restored layout, seq 72 to the open parent, read first. The tick now reads the layout
// again before it creates a key (GroupService::RecreateMissingKeys).
// The path is too rare for a search from this seed to find it again once the simulator's
// draws change (probe shard_key_recreate_deferred: 0 in 4,380 random seeds and 600 with
// --reshards 2 or 3), so this test only replays the seed. What keeps the bug out is durable
// elsewhere: StreamTick.AKeyIsNotRecreatedFromALayoutARollbackOvertookBetweenTheReads pins
// the re-read against a real redis-server, and every simulated run fails as RS2 the moment a
// tick creates a missing ACTIVE key (sim_coordinator.cc), which this seed did without the
// fix.
TEST(SimulatorRegression, Seed15524999770511949606_AKeyIsNotRecreatedFromAStaleLayout) {
  ExpectPasses(15524999770511949606ULL);
}

// Found by a 20-minute sweep after the routing-lease wait (simulator judge, L1): a 6 -> 1
// reshard under three producers left the one shard of generation 1 with 7,815 entries; one
// reader at ~100/s was still working through it 47 s after the heal, so generation 2's
// children waited for their parent (RS3, correct) past L1's bound. L1 now restarts while a
// sealed parent of the judged generation is incomplete and its reading advances
// (Simulation::WatchParentsDraining, probe l1_rearmed_parents_draining); a parent nobody
// reads does not advance and still fails L1.
TEST(SimulatorRegression, Seed20269224_ABackloggedParentRestartsL1WhileItIsRead) {
  ExpectPassesReaching(20269224, "l1_rearmed_parents_draining");
}

// Found by a 12-minute sweep after consumers began pipelining backlog reads (issue 10; the
// pipelining only moved the interleaving): a stream tick's completion hint applied a layout
// it read outside the group's mutex after another coordinator had adopted a newer revision
// that retired the parents; the stale revision brought them back ownerless and shard 11 went
// to c2-1 while c3-1 still held a lease on it (S1). DecideLayoutTick now writes nothing for
// an older revision whose ACTIVE generation is not behind. The durable pin is the core test
// GroupReshard.AStaleLayoutDoesNotBringBackRetiredShards; this replays the run it was found
// in (coord-0 and coord-1 racing over a 4 -> 13 -> 8 shard history) while the draws last.
TEST(SimulatorRegression, Seed20266010_AStaleLayoutDoesNotBringBackRetiredShards) {
  SimOptions o;
  o.seed = 20266010;
  const SimResult r = RunSimulation(o);
  EXPECT_FALSE(r.violation.has_value()) << FailureReport(o, r);
}

// Issue 12 (RS2 under failovers): reshard runs used to go without whole-Redis rollbacks, since
// the simulated Redis had no WAIT and a failover could lose a seal production waits for
// (sweep seed 20261769, with failovers enabled before WAIT was modelled: a failover lost the
// seals and the activation, a producer kept writing the new generation's keys, then wrote
// the parent: S4). The simulated coordinator now waits for the replica after the PREPARING
// layout and after each seal as production does (SimRedis::AcknowledgedAt), and reshard runs
// have failovers. Seed 2 reshards twice; a failover there loses a layout write.
TEST(SimulatorRegression, Seed2_AFailoverLosesALayoutWriteOfAReshardAndOrderHolds) {
  ExpectPassesReaching(2, "failover_lost_layout_write");
}

// Issue 10 (several worker fibers per simulated coordinator), found while building it —
// simulator bugs, both in what a kDecision records:
// seed 6 (S6 "from no revision"): a routing request's slow load of an older aggregate came
// back after another worker's write, and the recorder, which kept only the last aggregate it
// saw, could not name the one a steady renewal's stamp named. Aggregates are now looked up by
// stamp (probe steady_basis_seen_earlier).
TEST(SimulatorRegression, Seed6_ASteadyRenewalIsRecordedOnTheAggregateItsStampNames) {
  ExpectPassesReaching(6, "steady_basis_seen_earlier");
}
// seed 9 (S6 "committed as version 21"): in a batch, an answer decided before a later decision
// wrote derives from the loaded state (version 20, committed at revision 14), not from the
// batch's write (revision 15). Each answer is now recorded on its own decision's state and
// revision (probe batch_answer_before_write); a write committing several versions is recorded
// as one commit per version (batch_wrote_versions).
TEST(SimulatorRegression, Seed9_ABatchedAnswerDecidedBeforeTheBatchWroteIsJudgedOnTheLoad) {
  ExpectPassesReaching(9, "batch_answer_before_write");
}

}  // namespace
}  // namespace rsc::sim
