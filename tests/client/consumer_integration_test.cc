// rsc::Consumer against a real redis-server and a real rsc-coordinator (ENGINEERING §5
// level 2). Run inside scripts/netns.sh (the host loopback is throttled).
//
// - one consumer receives every message a Producer publishes over 4 shards, per-key order
//   kept, everything XACKed, and leaves cleanly;
// - two consumers split the shards; one stops while a message it cannot handle is pending
//   (kRetry), the other takes over every shard, claims that entry (C7) and receives
//   everything published afterwards;
// - kDeadLetter: a message whose handler throws ends in the shard's dead-letter stream, the
//   rest is processed and nothing stays pending;
// - kRetry with a throwing handler retries in place until it succeeds; kStop counts a
//   non-std throw as a failure;
// - a hanging handler: its shards stall (lease renewed), a revoked one stays DRAINING until
//   the rebalance timeout takes it alone (C8), its entries move to the other member while
//   the call still hangs, and the abandoned call XACKs nothing; Stop() while a call hangs
//   on a shard nobody revoked gives up after shutdown_timeout and the member expires;
// - the coordinator killed for longer than the assignment lease: the consumer stops reading
//   (C4) and resumes when a new coordinator process serves the same Redis.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/live_group.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "rsc/routing.h"
#include "rsc/version_store.h"
#include "support/coordinator_process.h"
#include "support/http_client.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/thread_names.h"
#include "support/wait.h"

namespace rsc {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using rsc::testing::CliReply;
using rsc::testing::CoordinatorOptions;
using rsc::testing::CoordinatorProcess;
using rsc::testing::FieldValue;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

constexpr int kShards = 4;
const std::set<int32_t> kAllShards{0, 1, 2, 3};

std::set<int32_t> AsSet(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

std::string Describe(const ConsumerStatus& s) {
  std::ostringstream o;
  o << "phase=" << s.phase << " epoch=" << s.member_epoch << " reading=[";
  for (int32_t x : s.reading) o << x << " ";
  o << "] draining=" << s.draining.size() << " revoked=" << s.revoked.size()
    << " lease_remaining_ms=" << s.lease_remaining_ms << " handled=" << s.messages_handled
    << " acked=" << s.messages_acked << " claimed=" << s.messages_claimed
    << " dead=" << s.dead_lettered << " hb_error='" << s.last_heartbeat_error << "' redis_error='"
    << s.last_redis_error << "' handler_error='" << s.last_handler_error << "' stop_error='"
    << s.stop_error << "'";
  return o.str();
}

// What the handlers saw, shared by every consumer of a test. Thread-safe.
class Received {
 public:
  void Add(const std::string& consumer, const Message& m) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = FieldValue(m.fields, "key");
    per_key_[key].push_back(std::stoi(FieldValue(m.fields, "seq")));
    shards_by_consumer_[consumer].insert(m.shard);
    EXPECT_EQ(ShardForKey(key, kShards), m.shard) << key << " delivered from " << m.stream;
    ++total_;
  }
  int total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  // Per key, the order of first deliveries (a redelivery after a takeover may repeat one).
  std::map<std::string, std::vector<int>> FirstDeliveries() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::vector<int>> out;
    for (const auto& [key, seqs] : per_key_) {
      std::set<int> seen;
      for (int s : seqs) {
        if (seen.insert(s).second) out[key].push_back(s);
      }
    }
    return out;
  }
  std::map<std::string, std::vector<int>> All() const {
    std::lock_guard<std::mutex> lock(mu_);
    return per_key_;
  }
  std::set<int32_t> ShardsOf(const std::string& consumer) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = shards_by_consumer_.find(consumer);
    return it == shards_by_consumer_.end() ? std::set<int32_t>{} : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<int>> per_key_;
  std::map<std::string, std::set<int32_t>> shards_by_consumer_;
  int total_ = 0;
};

// A Redis, a coordinator, and group orders/billing with 4 shards and short leases.
class ConsumerIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, "orders", "billing", kShards,
                                             rsc::testing::FastLeases()));
  }

  std::string Endpoint() const { return "127.0.0.1:" + std::to_string(coordinator_->Port()); }

  ConsumerOptions Options() const {
    ConsumerOptions o;
    o.coordinator_endpoints = {Endpoint()};
    o.stream = "orders";
    o.group = "billing";
    o.redis_url = redis_.Url();
    o.block = 200ms;
    o.http_timeout = 1000ms;
    o.handler_retry_initial = 10ms;
    o.handler_retry_max = 100ms;
    return o;
  }

  std::unique_ptr<Consumer> MakeConsumer(ConsumerOptions o, MessageHandler handler) {
    ConsumerResult<std::unique_ptr<Consumer>> c =
        Consumer::Create(std::move(o), std::move(handler));
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // The group's only consumer, "a" in `received`, started and reading all 4 shards; nullptr
  // (with the failure recorded) if it could not be created or never read them all.
  std::unique_ptr<Consumer> StartSoleConsumer(Received& received) {
    std::unique_ptr<Consumer> consumer = MakeConsumer(Options(), [&received](const Message& m) {
      received.Add("a", m);
      return HandlerResult::Ok();
    });
    if (consumer == nullptr) return nullptr;
    consumer->Start();
    if (!WaitFor([&] { return AsSet(consumer->Status().reading) == kAllShards; }, 10s,
                 "the only member reads all 4 shards")) {
      ADD_FAILURE() << Describe(consumer->Status());
      return nullptr;
    }
    return consumer;
  }

  std::unique_ptr<Producer> MakeProducer() {
    ProducerOptions o;
    o.coordinator_endpoints = {Endpoint()};
    o.stream = "orders";
    o.group = "billing";
    o.redis_url = redis_.Url();
    ProducerResult<std::unique_ptr<Producer>> p = Producer::Create(o);
    EXPECT_TRUE(p.ok()) << p.error().message;
    if (!p.ok()) return nullptr;
    std::unique_ptr<Producer> producer = std::move(p).value();
    EXPECT_TRUE(producer->WaitForRouting(10s)) << producer->Metrics().last_refresh_error;
    return producer;
  }

  // Publishes `count` messages over `keys` keys with seq numbers from `first`; records them.
  void Publish(Producer& producer, const std::string& prefix, int keys, int first, int count,
               std::map<std::string, std::vector<int>>* sent) {
    std::vector<ProducerMessage> batch;
    for (int i = first; i < first + count; ++i) {
      const std::string key = prefix + std::to_string(i % keys);
      batch.push_back({key, {{"key", key}, {"seq", std::to_string(i)}}});
      (*sent)[key].push_back(i);
    }
    for (const auto& r : producer.PublishBatch(batch)) {
      ASSERT_TRUE(r.ok()) << ProducerErrorCodeName(r.error().code) << ": " << r.error().message;
    }
  }

  // Pending (un-acked) entries of group billing over all shard streams.
  int64_t PendingTotal() {
    std::unique_ptr<rsc::testing::RedisCli> cli = redis_.Cli();
    if (!cli) return -1;
    int64_t total = 0;
    for (int s = 0; s < kShards; ++s) {
      CliReply r = cli->Run({"XPENDING", "{orders:" + std::to_string(s) + "}", "billing"});
      if (r.type != CliReply::Type::kArray || r.elements.empty()) return -1;
      total += r.elements[0].integer;
    }
    return total;
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
};

TEST_F(ConsumerIntegration, OneConsumerReceivesEveryMessageInKeyOrder) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  std::map<std::string, std::vector<int>> sent;
  // Published before any consumer exists: the Redis groups are created from id 0.
  Publish(*producer, "key-", 23, 0, 150, &sent);

  Received received;
  std::unique_ptr<Consumer> consumer = StartSoleConsumer(received);
  ASSERT_NE(consumer, nullptr);
  Publish(*producer, "key-", 23, 150, 250, &sent);
  ASSERT_TRUE(WaitFor([&] { return received.total() >= 400; }, 15s, "400 messages handled"))
      << received.total() << " " << Describe(consumer->Status());
  EXPECT_EQ(received.All(), sent) << "every message exactly once, per-key order kept";
  EXPECT_EQ(received.ShardsOf("a"), kAllShards);
  ASSERT_TRUE(
      WaitFor([&] { return consumer->Status().messages_acked == 400; }, 5s, "every message XACKed"))
      << Describe(consumer->Status());
  EXPECT_EQ(PendingTotal(), 0);
  const ConsumerStatus st = consumer->Status();
  EXPECT_GT(st.lease_remaining_ms, 0);
  EXPECT_GE(st.member_epoch, 1);
  EXPECT_GT(st.metadata_version, 0);
  EXPECT_EQ(st.handler_failures, 0);

  consumer->Stop();
  const ConsumerStatus stopped = consumer->Status();
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.phase, "left") << Describe(stopped);
  EXPECT_TRUE(stopped.reading.empty());
  // The coordinator no longer lists the member.
  HttpClient http(coordinator_->Port());
  HttpResult view = http.Get("/v1/groups/orders/billing");
  ASSERT_EQ(view.status, 200) << view.Describe();
  EXPECT_TRUE(view.json.at("members").as_array().empty()) << view.Describe();
}

// Operators and users tell the library's threads apart in `top -H`, perf and gdb
// (docs/consumer.md §2), and Stop/destruction ends every one of them.
// C5 through the shipped facade (consumer.cc's saves: off the lock, one at a time, newest
// last): the version store ends up holding what the consumer has observed.
TEST_F(ConsumerIntegration, TheVersionStoreHoldsTheLatestObservedVersion) {
  char tmpl[] = "/tmp/rsc-consumer-versions-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto store = std::make_shared<FileVersionStore>(dir + "/versions");
  ConsumerOptions o = Options();
  o.version_store = store;
  std::unique_ptr<Consumer> consumer =
      MakeConsumer(o, [](const Message&) { return HandlerResult::Ok(); });
  ASSERT_NE(consumer, nullptr);
  consumer->Start();
  ASSERT_TRUE(WaitFor([&] { return AsSet(consumer->Status().reading) == kAllShards; }, 10s,
                      "the only member reads all 4 shards"))
      << Describe(consumer->Status());
  const ConsumerStatus st = consumer->Status();
  ObservedVersion stored;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string error;
        return store->Load("orders", "billing", &stored, &error) &&
               stored.metadata_version == st.metadata_version;
      },
      5s, "the store holds the observed version"))
      << stored.metadata_version << " stored, " << st.metadata_version << " observed";
  EXPECT_EQ(stored.lineage, st.lineage);
  consumer->Stop();
  std::filesystem::remove_all(dir);
}

TEST_F(ConsumerIntegration, TheLibrarysThreadsAreNamedAndEndWithTheirClients) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  Received received;
  std::unique_ptr<Consumer> consumer = StartSoleConsumer(received);
  ASSERT_NE(consumer, nullptr);
  std::map<std::string, std::vector<int>> sent;
  Publish(*producer, "key-", 4, 0, 8, &sent);
  ASSERT_TRUE(WaitFor([&] { return received.total() >= 8; }, 10s, "8 messages handled"));
  std::map<std::string, int> names = rsc::testing::ThreadNames();
  const std::string all = rsc::testing::DescribeThreadNames(names);
  EXPECT_EQ(names["rsc-timer"], 1) << all;
  EXPECT_EQ(names["rsc-http"], 1) << all;
  EXPECT_EQ(names["rsc-redis-route"], 1) << all;
  EXPECT_EQ(names["rsc-redis-cmd"], 1) << all;  // one server: one node
  EXPECT_EQ(names["rsc-redis-live"], 1) << all;
  EXPECT_GE(names["rsc-handler"], 1) << all;
  EXPECT_EQ(names["rsc-refresh"], 1) << all;  // the producer's
  consumer->Stop();
  consumer.reset();
  producer.reset();
  names = rsc::testing::ThreadNames();
  for (const char* name : {"rsc-timer", "rsc-http", "rsc-redis-route", "rsc-redis-cmd",
                           "rsc-redis-live", "rsc-handler", "rsc-refresh"}) {
    EXPECT_EQ(names.count(name), 0u)
        << name << " left: " << rsc::testing::DescribeThreadNames(names);
  }
}

TEST_F(ConsumerIntegration, TwoConsumersSplitShardsThenOneTakesOverWithPendingEntries) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  Received received;
  std::atomic<bool> b_rejects_poison{true};
  std::string poison_key;  // set before anything with it is published
  std::mutex poison_mu;
  auto handler_for = [&](std::string name) -> MessageHandler {
    return [&, name](const Message& m) {
      if (name == "b" && b_rejects_poison.load()) {
        std::lock_guard<std::mutex> lock(poison_mu);
        if (!poison_key.empty() && FieldValue(m.fields, "key") == poison_key) {
          return HandlerResult::Fail("b cannot handle " + poison_key);
        }
      }
      received.Add(name, m);
      return HandlerResult::Ok();
    };
  };
  std::unique_ptr<Consumer> a = MakeConsumer(Options(), handler_for("a"));
  ConsumerOptions b_options = Options();
  b_options.on_handler_error = HandlerErrorPolicy::kRetry;  // never skip: leave it pending
  std::unique_ptr<Consumer> b = MakeConsumer(b_options, handler_for("b"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a->Start();
  ASSERT_TRUE(
      WaitFor([&] { return AsSet(a->Status().reading) == kAllShards; }, 10s, "a reads all shards"))
      << Describe(a->Status());
  b->Start();
  // K3: balanced and disjoint once b joined (a drains two shards, b starts them).
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::set<int32_t> ra = AsSet(a->Status().reading);
        const std::set<int32_t> rb = AsSet(b->Status().reading);
        std::set<int32_t> all = ra;
        all.insert(rb.begin(), rb.end());
        return ra.size() == 2 && rb.size() == 2 && all == kAllShards;
      },
      15s, "a and b each read 2 disjoint shards"))
      << "a: " << Describe(a->Status()) << "\nb: " << Describe(b->Status());
  const std::set<int32_t> b_shards = AsSet(b->Status().reading);

  std::map<std::string, std::vector<int>> sent;
  Publish(*producer, "k-", 31, 0, 200, &sent);
  ASSERT_TRUE(WaitFor([&] { return received.total() >= 200; }, 15s, "first 200 handled"))
      << received.total() << "\na: " << Describe(a->Status()) << "\nb: " << Describe(b->Status());
  EXPECT_FALSE(received.ShardsOf("a").empty());
  EXPECT_FALSE(received.ShardsOf("b").empty());
  for (int32_t s : received.ShardsOf("b")) EXPECT_TRUE(b_shards.count(s)) << s;
  for (int32_t s : received.ShardsOf("a")) EXPECT_FALSE(b_shards.count(s)) << s;

  // A key on one of b's shards that b's handler refuses: kRetry keeps it (and whatever
  // follows it on that shard) un-acked in b's pending list.
  {
    std::lock_guard<std::mutex> lock(poison_mu);
    for (int i = 0; poison_key.empty(); ++i) {
      const std::string k = "poison-" + std::to_string(i);
      if (b_shards.count(ShardForKey(k, kShards))) poison_key = k;
    }
  }
  ASSERT_TRUE(producer->Publish(poison_key, {{"key", poison_key}, {"seq", "1000"}}).ok());
  sent[poison_key].push_back(1000);
  ASSERT_TRUE(WaitFor([&] { return b->Status().handler_failures > 0; }, 10s,
                      "b fails on the poison message"))
      << Describe(b->Status());

  // b stops cleanly: its retry is cut short, the poison entry stays pending; a takes over.
  b->Stop();
  EXPECT_EQ(b->Status().phase, "left") << Describe(b->Status());
  ASSERT_TRUE(WaitFor([&] { return AsSet(a->Status().reading) == kAllShards; }, 15s,
                      "a takes over all shards"))
      << Describe(a->Status());
  Publish(*producer, "k-", 31, 200, 200, &sent);
  const int expected = 401;
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto first = received.FirstDeliveries();
        int n = 0;
        for (const auto& [k, v] : first) n += static_cast<int>(v.size());
        return n >= expected;
      },
      15s, "every message handled after the takeover"))
      << Describe(a->Status());
  EXPECT_EQ(received.FirstDeliveries(), sent) << "nothing lost, per-key order kept";
  EXPECT_GT(a->Status().messages_claimed, 0) << "the pending poison entry was claimed (C7)";
  EXPECT_EQ(received.ShardsOf("a"), kAllShards);
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 5s, "nothing left pending"));
  a->Stop();
  EXPECT_EQ(a->Status().phase, "left") << Describe(a->Status());
}

TEST_F(ConsumerIntegration, DeadLetterPolicyParksTheFailingMessage) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  Received received;
  std::atomic<int> bad_attempts{0};
  ConsumerOptions o = Options();
  o.on_handler_error = HandlerErrorPolicy::kDeadLetter;
  o.max_attempts = 3;
  std::unique_ptr<Consumer> consumer = MakeConsumer(o, [&](const Message& m) {
    if (FieldValue(m.fields, "key") == "bad") {
      ++bad_attempts;
      throw std::runtime_error("cannot handle bad");
    }
    received.Add("c", m);
    return HandlerResult::Ok();
  });
  ASSERT_NE(consumer, nullptr);
  std::map<std::string, std::vector<int>> sent;
  Publish(*producer, "good-", 7, 0, 50, &sent);
  ASSERT_TRUE(producer->Publish("bad", {{"key", "bad"}, {"seq", "999"}}).ok());
  Publish(*producer, "good-", 7, 50, 50, &sent);
  consumer->Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        const ConsumerStatus s = consumer->Status();
        return received.total() >= 100 && s.dead_lettered == 1 && s.messages_acked == 101;
      },
      15s, "100 handled, 1 dead-lettered, all 101 acked"))
      << received.total() << " " << Describe(consumer->Status());
  EXPECT_EQ(received.All(), sent);
  EXPECT_EQ(bad_attempts.load(), 3) << "max_attempts in place, then the dead letter";
  const ConsumerStatus st = consumer->Status();
  EXPECT_EQ(st.handler_failures, 3);
  EXPECT_NE(st.last_handler_error.find("cannot handle bad"), std::string::npos)
      << st.last_handler_error;

  const std::string dlq = "{orders:" + std::to_string(ShardForKey("bad", kShards)) + "}:dlq";
  std::unique_ptr<rsc::testing::RedisCli> cli = redis_.Cli();
  ASSERT_NE(cli, nullptr);
  CliReply entries = cli->Run({"XRANGE", dlq, "-", "+"});
  ASSERT_EQ(entries.type, CliReply::Type::kArray) << entries.ToString();
  ASSERT_EQ(entries.elements.size(), 1u) << entries.ToString();
  const CliReply& fields = entries.elements[0].elements[1];
  EXPECT_EQ(FieldValue(fields, "key"), "bad");
  EXPECT_EQ(FieldValue(fields, "seq"), "999");
  EXPECT_EQ(FieldValue(fields, "rsc-group"), "billing");
  EXPECT_EQ(FieldValue(fields, "rsc-attempts"), "3");
  EXPECT_NE(FieldValue(fields, "rsc-error").find("cannot handle bad"), std::string::npos);
  EXPECT_FALSE(FieldValue(fields, "rsc-source-id").empty());
  EXPECT_EQ(PendingTotal(), 0);
  consumer->Stop();
}

TEST_F(ConsumerIntegration, StopPolicyShutsTheConsumerDownAndKeepsTheEntryPending) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  ConsumerOptions o = Options();
  o.on_handler_error = HandlerErrorPolicy::kStop;
  o.max_attempts = 2;
  std::atomic<int> attempts{0};
  std::unique_ptr<Consumer> consumer = MakeConsumer(o, [&](const Message& m) {
    if (FieldValue(m.fields, "key") != "stop-me") return HandlerResult::Ok();
    ++attempts;
    return HandlerResult::Fail("refusing stop-me");
  });
  ASSERT_NE(consumer, nullptr);
  ASSERT_TRUE(producer->Publish("stop-me", {{"key", "stop-me"}, {"seq", "1"}}).ok());
  consumer->Start();
  ASSERT_TRUE(
      WaitFor([&] { return consumer->Status().stopped; }, 15s, "kStop shuts the consumer down"))
      << Describe(consumer->Status());
  const ConsumerStatus st = consumer->Status();
  EXPECT_EQ(st.phase, "left") << "a clean leave, not an abandon: " << Describe(st);
  EXPECT_NE(st.stop_error.find("refusing stop-me"), std::string::npos) << st.stop_error;
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(PendingTotal(), 1) << "the failed entry stays pending for the next start";
  consumer->Stop();
}

// kRetry with a handler that *throws* (the other kRetry test returns Fail): a throw is a
// failed attempt like any other — retried in place with Message::attempt counting up,
// max_attempts ignored, the key making no progress meanwhile — and once the handler
// succeeds the entry is XACKed and the entries behind it follow, in order.
TEST_F(ConsumerIntegration, RetryPolicyRetriesAThrowingHandlerInPlaceUntilItSucceeds) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  ConsumerOptions o = Options();
  o.on_handler_error = HandlerErrorPolicy::kRetry;
  o.max_attempts = 2;  // must not matter under kRetry
  std::mutex mu;
  std::vector<std::pair<int, int>> calls;  // (seq, attempt) of every call
  std::unique_ptr<Consumer> consumer = MakeConsumer(o, [&](const Message& m) {
    const int seq = std::stoi(FieldValue(m.fields, "seq"));
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.emplace_back(seq, m.attempt);
    }
    if (seq == 0 && m.attempt <= 3) {
      throw std::runtime_error("flaky attempt " + std::to_string(m.attempt));
    }
    return HandlerResult::Ok();
  });
  ASSERT_NE(consumer, nullptr);
  std::vector<ProducerMessage> batch;
  for (int seq = 0; seq < 3; ++seq) {
    batch.push_back({"flaky", {{"key", "flaky"}, {"seq", std::to_string(seq)}}});
  }
  for (const auto& r : producer->PublishBatch(batch)) ASSERT_TRUE(r.ok()) << r.error().message;
  consumer->Start();
  ASSERT_TRUE(WaitFor([&] { return consumer->Status().messages_acked == 3; }, 15s,
                      "all three entries handled and XACKed"))
      << Describe(consumer->Status());
  {
    std::lock_guard<std::mutex> lock(mu);
    const std::vector<std::pair<int, int>> expected{{0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 1}, {2, 1}};
    EXPECT_EQ(calls, expected) << "retried in place, attempts counted, order kept";
  }
  const ConsumerStatus st = consumer->Status();
  EXPECT_EQ(st.handler_failures, 3);
  EXPECT_EQ(st.messages_handled, 3);
  EXPECT_EQ(st.dead_lettered, 0);
  EXPECT_NE(st.last_handler_error.find("handler threw: flaky attempt 3"), std::string::npos)
      << st.last_handler_error;
  EXPECT_FALSE(st.stopped);
  EXPECT_EQ(PendingTotal(), 0);
  consumer->Stop();
  EXPECT_EQ(consumer->Status().phase, "left") << Describe(consumer->Status());
}

// kStop with a handler that throws something that is not a std::exception: caught, counted
// as a failure with a generic reason, and after max_attempts the consumer stops cleanly
// with the entry still pending.
TEST_F(ConsumerIntegration, StopPolicyTreatsANonStdThrowAsAFailure) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  ConsumerOptions o = Options();
  o.on_handler_error = HandlerErrorPolicy::kStop;
  o.max_attempts = 2;
  std::atomic<int> attempts{0};
  std::unique_ptr<Consumer> consumer = MakeConsumer(o, [&](const Message&) -> HandlerResult {
    ++attempts;
    throw 42;
  });
  ASSERT_NE(consumer, nullptr);
  ASSERT_TRUE(producer->Publish("odd", {{"key", "odd"}, {"seq", "1"}}).ok());
  consumer->Start();
  ASSERT_TRUE(
      WaitFor([&] { return consumer->Status().stopped; }, 15s, "kStop shuts the consumer down"))
      << Describe(consumer->Status());
  const ConsumerStatus st = consumer->Status();
  EXPECT_EQ(st.phase, "left") << Describe(st);
  EXPECT_NE(st.stop_error.find("handler threw a non-std exception"), std::string::npos)
      << st.stop_error;
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(st.handler_failures, 2);
  EXPECT_EQ(st.messages_acked, 0);
  EXPECT_EQ(PendingTotal(), 1) << "the failed entry stays pending for the next start";
  consumer->Stop();
}

// Blocks handler calls until Release(), as the test decides (no sleeps). Thread-safe.
class HandlerGate {
 public:
  void Hold() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.wait(lock, [&] { return released_; });
    ++returned_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  int entered() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }
  int returned() const {
    std::lock_guard<std::mutex> lock(mu_);
    return returned_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  int entered_ = 0;
  int returned_ = 0;
};

// A handler that hangs (docs/consumer.md §5). Member a reads all 4 shards and its handler
// blocks on the first entry of each; behind each hung entry a second one waits in the same
// batch.
// - No revoke: the shards just stall. Heartbeats go on and keep renewing the lease (longer
//   than one assignment lease passes without a lease expiry); nothing is XACKed.
// - b joins: two of a's shards are revoked. They stay DRAINING — the lease keeps being
//   renewed — until rebalanceTimeoutMs has passed; then the coordinator takes those two
//   shards alone (docs/protocol.md C8): a keeps its epoch and its other shards, abandons
//   the two at their own lease end, and b gets them — and the hung entries, as fresh
//   deliveries (C7) — while a's calls still hang.
// - Released, the abandoned calls XACK nothing; the calls on a's own shards complete; a
//   leaves cleanly.
TEST_F(ConsumerIntegration, HangingHandlerLosesOnlyItsStuckShardsAtTheRebalanceTimeout) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  std::map<int32_t, std::string> key_of;  // one key per shard
  for (int i = 0; key_of.size() < kAllShards.size(); ++i) {
    const std::string k = "hang-" + std::to_string(i);
    key_of.emplace(ShardForKey(k, kShards), k);
  }
  std::vector<ProducerMessage> batch;
  for (const auto& [shard, key] : key_of) {
    batch.push_back({key, {{"key", key}, {"role", "hang"}}});
    batch.push_back({key, {{"key", key}, {"role", "next"}}});
  }
  // Entry ids are per stream: an entry is named "<stream> <id>".
  auto name_of = [](const std::string& stream, const std::string& id) { return stream + " " + id; };
  std::set<std::string> hang_ids, all_ids;
  {
    const auto results = producer->PublishBatch(batch);
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].error().message;
      const std::string stream =
          "{orders:" + std::to_string(ShardForKey(batch[i].key, kShards)) + "}";
      all_ids.insert(name_of(stream, results[i].value()));
      if (i % 2 == 0) hang_ids.insert(name_of(stream, results[i].value()));
    }
  }

  HandlerGate gate;
  std::mutex mu;
  std::vector<std::string> a_calls;                      // ids a's handler was called with
  std::map<std::string, std::vector<int>> b_deliveries;  // id → attempts seen by b
  auto a_handler = [&](const Message& m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      a_calls.push_back(name_of(m.stream, m.id));
    }
    if (FieldValue(m.fields, "role") == "hang") gate.Hold();
    return HandlerResult::Ok();
  };
  auto b_handler = [&](const Message& m) {
    std::lock_guard<std::mutex> lock(mu);
    b_deliveries[name_of(m.stream, m.id)].push_back(m.attempt);
    return HandlerResult::Ok();
  };
  auto b_seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    std::string out = "b got:";
    for (const auto& [id, attempts] : b_deliveries) out += " [" + id + "]";
    out += "; hung:";
    for (const std::string& id : hang_ids) out += " [" + id + "]";
    return out;
  };
  auto b_received = [&](const std::set<std::string>& ids) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const std::string& id : ids) n += b_deliveries.count(id) != 0 ? 1 : 0;
    return n;
  };
  std::unique_ptr<Consumer> a = MakeConsumer(Options(), a_handler);
  std::unique_ptr<Consumer> b = MakeConsumer(Options(), b_handler);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // a's Stop() runs on its own thread (it must block while a call hangs). Whatever happens
  // below, the gate is released and that thread joined before the consumers are destroyed.
  std::atomic<bool> a_stop_returned{false};
  std::atomic<int> returned_when_stop_returned{-1};
  std::thread a_stopper;
  struct Cleanup {
    HandlerGate& gate;
    std::thread& stopper;
    ~Cleanup() {
      gate.Release();
      if (stopper.joinable()) stopper.join();
    }
  } cleanup{gate, a_stopper};

  a->Start();
  ASSERT_TRUE(WaitFor([&] { return gate.entered() == kShards; }, 10s,
                      "a's handler hangs on the first entry of every shard"))
      << Describe(a->Status());

  // 1. No revoke: the shards stall, the lease is renewed, nothing is XACKed.
  const int64_t hb_at_hang = a->Status().heartbeats_sent;
  const auto hang_started = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        return std::chrono::steady_clock::now() - hang_started > 1800ms &&
               a->Status().heartbeats_sent >= hb_at_hang + 5;
      },
      10s, "heartbeats for longer than one assignment lease (1500 ms)"))
      << Describe(a->Status());
  {
    const ConsumerStatus st = a->Status();
    EXPECT_EQ(AsSet(st.reading), kAllShards) << Describe(st);
    EXPECT_GT(st.lease_remaining_ms, 0) << "renewed by the heartbeats: " << Describe(st);
    EXPECT_FALSE(st.failed_closed);
    EXPECT_EQ(st.lease_expirations, 0);
    EXPECT_EQ(st.consecutive_heartbeat_failures, 0);
    EXPECT_EQ(st.messages_handled, 0);
    EXPECT_EQ(st.messages_acked, 0);
  }
  EXPECT_EQ(PendingTotal(), 8) << "both entries of every shard are in a's pending list";

  // 2. b joins: two of a's shards are revoked and stay DRAINING while the call hangs, in
  // lease (every DRAIN answer renews it), until rebalanceTimeoutMs (3 s) has passed.
  const int64_t epoch_before = a->Status().member_epoch;
  b->Start();
  ASSERT_TRUE(WaitFor([&] { return a->Status().draining.size() == 2; }, 10s,
                      "b's join revokes two of a's shards"))
      << Describe(a->Status());
  const auto drain_seen = std::chrono::steady_clock::now();
  const std::set<int32_t> revoked = AsSet(a->Status().draining);
  std::set<int32_t> kept;
  for (int32_t s : kAllShards) {
    if (revoked.count(s) == 0) kept.insert(s);
  }
  auto last_draining = drain_seen;
  std::string unexpected;
  ASSERT_TRUE(WaitFor(
      [&] {
        const ConsumerStatus st = a->Status();
        if (!st.taken.empty()) return true;
        if (AsSet(st.draining) == revoked && st.revoked.empty() && !st.failed_closed &&
            st.lease_expirations == 0 && st.lease_remaining_ms > 0) {
          last_draining = std::chrono::steady_clock::now();
        } else if (unexpected.empty()) {
          unexpected = Describe(st);
        }
        return false;
      },
      10s, "a's two shards taken for draining past rebalanceTimeoutMs (3000 ms)"))
      << Describe(a->Status());
  const auto taken_seen = std::chrono::steady_clock::now();
  EXPECT_EQ(unexpected, "") << "before the take the revoked shards stay DRAINING, in lease";
  EXPECT_GT(last_draining - drain_seen, 1500ms)
      << "DRAINING outlasts one assignment lease: heartbeats renew it";
  EXPECT_TRUE(coordinator_->WaitForLog("event=shard_taken", 5s)) << coordinator_->LogTail();
  EXPECT_EQ(AsSet(a->Status().taken), revoked);

  // 3. C8: the stuck shards alone move. a is not fenced: same epoch, no rejoin, the other
  // two shards stay a's. At their own lease end (at most assignmentLeaseMs after the take)
  // a abandons them; the coordinator releases them memberLeaseMs (2.5 s) after the take
  // and b takes them over — while a's calls still hang — and gets the hung entries as fresh
  // deliveries (C7). Nothing a's stuck calls do afterwards is XACKed.
  ASSERT_TRUE(WaitFor([&] { return b_received(hang_ids) >= 2; }, 10s,
                      "b redelivers the two hung entries of the taken shards"))
      << "a: " << Describe(a->Status()) << "\nb: " << Describe(b->Status()) << "\n"
      << b_seen();
  const auto moved = std::chrono::steady_clock::now();
  EXPECT_EQ(gate.returned(), 0) << "the calls still hang";
  {
    const ConsumerStatus st = a->Status();
    EXPECT_EQ(st.member_epoch, epoch_before) << Describe(st);
    EXPECT_EQ(st.rejoins, 0) << Describe(st);
    EXPECT_EQ(AsSet(st.reading), kept) << Describe(st);
    EXPECT_EQ(st.shards_taken, 2) << Describe(st);
    EXPECT_FALSE(st.failed_closed) << Describe(st);
  }
  EXPECT_FALSE(coordinator_->LogContains("event=member_fenced")) << coordinator_->LogTail();
  EXPECT_TRUE(coordinator_->LogContains("taken shard released")) << coordinator_->LogTail();
  // Bound (docs/protocol.md C8): asked to move → new owner reading within rebalanceTimeoutMs
  // + memberLeaseMs (+ a heartbeat interval and scheduling).
  EXPECT_LT(moved - drain_seen, 3000ms + 2500ms + 1500ms);
  EXPECT_LT(moved - taken_seen, 2500ms + 1500ms);
  std::printf(
      "stuck shard moved: %lld ms after the revoke, %lld ms after the take\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(moved - drain_seen).count()),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(moved - taken_seen).count()));

  // 4. Release: every hung call returns. The two on the taken shards were abandoned: their
  // results are not XACKed and nothing behind them is handled by a. The two on a's own
  // shards complete as usual. Every entry ends up XACKed, each taken entry by b.
  gate.Release();
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 15s, "every entry is XACKed"))
      << "a: " << Describe(a->Status()) << "\nb: " << Describe(b->Status());
  ASSERT_TRUE(WaitFor([&] { return a->Status().taken.empty(); }, 10s,
                      "a forgets the taken shards once their work stopped"))
      << Describe(a->Status());
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [id, attempts] : b_deliveries) {
      EXPECT_EQ(attempts, std::vector<int>{1}) << "a fresh delivery to b: " << id;
    }
  }
  EXPECT_EQ(a->Status().messages_acked, 4) << "a's own two shards, two entries each";

  // 5. a stops (a clean leave now: nothing hangs); b ends up with every shard.
  a_stopper = std::thread([&] {
    a->Stop();
    returned_when_stop_returned = gate.returned();
    a_stop_returned = true;
  });
  ASSERT_TRUE(WaitFor([&] { return a_stop_returned.load(); }, 15s, "a's Stop() returns"))
      << Describe(a->Status());
  EXPECT_GE(returned_when_stop_returned.load(), kShards);
  const ConsumerStatus a_done = a->Status();
  EXPECT_TRUE(a_done.stopped);
  EXPECT_EQ(a_done.phase, "left") << Describe(a_done);
  ASSERT_TRUE(WaitFor([&] { return AsSet(b->Status().reading) == kAllShards; }, 15s,
                      "b reads every shard after a left"))
      << "b: " << Describe(b->Status());
  EXPECT_EQ(PendingTotal(), 0);
  b->Stop();
  EXPECT_EQ(b->Status().phase, "left") << Describe(b->Status());
}

// Stop() while a handler call hangs on a shard nobody revoked (docs/consumer.md §5): the
// shard cannot drain, so the leave is never sent; after shutdown_timeout Stop() gives up,
// the member expires (memberLeaseMs after its last heartbeat) instead of leaving, and only
// then do its shards — the ones it had already drained too — go to the other member, which
// redelivers the hung entry. Stop() returns only once the call returns; it XACKs nothing.
TEST_F(ConsumerIntegration, StopWithAHangingHandlerGivesUpAfterShutdownTimeoutAndWaitsForIt) {
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  HandlerGate gate;
  std::mutex mu;
  std::vector<std::string> a_calls;
  std::map<std::string, std::vector<int>> b_deliveries;  // "<stream> <id>" → attempts
  ConsumerOptions a_options = Options();
  a_options.shutdown_timeout = 1000ms;
  std::unique_ptr<Consumer> a = MakeConsumer(a_options, [&](const Message& m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      a_calls.push_back(m.stream + " " + m.id);
    }
    gate.Hold();
    return HandlerResult::Ok();
  });
  std::unique_ptr<Consumer> b = MakeConsumer(Options(), [&](const Message& m) {
    std::lock_guard<std::mutex> lock(mu);
    b_deliveries[m.stream + " " + m.id].push_back(m.attempt);
    return HandlerResult::Ok();
  });
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::atomic<bool> a_stop_returned{false};
  std::atomic<int> returned_when_stop_returned{-1};
  std::thread a_stopper;
  struct Cleanup {
    HandlerGate& gate;
    std::thread& stopper;
    ~Cleanup() {
      gate.Release();
      if (stopper.joinable()) stopper.join();
    }
  } cleanup{gate, a_stopper};

  a->Start();
  b->Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        return a->Status().reading.size() == 2 && b->Status().reading.size() == 2 &&
               a->Status().draining.empty();
      },
      15s, "a and b each read 2 shards"))
      << "a: " << Describe(a->Status()) << "\nb: " << Describe(b->Status());
  const std::set<int32_t> a_shards = AsSet(a->Status().reading);
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    const std::string k = "stuck-" + std::to_string(i);
    if (a_shards.count(ShardForKey(k, kShards)) != 0) key = k;
  }
  const int32_t hung_shard = ShardForKey(key, kShards);
  const ProducerResult<std::string> published = producer->Publish(key, {{"key", key}});
  ASSERT_TRUE(published.ok()) << published.error().message;
  const std::string hung = "{orders:" + std::to_string(hung_shard) + "} " + published.value();
  ASSERT_TRUE(WaitFor([&] { return gate.entered() == 1; }, 10s, "a's handler hangs"))
      << Describe(a->Status());

  a_stopper = std::thread([&] {
    a->Stop();
    returned_when_stop_returned = gate.returned();
    a_stop_returned = true;
  });
  // a's other shard drains at once; the hung one stays DRAINING, so no leave is sent.
  ASSERT_TRUE(WaitFor(
      [&] {
        const ConsumerStatus st = a->Status();
        return st.phase == "leaving" && st.reading.empty() &&
               st.draining == std::vector<int32_t>{hung_shard};
      },
      5s, "a drains everything but the hung shard"))
      << Describe(a->Status());
  // Nothing of a's moves to b until a expires: a never left, its drained shard included.
  size_t b_most = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        const size_t n = b->Status().reading.size();  // sampled before the log is checked
        if (coordinator_->LogContains("event=member_expired")) return true;
        b_most = std::max(b_most, n);
        return false;
      },
      10s, "a expires after shutdown_timeout (1 s) + memberLeaseMs (2.5 s)"))
      << Describe(a->Status()) << coordinator_->LogTail();
  EXPECT_EQ(b_most, 2u) << "b got a shard of a's before a expired";
  EXPECT_FALSE(coordinator_->LogContains("event=member_left")) << coordinator_->LogTail();
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return b_deliveries.count(hung) != 0;
      },
      10s, "b takes the hung shard over and redelivers the entry"))
      << "b: " << Describe(b->Status());
  EXPECT_EQ(AsSet(b->Status().reading), kAllShards);
  EXPECT_FALSE(a_stop_returned.load()) << "Stop() returned while the handler call hangs";

  gate.Release();
  ASSERT_TRUE(WaitFor([&] { return a_stop_returned.load(); }, 10s, "a's Stop() returns"));
  EXPECT_EQ(returned_when_stop_returned.load(), 1);
  EXPECT_EQ(a->Status().messages_acked, 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(a_calls, std::vector<std::string>{hung});
    EXPECT_EQ(b_deliveries[hung], std::vector<int>{1});
  }
  ASSERT_TRUE(WaitFor([&] { return PendingTotal() == 0; }, 5s, "b XACKed it"));
  b->Stop();
}

// The coordinator binary listening on a fixed port (CoordinatorProcess always picks a free
// one), so a "new coordinator process" can take the place of a killed one at the address
// the consumer was configured with. The server sets SO_REUSEADDR.
class FixedPortCoordinator {
 public:
  FixedPortCoordinator(std::string binary, std::string redis_url, int port)
      : binary_(std::move(binary)), redis_url_(std::move(redis_url)), port_(port) {
    char tmpl[] = "/tmp/rsc-consumer-it-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  }
  ~FixedPortCoordinator() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  ::testing::AssertionResult Spawn() {
    if (dir_.empty()) return ::testing::AssertionFailure() << "mkdtemp failed";
    const std::vector<std::string> args = {binary_,
                                           "--redis",
                                           redis_url_,
                                           "--listen",
                                           "127.0.0.1:" + std::to_string(port_),
                                           "--tick-interval-ms",
                                           "200",
                                           "--state-dir",
                                           dir_ + "/state"};
    std::vector<char*> argv;
    for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    const std::string log = dir_ + "/log";
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) return ::testing::AssertionFailure() << "fork failed";
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
      ::dup2(::fileno(stdout), 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return ::testing::AssertionSuccess();
  }
  std::string Log() const {
    std::ifstream in(dir_ + "/log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string binary_;
  std::string redis_url_;
  int port_;
  std::string dir_;
  pid_t pid_ = -1;
};

TEST_F(ConsumerIntegration, FailsClosedWhileTheCoordinatorIsDownAndResumesAfterARestart) {
  Received received;
  std::unique_ptr<Consumer> consumer = MakeConsumer(Options(), [&](const Message& m) {
    received.Add("c", m);
    return HandlerResult::Ok();
  });
  ASSERT_NE(consumer, nullptr);
  consumer->Start();
  ASSERT_TRUE(WaitFor([&] { return AsSet(consumer->Status().reading) == kAllShards; }, 10s,
                      "reads all shards"))
      << Describe(consumer->Status());
  std::unique_ptr<rsc::testing::RedisCli> cli = redis_.Cli();
  ASSERT_NE(cli, nullptr);
  // Writes straight to the shard streams (a producer would fail closed on its own lease).
  std::map<std::string, std::vector<int>> sent;
  auto xadd = [&](int seq) {
    const std::string key = "key-" + std::to_string(seq % 11);
    const std::string stream = "{orders:" + std::to_string(ShardForKey(key, kShards)) + "}";
    ASSERT_TRUE(cli->Run({"XADD", stream, "*", "key", key, "seq", std::to_string(seq)}).ok());
    sent[key].push_back(seq);
  };
  for (int i = 0; i < 20; ++i) xadd(i);
  ASSERT_TRUE(WaitFor([&] { return received.total() == 20; }, 10s, "first 20 handled"))
      << Describe(consumer->Status());

  const int port = coordinator_->Port();
  const std::string binary = coordinator_->BinaryPath();
  coordinator_->Kill();
  const auto killed_at = std::chrono::steady_clock::now();
  // C4: heartbeats fail, the lease (1500 ms from the last successful send) runs out.
  ASSERT_TRUE(WaitFor(
      [&] {
        const ConsumerStatus s = consumer->Status();
        return s.reading.empty() && s.failed_closed;
      },
      5s, "the consumer stops reading at lease end"))
      << Describe(consumer->Status());
  const auto closed_after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed_at);
  // The lease counts from a send at most one heartbeat interval (200 ms) before the kill.
  EXPECT_GE(closed_after.count(), 1500 - 200 - 100);
  const ConsumerStatus closed = consumer->Status();
  EXPECT_EQ(closed.lease_remaining_ms, 0);
  EXPECT_GT(closed.consecutive_heartbeat_failures, 0);
  EXPECT_FALSE(closed.last_heartbeat_error.empty());
  EXPECT_GE(closed.lease_expirations, 1);

  // Messages written while failed closed are not handled ...
  for (int i = 20; i < 40; ++i) xadd(i);
  EXPECT_EQ(received.total(), 20) << "nothing is read while the lease is gone";

  // ... until a new coordinator process serves the same Redis at the same address.
  FixedPortCoordinator restarted(binary, redis_.Url(), port);
  ASSERT_TRUE(restarted.Spawn());
  ASSERT_TRUE(WaitFor([&] { return AsSet(consumer->Status().reading) == kAllShards; }, 20s,
                      "reading again after the coordinator restart"))
      << Describe(consumer->Status()) << "\n"
      << restarted.Log();
  ASSERT_TRUE(WaitFor([&] { return received.total() >= 40; }, 10s, "the backlog is handled"))
      << Describe(consumer->Status());
  EXPECT_EQ(received.FirstDeliveries(), sent);
  EXPECT_FALSE(consumer->Status().failed_closed);
  consumer->Stop();
  EXPECT_EQ(consumer->Status().phase, "left") << Describe(consumer->Status());
}

}  // namespace
}  // namespace rsc
