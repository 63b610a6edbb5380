#pragma once
// Redis plumbing of the consumer runtime: the redis:// URL form the client library accepts
// and one blocking hiredis connection with a per-command timeout (an XREADGROUP BLOCK needs
// a longer socket timeout than a plain command).
//
// The producer (producer.cc) has private equivalents of the URL parser and the connection;
// this file repeats them for the consumer rather than moving them, so the two runtimes can
// evolve separately. Same accepted URL form: redis://[user[:password]@]host[:port][/db].
//
// Thread safety: ParseRedisUrl is pure. A RedisConn is used by one thread at a time
// (each shard reader owns one), except Interrupt(), which any thread may call.

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::client {

struct RedisTarget {
  std::string host;
  int port = 6379;
  std::string user;
  std::string password;
  int db = 0;
};

// nullopt (and *error) when the URL is not of the accepted form.
std::optional<RedisTarget> ParseRedisUrl(std::string_view url, std::string* error);

struct RedisReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

// The text of a string, status or error reply ("" for other types).
std::string ReplyText(const redisReply* r);

class RedisConn {
 public:
  RedisConn(RedisTarget target, std::chrono::milliseconds timeout);
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // Connects (AUTH, SELECT) unless connected. False with *error if it cannot.
  bool Ensure(std::string* error);
  // Sends one command and reads its reply with a socket timeout of `timeout` (default: the
  // connection's). nullptr on a transport failure (the connection is then dropped and
  // *error says why); error replies are returned as replies.
  RedisReplyPtr Command(const std::vector<std::string>& args, std::string* error,
                        std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  void Reset();
  // Cuts the connection (shutdown of the socket) so that a command the owner thread is
  // blocked in returns at once with a transport error, and makes every later Ensure()
  // fail: for an owner that must stop now (an abandoned shard reader). Without it such a
  // reader would end only when its command returns — up to the reply timeout plus the
  // BLOCK later — and still count as reading the shard until then.
  void Interrupt();
  // Cuts the current connection like Interrupt() (a command blocked in another thread
  // returns at once with a transport error) but leaves later Ensure() free to reconnect: for
  // a shared connection whose read must end now while its owner goes on.
  void Cut();

  // Pipelining (the producer's batched XADDs): Append queues a command, Read flushes and
  // reads one reply in order (nullptr on a transport failure; TransportError says why).
  // Precondition: Ensure() succeeded.
  void Append(const std::vector<std::string>& args);
  RedisReplyPtr Read();
  std::string TransportError() const;

 private:
  void SetTimeout(std::chrono::milliseconds timeout);

  RedisTarget target_;
  std::chrono::milliseconds timeout_;
  // Written by the owner thread under fd_mu_ (connect, free), read by it without the lock;
  // Interrupt() reads it under fd_mu_, so the socket it shuts down cannot be closed (and
  // its number reused by another connection) meanwhile.
  redisContext* ctx_ = nullptr;
  std::mutex fd_mu_;
  bool interrupted_ = false;  // guarded by fd_mu_
};

}  // namespace rsc::client
