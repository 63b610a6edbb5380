#include "client/client_options.h"

#include <utility>

#include "core/protocol.h"

namespace rsc::client {
namespace {

// The checks both clients share, in the order Create reports them: names, then endpoints,
// token and Redis URL.
std::optional<std::string> CheckNames(const std::string& stream, const std::string& group,
                                      bool group_optional) {
  if (!IsValidStreamName(stream)) {
    return "stream '" + stream + "' is not a valid stream prefix (SPEC R2.4)";
  }
  if (!(group_optional && group.empty()) && !IsValidGroupName(group)) {
    return "group '" + group + "' is not a valid group name (SPEC R2.4)";
  }
  return std::nullopt;
}

std::optional<std::string> CheckEndpoints(const std::vector<std::string>& coordinator_endpoints,
                                          const std::string& coordinator_token,
                                          const std::string& redis_url, CheckedEndpoints* out) {
  if (coordinator_endpoints.empty()) return std::string("no coordinator endpoints");
  if (!coordinator_token.empty() && !IsValidBearerToken(coordinator_token)) {
    return std::string(
        "coordinator_token must be 1 to 1024 printable ASCII characters without blanks");
  }
  out->coordinators.clear();
  for (const std::string& e : coordinator_endpoints) {
    std::string error;
    std::optional<HttpEndpoint> ep = ParseHttpEndpoint(e, &error);
    if (!ep) return error;
    out->coordinators.push_back(std::move(*ep));
  }
  Result<redis::RedisUrl> url = redis::ParseRedisUrl(redis_url);
  if (!url.ok()) return url.error().message;
  out->redis = std::move(url).value();
  return std::nullopt;
}

}  // namespace

std::optional<std::string> CheckConsumerOptions(const ConsumerOptions& options, bool has_handler,
                                                CheckedEndpoints* out) {
  if (!has_handler) return std::string("no message handler");
  if (auto error = CheckNames(options.stream, options.group, false)) return error;
  if (!options.instance_id.empty() && !IsValidMemberId(options.instance_id)) {
    return std::string("instance_id must match [A-Za-z0-9._:-]{1,128}");
  }
  if (auto error = CheckEndpoints(options.coordinator_endpoints, options.coordinator_token,
                                  options.redis_url, out)) {
    return error;
  }
  if (options.max_batch < 1 || options.max_batch > 10000) {
    return std::string("max_batch must be in 1..10000");
  }
  if (options.block.count() < 1) return std::string("block must be >= 1 ms");
  if (options.handler_threads < 1 || options.handler_threads > 1024) {
    return std::string("handler_threads must be in 1..1024");
  }
  if (options.max_attempts < 1) return std::string("max_attempts must be >= 1");
  if (options.handler_retry_initial.count() < 1 ||
      options.handler_retry_max < options.handler_retry_initial) {
    return std::string("handler_retry_initial must be >= 1 ms and at most handler_retry_max");
  }
  if (options.backoff_initial.count() < 1 || options.backoff_max < options.backoff_initial) {
    return std::string("backoff_initial must be >= 1 ms and at most backoff_max");
  }
  if (options.http_timeout.count() < 1 || options.redis_timeout.count() < 1) {
    return std::string("http_timeout and redis_timeout must be >= 1 ms");
  }
  if (options.dead_letter_suffix.empty() ||
      options.dead_letter_suffix.find_first_of("{}") != std::string::npos) {
    // Braces in the suffix could change the key's hash tag (cluster slot) or make the
    // dead-letter key equal the shard stream.
    return std::string("dead_letter_suffix must be non-empty and contain no '{' or '}'");
  }
  return std::nullopt;
}

ConsumerRuntimeOptions ConsumerRuntimeOptionsOf(const ConsumerOptions& o,
                                                const std::string& member_id) {
  ConsumerRuntimeOptions r;
  r.stream = o.stream;
  r.reader.group = o.group;
  r.reader.consumer_name = o.consumer_name.empty() ? member_id : o.consumer_name;
  r.reader.max_batch = o.max_batch;
  r.reader.block_ms = o.block.count();
  r.reader.policy = o.on_handler_error;
  r.reader.max_attempts = o.max_attempts;
  r.reader.retry_initial_ms = o.handler_retry_initial.count();
  r.reader.retry_max_ms = o.handler_retry_max.count();
  r.reader.observe = static_cast<bool>(o.on_event);
  r.dead_letter_suffix = o.dead_letter_suffix;
  r.shutdown_timeout_ms = o.shutdown_timeout.count();
  return r;
}

ConsumerCoreOptions ConsumerCoreOptionsOf(const ConsumerOptions& o, const std::string& member_id,
                                          int endpoint_count, const ObservedVersion& seed,
                                          uint64_t jitter_seed) {
  return ConsumerCoreOptions{
      .member_id = MemberId(member_id),
      .instance_id = o.instance_id,
      .endpoint_count = endpoint_count,
      .initial_metadata_version = seed.metadata_version,
      .initial_lineage = seed.lineage,
      .initial_heartbeat_interval_ms = 1000,
      .backoff_initial_ms = o.backoff_initial.count(),
      .backoff_max_ms = o.backoff_max.count(),
      .jitter_seed = jitter_seed,
  };
}

std::optional<std::string> CheckProducerOptions(const ProducerOptions& options,
                                                CheckedEndpoints* out) {
  if (auto error = CheckNames(options.stream, options.group, true)) return error;
  if (auto error = CheckEndpoints(options.coordinator_endpoints, options.coordinator_token,
                                  options.redis_url, out)) {
    return error;
  }
  if (options.retry_initial.count() < 1 || options.retry_max < options.retry_initial) {
    return std::string("retry_initial must be >= 1 ms and at most retry_max");
  }
  return std::nullopt;
}

ProducerRuntimeOptions ProducerRuntimeOptionsOf(const ProducerOptions& o, int endpoint_count,
                                                int first_endpoint) {
  return ProducerRuntimeOptions{
      .stream = o.stream,
      .group = o.group,
      .endpoint_count = endpoint_count,
      .first_endpoint = first_endpoint,
      .endpoint_backoff_ms = o.endpoint_backoff.count(),
      .core = ProducerCoreOptions{o.retry_initial.count(), o.retry_max.count(), 50},
  };
}

std::string ProducerVersionStoreGroup(const ProducerOptions& options) {
  return options.group.empty() ? std::string(kStreamRoutingGroup) : options.group;
}

}  // namespace rsc::client
