#include "sim/buggify.h"

#include <cstdio>

#include "core/check.h"

namespace rsc::sim {

const std::vector<SiteSpec>& AllSites() {
  static const std::vector<SiteSpec> kSites = {
      // ── network (per message) ──
      {"net.drop", 0.5, "drop a client↔coordinator message"},
      {"net.duplicate", 0.35, "deliver a client↔coordinator message twice"},
      {"net.delay", 0.35, "delay a message far beyond the usual latency (reorders too)"},
      {"net.redis_reset", 0.35, "a client's Redis reply is lost: connection reset"},
      // ── network (chaos actions) ──
      {"net.partition", 0.4, "partition a pair of processes for a while"},
      {"net.clog", 0.3, "swizzle-clog a random subset of links, unclog in random order"},
      // ── coordinator ──
      {"coord.crash", 0.35, "kill a coordinator at a random moment"},
      {"coord.crash_after_lock", 0.25, "kill a coordinator holding the mutex"},
      {"coord.crash_before_cas", 0.25, "kill a coordinator right before its CAS"},
      {"coord.crash_after_cas", 0.25, "kill a coordinator after its CAS, before it answers"},
      {"coord.cas_unknown_result", 0.25, "a CAS applies but its reply is lost"},
      {"coord.redis_slow", 0.25, "a coordinator's Redis call stalls (mutex may expire)"},
      {"coord.clock_jump", 0.35, "a coordinator's wall clock jumps (within the skew bound)"},
      // ── Redis ──
      {"redis.failover", 0.35, "promote the replica (loses what it has not received)"},
      {"redis.snapshot_restore", 0.25, "restart Redis from an older snapshot"},
      {"redis.key_delete", 0.25, "delete the metadata key; an operator restores an export"},
      {"redis.script_flush", 0.35, "SCRIPT FLUSH: the next scripted call reloads (NOSCRIPT)"},
      {"redis.noscript_reload_fails", 0.25, "the NOSCRIPT reload's connection drops"},
      {"redis.mutex_expire", 0.35, "the group mutex vanishes under its holder"},
      {"redis.replication_stall", 0.35, "replication falls seconds behind for a while"},
      // ── consumers, producers, operator ──
      {"consumer.crash", 0.6, "kill a consumer; restart with the same or a new identity"},
      {"consumer.shutdown", 0.4, "clean consumer shutdown (drain, leave), later restart"},
      {"consumer.clock_jump", 0.3, "a consumer's monotonic clock jumps forward"},
      {"consumer.slow_handler", 0.35, "a handler call takes much longer than usual"},
      {"consumer.hung_handler", 0.25,
       "a handler hangs for a member lease or more (a poison message)"},
      {"consumer.stuck_drain", 0.5,
       "a handler running when its shard is asked to drain hangs past the rebalance timeout"},
      {"producer.crash", 0.4, "kill a producer and restart it"},
      {"producer.clock_jump", 0.25, "a producer's monotonic clock jumps forward"},
      {"operator.fence", 0.25, "an operator fences a random member"},
      // Last, so every other site's draw for a seed stays what it was.
      {"redis.layout_rollback", 0.5,
       "reshard runs: the layout hash alone goes back to before the last reshard (RS6)"},
      {"redis.slot_migration", 0.5,
       "cluster seeds: a slot a reader uses migrates to another master (ASK, then MOVED)"},
  };
  return kSites;
}

const std::vector<ProbeSpec>& AllProbes() {
  static const std::vector<ProbeSpec> kProbes = {
      {"coord_crashed_after_cas", "a coordinator died between its CAS and its answer"},
      {"coord_crashed_before_cas", "a coordinator died holding a decision it never wrote"},
      {"coord_crashed_holding_mutex", "a coordinator died inside the mutex"},
      {"cas_conflict", "a CAS found another revision (GroupService reloaded)"},
      {"cas_unknown_result", "a CAS applied but the coordinator never heard back"},
      {"lock_timeout_answered", "a client got LOCK_TIMEOUT"},
      {"mutex_expired_in_section", "the mutex vanished while its holder was inside"},
      {"sync_metadata_delivered", "a consumer received SYNC_METADATA"},
      {"routing_sync_adopted", "a producer adopted a sync:true routing answer"},
      {"round_ended", "a correction round completed"},
      {"blocker_recorded", "a correction round recorded a blocking owner"},
      {"static_member_replaced", "a restarted instanceId took its old member's place"},
      {"member_expired", "the coordinator expired a member"},
      {"member_fenced", "a member was fenced (rebalance timeout or operator)"},
      {"shard_taken", "a shard drained past the rebalance timeout was taken from its owner (C8)"},
      {"taken_shard_released", "a taken shard was released at its release time (C8)"},
      {"heartbeat_duplicated", "the network delivered a heartbeat twice"},
      {"heartbeat_timed_out", "a consumer gave up waiting for a heartbeat answer"},
      {"lease_expired_while_reading", "a consumer failed closed at lease end (C4)"},
      {"lease_expired_while_draining", "a draining shard was abandoned at lease end"},
      {"takeover_claimed_pending", "a new owner claimed pending entries (XAUTOCLAIM)"},
      // Optional: here only the reads of a zombie holder in a rollback-excused overlap (sim/
      // checkers.h S1) leave such an entry — a rollback itself resets every connection, so
      // each reader takes over again anyway. A few seeds per thousand.
      {"late_read_reclaimed", "a reader found another consumer's entry pending and took over",
       false},
      {"pipelined_read_checked",
       "a backlog read came with the batch's XACK in front and its late-read check behind"},
      // The library's reader connections (client/node_core.h, driven by sim_reader_node.h).
      {"live_read_combined", "one blocking XREADGROUP read several shards of a consumer"},
      {"live_read_unblocked", "a returning reader cut the blocked read short (CLIENT UNBLOCK)"},
      {"live_read_cut", "an abandon cut the live connection's read in flight at the socket"},
      // Optional: cluster seeds only (a master's reads spanning slots, or after ASKING).
      {"live_read_polled", "a cluster node polled its readers' streams (non-blocking reads)",
       false},
      {"live_round_before_answers",
       "in a backlog, the next live round went out before the last one's answers were handed out"},
      // The library's ReaderRedis on the simulated cluster (sim/sim_cluster.h).
      {"cluster_moved", "a reader command reached a master that does not serve its slot (MOVED)"},
      {"cluster_ask", "a reader command reached the source of a migrating slot (ASK)"},
      {"cluster_asking_served", "the importing master served a command sent after ASKING"},
      {"cluster_blocked_read_redirected",
       "a read blocked on a slot that moved away was answered with the redirection"},
      // Optional: a failover resets every connection, and the reset itself has the map re-read
      // (ReaderRedis's failover watch), so a reader reaches the old address only when its retry
      // beats that re-read: about one seed in ten.
      {"cluster_refused", "a reader connected to a failed master's old address (refused)", false},
      {"cluster_node_retired",
       "a consumer's connections to a master no longer in the slot map were retired"},
      {"publish_refused_expired", "a producer failed closed: routing lease expired (PR5)"},
      {"noscript_reload", "a scripted call hit NOSCRIPT and reloaded"},
      {"acked_publish_lost", "a rollback destroyed an acknowledged publish"},
      {"metadata_missing_answered", "a client got METADATA_MISSING (key deleted)"},
      {"terminating_answered", "a client got COORDINATOR_TERMINATING"},
      {"restore_applied", "an operator restore replaced the metadata"},
      {"redelivery", "an entry was handed to a handler again"},
      {"drain_completed", "a consumer drained a revoked shard and reported it"},
      {"handler_hung", "a handler hung for at least a member lease"},
      {"reshard_started", "an operator reshard was accepted (RS1)"},
      {"publish_refused_sealed", "a producer's XADD hit a seal and went again later (RS2)"},
      {"publish_batch", "a producer's PublishBatch carried several keys"},
      {"metrics_scraped", "every live client's metrics were rendered and checked (O2)"},
      {"publish_waits_for_routing",
       "a publish refused by a stale target waited for a newer routing inside the call (RS2)"},
      {"parent_completed", "a sealed shard was recorded read to its end (RS3)"},
      {"stream_routing_resharded",
       "a producer routing by the stream (D4) was routed to a generation after the first"},
      {"steady_renewal", "a batch of steady heartbeats was committed in one round trip"},
      {"steady_renewal_refused",
       "a steady renewal found the group changed (or a member due) and took the locked path"},
      {"heartbeat_batch", "heartbeats of several members were decided under one write"},
      {"monitor_waited", "a coordinator worker waited for a group monitor another one held"},
      {"batch_wrote_versions", "one write committed the versions of several batched decisions"},
      // Optional: the paths the kept regression seeds were about (tests/sim/simulator_test.cc
      // asserts that each regression test still reaches its path).
      {"leave_answered_sync", "a leave reporting a version Redis lost was answered SYNC", false},
      {"abandoned_with_read_in_flight", "a shard was abandoned while its read was in flight",
       false},
      {"abandoned_released_after_clock_jump",
       "an abandoned reader ended after its consumer's clock jumped", false},
      {"stale_deadline_kept", "a liveness write would have lowered a deadline; it was kept", false},
      {"stale_removal_refused",
       "a write would have removed a member renewed after its load; it was refused", false},
      {"stale_revoke_ignored", "a REVOKED report older than its revoke released nothing", false},
      {"round_ended_by_heartbeat", "a heartbeat's own write ended a correction round", false},
      {"rejoin_regained_draining_shard",
       "a rejoin reporting a shard DRAINING was handed it in the join's write", false},
      {"dead_consumer_read_freed", "a crashed consumer's blocked read was freed at Redis", false},
      {"own_late_read_reclaimed",
       "a reader found an entry pending under its own name below its batch (a cut read served "
       "before the close reached Redis) and read it again",
       false},
      {"lost_group_created_again", "the group was lost with no export and created again", false},
      {"created_over_lost_key",
       "a create over a lost key started a correction round (no OK for one member lease)", false},
      {"rollback_deferred_for_restore", "a rollback waited for a deleted key's restore", false},
      {"end_waited_for_backlog", "the run's end waited for the last deliveries", false},
      {"parent_reopened", "a completed parent was found incomplete again (RS3)", false},
      {"generation_deleted", "a retired generation's keys were deleted after the retention (RS5)",
       false},
      {"publish_key_missing", "a producer's XADD NOMKSTREAM found no key (D3)", false},
      {"absent_shard_claimed", "a member claimed a shard its group does not have (K4)", false},
      {"restored_across_reshard",
       "an export from before a reshard was restored into the current layout (D3)", false},
      {"steady_renewal_after_stall",
       "a coordinator paused between a steady decision and its renewal", false},
      {"layout_rolled_forward",
       "a layout put back past a reshard was written forward from its seals (RS6)", false},
      {"layout_put_back_refused_forward",
       "the layout saved before the last reshard was newer than a restored one: not put back",
       false},
      {"layout_found_behind",
       "a layout was found behind its streams and could not be rolled forward (RS6)", false},
      {"l1_rearmed_parents_draining",
       "L1 restarted while a sealed parent of the judged generation was still being read to "
       "its end (RS3)",
       false},
      {"newest_generation_after_heal",
       "a generation newer than at the heal appeared (a layout rolled forward) and L1 judges it",
       false},
      {"answer_across_rollback_tainted",
       "a heartbeat answer decided before a rollback arrived after it and was tainted", false},
      {"shard_key_recreated",
       "a missing key of a resharded stream's ACTIVE generation was created by the tick (D3); "
       "the run fails there (RS2): the simulation deletes no stream key",
       false},
      {"shard_key_recreate_deferred",
       "a missing key of the ACTIVE generation was not created: the layout had moved since "
       "the tick read it (a rollback between the reads; D3, RS2)",
       false},
      {"layout_adoption_deferred",
       "a group was not written from a layout read before a rollback: the layout read again "
       "after the group's load differed (a stream tick's adoption or a completion hint; RS3, "
       "RS6)",
       false},
      {"erased_generation_keys_reused",
       "a reshard chose the keys of a routed generation a snapshot restore erased (D2, RS2's "
       "routing-lease wait)",
       false},
      {"failover_lost_layout_write",
       "a failover lost a layout write (a reshard's prepare or activation; RS2)", false},
      {"replica_wait_timed_out",
       "a seal or the layout barrier was not acknowledged by the replica in time (RS2's WAIT)",
       false},
      {"batch_answer_before_write",
       "a batched answer was decided before a later decision of its batch wrote", false},
      {"steady_basis_seen_earlier",
       "a steady renewal's aggregate was not the last one its coordinator saw (replies of "
       "several workers out of order)",
       false},
  };
  return kProbes;
}

Buggify::Buggify(uint64_t seed, Mode mode) {
  Rng rng(seed ^ 0xb0661f7b0661f7ULL);
  for (const SiteSpec& s : AllSites()) {
    bool on = false;
    switch (mode) {
      case Mode::kRandom:
        on = rng.Chance(s.enable_p);
        break;
      case Mode::kAllOn:
        on = true;
        break;
      case Mode::kAllOff:
        on = false;
        break;
    }
    on_[s.name] = on;
  }
}

bool Buggify::Enabled(std::string_view site) const {
  auto it = on_.find(site);
  if (it == on_.end()) {
    std::fprintf(stderr, "unknown BUGGIFY site %.*s\n", static_cast<int>(site.size()), site.data());
    RSC_CHECK(false);
  }
  return it->second;
}

bool Buggify::Fire(std::string_view site, double p, Rng& rng) const {
  return active_ && Enabled(site) && rng.Chance(p);
}

Probes::Probes() {
  for (const ProbeSpec& p : AllProbes()) counts_[p.name] = 0;
}

void Probes::Hit(std::string_view name) {
  auto it = counts_.find(std::string(name));
  if (it == counts_.end()) {
    std::fprintf(stderr, "unknown probe %.*s\n", static_cast<int>(name.size()), name.data());
    RSC_CHECK(false);
  }
  ++it->second;
}

}  // namespace rsc::sim
