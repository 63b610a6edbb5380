// MetricsServer (include/rsc/metrics.h, SPEC O2): the optional /metrics listener, spoken to
// over real HTTP on loopback (run inside scripts/netns.sh, ENGINEERING §3).

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "rsc/metrics.h"
#include "support/http_client.h"

namespace rsc {
namespace {

using testing::HttpClient;
using testing::HttpResult;

constexpr const char* kText = "# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n";

// A source answering kText and counting its calls.
MetricsSource Counting(std::atomic<int>& calls) {
  return [&calls] {
    ++calls;
    return std::string(kText);
  };
}

std::unique_ptr<MetricsServer> StartOrFail(MetricsSource source, MetricsServerOptions o = {}) {
  std::string error;
  std::unique_ptr<MetricsServer> server = MetricsServer::Start(o, std::move(source), &error);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

TEST(MetricsServerTest, GetMetricsAnswersTheSourceTextWithThePrometheusContentType) {
  std::atomic<int> calls{0};
  auto server = StartOrFail(Counting(calls));
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->port(), 0);
  HttpClient http(server->port());
  HttpResult r = http.Get("/metrics");
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.body, kText);
  EXPECT_EQ(r.Header("content-type"), kMetricsContentType);
  // Keep-alive: the same connection serves the next scrape, query strings are ignored, and the
  // source is asked again each time (no caching).
  r = http.Get("/metrics?name[]=x_total");
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.body, kText);
  EXPECT_EQ(calls.load(), 2);
}

TEST(MetricsServerTest, OtherPathsAndMethodsAreRefused) {
  std::atomic<int> calls{0};
  auto server = StartOrFail(Counting(calls));
  ASSERT_NE(server, nullptr);
  HttpClient http(server->port());
  EXPECT_EQ(http.Get("/").status, 404);
  EXPECT_EQ(http.Get("/metricsx").status, 404);
  HttpResult r = http.Post("/metrics", "x");
  EXPECT_EQ(r.status, 405) << r.Describe();
  EXPECT_EQ(r.Header("allow"), "GET");
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(http.Get("/metrics").status, 200);  // the connection still serves
}

TEST(MetricsServerTest, AThrowingSourceIsAnswered500) {
  auto server = StartOrFail([]() -> std::string { throw std::runtime_error("boom"); });
  ASSERT_NE(server, nullptr);
  HttpClient http(server->port());
  HttpResult r = http.Get("/metrics");
  EXPECT_EQ(r.status, 500) << r.Describe();
  EXPECT_NE(r.body.find("boom"), std::string::npos) << r.body;
}

TEST(MetricsServerTest, RegistrySourceAndStop) {
  MetricsRegistry registry;  // empty: an empty page
  std::string error;
  auto server = MetricsServer::Start({}, registry, &error);
  ASSERT_NE(server, nullptr) << error;
  const uint16_t port = server->port();
  {
    HttpClient http(port);
    HttpResult r = http.Get("/metrics");
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_EQ(r.body, "");
  }
  server->Stop();
  server->Stop();  // idempotent
  HttpClient after(port, std::chrono::seconds(2));
  EXPECT_FALSE(after.Get("/metrics").transport_ok()) << "still listening after Stop()";
}

TEST(MetricsServerTest, BindFailuresAreReportedNotThrown) {
  auto first = StartOrFail([] { return std::string(); });
  ASSERT_NE(first, nullptr);
  std::string error;
  MetricsServerOptions same;
  same.port = first->port();
  EXPECT_EQ(MetricsServer::Start(
                same, [] { return std::string(); }, &error),
            nullptr);
  EXPECT_NE(error.find(std::to_string(first->port())), std::string::npos) << error;

  MetricsServerOptions bad_host;
  bad_host.host = "no-such-host.invalid";
  error.clear();
  EXPECT_EQ(MetricsServer::Start(
                bad_host, [] { return std::string(); }, &error),
            nullptr);
  EXPECT_NE(error.find("no-such-host.invalid"), std::string::npos) << error;
  EXPECT_EQ(MetricsServer::Start({}, MetricsSource(), nullptr), nullptr);
}

}  // namespace
}  // namespace rsc
