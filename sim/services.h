#pragma once
// What a simulated client process (consumer, producer, operator) needs from the simulation:
// the world, and the two ways to talk to the rest of the system — HTTP to a coordinator
// endpoint and commands to Redis — with the network's latency and faults applied.

#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "server/http_server.h"
#include "sim/network.h"
#include "sim/sim_cluster.h"
#include "sim/sim_redis.h"
#include "sim/world.h"

namespace rsc::sim {

// Executes one command at Redis when it arrives, and hands the reply to `done` (at once,
// or later for a blocking read).
using RedisExec = std::function<void(SimRedis&, std::function<void(StreamReply)> done)>;

// Replies to commands that never reached Redis, or whose connection broke, carry an error
// starting with this prefix (the client then reconnects, like hiredis after an I/O error).
inline constexpr const char* kConnError = "CONN ";

// What a simulated client's options name, as an application's would: coordinator endpoint i
// and the Redis URL (the simulated network routes by slot, not by these names).
inline std::vector<std::string> SimCoordinatorEndpoints(int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(fmt::format("http://coordinator-{}:7700", i));
  return out;
}
inline constexpr const char* kSimRedisUrl = "redis://redis:6379";

// The library's option checks (client/client_options.h) must pass what the simulation draws.
inline void RequireValidOptions(const std::optional<std::string>& error, const char* client) {
  if (error) std::fprintf(stderr, "simulated %s options refused: %s\n", client, error->c_str());
  RSC_CHECK(!error);
}

class Services {
 public:
  virtual ~Services() = default;
  virtual World& world() = 0;
  virtual SimRedis& redis() = 0;
  virtual Network& net() = 0;
  // The cluster the consumers' readers see (sim/sim_cluster.h), or null: one server.
  virtual SimCluster* cluster() { return nullptr; }
  // One HTTP exchange with coordinator endpoint `slot`. `on_reply` may never be called (a
  // lost message: the caller times out) or be called twice (a duplicate); status 0 means a
  // transport failure (connection refused).
  virtual void SendHttp(const std::string& from_node, int slot, HttpRequest request,
                        std::function<void(const HttpResponse&)> on_reply) = 0;
  // One Redis command on a connection identified by `conn_epoch` (0 = connect first; set
  // to the connection's epoch). Exactly one reply comes back.
  virtual void SendRedis(const std::string& from_node, uint64_t& conn_epoch, RedisExec exec,
                         std::function<void(const StreamReply&)> on_reply) = 0;
  // Faults are still being injected (the safety phase): rare bad behaviour of a client
  // itself (a handler that hangs) is injected only then, so the heal can converge.
  virtual bool in_fault_phase() const = 0;
  // Deliveries of (key, seq) so far, before this one (redelivery probe).
  virtual int64_t CountDelivery(const std::string& key, int64_t seq) = 0;
  // An XADD of (key, seq) was acknowledged (the run's end waits for its delivery; a rollback
  // that destroys it is probed).
  virtual void NotePublished(const std::string& stream, const StreamId& id, const std::string& key,
                             int64_t seq) = 0;
};

}  // namespace rsc::sim
