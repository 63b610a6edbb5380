#include "support/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rsc::testing {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool ParseHex(const std::string& s, size_t* out) {
  std::string t = Trim(s.substr(0, s.find(';')));
  if (t.empty() || t.size() > 15) return false;
  size_t v = 0;
  for (char c : t) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = v * 16 + static_cast<size_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

std::string HttpResult::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string HttpResult::ErrorCode() const {
  if (!json.is_object()) return "";
  const json::value* e = json.as_object().if_contains("error");
  return e != nullptr && e->is_string() ? std::string(e->as_string()) : std::string();
}

std::string HttpResult::Describe() const {
  if (status == 0) return "transport error: " + error;
  std::string b = body.size() > 600
                      ? body.substr(0, 600) + "...(" + std::to_string(body.size()) + " bytes)"
                      : body;
  return "HTTP " + std::to_string(status) + " " + b;
}

HttpClient::HttpClient(int port, std::chrono::milliseconds timeout)
    : port_(port), timeout_(timeout) {}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  reused_ = false;
  buf_.clear();
}

bool HttpClient::Connect(std::string* error) {
  Close();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, static_cast<int>(timeout_.count()));
    if (rc == 0) {
      ::close(fd);
      *error = "connect 127.0.0.1:" + std::to_string(port_) + ": timed out";
      return false;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) errno = so_error;
    rc = so_error == 0 ? 0 : -1;
  }
  if (rc != 0) {
    *error = "connect 127.0.0.1:" + std::to_string(port_) + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fd_ = fd;
  ++connections_opened_;
  return true;
}

bool HttpClient::SendAll(std::string_view data, std::string* error) {
  const auto deadline = Clock::now() + timeout_;
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        *error = "send: timed out";
        return false;
      }
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
      continue;
    }
    *error = std::string("send: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool HttpClient::Fill(std::string* error, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      *error = "no complete response within " + std::to_string(timeout_.count()) + " ms";
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-checks the deadline
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    *error = n == 0 ? "connection closed by server" : std::string("recv: ") + std::strerror(errno);
    return false;
  }
}

bool HttpClient::ReadResponse(HttpResult* out, bool* got_bytes, bool head_request) {
  const auto deadline = Clock::now() + timeout_;
  *got_bytes = !buf_.empty();
  for (;;) {  // skips 1xx interim responses
    size_t header_end;
    while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(&out->error, deadline)) return false;
      *got_bytes = true;
    }
    std::string head = buf_.substr(0, header_end);
    buf_.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12 || !status_line.starts_with("HTTP/1.")) {
      out->error = "malformed status line '" + status_line.substr(0, 80) + "'";
      return false;
    }
    int status = std::atoi(status_line.substr(9, 3).c_str());
    out->headers.clear();
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        out->headers[Lower(Trim(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
      }
      pos = e + 2;
    }
    if (status >= 100 && status < 200) continue;
    out->status = status;
    break;
  }
  out->body.clear();
  const bool close = Lower(out->Header("connection")) == "close";
  if (head_request || out->status == 204 || out->status == 304) {
    // no body
  } else if (Lower(out->Header("transfer-encoding")).find("chunked") != std::string::npos) {
    for (;;) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (!Fill(&out->error, deadline)) return false;
      }
      size_t size = 0;
      if (!ParseHex(buf_.substr(0, eol), &size)) {
        out->error = "malformed chunk size";
        return false;
      }
      buf_.erase(0, eol + 2);
      if (size == 0) {
        size_t end;
        while ((end = buf_.find("\r\n")) == std::string::npos) {
          if (!Fill(&out->error, deadline)) return false;
        }
        // Trailers are not used by the server; skip to the blank line.
        while (end != 0) {
          buf_.erase(0, end + 2);
          while ((end = buf_.find("\r\n")) == std::string::npos) {
            if (!Fill(&out->error, deadline)) return false;
          }
        }
        buf_.erase(0, 2);
        break;
      }
      while (buf_.size() < size + 2) {
        if (!Fill(&out->error, deadline)) return false;
      }
      out->body.append(buf_, 0, size);
      buf_.erase(0, size + 2);
    }
  } else if (!out->Header("content-length").empty()) {
    size_t length = std::stoul(out->Header("content-length"));
    while (buf_.size() < length) {
      if (!Fill(&out->error, deadline)) return false;
    }
    out->body = buf_.substr(0, length);
    buf_.erase(0, length);
  } else if (close) {
    std::string err;
    while (Fill(&err, deadline)) {
    }
    out->body = std::move(buf_);
    buf_.clear();
  }
  if (close) Close();
  boost::system::error_code ec;
  out->json = out->body.empty() ? json::value() : json::parse(out->body, ec);
  if (ec) out->json = json::value();
  return true;
}

HttpResult HttpClient::Exchange(std::string_view request, bool allow_retry, bool head_request) {
  for (int attempt = 0;; ++attempt) {
    HttpResult r;
    if (fd_ < 0 && !Connect(&r.error)) return r;
    const bool was_reused = reused_;
    bool got_bytes = false;
    bool ok = SendAll(request, &r.error) && ReadResponse(&r, &got_bytes, head_request);
    if (ok) {
      if (fd_ >= 0) reused_ = true;
      return r;
    }
    Close();
    if (allow_retry && retry_stale_ && was_reused && !got_bytes && attempt == 0) continue;
    r.status = 0;
    return r;
  }
}

HttpResult HttpClient::Request(std::string_view method, const std::string& target,
                               std::string_view body, const Headers& headers) {
  std::string req;
  req.reserve(256 + body.size());
  req.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  req += "Host: 127.0.0.1:" + std::to_string(port_) + "\r\n";
  bool has_type = false;
  for (const auto& [name, value] : headers) {
    req += name + ": " + value + "\r\n";
    has_type = has_type || Lower(name) == "content-type";
  }
  if (!body.empty() || method == "POST" || method == "PATCH" || method == "PUT") {
    if (!has_type) req += "Content-Type: application/json\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n";
  req.append(body);
  return Exchange(req, /*allow_retry=*/true, method == "HEAD");
}

HttpResult HttpClient::Get(const std::string& target, const Headers& headers) {
  return Request("GET", target, {}, headers);
}
HttpResult HttpClient::Post(const std::string& target, std::string_view body,
                            const Headers& headers) {
  return Request("POST", target, body, headers);
}
HttpResult HttpClient::Post(const std::string& target, const json::value& body,
                            const Headers& headers) {
  return Request("POST", target, json::serialize(body), headers);
}
HttpResult HttpClient::Patch(const std::string& target, std::string_view body,
                             const Headers& headers) {
  return Request("PATCH", target, body, headers);
}
HttpResult HttpClient::Patch(const std::string& target, const json::value& body,
                             const Headers& headers) {
  return Request("PATCH", target, json::serialize(body), headers);
}
HttpResult HttpClient::Delete(const std::string& target, const Headers& headers) {
  return Request("DELETE", target, {}, headers);
}

HttpResult HttpClient::SendRaw(std::string_view bytes) {
  return Exchange(bytes, /*allow_retry=*/false, /*head_request=*/false);
}

bool HttpClient::SendBytes(std::string_view bytes) {
  std::string error;
  if (fd_ < 0 && !Connect(&error)) return false;
  if (!SendAll(bytes, &error)) {
    Close();
    return false;
  }
  return true;
}

bool HttpClient::WaitServerClose(std::chrono::milliseconds wait) {
  if (fd_ < 0) return true;
  const auto deadline = Clock::now() + wait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready <= 0) continue;
    char tmp[4096];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      Close();
      return true;
    }
  }
}

std::string JsonString(const json::value& v) { return json::serialize(v); }

int64_t JsonInt(const json::value& v, std::string_view key, int64_t fallback) {
  if (!v.is_object()) return fallback;
  const json::value* f = v.as_object().if_contains(key);
  if (f == nullptr) return fallback;
  if (f->is_int64()) return f->as_int64();
  if (f->is_uint64()) return static_cast<int64_t>(f->as_uint64());
  if (f->is_double()) return static_cast<int64_t>(f->as_double());
  return fallback;
}

std::string JsonStr(const json::value& v, std::string_view key) {
  if (!v.is_object()) return "";
  const json::value* f = v.as_object().if_contains(key);
  return f != nullptr && f->is_string() ? std::string(f->as_string()) : std::string();
}

std::vector<int> JsonInts(const json::value& v, std::string_view key) {
  std::vector<int> out;
  if (!v.is_object()) return out;
  const json::value* f = v.as_object().if_contains(key);
  if (f == nullptr || !f->is_array()) return out;
  for (const json::value& e : f->as_array()) {
    if (e.is_int64()) out.push_back(static_cast<int>(e.as_int64()));
    if (e.is_uint64()) out.push_back(static_cast<int>(e.as_uint64()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::vector<std::string> ActiveShardKeys(HttpClient& http, const std::string& stream) {
  const HttpResult r = http.Get("/v1/streams/" + stream);
  std::vector<std::string> keys;
  if (r.status != 200 || !r.json.is_object()) return keys;
  const json::value* gens = r.json.as_object().if_contains("generations");
  if (gens == nullptr || !gens->is_array()) return keys;
  for (const json::value& g : gens->as_array()) {
    if (!g.is_object() || g.as_object().if_contains("state") == nullptr ||
        g.at("state") != "ACTIVE") {
      continue;
    }
    for (const json::value& sh : g.at("shards").as_array()) {
      keys.emplace_back(sh.at("stream").as_string());
    }
  }
  return keys;
}

}  // namespace rsc::testing
