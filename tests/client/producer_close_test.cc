// The producer (producer.cc) on a test Platform (client/platform.h), no coordinator and no
// Redis: what its threads do when a publish races Close(), forced into one order with a FIFO
// mutex whose lock can be held back (the platform's HTTP answers nothing, its executor is
// counted); and PR5's check right before the write, with a clock the test moves.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "client/http_transport.h"
#include "client/platform.h"
#include "client/producer_factory.h"
#include "core/protocol_json.h"
#include "rsc/producer.h"

namespace rsc::client {
namespace {

using std::chrono::milliseconds;

// A SyncPort whose mutexes are handed over in FIFO order, with a hook run by each lock()
// before the caller queues (it may block) and one run once it is queued.
class FifoSync : public SyncPort {
 public:
  using Hook = std::function<void(int mutex_index)>;
  Hook before_queue;
  Hook queued;

  class FifoMutex : public Mutex {
   public:
    FifoMutex(FifoSync& sync, int index) : sync_(sync), index_(index) {}
    void lock() override {
      if (sync_.before_queue) sync_.before_queue(index_);
      std::unique_lock<std::mutex> l(m_);
      const uint64_t ticket = next_++;
      if (sync_.queued) {
        l.unlock();
        sync_.queued(index_);
        l.lock();
      }
      cv_.wait(l, [&] { return serving_ == ticket; });
    }
    bool try_lock() override {
      std::lock_guard<std::mutex> l(m_);
      if (serving_ != next_) return false;
      ++next_;
      return true;
    }
    void unlock() override {
      std::lock_guard<std::mutex> l(m_);
      ++serving_;
      cv_.notify_all();
    }

   private:
    FifoSync& sync_;
    const int index_;
    std::mutex m_;
    std::condition_variable cv_;
    uint64_t next_ = 0;
    uint64_t serving_ = 0;
  };

  class AnyCondVar : public CondVar {
   public:
    void Wait(Mutex& m) override { cv_.wait(m); }
    void WaitFor(Mutex& m, milliseconds timeout) override { cv_.wait_for(m, timeout); }
    void NotifyAll() override { cv_.notify_all(); }

   private:
    std::condition_variable_any cv_;
  };

  std::unique_ptr<Mutex> NewMutex() override {
    return std::make_unique<FifoMutex>(*this, mutexes_++);
  }
  std::unique_ptr<CondVar> NewCondVar() override { return std::make_unique<AnyCondVar>(); }

 private:
  int mutexes_ = 0;
};

class NoRedis : public redis::Executor {
 public:
  std::vector<Result<redis::Reply>> RunBatch(const std::vector<redis::KeyedCommand>& cmds,
                                             redis::CommandKind /*kind*/,
                                             const redis::BeforeWrite& /*before_write*/) override {
    return std::vector<Result<redis::Reply>>(cmds.size(),
                                             MakeError(ErrorCode::kRedisUnavailable, "test"));
  }
  Result<redis::Reply> Run(std::string_view /*key*/, const redis::Command& /*cmd*/,
                           redis::CommandKind /*kind*/) override {
    return MakeError(ErrorCode::kRedisUnavailable, "test");
  }
  Result<std::vector<std::string>> Masters() override { return std::vector<std::string>{}; }
  Result<redis::Reply> RunOn(const std::string& /*node*/, const redis::Command& /*cmd*/,
                             redis::CommandKind /*kind*/) override {
    return MakeError(ErrorCode::kRedisUnavailable, "test");
  }
  std::string Describe() const override { return "none"; }
};

class TestPlatform : public Platform {
 public:
  explicit TestPlatform(FifoSync& sync, std::atomic<int>& opened) : sync_(sync), opened_(opened) {}
  SyncPort& Sync() override { return sync_; }
  TimeMs NowMs(bool round_up) override { return round_up ? SteadyNowMsCeil() : SteadyNowMs(); }
  int64_t NowUs() override { return SteadyNowUs(); }
  double Random() override { return 0.5; }
  std::unique_ptr<Thread> StartThread(const char* /*name*/, std::function<void()> body) override {
    class T : public Thread {
     public:
      explicit T(std::function<void()> body) : t_(std::move(body)) {}
      ~T() override { Join(); }
      void Join() override {
        if (t_.joinable()) t_.join();
      }

     private:
      std::thread t_;
    };
    return std::make_unique<T>(std::move(body));
  }
  HttpOutcome Request(const HttpCall& /*call*/) override {
    std::this_thread::sleep_for(milliseconds(5));  // a coordinator that never answers
    return HttpOutcome{0, "", "no coordinator here", "test"};
  }
  std::string EndpointName(int /*endpoint*/) const override { return "test"; }
  Result<std::unique_ptr<redis::Executor>> OpenRedis() override {
    ++opened_;
    return std::unique_ptr<redis::Executor>(std::make_unique<NoRedis>());
  }

 private:
  FifoSync& sync_;
  std::atomic<int>& opened_;
};

// A publish that passed the closed check, then found Close() ahead of it at the Redis lock,
// must not open a new executor once Close() reset the old one: nothing would close it.
TEST(ProducerClose, APublishQueuedBehindCloseOpensNoExecutor) {
  FifoSync sync;
  std::atomic<int> opened{0};
  // The producer's mutexes in the order it makes them: its state (0), its Redis lock (1).
  constexpr int kRedisLock = 1;
  std::mutex m;
  std::condition_variable cv;
  std::thread::id late_publisher;
  std::thread::id closer;
  bool late_at_lock = false;
  bool closer_queued = false;
  sync.before_queue = [&](int index) {
    if (index != kRedisLock) return;
    std::unique_lock<std::mutex> l(m);
    if (std::this_thread::get_id() != late_publisher) return;
    late_at_lock = true;
    cv.notify_all();
    // Held back until Close() waits for the Redis lock (bounded: the test fails below).
    cv.wait_for(l, std::chrono::seconds(10), [&] { return closer_queued; });
  };
  sync.queued = [&](int index) {
    if (index != kRedisLock) return;
    std::lock_guard<std::mutex> l(m);
    if (std::this_thread::get_id() == closer) closer_queued = true;
    cv.notify_all();
  };

  ProducerOptions o;
  o.coordinator_endpoints = {"coordinator:7700"};
  o.stream = "orders";
  o.group = "billing";
  o.redis_url = "redis://redis:6379";
  o.first_routing_wait = std::chrono::seconds(10);  // the first publish waits, Redis lock held
  auto made = ProducerAccess::Create(o, [&](const ProducerOptions&, CheckedEndpoints) {
    return std::make_unique<TestPlatform>(sync, opened);
  });
  ASSERT_TRUE(made.ok()) << made.error().message;
  std::unique_ptr<Producer> producer = std::move(made).value();
  const StreamFields fields{{"f", "v"}};

  // 1. The first publish opens the executor and waits for a routing with the Redis lock held.
  auto first = std::async(std::launch::async, [&] { return producer->Publish("k1", fields); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (opened.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(opened.load(), 1) << "the first publish did not open the executor";

  // 2. A second publish passes the closed check and is held back at the Redis lock.
  std::promise<std::thread::id> late_id;
  std::promise<void> go;
  auto late = std::async(std::launch::async, [&] {
    {
      std::lock_guard<std::mutex> l(m);
      late_publisher = std::this_thread::get_id();
    }
    return producer->Publish("k2", fields);
  });
  {
    std::unique_lock<std::mutex> l(m);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(10), [&] { return late_at_lock; }))
        << "the second publish never reached the Redis lock";
  }

  // 3. Close() queues at the Redis lock first; the second publish queues behind it.
  auto closing = std::async(std::launch::async, [&] {
    {
      std::lock_guard<std::mutex> l(m);
      closer = std::this_thread::get_id();
    }
    producer->Close();
  });
  ASSERT_EQ(closing.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "Close() did not return";
  ASSERT_EQ(first.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_EQ(late.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(closer_queued);

  const ProducerResult<std::string> r = late.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ProducerErrorCode::kClosed);
  EXPECT_EQ(opened.load(), 1) << "a publish after Close() opened a new executor";
  EXPECT_FALSE(first.get().ok());
}

// A platform whose clock stands still until its executor moves it (a connect that took
// time), whose coordinator answers one routing with a 1 s lease, and whose executor asks the
// producer's BeforeWrite as the connection layer does and records whether it wrote.
class LeaseClockPlatform : public Platform {
 public:
  static constexpr int64_t kStartUs = 1'000'000'000;  // 1,000,000 ms
  static constexpr int64_t kLeaseMs = 1000;

  std::atomic<int64_t> now_us{kStartUs};
  std::atomic<int64_t> connect_ends_at_us{0};  // the executor moves the clock here first
  std::atomic<int> writes{0};
  std::atomic<int> refused_writes{0};

  SyncPort& Sync() override { return SyncPort::Os(); }
  TimeMs NowMs(bool round_up) override {
    const int64_t us = now_us.load();
    return us / 1000 + (round_up && us % 1000 != 0 ? 1 : 0);
  }
  int64_t NowUs() override { return now_us.load(); }
  double Random() override { return 0.5; }
  std::unique_ptr<Thread> StartThread(const char* /*name*/, std::function<void()> body) override {
    class T : public Thread {
     public:
      explicit T(std::function<void()> body) : t_(std::move(body)) {}
      ~T() override { Join(); }
      void Join() override {
        if (t_.joinable()) t_.join();
      }

     private:
      std::thread t_;
    };
    return std::make_unique<T>(std::move(body));
  }
  HttpOutcome Request(const HttpCall& /*call*/) override {
    RoutingResponse r;
    r.metadata_version = 1;
    r.lineage = "L";
    r.shard_count = 1;
    r.shards = {{0, "{orders:0}"}};
    r.routing_lease_ms = kLeaseMs;
    r.refresh_interval_ms = kLeaseMs / 2;  // never due: the clock stands still
    return HttpOutcome{200, SerializeRoutingResponse(r), "", "test"};
  }
  std::string EndpointName(int /*endpoint*/) const override { return "test"; }
  Result<std::unique_ptr<redis::Executor>> OpenRedis() override {
    class Exec : public NoRedis {
     public:
      explicit Exec(LeaseClockPlatform& p) : p_(p) {}
      std::vector<Result<redis::Reply>> RunBatch(const std::vector<redis::KeyedCommand>& cmds,
                                                 redis::CommandKind /*kind*/,
                                                 const redis::BeforeWrite& before_write) override {
        p_.now_us = p_.connect_ends_at_us.load();
        if (before_write && !before_write()) {
          ++p_.refused_writes;
          return std::vector<Result<redis::Reply>>(
              cmds.size(), MakeError(ErrorCode::kRedisUnavailable, "not sent"));
        }
        ++p_.writes;
        return std::vector<Result<redis::Reply>>(cmds.size(), redis::Reply::Bulk("1-1"));
      }

     private:
      LeaseClockPlatform& p_;
    };
    return std::unique_ptr<redis::Executor>(std::make_unique<Exec>(*this));
  }
};

// PR5 at the write: a connect that ends 0.4 ms before the routing lease does leaves no whole
// millisecond of lease, and the XADD is not sent (the clock is read rounded up, as for every
// lease decision); one that ends with a millisecond left is written.
TEST(ProducerLease, NoXaddLeavesAfterTheLeaseEvenWhenTheConnectEndsInsideItsLastMillisecond) {
  ProducerOptions o;
  o.coordinator_endpoints = {"coordinator:7700"};
  o.stream = "orders";
  o.group = "billing";
  o.redis_url = "redis://redis:6379";
  LeaseClockPlatform* platform = nullptr;
  auto made = ProducerAccess::Create(o, [&](const ProducerOptions&, CheckedEndpoints) {
    auto p = std::make_unique<LeaseClockPlatform>();
    platform = p.get();
    return p;
  });
  ASSERT_TRUE(made.ok()) << made.error().message;
  std::unique_ptr<Producer> producer = std::move(made).value();
  ASSERT_TRUE(producer->WaitForRouting(std::chrono::seconds(10))) << "no routing";
  // The refresh was sent at the start: the lease ends kLeaseMs later.
  const int64_t lease_end_us =
      (LeaseClockPlatform::kStartUs / 1000 + LeaseClockPlatform::kLeaseMs) * 1000;
  const StreamFields fields{{"f", "v"}};

  platform->connect_ends_at_us = lease_end_us - 1400;  // 1.4 ms left: written
  const ProducerResult<std::string> inside = producer->Publish("k", fields);
  EXPECT_TRUE(inside.ok()) << inside.error().message;
  EXPECT_EQ(platform->writes.load(), 1);

  platform->now_us = LeaseClockPlatform::kStartUs;    // routed well inside the lease again
  platform->connect_ends_at_us = lease_end_us - 400;  // 0.4 ms left: not sent
  const ProducerResult<std::string> late = producer->Publish("k", fields);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ProducerErrorCode::kStaleRouting) << late.error().message;
  EXPECT_EQ(platform->writes.load(), 1) << "an XADD left after the routing lease (PR5)";
  EXPECT_EQ(platform->refused_writes.load(), 1);
  producer->Close();
}

}  // namespace
}  // namespace rsc::client
