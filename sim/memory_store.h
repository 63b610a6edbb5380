#pragma once
// MemoryStore: an in-memory MetadataStore with Redis's semantics, for the deterministic
// simulator and fast service tests. It keeps the hash fields as raw strings (so tests can
// corrupt them exactly as an operator could), the liveness sorted set, the index set and
// the mutex with a TTL on an injected clock. The contract suite
// (tests/sim/contract_test.cc) runs the same operation scripts against this and a real
// redis-server and requires identical results: a fake that drifts from Redis fails it.
//
// Differences by design: Lock never waits (single-threaded simulation: a busy mutex is a
// nullopt at once). Loads keep the last decoded aggregate of each group and reuse it while the
// stored text is byte for byte the same (Decoded below): a plain cache of a pure function, so
// no behaviour depends on it — unlike the coordinator's RedisStore cache, whose tokens and
// EVALSHA forms the integration tests cover. Not thread-safe.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "core/clock.h"
#include "core/store.h"

namespace rsc::sim {

class MemoryStore : public MetadataStore {
 public:
  // `clock` drives mutex expiry; `tokens` makes mutex tokens (deterministic in the sim).
  MemoryStore(Clock& clock, TokenSource& tokens) : clock_(clock), tokens_(tokens) {}

  Result<StoredGroup> Load(const GroupKey& key, TimeMs now_ms) override;
  Result<CasOutcome> CompareAndSet(const GroupKey& key, StoreRevision expected,
                                   const GroupMetadata* next, const LivenessUpdate& liveness,
                                   TimeMs now_ms) override;
  Result<bool> RenewIfSteady(const GroupKey& key, const AggregateStamp& basis, size_t member_count,
                             const std::vector<std::pair<std::string, TimeMs>>& set,
                             TimeMs now_ms) override;
  Result<StoreRevision> Create(const GroupMetadata& meta, TimeMs now_ms) override;
  Result<StoreRevision> Restore(const GroupMetadata& meta, TimeMs now_ms) override;
  Status Delete(const GroupKey& key, StoreRevision expected) override;
  Result<std::vector<GroupKey>> ListGroups() override;
  Result<Liveness> LoadAllLiveness(const GroupKey& key) override;
  Result<std::optional<std::string>> Lock(const GroupKey& key, std::chrono::milliseconds ttl,
                                          std::chrono::milliseconds wait) override;
  Status Unlock(const GroupKey& key, const std::string& token) override;
  Result<std::optional<StoredLayout>> LoadLayout(const std::string& stream) override;
  Result<CasOutcome> CompareAndSetLayout(const std::string& stream, StoreRevision expected,
                                         const Layout& next, TimeMs now_ms) override;

  // ── Fault injection (what an operator, a failover or a restore can do to Redis) ──
  struct Hash {
    std::map<std::string, std::string> fields;  // aggregate, revision, schemaVersion, …
  };
  struct Data {
    std::map<std::string, Hash> hashes;                         // by group tag
    std::map<std::string, std::map<std::string, TimeMs>> live;  // by group tag
    std::set<std::string> index;                                // "P:G"
    std::map<std::string, Hash> layouts;                        // by stream (SPEC D1)
  };
  // The whole dataset (a snapshot to roll back to, or to inspect).
  const Data& data() const { return data_; }
  void ReplaceData(Data d) { data_ = std::move(d); }
  // HSET-like raw edit / DEL of the metadata hash.
  void SetField(const GroupKey& key, const std::string& field, const std::string& value);
  void DeleteHash(const GroupKey& key);
  // The same for a stream's layout hash.
  void SetLayoutField(const std::string& stream, const std::string& field,
                      const std::string& value) {
    data_.layouts[stream].fields[field] = value;
  }
  void DeleteLayout(const std::string& stream) { data_.layouts.erase(stream); }
  // The mutex key vanishes (expiry under a paused process, failover, FLUSH).
  void DropLock(const GroupKey& key) { locks_.erase(key.Tag()); }
  // The mutex keys with their absolute expiry (the simulator replicates, snapshots and
  // restores them with the rest of the dataset). Expired entries may still be listed: a
  // lock counts as held only while expires_ms > now, as in Lock().
  struct LockState {
    std::string token;
    TimeMs expires_ms;
  };
  const std::map<std::string, LockState>& locks() const { return locks_; }
  void ReplaceLocks(std::map<std::string, LockState> l) { locks_ = std::move(l); }
  // When false, every call fails with REDIS_UNAVAILABLE (Redis down or partitioned).
  void SetAvailable(bool up) { available_ = up; }
  // DecodeAggregate(text), reusing the last result decoded for `tag` when `text` is the same
  // (decoding was a sixth of rsc-sim's time: every heartbeat and tick loads its group).
  Result<std::shared_ptr<const GroupMetadata>> Decoded(const std::string& tag,
                                                       const std::string& text) const;

 private:
  Status CheckUp() const;
  static void RaiseDeadlines(std::map<std::string, TimeMs>& live,
                             const std::vector<std::pair<std::string, TimeMs>>& set);

  Clock& clock_;
  TokenSource& tokens_;
  Data data_;
  std::map<std::string, LockState> locks_;
  bool available_ = true;
  // Per group tag: the aggregate text last decoded and what it decoded to.
  mutable std::map<std::string, std::pair<std::string, std::shared_ptr<const GroupMetadata>>>
      decoded_;
};

}  // namespace rsc::sim
