// The clock the client runtimes use for lease checks (src/client/http_transport.h).
//
// Leases end on whole milliseconds of the steady clock. A check made with the clock
// rounded down passes up to 1 ms after the lease ended (a read, its BLOCK or an XADD then
// happens outside the lease, which the history checkers see at µs precision); rounded up
// it never does.

#include <gtest/gtest.h>

#include "client/http_transport.h"

namespace rsc::client {
namespace {

TEST(LeaseClock, RoundsUpSoALeaseCheckNeverRunsBehindTheMicrosecondClock) {
  for (int i = 0; i < 5000; ++i) {
    const int64_t before_us = SteadyNowUs();
    const int64_t ceil_ms = SteadyNowMsCeil();
    const int64_t after_us = SteadyNowUs();
    // Not behind the time it was read at (the rounded-down clock is, except on exact ms) ...
    ASSERT_GE(ceil_ms * 1000, before_us) << "iteration " << i;
    // ... and at most the next whole millisecond after it.
    ASSERT_LE(ceil_ms * 1000, after_us + 999) << "iteration " << i;
  }
  EXPECT_LE(SteadyNowMs(), SteadyNowMsCeil());
}

}  // namespace
}  // namespace rsc::client
