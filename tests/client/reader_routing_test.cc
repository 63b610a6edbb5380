// ReaderRedis's routing (client/reader_redis.h) over a fake ReaderNet (client/reader_net.h):
// server detection and the commands held until then, the open backoff, MOVED and ASK, the
// redirection limit, a cancelled read that bounces, the failover watch and node retirement.
// The port's thread is real; its clock is a manual one, and every timed wait ends when the
// test moves it, so nothing here waits for real time to pass. The same code runs against real
// servers in reader_redis_test.cc and cluster_client_test.cc, and in the simulator.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/reader_net.h"
#include "client/reader_redis.h"

namespace rsc::client {
namespace {

using std::chrono::milliseconds;

// std::mutex and a condition variable whose timed waits end when the manual clock moves.
class ManualSync : public SyncPort {
 public:
  using TimePoint = ReaderNet::TimePoint;

  class Mutex : public SyncPort::Mutex {
   public:
    void lock() override { m_.lock(); }
    bool try_lock() override { return m_.try_lock(); }
    void unlock() override { m_.unlock(); }

   private:
    std::mutex m_;
  };
  class CondVar : public SyncPort::CondVar {
   public:
    explicit CondVar(ManualSync& sync) : sync_(sync) {}
    ~CondVar() override { sync_.Forget(this); }
    void Wait(SyncPort::Mutex& m) override {
      mu_.store(&m);  // Tick takes it before notifying, so no wake-up is lost
      cv_.wait(m);
    }
    // Any notify or clock move ends it; the caller re-checks its deadline on the clock.
    void WaitFor(SyncPort::Mutex& m, milliseconds /*timeout*/) override {
      sync_.CountTimedWait();
      Wait(m);
    }
    void NotifyAll() override { cv_.notify_all(); }
    void Tick() {
      SyncPort::Mutex* m = mu_.load();
      if (m == nullptr) return;  // nobody waited yet: the clock is read before any wait
      std::lock_guard<SyncPort::Mutex> lock(*m);
      cv_.notify_all();
    }

   private:
    ManualSync& sync_;
    std::atomic<SyncPort::Mutex*> mu_{nullptr};
    std::condition_variable_any cv_;
  };

  std::unique_ptr<SyncPort::Mutex> NewMutex() override { return std::make_unique<Mutex>(); }
  std::unique_ptr<SyncPort::CondVar> NewCondVar() override {
    auto cv = std::make_unique<CondVar>(*this);
    std::lock_guard<std::mutex> lock(mu_);
    cvs_.insert(cv.get());
    return cv;
  }
  TimePoint Now() {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  // Timed waits begun so far: a test moves the clock again only once the port's thread went
  // round and waits again, however slowly it runs.
  int64_t timed_waits() {
    std::lock_guard<std::mutex> lock(mu_);
    return timed_waits_;
  }
  void CountTimedWait() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++timed_waits_;
    }
    waits_cv_.notify_all();
  }
  // Waits (bounded) until the timed waits counted pass `n`.
  bool AwaitTimedWaitsPast(int64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return waits_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return timed_waits_ > n; });
  }
  void Advance(milliseconds by) {
    std::set<CondVar*> cvs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      now_ += by;
      cvs = cvs_;
    }
    for (CondVar* cv : cvs) cv->Tick();
  }

 private:
  void Forget(CondVar* cv) {
    std::lock_guard<std::mutex> lock(mu_);
    cvs_.erase(cv);
  }

  std::mutex mu_;
  std::condition_variable waits_cv_;
  TimePoint now_ = TimePoint{} + std::chrono::hours(1);
  int64_t timed_waits_ = 0;
  std::set<CondVar*> cvs_;
};

// What the fake net and its nodes saw, and the port's answers; the test waits on it.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  int opens = 0;
  int refreshes = 0;
  int stops = 0;  // nodes stopped
  std::vector<std::pair<int, std::string>> moved;
  std::vector<ReaderAnswer> answers;

  // Waits (bounded) until `done` holds under the lock.
  void Await(const std::function<bool()>& done, const char* what) {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), done)) << "never happened: " << what;
  }
  void Changed() { cv.notify_all(); }
};

class FakeNode : public ReaderNodePort {
 public:
  FakeNode(Log& log, ReaderNodeHooks hooks) : log_(log), hooks(std::move(hooks)) {}
  void Start() override {}
  void Halt() override {}
  void Stop() override {
    std::lock_guard<std::mutex> lock(log_.mu);
    ++log_.stops;
    log_.Changed();
  }
  void Enqueue(NodeCommand command) override {
    std::lock_guard<std::mutex> lock(log_.mu);
    commands.push_back(std::move(command));
    log_.Changed();
  }
  void Enqueue(std::vector<NodeRead> reads) override {
    std::lock_guard<std::mutex> lock(log_.mu);
    read_batches.push_back(std::move(reads));
    log_.Changed();
  }
  void Cancel(uint64_t token, bool /*now*/) override {
    std::lock_guard<std::mutex> lock(log_.mu);
    cancels.push_back(token);
  }
  bool Idle() const override { return true; }
  ReaderRedisStats Stats() const override { return {}; }

  Log& log_;
  const ReaderNodeHooks hooks;
  std::vector<NodeCommand> commands;                // guarded by log_.mu
  std::vector<std::vector<NodeRead>> read_batches;  // guarded by log_.mu
  std::vector<uint64_t> cancels;                    // guarded by log_.mu
};

class FakeNet : public ReaderNet {
 public:
  FakeNet(Log& log, ManualSync& sync) : log_(log), sync_(sync) {}

  SyncPort& Sync() override { return sync_; }
  TimePoint Now() override { return sync_.Now(); }
  std::function<void()> StartThread(const char* /*name*/, std::function<void()> body) override {
    auto t = std::make_shared<std::thread>(std::move(body));
    return [t] { t->join(); };
  }
  Result<bool> Open() override {
    std::lock_guard<std::mutex> lock(log_.mu);
    ++log_.opens;
    log_.Changed();
    if (!open_error.empty()) return MakeError(ErrorCode::kRedisUnavailable, open_error);
    return cluster;
  }
  std::unique_ptr<ReaderNodePort> MakeNode(const std::string& address,
                                           ReaderNodeHooks hooks) override {
    auto node = std::make_unique<FakeNode>(log_, std::move(hooks));
    std::lock_guard<std::mutex> lock(log_.mu);
    nodes[address].push_back(node.get());
    return node;
  }
  std::string NodeForKey(std::string_view /*key*/) override {
    std::lock_guard<std::mutex> lock(log_.mu);
    return owner;
  }
  std::optional<ReaderRedirect> ParseRedirect(std::string_view error,
                                              const std::string& /*via*/) override {
    // "MOVED 5 b:1" / "ASK 5 b:1" (the real parser is redis::ClusterExecutor's).
    const bool ask = error.starts_with("ASK ");
    if (!ask && !error.starts_with("MOVED ")) return std::nullopt;
    const size_t last = error.rfind(' ');
    return ReaderRedirect{ask, 5, std::string(error.substr(last + 1))};
  }
  void NoteMoved(int slot, const std::string& target) override {
    std::lock_guard<std::mutex> lock(log_.mu);
    log_.moved.emplace_back(slot, target);
    owner = target;
  }
  void RefreshSlots() override {
    std::lock_guard<std::mutex> lock(log_.mu);
    ++log_.refreshes;
    log_.Changed();
  }
  Result<std::vector<std::string>> Masters() override {
    std::lock_guard<std::mutex> lock(log_.mu);
    return masters;
  }

  // Set by the test (under log_.mu once the port runs).
  bool cluster = false;
  std::string open_error;
  std::string owner = "a:1";
  std::vector<std::string> masters = {"a:1", "b:1"};
  std::map<std::string, std::vector<FakeNode*>> nodes;  // guarded by log_.mu

 private:
  Log& log_;
  ManualSync& sync_;
};

class ReaderRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto net = std::make_unique<FakeNet>(log_, sync_);
    net_ = net.get();
    port_ = std::make_unique<ReaderRedis>(std::move(net), [this](uint64_t token, ReaderReply r) {
      std::lock_guard<std::mutex> lock(log_.mu);
      log_.answers.push_back(ReaderAnswer{token, std::move(r)});
      log_.Changed();
    });
  }
  void TearDown() override { port_->Stop(); }

  static ReaderCoreConfig Config() {
    ReaderCoreConfig c;
    c.stream = "P:s:0";
    c.group = "G";
    c.consumer_name = "m1";
    return c;
  }
  void SubmitCommand(uint64_t token) {
    ReaderCommand c;
    c.kind = ReaderCommandKind::kCreateGroup;
    port_->Submit(token, Config(), c);
  }
  void SubmitRead(uint64_t token) {
    ReaderCommand c;
    c.kind = ReaderCommandKind::kReadLive;
    c.count = 10;
    c.block_ms = 1000;
    port_->Submit(token, Config(), c);
  }
  FakeNode* Node(const std::string& address, size_t index = 0) {
    std::lock_guard<std::mutex> lock(log_.mu);
    auto it = net_->nodes.find(address);
    return it == net_->nodes.end() || it->second.size() <= index ? nullptr : it->second[index];
  }
  const ReaderAnswer* AnswerOf(uint64_t token) {  // under log_.mu
    for (const ReaderAnswer& a : log_.answers) {
      if (a.token == token) return &a;
    }
    return nullptr;
  }
  // Lets the port's thread go round: time moves on, every timed wait ends.
  void Tick(milliseconds by) { sync_.Advance(by); }
  // Moves the clock 200 ms at a time until `done`, each time once the port's thread is back in
  // a timed wait (so the clock never runs ahead of it).
  void AwaitTicking(const std::function<bool()>& done, const char* what) {
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> lock(log_.mu);
        if (done()) return;
      }
      const int64_t waits = sync_.timed_waits();
      Tick(milliseconds(200));
      if (!sync_.AwaitTimedWaitsPast(waits)) {
        std::lock_guard<std::mutex> lock(log_.mu);
        if (done()) return;
        FAIL() << "the port's thread stopped waiting on its clock before: " << what;
      }
    }
    FAIL() << "never happened: " << what;
  }

  Log log_;
  ManualSync sync_;
  FakeNet* net_ = nullptr;
  std::unique_ptr<ReaderRedis> port_;
};

TEST_F(ReaderRoutingTest, CommandsHeldUntilTheServerIsKnownGoOutAndItsReadsTogether) {
  SubmitCommand(1);
  SubmitRead(2);
  SubmitRead(3);
  EXPECT_FALSE(port_->SingleServer()) << "not known before the first open";
  port_->Start();
  log_.Await(
      [&] {
        auto it = net_->nodes.find("");
        return it != net_->nodes.end() && it->second[0]->commands.size() == 1 &&
               it->second[0]->read_batches.size() == 1;
      },
      "the held command and reads sent to the one server");
  std::lock_guard<std::mutex> lock(log_.mu);
  FakeNode* node = net_->nodes[""][0];
  EXPECT_EQ(node->commands[0].token, 1u);
  ASSERT_EQ(node->read_batches[0].size(), 2u) << "held reads go out as one combined read";
  EXPECT_EQ(node->read_batches[0][0].token, 2u);
  EXPECT_EQ(node->read_batches[0][1].token, 3u);
  EXPECT_TRUE(port_->SingleServer());
  EXPECT_EQ(log_.opens, 1);
}

TEST_F(ReaderRoutingTest, AFailedOpenAnswersTheHeldCommandsAndIsNotRetriedBeforeItsBackoff) {
  net_->open_error = "connection refused";
  port_->Start();
  SubmitCommand(1);
  log_.Await([&] { return AnswerOf(1) != nullptr; }, "the held command answered");
  {
    std::lock_guard<std::mutex> lock(log_.mu);
    EXPECT_EQ(AnswerOf(1)->reply.kind, ReaderReply::Kind::kTransport);
    EXPECT_EQ(AnswerOf(1)->reply.error, "connection refused");
    net_->open_error.clear();
  }
  SubmitCommand(2);  // within the backoff (100 ms): answered with the last error, no connect
  log_.Await([&] { return AnswerOf(2) != nullptr; }, "the second command answered");
  {
    std::lock_guard<std::mutex> lock(log_.mu);
    EXPECT_EQ(AnswerOf(2)->reply.kind, ReaderReply::Kind::kTransport);
    EXPECT_EQ(log_.opens, 1) << "opened again inside the backoff";
  }
  Tick(milliseconds(100));
  SubmitCommand(3);
  log_.Await([&] { return net_->nodes.count("") > 0 && !net_->nodes[""][0]->commands.empty(); },
             "the command after the backoff sent");
  std::lock_guard<std::mutex> lock(log_.mu);
  EXPECT_EQ(log_.opens, 2);
  EXPECT_EQ(AnswerOf(3), nullptr);
}

class ClusterRoutingTest : public ReaderRoutingTest {
 protected:
  void SetUp() override {
    ReaderRoutingTest::SetUp();
    net_->cluster = true;
    port_->Start();
  }
  // Sends command `token` to node a:1 and returns it as the node got it.
  NodeCommand SentToA(uint64_t token) {
    SubmitCommand(token);
    log_.Await(
        [&] { return net_->nodes.count("a:1") > 0 && !net_->nodes["a:1"][0]->commands.empty(); },
        "the command sent to the slot's master");
    std::lock_guard<std::mutex> lock(log_.mu);
    NodeCommand c = net_->nodes["a:1"][0]->commands.back();
    net_->nodes["a:1"][0]->commands.clear();
    return c;
  }
  static std::vector<NodeCommand> One(NodeCommand c, const std::string& redirect) {
    c.redirect = redirect;
    std::vector<NodeCommand> out;
    out.push_back(std::move(c));
    return out;
  }
};

TEST_F(ClusterRoutingTest, AMovedCommandGoesToTheNewMasterWhichTheMapLearns) {
  NodeCommand c = SentToA(1);
  EXPECT_FALSE(port_->SingleServer());
  Node("a:1")->hooks.bounced(One(c, "MOVED 5 b:1"), {});
  log_.Await(
      [&] { return net_->nodes.count("b:1") > 0 && !net_->nodes["b:1"][0]->commands.empty(); },
      "the command re-sent to b:1");
  std::lock_guard<std::mutex> lock(log_.mu);
  const NodeCommand& sent = net_->nodes["b:1"][0]->commands[0];
  EXPECT_EQ(sent.token, 1u);
  EXPECT_FALSE(sent.asking);
  EXPECT_EQ(sent.redirects, 1);
  ASSERT_EQ(log_.moved.size(), 1u);
  EXPECT_EQ(log_.moved[0], std::make_pair(5, std::string("b:1")));
  EXPECT_EQ(AnswerOf(1), nullptr) << "a redirected command is not answered";
}

TEST_F(ClusterRoutingTest, AMovedCommandHasTheWholeMapReadAgain) {
  NodeCommand c = SentToA(1);
  Node("a:1")->hooks.bounced(One(c, "MOVED 5 b:1"), {});
  log_.Await([&] { return log_.refreshes >= 1; }, "the slot map re-read after a MOVED");
}

TEST_F(ClusterRoutingTest, AnAskedCommandIsSentOnceAfterAskingAndTheMapStaysAsItWas) {
  NodeCommand c = SentToA(1);
  Node("a:1")->hooks.bounced(One(c, "ASK 5 b:1"), {});
  log_.Await(
      [&] { return net_->nodes.count("b:1") > 0 && !net_->nodes["b:1"][0]->commands.empty(); },
      "the command sent to the importing master");
  std::lock_guard<std::mutex> lock(log_.mu);
  EXPECT_TRUE(net_->nodes["b:1"][0]->commands[0].asking);
  EXPECT_TRUE(log_.moved.empty()) << "an ASK is for this command only";
  EXPECT_EQ(net_->owner, "a:1");
}

TEST_F(ClusterRoutingTest, ACommandBouncedPastTheLimitIsAnsweredTransport) {
  NodeCommand c = SentToA(1);
  c.redirects = ReaderRedis::kMaxRedirects;
  Node("a:1")->hooks.bounced(One(c, "MOVED 5 b:1"), {});
  log_.Await([&] { return AnswerOf(1) != nullptr; }, "the command given up");
  std::lock_guard<std::mutex> lock(log_.mu);
  EXPECT_EQ(AnswerOf(1)->reply.kind, ReaderReply::Kind::kTransport);
  EXPECT_NE(AnswerOf(1)->reply.error.find("gave up following"), std::string::npos);
  EXPECT_EQ(net_->nodes.count("b:1"), 0u);
}

TEST_F(ClusterRoutingTest, ACancelledReadThatBouncesIsAnsweredNilNotSentAgain) {
  SubmitRead(7);
  log_.Await(
      [&] { return net_->nodes.count("a:1") > 0 && !net_->nodes["a:1"][0]->read_batches.empty(); },
      "the read sent");
  NodeRead read;
  {
    std::lock_guard<std::mutex> lock(log_.mu);
    read = net_->nodes["a:1"][0]->read_batches[0][0];
  }
  read.cancelled = true;
  read.redirect = "MOVED 5 b:1";
  std::vector<NodeRead> reads;
  reads.push_back(read);
  Node("a:1")->hooks.bounced({}, std::move(reads));
  log_.Await([&] { return AnswerOf(7) != nullptr; }, "the cancelled read answered");
  std::lock_guard<std::mutex> lock(log_.mu);
  EXPECT_EQ(AnswerOf(7)->reply.kind, ReaderReply::Kind::kNil);
  EXPECT_EQ(net_->nodes.count("b:1"), 0u);
}

TEST_F(ClusterRoutingTest, AFailedMasterIsWatchedUntilTheMapDropsItThenRetired) {
  (void)SentToA(1);
  Node("a:1")->hooks.failed();
  log_.Await([&] { return log_.refreshes >= 1; }, "the map re-read after the failure");
  // Still named a master: looked up again and again (the readers' retries should find the
  // promoted master), and kept.
  AwaitTicking([&] { return log_.refreshes >= 3; }, "the failed master looked up again");
  EXPECT_EQ(port_->Stats().retired_nodes, 0);
  {
    std::lock_guard<std::mutex> lock(log_.mu);
    EXPECT_EQ(log_.stops, 0) << "a node still named a master was stopped";
    net_->masters = {"b:1", "c:1"};  // its replica took over
    net_->owner = "c:1";
  }
  // Two looks in a row that no longer name it, then the idle node is stopped and dropped.
  AwaitTicking([&] { return log_.stops == 1; }, "a:1 retired");
  EXPECT_EQ(port_->Stats().retired_nodes, 1);
  SubmitCommand(2);
  log_.Await(
      [&] { return net_->nodes.count("c:1") > 0 && !net_->nodes["c:1"][0]->commands.empty(); },
      "the next command sent to the promoted master");
}

TEST_F(ReaderRoutingTest, ACancelledHeldReadIsAnsweredNilFromThePortsThread) {
  net_->open_error = "refused";  // nothing is sent: the read stays held until the open fails
  SubmitRead(4);
  port_->Cancel(4, /*now=*/false);
  {
    std::lock_guard<std::mutex> lock(log_.mu);
    EXPECT_EQ(AnswerOf(4), nullptr) << "answered synchronously from Cancel";
  }
  port_->Start();
  log_.Await([&] { return AnswerOf(4) != nullptr; }, "the cancelled read answered");
  std::lock_guard<std::mutex> lock(log_.mu);
  EXPECT_EQ(AnswerOf(4)->reply.kind, ReaderReply::Kind::kNil);
  EXPECT_EQ(log_.opens, 0) << "nothing was held any more, so nothing opened";
}

}  // namespace
}  // namespace rsc::client
