#pragma once
// StreamAdmin (core/stream_admin.h) on Redis through the shared Executor, so it follows the
// slot map on a cluster like the metadata store.

#include "core/stream_admin.h"
#include "redis/executor.h"

namespace rsc::redis {

class RedisStreamAdmin : public StreamAdmin {
 public:
  explicit RedisStreamAdmin(Executor& executor) : executor_(executor) {}
  Status CreateConsumerGroup(const std::string& key, const std::string& group) override;
  Result<bool> Seal(const std::string& key, int32_t generation) override;
  Result<GroupProgress> Progress(const std::string& key, const std::string& group) override;
  Result<bool> TrimSealed(const std::string& key, int32_t generation) override;

 private:
  Executor& executor_;
};

}  // namespace rsc::redis
