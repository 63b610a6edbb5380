#pragma once
// OsPlatform: the production Platform (platform.h) — std::thread, the steady clock, one HTTP
// transport per coordinator endpoint (http_transport.h), the connection layer's executor
// (redis/executor.h: one server, or a cluster detected when it is opened) for the producer and
// ReaderRedis (reader_redis.h) for the consumer's readers.

#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "client/http_endpoint.h"
#include "client/http_transport.h"
#include "client/platform.h"
#include "redis/connection.h"

namespace rsc::client {

class OsPlatform : public Platform {
 public:
  // `token`: the coordinator's bearer token ("" for none). `redis`: its timeouts are the
  // client's Redis timeout.
  OsPlatform(std::vector<HttpEndpoint> endpoints, std::chrono::milliseconds http_timeout,
             const std::string& token, redis::ConnectionOptions redis);

  SyncPort& Sync() override { return SyncPort::Os(); }
  TimeMs NowMs(bool round_up) override { return round_up ? SteadyNowMsCeil() : SteadyNowMs(); }
  int64_t NowUs() override { return SteadyNowUs(); }
  double Random() override;
  std::unique_ptr<Thread> StartThread(const char* name, std::function<void()> body) override;
  HttpOutcome Request(const HttpCall& call) override;
  void CloseRequests() override;
  std::string EndpointName(int endpoint) const override;
  Result<std::unique_ptr<redis::Executor>> OpenRedis() override;
  std::unique_ptr<ReaderPort> OpenReaders(ReaderPort::Answers answers) override;

 private:
  // One per endpoint; each is used by one thread at a time (the producer's refresh thread,
  // the consumer's HTTP thread).
  std::vector<std::unique_ptr<HttpTransport>> transports_;
  const std::vector<std::pair<std::string, std::string>> headers_;  // the coordinator token
  const redis::ConnectionOptions redis_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // guarded by rng_mu_
};

}  // namespace rsc::client
