#include "sim/network.h"

namespace rsc::sim {

TimeMs Network::ClogRemaining(const std::string& a, const std::string& b) const {
  auto it = clogged_until_.find(Key(a, b));
  if (it == clogged_until_.end()) return 0;
  return std::max<TimeMs>(0, it->second - world_.now());
}

bool Network::Cut(const std::string& a, const std::string& b) const {
  return partitioned_.count(Key(a, b)) > 0 || ClogRemaining(a, b) > 0;
}

TimeMs Network::RedisLatency() {
  Rng& rng = world_.rng();
  TimeMs d = rng.Chance(0.7) ? 0 : rng.Uniform(1, 3);
  if (world_.buggify().Fire("net.delay", 0.02, rng)) d += rng.Uniform(5, 100);
  return d;
}

std::vector<TimeMs> Network::Plan(const std::string& from, const std::string& to, Link link) {
  Rng& rng = world_.rng();
  const Buggify& bug = world_.buggify();
  if (partitioned_.count(Key(from, to))) return {};
  if (link == Link::kRedis) {
    if (ClogRemaining(from, to) > 0) return {};
    return {RedisLatency()};
  }
  TimeMs d = rng.Uniform(1, 8) + ClogRemaining(from, to);
  if (bug.Fire("net.drop", 0.03, rng)) return {};
  if (bug.Fire("net.delay", 0.05, rng)) d += rng.Uniform(50, 3000);
  std::vector<TimeMs> out{d};
  if (bug.Fire("net.duplicate", 0.03, rng)) out.push_back(d + rng.Uniform(0, 500));
  return out;
}

void Network::Partition(const std::string& a, const std::string& b) {
  partitioned_.insert(Key(a, b));
}
void Network::Unpartition(const std::string& a, const std::string& b) {
  partitioned_.erase(Key(a, b));
}
void Network::Clog(const std::string& a, const std::string& b, TimeMs until) {
  TimeMs& u = clogged_until_[Key(a, b)];
  u = std::max(u, until);
}
void Network::Unclog(const std::string& a, const std::string& b) {
  clogged_until_.erase(Key(a, b));
}

void Network::HealAll() {
  partitioned_.clear();
  clogged_until_.clear();
}

size_t Network::clogs() const {
  size_t n = 0;
  for (const auto& [k, until] : clogged_until_) n += until > world_.now() ? 1 : 0;
  return n;
}

}  // namespace rsc::sim
