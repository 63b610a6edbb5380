#include "sim/sim_reader_net.h"

#include <algorithm>
#include <utility>

#include "core/key_slot.h"
#include "redis/cluster.h"
#include "sim/sim_reader_node.h"

namespace rsc::sim {

SimReaderNet::SimReaderNet(Services& env, FiberGroup& fibers, FiberSync& sync,
                           std::string from_node, SimCluster* cluster, bool skip_takeover)
    : env_(env),
      fibers_(fibers),
      sync_(sync),
      node_(std::move(from_node)),
      cluster_(cluster),
      skip_takeover_(skip_takeover) {}

SimReaderNet::~SimReaderNet() = default;

client::ReaderNet::TimePoint SimReaderNet::Now() {
  return TimePoint{} + std::chrono::milliseconds(env_.world().now());
}

std::function<void()> SimReaderNet::StartThread(const char* /*name*/, std::function<void()> body) {
  std::shared_ptr<client::Platform::Thread> thread = fibers_.StartThread(std::move(body));
  return [thread] { thread->Join(); };
}

bool SimReaderNet::ReadMap() {
  if (dead_) {
    if (fibers_.tearing_down()) fibers_.YieldOnce();
    return false;
  }
  auto done = std::make_shared<bool>(false);
  auto ok = std::make_shared<bool>(false);
  auto map = std::make_shared<std::shared_ptr<const SimCluster::Map>>();
  Fiber* me = Fiber::Current();
  FiberGroup& fibers = fibers_;
  SimCluster* cluster = cluster_;
  // INFO cluster (and CLUSTER SLOTS on a cluster): what the URL names, in one exchange.
  env_.SendRedis(
      node_, map_epoch_,
      [cluster, map](SimRedis& /*redis*/, std::function<void(StreamReply)> reply) {
        if (cluster != nullptr) *map = cluster->Snapshot();
        reply(StreamReply{});
      },
      [&fibers, me, done, ok](const StreamReply& r) {
        *ok = r.ok();
        *done = true;
        fibers.Wake(me);
      });
  fibers_.ParkUntil(done);
  if (!*done || !*ok || dead_) {
    map_epoch_ = 0;
    return false;
  }
  if (cluster_ != nullptr) map_ = std::move(*map);
  return true;
}

Result<bool> SimReaderNet::Open() {
  if (!ReadMap()) return MakeError(ErrorCode::kRedisUnavailable, "redis: connection failed");
  return cluster_ != nullptr;
}

std::unique_ptr<client::ReaderNodePort> SimReaderNet::MakeNode(const std::string& address,
                                                               client::ReaderNodeHooks hooks) {
  return std::make_unique<SimReaderNode>(env_, *this, node_, address, cluster_, skip_takeover_,
                                         std::move(hooks));
}

std::string SimReaderNet::NodeForKey(std::string_view key) {
  return map_->masters[map_->owner[static_cast<size_t>(KeySlot(key))]];
}

std::optional<client::ReaderRedirect> SimReaderNet::ParseRedirect(std::string_view error,
                                                                  const std::string& via) {
  std::optional<redis::ClusterExecutor::Redirect> r =
      redis::ClusterExecutor::ParseRedirect(error, via, "redis");
  if (!r) return std::nullopt;
  return client::ReaderRedirect{r->ask, r->slot, std::move(r->target)};
}

void SimReaderNet::NoteMoved(int slot, const std::string& target) {
  auto map = std::make_shared<SimCluster::Map>(*map_);  // the read one is shared
  auto it = std::find(map->masters.begin(), map->masters.end(), target);
  if (it == map->masters.end()) it = map->masters.insert(map->masters.end(), target);
  map->owner[static_cast<size_t>(slot)] = static_cast<uint8_t>(it - map->masters.begin());
  map->Index();
  map_ = std::move(map);
}

void SimReaderNet::RefreshSlots() { (void)ReadMap(); }

Result<std::vector<std::string>> SimReaderNet::Masters() { return map_->serving; }

void SimReaderNet::Kill() {
  dead_ = true;
  const std::vector<SimReaderNode*> nodes = nodes_;
  for (SimReaderNode* n : nodes) n->Stop();
}

}  // namespace rsc::sim
