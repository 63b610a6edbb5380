#pragma once
// Platform: everything a client facade blocks on or reads from the operating system, behind
// one port (issue 10), so the simulator runs the facade itself — its threads, locks, waits
// and the order it does things in — and not a copy of it (FoundationDB's approach: the real
// code over a simulated network).
//
// The producer (producer.cc) is written against it: its locks and condition variable, its
// refresh thread, the clock, its HTTP requests to the coordinators and its Redis executor.
// Production: OsPlatform (platform_os.cc: std::thread, the steady clock, the HTTP transport,
// hiredis through the connection layer). The simulator: sim/sim_producer.cc (fibers that park
// in simulated time, the simulated network and Redis, a local clock that jumps).
//
// Every call may block the calling thread (a fiber in the simulator); none may be made with
// a SyncPort mutex of another platform held.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "client/runtime_ports.h"
#include "core/protocol.h"
#include "core/result.h"
#include "core/sync.h"
#include "core/types.h"
#include "redis/executor.h"

namespace rsc::client {

class Platform {
 public:
  class Thread {
   public:
    virtual ~Thread() = default;
    // Waits until the body returned. Called once.
    virtual void Join() = 0;
  };

  virtual ~Platform() = default;

  // The mutexes and condition variables the facade waits on (and the clock of WaitFor).
  virtual SyncPort& Sync() = 0;
  // Local monotonic time: milliseconds (`round_up`: for lease decisions, see ConsumerPorts)
  // and microseconds (timestamps in reports).
  virtual TimeMs NowMs(bool round_up) = 0;
  virtual int64_t NowUs() = 0;
  // A uniform random number in [0, 1).
  virtual double Random() = 0;
  // Runs `body` on a thread of its own (`name`: for debuggers, ≤ 15 characters).
  virtual std::unique_ptr<Thread> StartThread(const char* name, std::function<void()> body) = 0;

  // One request to coordinator endpoint `call.endpoint`, bounded by the client's HTTP
  // timeout; status 0: no answer (`error` says why; a request without an answer may have
  // been applied, C6).
  virtual HttpOutcome Request(const HttpCall& call) = 0;
  // How endpoint `endpoint` is named in messages and metrics.
  virtual std::string EndpointName(int endpoint) const = 0;
  // Opens the Redis executor (one server, or a cluster's masters); a failure is returned and
  // the caller tries again later.
  virtual Result<std::unique_ptr<redis::Executor>> OpenRedis() = 0;

  // Test seams of the producer runtime (ProducerPorts; the simulator's history and mutants):
  // no-ops in production.
  virtual void ObserveRouting(const RoutingResponse& /*answer*/, TimeMs /*sent_ms*/) {}
  virtual void BeforeRouting(RoutingResponse& /*answer*/) {}
};

}  // namespace rsc::client
