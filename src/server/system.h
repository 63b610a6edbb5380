#pragma once
// Production implementations of the core's Clock and TokenSource ports.

#include <chrono>

#include "core/clock.h"
#include "redis/random.h"

namespace rsc {

class SystemClock : public Clock {
 public:
  TimeMs NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class RandomTokens : public TokenSource {
 public:
  std::string NewToken() override { return redis::RandomHex128(); }
};

}  // namespace rsc
