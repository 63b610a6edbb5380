#pragma once
// Bridges GroupService facts to Prometheus metrics and structured logs (SPEC §11, M9).

#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "server/group_service.h"
#include "server/metrics.h"

namespace rsc {

class MetricsObserver : public ServiceObserver {
 public:
  // `shard_metrics`: also the per-shard backlog series (cardinality: one per shard).
  explicit MetricsObserver(Metrics& metrics, bool shard_metrics = false)
      : metrics_(metrics), shard_metrics_(shard_metrics) {}

  void OnEvents(const GroupKey& key, const std::vector<Event>& events) override;
  void OnHeartbeat(const GroupKey& key, const HeartbeatRequest& req, std::string_view status,
                   size_t batch_size) override;
  void OnMutexWait(double seconds, bool acquired) override;
  void OnRevisionConflict(const GroupKey& key) override;
  void OnSteadyRenewal(const GroupKey& key, bool applied) override;
  void OnLoadError(const GroupKey& key, const Error& e) override;
  void OnGroupState(const GroupKey& key, const GroupMetadata& m, const Liveness& live,
                    TimeMs now) override;
  // Store counters exported as Prometheus counters (synced on every tick).
  void AttachStoreCounters(std::function<int64_t()> script_reloads);
  void OnTick(const GroupKey& key, bool wrote) override;
  void OnStreamState(const std::string& stream, int64_t parents_incomplete) override {
    metrics_.SetReshardParentsIncomplete(stream, parents_incomplete);
  }
  void OnGroupBacklog(const GroupKey& key, const std::vector<ShardView>& shards) override;

 private:
  Metrics& metrics_;
  const bool shard_metrics_;
  std::mutex mu_;
  std::map<std::string, std::set<int32_t>> shard_series_;  // by group tag; guarded by mu_
  std::map<std::string, bool> round_active_;               // by group tag; guarded by mu_
  std::function<int64_t()> script_reloads_;
  int64_t script_reloads_seen_ = 0;  // guarded by mu_
};

}  // namespace rsc
