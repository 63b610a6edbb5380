// The "jump-xxh64" routing function (SPEC R5.2); see include/rsc/routing.h and
// docs/routing.md.

#include <xxhash.h>

#include "rsc/routing.h"

namespace rsc {

uint64_t RoutingKeyHash(std::string_view key) {
  return static_cast<uint64_t>(XXH64(key.data(), key.size(), /*seed=*/0));
}

// Transcribed from Figure 1 of Lamping & Veach (arXiv:1406.2294). The constant is the
// paper's 64-bit linear congruential generator; the division is done in IEEE double exactly
// as in the paper, which every mainstream language reproduces bit for bit. Do not
// "simplify" the arithmetic: the published test vectors pin this exact form.
int32_t JumpConsistentHash(uint64_t key, int32_t num_buckets) {
  int64_t b = -1;
  int64_t j = 0;
  while (j < num_buckets) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) * (static_cast<double>(int64_t{1} << 31) /
                                                           static_cast<double>((key >> 33) + 1)));
  }
  return b < 0 ? 0 : static_cast<int32_t>(b);
}

int32_t ShardForKey(std::string_view key, int32_t shard_count) {
  return JumpConsistentHash(RoutingKeyHash(key), shard_count);
}

}  // namespace rsc
