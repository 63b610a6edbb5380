#pragma once
// SimRedis: the simulated Redis deployment — a primary and one asynchronously replicated
// replica — holding both the coordinator's metadata (a MemoryStore, contract-tested against
// real Redis) and the shard streams (sim/streams.h).
//
// Replication: every write to the primary appends its effect to one replication log, in
// order; the replica applies an entry once its (random, per-entry) lag has passed, never
// out of order. Metadata writes replicate as the resulting keys (state transfer), stream
// writes as their effects. Because metadata, mutex keys and streams share the one log, a
// failover loses them together, exactly like promoting a lagging Redis replica.
//
// Faults (each called by the simulation's chaos driver):
//   Failover()        promote the replica: unreplicated writes are lost, every client
//                     connection is reset, the script cache is empty, and Redis refuses
//                     connections for the promotion time
//   RestoreSnapshot() restart from an older snapshot (an RDB file): same consequences
//   DeleteMetadata()  an operator's DEL of the metadata hash (the index keeps the group)
//   FlushScripts()    SCRIPT FLUSH: the next scripted call pays a NOSCRIPT round trip
//   DropLock()        the mutex key vanishes under its holder
//   Stall()           replication falls behind for a while
// The lost stream entries of a rollback are returned so the simulation can record them.
//
// All methods run on the scheduler (or a running fiber): single-threaded in effect.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/store.h"
#include "core/stream_admin.h"
#include "sim/memory_store.h"
#include "sim/streams.h"
#include "sim/world.h"

namespace rsc::sim {

struct Dataset {
  MemoryStore::Data meta;
  std::map<std::string, MemoryStore::LockState> locks;
  Streams streams;
};

struct LostEntry {
  std::string stream;
  StreamEntry entry;
};

class SimRedis {
 public:
  explicit SimRedis(World& world);

  // Accepting connections (false while a failover or restart is in progress).
  bool up() const { return world_.now() >= up_at_; }
  // Bumped by every failover and restart: a connection made before it is reset.
  uint64_t epoch() const { return epoch_; }
  void set_max_lag_ms(TimeMs lag) { max_lag_ms_ = lag; }

  // ── metadata (MetadataStore semantics; `proc` names the calling coordinator) ──
  Result<StoredGroup> Load(const GroupKey& key, TimeMs now_ms);
  Result<CasOutcome> CompareAndSet(const std::string& proc, const GroupKey& key,
                                   StoreRevision expected, const GroupMetadata* next,
                                   const LivenessUpdate& liveness, TimeMs now_ms);
  Result<bool> RenewIfSteady(const GroupKey& key, const AggregateStamp& basis, size_t member_count,
                             const std::vector<std::pair<std::string, TimeMs>>& set, TimeMs now_ms);
  Result<StoreRevision> Create(const std::string& proc, const GroupMetadata& meta, TimeMs now_ms);
  Result<StoreRevision> Restore(const std::string& proc, const GroupMetadata& meta, TimeMs now_ms);
  Status Delete(const GroupKey& key, StoreRevision expected);
  Result<std::vector<GroupKey>> ListGroups();
  Result<Liveness> LoadAllLiveness(const GroupKey& key);
  Result<std::optional<StoredLayout>> LoadLayout(const std::string& stream);
  Result<CasOutcome> CompareAndSetLayout(const std::string& stream, StoreRevision expected,
                                         const Layout& next, TimeMs now_ms);
  // SET NX PX: the token, or nullopt when held. `proc` is remembered until Unlock (or
  // EndSection) so an expiry under a holder that is still inside can be reported.
  Result<std::optional<std::string>> TryLock(const std::string& proc, const GroupKey& key,
                                             std::chrono::milliseconds ttl);
  Status Unlock(const GroupKey& key, const std::string& token);
  // The holder of `token` left its section without unlocking (it died).
  void EndSection(const std::string& token) { sections_.erase(token); }
  // Scripted calls (EVALSHA) after a flush: true once, for the call that reloads.
  bool TakeScriptReload();
  // The current revision of `key`'s hash (-1 without one), for reports.
  int64_t RevisionOf(const GroupKey& key) const;
  // The primary's view, read directly (no simulated I/O): the group's aggregate (nullopt if
  // missing or unreadable) and its liveness deadlines.
  std::optional<GroupMetadata> PeekMetadata(const GroupKey& key) const;
  std::map<std::string, TimeMs> PeekLiveness(const GroupKey& key) const;
  bool HasMetadata(const GroupKey& key) const;
  // The primary's layout of `stream`, read directly (nullopt if missing or unreadable).
  std::optional<Layout> PeekLayout(const std::string& stream);
  // The primary's layout hash of `stream` as stored (nullopt if missing).
  std::optional<MemoryStore::Hash> LayoutHash(const std::string& stream) const;
  // RS6's case: the layout hash alone put back to `hash` (a RESTORE by hand; on a cluster a
  // failover of the layout's master), on the primary and replicated like any write.
  void PutLayoutBack(const std::string& stream, const MemoryStore::Hash& hash);

  // ── streams ──
  StreamReply Stream(const std::function<StreamOp(Streams&)>& op);
  StreamReply XAdd(const std::string& stream, const StreamEntry& fields);
  // The coordinator's stream operations for resharding (core/stream_admin.h, as
  // redis/redis_stream_admin.cc runs them): XGROUP CREATE … MKSTREAM, the seal, XINFO GROUPS.
  Result<Unit> CreateConsumerGroup(const std::string& stream, const std::string& group);
  Result<bool> Seal(const std::string& stream, int32_t generation, const std::string& successor);
  std::vector<StreamTop> Tops(const std::vector<std::string>& streams);
  Result<GroupProgress> Progress(const std::string& stream, const std::string& group);
  Result<bool> TrimSealed(const std::string& stream);
  // XREADGROUP GROUP g c COUNT n [BLOCK ms] STREAMS s1 … sn > … >, as Redis 7 runs it: a
  // stream lacking the key or the group fails the whole command (NOGROUP naming the first
  // such stream) before anything is read; otherwise each stream's new entries, streams
  // without any left out. With nothing to read and `block_ms` ≥ 0 (0 is Redis's "forever",
  // never sent here) the client waits until an entry is added to one of the streams, the
  // block time passes or CLIENT UNBLOCK names `client_id` (both: nil, no streams), or a
  // failover or restart resets the connection (MultiRead::reset).
  //
  // `redirect` (a read on a node of the simulated cluster, sim/sim_cluster.h): asked before a
  // blocked read is served; a redirection answers it instead, serving nothing — as a cluster
  // node answers a read blocked on a slot it no longer serves (RedirectBlocked).
  struct MultiRead {
    std::string error;  // a NOGROUP, or a redirection
    bool reset = false;
    std::vector<std::pair<std::string, std::vector<StreamEntry>>> streams;
  };
  using Redirect = std::function<std::optional<std::string>()>;
  void XReadGroupMulti(const std::vector<std::string>& streams, const std::string& group,
                       const std::string& consumer, int count, TimeMs block_ms, int64_t client_id,
                       std::function<void(MultiRead)> done, Redirect redirect = nullptr);
  // The cluster's slots moved (a migration began or ended): every blocked read whose node no
  // longer serves its slot is answered with its redirection.
  void RedirectBlocked();
  // CLIENT ID for a new connection.
  int64_t NewClientId() { return next_client_id_++; }
  // CLIENT UNBLOCK <id> TIMEOUT: 1 when that client's blocked read was answered nil, 0 when
  // it was not blocked.
  int64_t ClientUnblock(int64_t client_id);
  // The client's connection closed: its blocked read, if any, is freed unserved.
  void DropBlockedClient(int64_t client_id);
  const Streams& streams() const { return primary_streams_; }
  // A client process died: its connections closed, so Redis frees its blocked reads
  // (unserved, no reply: nobody is there to get one). Without this a dead consumer's
  // XREADGROUP … BLOCK would go on taking new entries into its pending list.
  void DropBlockedReadsOf(const std::string& consumer);

  // ── faults ──
  std::vector<LostEntry> Failover(TimeMs down_ms);
  void TakeSnapshot();
  bool has_snapshot() const { return !snapshots_.empty(); }
  std::vector<LostEntry> RestoreSnapshot(TimeMs down_ms);
  void DeleteMetadata(const GroupKey& key);
  void FlushScripts() { scripts_loaded_ = false; }
  // Drops the mutex key if held; true when a holder was inside (a real expiry under it).
  // The holder is then told through `on_lock_lost` (the simulation pauses it: a mutex
  // expires because its holder stalled).
  bool DropLock(const GroupKey& key);
  void set_on_lock_lost(std::function<void(const std::string& proc)> f) {
    on_lock_lost_ = std::move(f);
  }
  bool lock_held(const GroupKey& key) const;
  // The next mutex granted vanishes right after (a deterministic way to hit a section).
  void ArmLockDrop() { drop_next_lock_ = true; }
  void Stall(TimeMs until, TimeMs lag);
  // Applies every replication entry that is due (also called by the write path).
  void CatchUp();
  // How far the replica is behind, in log entries (for reports).
  size_t replication_backlog() const { return log_.size(); }
  // WAIT's model (SPEC RS2): the replication offset of the latest write (every write is
  // one log entry; offsets count from 1), and when the
  // replica has applied (acknowledged) offset `offset`: now or earlier if it has, the
  // entry's due time if it will. A connection's writes precede its WAIT, so waiting for
  // the offset of the latest write when the caller's own write ran is what `WAIT 1 t`
  // after that write waits for. A rollback resets the connection (epoch), so a wait never
  // spans one.
  uint64_t write_offset() const { return offset_; }
  TimeMs AcknowledgedAt(uint64_t offset) const;

 private:
  class RedisClock : public Clock {
   public:
    explicit RedisClock(World& w) : w_(w) {}
    TimeMs NowMs() override { return w_.now(); }

   private:
    World& w_;
  };
  class RedisTokens : public TokenSource {
   public:
    explicit RedisTokens(World& w) : w_(w) {}
    std::string NewToken() override { return w_.rng().Hex(16); }

   private:
    World& w_;
  };
  struct Waiter {
    uint64_t id;
    std::vector<std::string> streams;
    std::string group, consumer;
    int count;
    int64_t client_id;
    std::function<void(MultiRead)> done;
    Redirect redirect;
  };

  Status Up() const;
  Dataset Current() const;
  void Install(const Dataset& d);
  void ReplicateMeta();
  void Replicate(std::function<void(Dataset&)> fn);
  std::vector<LostEntry> Rollback(const Dataset& to, TimeMs down_ms);
  void ServeWaiters(const std::string& stream);
  // The new entries of `streams` for one read (nullopt: a stream lacks its group, `error`).
  MultiRead ReadNew(const std::vector<std::string>& streams, const std::string& group,
                    const std::string& consumer, int count);
  // Answers and removes the waiter at `it`.
  void Release(std::vector<Waiter>::iterator it, MultiRead reply);
  void CheckExpiredSection(const GroupKey& key);

  World& world_;
  RedisClock clock_;
  RedisTokens tokens_;
  MemoryStore primary_;
  Streams primary_streams_;
  Dataset replica_;
  struct LogEntry {
    TimeMs ready;
    uint64_t offset;
    std::function<void(Dataset&)> apply;
  };
  std::deque<LogEntry> log_;
  TimeMs last_ready_ = 0;
  uint64_t offset_ = 0;  // the latest write's replication offset (WAIT)
  TimeMs max_lag_ms_ = 0;
  TimeMs stall_until_ = 0;
  TimeMs stall_lag_ = 0;
  std::deque<std::pair<TimeMs, Dataset>> snapshots_;
  TimeMs up_at_ = 0;
  uint64_t epoch_ = 1;
  bool scripts_loaded_ = true;
  std::map<std::string, std::string> sections_;  // mutex token -> holder process
  std::vector<Waiter> waiters_;
  bool drop_next_lock_ = false;
  std::function<void(const std::string&)> on_lock_lost_;
  uint64_t next_waiter_ = 1;
  int64_t next_client_id_ = 1;
};

// The shard of a stream key "{P:s}" (-1 if it is not one).
int32_t ShardOfStream(const std::string& stream);

}  // namespace rsc::sim
