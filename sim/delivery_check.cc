#include "sim/delivery_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace rsc::sim {

bool IntervalSet::Contains(int64_t x) const {
  auto it = iv_.upper_bound(x);
  if (it == iv_.begin()) return false;
  --it;
  return x <= it->second;
}

void IntervalSet::Insert(int64_t x) {
  if (Contains(x)) return;
  auto next = iv_.upper_bound(x);  // first interval starting after x
  // No overflow: a previous interval ends below x, a next one starts above x.
  const bool joins_next = next != iv_.end() && next->first == x + 1;
  if (next != iv_.begin()) {
    auto prev = std::prev(next);
    if (prev->second + 1 == x) {
      prev->second = joins_next ? next->second : x;
      if (joins_next) iv_.erase(next);
      return;
    }
  }
  if (joins_next) {
    const int64_t end = next->second;
    iv_.erase(next);
    iv_.emplace(x, end);
    return;
  }
  iv_.emplace(x, x);
}

std::string DeliveryCheck::EntryKey(int32_t shard, const std::string& id, const std::string& key,
                                    int64_t seq) {
  return fmt::format("{}/{}#{}#{}", shard, id, seq, key);
}

std::string DeliveryCheck::Location(int32_t shard, const std::string& id) {
  return fmt::format("{}/{}", shard, id);
}

void DeliveryCheck::OnPublish(const HistEvent& e, size_t index, CheckerCounters& n) {
  KeyState& ks = keys_[e.key];
  if (ks.delivered.Contains(e.seq)) return;  // its ack was logged after a delivery
  std::string entry = EntryKey(e.shard, e.id, e.key, e.seq);
  if (lost_.count(entry) || lost_anything_at_.count(Location(e.shard, e.id))) {
    if (!ks.pending.count(e.seq)) ++n.lost_by_rollback;
    return;
  }
  auto [it, fresh] = ks.pending.try_emplace(e.seq);
  Pending& p = it->second;
  if (fresh) {
    p.t_us = e.t_us;
    p.index = index;
    p.shard = e.shard;
    p.id = e.id;
  }
  if (std::find(p.entries.begin(), p.entries.end(), entry) == p.entries.end()) {
    p.entries.push_back(entry);
  }
  entries_[std::move(entry)] = {e.key, e.seq};
}

void DeliveryCheck::OnLost(const HistEvent& e, CheckerCounters& n) {
  auto forget = [&](const std::string& entry) {
    auto it = entries_.find(entry);
    if (it == entries_.end()) return;
    KeyState& ks = keys_[it->second.first];
    auto p = ks.pending.find(it->second.second);
    if (p != ks.pending.end()) {
      std::erase(p->second.entries, entry);
      if (p->second.entries.empty()) {
        ks.pending.erase(p);
        ++n.lost_by_rollback;
      }
    }
    entries_.erase(it);
  };
  if (!e.key.empty()) {
    std::string entry = EntryKey(e.shard, e.id, e.key, e.seq);
    forget(entry);
    lost_.insert(std::move(entry));
    return;
  }
  // A record that does not say what the entry held (a writer without key/seq fields):
  // whatever was acked at that location is lost.
  const std::string at = Location(e.shard, e.id) + "#";
  std::vector<std::string> here;
  for (const auto& [entry, ks] : entries_) {
    if (entry.starts_with(at)) here.push_back(entry);
  }
  for (const std::string& entry : here) forget(entry);
  lost_anything_at_.insert(Location(e.shard, e.id));
}

std::optional<std::string> DeliveryCheck::OnDeliver(const HistEvent& e, CheckerCounters& n,
                                                    bool excused) {
  KeyState& ks = keys_[e.key];
  if (ks.delivered.Contains(e.seq)) {
    ++n.redeliveries;
    return std::nullopt;
  }
  ++n.delivered_unique;
  std::optional<std::string> skip;
  const bool skips = !ks.pending.empty() && ks.pending.begin()->first < e.seq;
  if (skips && excused) ++n.skips_excused;
  if (skips && !excused && ks.reported_skip != ks.pending.begin()->first) {
    const auto& [seq, p] = *ks.pending.begin();
    ks.reported_skip = seq;
    skip = fmt::format(
        "per-key order: {} delivered key '{}' seq {} (shard {}, id {}) at {} before seq {}, "
        "acked at shard {} id {} (sent at {}) and neither delivered nor lost",
        e.proc, e.key, e.seq, e.shard, e.id, e.t_us, seq, p.shard, p.id, p.t_us);
  }
  if (auto it = ks.pending.find(e.seq); it != ks.pending.end()) {
    for (const std::string& entry : it->second.entries) entries_.erase(entry);
    ks.pending.erase(it);
  }
  ks.delivered.Insert(e.seq);
  return skip;
}

size_t DeliveryCheck::Tracked() const {
  size_t n = entries_.size() + lost_.size() + lost_anything_at_.size();
  for (const auto& [key, ks] : keys_) n += 1 + ks.pending.size() + ks.delivered.intervals();
  return n;
}

std::optional<DeliveryCheck::Report> DeliveryCheck::Undelivered() const {
  std::vector<std::tuple<size_t, const std::string*, int64_t, const Pending*>> missing;
  for (const auto& [key, ks] : keys_) {
    for (const auto& [seq, p] : ks.pending) missing.emplace_back(p.index, &key, seq, &p);
  }
  if (missing.empty()) return std::nullopt;
  const size_t shown = std::min<size_t>(missing.size(), 10);
  std::partial_sort(missing.begin(), missing.begin() + static_cast<ptrdiff_t>(shown),
                    missing.end());
  std::string list;
  for (size_t i = 0; i < shown; ++i) {
    const auto& [idx, key, seq, p] = missing[i];
    list += fmt::format("{}(key '{}', seq {}, shard {}, id {})", i ? ", " : "", *key, seq, p->shard,
                        p->id);
  }
  const Pending& first = *std::get<3>(missing.front());
  return Report{fmt::format("{} acked publish{} never delivered (nor lost by a rollback): {}{}",
                            missing.size(), missing.size() == 1 ? "" : "es", list,
                            missing.size() > shown ? ", …" : ""),
                first.t_us, first.index};
}

}  // namespace rsc::sim
