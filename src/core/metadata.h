#pragma once
// The group aggregate stored as JSON in the `aggregate` field of
// redis-stream:coord:{P:G}:metadata (SPEC R2.1). Pure data; see decide.h for the rules
// that change it and codec.h for its JSON form.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/types.h"

namespace rsc {

// Versions of the stored form. A coordinator refuses (METADATA_UNREADABLE, SPEC L3/M7)
// any hash whose schemaVersion or layoutVersion it does not know.
inline constexpr int kSchemaVersion = 1;
inline constexpr int kLayoutVersion = 1;

// How many (version, lineage token) pairs the aggregate keeps (SPEC M8: at least 64).
inline constexpr size_t kLineageWindow = 64;
// How many departed members' last epochs are remembered so a rejoin raises the epoch
// (K5) and a zombie gets FENCED_MEMBER_EPOCH rather than a fresh identity.
inline constexpr size_t kTombstoneLimit = 256;
// Minimum gap between assignmentLeaseMs and memberLeaseMs (K2's safety margin).
inline constexpr int64_t kMinLeaseMarginMs = 1000;
// Largest shard count a group (a generation) may have.
inline constexpr int32_t kMaxShards = 4096;
// Largest number of shards a group's record holds over all its unretired generations.
inline constexpr int32_t kMaxShardsPerGroup = 4 * kMaxShards;
// Largest value any stored counter (metadataVersion, lineage versions, assignmentEpoch,
// member and tombstone epochs, round ids, the hash's revision) may hold: 2^53 - 1, the
// largest integer every JSON reader (and Lua, whose numbers are doubles) represents
// exactly. Decisions add 1 to these, so int64 arithmetic on them never overflows; a
// record at the limit fails an invariant and its group fails closed (never the process).
inline constexpr int64_t kMaxCounter = (int64_t{1} << 53) - 1;
// Every duration of a group's config and of a stream's routing (docs/protocol.md 7.1,
// deviation 16): 10 ms … 24 h.
inline constexpr int64_t kMinDurationMs = 10;
inline constexpr int64_t kMaxDurationMs = 24LL * 3600 * 1000;
// A restored document must leave this many increments below kMaxCounter on every counter
// (a restore that would exhaust the counters is refused with 400, naming the field).
inline constexpr int64_t kRestoreHeadroom = int64_t{1} << 32;
// Largest time (ms since the epoch) a record may hold: 9999-12-31T23:59:59.999Z. Times are
// added to durations of at most a day (config bounds), far from overflowing int64.
inline constexpr int64_t kMaxTimeMs = 253'402'300'799'999;

struct GroupConfig {
  int64_t heartbeat_interval_ms = 1000;
  int64_t member_lease_ms = 10000;
  int64_t assignment_lease_ms = 8000;
  int64_t rebalance_timeout_ms = 30000;
  int64_t routing_lease_ms = 30000;
  int64_t routing_refresh_ms = 5000;
  bool operator==(const GroupConfig&) const = default;
};

// Rejects invalid combinations with a message naming the rule (SPEC §9, K2).
Status ValidateConfig(const GroupConfig& c);

// One shard's ownership. `owner` may read the shard; if `target` differs, the owner has
// been told to drain it since `revoke_since_ms`. A free shard (owner empty) with a
// target is handed to the target in the same write unless a correction-round blocker
// holds it (K1).
struct ShardState {
  // The shard's id (SPEC D2): unique per stream across generations. Records from before
  // generations have no id field and list shards 0..N-1 in order.
  int32_t id = 0;
  // The layout generation the shard belongs to (SPEC D1), and its Redis key as the layout
  // names it (clients read it from answers, never compute it).
  int32_t generation = 0;
  std::string stream;
  // RS3: this group has read the sealed shard to its end (its Redis consumer group delivered
  // the seal and has nothing pending), judged in Redis by the coordinator. A completed
  // shard has no target; an owner it had drains it and keeps it until it reports REVOKED
  // (or its lease ends), so a reopen never hands it to a second reader. The next
  // generation's shards are assigned only once every shard of the earlier generations is
  // completed. A re-check that finds it incomplete again (a failover lost the seal or
  // acks) reopens it.
  bool completed = false;
  std::string owner;
  std::string target;
  TimeMs revoke_since_ms = 0;
  // The metadata version of the write that began this revoke (0 when not revoking, or in a
  // record written before the field existed). A REVOKED report releases the shard only if
  // its request reports at least this version: any earlier report predates this revoke —
  // it answered an older one, e.g. a request a paused coordinator serves late — and the
  // owner may be reading the shard again since (simulator seed 458260817779326665).
  int64_t revoke_version = 0;
  // A stuck shard taken from its owner (SPEC §4.4 v2 per shard, docs/design/stuck-shards.md):
  // it drained past rebalanceTimeoutMs and its owner declared `shard-lease`. From the take
  // (taken_ms) no answer renews anyone's grant on it (it is listed in the owner's
  // takenShards); its owner is cleared at the first decision at or after release_at_ms
  // (taken_ms + memberLeaseMs, which is at least assignmentLeaseMs + the K2 margin), or
  // earlier on REVOKED, expiry or leave.
  // Both 0 when not taken.
  TimeMs taken_ms = 0;
  TimeMs release_at_ms = 0;
  bool operator==(const ShardState&) const = default;
};

struct Member {
  MemberId id;
  std::string instance_id;  // empty = dynamic member
  MemberEpoch epoch{1};
  TimeMs joined_ms = 0;
  bool leaving = false;  // asked to leave; gets no targets, removed once it owns nothing
  bool fenced = false;   // heartbeats refused with FENCED_MEMBER_EPOCH until it rejoins
  // Its latest accepted heartbeat declared the feature `shard-lease` (docs/protocol.md C8):
  // a shard it keeps draining past rebalanceTimeoutMs is taken from it alone; without the
  // feature the member is fenced (v1).
  bool shard_lease = false;
  // Its latest accepted heartbeat declared `layout-v2` (SPEC D5): it skips seal entries and
  // reports completedShards. A reshard is refused while a live member lacks it.
  bool layout_v2 = false;
  bool operator==(const Member&) const = default;
};

// A departed member (expired, fenced away, replaced, left): its last epoch.
struct Tombstone {
  MemberId id;
  MemberEpoch epoch;
  bool fenced = false;  // true: later heartbeats get FENCED_MEMBER_EPOCH, else UNKNOWN_MEMBER_ID
  bool left = false;    // left cleanly: a retried leave or heartbeat is answered "left" again
  TimeMs at_ms = 0;
  // Written for a member unknown to the stored state whose shard claims were recorded as
  // blockers: later claims of that incarnation (epoch <= this one) record nothing more, so
  // an unknown claimant blocks for one member lease, never indefinitely.
  bool claimed = false;
  bool operator==(const Tombstone&) const = default;
};

// A member that reported a shard as owned against the stored ownership during a
// correction round (M5). The shard is not handed to anyone while a blocker holds it.
struct Blocker {
  ShardId shard;
  MemberId member;
  // For a member unknown to the stored state: when its lease must have ended. 0 = the
  // member is known; the blocker then lasts until it reports REVOKED or leaves the group.
  TimeMs until_ms = 0;
  // The metadata version of the write that recorded it (0 in older records): like
  // ShardState::revoke_version, only a REVOKED report at least this new releases it.
  int64_t since_version = 0;
  bool operator==(const Blocker&) const = default;
};

struct CorrectionRound {
  int64_t id = 0;
  TimeMs started_ms = 0;
  MetadataVersion started_version;  // stored version right after the round was recorded
  std::vector<MemberId> synced;     // sorted
  std::vector<Blocker> blockers;    // sorted by (shard, member)
  bool operator==(const CorrectionRound&) const = default;
};

struct LineageEntry {
  MetadataVersion version;
  std::string token;
  bool operator==(const LineageEntry&) const = default;
};

struct GroupMetadata {
  GroupKey key;
  // The group's secret for lineage tokens (core/lineage_token.h): a claimed version whose
  // token verifies under it was issued by this group's coordinators. Written once (at
  // create, restore, or the first write of a record from before it existed), never shown
  // outside exports. Empty in such older records: every claim is then taken as genuine.
  std::string lineage_key;
  // When lineage_key was written: for one member lease after it, claims it cannot verify
  // are still taken as genuine (a client may hold a token the group issued before it had
  // this key, e.g. the group was lost and created again while its consumers ran).
  TimeMs lineage_key_since_ms = 0;
  int32_t shard_count = 0;
  GroupConfig config;
  MetadataVersion version;                    // +1 on every committed aggregate write
  std::string lineage;                        // fresh random token per committed version (M8)
  std::vector<LineageEntry> lineage_history;  // oldest first; last entry = (version, lineage)
  AssignmentEpoch assignment_epoch;           // +1 whenever any shard's target changes (K3)
  TimeMs created_ms = 0;
  TimeMs updated_ms = 0;
  // Every shard of the group's adopted, non-retired generations, ascending id (which also
  // orders them by generation). shard_count is the size of the ACTIVE generation.
  std::vector<ShardState> shards;
  // The generation producers write (the layout's ACTIVE one, as adopted) and the layout
  // revision the group last adopted (0: never, a record from before layouts).
  int32_t active_generation = 0;
  int64_t layout_revision = 0;
  std::vector<Member> members;        // sorted by id
  std::vector<Tombstone> tombstones;  // oldest first, at most kTombstoneLimit
  std::optional<CorrectionRound> round;
  int64_t rounds_started = 0;
  bool operator==(const GroupMetadata&) const = default;

  const Member* FindMember(const MemberId& id) const;
  Member* FindMember(const MemberId& id);
  const Tombstone* FindTombstone(const MemberId& id) const;
  // The shard with this id, or nullptr.
  const ShardState* FindShard(int32_t id) const;
  ShardState* FindShard(int32_t id);
  // RS3: a shard may be given to a member — it is not completed, and every shard of an
  // earlier generation is.
  bool Assignable(const ShardState& s) const;
  // The same for every shard at once, in `shards` order (one pass).
  std::vector<bool> AssignableShards() const;
  // The ACTIVE generation's shards in id order (the routing hash picks a position, D4).
  std::vector<const ShardState*> ActiveShards() const;
};

// The Redis stream key of shard `s` of generation 0 (and of v1 streams): one hash tag per
// shard so shards spread across cluster slots (R2.5). Later generations' keys come from the
// layout. Clients read keys from routing and answers, never compute them.
std::string ShardStreamKey(const std::string& stream, int32_t shard);

// Structural invariants every stored aggregate satisfies (used by the codec on load,
// by decide before writing, and by the property tests). Returns a message on failure.
Status CheckInvariants(const GroupMetadata& m);

}  // namespace rsc
