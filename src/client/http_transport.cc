#include "client/http_transport.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/check.h"

namespace rsc::client {

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 64 * 1024 * 1024;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

int MsLeft(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

}  // namespace

HttpTransport::HttpTransport(HttpEndpoint endpoint, std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)), timeout_(timeout) {}

HttpTransport::~HttpTransport() { Close(); }

void HttpTransport::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  reused_ = false;
  buf_.clear();
}

bool HttpTransport::Connect(SteadyTime deadline, std::string* error) {
  Close();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(endpoint_.port);
  int rc = ::getaddrinfo(endpoint_.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    *error = "resolve " + endpoint_.ToString() + ": " + ::gai_strerror(rc);
    return false;
  }
  std::string last = "no address";
  size_t untried = 0;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) ++untried;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next, --untried) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      // The time left is shared by the addresses not tried yet: one that drops packets (an
      // IPv6 address without a route, say) must not use it all up before the next is tried.
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, MsLeft(deadline) / static_cast<int>(untried));
      if (rc == 0) {
        ::close(fd);
        last = "timed out";
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      errno = so_error;
      rc = so_error == 0 ? 0 : -1;
    }
    if (rc != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fd_ = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) {
    *error = "connect " + endpoint_.ToString() + ": " + last;
    return false;
  }
  return true;
}

bool HttpTransport::SendAll(std::string_view data, SteadyTime deadline, std::string* error,
                            bool* answered) {
  *answered = false;
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int left = MsLeft(deadline);
      if (left <= 0) {
        *error = "send to " + endpoint_.ToString() + ": timed out";
        return false;
      }
      // The server may answer before it took the whole body (a 413 for a body over its
      // limit) and stop reading: that answer is the request's outcome, not the stalled send.
      pollfd p{fd_, POLLOUT | POLLIN, 0};
      if (::poll(&p, 1, left) > 0 && (p.revents & POLLIN) != 0) {
        *answered = true;
        return false;
      }
      continue;
    }
    // A peer that closed or reset the connection cannot have read the whole request.
    if (errno == EPIPE || errno == ECONNRESET) closed_ = Closed::kReset;
    *error = "send to " + endpoint_.ToString() + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool HttpTransport::Fill(SteadyTime deadline, std::string* error) {
  for (;;) {
    const int left = MsLeft(deadline);
    if (left <= 0) {
      *error = "no complete response from " + endpoint_.ToString() + " within " +
               std::to_string(timeout_.count()) + " ms";
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, left);
    if (ready <= 0) continue;  // EINTR or timeout: re-check the deadline
    char chunk[16384];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    closed_ = n == 0 ? Closed::kOrderly : errno == ECONNRESET ? Closed::kReset : Closed::kNo;
    *error = n == 0 ? "connection closed by " + endpoint_.ToString()
                    : "recv from " + endpoint_.ToString() + ": " + std::strerror(errno);
    return false;
  }
}

bool HttpTransport::ReadResponse(HttpReply* out, bool* got_bytes, bool* keep_alive,
                                 SteadyTime deadline) {
  *got_bytes = !buf_.empty();
  std::string content_length;
  bool chunked = false;
  for (;;) {  // skips 1xx interim responses
    size_t header_end;
    while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (buf_.size() > kMaxHeaderBytes) {
        out->error = "response header too large";
        return false;
      }
      if (!Fill(deadline, &out->error)) return false;
      *got_bytes = true;
    }
    const std::string head = buf_.substr(0, header_end);
    buf_.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    std::string_view status_line = std::string_view(head).substr(0, line_end);
    int status = 0;
    if (status_line.size() < 12 || !status_line.starts_with("HTTP/1.") ||
        std::from_chars(status_line.data() + 9, status_line.data() + 12, status).ec !=
            std::errc()) {
      out->error = "malformed status line from " + endpoint_.ToString();
      return false;
    }
    *keep_alive = status_line.starts_with("HTTP/1.1");
    content_length.clear();
    chunked = false;
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string_view line = std::string_view(head).substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string_view::npos) {
        const std::string name = Lower(Trim(line.substr(0, colon)));
        const std::string value = Lower(Trim(line.substr(colon + 1)));
        if (name == "content-length") content_length = value;
        if (name == "transfer-encoding") chunked = value.find("chunked") != std::string::npos;
        if (name == "connection") *keep_alive = value != "close";
      }
      pos = e + 2;
    }
    if (status >= 100 && status < 200) continue;
    out->status = status;
    break;
  }
  out->body.clear();
  if (out->status == 204 || out->status == 304) return true;
  if (chunked) {
    for (;;) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (!Fill(deadline, &out->error)) return false;
      }
      std::string_view size_text = Trim(std::string_view(buf_).substr(0, eol));
      size_text = size_text.substr(0, size_text.find(';'));
      size_t size = 0;
      auto [p, ec] =
          std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
      if (ec != std::errc() || size > kMaxBodyBytes || out->body.size() + size > kMaxBodyBytes) {
        out->error = "malformed chunked body from " + endpoint_.ToString();
        return false;
      }
      buf_.erase(0, eol + 2);
      if (size == 0) {
        // Skip trailers up to the blank line.
        for (;;) {
          size_t end;
          while ((end = buf_.find("\r\n")) == std::string::npos) {
            if (!Fill(deadline, &out->error)) return false;
          }
          buf_.erase(0, end + 2);
          if (end == 0) return true;
        }
      }
      while (buf_.size() < size + 2) {
        if (!Fill(deadline, &out->error)) return false;
      }
      out->body.append(buf_, 0, size);
      buf_.erase(0, size + 2);
    }
  }
  if (!content_length.empty()) {
    size_t length = 0;
    auto [p, ec] = std::from_chars(content_length.data(),
                                   content_length.data() + content_length.size(), length);
    if (ec != std::errc() || length > kMaxBodyBytes) {
      out->error = "bad Content-Length from " + endpoint_.ToString();
      return false;
    }
    while (buf_.size() < length) {
      if (!Fill(deadline, &out->error)) return false;
    }
    out->body = buf_.substr(0, length);
    buf_.erase(0, length);
    return true;
  }
  // Body delimited by connection close: complete only when the server closed in order. A
  // deadline, a reset or a body past the limit cut it short, and a cut body is not an answer.
  *keep_alive = false;
  std::string error;
  while (Fill(deadline, &error)) {
    if (buf_.size() > kMaxBodyBytes) {
      out->error = "response body from " + endpoint_.ToString() + " too large";
      return false;
    }
  }
  if (closed_ != Closed::kOrderly) {
    out->error = error;
    return false;
  }
  out->body = std::move(buf_);
  buf_.clear();
  return true;
}

bool HttpTransport::PeerClosedWhileIdle() {
  // Readable while no request is outstanding: the server closed the connection (or sent
  // something no request asked for). Either way it is not to be reused.
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

HttpReply HttpTransport::Request(std::string_view method, std::string_view target,
                                 std::string_view body,
                                 const std::vector<std::pair<std::string, std::string>>& headers,
                                 Repeat repeat) {
  std::string req;
  req.reserve(256 + body.size());
  req.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  req += "Host: " + endpoint_.ToString() + "\r\n";
  req += "Accept: application/json\r\n";
  for (const auto& [name, value] : headers) {
    RSC_CHECK(name.find_first_of("\r\n") == std::string::npos &&
              value.find_first_of("\r\n") == std::string::npos);
    req.append(name).append(": ").append(value).append("\r\n");
  }
  if (!body.empty() || method == "POST" || method == "PATCH" || method == "PUT") {
    req += "Content-Type: application/json\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n";
  req.append(body);

  const auto deadline = SteadyClock::now() + timeout_;
  if (fd_ >= 0 && reused_ && PeerClosedWhileIdle()) Close();  // before anything is sent
  bool sent = false;  // by any attempt: a later failure is then an unknown result
  for (int attempt = 0;; ++attempt) {
    HttpReply r;
    r.sent = sent;
    if (fd_ < 0 && !Connect(deadline, &r.error)) return r;
    const bool was_reused = reused_;
    bool got_bytes = false;
    bool keep_alive = true;
    closed_ = Closed::kNo;
    r.sent = sent = true;
    bool answered = false;
    if (SendAll(req, deadline, &r.error, &answered) &&
        ReadResponse(&r, &got_bytes, &keep_alive, deadline)) {
      if (keep_alive) {
        reused_ = true;
      } else {
        Close();
      }
      return r;
    }
    if (answered || closed_ == Closed::kReset) {
      // The server answered, or closed, before it took the whole request: an answer it sent
      // first (and the kernel still holds) is the outcome. The connection is not reused: the
      // rest of the request was never sent.
      HttpReply early;
      early.sent = true;
      bool early_bytes = false;
      bool ignored = false;
      if (ReadResponse(&early, &early_bytes, &ignored, deadline)) {
        Close();
        return early;
      }
      got_bytes = got_bytes || early_bytes;
      if (answered) r.error = early.error;
    }
    const bool peer_closed = closed_ != Closed::kNo;
    Close();
    // A kept-alive connection the server closed (or reset) before any byte of the answer,
    // closed between the idle check above and the send: sent again once, on a new
    // connection, if the request may be repeated. Never after the deadline: a request with
    // no answer in time was possibly processed, and the call is bounded by `timeout`.
    if (repeat == Repeat::kIfClosedUnanswered && was_reused && peer_closed && !got_bytes &&
        attempt == 0 && SteadyClock::now() < deadline) {
      continue;
    }
    r.status = 0;
    return r;
  }
}

}  // namespace rsc::client
