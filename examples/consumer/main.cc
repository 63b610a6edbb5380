// Minimal consumer: joins a group, prints every message it is given, stops on Ctrl-C
// (clean shutdown: drain, acknowledge, leave). With a fifth argument it also serves its
// metrics (Prometheus text) on http://127.0.0.1:METRICS_PORT/metrics.
//   example_consumer COORDINATOR REDIS_URL STREAM GROUP [METRICS_PORT]
//   example_consumer 127.0.0.1:7400 redis://127.0.0.1:6379 orders billing 9464

#include <rsc/consumer.h>
#include <rsc/metrics.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s COORDINATOR REDIS_URL STREAM GROUP [METRICS_PORT]\n", argv[0]);
    return 2;
  }
  rsc::ConsumerOptions options;
  options.coordinator_endpoints = {argv[1]};
  options.redis_url = argv[2];
  options.stream = argv[3];
  options.group = argv[4];

  auto consumer = rsc::Consumer::Create(options, [](const rsc::Message& m) {
    std::printf("shard %d %s:", m.shard, m.id.c_str());
    for (const auto& [field, value] : m.fields) std::printf(" %s=%s", field.c_str(), value.c_str());
    std::printf("\n");
    return rsc::HandlerResult::Ok();  // acknowledged after this returns
  });
  if (!consumer.ok()) {
    std::fprintf(stderr, "create: %s\n", consumer.error().message.c_str());
    return 1;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before Start(): threads inherit the mask
  rsc::MetricsRegistry registry;               // declared before the server: it outlives it
  registry.Add(*consumer.value());
  std::unique_ptr<rsc::MetricsServer> metrics;
  if (argc > 5) {
    rsc::MetricsServerOptions o;
    o.port = static_cast<uint16_t>(std::atoi(argv[5]));
    std::string error;
    metrics = rsc::MetricsServer::Start(o, registry, &error);
    if (!metrics) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
  }
  consumer.value()->Start();
  int sig = 0;
  sigwait(&stop, &sig);
  consumer.value()->Stop();
  return 0;
}
