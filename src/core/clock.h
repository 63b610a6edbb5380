#pragma once
// Clock and randomness ports. Cores never call these; shells do, once per request
// (like Redis freezing time for a whole command), and pass the values into the core.

#include <string>

#include "core/types.h"

namespace rsc {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock milliseconds since the Unix epoch. Deadlines recorded in Redis are shared
  // by every coordinator replica, so they must be in a clock all replicas roughly agree
  // on; K2's safety margin absorbs bounded skew between replicas.
  virtual TimeMs NowMs() = 0;
};

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // A fresh random token (lineage tokens, mutex tokens): 128 bits, hex.
  virtual std::string NewToken() = 0;
};

}  // namespace rsc
