#pragma once
// FaultProxy: a seeded TCP proxy for chaos tests (issue 4). It listens on a loopback port
// and forwards every accepted connection to a target, injecting the faults a real network
// and a real failover produce:
//   * delay: each forwarded chunk waits a random time in [delay_min, delay_max]; order is
//     kept per direction (TCP never reorders bytes), so delays pile up behind a slow chunk;
//   * reset: each forwarded chunk may instead reset both sides (RST, SO_LINGER 0) — a
//     crashed peer or a middlebox dropping state;
//   * blackhole: bytes are accepted but held, not forwarded, until the blackhole is lifted
//     (a partition: TCP retransmits, so held bytes flow once it heals — unless a side gave
//     up and closed meanwhile); new connections are accepted and held too;
//   * refuse: new connections are closed at once (a dead host with a live TCP stack);
//   * reset_replies: the target's reply resets the connection (a request applied, its
//     reply lost);
//   * retarget: later connections go to another target, and ResetAll() cuts the existing
//     ones (a failover behind a virtual IP).
// Silently dropping bytes inside a TCP stream is not a fault real networks produce (the
// stream would be corrupted, not lossy), so "drop" is modelled as blackhole or reset.
//
// Why hand-written: no Debian-packaged fault proxy exists (toxiproxy is a Go service not in
// Debian); this is ~300 lines of Boost.Asio, which the project already uses through Beast.
//
// Thread safety: every public method may be called from any thread. One internal thread
// runs the proxy's io_context.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace rsc::testing {

struct ProxyFaults {
  std::chrono::milliseconds delay_min{0};
  std::chrono::milliseconds delay_max{0};
  double reset_probability = 0;  // per forwarded chunk, in [0, 1]
  bool blackhole = false;
  bool refuse = false;
  // The first bytes back from the target reset both sides instead of being forwarded: the
  // request reached the server and its reply is lost (an unknown result for the client).
  bool reset_replies = false;
  // With reset_replies: only the replies to requests whose first bytes are these (e.g.
  // "POST "; the last request seen on the connection); "" for every reply.
  std::string reset_replies_to;
};

struct ProxyCounters {
  int64_t accepted = 0;
  int64_t refused = 0;
  int64_t resets = 0;  // connections reset by a fault or ResetAll
  int64_t bytes = 0;   // forwarded, both directions
  int64_t chunks_delayed = 0;
};

class FaultProxy {
 public:
  // Listens on 127.0.0.1:`listen_port` (0 = pick a free port) and forwards to
  // 127.0.0.1:`target_port`. `seed` drives every random choice.
  FaultProxy(int target_port, uint64_t seed, int listen_port = 0);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  void SetFaults(const ProxyFaults& faults);
  ProxyFaults faults() const;
  // New connections go to `target_port` from now on.
  void Retarget(int target_port);
  // Resets every open connection (both sides see a connection reset).
  void ResetAll();
  ProxyCounters counters() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace rsc::testing
