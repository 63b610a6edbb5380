#pragma once
// StreamAdmin port: the few shard-stream operations the coordinator itself runs for
// resharding (SPEC §13.2, docs/design/resharding.md). Everything else on shard streams is
// the clients' (D3: besides these the coordinator writes no stream keys).
// Production: redis/redis_stream_admin.h; the simulator's is its simulated Redis
// (sim/sim_coordinator.cc; Placement is the simulated cluster's in the seeds that have one).
// Without one GroupService refuses a reshard.
//
// Thread safety: implementations are safe for concurrent use.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/result.h"
#include "core/shard_keys.h"

namespace rsc {

// The last possible stream ID: the seal entry's (RS2). Every `XADD *` after it fails.
inline constexpr const char* kSealId = "18446744073709551615-18446744073709551615";

// What Redis says of one consumer group on one shard stream (XINFO GROUPS).
struct GroupProgress {
  bool exists = false;  // the stream and the group exist
  std::string last_delivered_id;
  int64_t pending = 0;
  // RS3: the group delivered the seal and has nothing pending.
  bool Complete() const { return exists && last_delivered_id == kSealId && pending == 0; }
};

// One shard's backlog for one consumer group (SPEC O1).
struct ShardBacklog {
  bool exists = false;                    // the stream and the group exist
  std::optional<int64_t> lag;             // XINFO GROUPS lag; none when Redis cannot tell (< 7.0,
                                          // or entries deleted inside the unread range)
  int64_t pending = 0;                    // the PEL's size
  std::optional<int64_t> oldest_idle_ms;  // idle time of the oldest pending entry
};

class StreamAdmin {
 public:
  virtual ~StreamAdmin() = default;
  // XGROUP CREATE <key> <group> 0 MKSTREAM; an existing group is success (BUSYGROUP).
  virtual Status CreateConsumerGroup(const std::string& key, const std::string& group) = 0;
  // Appends the seal entry (fields `rsc-seal <generation>` and, when `successor` is not empty,
  // `rsc-next <successor>`: the generation after it, EncodeSuccessor, RS6) unless the stream
  // already ends with it. Returns true when it wrote one (the first seal, or a re-seal after
  // a failover lost it), false when the stream was already sealed.
  virtual Result<bool> Seal(const std::string& key, int32_t generation,
                            const std::string& successor) = 0;
  // RS6: the end of each key, in order (pipelined per node); a key that cannot be read is an
  // error in its place. A missing key is `exists == false`.
  virtual std::vector<Result<StreamTop>> Tops(const std::vector<std::string>& keys) = 0;
  virtual Result<GroupProgress> Progress(const std::string& key, const std::string& group) = 0;
  // Progress of `group` on each key, in order; a key that cannot be read is an error in its
  // place. Production pipelines them per node (a tick checks every sealed shard while it
  // holds the group's mutex); the default asks one by one.
  virtual std::vector<Result<GroupProgress>> Progresses(const std::vector<std::string>& keys,
                                                        const std::string& group) {
    std::vector<Result<GroupProgress>> out;
    out.reserve(keys.size());
    for (const std::string& key : keys) out.push_back(Progress(key, group));
    return out;
  }
  // RS5: empties a retired key that ends with its seal, leaving a tombstone: an empty stream
  // whose last ID is still the maximum, so every `XADD *` keeps failing and MKSTREAM creates
  // nothing — deleting the key would have removed the seal's fence, and a reader's
  // `XGROUP CREATE … MKSTREAM`, a producer on Redis < 6.2 or a restore could then re-create
  // a writable key that no group reads. A missing or empty key becomes a tombstone too.
  // Nothing can follow a seal, so the check and the trim need no atomicity. true: the key is
  // a tombstone now; false: it has an entry after where the seal was (written after a lost
  // seal) — kept, untouched.
  virtual Result<bool> TrimSealed(const std::string& key, int32_t generation) = 0;
  // D2: the masters of a Redis Cluster and the slots each serves, read afresh (a new
  // generation's keys are spread over them, core/shard_keys.h); empty on one server.
  virtual Result<SlotPlacement> Placement() { return SlotPlacement{}; }
  // O1: the backlog of `group` on each key, in order (pipelined per node: the group view and
  // every tick read it for all of a group's shards). A key that cannot be read is an error
  // in its place; the others still come. Default: not supported (every entry an error).
  virtual std::vector<Result<ShardBacklog>> Backlogs(const std::vector<std::string>& keys,
                                                     const std::string& /*group*/) {
    return std::vector<Result<ShardBacklog>>(
        keys.size(), MakeError(ErrorCode::kInternal, "backlogs are not read by this store"));
  }
};

}  // namespace rsc
