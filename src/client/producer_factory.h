#pragma once
// How a Producer is made on a Platform (platform.h): Producer::Create makes it on the
// operating system's (OsPlatform), the simulator on its simulated one — the same checks,
// version-store load, threads and publish path either way.

#include <functional>
#include <memory>

#include "client/client_options.h"
#include "client/platform.h"
#include "rsc/producer.h"

namespace rsc::client {

// The platform for a producer, from its options as checked (endpoints and Redis URL parsed).
using ProducerPlatformFactory =
    std::function<std::unique_ptr<Platform>(const ProducerOptions& options, CheckedEndpoints)>;

struct ProducerAccess {
  // Checks the options (INVALID_ARGUMENT), makes the platform, loads the version store and
  // starts the refresh thread: Producer::Create's contract.
  static ProducerResult<std::unique_ptr<Producer>> Create(
      ProducerOptions options, const ProducerPlatformFactory& make_platform);
};

}  // namespace rsc::client
