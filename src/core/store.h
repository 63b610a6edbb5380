#pragma once
// MetadataStore port: the few operations the coordinator needs from Redis (SPEC §2).
// Production: src/redis/redis_store.h (hiredis). Simulation: sim/ fakes. A contract
// suite runs the same scripts against both.
//
// Thread safety: implementations are safe for concurrent use from several threads.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/layout.h"
#include "core/liveness.h"
#include "core/metadata.h"
#include "core/result.h"

namespace rsc {

// What identifies the stored aggregate bytes a decision was made on: the revision, the
// write token of the write that stored them and their length (the same guard Load uses
// to trust a cached parse). An empty token (a hash written by hand) identifies nothing.
struct AggregateStamp {
  StoreRevision revision;
  std::string write_token;
  int64_t aggregate_len = -1;
};

struct StoredGroup {
  StoreRevision revision;
  std::shared_ptr<const GroupMetadata> meta;
  Liveness liveness;
  AggregateStamp stamp;  // of the aggregate `meta` was parsed from
};

// Outcome of a compare-and-set. `applied` false = revision conflict (counted, R2.6).
struct CasOutcome {
  bool applied = false;
  StoreRevision revision;  // the revision now stored (new one when applied)
  AggregateStamp stamp;    // of the aggregate written (applied with `next` only)
};

class MetadataStore {
 public:
  virtual ~MetadataStore() = default;

  // Loads the group hash and the liveness deadlines due at `now_ms`.
  // Errors: GROUP_NOT_FOUND (key absent, not in index), METADATA_MISSING (key absent but
  // indexed), METADATA_UNREADABLE (unknown schema/layout version, corrupt JSON or broken
  // invariants), REDIS_UNAVAILABLE.
  virtual Result<StoredGroup> Load(const GroupKey& key, TimeMs now_ms) = 0;

  // One atomic script (R2.6): if the stored revision equals `expected`, write `next`
  // (when non-null: aggregate, revision+1, schemaVersion, layoutVersion, updatedAt) and
  // apply `liveness` — where a set only ever raises a member's deadline (liveness-only
  // writes keep the revision, so a stale section could otherwise shorten a lease another
  // coordinator renewed); otherwise change nothing. A key that vanished is a conflict
  // (never recreated, L1). Errors: REDIS_UNAVAILABLE, UNKNOWN_RESULT (sent, no reply).
  virtual Result<CasOutcome> CompareAndSet(const GroupKey& key, StoreRevision expected,
                                           const GroupMetadata* next,
                                           const LivenessUpdate& liveness, TimeMs now_ms) = 0;

  // The steady heartbeat's one write (issue 14): in one atomic step, if nobody holds the
  // group mutex, the stored aggregate is still the one `basis` identifies (revision, write
  // token, length, schema and layout versions), the liveness set holds exactly
  // `member_count` deadlines and none is due at `now_ms` — i.e. a Load now would return
  // that aggregate and an empty, partial liveness map — then raise the deadlines in `set`
  // (never lowering one, as CompareAndSet) and return true; otherwise change nothing and
  // return false. So deciding against the cached aggregate and that liveness, then
  // calling this, is the locked load–decide–CAS cycle run at one instant. Errors:
  // REDIS_UNAVAILABLE, UNKNOWN_RESULT. Stores without it answer false (no fast path).
  virtual Result<bool> RenewIfSteady(const GroupKey& /*key*/, const AggregateStamp& /*basis*/,
                                     size_t /*member_count*/,
                                     const std::vector<std::pair<std::string, TimeMs>>& /*set*/,
                                     TimeMs /*now_ms*/) {
    return false;
  }

  // Creates the hash (revision 1) only if absent, adds the index entry, seeds liveness.
  // Errors: GROUP_EXISTS, REDIS_UNAVAILABLE.
  virtual Result<StoreRevision> Create(const GroupMetadata& meta, TimeMs now_ms) = 0;

  // Replaces the hash with `meta` whatever is stored (explicit operator restore, L2);
  // revision continues above any stored one. Adds the index entry.
  virtual Result<StoreRevision> Restore(const GroupMetadata& meta, TimeMs now_ms) = 0;

  // Deletes the hash, its liveness key and index entry if revision matches.
  // Errors: REVISION_CONFLICT, GROUP_NOT_FOUND/METADATA_MISSING, REDIS_UNAVAILABLE.
  virtual Status Delete(const GroupKey& key, StoreRevision expected) = 0;

  // Groups listed in the index (auxiliary, R2.2).
  virtual Result<std::vector<GroupKey>> ListGroups() = 0;

  // Full liveness map for views (leaseRemainingMs).
  virtual Result<Liveness> LoadAllLiveness(const GroupKey& key) = 0;

  // Group mutex (R2.7): SET NX PX, released by compare-and-delete. Returns the token,
  // or nullopt if not acquired within `wait`. The CAS, not the mutex, is what keeps
  // metadata safe if the mutex expires mid-section.
  virtual Result<std::optional<std::string>> Lock(const GroupKey& key,
                                                  std::chrono::milliseconds ttl,
                                                  std::chrono::milliseconds wait) = 0;
  virtual Status Unlock(const GroupKey& key, const std::string& token) = 0;

  // The layout of stream `stream` (SPEC D1): nullopt when the stream has none yet (a v1
  // stream, or no group was ever created on it). Errors: METADATA_UNREADABLE (unknown
  // schemaVersion, corrupt JSON, broken invariants, a layout of another stream),
  // REDIS_UNAVAILABLE.
  virtual Result<std::optional<StoredLayout>> LoadLayout(const std::string& stream) = 0;
  // Writes `next` if the stored revision equals `expected` (0: only if no layout exists).
  // `applied` false = conflict, with the stored revision (0: none). Errors as for
  // CompareAndSet.
  virtual Result<CasOutcome> CompareAndSetLayout(const std::string& stream, StoreRevision expected,
                                                 const Layout& next, TimeMs now_ms) = 0;
  // RS2's barrier before sealing: true once the layout at `revision` is known to survive a
  // failover of its master (a replica acknowledged it; no replicas: at once); false when the
  // layout moved on meanwhile (re-read it). REDIS_UNAVAILABLE when no replica acknowledged in
  // time. Stores without replication (the simulator's) only compare the revision.
  virtual Result<bool> ConfirmLayout(const std::string& stream, StoreRevision revision,
                                     TimeMs /*now_ms*/) {
    RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, LoadLayout(stream));
    return stored.has_value() && stored->revision == revision;
  }
};

}  // namespace rsc
