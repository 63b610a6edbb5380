#pragma once
// Platform: everything a client facade blocks on or reads from the operating system, behind
// one port (issue 10), so the simulator runs the facade itself — its threads, locks, waits
// and the order it does things in — and not a copy of it (FoundationDB's approach: the real
// code over a simulated network).
//
// The producer (producer.cc) is written against it: its locks and condition variable, its
// refresh thread, the clock, its HTTP requests to the coordinators and its Redis executor.
// So is the consumer (consumer.cc): its timer and HTTP threads, the handler pool's threads
// (handler_pool.h), its locks, the clock, its member id, and its reader connections
// (reader_port.h). Production: OsPlatform (platform_os.cc: std::thread, the steady clock, the
// HTTP transport, hiredis through the connection layer and ReaderRedis). The simulator:
// sim/sim_producer.cc and sim/sim_consumer.cc (fibers that park in simulated time, the
// simulated network and Redis, a local clock that jumps).
//
// Every call may block the calling thread (a fiber in the simulator); none may be made with
// a SyncPort mutex of another platform held.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "client/consumer_runtime.h"
#include "client/reader_port.h"
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
  // Who is calling: the same value on one thread and different ones on two (the handler
  // pool's "am I one of yours"). The default tells OS threads apart; a platform whose threads
  // share OS threads (the simulator's fibers) overrides it.
  virtual const void* CurrentThread();

  // One request to coordinator endpoint `call.endpoint`, bounded by the client's HTTP
  // timeout; status 0: no answer (`error` says why; a request without an answer may have
  // been applied, C6).
  virtual HttpOutcome Request(const HttpCall& call) = 0;
  // Closes the connections kept alive between requests (the next request opens one again).
  virtual void CloseRequests() {}
  // How endpoint `endpoint` is named in messages and metrics.
  virtual std::string EndpointName(int endpoint) const = 0;
  // Opens the Redis executor (one server, or a cluster's masters); a failure is returned and
  // the caller tries again later.
  virtual Result<std::unique_ptr<redis::Executor>> OpenRedis() = 0;

  // The consumer's reader connections (ReaderRedis: over OsReaderNet in production, over
  // SimReaderNet in the simulator); every reply goes to `answers`. Nothing connects before
  // ReaderPort::Start().
  virtual std::unique_ptr<ReaderPort> OpenReaders(ReaderPort::Answers answers);
  // The consumer's member id: a random (version 4) UUID, SPEC §4.1.
  virtual std::string NewMemberId();
  // The seed of the consumer core's jitter.
  virtual uint64_t NewSeed();

  // Test seams of the producer runtime (ProducerPorts; the simulator's history and mutants):
  // no-ops in production.
  virtual void ObserveRouting(const RoutingResponse& /*answer*/, TimeMs /*sent_ms*/) {}
  virtual void BeforeRouting(RoutingResponse& /*answer*/) {}

  // Test seams of the consumer runtime (ConsumerPorts; the simulator's history, probes and
  // mutants), called with the consumer's lock held, so they may read `runtime`; no-ops in
  // production.
  virtual void BeforeAnswer(HeartbeatResponse& /*answer*/, TimeMs /*sent_ms*/) {}
  virtual std::unique_ptr<ReaderCore> MakeReader(ReaderCoreConfig config, ReaderContext* context,
                                                 DeliveryStats* stats, bool has_predecessor);
  virtual void ReaderStopping(const ConsumerRuntime& /*runtime*/, uint64_t /*reader*/,
                              bool /*abandon*/, AbandonCause /*cause*/) {}
  virtual void ObserveConsumer(const ConsumerRuntime& /*runtime*/, uint64_t /*reader*/,
                               const ConsumerEvent& /*event*/) {}
  virtual void AfterInput(const ConsumerRuntime& /*runtime*/) {}
};

}  // namespace rsc::client
