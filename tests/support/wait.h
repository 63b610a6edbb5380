#pragma once
// WaitFor: poll a condition until it holds or a deadline passes (ENGINEERING §5: never
// sleep blindly; say what did not happen).
//
//   ASSERT_TRUE(WaitFor([&] { return store.Load(k, now).ok(); }, 5s, "group loads again"));

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <thread>

namespace rsc::testing {

template <class Predicate>
::testing::AssertionResult WaitFor(Predicate&& predicate, std::chrono::milliseconds deadline,
                                   std::string_view what,
                                   std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto start = std::chrono::steady_clock::now();
  int attempts = 0;
  for (;;) {
    ++attempts;
    if (predicate()) return ::testing::AssertionSuccess();
    auto elapsed = std::chrono::steady_clock::now() - start;
    if (elapsed >= deadline) {
      return ::testing::AssertionFailure() << "timed out after " << deadline.count() << " ms ("
                                           << attempts << " checks) waiting for: " << what;
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace rsc::testing
