// The public observability hooks (ConsumerOptions::on_event, ProducerOptions::on_publish)
// against a real redis-server and rsc-coordinator. The end-to-end test (tests/e2e) and any
// audit build on these orderings, so they are asserted here directly:
//
// - per consumer and shard, an acquire comes before every read, delivery and ack of that
//   holding, and the release after the last of them; every read starts inside the lease; a shard
//   handed over (DRAIN) is acquired by the new owner only after the old owner's release; each lease
//   event is the send time of a successful heartbeat plus assignmentLeaseMs;
// - an abandon at lease end (coordinator killed) is reported when the reader really ends:
//   while a handler call hangs, its shard has no release yet although it is no longer
//   listed as read; the release ("abandoned") follows the handler's return;
// - each acknowledged XADD is reported with its id, shard, routing version, a send time
//   before its ack and before the end of the routing lease it was routed under.
//
// Run inside scripts/netns.sh (the host loopback is throttled).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/live_group.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "rsc/routing.h"
#include "support/wait.h"

namespace rsc {
namespace {

using namespace std::chrono_literals;
using rsc::testing::FieldValue;
using rsc::testing::WaitFor;

constexpr int kShards = 4;
constexpr int64_t kAssignmentLeaseUs = 1500 * 1000;  // FastLeases
constexpr int64_t kRoutingLeaseUs = 3000 * 1000;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Every event one consumer reported, in the order the hook was called. Thread-safe.
class Recorder {
 public:
  void Add(const ConsumerEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  std::vector<ConsumerEvent> Events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<ConsumerEvent> Of(ConsumerEventKind kind, int32_t shard = -1) const {
    std::vector<ConsumerEvent> out;
    for (const ConsumerEvent& e : Events()) {
      if (e.kind == kind && (shard < 0 || e.shard == shard)) out.push_back(e);
    }
    return out;
  }
  ConsumerEventHandler Hook() {
    return [this](const ConsumerEvent& e) { Add(e); };
  }

 private:
  mutable std::mutex mu_;
  std::vector<ConsumerEvent> events_;
};

std::string Show(const ConsumerEvent& e) {
  return std::string(ConsumerEventKindName(e.kind)) + " shard=" + std::to_string(e.shard) +
         " t=" + std::to_string(e.t_us) + " id=" + e.id + " detail=" + e.detail +
         " status=" + e.status;
}

// Checks the per-shard shape of one consumer's events: holdings are acquire … release, with
// every read/deliver/ack of the shard inside one, stamps non-decreasing per shard.
void ExpectWellFormedHoldings(const std::vector<ConsumerEvent>& events, const std::string& who) {
  std::map<int32_t, bool> holding;
  std::map<int32_t, int64_t> last_t;
  int64_t lease_end = -1;  // the latest lease granted (leases only move forward)
  for (const ConsumerEvent& e : events) {
    if (e.kind == ConsumerEventKind::kLease) lease_end = std::max(lease_end, e.lease_end_us);
    if (e.kind == ConsumerEventKind::kAcquire) lease_end = std::max(lease_end, e.lease_end_us);
    if (e.kind == ConsumerEventKind::kRead) {
      // C1 at µs precision: the runtime rounds its lease checks so no read starts late.
      EXPECT_LT(e.t_us, lease_end) << who << ": read outside the lease: " << Show(e);
    }
    if (e.kind == ConsumerEventKind::kLease || e.kind == ConsumerEventKind::kHeartbeat) continue;
    EXPECT_GE(e.t_us, last_t[e.shard])
        << who << ": stamps go back on shard " << e.shard << ": " << Show(e);
    last_t[e.shard] = e.t_us;
    switch (e.kind) {
      case ConsumerEventKind::kAcquire:
        EXPECT_FALSE(holding[e.shard]) << who << ": acquired twice: " << Show(e);
        holding[e.shard] = true;
        EXPECT_GT(e.lease_end_us, e.t_us) << who << ": acquired outside a lease: " << Show(e);
        EXPECT_GT(e.assignment_epoch, 0) << Show(e);
        break;
      case ConsumerEventKind::kRelease:
        EXPECT_TRUE(holding[e.shard]) << who << ": release without acquire: " << Show(e);
        holding[e.shard] = false;
        break;
      default:
        EXPECT_TRUE(holding[e.shard]) << who << ": outside a holding: " << Show(e);
    }
  }
  for (const auto& [shard, open] : holding) {
    EXPECT_FALSE(open) << who << ": shard " << shard << " never released";
  }
}

struct Holding {
  int32_t shard = 0;
  int64_t from_us = 0;
  int64_t to_us = 0;  // release
};

std::vector<Holding> Holdings(const std::vector<ConsumerEvent>& events) {
  std::vector<Holding> out;
  std::map<int32_t, int64_t> open;
  for (const ConsumerEvent& e : events) {
    if (e.kind == ConsumerEventKind::kAcquire) open[e.shard] = e.t_us;
    if (e.kind == ConsumerEventKind::kRelease && open.count(e.shard) != 0) {
      out.push_back({e.shard, open[e.shard], e.t_us});
      open.erase(e.shard);
    }
  }
  return out;
}

class ObservabilityHooks : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, "orders", "billing", kShards,
                                             rsc::testing::FastLeases()));
  }

  std::string Endpoint() const { return "127.0.0.1:" + std::to_string(coordinator_->Port()); }

  ConsumerOptions Options(Recorder* recorder) const {
    ConsumerOptions o;
    o.coordinator_endpoints = {Endpoint()};
    o.stream = "orders";
    o.group = "billing";
    o.redis_url = redis_.Url();
    o.block = 200ms;
    o.http_timeout = 1000ms;
    o.on_event = recorder->Hook();
    return o;
  }

  std::unique_ptr<Consumer> MakeConsumer(ConsumerOptions o, MessageHandler handler) {
    ConsumerResult<std::unique_ptr<Consumer>> c =
        Consumer::Create(std::move(o), std::move(handler));
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::unique_ptr<Producer> MakeProducer(PublishEventHandler hook = nullptr) {
    ProducerOptions o;
    o.coordinator_endpoints = {Endpoint()};
    o.stream = "orders";
    o.group = "billing";
    o.redis_url = redis_.Url();
    o.on_publish = std::move(hook);
    ProducerResult<std::unique_ptr<Producer>> p = Producer::Create(o);
    EXPECT_TRUE(p.ok()) << p.error().message;
    if (!p.ok()) return nullptr;
    std::unique_ptr<Producer> producer = std::move(p).value();
    EXPECT_TRUE(producer->WaitForRouting(10s)) << producer->Metrics().last_refresh_error;
    return producer;
  }

  void Publish(Producer& producer, int first, int count) {
    std::vector<ProducerMessage> batch;
    for (int i = first; i < first + count; ++i) {
      const std::string key = "key-" + std::to_string(i % 13);
      batch.push_back({key, {{"key", key}, {"seq", std::to_string(i)}}});
    }
    for (const auto& r : producer.PublishBatch(batch)) {
      ASSERT_TRUE(r.ok()) << r.error().message;
    }
  }

  rsc::testing::RedisProcess redis_;
  std::unique_ptr<rsc::testing::CoordinatorProcess> coordinator_;
};

TEST_F(ObservabilityHooks, AcquireBeforeReadsReleaseAfterLastDeliveryAndHandoffsInOrder) {
  Recorder ra, rb;
  std::atomic<int> handled{0};
  auto handler = [&](const Message&) {
    ++handled;
    return HandlerResult::Ok();
  };
  std::unique_ptr<Consumer> a = MakeConsumer(Options(&ra), handler);
  ASSERT_NE(a, nullptr);
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->Status().reading.size() == kShards; }, 10s, "a reads all"));
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  Publish(*producer, 0, 100);
  ASSERT_TRUE(WaitFor([&] { return handled.load() >= 100; }, 10s, "first 100 handled"));

  std::unique_ptr<Consumer> b = MakeConsumer(Options(&rb), handler);
  ASSERT_NE(b, nullptr);
  b->Start();
  ASSERT_TRUE(
      WaitFor([&] { return a->Status().reading.size() == 2 && b->Status().reading.size() == 2; },
              10s, "2 + 2 after the rebalance"));
  Publish(*producer, 100, 100);
  ASSERT_TRUE(WaitFor([&] { return handled.load() >= 200; }, 10s, "all 200 handled"));
  a->Stop();
  b->Stop();

  for (auto [rec, who] : {std::pair{&ra, "a"}, std::pair{&rb, "b"}}) {
    const std::vector<ConsumerEvent> events = rec->Events();
    ExpectWellFormedHoldings(events, who);
    // Each holding begins with the takeover read, right after the acquire.
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind != ConsumerEventKind::kAcquire) continue;
      for (size_t j = i + 1; j < events.size(); ++j) {
        if (events[j].shard != events[i].shard) continue;
        EXPECT_EQ(events[j].kind, ConsumerEventKind::kRead) << who << ": " << Show(events[j]);
        EXPECT_EQ(events[j].detail, "XAUTOCLAIM") << who;
        break;
      }
    }
    for (const ConsumerEvent& e : rec->Of(ConsumerEventKind::kRelease)) {
      EXPECT_EQ(e.detail, "drained") << who << ": DRAIN and Stop() both drain: " << Show(e);
    }
    // Every successful heartbeat moved the lease to its send time + assignmentLeaseMs.
    std::set<int64_t> ok_sends;
    for (const ConsumerEvent& e : rec->Of(ConsumerEventKind::kHeartbeat)) {
      EXPECT_LE(e.sent_us, e.t_us);
      if (e.status == "OK" || e.status == "DRAIN" || e.status == "REVOKE_PENDING") {
        EXPECT_GE(e.member_epoch, -1);
        EXPECT_FALSE(e.lineage.empty());
        ok_sends.insert(e.sent_us);
      }
    }
    // Leases are reported per shard: with each acquire, then with each renewal.
    std::vector<ConsumerEvent> leases = rec->Of(ConsumerEventKind::kLease);
    for (const ConsumerEvent& e : rec->Of(ConsumerEventKind::kAcquire)) leases.push_back(e);
    ASSERT_FALSE(leases.empty()) << who;
    for (const ConsumerEvent& e : leases) {
      EXPECT_GE(e.shard, 0) << who << ": a lease not about a shard";
      EXPECT_EQ(ok_sends.count(e.lease_end_us - kAssignmentLeaseUs), 1u)
          << who << ": lease end " << e.lease_end_us << " is no send time + lease";
    }
    // Everything delivered was acknowledged (no failures, clean stops).
    std::set<std::string> delivered, acked;
    for (const ConsumerEvent& e : rec->Of(ConsumerEventKind::kDeliver)) {
      delivered.insert(e.stream + "/" + e.id);
      EXPECT_EQ(e.attempt, 1);
      EXPECT_EQ(ShardForKey(FieldValue(e.fields, "key"), kShards), e.shard);
    }
    for (const ConsumerEvent& e : rec->Of(ConsumerEventKind::kAck)) {
      acked.insert(e.stream + "/" + e.id);
    }
    EXPECT_EQ(delivered, acked) << who;
  }
  EXPECT_EQ(ra.Of(ConsumerEventKind::kDeliver).size() + rb.Of(ConsumerEventKind::kDeliver).size(),
            200u);

  // Handoffs (the rebalance, and the stops): a's and b's holdings of a shard never overlap.
  EXPECT_GE(rb.Of(ConsumerEventKind::kAcquire).size(), 2u);
  for (const Holding& x : Holdings(ra.Events())) {
    for (const Holding& y : Holdings(rb.Events())) {
      if (x.shard != y.shard) continue;
      EXPECT_TRUE(x.to_us < y.from_us || y.to_us < x.from_us)
          << "shard " << x.shard << " held by a [" << x.from_us << ", " << x.to_us << "] and by b ["
          << y.from_us << ", " << y.to_us << "]";
    }
  }
}

TEST_F(ObservabilityHooks, AbandonIsReleasedOnlyWhenTheHangingHandlerReturns) {
  Recorder rec;
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool let_go = false;
  int32_t hung_shard = -1;
  ConsumerOptions o = Options(&rec);
  o.shutdown_timeout = 500ms;
  std::unique_ptr<Consumer> consumer = MakeConsumer(o, [&](const Message& m) {
    std::unique_lock<std::mutex> lock(mu);
    if (hung_shard < 0) hung_shard = m.shard;
    if (m.shard == hung_shard) {
      entered = true;
      cv.notify_all();
      cv.wait(lock, [&] { return let_go; });
    }
    return HandlerResult::Ok();
  });
  ASSERT_NE(consumer, nullptr);
  // Whatever fails below, the handler is let go before the consumer is destroyed (its
  // destructor waits for running handler calls).
  struct LetGo {
    std::mutex& mu;
    std::condition_variable& cv;
    bool& let_go;
    ~LetGo() {
      {
        std::lock_guard<std::mutex> lock(mu);
        let_go = true;
      }
      cv.notify_all();
    }
  } let_go_on_exit{mu, cv, let_go};
  consumer->Start();
  ASSERT_TRUE(WaitFor([&] { return consumer->Status().reading.size() == kShards; }, 10s,
                      "reads all shards"));
  std::unique_ptr<Producer> producer = MakeProducer();
  ASSERT_NE(producer, nullptr);
  Publish(*producer, 0, 1);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return entered; })) << "the handler was not called";
  }
  coordinator_->Kill();  // no more heartbeats: the lease runs out (C4)
  ASSERT_TRUE(WaitFor(
      [&] {
        const ConsumerStatus s = consumer->Status();
        return s.failed_closed && s.reading.empty();
      },
      5s, "the consumer abandons every shard at lease end"));
  // The other readers ended (their blocking reads are capped by the lease) ...
  ASSERT_TRUE(WaitFor([&] { return rec.Of(ConsumerEventKind::kRelease).size() == kShards - 1; }, 5s,
                      "the idle shards are released"));
  for (const ConsumerEvent& e : rec.Of(ConsumerEventKind::kRelease)) {
    EXPECT_NE(e.shard, hung_shard);
    EXPECT_EQ(e.detail, "abandoned") << Show(e);
  }
  // ... but the hung shard's reader is still inside the handler: no release yet.
  std::this_thread::sleep_for(300ms);  // give a wrong early release the chance to show
  EXPECT_TRUE(rec.Of(ConsumerEventKind::kRelease, hung_shard).empty())
      << "released while its handler call is still running";

  int64_t returned_us = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    let_go = true;
    returned_us = NowUs();
  }
  cv.notify_all();
  ASSERT_TRUE(WaitFor([&] { return !rec.Of(ConsumerEventKind::kRelease, hung_shard).empty(); }, 5s,
                      "the hung shard is released once the handler returned"));
  const ConsumerEvent release = rec.Of(ConsumerEventKind::kRelease, hung_shard).front();
  EXPECT_EQ(release.detail, "abandoned");
  EXPECT_GE(release.t_us, returned_us);
  // Abandoned work is not acknowledged: the entry stays pending for the next owner.
  EXPECT_TRUE(rec.Of(ConsumerEventKind::kAck, hung_shard).empty());
  consumer->Stop();
  ExpectWellFormedHoldings(rec.Events(), "consumer");
  // Heartbeats failed after the kill, and are reported as such.
  bool saw_failure = false;
  for (const ConsumerEvent& e : rec.Of(ConsumerEventKind::kHeartbeat)) {
    saw_failure |= e.status == "UNKNOWN_RESULT" && !e.detail.empty();
  }
  EXPECT_TRUE(saw_failure);
}

TEST_F(ObservabilityHooks, PublishHookReportsSendTimeVersionAndRoutingLease) {
  std::mutex mu;
  std::vector<PublishEvent> events;
  std::unique_ptr<Producer> producer = MakeProducer([&](const PublishEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  ASSERT_NE(producer, nullptr);
  const int64_t before_us = NowUs();
  std::vector<std::string> ids;
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    const std::string key = "key-" + std::to_string(i);
    ProducerResult<std::string> r = producer->Publish(key, {{"key", key}, {"n", "1"}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    ids.push_back(r.value());
    keys.push_back(key);
  }
  std::vector<ProducerMessage> batch;
  for (int i = 0; i < 10; ++i) {
    const std::string key = "batch-" + std::to_string(i);
    batch.push_back({key, {{"key", key}}});
  }
  for (const auto& r : producer->PublishBatch(batch)) {
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  ProducerResult<std::string> refused = producer->Publish("x", {});
  ASSERT_FALSE(refused.ok()) << "an entry needs a field";
  const int64_t after_us = NowUs();
  const int64_t version = producer->Metrics().metadata_version;

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(events.size(), 20u) << "one event per acknowledged XADD, none for the refusal";
  for (size_t i = 0; i < events.size(); ++i) {
    const PublishEvent& e = events[i];
    if (i < ids.size()) {
      EXPECT_EQ(e.id, ids[i]);
      EXPECT_EQ(e.key, keys[i]);
    }
    EXPECT_EQ(FieldValue(e.fields, "key"), e.key);
    EXPECT_EQ(e.shard, ShardForKey(e.key, kShards));
    EXPECT_EQ(e.stream, "{orders:" + std::to_string(e.shard) + "}");
    EXPECT_EQ(e.metadata_version, version);
    EXPECT_LE(before_us, e.sent_us);
    EXPECT_LE(e.sent_us, e.acked_us);
    EXPECT_LE(e.acked_us, after_us);
    EXPECT_LT(e.sent_us, e.routing_lease_end_us) << "sent outside the routing lease";
    EXPECT_LE(e.routing_lease_end_us - e.sent_us, kRoutingLeaseUs);
  }
}

}  // namespace
}  // namespace rsc
