#include "sim/sim_cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/key_slot.h"

namespace rsc::sim {
namespace {

std::string AddressOf(int master, int generation) {
  return fmt::format("redis-{}-{}:6379", master, generation);
}

}  // namespace

SimCluster::SimCluster(World& world, SimRedis& redis)
    : world_(world),
      redis_(redis),
      generation_(kMasters, 0),
      promoting_(kMasters, false),
      owner_(static_cast<size_t>(kClusterSlots)) {
  for (int m = 0; m < kMasters; ++m) masters_.push_back(AddressOf(m, 0));
  // Contiguous ranges, as redis-cli --cluster create assigns them.
  for (int s = 0; s < kClusterSlots; ++s) {
    owner_[static_cast<size_t>(s)] = static_cast<uint8_t>(s * kMasters / kClusterSlots);
  }
}

void SimCluster::Map::Index() {
  std::vector<bool> serves(masters.size(), false);
  for (uint8_t m : owner) serves[m] = true;
  serving.clear();
  for (size_t m = 0; m < masters.size(); ++m) {
    if (serves[m]) serving.push_back(masters[m]);
  }
}

std::shared_ptr<const SimCluster::Map> SimCluster::Snapshot() {
  if (!snapshot_) {
    auto m = std::make_shared<Map>();
    m->masters = masters_;
    m->owner = owner_;
    m->Index();
    snapshot_ = std::move(m);
  }
  return snapshot_;
}

SlotPlacement SimCluster::Placement() const {
  std::vector<size_t> order(masters_.size());
  for (size_t m = 0; m < order.size(); ++m) order[m] = m;
  std::sort(order.begin(), order.end(),
            [this](size_t a, size_t b) { return masters_[a] < masters_[b]; });
  std::vector<size_t> position(masters_.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  SlotPlacement out(masters_.size());
  for (int s = 0; s < kClusterSlots; ++s) {
    out[position[owner_[static_cast<size_t>(s)]]].push_back(s);
  }
  // A master serving no slot is not a master CLUSTER SLOTS names.
  std::erase_if(out, [](const std::vector<int>& slots) { return slots.empty(); });
  return out;
}

std::vector<std::string_view> SimCluster::KeysOf(const redis::Command& c) {
  const std::string& name = c[0];
  std::vector<std::string_view> keys;
  if (name == "XREADGROUP") {
    for (size_t i = 1; i < c.size(); ++i) {
      if (c[i] != "STREAMS") continue;
      const size_t streams = (c.size() - i - 1) / 2;  // the keys, then as many ids
      for (size_t k = 0; k < streams; ++k) keys.emplace_back(c[i + 1 + k]);
      break;
    }
  } else if (name == "XGROUP") {
    if (c.size() > 2) keys.emplace_back(c[2]);
  } else if (name == "EVAL" || name == "EVALSHA") {
    const size_t n = c.size() > 2 ? std::stoul(c[2]) : 0;
    for (size_t k = 0; k < n && 3 + k < c.size(); ++k) keys.emplace_back(c[3 + k]);
  } else if (name != "CLIENT" && name != "ASKING" && c.size() >= 2) {
    keys.emplace_back(c[1]);  // XACK, XPENDING, XAUTOCLAIM, XCLAIM, XADD
  }
  return keys;
}

std::optional<std::string> SimCluster::Route(const std::string& address, const redis::Command& c,
                                             bool asking, bool arriving) {
  const std::vector<std::string_view> keys = KeysOf(c);
  if (keys.empty()) return std::nullopt;
  const int slot = KeySlot(keys[0]);
  for (std::string_view k : keys) {
    // A multi-key command must stay in one slot (NodeCore combines reads per slot).
    if (KeySlot(k) != slot) return "CROSSSLOT Keys in request don't hash to the same slot";
  }
  auto hit = [&](const char* probe) {
    if (arriving) world_.probes().Hit(probe);
  };
  if (arriving) used_.insert(slot);
  const std::string& owner = masters_[owner_[static_cast<size_t>(slot)]];
  auto migrating = std::find_if(migrating_.begin(), migrating_.end(),
                                [slot](const auto& m) { return m.first == slot; });
  if (migrating != migrating_.end()) {
    const std::string& target = masters_[static_cast<size_t>(migrating->second)];
    if (address == owner) {
      hit("cluster_ask");
      return fmt::format("ASK {} {}", slot, target);
    }
    if (address == target && asking) {
      hit("cluster_asking_served");
      return std::nullopt;
    }
  } else if (address == owner) {
    return std::nullopt;
  }
  hit("cluster_moved");
  return fmt::format("MOVED {} {}", slot, owner);
}

void SimCluster::MigrateSlot(TimeMs duration_ms) {
  std::vector<int> candidates;
  for (int slot : used_) {
    const bool busy = std::any_of(migrating_.begin(), migrating_.end(),
                                  [slot](const auto& m) { return m.first == slot; });
    if (!busy) candidates.push_back(slot);
  }
  if (candidates.empty()) return;
  Rng& rng = world_.rng();
  const int slot =
      candidates[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(candidates.size()) - 1))];
  const int from = owner_[static_cast<size_t>(slot)];
  const int to = (from + static_cast<int>(rng.Uniform(1, kMasters - 1))) % kMasters;
  migrating_.emplace_back(slot, to);
  ++migrations_;
  world_.Fault("slot_migration", fmt::format("slot {} migrates from {} to {} for {} ms", slot,
                                             masters_[static_cast<size_t>(from)],
                                             masters_[static_cast<size_t>(to)], duration_ms));
  // Its keys left the source: a read blocked there on them is answered (ASK).
  redis_.RedirectBlocked();
  world_.After(duration_ms, [this, slot, to] {
    owner_[static_cast<size_t>(slot)] = static_cast<uint8_t>(to);
    snapshot_.reset();
    std::erase_if(migrating_, [slot](const auto& m) { return m.first == slot; });
    redis_.RedirectBlocked();  // MOVED, as a node's clientsCron answers them
  });
}

void SimCluster::FailOver(int master, TimeMs promote_after_ms) {
  const size_t m = static_cast<size_t>(master);
  if (promoting_[m]) return;  // already failing over
  down_.insert(masters_[m]);
  promoting_[m] = true;
  world_.Fault("master_failover", fmt::format("cluster master {} at {} failed; its replica is "
                                              "promoted in {} ms",
                                              master, masters_[m], promote_after_ms));
  world_.After(promote_after_ms, [this, master] { Promote(master); });
}

void SimCluster::Promote(int master) {
  const size_t m = static_cast<size_t>(master);
  if (!promoting_[m]) return;  // settled before
  promoting_[m] = false;
  masters_[m] = AddressOf(master, ++generation_[m]);
  snapshot_.reset();
}

void SimCluster::Settle() {
  for (int m = 0; m < kMasters; ++m) Promote(m);
}

}  // namespace rsc::sim
