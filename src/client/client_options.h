#pragma once
// What Consumer::Create and Producer::Create make of the user's options (include/rsc/): the
// checks, each failing with the message the caller gets as kInvalidArgument, and the options
// of the runtime they build (ConsumerRuntime, ProducerRuntime). No I/O: the version store is
// loaded, the clock read and the member id drawn by the caller. The simulator builds each of
// its consumers and producers from a ConsumerOptions / ProducerOptions through these same
// functions (issue 10), so a default or a derivation the library changes is what it runs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/consumer_core.h"
#include "client/consumer_runtime.h"
#include "client/http_endpoint.h"
#include "client/producer_runtime.h"
#include "redis/redis_url.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "rsc/version_store.h"

namespace rsc::client {

// A checked option set: the coordinator endpoints and the Redis URL, parsed.
struct CheckedEndpoints {
  std::vector<HttpEndpoint> coordinators;
  redis::RedisUrl redis;
};

// The option checks of Consumer::Create (`has_handler`: a message handler was given). nullopt
// and *out filled when every option is valid; else what is wrong.
std::optional<std::string> CheckConsumerOptions(const ConsumerOptions& options, bool has_handler,
                                                CheckedEndpoints* out);
// The runtime's options: `member_id` names the consumer in Redis unless
// options.consumer_name does; readers report events only when options.on_event is set.
ConsumerRuntimeOptions ConsumerRuntimeOptionsOf(const ConsumerOptions& options,
                                                const std::string& member_id);
// The core's: `seed` is the version store's last value (C5), `jitter_seed` the backoff's.
ConsumerCoreOptions ConsumerCoreOptionsOf(const ConsumerOptions& options,
                                          const std::string& member_id, int endpoint_count,
                                          const ObservedVersion& seed, uint64_t jitter_seed);

// The option checks of Producer::Create, as above.
std::optional<std::string> CheckProducerOptions(const ProducerOptions& options,
                                                CheckedEndpoints* out);
// The runtime's options; `first_endpoint`: where the first refresh round starts.
ProducerRuntimeOptions ProducerRuntimeOptionsOf(const ProducerOptions& options, int endpoint_count,
                                                int first_endpoint);
// Where a producer's observed version lives in its VersionStore: under its group, or under
// kStreamRoutingGroup when it routes by the stream (a layout version, SPEC D4).
std::string ProducerVersionStoreGroup(const ProducerOptions& options);

}  // namespace rsc::client
