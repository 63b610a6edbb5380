#include "redis/random.h"

#include <fmt/format.h>

#include <random>

namespace rsc::redis {
namespace {

std::mt19937_64& Generator() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }());
  return rng;
}

}  // namespace

std::string RandomHex128() {
  auto& rng = Generator();
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

double RandomUnit() { return std::uniform_real_distribution<double>(0.0, 1.0)(Generator()); }

}  // namespace rsc::redis
