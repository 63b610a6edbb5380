#include "client/redis_conn.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <charconv>

#include "client/http_transport.h"

namespace rsc::client {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s, bool* ok) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || HexDigit(s[i + 1]) < 0 || HexDigit(s[i + 2]) < 0) {
      *ok = false;
      return out;
    }
    out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
    i += 2;
  }
  return out;
}

timeval ToTimeval(std::chrono::milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000),
                 static_cast<suseconds_t>((d.count() % 1000) * 1000)};
}

}  // namespace

std::optional<RedisTarget> ParseRedisUrl(std::string_view url, std::string* error) {
  std::string_view s = url;
  if (!s.starts_with("redis://")) {
    *error = "redis_url must start with redis:// (rediss and unix sockets are not supported)";
    return std::nullopt;
  }
  s.remove_prefix(8);
  RedisTarget t;
  bool ok = true;
  if (size_t at = s.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = s.substr(0, at);
    s.remove_prefix(at + 1);
    const size_t colon = cred.find(':');
    t.user = PercentDecode(cred.substr(0, colon), &ok);
    if (colon != std::string_view::npos) t.password = PercentDecode(cred.substr(colon + 1), &ok);
  }
  if (size_t slash = s.find('/'); slash != std::string_view::npos) {
    std::string_view db = s.substr(slash + 1);
    s = s.substr(0, slash);
    if (!db.empty()) {
      auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), t.db);
      ok = ok && ec == std::errc() && p == db.data() + db.size() && t.db >= 0;
    }
  }
  if (s.starts_with("[") || s.find(':') != std::string_view::npos) {
    std::string err;
    std::optional<HttpEndpoint> ep = ParseHttpEndpoint(s, &err);
    if (!ep) {
      ok = false;
    } else {
      t.host = ep->host;
      t.port = ep->port;
    }
  } else {
    t.host = std::string(s);
  }
  if (!ok || t.host.empty()) {
    *error = "redis_url is malformed (expected redis://[user[:password]@]host[:port][/db])";
    return std::nullopt;
  }
  return t;
}

std::string ReplyText(const redisReply* r) {
  if (r == nullptr) return "";
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
      r->type == REDIS_REPLY_ERROR) {
    return std::string(r->str, r->len);
  }
  return "";
}

RedisConn::RedisConn(RedisTarget target, std::chrono::milliseconds timeout)
    : target_(std::move(target)), timeout_(timeout) {}

RedisConn::~RedisConn() { Reset(); }

void RedisConn::Reset() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

void RedisConn::Interrupt() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  interrupted_ = true;
  if (ctx_ != nullptr && ctx_->fd >= 0) ::shutdown(ctx_->fd, SHUT_RDWR);
}

void RedisConn::Cut() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (ctx_ != nullptr && ctx_->fd >= 0) ::shutdown(ctx_->fd, SHUT_RDWR);
}

void RedisConn::SetTimeout(std::chrono::milliseconds timeout) {
  redisSetTimeout(ctx_, ToTimeval(timeout));
}

bool RedisConn::Ensure(std::string* error) {
  if (ctx_ != nullptr && ctx_->err == 0) return true;
  Reset();
  redisContext* c =
      redisConnectWithTimeout(target_.host.c_str(), target_.port, ToTimeval(timeout_));
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (interrupted_) {
      if (c != nullptr) redisFree(c);
      *error = "the connection was interrupted (its owner is stopping)";
      return false;
    }
    ctx_ = c;
  }
  if (ctx_ == nullptr || ctx_->err != 0) {
    *error = fmt::format("cannot connect to Redis {}:{}: {}", target_.host, target_.port,
                         ctx_ != nullptr ? ctx_->errstr : "out of memory");
    Reset();
    return false;
  }
  SetTimeout(timeout_);
  std::vector<std::vector<std::string>> setup;
  if (!target_.password.empty()) {
    setup.push_back(target_.user.empty()
                        ? std::vector<std::string>{"AUTH", target_.password}
                        : std::vector<std::string>{"AUTH", target_.user, target_.password});
  }
  if (target_.db != 0) setup.push_back({"SELECT", std::to_string(target_.db)});
  for (const auto& cmd : setup) {
    std::string err;
    RedisReplyPtr r = Command(cmd, &err);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      *error = fmt::format("Redis {} failed: {}", cmd[0], r ? ReplyText(r.get()) : err);
      Reset();
      return false;
    }
  }
  return true;
}

RedisReplyPtr RedisConn::Command(const std::vector<std::string>& args, std::string* error,
                                 std::optional<std::chrono::milliseconds> timeout) {
  if (ctx_ == nullptr) {
    *error = "not connected to Redis";
    return nullptr;
  }
  {
    // Writing to a shut-down socket raises SIGPIPE: do not even try once interrupted.
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (interrupted_) {
      *error = "the connection was interrupted (its owner is stopping)";
      return nullptr;
    }
  }
  std::vector<const char*> argv;
  std::vector<size_t> argl;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    argl.push_back(a.size());
  }
  if (timeout) SetTimeout(*timeout);
  void* reply = redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), argl.data());
  if (reply == nullptr) {
    *error = fmt::format("Redis {} failed: {}", args.empty() ? "" : args[0],
                         ctx_->err != 0 ? ctx_->errstr : "connection lost");
    Reset();
    return nullptr;
  }
  if (timeout) SetTimeout(timeout_);
  return RedisReplyPtr(static_cast<redisReply*>(reply));
}

void RedisConn::Append(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> argl;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    argl.push_back(a.size());
  }
  redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), argl.data());
}

RedisReplyPtr RedisConn::Read() {
  void* reply = nullptr;
  if (redisGetReply(ctx_, &reply) != REDIS_OK) return nullptr;
  return RedisReplyPtr(static_cast<redisReply*>(reply));
}

std::string RedisConn::TransportError() const {
  return ctx_ != nullptr && ctx_->err != 0 ? std::string(ctx_->errstr) : "connection lost";
}

}  // namespace rsc::client
