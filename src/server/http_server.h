#pragma once
// A small asynchronous HTTP/1.1 server (Boost.Beast, kept inside http_server.cc so the
// rest of the server compiles without Beast).
//
// Threads: `io_threads` threads (named rsc-http-io) run every socket (accept, read, write)
// and a separate, fixed pool of `worker_threads` (rsc-worker) runs HttpHandler::HandleAsync,
// which may block on Redis or answer later from another thread. A request the handler says
// only queues (IsQueued: a heartbeat, which waits for its group's batch) is handed to it on
// the IO thread instead, and what blocks runs on the pool. A finished response is posted
// back to its connection's strand. The thread count is therefore io_threads +
// worker_threads no matter how many connections are open; an idle
// keep-alive connection costs one socket, a timer and a few hundred bytes, so one
// process holds 10,000 of them (Start() raises RLIMIT_NOFILE's soft limit to the hard
// limit for that).
//
// Per connection: requests are read one at a time (no pipelining: the next request is
// read after the response is written). Bodies are limited to `max_body_bytes` (SPEC
// R2.4): a request whose Content-Length exceeds it is answered 413 PAYLOAD_TOO_LARGE
// after its body has been read and discarded, so the connection serves the next request;
// a chunked body that grows past it, a declared length above `max_discard_bytes`, or an
// `Expect: 100-continue` request that is too large gets 413 and the connection is
// closed. Malformed HTTP gets 400 and the connection is closed. A connection idle for
// `idle_timeout` (no complete request header) is closed; a body not complete within
// `body_timeout` of its header gets 408 and the connection is closed.
//
// Lifetime: Start() once, Stop() at most once (the destructor calls it). `handler` must
// outlive the server. All public methods are thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace rsc {

namespace detail {
class HttpServerImpl;
}

struct HttpRequest {
  std::string method;  // as sent, e.g. "GET"
  std::string target;  // raw request-target: path and query, not decoded
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // First header with this name (case-insensitive), or "" when absent.
  std::string_view Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Allow, ...)
  bool close = false;  // close the connection after this response
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Runs on a worker thread, concurrently with other calls; may block. Exceptions are
  // caught and answered 500 INTERNAL, but handlers should not rely on that.
  virtual HttpResponse Handle(const HttpRequest& req) = 0;
  // What the server calls, on a worker thread (on the IO thread when IsQueued(req)):
  // answers through `done`, exactly once, maybe later and on another thread (e.g. a
  // heartbeat that waits for its group's batch without holding a thread). `req` stays valid
  // until `done` is called. The default answers with Handle(req). Exceptions thrown before
  // `done` was called are answered 500.
  using Done = std::function<void(HttpResponse)>;
  // Runs a function on the server's worker pool.
  using Spawn = std::function<void(std::function<void()>)>;
  virtual void HandleAsync(const HttpRequest& req, Done done, const Spawn& spawn) {
    (void)spawn;
    done(Handle(req));
  }
  // True when HandleAsync(req) never blocks: it only queues the request, and hands
  // whatever may block to `spawn`. The server then calls it on the IO thread, saving the
  // hand-off to a worker (issue 14: a heartbeat costs one thread wake-up less).
  virtual bool IsQueued(const HttpRequest& req) const {
    (void)req;
    return false;
  }
  // True when Handle(req) is cheap and never blocks (e.g. /healthz, /metrics): it then
  // runs on the IO thread, so such probes never queue behind requests waiting on Redis.
  virtual bool IsInline(const HttpRequest& req) const {
    (void)req;
    return false;
  }
  // Called on the IO thread for every response the server produces itself, without a
  // Handle() call: 400 malformed HTTP, 413 body too large, 503 while stopping. Must be
  // cheap and must not throw. For metrics.
  virtual void OnServerReply(int status) { (void)status; }
};

// The default number of IO threads: one per two CPUs of the machine, at least 1 and at
// most 2. On 2 CPUs one IO thread beats two: the IO threads share the cores with the worker
// leading a batch and with Redis, and a second one only adds hand-offs between threads
// without a core to run on (heartbeat_bench --members 1000, 9 pairs alternated on the 2-CPU
// development machine: median 1.21x the heartbeats/s, lower p99; on a faster host later, 3
// pairs, the same; docs/performance.md). Two was the fixed default before; more than two
// has not been measured.
int DefaultIoThreads();

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: pick a free port (see HttpServer::port())
  int io_threads = DefaultIoThreads();
  int worker_threads = 8;
  size_t max_body_bytes = 1 << 20;  // SPEC R2.4: 1 MiB
  // A too-large body declared up to this size is drained to keep the connection usable;
  // above it the server answers 413 and closes rather than read that much.
  size_t max_discard_bytes = 64 << 20;
  size_t max_header_bytes = 16 << 10;
  std::chrono::milliseconds idle_timeout{120000};
  // From the end of a request's header to the end of its body: a client that sends a header
  // and then trickles or withholds the body gets 408 REQUEST_TIMEOUT and the connection is
  // closed, instead of holding it for idle_timeout (issue 8).
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds write_timeout{30000};
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the threads. Errors: kInternal naming the address when
  // the host does not resolve or the bind/listen fails.
  Status Start();

  // Stops accepting, closes idle connections, lets requests in progress finish and
  // write their responses (up to `drain`), then stops every thread. Idempotent. Must
  // not be called from a handler or an IO thread (it joins them).
  void Stop(std::chrono::milliseconds drain = std::chrono::seconds(5));

  // The bound port (valid after a successful Start()).
  uint16_t port() const;
  int64_t open_connections() const;
  const HttpServerOptions& options() const;

 private:
  std::unique_ptr<detail::HttpServerImpl> impl_;
};

// Raises the RLIMIT_NOFILE soft limit to the hard limit (idle keep-alive connections
// are file descriptors). Returns the soft limit in effect afterwards.
uint64_t RaiseFileLimit();

}  // namespace rsc
