#pragma once
// SimCluster: the simulated Redis seen as a Redis Cluster by the consumers' readers (SPEC
// §13.3 CL1), in the seeds whose consumers do not pipeline their live reads (production
// pipelines them on one server only). Three masters serve the 16,384 slots, each under an
// address of its own; the library's ReaderRedis (client/reader_redis.h) routes every reader
// command by its slot map, follows MOVED and ASK, watches a failed master and retires it —
// the routing code as shipped, over SimReaderNet (sim/sim_reader_net.h).
//
// What is simulated is the routing, not the data: the streams stay in the one SimRedis, whose
// failover and restarts the cluster shares. A failover also fails one master: its address
// refuses connections at once, while the slot map keeps naming it until its replica is
// promoted (the node timeout and election: 0.5–20 s, now and then past the 30 s a reader
// port watches a failed node), then names the replica's new address. A slot migration takes
// the slot's keys to the importing master at once: while it lasts the source answers ASK and
// the target serves only commands sent after ASKING (MOVED to the source otherwise); at its
// end the target owns the slot and the others answer MOVED. A read blocked on a slot its node
// no longer serves is answered with the redirection when the slot moves (real Redis answers
// MOVED from clientsCron, and a read on a key MIGRATE took away with an error) and not served.
// A multi-key command across slots gets CROSSSLOT. Not modelled: keys moving one by one (the
// source keeps serving a key it still holds), a failover resetting only the failed master's
// connections (the one store's failover resets all), and the producers' and coordinators'
// routing (they use the store directly). The coordinators place a new generation's keys by the
// cluster's slots (D2: each master's shards of a stream in one slot, so its reads combine); they
// and the producers read and write the store directly.

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/shard_keys.h"
#include "redis/reply.h"
#include "sim/sim_redis.h"
#include "sim/world.h"

namespace rsc::sim {

class SimCluster {
 public:
  static constexpr int kMasters = 3;

  // The slot map as CLUSTER SLOTS gives it: each slot's master (an index into `masters`).
  struct Map {
    std::vector<std::string> masters;
    std::vector<uint8_t> owner;        // by slot
    std::vector<std::string> serving;  // the masters that serve a slot (CLUSTER SLOTS names)
    void Index();                      // sets `serving` from `owner`
  };

  SimCluster(World& world, SimRedis& redis);

  // Where a client starts (any node answers the map).
  static constexpr const char* kSeed = "redis:6379";
  // Shared until the map changes (every consumer's re-read of an unchanged map is free).
  std::shared_ptr<const Map> Snapshot();
  // The masters (by address) and the slots each serves, ascending (StreamAdmin::Placement).
  SlotPlacement Placement() const;
  // A master's old address after a failover: connections to it are refused.
  bool Down(const std::string& address) const { return down_.count(address) > 0; }
  // A command at `address` (`asking`: right after ASKING): the error it gets ("MOVED 3999
  // redis-1-0:6379", "ASK …", CROSSSLOT), or nullopt: it runs there. `arriving`: it is being
  // sent (counted in the probes and the slots a migration may pick), not a blocked read
  // asked again.
  std::optional<std::string> Route(const std::string& address, const redis::Command& c, bool asking,
                                   bool arriving);

  // Faults (the safety phase). A random slot a reader used goes to another master: ASK for
  // `duration_ms`, then MOVED.
  void MigrateSlot(TimeMs duration_ms);
  // Master `master` fails: its address refuses connections now, the map names its replica's
  // new address after `promote_after_ms`.
  void FailOver(int master, TimeMs promote_after_ms);
  // The heal: pending promotions happen now.
  void Settle();
  int migrations() const { return migrations_; }

  // The keys of a command (none: CLIENT, ASKING).
  static std::vector<std::string_view> KeysOf(const redis::Command& c);

 private:
  void Promote(int master);

  World& world_;
  SimRedis& redis_;
  std::vector<std::string> masters_;  // current address of each master
  std::vector<int> generation_;       // failovers per master (names its address)
  std::vector<bool> promoting_;       // failed, its replica not promoted yet
  std::vector<uint8_t> owner_;
  std::vector<std::pair<int, int>> migrating_;  // (slot, to)
  std::set<std::string> down_;
  std::set<int> used_;  // slots commands were routed by, in order: migrations pick one
  std::shared_ptr<const Map> snapshot_;  // of the current map (null: build at the next read)
  int migrations_ = 0;
};

}  // namespace rsc::sim
