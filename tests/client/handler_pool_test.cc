// client/handler_pool.h: the consumer's bounded handler threads, on a Platform's threads and
// locks (here the operating system's; the simulator runs the same pool on fibers).

#include "client/handler_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <thread>

#include "client/http_transport.h"

namespace rsc::client {
namespace {

// The threads, locks and thread identity of the operating system; nothing else is used.
class ThreadsOnly : public Platform {
 public:
  SyncPort& Sync() override { return SyncPort::Os(); }
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
  HttpOutcome Request(const HttpCall& /*call*/) override { return {}; }
  std::string EndpointName(int /*endpoint*/) const override { return "none"; }
  Result<std::unique_ptr<redis::Executor>> OpenRedis() override {
    return MakeError(ErrorCode::kInternal, "unused");
  }
};

TEST(HandlerPool, ATaskSubmittedFromATaskRunsNextOnTheSameThread) {
  ThreadsOnly platform;
  HandlerPool pool(4, platform);
  std::promise<void> done;
  std::thread::id first;
  std::thread::id second;
  bool in_worker_inside = false;
  EXPECT_FALSE(pool.InWorker());
  pool.Submit(1, [&] {
    first = std::this_thread::get_id();
    in_worker_inside = pool.InWorker();
    pool.Submit(1, [&] {  // the shard's next message: no hand-off
      second = std::this_thread::get_id();
      done.set_value();
    });
  });
  done.get_future().wait();
  EXPECT_TRUE(in_worker_inside);
  EXPECT_EQ(first, second);
  EXPECT_EQ(pool.threads(), 1);
  pool.Stop();
}

TEST(HandlerPool, ThreadsGrowToTheBoundAndAWaitingCallCanBeWithdrawn) {
  ThreadsOnly platform;
  HandlerPool pool(2, platform);
  std::latch running(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> third_ran{false};
  for (uint64_t token : {1, 2}) {
    pool.Submit(token, [&, released] {
      running.count_down();
      released.wait();  // a handler that hangs until the test lets it go
    });
  }
  running.wait();
  pool.Submit(3, [&] { third_ran = true; });  // waits: both threads are busy
  EXPECT_EQ(pool.threads(), 2);
  EXPECT_EQ(pool.busy(), 2);
  EXPECT_TRUE(pool.Withdraw(3));   // its shard was abandoned before a thread took it
  EXPECT_FALSE(pool.Withdraw(3));  // gone
  EXPECT_FALSE(pool.Withdraw(1));  // running: not withdrawn
  release.set_value();
  pool.Stop();  // waits for the running calls
  EXPECT_FALSE(third_ran);
  pool.Submit(4, [&] { third_ran = true; });  // ignored after Stop
  EXPECT_FALSE(third_ran);
}

}  // namespace
}  // namespace rsc::client
