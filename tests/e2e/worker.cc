// rsc-e2e-worker: one client process of the end-to-end test (tests/e2e/e2e_test.cc). It
// runs a real rsc::Consumer or rsc::Producer and writes everything it observes as History
// events (sim/history.h), one JSON object per line, each line with a single write(2) on an
// O_APPEND file: a SIGKILL can lose at most the event being written, never corrupt earlier
// lines. Time stamps are std::chrono::steady_clock microseconds (CLOCK_MONOTONIC), so the
// logs of all processes of a run merge into one history.
//
//   rsc-e2e-worker consume --coordinator H:P [--coordinator H:P ...] --redis URL --stream P
//                          --group G --log FILE --proc NAME [--instance ID]
//                          [--handler-delay-us U]
//     Logs `start` (member id, instance id), every ConsumerEvent of the runtime's hook,
//     and on SIGTERM/SIGINT: Consumer::Stop(), then `stop`, exit 0. A message the handler
//     gets that no producer wrote (a seal entry, SPEC RS2/RS3: the last possible ID or an
//     `rsc-seal` field; or one without a `key` field) is logged as a `fault` with detail
//     `foreign_message_in_handler` (and on stderr): the library must never hand it over.
//   rsc-e2e-worker produce --coordinator H:P [...] --redis URL --stream P --group G
//                          --log FILE --proc NAME (--messages N | --until-us T) [--keys K]
//                          [--key-prefix X] [--interval-us U] [--give-up-ms M]
//     Publishes messages over K keys ("<X>k0".."<X>k{K-1}"), message i with key k(i mod K)
//     and seq i / K (per key 0, 1, 2, ...), fields key=<key>, seq=<seq>, strictly in order:
//     a refused publish is logged (`publish_refused`) and retried until acknowledged, so
//     per key the acked seqs are published in increasing order. Every acknowledged XADD is
//     logged from the producer's hook (`publish`: XADD send time, routing version, routing
//     lease end). It stops after N messages, or before starting a message once the
//     steady clock (CLOCK_MONOTONIC µs, the logs' clock) reaches T, whichever comes first;
//     then logs `stop` (detail `seal_refresh_waits=N`: XADDs a sealed shard refused, which
//     the library sent again on the new generation, RS2) and exits 0. SIGTERM/SIGINT end it the
//     same way: the message in hand is published (acknowledged) first, no new one is started. Exit
//     1 if it cannot make progress for --give-up-ms. Several producers (or incarnations of one)
//     must use distinct key prefixes: the checkers' per-key order (S4) assumes one in-order
//     publisher per key.
//   Every --coordinator endpoint is given to the library, which rotates on failure (C6).
//
// Not installed; built with the tests.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "sim/history.h"

namespace {

using rsc::sim::HistEvent;
using rsc::sim::HistKind;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Appends one line per event with a single write(2). Thread-safe: O_APPEND writes of one
// short line are not interleaved with other writes to the file.
class EventLog {
 public:
  explicit EventLog(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
  ~EventLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  bool ok() const { return fd_ >= 0; }

  void Write(const HistEvent& e) const {
    const std::string line = rsc::sim::ToJsonLine(e) + "\n";
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::fprintf(stderr, "event log write failed: %s\n", std::strerror(errno));
        std::_Exit(3);  // a history with holes must not pass for a complete one
      }
      done += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
};

// The seal entry's ID (SPEC RS2): the last possible stream ID.
constexpr char kSealId[] = "18446744073709551615-18446744073709551615";

std::string Field(const rsc::StreamFields& fields, std::string_view name) {
  for (const auto& [f, v] : fields) {
    if (f == name) return v;
  }
  return "";
}

int64_t ParseSeq(const std::string& s) {
  int64_t v = -1;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() ? v : -1;
}

struct Common {
  std::vector<std::string> coordinators;
  std::string redis;
  std::string stream;
  std::string group;
  std::string log;
  std::string proc;
};

HistEvent Base(HistKind kind, int64_t t_us, const std::string& proc, const std::string& member) {
  HistEvent e;
  e.kind = kind;
  e.t_us = t_us;
  e.proc = proc;
  e.member = member;
  return e;
}

HistEvent FromConsumerEvent(const rsc::ConsumerEvent& c, const std::string& proc,
                            const std::string& member) {
  HistKind kind = HistKind::kRead;
  switch (c.kind) {
    case rsc::ConsumerEventKind::kAcquire:
      kind = HistKind::kAcquire;
      break;
    case rsc::ConsumerEventKind::kLease:
      kind = HistKind::kLease;
      break;
    case rsc::ConsumerEventKind::kRead:
      kind = HistKind::kRead;
      break;
    case rsc::ConsumerEventKind::kDeliver:
      kind = HistKind::kDeliver;
      break;
    case rsc::ConsumerEventKind::kAck:
      kind = HistKind::kAck;
      break;
    case rsc::ConsumerEventKind::kRelease:
      kind = HistKind::kRelease;
      break;
    case rsc::ConsumerEventKind::kHeartbeat:
      kind = HistKind::kHeartbeat;
      break;
  }
  HistEvent e = Base(kind, c.t_us, proc, member);
  e.shard = c.shard;
  e.stream = c.stream;
  e.id = c.id;
  e.detail = c.detail;
  switch (c.kind) {
    case rsc::ConsumerEventKind::kAcquire:
    case rsc::ConsumerEventKind::kLease:
      e.epoch = c.assignment_epoch;
      e.lease_end_us = c.lease_end_us;
      break;
    case rsc::ConsumerEventKind::kDeliver:
      e.key = Field(c.fields, "key");
      e.seq = ParseSeq(Field(c.fields, "seq"));
      e.attempt = c.attempt;
      break;
    case rsc::ConsumerEventKind::kHeartbeat:
      e.status = c.status;
      e.epoch = c.member_epoch;
      e.version = c.metadata_version;
      e.lineage = c.lineage;
      e.sent_us = c.sent_us;
      if (c.granted_lease_ms > 0) {
        e.grant_ms = c.granted_lease_ms;
        e.assigned = rsc::sim::ShardList(c.assigned_shards);
      }
      break;
    default:
      break;
  }
  return e;
}

// SIGTERM/SIGINT are blocked in every thread and taken with sigwait by the main thread.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int Consume(const Common& c, const std::string& instance, int64_t handler_delay_us) {
  const sigset_t stop_signals = BlockStopSignals();
  EventLog log(c.log);
  if (!log.ok()) {
    std::fprintf(stderr, "cannot open %s: %s\n", c.log.c_str(), std::strerror(errno));
    return 1;
  }
  // The member id is known only after Create; the hook runs only after Start.
  auto member = std::make_shared<std::string>();
  rsc::ConsumerOptions o;
  o.coordinator_endpoints = c.coordinators;
  o.stream = c.stream;
  o.group = c.group;
  o.redis_url = c.redis;
  o.instance_id = instance;
  o.max_batch = 20;
  o.block = std::chrono::milliseconds(200);
  o.http_timeout = std::chrono::milliseconds(1000);
  o.redis_timeout = std::chrono::milliseconds(2000);
  o.backoff_initial = std::chrono::milliseconds(50);
  o.backoff_max = std::chrono::milliseconds(300);
  o.shutdown_timeout = std::chrono::milliseconds(8000);
  o.on_event = [&log, member, proc = c.proc](const rsc::ConsumerEvent& ev) {
    log.Write(FromConsumerEvent(ev, proc, *member));
  };
  auto created = rsc::Consumer::Create(o, [handler_delay_us, &log, member,
                                           proc = c.proc](const rsc::Message& m) {
    if (m.id == kSealId || !Field(m.fields, "rsc-seal").empty() || Field(m.fields, "key").empty()) {
      HistEvent e = Base(HistKind::kFault, NowUs(), proc, *member);
      e.detail = "foreign_message_in_handler";
      e.shard = m.shard;
      e.stream = m.stream;
      e.id = m.id;
      log.Write(e);
      std::fprintf(stderr, "consumer %s: the handler got entry %s of %s, which no producer wrote\n",
                   proc.c_str(), m.id.c_str(), m.stream.c_str());
    }
    if (handler_delay_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(handler_delay_us));
    return rsc::HandlerResult::Ok();
  });
  if (!created.ok()) {
    std::fprintf(stderr, "consumer: %s\n", created.error().message.c_str());
    return 2;
  }
  std::unique_ptr<rsc::Consumer> consumer = std::move(created).value();
  *member = consumer->Status().member_id;
  HistEvent start = Base(HistKind::kStart, NowUs(), c.proc, *member);
  start.detail = instance;
  log.Write(start);
  consumer->Start();
  std::fprintf(stderr, "consumer %s member %s instance '%s' started\n", c.proc.c_str(),
               member->c_str(), instance.c_str());
  int sig = 0;
  sigwait(&stop_signals, &sig);
  consumer->Stop();
  const rsc::ConsumerStatus st = consumer->Status();
  log.Write(Base(HistKind::kStop, NowUs(), c.proc, *member));
  std::fprintf(stderr, "consumer %s stopped (signal %d): phase %s handled %lld acked %lld\n",
               c.proc.c_str(), sig, st.phase.c_str(), static_cast<long long>(st.messages_handled),
               static_cast<long long>(st.messages_acked));
  return 0;
}

struct ProduceOptions {
  int64_t messages = 0;  // 0 = no limit (then until_us must be set)
  int64_t until_us = 0;  // 0 = no deadline
  int64_t keys = 1;
  std::string key_prefix;
  int64_t interval_us = 0;
  int64_t give_up_ms = 20000;
};

// True if SIGTERM or SIGINT is pending (and takes it).
bool StopRequested(const sigset_t& stop_signals) {
  const timespec zero{0, 0};
  return sigtimedwait(&stop_signals, nullptr, &zero) > 0;
}

int Produce(const Common& c, const ProduceOptions& p) {
  // SIGTERM/SIGINT are taken between messages: a clean stop after the message in hand.
  const sigset_t stop_signals = BlockStopSignals();
  EventLog log(c.log);
  if (!log.ok()) {
    std::fprintf(stderr, "cannot open %s: %s\n", c.log.c_str(), std::strerror(errno));
    return 1;
  }
  rsc::ProducerOptions o;
  o.coordinator_endpoints = c.coordinators;
  o.stream = c.stream;
  o.group = c.group;
  o.redis_url = c.redis;
  o.http_timeout = std::chrono::milliseconds(1000);
  o.retry_initial = std::chrono::milliseconds(50);
  o.retry_max = std::chrono::milliseconds(300);
  o.on_publish = [&log, proc = c.proc](const rsc::PublishEvent& p) {
    HistEvent e = Base(HistKind::kPublish, p.sent_us, proc, "");
    e.key = p.key;
    e.seq = ParseSeq(Field(p.fields, "seq"));
    e.shard = p.shard;
    e.stream = p.stream;
    e.id = p.id;
    e.version = p.metadata_version;
    e.lease_end_us = p.routing_lease_end_us;
    log.Write(e);
  };
  auto created = rsc::Producer::Create(o);
  if (!created.ok()) {
    std::fprintf(stderr, "producer: %s\n", created.error().message.c_str());
    return 2;
  }
  std::unique_ptr<rsc::Producer> producer = std::move(created).value();
  log.Write(Base(HistKind::kStart, NowUs(), c.proc, ""));
  const auto begin = std::chrono::steady_clock::now();
  int64_t refused = 0;
  int64_t i = 0;
  for (; p.messages == 0 || i < p.messages; ++i) {
    std::this_thread::sleep_until(begin + std::chrono::microseconds(i * p.interval_us));
    if (p.until_us > 0 && NowUs() >= p.until_us) break;
    if (StopRequested(stop_signals)) break;
    const std::string key = p.key_prefix + "k" + std::to_string(i % p.keys);
    const int64_t seq = i / p.keys;
    const rsc::StreamFields fields{{"key", key}, {"seq", std::to_string(seq)}};
    auto last_progress = std::chrono::steady_clock::now();
    for (;;) {
      rsc::ProducerResult<std::string> r = producer->Publish(key, fields);
      if (r.ok()) break;
      ++refused;
      HistEvent e = Base(HistKind::kPublishRefused, NowUs(), c.proc, "");
      e.key = key;
      e.seq = seq;
      e.detail = std::string(rsc::ProducerErrorCodeName(r.error().code)) + ": " + r.error().message;
      log.Write(e);
      if (std::chrono::steady_clock::now() - last_progress >
          std::chrono::milliseconds(p.give_up_ms)) {
        std::fprintf(stderr, "producer: no progress for %lld ms at message %lld: %s\n",
                     static_cast<long long>(p.give_up_ms), static_cast<long long>(i),
                     e.detail.c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const int64_t seal_waits = producer->Metrics().seal_refresh_waits;
  producer->Close();
  HistEvent stop = Base(HistKind::kStop, NowUs(), c.proc, "");
  stop.detail = "seal_refresh_waits=" + std::to_string(seal_waits);
  log.Write(stop);
  std::fprintf(stderr, "producer %s: %lld published, %lld refusals, %lld seal refresh waits\n",
               c.proc.c_str(), static_cast<long long>(i), static_cast<long long>(refused),
               static_cast<long long>(seal_waits));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rsc-e2e-worker: a consumer or producer process for the end-to-end test"};
  app.require_subcommand(1);
  Common c;
  auto common = [&c](CLI::App* sub) {
    sub->add_option("--coordinator", c.coordinators, "coordinator host:port (repeatable)")
        ->required();
    sub->add_option("--redis", c.redis, "redis://host:port")->required();
    sub->add_option("--stream", c.stream, "stream prefix P")->required();
    sub->add_option("--group", c.group,
                    "group G (a producer without one routes by the stream, SPEC D4)");
    sub->add_option("--log", c.log, "JSONL event log (appended)")->required();
    sub->add_option("--proc", c.proc, "process name in the history")->required();
  };
  CLI::App* consume = app.add_subcommand("consume", "run a Consumer until SIGTERM");
  common(consume);
  std::string instance;
  int64_t handler_delay_us = 0;
  consume->add_option("--instance", instance, "static membership instance id");
  consume->add_option("--handler-delay-us", handler_delay_us, "time each handler call takes");
  CLI::App* produce = app.add_subcommand("produce", "publish keyed messages, then exit");
  common(produce);
  ProduceOptions p;
  produce->add_option("--messages", p.messages, "how many (0 = until --until-us)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  produce->add_option("--until-us", p.until_us,
                      "start no message once CLOCK_MONOTONIC (µs) reaches this");
  produce->add_option("--keys", p.keys, "over how many keys")->check(CLI::Range(1, 1000000));
  produce->add_option("--key-prefix", p.key_prefix, "prefix of every key (one per producer)");
  produce->add_option("--interval-us", p.interval_us, "pace: one message per interval");
  produce->add_option("--give-up-ms", p.give_up_ms, "exit 1 after this long without progress");
  CLI11_PARSE(app, argc, argv);
  if (consume->parsed()) {
    if (c.group.empty()) {
      std::fprintf(stderr, "consume: --group is required\n");
      return 2;
    }
    return Consume(c, instance, handler_delay_us);
  }
  if (p.messages == 0 && p.until_us == 0) {
    std::fprintf(stderr, "produce: give --messages or --until-us\n");
    return 2;
  }
  return Produce(c, p);
}
