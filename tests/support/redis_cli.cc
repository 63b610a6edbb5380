#include "support/redis_cli.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rsc::testing {

std::string CliReply::ToString() const {
  switch (type) {
    case Type::kString:
      return "\"" + str + "\"";
    case Type::kStatus:
      return str;
    case Type::kError:
      return "(error) " + str;
    case Type::kTransportError:
      return "(transport error) " + str;
    case Type::kInteger:
      return "(integer) " + std::to_string(integer);
    case Type::kNil:
      return "(nil)";
    case Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < elements.size(); ++i) {
        if (i > 0) out += ", ";
        out += elements[i].ToString();
      }
      return out + "]";
    }
  }
  return "?";
}

std::unique_ptr<RedisCli> RedisCli::Connect(int port, const std::string& user,
                                            const std::string& password,
                                            std::chrono::milliseconds timeout, std::string* error) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = "connect 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<RedisCli> cli(new RedisCli(fd, timeout));
  if (!password.empty()) {
    CliReply r = user.empty() ? cli->Run({"AUTH", password}) : cli->Run({"AUTH", user, password});
    if (!r.ok()) {
      *error = "AUTH: " + r.ToString();
      return nullptr;
    }
  }
  return cli;
}

RedisCli::~RedisCli() {
  if (fd_ >= 0) ::close(fd_);
}

bool RedisCli::Send(const std::vector<std::string>& args, std::string* error) {
  if (fd_ < 0) {
    *error = "connection closed";
    return false;
  }
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("send: ") + std::strerror(errno);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool RedisCli::Fill(std::string* error) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  pollfd p{fd_, POLLIN, 0};
  int ready = ::poll(&p, 1, static_cast<int>(timeout_.count()));
  if (ready == 0) {
    *error = "no reply within " + std::to_string(timeout_.count()) + " ms";
    return false;
  }
  if (ready < 0) {
    *error = std::string("poll: ") + std::strerror(errno);
    return false;
  }
  char chunk[16384];
  ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n == 0) {
    *error = "connection closed by server";
    return false;
  }
  if (n < 0) {
    *error = std::string("recv: ") + std::strerror(errno);
    return false;
  }
  buf_.append(chunk, static_cast<size_t>(n));
  return true;
}

bool RedisCli::ReadLine(std::string* line, std::string* error) {
  for (;;) {
    size_t eol = buf_.find("\r\n", pos_);
    if (eol != std::string::npos) {
      *line = buf_.substr(pos_, eol - pos_);
      pos_ = eol + 2;
      return true;
    }
    if (!Fill(error)) return false;
  }
}

bool RedisCli::ReadExact(size_t n, std::string* out, std::string* error) {
  while (buf_.size() - pos_ < n) {
    if (!Fill(error)) return false;
  }
  *out = buf_.substr(pos_, n);
  pos_ += n;
  return true;
}

bool RedisCli::ReadReply(CliReply* out, std::string* error) {
  std::string line;
  if (!ReadLine(&line, error)) return false;
  if (line.empty()) {
    *error = "protocol error: empty line";
    return false;
  }
  const char kind = line[0];
  const std::string body = line.substr(1);
  switch (kind) {
    case '+':
      out->type = CliReply::Type::kStatus;
      out->str = body;
      return true;
    case '-':
      out->type = CliReply::Type::kError;
      out->str = body;
      return true;
    case ':':
      out->type = CliReply::Type::kInteger;
      out->integer = std::stoll(body);
      return true;
    case '$': {
      long long len = std::stoll(body);
      if (len < 0) {
        out->type = CliReply::Type::kNil;
        return true;
      }
      std::string data;
      if (!ReadExact(static_cast<size_t>(len) + 2, &data, error)) return false;
      out->type = CliReply::Type::kString;
      out->str = data.substr(0, static_cast<size_t>(len));
      return true;
    }
    case '*': {
      long long n = std::stoll(body);
      if (n < 0) {
        out->type = CliReply::Type::kNil;
        return true;
      }
      out->type = CliReply::Type::kArray;
      out->elements.resize(static_cast<size_t>(n));
      for (auto& e : out->elements) {
        if (!ReadReply(&e, error)) return false;
      }
      return true;
    }
    default:
      *error = "protocol error: unexpected '" + line + "'";
      return false;
  }
}

CliReply RedisCli::Run(const std::vector<std::string>& args) {
  CliReply reply;
  std::string error;
  if (!Send(args, &error) || !ReadReply(&reply, &error)) {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    reply = CliReply{};
    reply.type = CliReply::Type::kTransportError;
    reply.str = error;
  }
  return reply;
}

bool RedisCli::RunExpectClose(const std::vector<std::string>& args, CliReply* reply) {
  std::string error;
  if (!Send(args, &error)) return true;  // already gone
  CliReply r;
  if (!ReadReply(&r, &error)) {
    ::close(fd_);
    fd_ = -1;
    if (error.starts_with("no reply within")) {
      r.type = CliReply::Type::kTransportError;
      r.str = error;
      if (reply != nullptr) *reply = r;
      return false;  // still open: the command hung
    }
    return true;  // closed without a reply: the expected outcome
  }
  if (reply != nullptr) *reply = r;
  return false;
}

}  // namespace rsc::testing
