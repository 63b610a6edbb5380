// End-to-end throughput of the client library (rsc::Producer → sharded Redis Streams →
// rsc::Consumer), next to raw hiredis XADD and XREADGROUP+XACK throughput measured in the
// same run on the same redis-server. Not a test: it prints tables. This machine is shared
// and noisy, so only the ratios within one run mean much.
//
//   scripts/netns.sh build/bench/e2e_throughput [--messages 50000] [--consumers 1,2,4]
//       [--shards 4,16] [--size 100] [--batch 1000] [--repeat 3] [--seconds 20]
//       [--coordinator PATH] [--resources 16,256,1024] [--cluster] [--reshard 0,10000,100000]
//       [--json FILE]
//
// --json FILE: the grid's rows (the tables below) also go to FILE as JSON (bench/run.sh).
//
// --reshard B1,B2,…: instead of the grid, resharding under load (issue 12's measures): per
// backlog B, a stream of 8 shards read by 2 consumers and a producer publishing
// continuously; after a 3 s steady window, B messages are published at once and the stream
// is resharded 8 → 16 right after. Reported: the backlog left at the request, the time from the
// request to every child shard being read (at least the stream's routing lease of 1 s + 1 s,
// the wait before the seal), publish failures callers saw (goal 0), and the
// producer's and consumers' rates in the 3 s from the request against the 3 s before.
//
// --cluster: instead of the grid, live end to end on one server and on a 3-master Redis
// Cluster started by the bench (same run, same machine), with the shards and the commands
// each master got (SPEC CL2).
//
// --resources M1,M2,…: instead of the grid, one consumer that owns all M shards of a group:
// the threads, Redis connections and memory it adds once every shard is read, and its live
// messages/s for K messages (the issue-10 footprint figures).
//
// The default grid takes about 30 s. --messages (K, per phase) and --repeat scale it;
// --seconds bounds the wait for any one phase (a phase that does not finish is reported).
//
// It starts its own redis-server (no persistence) and an rsc-coordinator process on it
// (the binary built next to this one, or --coordinator), both on 127.0.0.1: run it inside
// scripts/netns.sh, the host loopback is throttled. Producer and consumers run in-process.
//
// For every cell of the grid (N consumers × M shards), with K messages of ~`size` bytes
// (fields seq, t, padding) on keys key-0 … key-4095, routed as the library routes them:
//
//  baseline XADD        one hiredis connection; K XADDs onto the M streams in pipelines of
//                       `batch` commands (one round trip per pipeline).
//  baseline read+ack    N threads, each with its own connection and the streams s ≡ t
//                       (mod N): XREADGROUP COUNT 100 STREAMS <its streams> > …, then one
//                       pipelined XACK per stream per read, until the backlog is consumed.
//  library produce      rsc::Producer::PublishBatch of `batch` messages at a time (the
//                       library pipelines per shard: one round trip per shard per batch).
//  library consume      N rsc::Consumer (default options but block 250 ms), joined and
//                       settled (all shards assigned, balanced) before anything is
//                       published. Each shard's reader is parked in the handler on a "gate"
//                       message while the K messages are published, then released; the
//                       rate is K / (release → K-th distinct delivery): a backlog, like the
//                       baseline's reads.
//  live end-to-end      K more messages published while the consumers run: producer rate,
//                       consumer rate (first → last delivery), end-to-end rate (first
//                       publish → last delivery) and publish→delivery latency.
//
//  Redis's work        around the raw read+ack phase and the library's backlog and live
//                       phases, INFO commandstats and INFO cpu: commands per 1,000 messages
//                       (XADD, XREADGROUP, XACK, XPENDING, other), Redis CPU µs per message,
//                       and Redis busy (its CPU time / the phase's wall time): below 1 the
//                       phase was not bound by Redis but by its clients.
//
// Each cell repeats these `repeat` times, baseline and library back to back, and reports
// medians (the ratios are medians of the per-repetition ratios): short interleaved phases
// are less exposed to a neighbour's burst than one long phase each.
//
// The handler is trivial: it parses the seq field and marks it delivered (an atomic per
// message, so redeliveries are counted exactly).

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "rsc/routing.h"
#include "server/embedded_redis.h"  // PickFreePort
#include "support/processes.h"

#ifndef RSC_COORDINATOR_BINARY
#error "RSC_COORDINATOR_BINARY must be defined (bench/CMakeLists.txt)"
#endif

namespace {

using rsc::bench::Child;
using rsc::bench::Die;
using rsc::bench::HttpCall;
using rsc::bench::LoadAverage;
using rsc::bench::ParseList;
using rsc::bench::ReadFile;
using rsc::bench::WaitUntil;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// ── Redis helpers ───────────────────────────────────────────────────────────────────

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

Context Connect(int port) {
  Context c(redisConnect("127.0.0.1", port));
  if (!c || c->err) Die(fmt::format("cannot connect to redis on port {}", port));
  return c;
}

Reply Command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!r) Die(fmt::format("redis: {} failed: {}", args[0], c->errstr));
  return r;
}

void Append(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
}

Reply GetReply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) Die(fmt::format("redis: {}", c->errstr));
  return Reply(static_cast<redisReply*>(r));
}

// ── Minimal HTTP (group creation only) ──────────────────────────────────────────────

int HttpPost(int port, const std::string& path, const std::string& json) {
  return HttpCall(port, "POST", path, json);
}

// ── Messages ────────────────────────────────────────────────────────────────────────

constexpr int kKeys = 4096;

std::string KeyOf(int64_t seq) { return "key-" + std::to_string(seq % kKeys); }

// seq, t (publish time, steady ns) and padding up to `size` bytes of names and values.
rsc::StreamFields MakeFields(int64_t seq, size_t size) {
  rsc::StreamFields f{{"seq", std::to_string(seq)}, {"t", std::to_string(NowNs())}};
  size_t used = 0;
  for (const auto& [k, v] : f) used += k.size() + v.size();
  f.emplace_back("p", std::string(size > used + 1 ? size - used - 1 : 1, 'x'));
  return f;
}

int64_t ParseInt(std::string_view s) {
  int64_t v = -1;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// ── Delivery tracking (shared by every consumer of a cell) ──────────────────────────

// Deliveries of seq numbers [base, base + count).
class Phase {
 public:
  Phase(int64_t base, int64_t count)
      : base_(base),
        count_(count),
        seen_(std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(count))),
        latency_ns_(static_cast<size_t>(count), 0) {}

  bool Owns(int64_t seq) const { return seq >= base_ && seq < base_ + count_; }

  void Deliver(int64_t seq, int64_t published_ns) {
    const int64_t now = NowNs();
    if (deliveries_.fetch_add(1) == 0) first_ns_.store(now);
    const size_t i = static_cast<size_t>(seq - base_);
    if (seen_[i].exchange(1) != 0) return;  // a redelivery
    latency_ns_[i] = now - published_ns;    // written once, read after completion
    if (unique_.fetch_add(1) + 1 == count_) {
      done_ns_.store(now);
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }

  bool WaitDone(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return unique_.load() == count_; });
  }

  int64_t unique() const { return unique_.load(); }
  int64_t redeliveries() const { return deliveries_.load() - unique_.load(); }
  int64_t first_ns() const { return first_ns_.load(); }
  int64_t done_ns() const { return done_ns_.load(); }
  // Percentile of publish→delivery latency over the first deliveries (after completion).
  double LatencyMs(double p) const {
    std::vector<int64_t> v;
    for (size_t i = 0; i < latency_ns_.size(); ++i) {
      if (seen_[i].load() != 0) v.push_back(latency_ns_[i]);
    }
    if (v.empty()) return 0;
    const size_t at =
        std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
    return static_cast<double>(v[at]) / 1e6;
  }

 private:
  const int64_t base_;
  const int64_t count_;
  std::unique_ptr<std::atomic<uint8_t>[]> seen_;
  std::vector<int64_t> latency_ns_;
  std::atomic<int64_t> deliveries_{0};
  std::atomic<int64_t> unique_{0};
  std::atomic<int64_t> first_ns_{0};
  std::atomic<int64_t> done_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

// Parks each shard's reader on its gate message until Open().
class Gate {
 public:
  void Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  bool WaitForWaiting(int n, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return waiting_ >= n; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

// ── The grid ────────────────────────────────────────────────────────────────────────

struct Config {
  int64_t messages = 50000;
  std::vector<int> consumers = {1, 2, 4};
  std::vector<int> shards = {4, 16};
  size_t size = 100;
  int batch = 1000;
  int repeat = 3;       // repetitions per cell (medians reported)
  double seconds = 20;  // longest wait for any one phase
  std::string coordinator = RSC_COORDINATOR_BINARY;
  std::vector<int> resources;  // --resources: shard counts for the one-consumer footprint
  bool cluster = false;        // --cluster: one server vs a 3-master Redis Cluster
  std::vector<int> reshard;    // --reshard: backlogs for the resharding-under-load figures
  std::string json;            // --json: the grid's rows also go to this file (bench/run.sh)
};

// One cell's figures: medians over the repetitions (messages/s); the ratios are medians of
// the per-repetition ratios (library and baseline measured back to back).
struct Row {
  int n = 0, m = 0;
  double base_xadd = 0, base_read = 0;
  double lib_produce = 0, lib_consume = 0;
  double produce_ratio = 0, consume_ratio = 0;
  double live_produce = 0, live_consume = 0, live_e2e = 0;
  double live_ratio = 0;  // end-to-end / raw bound (see main)
  double p50_ms = 0, p99_ms = 0;
  int64_t redeliveries = 0;
  int64_t claimed = 0;
  // Redis's work per 1,000 messages (medians): the raw read+ack phase, the library's backlog
  // and live phases — where a ratio goes, in commands and in Redis CPU.
  struct Work {
    double xadd = 0, xreadgroup = 0, xack = 0, xpending = 0, other = 0, cpu_us_per_msg = 0;
    double busy = 0;  // Redis CPU time / wall time of the phase (1 = its one thread saturated)
  };
  Work raw_read_work, backlog_work, live_work;
  std::string note;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The raw end-to-end bound: producing and consuming share one single-threaded redis-server,
// so each message costs it the XADD time plus the XREADGROUP+XACK time.
double RawBound(double xadd, double read) {
  return xadd > 0 && read > 0 ? 1.0 / (1.0 / xadd + 1.0 / read) : 0;
}

double Rate(int64_t n, int64_t ns) { return ns > 0 ? static_cast<double>(n) / Seconds(ns) : 0; }

// Pipelined XADD of K messages onto M streams; returns entries per stream.
std::vector<int64_t> BaselineXadd(int port, const std::vector<std::string>& streams,
                                  const Config& cfg, double* rate) {
  Context c = Connect(port);
  const int32_t m = static_cast<int32_t>(streams.size());
  std::vector<int64_t> per_stream(streams.size(), 0);
  const int64_t t0 = NowNs();
  for (int64_t i = 0; i < cfg.messages; i += cfg.batch) {
    const int64_t end = std::min<int64_t>(cfg.messages, i + cfg.batch);
    for (int64_t seq = i; seq < end; ++seq) {
      const int32_t s = rsc::ShardForKey(KeyOf(seq), m);
      std::vector<std::string> args{"XADD", streams[static_cast<size_t>(s)], "*"};
      for (auto& [f, v] : MakeFields(seq, cfg.size)) args.insert(args.end(), {f, v});
      Append(c.get(), args);
      ++per_stream[static_cast<size_t>(s)];
    }
    for (int64_t seq = i; seq < end; ++seq) {
      Reply r = GetReply(c.get());
      if (r->type != REDIS_REPLY_STRING) Die("baseline XADD: unexpected reply");
    }
  }
  *rate = Rate(cfg.messages, NowNs() - t0);
  return per_stream;
}

// N threads of XREADGROUP + XACK over their own streams until the backlog is consumed.
double BaselineRead(int port, const std::vector<std::string>& streams,
                    const std::vector<int64_t>& per_stream, int n) {
  for (const std::string& s : streams) {
    Context c = Connect(port);
    Command(c.get(), {"XGROUP", "CREATE", s, "g", "0", "MKSTREAM"});
  }
  std::atomic<int64_t> handled{0};
  std::vector<std::thread> threads;
  const int64_t t0 = NowNs();
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      Context c = Connect(port);
      std::vector<std::string> mine;
      int64_t remaining = 0;
      for (size_t s = static_cast<size_t>(t); s < streams.size(); s += static_cast<size_t>(n)) {
        mine.push_back(streams[s]);
        remaining += per_stream[s];
      }
      std::vector<std::string> args{"XREADGROUP", "GROUP", "g",      fmt::format("c{}", t),
                                    "COUNT",      "100",   "STREAMS"};
      args.insert(args.end(), mine.begin(), mine.end());
      for (size_t i = 0; i < mine.size(); ++i) args.push_back(">");
      while (remaining > 0) {
        Reply r = Command(c.get(), args);
        if (r->type != REDIS_REPLY_ARRAY) continue;  // nil: nothing (cannot happen: backlog)
        int acks = 0;
        for (size_t i = 0; i < r->elements; ++i) {
          const redisReply* stream = r->element[i];
          const redisReply* entries = stream->element[1];
          if (entries->elements == 0) continue;
          std::vector<std::string> ack{"XACK", std::string(stream->element[0]->str), "g"};
          for (size_t e = 0; e < entries->elements; ++e) {
            const redisReply* entry = entries->element[e];
            ack.emplace_back(entry->element[0]->str, entry->element[0]->len);
            // What the library's trivial handler does with each message: read its seq.
            const redisReply* f = entry->element[1];
            if (ParseInt(std::string_view(f->element[1]->str, f->element[1]->len)) < 0) {
              Die("baseline read: bad seq");
            }
          }
          remaining -= static_cast<int64_t>(entries->elements);
          handled.fetch_add(static_cast<int64_t>(entries->elements));
          Append(c.get(), ack);
          ++acks;
        }
        for (int i = 0; i < acks; ++i) GetReply(c.get());
      }
    });
  }
  for (auto& th : threads) th.join();
  return Rate(handled.load(), NowNs() - t0);
}

bool Settled(const std::vector<std::unique_ptr<rsc::Consumer>>& consumers, int shards) {
  std::vector<int> seen(static_cast<size_t>(shards), 0);
  size_t lo = SIZE_MAX, hi = 0;
  for (const auto& c : consumers) {
    const rsc::ConsumerStatus st = c->Status();
    if (st.phase != "member" || !st.draining.empty() || !st.revoked.empty()) return false;
    for (int32_t s : st.reading) ++seen[static_cast<size_t>(s)];
    lo = std::min(lo, st.reading.size());
    hi = std::max(hi, st.reading.size());
  }
  return hi - lo <= 1 && std::all_of(seen.begin(), seen.end(), [](int x) { return x == 1; });
}

// Publishes seq [base, base + K) in batches; returns false on any failed publish.
bool PublishAll(rsc::Producer& producer, int64_t base, const Config& cfg, std::string* error) {
  for (int64_t i = 0; i < cfg.messages; i += cfg.batch) {
    const int64_t end = std::min<int64_t>(cfg.messages, i + cfg.batch);
    std::vector<rsc::ProducerMessage> batch;
    batch.reserve(static_cast<size_t>(end - i));
    for (int64_t seq = base + i; seq < base + end; ++seq) {
      batch.push_back({KeyOf(seq), MakeFields(seq, cfg.size)});
    }
    for (const auto& r : producer.PublishBatch(batch)) {
      if (!r.ok()) {
        *error = std::string(rsc::ProducerErrorCodeName(r.error().code)) + ": " + r.error().message;
        return false;
      }
    }
  }
  return true;
}

// A producer of group g of `stream`, with its routing.
std::unique_ptr<rsc::Producer> StartProducer(const std::string& endpoint, const std::string& stream,
                                             const std::string& redis_url, milliseconds limit) {
  rsc::ProducerOptions po;
  po.coordinator_endpoints = {endpoint};
  po.stream = stream;
  po.group = "g";
  po.redis_url = redis_url;
  auto created_producer = rsc::Producer::Create(po);
  if (!created_producer.ok()) Die(created_producer.error().message);
  std::unique_ptr<rsc::Producer> producer = std::move(created_producer).value();
  if (!producer->WaitForRouting(limit)) Die("producer: no routing");
  return producer;
}

// Group g of `stream` with m shards and the bench's leases (`routing_lease_ms`: a reshard
// seals its parents one routing lease + 1 s after the request, protocol 7.5 step 1).
void CreateGroup(int coordinator_port, const std::string& stream, int m,
                 int64_t routing_lease_ms = 10000) {
  const int created = HttpPost(
      coordinator_port, "/v1/groups",
      fmt::format(R"({{"stream":"{}","group":"g","shardCount":{},"config":{{)"
                  R"("heartbeatIntervalMs":250,"memberLeaseMs":5000,"assignmentLeaseMs":4000,)"
                  R"("rebalanceTimeoutMs":10000,"routingLeaseMs":{},"routingRefreshMs":{}}}}})",
                  stream, m, routing_lease_ms, std::min<int64_t>(1000, routing_lease_ms / 4)));
  if (created != 201) Die(fmt::format("creating group {}/g: HTTP {}", stream, created));
}

// n started consumers of group g of `stream`.
std::vector<std::unique_ptr<rsc::Consumer>> StartConsumers(const std::string& endpoint,
                                                           const std::string& stream,
                                                           const std::string& redis_url, int n,
                                                           const rsc::MessageHandler& handler) {
  std::vector<std::unique_ptr<rsc::Consumer>> consumers;
  for (int i = 0; i < n; ++i) {
    rsc::ConsumerOptions o;
    o.coordinator_endpoints = {endpoint};
    o.stream = stream;
    o.group = "g";
    o.redis_url = redis_url;
    o.block = milliseconds(250);  // only bounds idle reads (and how long a drain waits)
    auto c = rsc::Consumer::Create(o, handler);
    if (!c.ok()) Die(c.error().message);
    consumers.push_back(std::move(c).value());
    consumers.back()->Start();
  }
  return consumers;
}

// Stops them in parallel (each Stop drains and leaves).
void StopAll(std::vector<std::unique_ptr<rsc::Consumer>>& consumers) {
  std::vector<std::thread> stops;
  for (auto& c : consumers) stops.emplace_back([&c] { c->Stop(); });
  for (auto& th : stops) th.join();
}

// Redis's command counts and CPU time (INFO commandstats, INFO cpu), for the work a phase
// made Redis do. The coordinator's calls (heartbeats, ticks) are in `other`.
struct RedisCounters {
  std::map<std::string, int64_t> calls;
  double cpu_s = 0;
  int64_t at_ns = 0;
};

RedisCounters SnapshotRedis(int port) {
  Context c = Connect(port);
  RedisCounters out;
  out.at_ns = NowNs();
  for (const char* section : {"commandstats", "cpu"}) {
    Reply r = Command(c.get(), {"INFO", section});
    if (r->type != REDIS_REPLY_STRING) Die("INFO: unexpected reply");
    std::istringstream in(std::string(r->str, r->len));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("cmdstat_", 0) == 0) {
        const size_t colon = line.find(':');
        const size_t calls = line.find("calls=");
        if (colon == std::string::npos || calls == std::string::npos) continue;
        out.calls[line.substr(8, colon - 8)] =
            ParseInt(line.substr(calls + 6, line.find(',') - calls - 6));
      } else if (line.rfind("used_cpu_sys:", 0) == 0 || line.rfind("used_cpu_user:", 0) == 0) {
        out.cpu_s += std::stod(line.substr(line.find(':') + 1));
      }
    }
  }
  return out;
}

Row::Work WorkPerThousand(const RedisCounters& a, const RedisCounters& b, int64_t messages) {
  Row::Work w;
  const double per = messages > 0 ? 1000.0 / static_cast<double>(messages) : 0;
  for (const auto& [cmd, calls] : b.calls) {
    auto it = a.calls.find(cmd);
    const double d = static_cast<double>(calls - (it == a.calls.end() ? 0 : it->second)) * per;
    if (cmd == "xadd") {
      w.xadd = d;
    } else if (cmd == "xreadgroup") {
      w.xreadgroup = d;
    } else if (cmd == "xack") {
      w.xack = d;
    } else if (cmd == "xpending") {
      w.xpending = d;
    } else if (cmd != "info") {
      w.other += d;
    }
  }
  w.cpu_us_per_msg = messages > 0 ? (b.cpu_s - a.cpu_s) * 1e6 / static_cast<double>(messages) : 0;
  w.busy = b.at_ns > a.at_ns ? (b.cpu_s - a.cpu_s) / Seconds(b.at_ns - a.at_ns) : 0;
  return w;
}

Row::Work MedianWork(const std::vector<Row::Work>& v) {
  std::vector<double> x, r, a, p, o, c, b;
  for (const Row::Work& w : v) {
    x.push_back(w.xadd);
    b.push_back(w.busy);
    r.push_back(w.xreadgroup);
    a.push_back(w.xack);
    p.push_back(w.xpending);
    o.push_back(w.other);
    c.push_back(w.cpu_us_per_msg);
  }
  return {Median(x), Median(r), Median(a), Median(p), Median(o), Median(c), Median(b)};
}

Row RunCell(int redis_port, int coordinator_port, int n, int m, const Config& cfg) {
  Row row;
  row.n = n;
  row.m = m;
  const std::string cell = fmt::format("c{}x{}", n, m);
  const milliseconds limit(static_cast<int64_t>(cfg.seconds * 1000));
  const int64_t k = cfg.messages;

  // ── Library set-up: group, consumers (settled), producer ──
  const std::string stream = "e2e-" + cell;
  CreateGroup(coordinator_port, stream, m);
  const std::string endpoint = fmt::format("127.0.0.1:{}", coordinator_port);
  const std::string redis_url = fmt::format("redis://127.0.0.1:{}", redis_port);

  // Repetition r uses seq [2rK, (2r+1)K) for its backlog and [(2r+1)K, (2r+2)K) live.
  std::vector<std::unique_ptr<Phase>> phases;
  std::vector<std::unique_ptr<Gate>> gates;
  for (int r = 0; r < cfg.repeat; ++r) {
    phases.push_back(std::make_unique<Phase>(2 * r * k, k));
    phases.push_back(std::make_unique<Phase>((2 * r + 1) * k, k));
    gates.push_back(std::make_unique<Gate>());
  }
  auto handler = [&](const rsc::Message& msg) {
    std::string_view seq_text, t_text;
    for (const auto& [f, v] : msg.fields) {
      if (f == "seq") seq_text = v;
      if (f == "t") t_text = v;
    }
    if (seq_text == "gate") {
      gates[static_cast<size_t>(ParseInt(msg.fields.at(1).second))]->Enter();  // "r"
      return rsc::HandlerResult::Ok();
    }
    const int64_t seq = ParseInt(seq_text);
    if (seq < 0 || seq / k >= static_cast<int64_t>(phases.size())) {
      return rsc::HandlerResult::Fail("unknown seq");
    }
    phases[static_cast<size_t>(seq / k)]->Deliver(seq, ParseInt(t_text));
    return rsc::HandlerResult::Ok();
  };
  std::vector<std::unique_ptr<rsc::Consumer>> consumers =
      StartConsumers(endpoint, stream, redis_url, n, handler);
  std::unique_ptr<rsc::Producer> producer = StartProducer(endpoint, stream, redis_url, limit);
  if (!WaitUntil([&] { return Settled(consumers, m); }, limit)) {
    Die(fmt::format("{} consumers did not settle on {} shards", n, m));
  }

  std::vector<double> base_xadd, base_read, lib_produce, lib_consume, produce_ratio, consume_ratio,
      live_produce, live_consume, live_e2e, live_ratio, p50, p99;
  std::vector<Row::Work> raw_read_work, backlog_work, live_work;
  for (int r = 0; r < cfg.repeat; ++r) {
    // ── Baseline, on streams of its own ──
    std::vector<std::string> base_streams;
    for (int s = 0; s < m; ++s) {
      base_streams.push_back(fmt::format("{{base-{}-{}:{}}}", cell, r, s));
    }
    double xadd = 0;
    const std::vector<int64_t> per_stream = BaselineXadd(redis_port, base_streams, cfg, &xadd);
    const RedisCounters before_read = SnapshotRedis(redis_port);
    const double read = BaselineRead(redis_port, base_streams, per_stream, n);
    raw_read_work.push_back(WorkPerThousand(before_read, SnapshotRedis(redis_port), k));
    {
      Context c = Connect(redis_port);
      for (const std::string& s : base_streams) Command(c.get(), {"DEL", s});
    }
    base_xadd.push_back(xadd);
    base_read.push_back(read);

    // ── Library backlog: park every shard's reader on a gate message, publish, release ──
    Gate& gate = *gates[static_cast<size_t>(r)];
    Phase& backlog = *phases[static_cast<size_t>(2 * r)];
    Phase& live = *phases[static_cast<size_t>(2 * r + 1)];
    for (int32_t s = 0; s < m; ++s) {
      std::string key;
      for (int i = 0; key.empty(); ++i) {
        const std::string candidate = fmt::format("gate-{}", i);
        if (rsc::ShardForKey(candidate, m) == s) key = candidate;
      }
      if (!producer->Publish(key, {{"seq", "gate"}, {"r", std::to_string(r)}}).ok()) {
        Die("publishing a gate message");
      }
    }
    if (!gate.WaitForWaiting(m, limit)) Die("not every shard reached its gate");
    std::string error;
    int64_t t0 = NowNs();
    if (!PublishAll(*producer, 2 * r * k, cfg, &error)) Die("publish: " + error);
    lib_produce.push_back(Rate(k, NowNs() - t0));
    produce_ratio.push_back(lib_produce.back() / xadd);
    const RedisCounters before_backlog = SnapshotRedis(redis_port);
    t0 = NowNs();
    gate.Open();
    if (backlog.WaitDone(limit)) {
      backlog_work.push_back(WorkPerThousand(before_backlog, SnapshotRedis(redis_port), k));
      lib_consume.push_back(Rate(k, backlog.done_ns() - t0));
      consume_ratio.push_back(lib_consume.back() / read);
    } else {
      row.note +=
          fmt::format(" backlog {}: {}/{} delivered in {} s;", r, backlog.unique(), k, cfg.seconds);
    }

    // ── Library live: publish while the consumers run ──
    const RedisCounters before_live = SnapshotRedis(redis_port);
    t0 = NowNs();
    if (!PublishAll(*producer, (2 * r + 1) * k, cfg, &error)) Die("publish: " + error);
    live_produce.push_back(Rate(k, NowNs() - t0));
    if (live.WaitDone(limit)) {
      live_work.push_back(WorkPerThousand(before_live, SnapshotRedis(redis_port), k));
      live_e2e.push_back(Rate(k, live.done_ns() - t0));
      live_consume.push_back(Rate(k, live.done_ns() - live.first_ns()));
      live_ratio.push_back(live_e2e.back() / RawBound(xadd, read));
      p50.push_back(live.LatencyMs(0.50));
      p99.push_back(live.LatencyMs(0.99));
    } else {
      row.note +=
          fmt::format(" live {}: {}/{} delivered in {} s;", r, live.unique(), k, cfg.seconds);
    }
  }

  // Leave in parallel (each Stop drains and leaves), then count what arrived twice.
  producer->Close();
  StopAll(consumers);
  for (auto& c : consumers) row.claimed += c->Status().messages_claimed;
  for (const auto& phase : phases) row.redeliveries += phase->redeliveries();
  consumers.clear();
  {
    Context c = Connect(redis_port);
    for (int s = 0; s < m; ++s) Command(c.get(), {"DEL", fmt::format("{{{}:{}}}", stream, s)});
  }
  row.base_xadd = Median(base_xadd);
  row.base_read = Median(base_read);
  row.lib_produce = Median(lib_produce);
  row.lib_consume = Median(lib_consume);
  row.produce_ratio = Median(produce_ratio);
  row.consume_ratio = Median(consume_ratio);
  row.live_produce = Median(live_produce);
  row.live_consume = Median(live_consume);
  row.live_e2e = Median(live_e2e);
  row.live_ratio = Median(live_ratio);
  row.p50_ms = Median(p50);
  row.p99_ms = Median(p99);
  row.raw_read_work = MedianWork(raw_read_work);
  row.backlog_work = MedianWork(backlog_work);
  row.live_work = MedianWork(live_work);
  return row;
}

// ── One server vs a 3-master Redis Cluster (--cluster) ─────────────────────────────

// Live end to end on one group: n consumers, m shards, K messages published while they run,
// `repeat` times. Fills rate (first publish -> last delivery, median) and p50 latency.
struct LiveFigures {
  double e2e = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

LiveFigures LiveRun(int coordinator_port, const std::string& redis_url, const std::string& stream,
                    int n, int m, const Config& cfg) {
  const milliseconds limit(static_cast<int64_t>(cfg.seconds * 1000));
  const int64_t k = cfg.messages;
  CreateGroup(coordinator_port, stream, m);
  const std::string endpoint = fmt::format("127.0.0.1:{}", coordinator_port);
  std::vector<std::unique_ptr<Phase>> phases;
  for (int r = 0; r < cfg.repeat; ++r) phases.push_back(std::make_unique<Phase>(r * k, k));
  auto handler = [&](const rsc::Message& msg) {
    int64_t seq = -1, t = 0;
    for (const auto& [f, v] : msg.fields) {
      if (f == "seq") seq = ParseInt(v);
      if (f == "t") t = ParseInt(v);
    }
    if (seq < 0 || seq / k >= static_cast<int64_t>(phases.size())) {
      return rsc::HandlerResult::Fail("unknown seq");
    }
    phases[static_cast<size_t>(seq / k)]->Deliver(seq, t);
    return rsc::HandlerResult::Ok();
  };
  std::vector<std::unique_ptr<rsc::Consumer>> consumers =
      StartConsumers(endpoint, stream, redis_url, n, handler);
  std::unique_ptr<rsc::Producer> producer = StartProducer(endpoint, stream, redis_url, limit);
  if (!WaitUntil([&] { return Settled(consumers, m); }, limit)) {
    Die(fmt::format("{} consumers did not settle on {} shards ({})", n, m, redis_url));
  }
  std::vector<double> e2e, p50, p99;
  for (int r = 0; r < cfg.repeat; ++r) {
    Phase& live = *phases[static_cast<size_t>(r)];
    std::string error;
    const int64_t t0 = NowNs();
    if (!PublishAll(*producer, r * k, cfg, &error)) Die("publish: " + error);
    if (!live.WaitDone(limit)) {
      Die(fmt::format("{}: {}/{} delivered in {} s", stream, live.unique(), k, cfg.seconds));
    }
    e2e.push_back(Rate(k, live.done_ns() - t0));
    p50.push_back(live.LatencyMs(0.50));
    p99.push_back(live.LatencyMs(0.99));
  }
  producer->Close();
  StopAll(consumers);
  return {Median(e2e), Median(p50), Median(p99)};
}

// total_commands_processed of the server on `port`.
int64_t CommandsProcessed(int port) {
  Context c = Connect(port);
  Reply r = Command(c.get(), {"INFO", "stats"});
  if (r->type != REDIS_REPLY_STRING) Die("INFO stats: unexpected reply");
  const std::string info(r->str, r->len);
  const size_t at = info.find("total_commands_processed:");
  return at == std::string::npos ? 0
                                 : ParseInt(info.substr(at + 25, info.find('\r', at) - at - 25));
}

// Which of `ports` serves `key` (asked of each: the one that does not answer MOVED).
size_t MasterOf(const std::vector<int>& ports, const std::string& key) {
  for (size_t i = 0; i < ports.size(); ++i) {
    Context c = Connect(ports[i]);
    Reply r = Command(c.get(), {"TYPE", key});
    if (r->type != REDIS_REPLY_ERROR) return i;
  }
  return ports.size();
}

// Starts three cluster-enabled redis-servers and joins them as three masters.
std::vector<int> StartCluster(std::vector<std::unique_ptr<Child>>* nodes, const std::string& dir) {
  std::vector<int> ports;
  std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
  for (int i = 0; i < 3; ++i) {
    auto port = rsc::PickFreePort();
    if (!port.ok()) Die(port.error().message);
    const std::string node_dir = fmt::format("{}/cluster-{}", dir, *port);
    std::filesystem::create_directories(node_dir);
    nodes->push_back(std::make_unique<Child>());
    nodes->back()->Spawn(
        {"redis-server", "--port", std::to_string(*port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", node_dir, "--daemonize", "no", "--cluster-enabled", "yes",
         "--cluster-config-file", node_dir + "/nodes.conf", "--cluster-node-timeout", "2000"},
        node_dir + "/redis.log");
    ports.push_back(*port);
    create.push_back(fmt::format("127.0.0.1:{}", *port));
  }
  for (int port : ports) {
    if (!WaitUntil(
            [&] {
              Context c(redisConnect("127.0.0.1", port));
              return c && !c->err;
            },
            milliseconds(10000))) {
      Die(fmt::format("cluster node {} did not start", port));
    }
  }
  create.push_back("--cluster-yes");
  Child cli;
  cli.Spawn(create, dir + "/cluster-create.log");
  if (!WaitUntil([&] { return cli.Exited(); }, milliseconds(60000))) {
    Die("redis-cli --cluster create hung: " + ReadFile(dir + "/cluster-create.log"));
  }
  for (int port : ports) {
    if (!WaitUntil(
            [&] {
              Context c = Connect(port);
              Reply r = Command(c.get(), {"CLUSTER", "INFO"});
              return r->type == REDIS_REPLY_STRING &&
                     std::string_view(r->str, r->len).find("cluster_state:ok") !=
                         std::string_view::npos;
            },
            milliseconds(20000))) {
      Die("the cluster did not reach cluster_state:ok: " + ReadFile(dir + "/cluster-create.log"));
    }
  }
  return ports;
}

}  // namespace

// ── One consumer's footprint (--resources) ──────────────────────────────────────────
// Only /proc and Redis INFO, no library status field, so the same code measures any
// version of the library.

int ThreadCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    ++n;
  }
  return n;
}

int64_t RssKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

int64_t ConnectedClients(int redis_port) {
  Context c = Connect(redis_port);
  Reply r = Command(c.get(), {"INFO", "clients"});
  const std::string info(r->str, r->len);
  const size_t at = info.find("connected_clients:");
  return at == std::string::npos ? -1 : std::atoll(info.c_str() + at + 18) - 1;  // minus us
}

struct Footprint {
  int m = 0;
  int threads = 0;
  int64_t connections = 0;
  int64_t rss_kb = 0;
  double settle_s = 0;
  double rate = 0;  // live messages/s (first publish → last delivery)
  double stop_s = 0;
};

Footprint MeasureFootprint(int redis_port, int coordinator_port, int m, const Config& cfg) {
  Footprint f;
  f.m = m;
  const milliseconds limit(static_cast<int64_t>(cfg.seconds * 1000));
  const std::string stream = fmt::format("res-{}", m);
  const int created = HttpPost(
      coordinator_port, "/v1/groups",
      fmt::format(R"({{"stream":"{}","group":"g","shardCount":{},"config":{{)"
                  R"("heartbeatIntervalMs":500,"memberLeaseMs":10000,"assignmentLeaseMs":8000,)"
                  R"("rebalanceTimeoutMs":20000}}}})",
                  stream, m));
  if (created != 201) Die(fmt::format("creating group {}/g: HTTP {}", stream, created));
  const std::string endpoint = fmt::format("127.0.0.1:{}", coordinator_port);
  const std::string redis_url = fmt::format("redis://127.0.0.1:{}", redis_port);
  Phase phase(0, cfg.messages);
  auto handler = [&](const rsc::Message& msg) {
    std::string_view seq_text, t_text;
    for (const auto& [field, v] : msg.fields) {
      if (field == "seq") seq_text = v;
      if (field == "t") t_text = v;
    }
    phase.Deliver(ParseInt(seq_text), ParseInt(t_text));
    return rsc::HandlerResult::Ok();
  };
  const int threads0 = ThreadCount();
  const int64_t clients0 = ConnectedClients(redis_port);
  const int64_t rss0 = RssKb();
  rsc::ConsumerOptions o;
  o.coordinator_endpoints = {endpoint};
  o.stream = stream;
  o.group = "g";
  o.redis_url = redis_url;
  o.block = milliseconds(250);
  auto c = rsc::Consumer::Create(o, handler);
  if (!c.ok()) Die(c.error().message);
  std::vector<std::unique_ptr<rsc::Consumer>> consumers;
  consumers.push_back(std::move(c).value());
  const auto t0 = Clock::now();
  consumers[0]->Start();
  if (!WaitUntil([&] { return Settled(consumers, m); }, limit)) {
    Die(fmt::format("one consumer did not settle on {} shards", m));
  }
  f.settle_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // Every reader has reached its blocking live read: what the consumer holds while idle.
  WaitUntil([&] { return false; }, milliseconds(1000));
  f.threads = ThreadCount() - threads0;
  f.connections = ConnectedClients(redis_port) - clients0;
  f.rss_kb = RssKb() - rss0;

  std::unique_ptr<rsc::Producer> producer = StartProducer(endpoint, stream, redis_url, limit);
  const int64_t p0 = NowNs();
  std::string error;
  if (!PublishAll(*producer, 0, cfg, &error)) Die("publish: " + error);
  if (!phase.WaitDone(limit)) {
    Die(fmt::format("{} shards: {} of {} delivered", m, phase.unique(), cfg.messages));
  }
  f.rate = Rate(cfg.messages, phase.done_ns() - p0);
  const auto s0 = Clock::now();
  consumers[0]->Stop();
  f.stop_s = std::chrono::duration<double>(Clock::now() - s0).count();
  return f;
}

void RunFootprints(int redis_port, int coordinator_port, const Config& cfg) {
  std::vector<Footprint> rows;
  for (int m : cfg.resources) {
    rows.push_back(MeasureFootprint(redis_port, coordinator_port, m, cfg));
    std::fprintf(stderr, "  done: footprint at %d shards\n", m);
  }
  std::printf(
      "One consumer owning every shard: what it adds while idle (threads, Redis connections, "
      "RSS), time to read every shard, live messages/s for K=%lld messages (publish -> last "
      "delivery), time to Stop()\n\n"
      "| M shards | threads | Redis connections | RSS MiB | settle s | messages/s | stop s |\n"
      "|---|---|---|---|---|---|---|\n",
      static_cast<long long>(cfg.messages));
  for (const Footprint& f : rows) {
    std::printf("| %d | %d | %lld | %.1f | %.2f | %.0f | %.2f |\n", f.m, f.threads,
                static_cast<long long>(f.connections), static_cast<double>(f.rss_kb) / 1024.0,
                f.settle_s, f.rate, f.stop_s);
  }
}

// ── Resharding under load (--reshard) ─────────────────────────────────────────────────

struct ReshardFigures {
  int64_t backlog_at_request = 0;
  double children_read_s = -1;  // request → every child shard read by a consumer
  int64_t publish_failures = 0;
  double publish_steady = 0, publish_during = 0;  // acknowledged publishes/s
  double deliver_steady = 0, deliver_during = 0;  // distinct deliveries/s
};

// A generation's shard ids, from the stream view's JSON (the layout's generations).
std::vector<int32_t> ShardIdsOf(const std::string& view, int generation) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(view, ec);
  std::vector<int32_t> ids;
  if (ec || !v.is_object() || !v.as_object().contains("generations")) return ids;
  for (const auto& g : v.at("generations").as_array()) {
    if (g.at("generation").to_number<int64_t>() != generation) continue;
    for (const auto& s : g.at("shards").as_array()) {
      ids.push_back(static_cast<int32_t>(s.at("id").to_number<int64_t>()));
    }
  }
  return ids;
}

// The stream keys of `generation` in a stream view (the coordinator chooses them, D2).
std::vector<std::string> ShardKeysOf(const std::string& view, int generation) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(view, ec);
  std::vector<std::string> keys;
  if (ec || !v.is_object() || !v.as_object().contains("generations")) return keys;
  for (const auto& g : v.at("generations").as_array()) {
    if (g.at("generation").to_number<int64_t>() != generation) continue;
    for (const auto& s : g.at("shards").as_array()) {
      keys.emplace_back(s.at("stream").as_string());
    }
  }
  return keys;
}

ReshardFigures ReshardRun(int coordinator_port, const std::string& redis_url, int64_t backlog,
                          const Config& cfg) {
  constexpr int kConsumers = 2, kFrom = 8, kTo = 16;
  constexpr int64_t kLiveCap = 4'000'000;  // seqs of the live producer start here
  const milliseconds limit(static_cast<int64_t>(cfg.seconds * 1000));
  const std::string stream = fmt::format("reshard-{}", backlog);
  const std::string endpoint = fmt::format("127.0.0.1:{}", coordinator_port);
  CreateGroup(coordinator_port, stream, kFrom, /*routing_lease_ms=*/1000);
  std::unique_ptr<rsc::Producer> producer = StartProducer(endpoint, stream, redis_url, limit);
  std::unique_ptr<rsc::Producer> filler = StartProducer(endpoint, stream, redis_url, limit);

  // Seqs [0, backlog) are the backlog, published right before the request; the live load's
  // start at `backlog`.
  std::vector<std::atomic<uint8_t>> seen(static_cast<size_t>(backlog + kLiveCap));
  std::atomic<int64_t> unique{0}, backlog_read{0};
  auto handler = [&](const rsc::Message& msg) {
    for (const auto& [f, v] : msg.fields) {
      if (f != "seq") continue;
      const int64_t seq = ParseInt(v);
      if (seq >= 0 && seq < static_cast<int64_t>(seen.size()) &&
          seen[static_cast<size_t>(seq)].exchange(1) == 0) {
        unique.fetch_add(1);
        if (seq < backlog) backlog_read.fetch_add(1);
      }
    }
    return rsc::HandlerResult::Ok();
  };
  std::vector<std::unique_ptr<rsc::Consumer>> consumers =
      StartConsumers(endpoint, stream, redis_url, kConsumers, handler);
  auto reading = [&] {
    std::set<int32_t> ids;
    for (const auto& c : consumers) {
      const rsc::ConsumerStatus st = c->Status();
      ids.insert(st.reading.begin(), st.reading.end());
    }
    return ids;
  };
  if (!WaitUntil([&] { return reading().size() == kFrom; }, limit)) {
    Die(fmt::format("{}: the consumers did not read the {} shards", stream, kFrom));
  }

  // The live load: batches of 50 every 5 ms (about 10,000 messages/s offered).
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acked{0}, failed{0};
  std::thread load([&] {
    int64_t seq = backlog;
    while (!stop.load()) {
      std::vector<rsc::ProducerMessage> batch;
      for (int i = 0; i < 50 && seq < backlog + kLiveCap; ++i, ++seq) {
        batch.push_back({KeyOf(seq), MakeFields(seq, cfg.size)});
      }
      for (const auto& r : producer->PublishBatch(batch)) (r.ok() ? acked : failed).fetch_add(1);
      std::this_thread::sleep_for(milliseconds(5));  // pacing the offered load
    }
  });
  ReshardFigures f;
  const int64_t steady_t0 = NowNs();
  const int64_t steady_acked0 = acked.load(), steady_unique0 = unique.load();
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the steady window
  f.publish_steady = Rate(acked.load() - steady_acked0, NowNs() - steady_t0);
  f.deliver_steady = Rate(unique.load() - steady_unique0, NowNs() - steady_t0);
  Config fill = cfg;
  fill.messages = backlog;
  std::string error;
  if (backlog > 0 && !PublishAll(*filler, 0, fill, &error)) Die("backlog: " + error);
  const int64_t t_request = NowNs();
  const int64_t acked0 = acked.load(), unique0 = unique.load();
  f.backlog_at_request = backlog - backlog_read.load();

  std::string view;
  if (HttpCall(coordinator_port, "GET", "/v1/streams/" + stream, "", &view) != 200) {
    Die("stream view: " + view);
  }
  boost::system::error_code ec;
  const int64_t revision = boost::json::parse(view, ec).at("revision").to_number<int64_t>();
  const int status = HttpCall(
      coordinator_port, "POST", "/v1/streams/" + stream + "/reshard",
      fmt::format(R"({{"expectedLayoutRevision":{},"shardCount":{}}})", revision, kTo), &view);
  if (status != 200) Die(fmt::format("reshard: HTTP {} {}", status, view));
  const std::vector<int32_t> children = ShardIdsOf(view, 1);
  if (children.size() != static_cast<size_t>(kTo)) Die("reshard: no generation 1 in " + view);
  const bool all_read = WaitUntil(
      [&] {
        const std::set<int32_t> now = reading();
        return std::all_of(children.begin(), children.end(),
                           [&](int32_t id) { return now.count(id) > 0; });
      },
      limit * 3);
  if (all_read) f.children_read_s = Seconds(NowNs() - t_request);
  // Rates over the 3 s from the request (or until every child is read, if later): the
  // reshard itself takes milliseconds, too short a window for a rate.
  const int64_t window_end = t_request + 3'000'000'000;
  if (NowNs() < window_end)
    std::this_thread::sleep_for(std::chrono::nanoseconds(window_end - NowNs()));
  const int64_t t_done = NowNs();
  f.publish_during = Rate(acked.load() - acked0, t_done - t_request);
  f.deliver_during = Rate(unique.load() - unique0, t_done - t_request);
  stop = true;
  load.join();
  f.publish_failures = failed.load();
  producer->Close();
  filler->Close();
  StopAll(consumers);
  return f;
}

void RunReshards(int coordinator_port, const std::string& redis_url, const Config& cfg) {
  std::printf(
      "Resharding 8 -> 16 under load (2 consumers, ~10,000 messages/s offered, %zu-byte "
      "messages); the backlog is published right before the request; rates: the 3 s before "
      "the request (steady) and the 3 s from it (during; deliveries include the backlog)\n\n"
      "| backlog | left at request | children read (s) | publish failures | publish/s steady "
      "| during | ratio | deliveries/s steady | during |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      cfg.size);
  for (int b : cfg.reshard) {
    const ReshardFigures f = ReshardRun(coordinator_port, redis_url, b, cfg);
    std::printf("| %d | %lld | %s | %lld | %.0f | %.0f | %.2f | %.0f | %.0f |\n", b,
                static_cast<long long>(f.backlog_at_request),
                f.children_read_s < 0 ? "not within the limit"
                                      : fmt::format("{:.2f}", f.children_read_s).c_str(),
                static_cast<long long>(f.publish_failures), f.publish_steady, f.publish_during,
                f.publish_steady > 0 ? f.publish_during / f.publish_steady : 0.0, f.deliver_steady,
                f.deliver_during);
    std::fflush(stdout);
  }
}

// The grid's rows as JSON (--json), for bench/run.sh: messages/s, ratios, latencies.
boost::json::object WorkJson(const Row::Work& w) {
  return {{"xadd", w.xadd},
          {"redis_busy", w.busy},
          {"xreadgroup", w.xreadgroup},
          {"xack", w.xack},
          {"xpending", w.xpending},
          {"other", w.other},
          {"redis_cpu_us_per_message", w.cpu_us_per_msg}};
}

void WriteGridJson(const Config& cfg, const std::vector<Row>& rows, const std::string& load) {
  boost::json::array out;
  for (const Row& r : rows) {
    out.push_back(boost::json::object{
        {"consumers", r.n},
        {"shards", r.m},
        {"raw_xadd", r.base_xadd},
        {"raw_read_ack", r.base_read},
        {"producer", r.lib_produce},
        {"consumer", r.lib_consume},
        {"produce_ratio", r.produce_ratio},
        {"consume_ratio", r.consume_ratio},
        {"live_e2e", r.live_e2e},
        {"raw_bound", RawBound(r.base_xadd, r.base_read)},
        {"live_ratio", r.live_ratio},
        {"p50_ms", r.p50_ms},
        {"p99_ms", r.p99_ms},
        {"redeliveries", r.redeliveries},
        {"redis_work_per_1000", boost::json::object{{"raw_read_ack", WorkJson(r.raw_read_work)},
                                                    {"backlog", WorkJson(r.backlog_work)},
                                                    {"live", WorkJson(r.live_work)}}},
        {"note", r.note}});
  }
  rsc::bench::WriteJson(cfg.json, boost::json::object{{"benchmark", "e2e_throughput"},
                                                      {"messages", cfg.messages},
                                                      {"repeat", cfg.repeat},
                                                      {"load_average_before", load},
                                                      {"rows", std::move(out)}});
}

int main(int argc, char** argv) {
  rsc::bench::SetProgramName("e2e_throughput");
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--messages" && has) {
      cfg.messages = std::atoll(argv[++i]);
    } else if (a == "--consumers" && has) {
      cfg.consumers = ParseList(argv[++i]);
    } else if (a == "--shards" && has) {
      cfg.shards = ParseList(argv[++i]);
    } else if (a == "--size" && has) {
      cfg.size = static_cast<size_t>(std::atoll(argv[++i]));
    } else if (a == "--batch" && has) {
      cfg.batch = std::atoi(argv[++i]);
    } else if (a == "--repeat" && has) {
      cfg.repeat = std::atoi(argv[++i]);
    } else if (a == "--seconds" && has) {
      cfg.seconds = std::atof(argv[++i]);
    } else if (a == "--coordinator" && has) {
      cfg.coordinator = argv[++i];
    } else if (a == "--cluster") {
      cfg.cluster = true;
    } else if (a == "--resources" && has) {
      cfg.resources = ParseList(argv[++i]);
    } else if (a == "--reshard" && has) {
      cfg.reshard = ParseList(argv[++i]);
    } else if (a == "--json" && has) {
      cfg.json = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--messages K] [--consumers 1,2,4] [--shards 4,16] [--size 100] "
          "[--batch 1000] [--repeat 3] [--seconds 20] [--coordinator PATH] "
          "[--resources 16,256,1024] [--cluster] [--reshard 0,10000,100000] [--json FILE]\n",
          argv[0]);
      return 2;
    }
  }
  if (cfg.messages < 1 || cfg.batch < 1 || cfg.repeat < 1 || cfg.consumers.empty() ||
      cfg.shards.empty()) {
    Die("--messages, --batch, --repeat must be >= 1; --consumers and --shards non-empty");
  }
  ::signal(SIGPIPE, SIG_IGN);
  const auto started = Clock::now();
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("rsc-e2e-{}", ::getpid())).string();
  std::filesystem::create_directories(dir);

  // redis-server without persistence: what is measured is the library, not the disk.
  Child redis;
  const int redis_port = rsc::bench::StartRedis(redis, dir);
  std::string redis_version;
  {
    Context c = Connect(redis_port);
    Reply r = Command(c.get(), {"INFO", "server"});
    const std::string info = r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
    const size_t at = info.find("redis_version:");
    if (at != std::string::npos) {
      redis_version = info.substr(at + 14, info.find('\r', at) - at - 14);
    }
  }

  // An rsc-coordinator on `url`, its log in dir/<name>.log; returns the port it listens on.
  auto start_coordinator = [&](Child& child, const std::string& url, const std::string& name) {
    return rsc::bench::StartCoordinator(child, cfg.coordinator, url, dir, name);
  };
  Child coordinator;
  const int coordinator_port = start_coordinator(
      coordinator, fmt::format("redis://127.0.0.1:{}", redis_port), "coordinator");

  // The machine is shared: say how busy it was, so a reader can judge the noise.
  const std::string load_before = LoadAverage();
  std::printf(
      "e2e throughput: K=%lld messages per phase, ~%zu bytes each (fields seq, t, padding), "
      "%d keys, batches of %d, redis-server %s (no persistence), rsc-coordinator process, "
      "%u CPUs, load average before: %s\n\n",
      static_cast<long long>(cfg.messages), cfg.size, kKeys, cfg.batch, redis_version.c_str(),
      std::thread::hardware_concurrency(), load_before.c_str());
  if (cfg.cluster) {
    std::vector<std::unique_ptr<Child>> nodes;
    const std::vector<int> ports = StartCluster(&nodes, dir);
    std::string seeds = "redis://";
    for (size_t i = 0; i < ports.size(); ++i) {
      seeds += fmt::format("{}127.0.0.1:{}", i == 0 ? "" : ",", ports[i]);
    }
    Child cluster_coordinator;
    const int cluster_coordinator_port =
        start_coordinator(cluster_coordinator, seeds, "cluster-coordinator");
    std::printf(
        "One server vs a 3-master Redis Cluster (no replicas), same run: live end to end "
        "(messages/s, first publish -> last delivery, median of %d), latency publish -> "
        "handler; on the cluster: shards per master and commands per master during the "
        "cluster phase (INFO total_commands_processed, coordinator included)\n\n"
        "| N consumers | M shards | one server | p50 ms | cluster | p50 ms | p99 ms | cluster / "
        "one | shards per master | max/min | commands per master | max/min |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        cfg.repeat);
    for (int m : cfg.shards) {
      for (int n : cfg.consumers) {
        const std::string cell = fmt::format("c{}x{}", n, m);
        const LiveFigures one =
            LiveRun(coordinator_port, fmt::format("redis://127.0.0.1:{}", redis_port),
                    "one-" + cell, n, m, cfg);
        std::vector<int64_t> before;
        for (int port : ports) before.push_back(CommandsProcessed(port));
        const std::string stream = "cl-" + cell;
        const LiveFigures cl = LiveRun(cluster_coordinator_port, seeds, stream, n, m, cfg);
        std::vector<int64_t> commands, shards(ports.size(), 0);
        for (size_t i = 0; i < ports.size(); ++i) {
          commands.push_back(CommandsProcessed(ports[i]) - before[i]);
        }
        std::string view;
        if (HttpCall(cluster_coordinator_port, "GET", "/v1/streams/" + stream, "", &view) != 200) {
          Die("stream view: " + view);
        }
        const std::vector<std::string> keys = ShardKeysOf(view, 0);
        if (keys.size() != static_cast<size_t>(m)) Die("stream view without its shards: " + view);
        for (const std::string& key : keys) {
          const size_t at = MasterOf(ports, key);
          if (at < shards.size()) ++shards[at];
        }
        auto spread = [](const std::vector<int64_t>& v) {
          const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
          return *lo > 0 ? static_cast<double>(*hi) / static_cast<double>(*lo) : 0.0;
        };
        auto list = [](const std::vector<int64_t>& v) {
          std::string out;
          for (int64_t x : v) out += (out.empty() ? "" : "/") + std::to_string(x);
          return out;
        };
        std::printf(
            "| %d | %d | %.0f | %.1f | %.0f | %.1f | %.1f | %.2f | %s | %.2f | %s | %.2f |\n", n, m,
            one.e2e, one.p50_ms, cl.e2e, cl.p50_ms, cl.p99_ms, one.e2e > 0 ? cl.e2e / one.e2e : 0.0,
            list(shards).c_str(), spread(shards), list(commands).c_str(), spread(commands));
        std::fflush(stdout);
      }
    }
    std::printf("\ntotal %.1f s, load average after: %s\n",
                std::chrono::duration<double>(Clock::now() - started).count(),
                LoadAverage().c_str());
    cluster_coordinator.Stop();
    for (auto& node : nodes) node->Stop();
    coordinator.Stop();
    redis.Stop();
    std::filesystem::remove_all(dir);
    return 0;
  }
  if (!cfg.reshard.empty()) {
    RunReshards(coordinator_port, fmt::format("redis://127.0.0.1:{}", redis_port), cfg);
    coordinator.Stop();
    redis.Stop();
    std::filesystem::remove_all(dir);
    return 0;
  }
  if (!cfg.resources.empty()) {
    RunFootprints(redis_port, coordinator_port, cfg);
    coordinator.Stop();
    redis.Stop();
    std::filesystem::remove_all(dir);
    return 0;
  }
  std::vector<Row> rows;
  for (int m : cfg.shards) {
    for (int n : cfg.consumers) {
      rows.push_back(RunCell(redis_port, coordinator_port, n, m, cfg));
      std::fprintf(stderr, "  done: %d consumers x %d shards\n", n, m);
    }
  }

  std::printf(
      "Backlog, each phase measured alone (messages/s, median of %d repetitions; ratio = median "
      "of library / baseline measured back to back)\n\n"
      "| N consumers | M shards | raw XADD | Producer | ratio | raw XREADGROUP+XACK | Consumer "
      "| ratio |\n|---|---|---|---|---|---|---|---|\n",
      cfg.repeat);
  for (const Row& r : rows) {
    std::printf("| %d | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", r.n, r.m, r.base_xadd,
                r.lib_produce, r.produce_ratio, r.base_read, r.lib_consume, r.consume_ratio);
  }
  std::printf(
      "\nLive: produce while consuming (messages/s, medians). raw bound = 1 / (1/raw XADD + "
      "1/raw XREADGROUP+XACK), since both share one single-threaded redis-server; latency = "
      "publish -> handler\n\n"
      "| N consumers | M shards | Producer | Consumer | end-to-end | raw bound | e2e / bound | "
      "latency p50 ms | p99 ms | redeliveries | claimed |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %d | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.1f | %.1f | %lld | %lld |%s\n",
                r.n, r.m, r.live_produce, r.live_consume, r.live_e2e,
                RawBound(r.base_xadd, r.base_read), r.live_ratio, r.p50_ms, r.p99_ms,
                static_cast<long long>(r.redeliveries), static_cast<long long>(r.claimed),
                r.note.c_str());
  }
  std::printf(
      "\nRedis's work per 1,000 messages (medians; commands, Redis CPU µs per message, and "
      "Redis busy = its CPU time / the phase's wall time, 1 = its thread saturated; other = "
      "every other command, the coordinator's included)\n\n"
      "| N consumers | M shards | phase | XADD | XREADGROUP | XACK | XPENDING | other | Redis "
      "CPU µs/msg | Redis busy |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const std::pair<const char*, const Row::Work*> phases[] = {{"raw read+ack", &r.raw_read_work},
                                                               {"library backlog", &r.backlog_work},
                                                               {"library live", &r.live_work}};
    for (const auto& [name, w] : phases) {
      std::printf("| %d | %d | %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", r.n, r.m,
                  name, w->xadd, w->xreadgroup, w->xack, w->xpending, w->other, w->cpu_us_per_msg,
                  w->busy);
    }
  }
  std::printf("\ntotal %.1f s, load average after: %s\n",
              std::chrono::duration<double>(Clock::now() - started).count(), LoadAverage().c_str());
  if (!cfg.json.empty()) WriteGridJson(cfg, rows, load_before);
  coordinator.Stop();
  redis.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
