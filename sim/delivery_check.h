#pragma once
// The delivery half of the checkers (S3 acked publishes delivered, S4 per-key order), kept
// apart from the ownership rules in checkers.cc. Internal to sim/checkers.cc; the rules
// are stated in sim/checkers.h.
//
// Memory is bounded by what is in flight, not by the run: a (key, seq) leaves the pending
// map at its first delivery or when a rollback destroyed all of its entries, and the
// delivered seqs of a key are kept as intervals (a consumer delivers runs of consecutive
// seqs, so that is one or a few intervals per key).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sim/checkers.h"
#include "sim/history.h"

namespace rsc::sim {

// A set of int64 kept as disjoint closed intervals [first, second].
class IntervalSet {
 public:
  bool Contains(int64_t x) const;
  void Insert(int64_t x);
  size_t intervals() const { return iv_.size(); }

 private:
  std::map<int64_t, int64_t> iv_;
};

class DeliveryCheck {
 public:
  // kPublish (counted by the caller), kLost, kDeliver. OnDeliver returns an S4 message.
  void OnPublish(const HistEvent& e, size_t index, CheckerCounters& n);
  void OnLost(const HistEvent& e, CheckerCounters& n);
  // `excused`: the shard is in an S1 overlap a rollback excuses (the zombie holder may have
  // taken the skipped entry), or the delivery is made under a grant a rollback may have lost;
  // a skip is not reported (counted in skips_excused).
  std::optional<std::string> OnDeliver(const HistEvent& e, CheckerCounters& n, bool excused);

  // S3 at the end of a run: the acked publishes never delivered nor lost, if any.
  struct Report {
    std::string message;
    int64_t t_us = 0;
    size_t index = 0;  // the earliest such publish
  };
  std::optional<Report> Undelivered() const;
  // Items held (pending publishes, delivered intervals, entry and loss records): what the
  // memory bound is about.
  size_t Tracked() const;

 private:
  struct Pending {
    int64_t t_us = 0;
    size_t index = 0;
    int32_t shard = -1;
    std::string id;
    std::vector<std::string> entries;  // "shard/id" of each acked XADD of this (key, seq)
  };
  struct KeyState {
    std::map<int64_t, Pending> pending;  // acked, not delivered, not lost; by seq
    IntervalSet delivered;
    std::optional<int64_t> reported_skip;  // S4 reports a skipped seq once
  };
  // A stream entry is named by where it is (shard, id) AND what it holds (key, seq): after a
  // failover the promoted node can give an id the old master used to another message, and
  // a lost record must not excuse that one.
  static std::string EntryKey(int32_t shard, const std::string& id, const std::string& key,
                              int64_t seq);
  static std::string Location(int32_t shard, const std::string& id);

  std::unordered_map<std::string, KeyState> keys_;
  std::unordered_map<std::string, std::pair<std::string, int64_t>> entries_;  // → (key, seq)
  std::unordered_set<std::string> lost_;  // entries a rollback destroyed (EntryKey)
  // Locations lost by a record that names no content (key ""): any entry there is lost.
  std::unordered_set<std::string> lost_anything_at_;
};

}  // namespace rsc::sim
