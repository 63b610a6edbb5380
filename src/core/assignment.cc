#include "core/assignment.h"

#include <algorithm>
#include <map>

namespace rsc {

std::vector<std::string> ComputeTargets(const std::vector<ShardState>& shards,
                                        const std::vector<std::string>& eligible) {
  const size_t n = shards.size();
  std::vector<std::string> out(n);
  if (eligible.empty()) return out;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < eligible.size(); ++i) index[eligible[i]] = i;

  // The member each shard would like to stay with.
  std::vector<int> preferred(n, -1);
  std::vector<size_t> held(eligible.size(), 0);
  for (size_t s = 0; s < n; ++s) {
    auto it = index.find(shards[s].target);
    if (it == index.end()) it = index.find(shards[s].owner);
    if (it != index.end()) {
      preferred[s] = static_cast<int>(it->second);
      ++held[it->second];
    }
  }

  const size_t m = eligible.size();
  const size_t base = n / m;
  const size_t extra = n % m;
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return held[a] > held[b]; });
  std::vector<size_t> quota(m, base);
  for (size_t k = 0; k < extra; ++k) ++quota[order[k]];

  std::vector<size_t> count(m, 0);
  for (size_t s = 0; s < n; ++s) {
    const int p = preferred[s];
    if (p >= 0 && count[p] < quota[p]) {
      out[s] = eligible[p];
      ++count[p];
    }
  }
  size_t next = 0;
  for (size_t s = 0; s < n; ++s) {
    if (!out[s].empty()) continue;
    while (count[next] >= quota[next]) ++next;  // total quota == n, so this terminates
    out[s] = eligible[next];
    ++count[next];
  }
  return out;
}

}  // namespace rsc
