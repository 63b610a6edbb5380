#pragma once
// RedisStore: the MetadataStore port (core/store.h) on Redis, through hiredis.
//
// Layout (SPEC §2; key names in keys.h). For group P:G, all keys tagged {P:G}:
//   hash   redis-stream:coord:{P:G}:metadata
//            aggregate      EncodeAggregate JSON (core/codec.h)
//            revision       integer, +1 on every write of the aggregate (R2.1, R2.6)
//            schemaVersion  kSchemaVersion    layoutVersion  kLayoutVersion
//            updatedAt      ms since epoch of the write
//            writeToken     random per write; names the aggregate for the parse cache.
//                           The revision alone can alias after a rollback (a lost write
//                           followed by another write reuses the number with other content).
//   zset   redis-stream:coord:{P:G}:liveness   member id -> heartbeat deadline (ms)
//   string redis-stream:coord:{P:G}:lock       mutex token, SET NX PX (R2.7)
//   set    redis-stream:coord:groups           index of "P:G" (auxiliary, R2.2)
// and per stream P (SPEC D1), tagged {P}:
//   hash   redis-stream:coord:{P}:layout       layout (JSON, core/layout_codec.h),
//                                               revision, schemaVersion, updatedAt
// No key ever gets a TTL except the mutex (R2.3).
//
// Every read-modify-write of a group is one Lua script (lua/*.lua) run by EVALSHA, so a
// snapshot or a compare-and-set is atomic; on NOSCRIPT the script is reloaded (L5, see
// LuaScript in executor.h). Scripts only touch keys of one {P:G} tag, so they also run
// on Redis Cluster, which Open() detects (INFO cluster) and routes by slot (cluster.h).
//
// Parse cache: Load sends the writeToken (and aggregate length) of the copy it holds;
// the script returns the aggregate only if they differ, so a heartbeat on an unchanged
// group moves a few bytes and parses nothing. Writes through this store cache what they
// wrote. Anyone editing the hash by hand should change or delete writeToken; a
// same-length edit that keeps the token would go unnoticed by this cache.
//
// The index is kept a *superset* of the existing groups: Create and Restore add the
// index entry before writing the hash, Delete removes it after deleting the hash. So a
// failure in between leaves an extra entry (Load answers METADATA_MISSING, fail closed)
// and never a missing one; RebuildIndex() repairs either direction.
//
// Thread safety: all methods are safe for concurrent use (per store.h). The parse cache
// is guarded by cache_mu_; stats are atomics.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/store.h"
#include "redis/executor.h"
#include "redis/redis_url.h"

namespace rsc::redis {

// Counters for /metrics. Monotonic; read with relaxed loads.
struct RedisStoreStats {
  std::atomic<int64_t> script_reloads{0};      // NOSCRIPT -> SCRIPT LOAD (L5)
  std::atomic<int64_t> revision_conflicts{0};  // CAS/Delete refused: revision moved (R2.6)
  std::atomic<int64_t> command_errors{0};      // error replies and transport failures
  std::atomic<int64_t> unknown_results{0};     // write sent, reply lost (UNKNOWN_RESULT)
  std::atomic<int64_t> lock_acquired{0};
  std::atomic<int64_t> lock_timeouts{0};
  std::atomic<int64_t> lock_wait_us_total{0};   // time spent waiting in Lock()
  std::atomic<int64_t> cache_hits{0};           // Load reused a parsed aggregate
  std::atomic<int64_t> cache_misses{0};         // Load fetched and parsed the aggregate
  std::atomic<int64_t> metadata_missing{0};     // Load: indexed group without a hash (L1)
  std::atomic<int64_t> metadata_unreadable{0};  // Load: unknown versions, corrupt data (L3)
};

struct RedisStoreOptions {
  size_t pool_size = 8;  // connections per node
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{2000};
  std::chrono::milliseconds checkout_wait{2000};
  size_t cache_capacity = 4096;  // parsed aggregates kept (one per group)
  ClusterMode cluster = ClusterMode::kAuto;
  // How long ConfirmLayout waits for a replica's acknowledgement (WAIT).
  std::chrono::milliseconds replica_wait{1000};
};

class RedisStore : public MetadataStore {
 public:
  // Connects lazily for kSingle; kAuto and kCluster talk to the server at once.
  // Errors: REDIS_UNAVAILABLE.
  static Result<std::unique_ptr<RedisStore>> Open(const RedisUrl& url,
                                                  const RedisStoreOptions& options);

  RedisStore(std::unique_ptr<Executor> executor, const RedisStoreOptions& options);
  ~RedisStore() override;

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
  Result<bool> ConfirmLayout(const std::string& stream, StoreRevision revision,
                             TimeMs now_ms) override;
  Result<CasOutcome> CompareAndSetLayout(const std::string& stream, StoreRevision expected,
                                         const Layout& next, TimeMs now_ms) override;

  // Rebuilds the index from a SCAN of every master for metadata hashes (R2.2): adds the
  // groups found, removes entries whose hash does not exist. Returns the groups found.
  Result<std::vector<GroupKey>> RebuildIndex();

  const RedisStoreStats& stats() const { return stats_; }
  Executor& executor() { return *executor_; }

 private:
  struct CacheEntry {
    std::string token;
    int64_t aggregate_len = 0;
    std::shared_ptr<const GroupMetadata> meta;
    // SHA-1 of the aggregate bytes this entry was parsed from (or written as). The CAS
    // script refuses to overwrite an aggregate whose bytes differ: a hand edit that kept
    // the token and length is never silently undone (SPEC L3).
    std::string sha1;
    int64_t revision = 0;  // the revision these bytes were stored under
  };

  // Runs one of the embedded scripts; maps transport errors and counts them.
  Result<Reply> Eval(const LuaScript& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args, CommandKind kind);
  // Runs a plain command routed by `key`; error replies become REDIS_UNAVAILABLE.
  Result<Reply> RunChecked(std::string_view key, const Command& cmd, CommandKind kind,
                           std::string_view what);
  // Counts and converts an error reply.
  Error ReplyError(const Reply& reply, std::string_view what);
  Error CountError(Error e);

  std::optional<CacheEntry> CacheGet(const std::string& tag);
  void CachePut(const std::string& tag, CacheEntry entry);
  void CacheErase(const std::string& tag);

  // Adds "P:G" to the index (retried once; the index must not under-report).
  Status IndexAdd(const GroupKey& key);

  std::unique_ptr<Executor> executor_;
  const RedisStoreOptions options_;
  RedisStoreStats stats_;

  std::mutex cache_mu_;
  std::unordered_map<std::string, CacheEntry> cache_;  // guarded by cache_mu_; key "P:G"
};

}  // namespace rsc::redis
