#pragma once
// How a Consumer is made on a Platform (platform.h): Consumer::Create makes it on the
// operating system's (OsPlatform), the simulator on its simulated one — the same checks,
// version-store load, threads, locks and runtime either way.

#include <functional>
#include <memory>

#include "client/client_options.h"
#include "client/consumer_runtime.h"
#include "client/platform.h"
#include "rsc/consumer.h"

namespace rsc::client {

// The platform for a consumer, from its options as checked (endpoints and Redis URL parsed).
using ConsumerPlatformFactory =
    std::function<std::unique_ptr<Platform>(const ConsumerOptions& options, CheckedEndpoints)>;

struct ConsumerAccess {
  // Checks the options (INVALID_ARGUMENT), loads the version store and makes the platform and
  // the consumer; starts nothing: Consumer::Create's contract.
  static ConsumerResult<std::unique_ptr<Consumer>> Create(
      ConsumerOptions options, MessageHandler handler,
      const ConsumerPlatformFactory& make_platform);
  // The consumer's runtime, read without its lock: for the simulator only, whose fibers run
  // one at a time and never park holding the lock.
  static const ConsumerRuntime& Runtime(const Consumer& consumer);
};

}  // namespace rsc::client
