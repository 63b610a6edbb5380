// EmbeddedRedis (src/server/embedded_redis.h) waiting for its redis-server: a server that
// answers LOADING (reading a large append-only file) is alive and waited for, past the start
// timeout; one that never answers is given up on at the timeout. The "redis-server" here is a
// script that only stays alive, and the answers come from a listener of the test on the port
// the embedded server is told to use (real servers are started by the integration tests).

#include "server/embedded_redis.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace rsc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Answers every PING with -LOADING until `loading_until`, then +PONG.
class FakeRedis {
 public:
  explicit FakeRedis(Clock::time_point loading_until) : loading_until_(loading_until) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeRedis() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      pollfd q{c, POLLIN, 0};
      char buf[256];
      if (::poll(&q, 1, 1000) == 1 && ::recv(c, buf, sizeof(buf), 0) > 0) {
        const std::string reply = Clock::now() < loading_until_
                                      ? "-LOADING Redis is loading the dataset in memory\r\n"
                                      : "+PONG\r\n";
        (void)::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    }
  }
  const Clock::time_point loading_until_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class EmbeddedRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rsc-embedded-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Stays alive and ignores its arguments; EmbeddedRedis::Stop ends it.
    script_ = dir_ + "/fake-redis-server";
    std::ofstream(script_) << "#!/bin/sh\nexec sleep 60\n";
    std::filesystem::permissions(script_, std::filesystem::perms::owner_all);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  EmbeddedRedisOptions Options(int port) const {
    EmbeddedRedisOptions o;
    o.state_dir = dir_ + "/state";
    o.binary = script_;
    o.port = port;
    o.start_timeout = 400ms;
    return o;
  }
  std::string dir_;
  std::string script_;
};

TEST_F(EmbeddedRedisTest, AServerStillLoadingItsDataIsWaitedForPastTheStartTimeout) {
  FakeRedis fake(Clock::now() + 1500ms);  // LOADING for well over the 400 ms start timeout
  EmbeddedRedis redis(Options(fake.port()));
  const Status started = redis.Start();
  EXPECT_TRUE(started.ok()) << started.error().message;
  redis.Stop();
}

TEST_F(EmbeddedRedisTest, AServerThatNeverAnswersIsGivenUpOnAtTheStartTimeout) {
  // Nothing listens on this port: the script lives, but no PING is ever answered.
  int port = 0;
  {
    FakeRedis closed(Clock::now());
    port = closed.port();
  }
  EmbeddedRedis redis(Options(port));
  const auto t0 = Clock::now();
  const Status started = redis.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_LT(Clock::now() - t0, 5s) << "the start timeout is 400 ms";
}

}  // namespace
}  // namespace rsc
