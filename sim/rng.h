#pragma once
// Rng: the simulator's only source of randomness. One instance per run, seeded from the
// run's seed and passed by reference (never global), so a seed replays bit for bit.
// splitmix64: tiny, fast, and its output does not depend on the platform's <random>.

#include <cstdint>
#include <string>

namespace rsc::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (inclusive); lo when hi <= lo.
  int64_t Uniform(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<int64_t>(Next() % (static_cast<uint64_t>(hi - lo) + 1));
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return p > 0 && Unit() < p; }
  // `n` random bytes as lowercase hex.
  std::string Hex(int n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(static_cast<size_t>(n) * 2);
    uint64_t bits = 0;
    for (int i = 0; i < n; ++i) {
      if (i % 8 == 0) bits = Next();
      out.push_back(kDigits[bits & 0xf]);
      out.push_back(kDigits[(bits >> 4) & 0xf]);
      bits >>= 8;
    }
    return out;
  }
  // An independent stream (e.g. for a core's jitter seed).
  uint64_t Seed() { return Next(); }

 private:
  uint64_t state_;
};

}  // namespace rsc::sim
