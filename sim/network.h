#pragma once
// Network: latency and faults of every message between two simulated processes.
//
// Nodes are addresses ("coord-1", "consumer-3", "producer-0", "redis", "operator"): a
// restarted process listens on its node's address again. Two kinds of link:
//   * HTTP (clients ↔ coordinators): a few ms of latency; faults drop, duplicate and delay
//     (which also reorders) messages; a partitioned pair loses everything (the client times
//     out); a clogged pair (FoundationDB's swizzle-clogging) holds messages until it
//     unclogs, so requests arrive — and are executed — long after the client gave up.
//   * Redis (coordinators and clients → Redis): sub-ms to a few ms of latency, occasional
//     delays up to ~100 ms. A cut link (partition or clog) refuses connections at once and
//     a lost reply shows up as a connection reset: Redis links fail fast in this model, so
//     an operation never executes at Redis long after its client moved on. (Coordinator
//     calls additionally model slow calls and lost CAS replies, sim_coordinator.cc.)
// Faults only fire while the run's BUGGIFY sites are on and the fault phase is active.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/world.h"

namespace rsc::sim {

enum class Link { kHttp, kRedis };

class Network {
 public:
  explicit Network(World& world) : world_(world) {}

  // Delays after which one message from `from` to `to` arrives: empty = lost, two entries =
  // duplicated. For Redis links, callers check Cut() first.
  std::vector<TimeMs> Plan(const std::string& from, const std::string& to, Link link);
  // Latency of one leg of a Redis call (no loss).
  TimeMs RedisLatency();
  // No connection possible between the two nodes right now.
  bool Cut(const std::string& a, const std::string& b) const;

  void Partition(const std::string& a, const std::string& b);
  void Unpartition(const std::string& a, const std::string& b);
  void Clog(const std::string& a, const std::string& b, TimeMs until);
  void Unclog(const std::string& a, const std::string& b);
  void HealAll();
  size_t partitions() const { return partitioned_.size(); }
  size_t clogs() const;

 private:
  using Pair = std::pair<std::string, std::string>;
  static Pair Key(const std::string& a, const std::string& b) {
    return a < b ? Pair{a, b} : Pair{b, a};
  }
  TimeMs ClogRemaining(const std::string& a, const std::string& b) const;

  World& world_;
  std::set<Pair> partitioned_;
  std::map<Pair, TimeMs> clogged_until_;
};

}  // namespace rsc::sim
