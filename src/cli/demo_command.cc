// `rsc demo`: a live demonstration of consumer-group rebalancing. It creates a group, runs one
// Producer (include/rsc/producer.h) publishing keyed messages at a fixed rate and several
// Consumers (include/rsc/consumer.h) in this process, and every few seconds changes the
// membership: a consumer joins, one stops cleanly, one is killed (a crash: no leave, in-flight
// messages not acked), the killed one restarts with the same instance id (static membership,
// SPEC K5). Every second it prints one line: rates, lag, duplicates, per-key order
// violations, each consumer's assignment epoch, shards and rate, and the last event.
// SIGINT/SIGTERM (or --seconds) stops everything cleanly and prints a summary.
// --metrics-port serves the producer's and consumers' metrics meanwhile (include/rsc/metrics.h,
// SPEC O2), each consumer labelled with its slot name.
//
// Per-key order check: the producer numbers the messages of each key 1, 2, 3, ... (a number
// is only used again when its publish failed, so a key's numbers in the stream have no
// gaps). A delivery whose number is at most the last one seen for its key is a duplicate
// (at-least-once redelivery); one that skips ahead is an order violation.

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "core/protocol_json.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"

namespace rsc::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct DemoOpts {
  std::string redis_url;
  std::string stream = "demo";
  std::string group = "demo-group";
  int32_t shards = 8;
  int consumers = 3;
  int rate = 200;
  int64_t seconds = 0;
  int event_seconds = 10;
  int keys = 32;
  MetricsFlags metrics;
};

// Shared by every consumer's handler.
struct Tally {
  std::string run_id;  // messages of earlier runs (left in the streams) are only counted
  std::mutex mu;
  std::map<std::string, int64_t> last_seq;  // guarded by mu
  std::atomic<int64_t> consumed{0};         // first deliveries of this run's messages
  std::atomic<int64_t> duplicates{0};
  std::atomic<int64_t> violations{0};
  std::atomic<int64_t> earlier_runs{0};
};

std::string Field(const StreamFields& fields, std::string_view name) {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return "";
}

// One consumer of the demo; restarts keep the name and the instance id.
struct Slot {
  std::string name;  // c1, c2, ...
  bool killable = false;
  std::unique_ptr<Consumer> consumer;
  std::shared_ptr<std::atomic<int64_t>> handled = std::make_shared<std::atomic<int64_t>>(0);
  int64_t handled_last_second = 0;
  std::string state = "running";  // running, stopping, stopped, killing, killed
};

class Demo {
 public:
  Demo(const DemoOpts& o, Context& ctx) : o_(o), ctx_(ctx) {
    std::random_device rd;
    tally_.run_id = std::to_string(rd()) + std::to_string(rd());
  }

  int Run() {
    // Termination signals are waited for with sigtimedwait; blocked before any thread starts
    // so the runtimes' threads never see them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    if (int rc = StartMetrics(o_.metrics, registry_, ctx_, &metrics_); rc != kExitOk) return rc;
    if (int rc = CreateGroup(); rc != kExitOk) return rc;
    if (int rc = StartProducer(); rc != kExitOk) return rc;
    for (int i = 0; i < o_.consumers; ++i) AddConsumer(false);
    Event("started: " + std::to_string(o_.consumers) + " consumers, producer at " +
          std::to_string(o_.rate) + " msg/s over " + std::to_string(o_.keys) + " keys");
    *ctx_.out << "  time prod/s cons/s    lag  dup viol | consumers: id epoch [shards] msg/s"
                 " | last event\n";

    start_ = Clock::now();
    int64_t second = 0;
    int step = 0;
    std::string why = "--seconds reached";
    for (;;) {
      const Clock::time_point next = start_ + std::chrono::seconds(second + 1);
      int sig = WaitSignal(signals, next);
      if (sig != 0) {
        why = sig == SIGINT ? "SIGINT" : "SIGTERM";
        break;
      }
      ++second;
      PrintLine(second);
      if (o_.seconds > 0 && second >= o_.seconds) break;
      if (o_.event_seconds > 0 && second % o_.event_seconds == 0) Scenario(step++);
    }
    *ctx_.out << "stopping (" << why << "): producer, then consumers cleanly\n";
    ctx_.out->flush();
    return Shutdown(signals);
  }

 private:
  int CreateGroup() {
    CreateGroupRequest req;
    req.stream = o_.stream;
    req.group = o_.group;
    req.shard_count = o_.shards;
    req.config = GroupConfig{};
    CallOutcome call =
        ctx_.admin->Call("POST", "/v1/groups", SerializeCreateGroupRequest(req), Replay::kUnsafe);
    if (call.ok()) {
      *ctx_.out << "created group " << o_.stream << "/" << o_.group << " with " << o_.shards
                << " shards\n";
    } else if (call.code == "GROUP_EXISTS") {
      *ctx_.out << "group " << o_.stream << "/" << o_.group
                << " exists already: using it as it is\n";
    } else {
      return Fail(ctx_, call);
    }
    return kExitOk;
  }

  int StartProducer() {
    ProducerOptions options;
    options.coordinator_endpoints = ctx_.coordinators;
    options.coordinator_token = ctx_.member_token;
    options.stream = o_.stream;
    options.group = o_.group;
    options.redis_url = o_.redis_url;
    options.http_timeout = ctx_.timeout;
    options.redis_timeout = ctx_.timeout;
    ProducerResult<std::unique_ptr<Producer>> created = Producer::Create(options);
    if (!created.ok()) {
      *ctx_.err << "rsc: demo: " << created.error().message << "\n";
      return kExitUsage;
    }
    producer_ = std::move(created.value());
    registry_.Add(*producer_);
    if (!producer_->WaitForRouting(ctx_.timeout)) {
      *ctx_.err << "rsc: demo: no routing for " << o_.stream << "/" << o_.group << ": "
                << producer_->Metrics().last_refresh_error << "\n";
      producer_->Close();
      return kExitUnreachable;
    }
    producer_thread_ = std::thread([this] { ProduceLoop(); });
    return kExitOk;
  }

  // Publishes at o_.rate, each batch with distinct keys; a key's next number is only used
  // once its previous one was published.
  void ProduceLoop() {
    std::vector<int64_t> next_seq(o_.keys, 1);
    int next_key = 0;
    double credit = 0;
    Clock::time_point last = Clock::now();
    while (!stop_producer_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const Clock::time_point now = Clock::now();
      credit += o_.rate * std::chrono::duration<double>(now - last).count();
      credit = std::min(credit, static_cast<double>(o_.rate));  // no burst after a stall
      last = now;
      const int n = std::min(static_cast<int>(credit), o_.keys);
      if (n <= 0) continue;
      credit -= n;
      std::vector<ProducerMessage> batch;
      std::vector<int> keys;
      for (int i = 0; i < n; ++i) {
        const int k = next_key;
        next_key = (next_key + 1) % o_.keys;
        const std::string key = "key-" + std::to_string(k);
        batch.push_back(ProducerMessage{
            key, {{"run", tally_.run_id}, {"key", key}, {"seq", std::to_string(next_seq[k])}}});
        keys.push_back(k);
      }
      const std::vector<ProducerResult<std::string>> results = producer_->PublishBatch(batch);
      for (size_t i = 0; i < results.size(); ++i) {
        if (results[i].ok()) {
          ++next_seq[keys[i]];
          produced_.fetch_add(1);
        } else {
          publish_failures_.fetch_add(1);
          std::lock_guard<std::mutex> lock(mu_);
          last_publish_error_ = std::string(ProducerErrorCodeName(results[i].error().code));
        }
      }
    }
  }

  MessageHandler Handler(std::shared_ptr<std::atomic<int64_t>> handled) {
    return [this, handled](const Message& m) {
      if (Field(m.fields, "run") != tally_.run_id) {
        tally_.earlier_runs.fetch_add(1);
        return HandlerResult::Ok();
      }
      handled->fetch_add(1);
      int64_t seq = 0;
      try {
        seq = std::stoll(Field(m.fields, "seq"));
      } catch (...) {
        return HandlerResult::Ok();
      }
      std::lock_guard<std::mutex> lock(tally_.mu);
      int64_t& last = tally_.last_seq[Field(m.fields, "key")];
      if (seq <= last) {
        tally_.duplicates.fetch_add(1);
      } else {
        if (seq != last + 1) tally_.violations.fetch_add(1);
        last = seq;
        tally_.consumed.fetch_add(1);
      }
      return HandlerResult::Ok();
    };
  }

  // Creates and starts the consumer of `slot`. A killable one gives up its leave at once on
  // Stop(): its readers are abandoned without acking, and it never tells the coordinator it
  // left, as a crashed process would (it expires after the member lease, or its restart with
  // the same instance id takes its place).
  bool StartSlot(Slot& slot) {
    ConsumerOptions options;
    options.coordinator_endpoints = ctx_.coordinators;
    options.coordinator_token = ctx_.member_token;
    options.stream = o_.stream;
    options.group = o_.group;
    options.redis_url = o_.redis_url;
    options.instance_id = "demo-" + slot.name;
    options.consumer_name = slot.name;
    if (slot.killable) options.shutdown_timeout = std::chrono::milliseconds(1);
    ConsumerResult<std::unique_ptr<Consumer>> created =
        Consumer::Create(options, Handler(slot.handled));
    if (!created.ok()) {
      Event(slot.name + " could not start: " + created.error().message);
      return false;
    }
    slot.consumer = std::move(created.value());
    // Consumers of one group: the slot name tells their series apart (before a join their
    // member ids are all empty, and a restart reuses its instance id).
    registry_.Add(*slot.consumer, {{"consumer", slot.name}});
    slot.consumer->Start();
    slot.state = "running";
    return true;
  }

  void AddConsumer(bool killable) {
    auto slot = std::make_unique<Slot>();
    slot->name = "c" + std::to_string(slots_.size() + 1);
    slot->killable = killable;
    if (StartSlot(*slot)) slots_.push_back(std::move(slot));
  }

  // Stops `slot` on a background thread (a clean stop takes a heartbeat round or two).
  void StopSlot(Slot* slot, bool kill) {
    slot->state = kill ? "killing" : "stopping";
    std::shared_ptr<Consumer> consumer(std::move(slot->consumer));
    const Clock::time_point t0 = Clock::now();
    stoppers_.emplace_back([this, slot, consumer, kill, t0] {
      consumer->Stop();
      registry_.Remove(*consumer);  // before a restart of the slot registers its successor
      const int64_t ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu_);
      slot->state = kill ? "killed" : "stopped";
      event_ = kill ? slot->name + " killed (crash: no leave, in-flight messages not acked)"
                    : slot->name + " stopped cleanly (drained, acked, left in " +
                          std::to_string(ms) + " ms)";
      event_at_ = Clock::now();
    });
  }

  Slot* Find(const std::string& state, bool newest, bool killable_only = false) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* found = nullptr;
    for (auto& s : slots_) {
      if (s->state != state || (killable_only && !s->killable)) continue;
      if (found == nullptr || newest) found = s.get();
    }
    return found;
  }

  // The scripted membership changes, in a loop.
  void Scenario(int step) {
    switch (step % 4) {
      case 0:
        AddConsumer(/*killable=*/true);
        Event(slots_.back()->name + " joined (new member: shards move to it)");
        break;
      case 1:
        if (Slot* s = Find("running", /*newest=*/false)) {
          Event(s->name + " stopping cleanly (drain, ack, leave)");
          StopSlot(s, /*kill=*/false);
        }
        break;
      case 2: {
        Slot* s = Find("running", /*newest=*/true, /*killable_only=*/true);
        if (s != nullptr) {
          Event(s->name + " killed (crash: no leave; its shards wait until its member lease ends)");
          StopSlot(s, /*kill=*/true);
        } else if ((s = Find("running", /*newest=*/true)) != nullptr) {
          Event(s->name + " stopping (no crash-mode consumer left to kill)");
          StopSlot(s, /*kill=*/false);
        }
        break;
      }
      case 3:
        if (Slot* s = Find("killed", /*newest=*/true)) {
          s->killable = false;
          s->handled_last_second = s->handled->load();
          if (StartSlot(*s)) {
            Event(s->name + " restarted with the same instance id demo-" + s->name +
                  " (static membership; claims what it left un-acked)");
          }
        } else {
          AddConsumer(false);
          Event(slots_.back()->name + " joined");
        }
        break;
    }
  }

  void Event(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    event_ = text;
    event_at_ = Clock::now();
  }

  static std::string Shards(const std::vector<int32_t>& shards) {
    std::string out = "[";
    for (size_t i = 0; i < shards.size(); ++i) {
      if (i > 0) out += ",";
      out += std::to_string(shards[i]);
    }
    return out + "]";
  }

  void PrintLine(int64_t second) {
    const int64_t produced = produced_.load();
    const int64_t consumed = tally_.consumed.load();
    std::ostringstream consumers;
    std::string event;
    int64_t event_age = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& s : slots_) {
        if (s->state == "stopped") continue;
        const int64_t handled = s->handled->load();
        const int64_t rate = handled - s->handled_last_second;
        s->handled_last_second = handled;
        consumers << " " << s->name;
        if (s->state != "running" || !s->consumer) {
          consumers << " " << s->state;
          continue;
        }
        const ConsumerStatus st = s->consumer->Status();
        if (st.phase != "member") consumers << " " << st.phase;
        consumers << " e" << st.assignment_epoch << " " << Shards(st.reading);
        if (!st.draining.empty()) consumers << " drain" << Shards(st.draining);
        consumers << " " << rate;
      }
      event = event_;
      event_age =
          std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - event_at_).count();
    }
    char head[96];
    std::snprintf(head, sizeof(head), "%5llds %6lld %6lld %6lld %4lld %4lld |",
                  static_cast<long long>(second), static_cast<long long>(produced - last_produced_),
                  static_cast<long long>(consumed - last_consumed_),
                  static_cast<long long>(produced - consumed),
                  static_cast<long long>(tally_.duplicates.load()),
                  static_cast<long long>(tally_.violations.load()));
    last_produced_ = produced;
    last_consumed_ = consumed;
    *ctx_.out << head << consumers.str() << " | " << event;
    if (event_age > 0) *ctx_.out << " (" << event_age << "s ago)";
    *ctx_.out << std::endl;
  }

  // Waits until `until` or a termination signal; returns the signal or 0.
  static int WaitSignal(const sigset_t& signals, Clock::time_point until) {
    for (;;) {
      const auto left = until - Clock::now();
      if (left <= Clock::duration::zero()) return 0;
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      const int sig = sigtimedwait(&signals, nullptr, &ts);
      if (sig > 0) return sig;
    }
  }

  int Shutdown(const sigset_t& signals) {
    stop_producer_.store(true);
    if (producer_thread_.joinable()) producer_thread_.join();
    producer_->Close();
    // Give the consumers a moment to catch up, so the summary's lag is what was left.
    const Clock::time_point catch_up = Clock::now() + std::chrono::seconds(3);
    while (tally_.consumed.load() < produced_.load() && Clock::now() < catch_up) {
      if (WaitSignal(signals, Clock::now() + std::chrono::milliseconds(100)) != 0) break;
    }
    {
      std::vector<Slot*> running;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& s : slots_) {
          if (s->state == "running" && s->consumer) running.push_back(s.get());
        }
      }
      for (Slot* s : running) StopSlot(s, /*kill=*/false);
    }
    for (std::thread& t : stoppers_) t.join();
    const int64_t produced = produced_.load();
    const int64_t consumed = tally_.consumed.load();
    *ctx_.out << "summary: produced " << produced << ", consumed " << consumed << ", lag "
              << produced - consumed << ", duplicates redelivered " << tally_.duplicates.load()
              << ", order violations " << tally_.violations.load() << ", publish failures "
              << publish_failures_.load();
    if (tally_.earlier_runs.load() > 0) {
      *ctx_.out << ", messages of earlier runs skipped " << tally_.earlier_runs.load();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!last_publish_error_.empty()) *ctx_.out << " (last: " << last_publish_error_ << ")";
    }
    *ctx_.out << std::endl;
    return kExitOk;
  }

  DemoOpts o_;
  Context& ctx_;
  Tally tally_;
  std::unique_ptr<Producer> producer_;
  std::thread producer_thread_;
  std::atomic<bool> stop_producer_{false};
  std::atomic<int64_t> produced_{0};
  std::atomic<int64_t> publish_failures_{0};
  int64_t last_produced_ = 0;
  int64_t last_consumed_ = 0;
  Clock::time_point start_ = Clock::now();

  std::mutex mu_;  // guards the slots' state, event_, last_publish_error_
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> stoppers_;
  std::string event_;
  Clock::time_point event_at_ = Clock::now();
  std::string last_publish_error_;

  // Last, so they go first: the listener stops before the registry, and both before the
  // clients the registry points to.
  MetricsRegistry registry_;
  std::unique_ptr<MetricsServer> metrics_;
};

}  // namespace

void AddDemoCommand(CLI::App& app, Command* selected) {
  auto o = std::make_shared<DemoOpts>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Live demo: a producer and consumers in this process, membership changing every few "
      "seconds (join, clean stop, crash, restart); one status line per second");
  cmd->add_option("--redis", o->redis_url,
                  "redis://[user[:password]@]host[:port][,host[:port]...][/db] holding the streams "
                  "(a cluster: any node, or a seed list)")
      ->required();
  cmd->add_option("--stream", o->stream, "Stream prefix P")->capture_default_str();
  cmd->add_option("--group", o->group, "Consumer group G (created if missing)")
      ->capture_default_str();
  cmd->add_option("--shards", o->shards, "Shard count when creating the group")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--consumers", o->consumers, "Consumers at start")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "Messages per second")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "Run time (0: until SIGINT/SIGTERM)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--event-seconds", o->event_seconds,
                  "Seconds between membership changes (0: none)")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_option("--keys", o->keys, "Distinct message keys")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  AddMetricsFlags(cmd, &o->metrics);
  cmd->callback([o, selected] {
    *selected = [o](Context& ctx) {
      Demo demo(*o, ctx);
      return demo.Run();
    };
  });
}

}  // namespace rsc::cli
