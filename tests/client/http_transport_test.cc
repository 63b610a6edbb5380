// HttpTransport (src/client/http_transport.h) against a scripted server on a loopback socket:
// when a request is sent again and when it must not be (a timeout, a change the caller says
// must not be repeated), that `sent` stays true once the request left, and that a body cut
// short by the deadline is not taken as an answer. The server side runs on a thread of the
// test; every wait in it is bounded.

#include "client/http_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

namespace rsc::client {
namespace {

using namespace std::chrono_literals;

constexpr int kWaitMs = 5000;  // any server-side wait: a bound, never reached when green

const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";

class ScriptedServer {
 public:
  ScriptedServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_fd_, 8), 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~ScriptedServer() { ::close(listen_fd_); }

  HttpEndpoint endpoint() const { return HttpEndpoint{"127.0.0.1", port_}; }

  // The next connection, or -1 after kWaitMs.
  int Accept() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kWaitMs) != 1) return -1;
    return ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }
  // A connection made and not accepted yet (a client that connected again).
  bool HasPendingConnection() {
    pollfd p{listen_fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }

  // One request's head and Content-Length body; "" if none came within kWaitMs.
  static std::string ReadRequest(int fd) {
    std::string in;
    for (;;) {
      const size_t head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t at = in.find("Content-Length: ");
        if (at != std::string::npos && at < head_end) length = std::stoul(in.substr(at + 16));
        if (in.size() >= head_end + 4 + length) return in;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, kWaitMs) != 1) return "";
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return "";
      in.append(buf, static_cast<size_t>(n));
    }
  }
  static void Send(int fd, const std::string& data) {
    ASSERT_EQ(::send(fd, data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }
  // The next connection with its first request read and answered `reply`; -1 if none came.
  int AcceptAndAnswer(const std::string& reply) {
    const int fd = Accept();
    if (fd < 0) return -1;
    EXPECT_NE(ReadRequest(fd), "");
    Send(fd, reply);
    return fd;
  }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
};

TEST(HttpTransport, ARequestWithNoAnswerInTimeIsNotSentAgainAndCountsAsSent) {
  ScriptedServer server;
  std::promise<void> done;
  std::thread t([&] {
    const int fd = server.AcceptAndAnswer(kOk);
    ASSERT_GE(fd, 0);
    EXPECT_NE(ScriptedServer::ReadRequest(fd), "");  // read, never answered
    done.get_future().wait_for(std::chrono::milliseconds(kWaitMs));
    ::close(fd);
  });
  HttpTransport transport(server.endpoint(), 300ms);
  EXPECT_EQ(transport.Request("GET", "/a", "").status, 200);
  const HttpReply r = transport.Request("POST", "/b", "{}");  // on the kept-alive connection
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.sent) << "the request left: its failure is an unknown result, not 'unsent'";
  EXPECT_NE(r.error.find("within 300 ms"), std::string::npos) << r.error;
  EXPECT_FALSE(server.HasPendingConnection()) << "the timed-out request was sent again";
  done.set_value();
  t.join();
}

TEST(HttpTransport, AConnectionClosedWhileIdleIsReplacedBeforeTheRequestIsSent) {
  ScriptedServer server;
  std::promise<void> closed;
  std::string second;
  std::thread t([&] {
    int fd = server.AcceptAndAnswer(kOk);
    ASSERT_GE(fd, 0);
    ::close(fd);  // the server's idle timeout
    closed.set_value();
    fd = server.Accept();
    ASSERT_GE(fd, 0);
    second = ScriptedServer::ReadRequest(fd);
    ScriptedServer::Send(fd, kOk);
    ::close(fd);
  });
  HttpTransport transport(server.endpoint(), 2000ms);
  EXPECT_EQ(transport.Request("GET", "/a", "").status, 200);
  ASSERT_EQ(closed.get_future().wait_for(std::chrono::milliseconds(kWaitMs)),
            std::future_status::ready);
  // Even a request that must not be repeated goes through: nothing was sent on the old one.
  const HttpReply r = transport.Request("POST", "/change", "{}", {}, HttpTransport::Repeat::kNever);
  t.join();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_NE(second.find("POST /change"), std::string::npos) << second;
}

// The server reads the second request on the kept-alive connection and closes it without
// an answer (it crashed, or closed it as idle just as the request arrived).
void DropSecondRequest(ScriptedServer& server, bool answer_a_retry, int* requests_seen) {
  int fd = server.AcceptAndAnswer(kOk);
  ASSERT_GE(fd, 0);
  EXPECT_NE(ScriptedServer::ReadRequest(fd), "");
  ++*requests_seen;
  ::close(fd);
  if (!answer_a_retry) return;
  fd = server.Accept();
  ASSERT_GE(fd, 0);
  if (ScriptedServer::ReadRequest(fd) != "") ++*requests_seen;
  ScriptedServer::Send(fd, kOk);
  ::close(fd);
}

TEST(HttpTransport, ARepeatableRequestDroppedUnansweredIsSentOnceMore) {
  ScriptedServer server;
  int seen = 0;
  HttpTransport transport(server.endpoint(), 2000ms);
  std::thread t([&] { DropSecondRequest(server, /*answer_a_retry=*/true, &seen); });
  EXPECT_EQ(transport.Request("GET", "/a", "").status, 200);
  const HttpReply r = transport.Request("POST", "/heartbeat", "{}");
  t.join();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(seen, 2);
}

TEST(HttpTransport, AChangeDroppedUnansweredIsAnUnknownResultNotSentAgain) {
  ScriptedServer server;
  int seen = 0;
  HttpTransport transport(server.endpoint(), 2000ms);
  std::thread t([&] { DropSecondRequest(server, /*answer_a_retry=*/false, &seen); });
  EXPECT_EQ(transport.Request("GET", "/a", "").status, 200);
  const HttpReply r = transport.Request("POST", "/change", "{}", {}, HttpTransport::Repeat::kNever);
  t.join();
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(seen, 1);
  EXPECT_FALSE(server.HasPendingConnection()) << "the change was sent again";
}

TEST(HttpTransport, ABodyEndedByTheDeadlineIsNotAnAnswer) {
  ScriptedServer server;
  std::promise<void> done;
  std::thread t([&] {
    // No length, not chunked: the body ends when the server closes. It never does here.
    const int fd =
        server.AcceptAndAnswer("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"partial\":");
    ASSERT_GE(fd, 0);
    done.get_future().wait_for(std::chrono::milliseconds(kWaitMs));
    ::close(fd);
  });
  HttpTransport transport(server.endpoint(), 300ms);
  const HttpReply r = transport.Request("GET", "/export", "");
  done.set_value();
  t.join();
  EXPECT_EQ(r.status, 0) << "a cut body was returned as complete: " << r.body;
  EXPECT_TRUE(r.sent);
}

TEST(HttpTransport, ABodyEndedByTheServerClosingIsAnAnswer) {
  ScriptedServer server;
  std::thread t([&] {
    const int fd =
        server.AcceptAndAnswer("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"whole\":1}");
    ASSERT_GE(fd, 0);
    ::close(fd);
  });
  HttpTransport transport(server.endpoint(), 2000ms);
  const HttpReply r = transport.Request("GET", "/export", "");
  t.join();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, "{\"whole\":1}");
}

// A coordinator refuses a body over its limit (413) once it has read that much, and stops
// reading: the client, still sending the rest, must report the refusal (nothing was applied),
// not an unknown result.
TEST(HttpTransport, AnAnswerSentBeforeTheWholeBodyWasTakenIsTheOutcome) {
  ScriptedServer server;
  std::promise<void> client_done;
  std::thread t([&] {
    const int fd = server.Accept();
    ASSERT_GE(fd, 0);
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) {  // the head only, not the body
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, kWaitMs) != 1) break;
      char c;
      if (::recv(fd, &c, 1, 0) != 1) break;
      head.push_back(c);
    }
    ScriptedServer::Send(fd,
                         "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 2\r\n"
                         "Connection: close\r\n\r\n{}");
    // Reads nothing more until the client is done (bounded), then closes: with unread data,
    // a reset.
    client_done.get_future().wait_for(std::chrono::milliseconds(kWaitMs));
    ::close(fd);
  });
  HttpTransport transport(server.endpoint(), 3000ms);
  const std::string body(32 << 20, 'x');  // far more than the socket buffers hold
  const HttpReply r =
      transport.Request("POST", "/restore", body, {}, HttpTransport::Repeat::kNever);
  client_done.set_value();
  t.join();
  EXPECT_EQ(r.status, 413) << r.error;
  EXPECT_EQ(r.body, "{}");
  EXPECT_TRUE(r.sent);
}

}  // namespace
}  // namespace rsc::client
