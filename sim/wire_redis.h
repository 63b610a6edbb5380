#pragma once
// The simulated Redis spoken in the wire form: the reader commands as the shipped client sends
// them (client/reader_wire.h, client/node_core.h: XGROUP CREATE, XAUTOCLAIM … JUSTID,
// XPENDING, XREADGROUP with one or many streams, with or without BLOCK, XACK, CLIENT ID,
// CLIENT UNBLOCK … TIMEOUT, ASKING) and the producer's XADD … NOMKSTREAM (client/publish_call.h)
// run against SimRedis and answered with the RESP2 replies
// Redis 7 gives (the shapes the library parses; the stream semantics are contract-tested in
// tests/sim/streams_contract_test.cc, the shapes in tests/sim/wire_redis_test.cc). A command
// the simulated clients never send (XCLAIM, the dead-letter EVAL: simulated handlers never
// fail) stops the run.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/reply.h"
#include "sim/services.h"
#include "sim/sim_redis.h"

namespace rsc::sim {

// The connection a pipeline arrives on.
struct WireClient {
  int64_t client_id = 0;       // its CLIENT ID (blocked reads are found by it)
  bool skip_takeover = false;  // MUTANT c7_skip_takeover: XAUTOCLAIM claims nothing
  // The client closed the connection behind this pipeline (its FIN follows the commands):
  // Redis runs them, but a read that would block is freed at once, unanswered.
  bool closing = false;
  // A cluster node (sim/sim_cluster.h): the redirection a command gets there (`asking`: it
  // follows ASKING; `arriving`: false when a blocked read is asked again), or nullopt to run
  // it. Unset: one server.
  std::function<std::optional<std::string>(const redis::Command& c, bool asking, bool arriving)>
      route;
};

// Runs `cmds` in order, as Redis runs a client's pipeline: each one once the previous one was
// answered, so a blocking read holds back the commands behind it. `done` gets one reply per
// command, or `reset` (a failover or restart reset the connection while a read blocked; the
// replies are lost).
void RunWirePipeline(SimRedis& redis, std::vector<redis::Command> cmds, WireClient client,
                     std::function<void(std::vector<redis::Reply> replies, bool reset)> done);

// The same as a RedisExec for Services::SendRedis: `result` gets the replies (the StreamReply
// handed on only says whether the connection held: an error starting with kConnError when a
// failover reset it). `closing`: set when the client cut the connection after sending, read
// when the pipeline reaches Redis (the FIN travels behind the commands).
RedisExec WirePipeline(std::vector<redis::Command> cmds, WireClient client,
                       std::shared_ptr<std::vector<redis::Reply>> result,
                       std::shared_ptr<bool> closing = nullptr);

}  // namespace rsc::sim
