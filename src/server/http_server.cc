#include "server/http_server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/protocol_json.h"

namespace rsc {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Body bytes are read in pieces of this size, so a slow or lying client never makes the
// server reserve its declared length up front.
constexpr size_t kBodyChunk = 64 << 10;
// After a response with Connection: close the server keeps reading (and discarding) for
// this long, so the client sees the response instead of a reset (lingering close).
constexpr auto kLingerTime = std::chrono::seconds(2);

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

HttpResponse ErrorResponse(ErrorCode code, std::string message, bool close) {
  HttpResponse r;
  r.status = HttpStatus(code);
  r.body = SerializeError(Error{code, std::move(message)});
  r.close = close;
  return r;
}

// Errors that mean "the peer went away or we closed it": no response is possible.
bool IsDisconnect(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == beast::error::timeout || ec == net::error::operation_aborted ||
         ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::bad_descriptor ||
         ec == net::error::not_connected;
}

HttpResponse SafeHandle(HttpHandler& handler, const HttpRequest& req) {
  try {
    return handler.Handle(req);
  } catch (const std::exception& e) {
    spdlog::error("http handler threw: {} (method={} target={})", e.what(), req.method, req.target);
  } catch (...) {
    spdlog::error("http handler threw a non-exception (method={} target={})", req.method,
                  req.target);
  }
  return ErrorResponse(ErrorCode::kInternal, "internal error", false);
}

// HandleAsync with SafeHandle's guarantee: `done` is called once, with a 500 if the
// handler threw before answering.
void SafeHandleAsync(HttpHandler& handler, const HttpRequest& req, HttpHandler::Done done,
                     const HttpHandler::Spawn& spawn) {
  auto answered = std::make_shared<std::atomic<bool>>(false);
  auto once = [answered, done](HttpResponse r) {
    if (!answered->exchange(true)) done(std::move(r));
  };
  try {
    handler.HandleAsync(req, once, spawn);
    return;
  } catch (const std::exception& e) {
    spdlog::error("http handler threw: {} (method={} target={})", e.what(), req.method, req.target);
  } catch (...) {
    spdlog::error("http handler threw a non-exception (method={} target={})", req.method,
                  req.target);
  }
  once(ErrorResponse(ErrorCode::kInternal, "internal error", false));
}

}  // namespace

int DefaultIoThreads() {
  // hardware_concurrency() is 0 when unknown: one thread then.
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cpus / 2, 1, 2);
}

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return {};
}

namespace detail {

class Session;

struct HttpServerImpl {
  HttpServerImpl(HttpServerOptions o, HttpHandler& h)
      : options(std::move(o)),
        handler(h),
        ioc(std::make_unique<net::io_context>(std::max(1, options.io_threads))),
        pool(std::make_unique<net::thread_pool>(std::max(1, options.worker_threads))),
        spawn([this](std::function<void()> f) { PostToPool(std::move(f)); }) {
    accept_strand.emplace(net::make_strand(*ioc));
    acceptor.emplace(*accept_strand);
    accept_retry.emplace(*accept_strand);
  }

  ~HttpServerImpl();

  // asio's pool starts its threads itself: each names itself (`top -H`, perf, gdb) on its
  // first task.
  template <class F>
  void PostToPool(F f) {
    net::post(*pool, [f = std::move(f)]() mutable {
      thread_local bool named = false;
      if (!named) {
        pthread_setname_np(pthread_self(), "rsc-worker");
        named = true;
      }
      // An exception out of a pool task would terminate the process (asio rethrows it from
      // the pool's thread). The handler calls catch their own and answer 500; this is for
      // anything else a task runs (the group service's spawned batches, say).
      try {
        f();
      } catch (const std::exception& e) {
        spdlog::error("event=worker_task_failed message=\"{}\"", e.what());
      } catch (...) {
        spdlog::error("event=worker_task_failed message=\"unknown exception\"");
      }
    });
  }

  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void Register(const std::shared_ptr<Session>& s);
  void Unregister(Session* s);
  void Stop(std::chrono::milliseconds drain);

  const HttpServerOptions options;
  HttpHandler& handler;
  // Everything that belongs to the io_context is destroyed explicitly in ~HttpServerImpl,
  // before the io_context itself: the pool first (its queued tasks own sessions whose
  // sockets need the io_context), then the acceptor, timer and strand, then the context.
  std::unique_ptr<net::io_context> ioc;
  std::unique_ptr<net::thread_pool> pool;
  const HttpHandler::Spawn spawn;  // posts to `pool`
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<net::strand<net::io_context::executor_type>> accept_strand;
  std::optional<tcp::acceptor> acceptor;          // used on accept_strand only
  std::optional<net::steady_timer> accept_retry;  // used on accept_strand only
  std::vector<std::thread> io_threads;
  std::atomic<uint16_t> port{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::atomic<bool> stopped{false};

  mutable std::mutex sessions_mu;
  std::condition_variable sessions_cv;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;  // guarded by sessions_mu
};

// One connection. Every member is used on the connection's strand only, except req_,
// which a worker reads while the strand has no operation outstanding (busy_).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServerImpl* server)
      : stream_(std::move(socket)), server_(server) {}
  ~Session() { server_->Unregister(this); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->server_->stopping) return self->Close();
      self->ReadHeader();
    });
  }

  // Posted by HttpServer::Stop: closes the connection unless a request is in progress,
  // in which case the response is written with Connection: close.
  void Shutdown() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      if (!self->busy_) self->Close();
    });
  }

 private:
  const HttpServerOptions& opts() const { return server_->options; }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(opts().max_header_bytes));
    parser_->body_limit(boost::none);  // enforced here, chunk by chunk
    stream_.expires_after(opts().idle_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& h = parser_->get();
    req_ = HttpRequest{};
    req_.method = std::string(h.method_string());
    req_.target = std::string(h.target());
    for (const auto& field : h) {
      req_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    version_ = h.version();
    keep_alive_ = parser_->keep_alive();
    body_.clear();
    received_ = 0;
    discarding_ = false;
    body_timed_out_ = false;
    bool expect_continue = IEquals(h[http::field::expect], "100-continue");
    boost::optional<uint64_t> length = parser_->content_length();
    if (length && *length > opts().max_body_bytes) {
      if (expect_continue || *length > opts().max_discard_bytes) {
        // The client waits for 100 Continue (or would make us read too much): answer
        // now and close, since its body may or may not follow.
        return RespondTooLarge(/*close=*/true);
      }
      discarding_ = true;
    }
    if (!parser_->is_done()) ArmBodyTimer();
    if (expect_continue && !parser_->is_done()) return WriteContinue();
    ReadBody();
  }

  // The body must be complete within body_timeout of its header, however it trickles in
  // (a per-read timeout would let one byte per period hold the connection). A timer, not the
  // stream's expiry: that one closes the socket, and the client deserves its 408.
  void ArmBodyTimer() {
    if (!body_timer_) body_timer_.emplace(stream_.get_executor());
    body_timer_->expires_after(opts().body_timeout);
    body_timer_->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;  // cancelled: the body arrived (or the connection is gone)
      self->body_timed_out_ = true;
      self->stream_.cancel();  // the pending read completes with operation_aborted
    });
  }
  void DisarmBodyTimer() {
    if (body_timer_) body_timer_->cancel();
  }

  void WriteContinue() {
    auto res =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
    stream_.expires_after(opts().write_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->ReadBody();
                      });
  }

  void ReadBody() {
    if (parser_->is_done()) return OnComplete();
    auto& body = parser_->get().body();
    if (discarding_) {
      if (!scratch_) scratch_ = std::make_unique<char[]>(kBodyChunk);
      chunk_ = kBodyChunk;
      body.data = scratch_.get();
    } else {
      chunk_ = kBodyChunk;
      if (auto length = parser_->content_length_remaining()) {
        // Read at most what is left (at least one byte per call).
        chunk_ = std::clamp<uint64_t>(*length, 1, kBodyChunk);
      }
      body_.resize(received_ + chunk_);
      body.data = body_.data() + received_;
    }
    body.size = chunk_;
    body.more = true;
    // A backstop only; the body timer bounds the whole body. Always past the body timer
    // (a chunk slower than the idle timeout, with a longer body timeout, would otherwise be
    // closed at the idle timeout without the 408 the body timer gives).
    stream_.expires_after(opts().idle_timeout + opts().body_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    // The timer may fire while a chunk completes: its cancel then finds no read to stop and
    // this read succeeds, so the flag, not the error, says the body is late (unless it is
    // complete: then the timer lost the race and the request is served).
    if (body_timed_out_ && (ec || !parser_->is_done())) {
      return ServerReply(ErrorResponse(
          ErrorCode::kRequestTimeout,
          "request body not complete within " + std::to_string(opts().body_timeout.count()) +
              " ms of its header (--body-timeout-ms); nothing was processed",
          /*close=*/true));
    }
    if (ec) return OnReadError(ec);
    size_t got = chunk_ - parser_->get().body().size;
    if (!discarding_) {  // discarded bytes are bounded by the declared length
      received_ += got;
      body_.resize(received_);
      if (received_ > opts().max_body_bytes) {
        // Only a chunked body gets here (a declared length was checked up front); its
        // end is unknown, so answer and close instead of draining it.
        return RespondTooLarge(/*close=*/true);
      }
    }
    if (parser_->is_done()) return OnComplete();
    ReadBody();
  }

  void OnComplete() {
    DisarmBodyTimer();
    if (discarding_) return RespondTooLarge(/*close=*/false);
    req_.body = std::move(body_);
    body_ = std::string();
    scratch_.reset();
    Dispatch();
  }

  void OnReadError(beast::error_code ec) {
    if (IsDisconnect(ec)) return Close();
    if (ec.category() == beast::http::make_error_code(http::error::bad_target).category()) {
      spdlog::debug("http malformed request: {}", ec.message());
      return ServerReply(ErrorResponse(ErrorCode::kInvalidRequest,
                                       "malformed HTTP request: " + ec.message(), /*close=*/true));
    }
    spdlog::debug("http read error: {}", ec.message());
    Close();
  }

  void RespondTooLarge(bool close) {
    DisarmBodyTimer();
    ServerReply(ErrorResponse(
        ErrorCode::kPayloadTooLarge,
        "request body exceeds the limit of " + std::to_string(opts().max_body_bytes) + " bytes",
        close));
  }

  void Dispatch() {
    busy_ = true;
    stream_.expires_never();
    if (server_->stopping || closing_) {
      return ServerReply(ErrorResponse(ErrorCode::kCoordinatorTerminating,
                                       "the HTTP server is stopping", /*close=*/true));
    }
    if (server_->handler.IsInline(req_)) return Respond(SafeHandle(server_->handler, req_));
    auto self = shared_from_this();
    HttpHandler::Done done = [self](HttpResponse resp) {
      net::post(self->stream_.get_executor(),
                [self, resp = std::move(resp)]() mutable { self->Respond(std::move(resp)); });
    };
    if (server_->handler.IsQueued(req_)) {
      return SafeHandleAsync(server_->handler, req_, std::move(done), server_->spawn);
    }
    server_->PostToPool([self, done = std::move(done)] {
      // Queued before Stop and taken after: answered, not run, so Stop's wait for the pool
      // is for the handlers already running (each bounded by its Redis timeout), not for
      // every request still queued behind them.
      if (self->server_->stopping) {
        return done(ErrorResponse(ErrorCode::kCoordinatorTerminating, "the HTTP server is stopping",
                                  /*close=*/true));
      }
      SafeHandleAsync(self->server_->handler, self->req_, done, self->server_->spawn);
    });
  }

  // A response the server makes without calling the handler.
  void ServerReply(HttpResponse r) {
    try {
      server_->handler.OnServerReply(r.status);
    } catch (...) {
      // Metrics only; never let it take the connection down.
    }
    Respond(std::move(r));
  }

  void Respond(HttpResponse r) {
    // No body timer outlives its request: one still armed (a 400 for a malformed body, a
    // 413) would cancel this response's write, or the next request's read, when it fires.
    DisarmBodyTimer();
    busy_ = true;
    req_ = HttpRequest{};
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version_);
    res->set(http::field::server, "rsc-coordinator");
    res->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res->set(k, v);
    res->body() = std::move(r.body);
    bool close = r.close || !keep_alive_ || closing_ || server_->stopping;
    res->keep_alive(!close);
    res->prepare_payload();
    stream_.expires_after(opts().write_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, close](beast::error_code ec, size_t) {
                        self->OnWrite(ec, close);
                      });
  }

  void OnWrite(beast::error_code ec, bool close) {
    busy_ = false;
    if (ec) return Close();
    if (close || closing_) return LingerClose();
    // An idle keep-alive connection should cost next to nothing (R: 10k connections).
    if (buffer_.size() == 0) buffer_.shrink_to_fit();
    ReadHeader();
  }

  // Half-closes, then drains what the client still sends for a short while so it reads
  // our response instead of a connection reset.
  void LingerClose() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    if (!scratch_) scratch_ = std::make_unique<char[]>(kBodyChunk);
    stream_.expires_after(kLingerTime);
    Drain();
  }

  void Drain() {
    stream_.async_read_some(net::buffer(scratch_.get(), kBodyChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Drain();
                            });
  }

  void Close() {
    DisarmBodyTimer();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  HttpServerImpl* server_;
  std::optional<http::request_parser<http::buffer_body>> parser_;
  HttpRequest req_;
  std::string body_;
  std::optional<net::steady_timer> body_timer_;  // created at the first request with a body
  std::unique_ptr<char[]> scratch_;              // discard/linger buffer, allocated on demand
  size_t received_ = 0;
  size_t chunk_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool discarding_ = false;
  bool body_timed_out_ = false;
  bool busy_ = false;     // a request is being handled or its response written
  bool closing_ = false;  // the server is stopping: close after the current response
};

HttpServerImpl::~HttpServerImpl() {
  // Queued pool tasks own sessions whose sockets belong to the io_context: destroy the
  // pool first. Sessions unregister themselves, so the registry must still be alive.
  pool.reset();
  work.reset();
  accept_retry.reset();
  acceptor.reset();
  accept_strand.reset();
  ioc.reset();
}

void HttpServerImpl::DoAccept() {
  acceptor->async_accept(net::make_strand(*ioc), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServerImpl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor->is_open() || stopping) return;
  if (ec) {
    // Typically EMFILE/ENFILE: back off briefly instead of spinning on the error.
    spdlog::warn("http accept failed: {}; retrying in 50 ms", ec.message());
    accept_retry->expires_after(std::chrono::milliseconds(50));
    accept_retry->async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && !stopping) DoAccept();
    });
    return;
  }
  beast::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);
  auto session = std::make_shared<Session>(std::move(socket), this);
  Register(session);
  session->Start();
  DoAccept();
}

void HttpServerImpl::Register(const std::shared_ptr<Session>& s) {
  std::lock_guard<std::mutex> lock(sessions_mu);
  sessions.emplace(s.get(), s);
}

void HttpServerImpl::Unregister(Session* s) {
  std::lock_guard<std::mutex> lock(sessions_mu);
  sessions.erase(s);
  if (sessions.empty()) sessions_cv.notify_all();
}

void HttpServerImpl::Stop(std::chrono::milliseconds drain) {
  if (!started || stopped.exchange(true)) return;
  auto deadline = std::chrono::steady_clock::now() + drain;
  stopping = true;

  std::promise<void> acceptor_closed;
  net::post(*accept_strand, [this, &acceptor_closed] {
    beast::error_code ec;
    acceptor->close(ec);
    accept_retry->cancel();
    acceptor_closed.set_value();
  });
  acceptor_closed.get_future().wait();

  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> lock(sessions_mu);
    live.reserve(sessions.size());
    for (auto& [ptr, weak] : sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->Shutdown();
  live.clear();
  {
    std::unique_lock<std::mutex> lock(sessions_mu);
    if (!sessions_cv.wait_until(lock, deadline, [this] { return sessions.empty(); })) {
      spdlog::warn("http server stop: {} connection(s) still open after the drain period",
                   sessions.size());
    }
  }
  // Handlers still running finish (they have their own Redis timeouts); their responses
  // go nowhere once the io threads stop. Requests still queued are answered 503 at once
  // (Dispatch's task checks `stopping`).
  pool->join();
  work.reset();
  ioc->stop();
  for (auto& t : io_threads) t.join();
  io_threads.clear();
}

}  // namespace detail

using detail::HttpServerImpl;

HttpServer::HttpServer(HttpServerOptions options, HttpHandler& handler)
    : impl_(std::make_unique<HttpServerImpl>(std::move(options), handler)) {}

HttpServer::~HttpServer() { Stop(std::chrono::milliseconds(0)); }

Status HttpServer::Start() {
  HttpServerImpl& s = *impl_;
  RSC_CHECK(!s.started);
  RaiseFileLimit();
  beast::error_code ec;
  tcp::resolver resolver(*s.ioc);
  auto results = resolver.resolve(s.options.host, std::to_string(s.options.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return MakeError(ErrorCode::kInternal,
                     "cannot resolve listen host '" + s.options.host + "': " + ec.message());
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  auto fail = [&](const char* what) {
    beast::error_code close_ec;
    s.acceptor->close(close_ec);
    return MakeError(ErrorCode::kInternal, std::string(what) + " " + s.options.host + ":" +
                                               std::to_string(s.options.port) + ": " +
                                               ec.message());
  };
  if (s.acceptor->open(endpoint.protocol(), ec)) return fail("cannot open socket for");
  if (s.acceptor->set_option(net::socket_base::reuse_address(true), ec)) {
    return fail("cannot set SO_REUSEADDR on");
  }
  if (s.acceptor->bind(endpoint, ec)) return fail("cannot bind");
  if (s.acceptor->listen(net::socket_base::max_listen_connections, ec)) {
    return fail("cannot listen on");
  }
  s.port = s.acceptor->local_endpoint(ec).port();
  s.work.emplace(s.ioc->get_executor());
  s.started = true;
  net::post(*s.accept_strand, [&s] { s.DoAccept(); });
  for (int i = 0; i < std::max(1, s.options.io_threads); ++i) {
    s.io_threads.emplace_back([&s] { s.ioc->run(); });
    pthread_setname_np(s.io_threads.back().native_handle(), "rsc-http-io");
  }
  return OkStatus();
}

void HttpServer::Stop(std::chrono::milliseconds drain) { impl_->Stop(drain); }

uint16_t HttpServer::port() const { return impl_->port; }

int64_t HttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(impl_->sessions_mu);
  return static_cast<int64_t>(impl_->sessions.size());
}

const HttpServerOptions& HttpServer::options() const { return impl_->options; }

uint64_t RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    rlim_t wanted = lim.rlim_max;
    lim.rlim_cur = wanted;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      getrlimit(RLIMIT_NOFILE, &lim);
    }
  }
  return static_cast<uint64_t>(lim.rlim_cur);
}

}  // namespace rsc
