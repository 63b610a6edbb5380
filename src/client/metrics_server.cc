// MetricsServer (include/rsc/metrics.h): GET /metrics over HTTP/1.1 on one thread.
//
// Boost.Beast parses and writes the HTTP (the vetted HTTP stack, ENGINEERING §2; header-only,
// so the client library gains no link dependency). The coordinator's rsc::HttpServer
// (src/server/http_server.h) is not reused: it lives in rsc_server (Redis adapter, spdlog),
// runs separate IO and worker pools and raises RLIMIT_NOFILE for 10,000 connections, all
// wrong for a listener embedded in an application that answers a scraper now and then. This
// file is the only one of the client library that includes Asio/Beast (compile time).
//
// Model: one io_context run by one thread. Each connection reads one request at a time with
// a deadline (io_timeout), answers, and reads the next one unless the client asked to close.
// Stop() closes the acceptor and stops the io_context; its destructor then destroys every
// pending operation, and with it every connection.

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "rsc/metrics.h"

namespace rsc {
namespace {

// A scrape request has no body and a few short headers.
constexpr uint32_t kMaxHeaderBytes = 8 << 10;
constexpr uint64_t kMaxBodyBytes = 4 << 10;

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const MetricsSource& source, std::chrono::milliseconds timeout)
      : stream_(std::move(socket)), source_(source), timeout_(timeout) {}

  void ReadNext() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(timeout_);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted) {
      return Close();
    }
    if (ec) {
      // Malformed or oversized request: say so and close (the stream state is unknown).
      return Reply(Make(http::status::bad_request, "bad request\n", false));
    }
    const http::request<http::string_body>& req = parser_->get();
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path != "/metrics") {
      return Reply(
          Make(http::status::not_found, "not found: try GET /metrics\n", req.keep_alive()));
    }
    if (req.method() != http::verb::get) {
      http::response<http::string_body> res =
          Make(http::status::method_not_allowed, "method not allowed\n", req.keep_alive());
      res.set(http::field::allow, "GET");
      return Reply(std::move(res));
    }
    try {
      http::response<http::string_body> res = Make(http::status::ok, source_(), req.keep_alive());
      res.set(http::field::content_type, kMetricsContentType);
      Reply(std::move(res));
    } catch (const std::exception& e) {
      Reply(Make(http::status::internal_server_error,
                 std::string("rendering metrics failed: ") + e.what() + "\n", false));
    } catch (...) {
      Reply(Make(http::status::internal_server_error, "rendering metrics failed\n", false));
    }
  }

  static http::response<http::string_body> Make(http::status status, std::string body,
                                                bool keep_alive) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = std::move(body);
    res.keep_alive(keep_alive);
    res.prepare_payload();
    return res;
  }

  void Reply(http::response<http::string_body> res) {
    response_ = std::move(res);
    stream_.expires_after(timeout_);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->response_.keep_alive()) return self->Close();
                        self->ReadNext();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  const MetricsSource& source_;  // owned by the Impl, which outlives every connection
  const std::chrono::milliseconds timeout_;
};

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(MetricsServerOptions options, MetricsSource source)
      : options_(std::move(options)), source_(std::move(source)) {}

  ~Impl() {
    Stop();
    // Pending operations (and the connections they own) go with the io_context, after the
    // acceptor: members are destroyed in reverse order.
  }

  bool Start(std::string* error) {
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    const auto endpoints =
        resolver.resolve(options_.host, std::to_string(options_.port), tcp::resolver::passive, ec);
    if (ec || endpoints.empty()) {
      return Fail(error, "resolving " + options_.host + ": " +
                             (ec ? ec.message() : std::string("no address")));
    }
    const tcp::endpoint at = endpoints.begin()->endpoint();
    if (acceptor_.open(at.protocol(), ec); ec) return Fail(error, "socket: " + ec.message());
    acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (acceptor_.bind(at, ec); ec) {
      return Fail(error, "binding " + options_.host + ":" + std::to_string(options_.port) + ": " +
                             ec.message());
    }
    if (acceptor_.listen(net::socket_base::max_listen_connections, ec); ec) {
      return Fail(error, "listen: " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
    pthread_setname_np(thread_.native_handle(), "rsc-metrics");
    return true;
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (!thread_.joinable()) return;
    ioc_.stop();
    thread_.join();
    // The thread is gone: the acceptor is ours again. Closing it frees the port now; the
    // connections close when the io_context is destroyed with the Impl.
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  uint16_t port() const { return port_; }

 private:
  static bool Fail(std::string* error, std::string message) {
    if (error != nullptr) *error = "metrics server: " + std::move(message);
    return false;
  }

  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        std::make_shared<Connection>(std::move(s), source_, options_.io_timeout)->ReadNext();
        return Accept();
      }
      // Not fatal (e.g. out of file descriptors): try again a little later, not in a loop.
      accept_retry_.expires_after(std::chrono::milliseconds(50));
      accept_retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
    });
  }

  const MetricsServerOptions options_;
  const MetricsSource source_;
  net::io_context ioc_{1};
  tcp::acceptor acceptor_{ioc_};          // used on the thread only, once started
  net::steady_timer accept_retry_{ioc_};  // likewise
  std::atomic<uint16_t> port_{0};
  std::mutex stop_mu_;  // serializes Stop()
  std::thread thread_;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() { Stop(); }

std::unique_ptr<MetricsServer> MetricsServer::Start(MetricsServerOptions options,
                                                    MetricsSource source, std::string* error) {
  if (!source) {
    if (error != nullptr) *error = "metrics server: no metrics source";
    return nullptr;
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(source));
  if (!impl->Start(error)) return nullptr;
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

std::unique_ptr<MetricsServer> MetricsServer::Start(MetricsServerOptions options,
                                                    const MetricsRegistry& registry,
                                                    std::string* error) {
  return Start(
      std::move(options), [&registry] { return registry.Render(); }, error);
}

uint16_t MetricsServer::port() const { return impl_->port(); }
void MetricsServer::Stop() { impl_->Stop(); }

}  // namespace rsc
