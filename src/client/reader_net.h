#pragma once
// ReaderNet: what ReaderRedis (reader_redis.h) blocks on and talks to, behind a port (issue 10),
// so the simulator runs ReaderRedis's routing itself — server detection, the cluster's slot
// map, MOVED/ASK, the failover watch, node retirement — over simulated nodes and a simulated
// cluster, not a copy of it.
//
// Production: OsReaderNet (reader_net_os.h: std::thread, the steady clock, hiredis through the
// connection layer's executor and one ReaderNode per node). The simulator: sim/sim_reader_net.h.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/node_core.h"
#include "core/result.h"
#include "core/sync.h"

namespace rsc::client {

// What a node's connections tell their owner.
struct ReaderNodeHooks {
  // Answers of one pipeline or one read, together (required).
  std::function<void(std::vector<ReaderAnswer>& answers)> answered;
  // Commands and reads redirected by a cluster (MOVED/ASK), unanswered (cluster only).
  std::function<void(std::vector<NodeCommand> commands, std::vector<NodeRead> reads)> bounced;
  // A connection of this node failed (optional).
  std::function<void()> failed;
};

// The reader connections to one Redis node: production's ReaderNode (reader_node.h, whose
// comment is the contract), the simulator's SimReaderNode.
class ReaderNodePort {
 public:
  virtual ~ReaderNodePort() = default;
  // Nothing connects before Start().
  virtual void Start() = 0;
  // Tells the node to end without waiting for it (ReaderNode::Halt); Stop() then waits.
  virtual void Halt() = 0;
  // No answer and no hook once it returned. Idempotent.
  virtual void Stop() = 0;
  virtual void Enqueue(NodeCommand command) = 0;
  // Live reads, at most one per token at a time; several at once go out together.
  virtual void Enqueue(std::vector<NodeRead> reads) = 0;
  virtual void Cancel(uint64_t token, bool now) = 0;
  // Nothing queued, in flight or being answered.
  virtual bool Idle() const = 0;
  virtual ReaderRedisStats Stats() const = 0;
};

// A redirection read from an error reply ("MOVED 3999 10.0.0.2:6379", "ASK …").
struct ReaderRedirect {
  bool ask = false;
  int slot = -1;
  std::string target;  // "host:port"
};

class ReaderNet {
 public:
  using TimePoint = NodeCore::TimePoint;

  virtual ~ReaderNet() = default;

  // The port's own thread, its lock and condition variable, its clock (the clock NodeRead
  // queue times are read from: the nodes' clock).
  virtual SyncPort& Sync() = 0;
  virtual TimePoint Now() = 0;
  // Runs `body` on a thread of its own; the returned function waits for it to return (called
  // once).
  virtual std::function<void()> StartThread(const char* name, std::function<void()> body) = 0;

  // Finds out what the URL names (blocking: a connect and a command per node asked, each
  // bounded by its timeout): true for a Redis Cluster, false for one server. Called until it
  // succeeds once.
  virtual Result<bool> Open() = 0;
  // The connections to node `address` (a cluster master's "host:port"; "" on one server).
  virtual std::unique_ptr<ReaderNodePort> MakeNode(const std::string& address,
                                                   ReaderNodeHooks hooks) = 0;

  // The cluster's slot map: called only after Open() returned true (ReaderRedis sets its mode
  // under its lock after that, which orders these calls after the open); then thread-safe.
  // The master serving `key`'s slot now.
  virtual std::string NodeForKey(std::string_view key) = 0;
  // The redirection in an error reply's text (`via`: the node that answered), if it is one.
  virtual std::optional<ReaderRedirect> ParseRedirect(std::string_view error,
                                                      const std::string& via) = 0;
  // A MOVED: `slot` is served by `target` from now on (until the next refresh).
  virtual void NoteMoved(int slot, const std::string& target) = 0;
  // Re-reads the map (blocking, like Open); a failure keeps the old one.
  virtual void RefreshSlots() = 0;
  // The masters the map names.
  virtual Result<std::vector<std::string>> Masters() = 0;
};

}  // namespace rsc::client
