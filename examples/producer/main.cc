// Minimal producer: publishes N keyed messages to a stream's shards, routed by the stream
// (GET /v1/streams/{P}/routing, SPEC D4): no group is needed to publish.
//   example_producer COORDINATOR REDIS_URL STREAM [COUNT]
//   example_producer 127.0.0.1:7400 redis://127.0.0.1:6379 orders 100

#include <rsc/producer.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s COORDINATOR REDIS_URL STREAM [COUNT]\n", argv[0]);
    return 2;
  }
  rsc::ProducerOptions options;
  options.coordinator_endpoints = {argv[1]};
  options.redis_url = argv[2];
  options.stream = argv[3];
  const int count = argc > 4 ? std::atoi(argv[4]) : 10;

  auto producer = rsc::Producer::Create(options);
  if (!producer.ok()) {
    std::fprintf(stderr, "create: %s\n", producer.error().message.c_str());
    return 1;
  }
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    const std::string key = "customer-" + std::to_string(i % 7);
    auto id = producer.value()->Publish(key, {{"n", std::to_string(i)}});
    if (!id.ok()) {
      // Fails closed once the routing lease ended without a refresh (SPEC PR5).
      std::fprintf(stderr, "publish %d: %s\n", i, id.error().message.c_str());
      ++failed;
    }
  }
  producer.value()->Close();
  std::printf("published %d of %d\n", count - failed, count);
  return failed == 0 ? 0 : 1;
}
