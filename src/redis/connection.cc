#include "redis/connection.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "redis/log.h"

namespace rsc::redis {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// hiredis builds replies through these functions, so a reply is parsed straight into the
// owned Reply tree: no intermediate redisReply tree to copy and free (the readers' payloads
// are copied once, from hiredis's read buffer). A child lives inside its parent's
// `elements`, sized when the array header is read; only the root is allocated, and hiredis
// frees only roots (redisReaderFree, a dropped partial reply).
Reply* Slot(const redisReadTask* task) {
  if (task->parent == nullptr) return new Reply();
  auto* parent = static_cast<Reply*>(task->parent->obj);
  return &parent->elements[static_cast<size_t>(task->idx)];
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Reply* r = Slot(task);
  r->type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::kError
            : task->type == REDIS_REPLY_STATUS ? Reply::Type::kStatus
                                               : Reply::Type::kString;
  r->str.assign(str, len);
  return r;
}

void* CreateArray(const redisReadTask* task, int elements) {
  Reply* r = Slot(task);
  r->type = Reply::Type::kArray;
  if (elements > 0) r->elements.resize(static_cast<size_t>(elements));
  return r;
}

void* CreateInteger(const redisReadTask* task, long long value) {
  Reply* r = Slot(task);
  r->type = Reply::Type::kInteger;
  r->integer = value;
  return r;
}

void* CreateNil(const redisReadTask* task) {
  Reply* r = Slot(task);
  r->type = Reply::Type::kNil;
  return r;
}

void FreeReply(void* reply) { delete static_cast<Reply*>(reply); }

const redisReplyObjectFunctions kReplyFunctions = {CreateString, CreateArray, CreateInteger,
                                                   CreateNil, FreeReply};

// hiredis 0.14 reports a receive timeout as an I/O error with EAGAIN's text.
bool LooksLikeTimeout(const redisContext* c) {
  return c->err == REDIS_ERR_IO && (std::strstr(c->errstr, "temporarily unavailable") != nullptr ||
                                    std::strstr(c->errstr, "timed out") != nullptr);
}

// hiredis writes with write(2), which raises SIGPIPE on a socket the peer has reset, and
// SIGPIPE's default action kills the process. Rather than change the process-wide
// disposition from a library, block it on this thread for the write and swallow one that
// the write raised (the error itself still comes back as EPIPE).
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    already_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!already_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool already_pending_ = false;
};

}  // namespace

std::string Reply::DebugString() const {
  switch (type) {
    case Type::kString:
      return fmt::format("\"{}\"", str.size() > 200 ? str.substr(0, 200) + "..." : str);
    case Type::kStatus:
      return str;
    case Type::kError:
      return "(error) " + str;
    case Type::kInteger:
      return std::to_string(integer);
    case Type::kNil:
      return "nil";
    case Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < elements.size(); ++i) {
        if (i > 0) out += ", ";
        out += elements[i].DebugString();
      }
      return out + "]";
    }
  }
  return "?";
}

ConnectionOptions ConnectionOptions::FromUrl(const RedisUrl& url) {
  ConnectionOptions o;
  o.host = url.host;
  o.port = url.port;
  o.user = url.user;
  o.password = url.password;
  o.db = url.db;
  for (const RedisUrl::Node& n : url.more_nodes) {
    ConnectionOptions node;
    node.host = n.host;
    node.port = n.port;
    o.seeds.push_back(node.Address());
  }
  return o;
}

ConnectionOptions ConnectionOptions::WithAddress(const std::string& address) const {
  ConnectionOptions o = *this;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return o;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  auto [ptr, ec] =
      std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
  if (ec != std::errc() || ptr != address.data() + address.size() || host.empty()) return o;
  o.host = std::move(host);
  o.port = port;
  return o;
}

std::string ConnectionOptions::Address() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Connection::Connection(ConnectionOptions options) : options_(std::move(options)) {}

Connection::~Connection() { Disconnect(); }

void Connection::Disconnect() {
  redisContext* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    c = ctx_;
    ctx_ = nullptr;
  }
  if (c != nullptr) redisFree(c);
  outstanding_ = 0;
  outstanding_write_ = false;
}

void Connection::Cut() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (ctx_ != nullptr && ctx_->fd >= 0) ::shutdown(ctx_->fd, SHUT_RDWR);
}

void Connection::Interrupt() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  interrupted_ = true;
  if (ctx_ != nullptr && ctx_->fd >= 0) ::shutdown(ctx_->fd, SHUT_RDWR);
}

void Connection::SetTimeout(std::chrono::milliseconds timeout) {
  if (ctx_ != nullptr && timeout != timeout_now_) {
    redisSetTimeout(ctx_, ToTimeval(timeout));
    timeout_now_ = timeout;
  }
}

void Connection::SetCommandTimeout(std::chrono::milliseconds timeout) {
  options_.command_timeout = timeout;
  SetTimeout(timeout);
}

Status Connection::Connect() {
  if (ctx_ != nullptr) return OkStatus();
  const auto interrupted = [&] {
    return MakeError(ErrorCode::kRedisUnavailable,
                     fmt::format("redis {}: the connection was interrupted (its owner is stopping)",
                                 options_.Address()));
  };
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (interrupted_) return interrupted();
  }
  redisContext* c = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                            ToTimeval(options_.connect_timeout));
  if (c == nullptr) {
    return MakeError(
        ErrorCode::kRedisUnavailable,
        fmt::format("cannot connect to Redis at {}: out of memory", options_.Address()));
  }
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return MakeError(ErrorCode::kRedisUnavailable,
                     fmt::format("cannot connect to Redis at {}: {}", options_.Address(), why));
  }
  redisSetTimeout(c, ToTimeval(options_.command_timeout));
  redisEnableKeepAlive(c);
  c->reader->fn = const_cast<redisReplyObjectFunctions*>(&kReplyFunctions);
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (interrupted_) {
      redisFree(c);
      return interrupted();
    }
    ctx_ = c;
  }
  timeout_now_ = options_.command_timeout;

  std::vector<Command> handshake;
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      handshake.push_back({"AUTH", options_.password});
    } else {
      handshake.push_back({"AUTH", options_.user, options_.password});
    }
  }
  if (options_.db != 0) handshake.push_back({"SELECT", std::to_string(options_.db)});
  if (!handshake.empty()) {
    std::vector<const Command*> ptrs;
    for (const Command& h : handshake) ptrs.push_back(&h);
    Status sent = Write(ptrs, CommandKind::kRead);
    for (size_t i = 0; sent.ok() && i < handshake.size(); ++i) {
      Result<Reply> r = Receive();
      if (!r.ok()) {
        sent = r.error();
      } else if (r->IsError()) {
        // Never echo the password; the command name is enough to act on.
        sent = MakeError(
            ErrorCode::kRedisUnavailable,
            fmt::format("Redis at {} refused {}{}: {}", options_.Address(), handshake[i][0],
                        handshake[i][0] == "AUTH" && !options_.user.empty()
                            ? " for user '" + options_.user + "'"
                            : "",
                        r->str));
      }
    }
    if (!sent.ok()) {
      Disconnect();
      return MakeError(ErrorCode::kRedisUnavailable, sent.error().message);
    }
  }
  if (connects_++ > 0) ++reconnects_;
  return OkStatus();
}

void Connection::DropIfClosedByPeer() {
  if (ctx_ == nullptr) return;
  pollfd p{ctx_->fd, POLLIN, 0};
  int n = ::poll(&p, 1, 0);
  if (n == 0) return;  // nothing pending: healthy idle socket
  if (n > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0) {
    char byte;
    ssize_t got = ::recv(ctx_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // got == 0: orderly EOF (restart, SHUTDOWN, CLIENT KILL). got > 0: bytes nobody asked
    // for, which would desynchronise replies. Either way the socket is unusable.
  }
  Log(LogLevel::kDebug,
      fmt::format("redis {}: idle connection closed by peer; reconnecting", options_.Address()));
  Disconnect();
}

Result<Reply> Connection::Run(const Command& cmd, CommandKind kind) {
  auto replies = Pipeline({cmd}, kind);
  if (!replies.ok()) return replies.error();
  return std::move(replies.value()[0]);
}

Result<Reply> Connection::Run(const Command& cmd, CommandKind kind,
                              std::chrono::milliseconds timeout) {
  RSC_RETURN_IF_ERROR(Send({cmd}, kind));
  return Receive(timeout);
}

Result<std::vector<Reply>> Connection::Pipeline(const std::vector<Command>& cmds,
                                                CommandKind kind) {
  RSC_RETURN_IF_ERROR(Send(cmds, kind));
  std::vector<Reply> out;
  out.reserve(cmds.size());
  for (size_t i = 0; i < cmds.size(); ++i) {
    Result<Reply> r = Receive();
    if (!r.ok()) return r.error();
    out.push_back(std::move(r).value());
  }
  return out;
}

Status Connection::Send(const std::vector<Command>& cmds, CommandKind kind) {
  std::vector<const Command*> ptrs;
  ptrs.reserve(cmds.size());
  for (const Command& c : cmds) ptrs.push_back(&c);
  return Send(ptrs, kind);
}

Status Connection::Send(const std::vector<const Command*>& cmds, CommandKind kind) {
  RSC_RETURN_IF_ERROR(Ready());
  return Write(cmds, kind);
}

Status Connection::Ready() {
  // Replies of an earlier pipeline nobody read would be taken for this one's.
  if (outstanding_ > 0) Disconnect();
  DropIfClosedByPeer();
  return Connect();
}

Status Connection::Write(const std::vector<const Command*>& cmds, CommandKind kind) {
  // Offsets into the output buffer where each command ends: after a failed write they
  // tell which commands were completely handed to the kernel (and may have run).
  std::vector<size_t> ends;
  ends.reserve(cmds.size());
  std::vector<const char*> argv;
  std::vector<size_t> argvlen;
  for (const Command* cmd : cmds) {
    argv.clear();
    argvlen.clear();
    for (const std::string& a : *cmd) {
      argv.push_back(a.data());
      argvlen.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), argvlen.data()) !=
        REDIS_OK) {
      Disconnect();
      return MakeError(ErrorCode::kRedisUnavailable,
                       "redis: cannot format command (out of memory)");
    }
    ends.push_back(sdslen(ctx_->obuf));
  }
  const size_t total = ends.empty() ? 0 : ends.back();

  int done = 0;
  while (!done) {
    int write_status;
    {
      SigpipeGuard guard;
      write_status = redisBufferWrite(ctx_, &done);
    }
    if (write_status == REDIS_ERR) {
      const size_t sent = total - sdslen(ctx_->obuf);
      const bool some_complete = !ends.empty() && sent >= ends.front();
      std::string why = ctx_->errstr;
      Disconnect();
      if (kind == CommandKind::kWrite && some_complete) {
        return MakeError(ErrorCode::kUnknownResult,
                         fmt::format("redis {}: write failed after sending a command ({}); it may "
                                     "or may not have been applied",
                                     options_.Address(), why));
      }
      return MakeError(ErrorCode::kRedisUnavailable,
                       fmt::format("redis {}: write failed: {}", options_.Address(), why));
    }
  }
  outstanding_ = cmds.size();
  outstanding_write_ = kind == CommandKind::kWrite && !cmds.empty();
  return OkStatus();
}

Result<Reply> Connection::Receive() {
  if (ctx_ == nullptr || outstanding_ == 0) {
    return MakeError(ErrorCode::kRedisUnavailable,
                     fmt::format("redis {}: connection lost before the reply", options_.Address()));
  }
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return ReadFailure();
  --outstanding_;
  if (outstanding_ == 0) outstanding_write_ = false;
  std::unique_ptr<Reply> reply(static_cast<Reply*>(raw));  // built by kReplyFunctions
  return std::move(*reply);
}

Result<Reply> Connection::Receive(std::chrono::milliseconds timeout) {
  SetTimeout(timeout);
  Result<Reply> r = Receive();
  SetTimeout(options_.command_timeout);
  return r;
}

Error Connection::ReadFailure() {
  std::string why = LooksLikeTimeout(ctx_)
                        ? fmt::format("no reply within {} ms", timeout_now_.count())
                        : std::string(ctx_->errstr);
  const bool write = outstanding_write_;
  Disconnect();
  if (write) {
    return MakeError(ErrorCode::kUnknownResult,
                     fmt::format("redis {}: {} after sending; the write may or may not have "
                                 "been applied",
                                 options_.Address(), why));
  }
  return MakeError(ErrorCode::kRedisUnavailable,
                   fmt::format("redis {}: {}", options_.Address(), why));
}

ConnectionPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Return(std::move(conn_));
}

ConnectionPool::ConnectionPool(ConnectionOptions options, size_t max_size,
                               std::chrono::milliseconds checkout_wait)
    : options_(std::move(options)),
      max_size_(max_size == 0 ? 1 : max_size),
      checkout_wait_(checkout_wait) {}

ConnectionPool::~ConnectionPool() {
  std::lock_guard<std::mutex> lock(mu_);
  RSC_CHECK(outstanding_ == 0);
}

Result<ConnectionPool::Lease> ConnectionPool::Checkout() {
  std::unique_lock<std::mutex> lock(mu_);
  auto available = [&] { return !idle_.empty() || outstanding_ + idle_.size() < max_size_; };
  if (!cv_.wait_for(lock, checkout_wait_, available)) {
    return MakeError(
        ErrorCode::kRedisUnavailable,
        fmt::format("redis {}: connection pool exhausted ({} connections busy for {} ms)",
                    options_.Address(), max_size_, checkout_wait_.count()));
  }
  std::unique_ptr<Connection> conn;
  if (!idle_.empty()) {
    conn = std::move(idle_.back());
    idle_.pop_back();
  } else {
    conn = std::make_unique<Connection>(options_);
  }
  ++outstanding_;
  return Lease(this, std::move(conn));
}

void ConnectionPool::Return(std::unique_ptr<Connection> conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
}

}  // namespace rsc::redis
