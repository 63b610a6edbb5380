// reshard_timing: what a reshard costs the data plane (issue 12's measures, SPEC §13.2):
// the time from the reshard request to every child shard being read, with a backlog on the
// parents of 0, 10k and 100k messages; the publish failures producers report meanwhile (goal
// 0: a seal refusal is retried on the new generation inside the library, RS2); publish and
// delivery throughput during the reshard against the steady state just before.
//
//   scripts/netns.sh build/bench/reshard_timing [--backlogs 0,10000,100000] [--from 8]
//       [--to 16] [--consumers 4] [--seconds 120] [--coordinator PATH] [--json FILE]
//
// It starts its own redis-server (no persistence) and rsc-coordinator (ticks every 200 ms)
// on 127.0.0.1: run it inside scripts/netns.sh, the host loopback is throttled. Per backlog,
// a new stream of `from` shards with one group; `consumers` rsc::Consumers and one
// rsc::Producer (routed by the stream, D4) in this process. The producer publishes
// continuously (batches of 50 keyed messages, 1,000 keys) from one thread for the whole
// run. Steady state: 2 s with every shard read. Backlog: the handlers are held (they block,
// so the readers stop) until `backlog` more messages are published, then released, and the
// reshard is requested at once (POST /v1/streams/{P}/reshard, from → to shards). Reported,
// from the request: the new generation ACTIVE (parents sealed, one routing lease of 1 s +
// 1 s after the request: the routing-lease wait), every child read by a consumer (each parent
// read to its seal first, RS3), the old generation RETIRED; publish
// failures and the publish / delivery rates over the window from the request until every
// child is read, at least 2 s (as long as the steady window).
//
// Not a test (no pass/fail on timing); exit status 1 only when the setting broke (a process
// did not start, a state was not reached within --seconds).

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "support/processes.h"

#ifndef RSC_COORDINATOR_BINARY
#error "RSC_COORDINATOR_BINARY must be defined (bench/CMakeLists.txt)"
#endif

namespace {

namespace json = boost::json;
using rsc::bench::BenchClock;
using rsc::bench::Child;
using rsc::bench::Die;
using std::chrono::milliseconds;

struct Config {
  std::string backlogs = "0,10000,100000";
  int from = 8;
  int to = 16;
  int consumers = 4;
  int seconds = 120;
  std::string coordinator = RSC_COORDINATOR_BINARY;
  std::string json;
};

struct Setting {
  std::string dir;
  int coordinator_port = 0;
  std::string redis_url;
};

double SinceMs(BenchClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(BenchClock::now() - t0).count();
}

// Handlers that can be held (they block until released), counting deliveries.
class Gate {
 public:
  rsc::HandlerResult Handle(const rsc::Message&) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    delivered_.fetch_add(1, std::memory_order_relaxed);
    return rsc::HandlerResult::Ok();
  }
  void Set(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  int64_t delivered() const { return delivered_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  std::atomic<int64_t> delivered_{0};
};

// One thread publishing batches of 50 keyed messages as fast as the producer goes.
class Publisher {
 public:
  explicit Publisher(rsc::Producer* p) : producer_(p), thread_([this] { Run(); }) {}
  ~Publisher() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t ok() const { return ok_.load(); }
  int64_t failed() const { return failed_.load(); }
  std::string first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

 private:
  void Run() {
    int64_t n = 0;
    while (!stop_) {
      std::vector<rsc::ProducerMessage> batch;
      for (int i = 0; i < 50; ++i, ++n) {
        const std::string key = "k" + std::to_string(n % 1000);
        batch.push_back({key, {{"key", key}, {"n", std::to_string(n)}}});
      }
      for (const auto& r : producer_->PublishBatch(batch)) {
        if (r.ok()) {
          ok_.fetch_add(1);
          continue;
        }
        failed_.fetch_add(1);
        std::lock_guard<std::mutex> lock(mu_);
        if (first_error_.empty()) first_error_ = r.error().message;
      }
    }
  }

  rsc::Producer* producer_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0}, failed_{0};
  std::mutex mu_;
  std::string first_error_;
  std::thread thread_;
};

std::string Call(const Setting& s, const std::string& method, const std::string& path,
                 const std::string& body, int want) {
  std::string answer;
  const int status = rsc::bench::HttpCall(s.coordinator_port, method, path, body, &answer);
  if (status != want) Die(fmt::format("{} {}: HTTP {} {}", method, path, status, answer));
  return answer;
}

json::value StreamView(const Setting& s, const std::string& stream) {
  return json::parse(Call(s, "GET", "/v1/streams/" + stream, "", 200));
}

// State of `generation` in the stream view, and its shard ids.
std::string GenerationState(const json::value& view, int generation, std::set<int>* ids) {
  for (const json::value& g : view.at("generations").as_array()) {
    if (g.at("generation").to_number<int>() != generation) continue;
    if (ids) {
      for (const json::value& sh : g.at("shards").as_array())
        ids->insert(sh.at("id").to_number<int>());
    }
    return std::string(g.at("state").as_string());
  }
  return "absent";
}

std::set<int> Reading(const std::vector<std::unique_ptr<rsc::Consumer>>& consumers) {
  std::set<int> out;
  for (const auto& c : consumers) {
    for (int32_t s : c->Status().reading) out.insert(s);
  }
  return out;
}

// The stream's routing lease. A reshard seals its parents one routing lease + 1 s after the
// request (RS2's routing-lease wait, docs/protocol.md 7.5 step 1): the floor of every time
// measured from the request.
constexpr int64_t kRoutingLeaseMs = 1000;
constexpr int64_t kRoutingWaitMs = kRoutingLeaseMs + 1000;

json::object RunOne(const Setting& s, const Config& cfg, int64_t backlog, int index) {
  const std::string stream = fmt::format("resharded{}", index);
  Call(s, "POST", "/v1/groups",
       fmt::format(R"({{"stream":"{}","group":"g","shardCount":{},"config":{{)"
                   R"("heartbeatIntervalMs":200,"memberLeaseMs":3000,"assignmentLeaseMs":2000,)"
                   R"("rebalanceTimeoutMs":6000,"routingLeaseMs":{},"routingRefreshMs":250}}}})",
                   stream, cfg.from, kRoutingLeaseMs),
       201);
  const std::string endpoint = fmt::format("127.0.0.1:{}", s.coordinator_port);
  Gate gate;
  std::vector<std::unique_ptr<rsc::Consumer>> consumers;
  for (int i = 0; i < cfg.consumers; ++i) {
    rsc::ConsumerOptions o;
    o.coordinator_endpoints = {endpoint};
    o.stream = stream;
    o.group = "g";
    o.redis_url = s.redis_url;
    o.block = milliseconds(250);
    auto c = rsc::Consumer::Create(o, [&gate](const rsc::Message& m) { return gate.Handle(m); });
    if (!c.ok()) Die("consumer: " + c.error().message);
    consumers.push_back(std::move(c).value());
    consumers.back()->Start();
  }
  const milliseconds limit(cfg.seconds * 1000);
  if (!rsc::bench::WaitUntil(
          [&] { return static_cast<int>(Reading(consumers).size()) == cfg.from; }, limit)) {
    Die("the consumers never read every shard");
  }
  rsc::ProducerOptions po;
  po.coordinator_endpoints = {endpoint};
  po.stream = stream;  // no group: routed by the stream (D4)
  po.redis_url = s.redis_url;
  auto created = rsc::Producer::Create(po);
  if (!created.ok()) Die("producer: " + created.error().message);
  std::unique_ptr<rsc::Producer> producer = std::move(created).value();
  if (!producer->WaitForRouting(milliseconds(10000))) Die("producer: no routing");
  Publisher publisher(producer.get());

  // Steady state.
  rsc::bench::SleepMs(500);
  const auto steady0 = BenchClock::now();
  const int64_t pub0 = publisher.ok();
  const int64_t del0 = gate.delivered();
  rsc::bench::SleepMs(2000);
  const double steady_s = SinceMs(steady0) / 1000;
  const double steady_pub = (publisher.ok() - pub0) / steady_s;
  const double steady_del = (gate.delivered() - del0) / steady_s;

  // The backlog: handlers held until `backlog` more messages are published.
  if (backlog > 0) {
    gate.Set(false);
    const int64_t at = publisher.ok();
    if (!rsc::bench::WaitUntil([&] { return publisher.ok() - at >= backlog; }, limit)) {
      Die("the backlog was never published");
    }
    gate.Set(true);
  }
  const int64_t unread_at_request = publisher.ok() - gate.delivered();
  const int64_t revision = StreamView(s, stream).at("revision").to_number<int64_t>();
  const int64_t failed0 = publisher.failed();
  const int64_t seal_waits0 = producer->Metrics().seal_refresh_waits;
  const int64_t pub1 = publisher.ok();
  const int64_t del1 = gate.delivered();
  const auto t0 = BenchClock::now();
  Call(s, "POST", "/v1/streams/" + stream + "/reshard",
       fmt::format(R"({{"expectedLayoutRevision":{},"shardCount":{}}})", revision, cfg.to), 200);
  double active_ms = -1, children_ms = -1, retired_ms = -1;
  std::set<int> children;
  const bool done = rsc::bench::WaitUntil(
      [&] {
        const json::value view = StreamView(s, stream);
        if (active_ms < 0 && GenerationState(view, 1, nullptr) == "ACTIVE") active_ms = SinceMs(t0);
        if (children.empty()) GenerationState(view, 1, &children);
        if (children_ms < 0 && !children.empty() && Reading(consumers) == children) {
          children_ms = SinceMs(t0);
        }
        if (retired_ms < 0 && GenerationState(view, 0, nullptr) == "RETIRED")
          retired_ms = SinceMs(t0);
        return active_ms >= 0 && children_ms >= 0 && retired_ms >= 0;
      },
      limit);
  if (!done) {
    Die(
        fmt::format("reshard of {} not done within {} s (active {} ms, children read {} ms, "
                    "retired {} ms)",
                    stream, cfg.seconds, active_ms, children_ms, retired_ms));
  }
  // Throughput "during": from the request over at least as long as the steady window, so a
  // reshard is not judged on a handful of batches.
  const double window_ms = std::max(children_ms, 2000.0);
  rsc::bench::SleepMs(static_cast<int64_t>(std::max(0.0, window_ms - SinceMs(t0))));
  const double during_s = SinceMs(t0) / 1000;
  const double during_pub = (publisher.ok() - pub1) / during_s;
  const double during_del = (gate.delivered() - del1) / during_s;
  const int64_t failed = publisher.failed() - failed0;
  const int64_t seal_waits = producer->Metrics().seal_refresh_waits - seal_waits0;
  const std::string first_error = publisher.first_error();
  publisher.Stop();
  producer->Close();
  for (auto& c : consumers) c->Stop();
  return json::object{{"backlog", backlog},
                      {"unread_at_request", unread_at_request},
                      {"routing_wait_ms", kRoutingWaitMs},
                      {"active_ms", active_ms},
                      {"children_read_ms", children_ms},
                      {"retired_ms", retired_ms},
                      {"publish_failures", failed},
                      {"first_publish_error", first_error},
                      {"seal_refresh_waits", seal_waits},
                      {"window_s", during_s},
                      {"steady_publish_per_s", steady_pub},
                      {"during_publish_per_s", during_pub},
                      {"steady_delivered_per_s", steady_del},
                      {"during_delivered_per_s", during_del}};
}

}  // namespace

int main(int argc, char** argv) {
  rsc::bench::SetProgramName("reshard_timing");
  Config cfg;
  CLI::App app{"reshard_timing: a reshard's cost to producers and consumers"};
  app.add_option("--backlogs", cfg.backlogs, "unread messages on the parents at the request")
      ->capture_default_str();
  app.add_option("--from", cfg.from, "shards before")->capture_default_str();
  app.add_option("--to", cfg.to, "shards after")->capture_default_str();
  app.add_option("--consumers", cfg.consumers, "consumers (in this process)")
      ->capture_default_str();
  app.add_option("--seconds", cfg.seconds, "longest wait for any one state")->capture_default_str();
  app.add_option("--coordinator", cfg.coordinator, "rsc-coordinator binary")->capture_default_str();
  app.add_option("--json", cfg.json, "also write the figures to this file");
  CLI11_PARSE(app, argc, argv);
  if (cfg.from < 1 || cfg.to < 1 || cfg.consumers < 1) Die("need --from, --to, --consumers >= 1");
  ::signal(SIGPIPE, SIG_IGN);
  Setting s;
  s.dir =
      (std::filesystem::temp_directory_path() / fmt::format("rsc-reshard-{}", ::getpid())).string();
  std::filesystem::create_directories(s.dir);
  Child redis;
  const int redis_port = rsc::bench::StartRedis(redis, s.dir);
  s.redis_url = fmt::format("redis://127.0.0.1:{}", redis_port);
  Child coordinator;
  s.coordinator_port =
      rsc::bench::StartCoordinator(coordinator, cfg.coordinator, s.redis_url, s.dir, "coordinator");
  const std::string load_before = rsc::bench::LoadAverage();
  std::printf(
      "reshard timing: %d → %d shards, %d consumers, one producer routed by the stream, "
      "coordinator ticks every 200 ms; load average before: %s\n\n"
      "| backlog | unread at request | ACTIVE ms | children read ms | parents RETIRED ms | "
      "publish failures | seal waits | publish/s steady → request + 2 s | delivered/s steady → "
      "request + 2 s |\n|---|---|---|---|---|---|---|---|---|\n",
      cfg.from, cfg.to, cfg.consumers, load_before.c_str());
  json::array runs;
  int index = 0;
  for (int backlog : rsc::bench::ParseList(cfg.backlogs)) {
    json::object r = RunOne(s, cfg, backlog, index++);
    auto d = [&](const char* k) { return r.at(k).to_number<double>(); };
    std::printf(
        "| %d | %lld | %.0f | %.0f | %.0f | %lld | %lld | %.0f → %.0f (%.2f) | %.0f → %.0f "
        "(%.2f) |\n",
        backlog, static_cast<long long>(r.at("unread_at_request").as_int64()), d("active_ms"),
        d("children_read_ms"), d("retired_ms"),
        static_cast<long long>(r.at("publish_failures").as_int64()),
        static_cast<long long>(r.at("seal_refresh_waits").as_int64()), d("steady_publish_per_s"),
        d("during_publish_per_s"),
        d("during_publish_per_s") / std::max(1.0, d("steady_publish_per_s")),
        d("steady_delivered_per_s"), d("during_delivered_per_s"),
        d("during_delivered_per_s") / std::max(1.0, d("steady_delivered_per_s")));
    if (r.at("publish_failures").as_int64() > 0) {
      std::printf("  first publish error: %s\n", r.at("first_publish_error").as_string().c_str());
    }
    std::fflush(stdout);
    runs.push_back(std::move(r));
  }
  std::printf("\nload average after: %s\n", rsc::bench::LoadAverage().c_str());
  if (!cfg.json.empty()) {
    rsc::bench::WriteJson(cfg.json, json::object{{"benchmark", "reshard_timing"},
                                                 {"load_average_before", load_before},
                                                 {"from", cfg.from},
                                                 {"to", cfg.to},
                                                 {"runs", std::move(runs)}});
  }
  coordinator.Stop();
  redis.Stop();
  std::filesystem::remove_all(s.dir);
  return 0;
}
