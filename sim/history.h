#pragma once
// History: what the checkers judge. One flat record type for everything a process (or the
// fault injector) observed, with a timestamp in microseconds on one clock shared by every
// process of a run:
//   * the deterministic simulator records simulated time (ms × 1000);
//   * real processes (tests/e2e, tests/chaos) write one JSON object per line (JSONL) with
//     CLOCK_MONOTONIC stamps, which are comparable across processes on one machine.
// The same checkers (sim/checkers.h) judge both, so a rule checked in simulation is checked
// the same way against real redis-server, real coordinators and real SIGKILLs.
//
// Logging discipline (what makes the intervals sound):
//   * `acquire` is recorded BEFORE the first read of a shard (XREADGROUP / XAUTOCLAIM);
//   * `release` is recorded AFTER the last read returned and the last handler call of that
//     shard returned (drained, abandoned or stopped);
//   * a process killed without a chance to log gets a `crash` record from whoever killed
//     it (the simulator, the test harness after waitpid), which ends all its intervals;
//   * `publish` is recorded after XADD was acknowledged, with the time the XADD was SENT
//     (`t_us`) and the routing lease end the producer believed in (`lease_end_us`).
//
// JSONL field names are the member names below; absent fields take the defaults, except
// `kind`, which every line must carry (ToJsonLine also always writes `t_us`). Strings are
// byte strings (bytes that are not UTF-8 survive a round trip). The checkers' exact reading
// of every kind, and the kFault details they act on, are in sim/checkers.h.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::sim {

enum class HistKind {
  // ── consumer ──
  kAcquire,    // member may read `shard` from t (epoch = assignment epoch, lease_end_us)
  kLease,      // the assignment lease now ends at lease_end_us (renewed or shortened)
  kRead,       // a read (XREADGROUP/XAUTOCLAIM/XCLAIM) on `shard` was issued at t
  kDeliver,    // handler called: shard, stream, id, key, seq, attempt
  kAck,        // XACK of `id` on `shard` confirmed
  kRelease,    // no more reads or in-flight work on `shard`; detail: drained|abandoned|…
  kHeartbeat,  // a heartbeat answer: status (or error code), version, lineage, epoch,
               // sent_us, grant_ms (the answer's assignmentLeaseMs, when known)
  // ── producer ──
  kPublish,         // XADD acked: key, seq, shard, stream, id, version, lease_end_us
  kPublishRefused,  // the producer failed closed (detail: the error), key, seq
  kRouting,         // a routing answer reached the producer: sent_us (of the refresh),
                    // grant_ms (the answer's routingLeaseMs), version, lineage
  // ── coordinator (the simulator; real coordinators when they log) ──
  kCommit,      // a CAS applied: revision, version, lineage
  kDecision,    // a response sent: member, status, version/lineage of the response,
                // req_version/req_lineage/req_epoch of the request, stored_version it was
                // decided on, revision it derives from (the committed one)
  kMutexEnter,  // a coordinator holds the group mutex (believes it does) from t
  kMutexExit,   // … until t (released, expired, or the process died)
  // ── process lifecycle and injected faults (the simulator, the harness, chaos driver) ──
  kStart,  // process started (member = its member id, detail = instance id or "")
  kStop,   // process exited cleanly
  kCrash,  // process killed (SIGKILL / simulated crash): ends every interval it had
  kFault,  // detail = fault kind: rollback, failover, snapshot_restore, key_delete,
           // restore, fence (member = the fenced member), coordinators_down,
           // coordinators_up, script_flush, mutex_expire, partition, heal, clog, pause,
           // resume, skew, …
  kLost,   // an acknowledged stream entry a rollback destroyed: shard, id (S3 excuse)
  kTaint,  // a rollback left `proc`'s view ahead of the store (its last answer's version is
           // not in the restored history, or its member's deadline went back): the simulator
           // emits one per such process right after the rollback fault, and one for an
           // answer heard later whose request was sent before the rollback and whose state
           // was committed while it was in flight (stamped at the rollback, so it may come
           // after events with later stamps)
};

std::string_view HistKindName(HistKind k);
std::optional<HistKind> ParseHistKind(std::string_view name);

struct HistEvent {
  int64_t t_us = 0;
  HistKind kind = HistKind::kFault;
  std::string proc;    // process name, unique per incarnation ("consumer-2#3")
  std::string member;  // member id (consumers), if any
  int32_t shard = -1;
  std::string stream;
  std::string id;    // stream entry id
  std::string key;   // message key
  int64_t seq = -1;  // per-key sequence number the producer put in the message
  int64_t attempt = 0;
  int64_t epoch = -1;
  int64_t version = -1;
  std::string lineage;
  int64_t req_version = -1;
  std::string req_lineage;
  int64_t stored_version = -1;
  int64_t revision = -1;
  int64_t lease_end_us = -1;
  int64_t sent_us = -1;  // kHeartbeat, kRouting: when the answered request was sent
  // kHeartbeat: the answer's assignmentLeaseMs; kRouting: its routingLeaseMs — the grant as
  // the coordinator made it, so the checkers need not trust the client's own lease sums.
  int64_t grant_ms = -1;
  int64_t req_epoch = -1;  // kDecision: the request's memberEpoch
  // Shard lists, written "[0,3,5]" ("" = not recorded). kHeartbeat: assigned = the answer's
  // assignedShards. kDecision: claimed = the request's ownedShards and DRAINING shards;
  // assigned / revoked = the answer's assignedShards / revokeShards; owned / blocked = the
  // shards the member owns / is recorded as blocking in the state the answer derives from,
  // and in_round = 1 if that state has a correction round (0 if not, -1 unknown).
  std::string claimed;
  std::string assigned;
  std::string revoked;
  std::string owned;
  std::string blocked;
  // kDecision: claimed shards that state does not have (a retired generation's, or one a
  // rollback of the layout lost): K4 lists them, M5 cannot block them.
  std::string absent;
  int64_t in_round = -1;
  // kCommit: the write ended the correction round of the state it replaced, which had
  // lasted this long on the coordinators' clocks (-1: no round ended).
  int64_t round_age_ms = -1;
  std::string status;
  std::string detail;
  // kDecision: canonical digests of the request and of the response (S6: a retried
  // request decided on the same revision must get an identical response).
  std::string req_digest;
  std::string resp_digest;
};

// A deque: a sweep records millions of events (about 0.8 KB each), and a vector's growth
// moved every one of them again at each doubling (measured: 3% of rsc-sim's time, and half
// its peak memory over 100 seeds).
using History = std::deque<HistEvent>;

// The shard-list fields: "[0,3,5]"; "" (not recorded) parses as nullopt.
std::string ShardList(const std::vector<int32_t>& shards);
std::optional<std::vector<int32_t>> ParseShardList(std::string_view text);

// JSONL: one object per line. Parse errors name the line number.
std::string ToJsonLine(const HistEvent& e);
struct ParseOutcome {
  History events;
  std::vector<std::string> errors;  // "line 12: …"
};
ParseOutcome ParseJsonLines(std::string_view text);

}  // namespace rsc::sim
