#pragma once
// StreamAdmin (core/stream_admin.h) on Redis through the shared Executor, so it follows the
// slot map on a cluster like the metadata store.

#include <chrono>

#include "core/stream_admin.h"
#include "redis/executor.h"

namespace rsc::redis {

class RedisStreamAdmin : public StreamAdmin {
 public:
  // `seal_wait`: how long a seal waits for a replica's acknowledgement (WAIT, RS2) where the
  // shard's master has replicas.
  explicit RedisStreamAdmin(Executor& executor,
                            std::chrono::milliseconds seal_wait = std::chrono::milliseconds(1000))
      : executor_(executor), seal_wait_(seal_wait) {}
  Status CreateConsumerGroup(const std::string& key, const std::string& group) override;
  Result<bool> Seal(const std::string& key, int32_t generation,
                    const std::string& successor) override;
  std::vector<Result<StreamTop>> Tops(const std::vector<std::string>& keys) override;
  Result<GroupProgress> Progress(const std::string& key, const std::string& group) override;
  std::vector<Result<GroupProgress>> Progresses(const std::vector<std::string>& keys,
                                                const std::string& group) override;
  Result<bool> TrimSealed(const std::string& key, int32_t generation) override;
  Result<SlotPlacement> Placement() override { return executor_.SlotsByMaster(); }
  std::vector<Result<ShardBacklog>> Backlogs(const std::vector<std::string>& keys,
                                             const std::string& group) override;

 private:
  Executor& executor_;
  const std::chrono::milliseconds seal_wait_;
};

}  // namespace rsc::redis
