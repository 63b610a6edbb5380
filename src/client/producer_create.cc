// Producer::Create: the producer (producer.cc) on the operating system's platform
// (platform_os.h). Apart from producer.cc so that the simulator, which makes its producers on
// a simulated platform, does not link the production ports.

#include <memory>
#include <utility>

#include "client/platform_os.h"
#include "client/producer_factory.h"
#include "redis/connection.h"
#include "rsc/producer.h"

namespace rsc {

ProducerResult<std::unique_ptr<Producer>> Producer::Create(ProducerOptions options) {
  return client::ProducerAccess::Create(
      std::move(options), [](const ProducerOptions& o, client::CheckedEndpoints checked) {
        redis::ConnectionOptions redis = redis::ConnectionOptions::FromUrl(checked.redis);
        redis.connect_timeout = o.redis_timeout;
        redis.command_timeout = o.redis_timeout;
        return std::make_unique<client::OsPlatform>(std::move(checked.coordinators), o.http_timeout,
                                                    o.coordinator_token, std::move(redis));
      });
}

}  // namespace rsc
