#pragma once
// A synchronous hiredis connection with timeouts, AUTH, SELECT, pipelining and automatic
// reconnect, plus a bounded thread-safe pool of them. The one Redis connection layer of the
// project: the coordinator's store and the client library (producer, consumer readers)
// both use it.
//
// Failure mapping — the one rule callers rely on (SPEC §4.1, ENGINEERING §4):
//   * cannot connect, AUTH/SELECT refused, or an I/O error before a command was completely
//     handed to the kernel                                      -> REDIS_UNAVAILABLE
//   * a timeout or I/O error after a kWrite command was completely sent: the server may or
//     may not have applied it                                   -> UNKNOWN_RESULT
//   * the same after only kRead commands were sent (safe to retry) -> REDIS_UNAVAILABLE
// Error *replies* from the server (e.g. "-NOSCRIPT", "-WRONGTYPE") are not transport
// failures: they come back as Reply{kError} and the caller decides.
//
// Reconnect: any transport failure drops the socket; the next command reconnects (and
// re-runs AUTH/SELECT). Before each use an idle socket is checked for a pending EOF or
// reset (the server restarted, or closed it): such a socket is replaced before sending,
// so a write on a connection that died while pooled goes out on a fresh one instead of
// failing as UNKNOWN_RESULT. A timed-out socket is never reused, so a late reply can
// never be taken for the answer to a later command.
//
// SIGPIPE: writes run with SIGPIPE blocked on the calling thread (and a raised one
// swallowed); the process-wide disposition is left alone.
//
// Thread safety: a Connection is used by one thread at a time (the pool hands it out
// exclusively), except Cut() and Interrupt(), which any thread may call while the owner is
// blocked in a command. ConnectionPool is safe for concurrent use.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "redis/redis_url.h"
#include "redis/reply.h"

struct redisContext;

namespace rsc::redis {

struct ConnectionOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // ACL user; empty = "AUTH <password>" form
  std::string password;  // empty = no AUTH
  int db = 0;
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{2000};
  // Other nodes of a Redis Cluster ("host:port", from a URL's seed list): OpenExecutor asks
  // them in order when this one cannot be reached, and the slot map may be re-read from them.
  // A Connection itself only ever uses host/port.
  std::vector<std::string> seeds;

  static ConnectionOptions FromUrl(const RedisUrl& url);
  // These options with host/port taken from `address` ("host:port", IPv6 bracketed).
  ConnectionOptions WithAddress(const std::string& address) const;
  std::string Address() const;  // "host:port" for messages
};

// Whether a command may have side effects. Decides UNKNOWN_RESULT vs REDIS_UNAVAILABLE
// when the reply is lost.
enum class CommandKind { kRead, kWrite };

class Connection {
 public:
  explicit Connection(ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects (TCP, AUTH, SELECT) unless already connected. Run/Pipeline call it lazily.
  Status Connect();
  // Connect(), after replacing a socket the server closed while it was idle: what Send does
  // first. For a caller that must check something between connecting and writing.
  Status Ready();
  // Closes the socket; the next command reconnects.
  void Disconnect();
  bool connected() const { return ctx_ != nullptr; }

  Result<Reply> Run(const Command& cmd, CommandKind kind);
  // The same with a reply timeout other than the connection's, for this command only (a
  // blocking read: its BLOCK plus a margin).
  Result<Reply> Run(const Command& cmd, CommandKind kind, std::chrono::milliseconds timeout);
  // Sends all commands in one write, then reads one reply per command, in order.
  Result<std::vector<Reply>> Pipeline(const std::vector<Command>& cmds, CommandKind kind);

  // A pipeline whose replies are taken one at a time (a caller that answers each command
  // as its reply arrives): Send connects if needed and writes `cmds` in one go; each
  // Receive reads the next reply. A transport failure drops the connection: the failing
  // Receive (or Send) is mapped as above, UNKNOWN_RESULT when a kWrite command of this
  // pipeline may have run; later Receives of the same pipeline fail too (nothing to read).
  Status Send(const std::vector<Command>& cmds, CommandKind kind);
  Status Send(const std::vector<const Command*>& cmds, CommandKind kind);  // no copies
  Result<Reply> Receive();
  // The same with a reply timeout other than the connection's, for this reply only (a
  // blocking read inside a pipeline).
  Result<Reply> Receive(std::chrono::milliseconds timeout);

  // Shuts the socket down (any thread): a command the owner is blocked in fails at once
  // with a transport error; the owner's next command reconnects. For a shared blocking read
  // that must end now while its owner goes on.
  void Cut();
  // Cut(), and from now on every command fails at once without connecting: for an owner
  // that is stopping (the client's reader threads at shutdown).
  void Interrupt();

  // Applies to subsequent commands (e.g. a longer budget for SCAN or DEBUG SLEEP tests).
  void SetCommandTimeout(std::chrono::milliseconds timeout);

  const ConnectionOptions& options() const { return options_; }
  // Successful (re)connects after the first one; for tests and stats.
  int64_t reconnects() const { return reconnects_; }

 private:
  // Drops the socket if the server closed it while we were idle.
  void DropIfClosedByPeer();
  // Writes the commands on the established context; Receive reads their replies. Transport
  // failures are mapped as described at the top of this file.
  Status Write(const std::vector<const Command*>& cmds, CommandKind kind);
  Error ReadFailure();
  void SetTimeout(std::chrono::milliseconds timeout);

  ConnectionOptions options_;
  // Assigned and freed by the owner thread under fd_mu_ and read by it without the lock;
  // Cut/Interrupt read it under fd_mu_, so the socket they shut down cannot be closed (and
  // its number reused) meanwhile.
  redisContext* ctx_ = nullptr;
  std::mutex fd_mu_;
  bool interrupted_ = false;  // guarded by fd_mu_
  // The pipeline in flight: replies still to read and whether a kWrite is among them.
  size_t outstanding_ = 0;
  bool outstanding_write_ = false;
  std::chrono::milliseconds timeout_now_{0};  // the socket's current reply timeout
  int64_t connects_ = 0;
  int64_t reconnects_ = 0;
};

// A bounded pool. Connections are created on demand up to `max_size`; a checkout beyond
// that waits up to `checkout_wait` for one to be returned, then fails REDIS_UNAVAILABLE
// ("pool exhausted"). A returned connection keeps its socket for reuse.
class ConnectionPool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {
      other.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    Connection& operator*() { return *conn_; }
    Connection* operator->() { return conn_.get(); }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  ConnectionPool(ConnectionOptions options, size_t max_size,
                 std::chrono::milliseconds checkout_wait = std::chrono::milliseconds(2000));
  // Precondition: every Lease has been destroyed.
  ~ConnectionPool();

  Result<Lease> Checkout();
  const ConnectionOptions& options() const { return options_; }
  size_t max_size() const { return max_size_; }

 private:
  void Return(std::unique_ptr<Connection> conn);

  const ConnectionOptions options_;
  const size_t max_size_;
  const std::chrono::milliseconds checkout_wait_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
  size_t outstanding_ = 0;                         // guarded by mu_; leased out
};

}  // namespace rsc::redis
