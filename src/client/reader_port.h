#pragma once
// ReaderPort: the consumer's reader connections to Redis, behind a port (issue 10), so the
// simulator runs the consumer facade (consumer.cc) over its simulated connections. Every
// shard's reader commands go through one port; the replies come back through the `answers`
// callback the platform was given (Platform::OpenReaders).
//
// Production: ReaderRedis (reader_redis.h: hiredis, one server or a cluster's masters, two
// connections per node). The simulator: the same ReaderRedis over SimReaderNet
// (sim/sim_reader_net.h: the library's NodeCore over the simulated network, Redis and cluster).
//
// The contract is ReaderRedis's: answers never come synchronously from Submit or Cancel; the
// commands of one token are answered in Submit order when a token submits its next command
// only after the previous one was answered; Stop() ends the answers.

#include <cstdint>
#include <functional>
#include <vector>

#include "client/node_core.h"
#include "client/reader_core.h"

namespace rsc::client {

class ReaderPort {
 public:
  // Receives the answers of one pipeline or one read together (possibly on several threads at
  // once, never under the port's lock).
  using Answers = std::function<void(std::vector<ReaderAnswer>& answers)>;

  virtual ~ReaderPort() = default;
  // Starts the port's threads; commands submitted before are sent then.
  virtual void Start() = 0;
  // Closes every connection and joins the threads; no answer once it returned. Idempotent.
  virtual void Stop() = 0;
  // Queues one command of reader `token` (ReaderRedis::Submit).
  virtual void Submit(uint64_t token, const ReaderCoreConfig& config,
                      const ReaderCommand& command) = 0;
  // Reader `token` is drained (`now` false: its blocked read is cut short by an unblock) or
  // abandoned (`now`: cut at the socket, answered at once) (ReaderRedis::Cancel).
  virtual void Cancel(uint64_t token, bool now) = 0;
  virtual ReaderRedisStats Stats() const = 0;
  // One server, not a cluster: a live read may carry its XACK and late-read check in one
  // pipeline (ConsumerPorts::PipelinesLiveReads).
  virtual bool SingleServer() const = 0;
};

}  // namespace rsc::client
