// Consumer::Create: the consumer (consumer.cc) on the operating system's platform
// (platform_os.h). Apart from consumer.cc so that the simulator, which makes its consumers on
// a simulated platform, does not link the production ports.

#include <memory>
#include <utility>

#include "client/consumer_factory.h"
#include "client/platform_os.h"
#include "redis/connection.h"
#include "rsc/consumer.h"

namespace rsc {

ConsumerResult<std::unique_ptr<Consumer>> Consumer::Create(ConsumerOptions options,
                                                           MessageHandler handler) {
  return client::ConsumerAccess::Create(
      std::move(options), std::move(handler),
      [](const ConsumerOptions& o, client::CheckedEndpoints checked) {
        redis::ConnectionOptions redis = redis::ConnectionOptions::FromUrl(checked.redis);
        redis.connect_timeout = o.redis_timeout;
        redis.command_timeout = o.redis_timeout;
        return std::make_unique<client::OsPlatform>(std::move(checked.coordinators), o.http_timeout,
                                                    o.coordinator_token, std::move(redis));
      });
}

}  // namespace rsc
