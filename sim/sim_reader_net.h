#pragma once
// SimReaderNet: a simulated consumer process's ReaderNet (client/reader_net.h), so the
// library's ReaderRedis — server detection, the cluster's slot map, MOVED/ASK, the failover
// watch, node retirement — runs as shipped in the simulator. Its thread is a fiber of the
// process, its lock and condition variable the process's FiberSync, its clock simulated time,
// its nodes SimReaderNode (the library's NodeCore over the simulated network and Redis). With
// a SimCluster (sim/sim_cluster.h) the URL names a cluster: the slot map is read from it over
// the network (Open, RefreshSlots) and the nodes check every command's slot at their address;
// without one it names one server.

#include <memory>
#include <string>
#include <vector>

#include "client/reader_net.h"
#include "sim/fiber_group.h"
#include "sim/fiber_sync.h"
#include "sim/services.h"
#include "sim/sim_cluster.h"

namespace rsc::sim {

class SimReaderNode;

class SimReaderNet : public client::ReaderNet {
 public:
  // `from_node`: the process's network node. `cluster`: the cluster, or null (one server).
  SimReaderNet(Services& env, FiberGroup& fibers, FiberSync& sync, std::string from_node,
               SimCluster* cluster, bool skip_takeover);
  ~SimReaderNet() override;

  SyncPort& Sync() override { return sync_; }
  TimePoint Now() override;
  std::function<void()> StartThread(const char* name, std::function<void()> body) override;
  Result<bool> Open() override;
  std::unique_ptr<client::ReaderNodePort> MakeNode(const std::string& address,
                                                   client::ReaderNodeHooks hooks) override;
  std::string NodeForKey(std::string_view key) override;
  std::optional<client::ReaderRedirect> ParseRedirect(std::string_view error,
                                                      const std::string& via) override;
  void NoteMoved(int slot, const std::string& target) override;
  void RefreshSlots() override;
  Result<std::vector<std::string>> Masters() override;

  // The process died: every node's connections close (Redis frees their blocked reads),
  // nothing more is sent, and the map is not read again.
  void Kill();
  // The owner is stopping the port (every node goes with it): a node destroyed before is one
  // ReaderRedis retired.
  void Closing() { closing_ = true; }
  bool closing() const { return closing_ || dead_; }
  // Called by the nodes (in creation order: Kill stops them in that order, every run alike).
  void Register(SimReaderNode* node) { nodes_.push_back(node); }
  void Unregister(SimReaderNode* node) { std::erase(nodes_, node); }

 private:
  // One exchange with the cluster for its map, parked until it comes back; false: it failed.
  bool ReadMap();

  Services& env_;
  FiberGroup& fibers_;
  FiberSync& sync_;
  const std::string node_;
  SimCluster* const cluster_;
  const bool skip_takeover_;
  bool dead_ = false;
  bool closing_ = false;
  uint64_t map_epoch_ = 0;                      // the connection the map is read on
  std::shared_ptr<const SimCluster::Map> map_;  // as last read (a MOVED makes a copy)
  std::vector<SimReaderNode*> nodes_;
};

}  // namespace rsc::sim
