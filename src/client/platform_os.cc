#include "client/platform_os.h"

#include <pthread.h>

#include <thread>

#include "client/reader_redis.h"
#include "redis/cluster.h"

namespace rsc::client {

namespace {

class OsThread : public Platform::Thread {
 public:
  OsThread(const char* name, std::function<void()> body) : thread_(std::move(body)) {
    pthread_setname_np(thread_.native_handle(), name);
  }
  ~OsThread() override {
    if (thread_.joinable()) thread_.join();
  }
  void Join() override {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

}  // namespace

OsPlatform::OsPlatform(std::vector<HttpEndpoint> endpoints, std::chrono::milliseconds http_timeout,
                       const std::string& token, redis::ConnectionOptions redis)
    : headers_(BearerHeaders(token)), redis_(std::move(redis)), rng_(std::random_device{}()) {
  for (HttpEndpoint& ep : endpoints) {
    transports_.push_back(std::make_unique<HttpTransport>(std::move(ep), http_timeout));
  }
}

double OsPlatform::Random() {
  std::lock_guard<std::mutex> lock(rng_mu_);
  return std::uniform_real_distribution<double>(0, 1)(rng_);
}

std::unique_ptr<Platform::Thread> OsPlatform::StartThread(const char* name,
                                                          std::function<void()> body) {
  return std::make_unique<OsThread>(name, std::move(body));
}

HttpOutcome OsPlatform::Request(const HttpCall& call) {
  HttpTransport& t = *transports_[static_cast<size_t>(call.endpoint)];
  const HttpReply reply = t.Request(call.method, call.target, call.body, headers_);
  return HttpOutcome{reply.status, reply.body, reply.error, t.endpoint().ToString()};
}

void OsPlatform::CloseRequests() {
  for (const std::unique_ptr<HttpTransport>& t : transports_) t->Close();
}

std::string OsPlatform::EndpointName(int endpoint) const {
  return transports_[static_cast<size_t>(endpoint)]->endpoint().ToString();
}

Result<std::unique_ptr<redis::Executor>> OsPlatform::OpenRedis() {
  return redis::OpenExecutor(redis_, redis::ClusterMode::kAuto, /*pool_size=*/1,
                             redis_.command_timeout);
}

std::unique_ptr<ReaderPort> OsPlatform::OpenReaders(ReaderPort::Answers answers) {
  auto port = std::make_unique<ReaderRedis>(redis_, [answers](uint64_t token, ReaderReply reply) {
    std::vector<ReaderAnswer> one;
    one.push_back(ReaderAnswer{token, std::move(reply)});
    answers(one);
  });
  port->SetBatchDone(std::move(answers));
  return port;
}

}  // namespace rsc::client
