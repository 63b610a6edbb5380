#include "support/fault_proxy.h"

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <cctype>
#include <deque>
#include <future>
#include <list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace rsc::testing {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {
// While a direction is blackholed its writer re-checks this often.
constexpr auto kBlackholePoll = std::chrono::milliseconds(20);
// A direction stops reading while this much is queued (back-pressure, like a full window).
constexpr size_t kMaxQueued = 1 << 20;
}  // namespace

class ProxyConn;

struct FaultProxy::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  mutable std::mutex mu;  // guards the fields below
  ProxyFaults faults;
  int target_port = 0;
  ProxyCounters counters;
  std::mt19937_64 rng;
  std::list<std::weak_ptr<ProxyConn>> conns;  // io thread only

  // Under mu: a fault decision for one chunk. Returns false to reset the connection.
  // `last_request`: the first bytes of the last chunk the client sent that began a request.
  bool DecideChunk(bool from_target, const std::string& last_request, Clock::duration& delay,
                   bool& blackholed) {
    std::lock_guard lk(mu);
    blackholed = faults.blackhole;
    if (from_target && faults.reset_replies && last_request.starts_with(faults.reset_replies_to)) {
      return false;
    }
    if (faults.reset_probability > 0 &&
        std::uniform_real_distribution<double>(0, 1)(rng) < faults.reset_probability) {
      return false;
    }
    const auto lo = faults.delay_min.count();
    const auto hi = std::max(lo, faults.delay_max.count());
    const auto ms = hi > 0 ? std::uniform_int_distribution<int64_t>(lo, hi)(rng) : 0;
    if (ms > 0) ++counters.chunks_delayed;
    delay = std::chrono::milliseconds(ms);
    return true;
  }
  bool Blackholed() const {
    std::lock_guard lk(mu);
    return faults.blackhole;
  }
  void Count(int64_t ProxyCounters::*field, int64_t n = 1) {
    std::lock_guard lk(mu);
    counters.*field += n;
  }

  void Accept();
};

// One proxied connection: two directions, each a queue of chunks with due times.
class ProxyConn : public std::enable_shared_from_this<ProxyConn> {
 public:
  ProxyConn(FaultProxy::Impl& proxy, tcp::socket client)
      : p_(proxy),
        client_(std::move(client)),
        server_(proxy.io),
        up_{&client_, &server_, asio::steady_timer(proxy.io)},
        down_{&server_, &client_, asio::steady_timer(proxy.io)} {}

  void Connect(int target_port) {
    auto self = shared_from_this();
    tcp::endpoint ep(asio::ip::address_v4::loopback(), static_cast<uint16_t>(target_port));
    server_.async_connect(ep, [self](const boost::system::error_code& ec) {
      if (ec) {
        self->Close(/*reset=*/true);
        return;
      }
      self->Read(self->up_);
      self->Read(self->down_);
    });
  }

  // Cuts both sides with RST (SO_LINGER 0), as a crashed peer would.
  void Close(bool reset) {
    if (closed_) return;
    closed_ = true;
    if (reset) p_.Count(&ProxyCounters::resets);
    for (tcp::socket* s : {&client_, &server_}) {
      boost::system::error_code ignored;
      if (reset && s->is_open()) s->set_option(asio::socket_base::linger(true, 0), ignored);
      s->close(ignored);
    }
    up_.timer.cancel();
    down_.timer.cancel();
  }

 private:
  struct Chunk {
    std::vector<char> data;
    Clock::time_point due;
  };
  struct Pipe {
    tcp::socket* from;
    tcp::socket* to;
    asio::steady_timer timer;
    std::deque<Chunk> queue;
    size_t queued = 0;
    Clock::time_point last_due{};
    bool reading = false;
    bool writing = false;
    bool eof = false;
    std::array<char, 16384> buf{};
  };

  void Read(Pipe& pipe) {
    if (closed_ || pipe.reading || pipe.eof || pipe.queued >= kMaxQueued) return;
    pipe.reading = true;
    auto self = shared_from_this();
    pipe.from->async_read_some(asio::buffer(pipe.buf), [self, &pipe](
                                                           const boost::system::error_code& ec,
                                                           size_t n) {
      pipe.reading = false;
      if (self->closed_) return;
      if (ec == asio::error::eof) {
        pipe.eof = true;
        self->Write(pipe);  // half-close once the queue is flushed
        return;
      }
      if (ec) {
        self->Close(/*reset=*/true);
        return;
      }
      Clock::duration delay{};
      bool blackholed = false;
      if (&pipe == &self->up_ && n >= 4 && std::isupper(static_cast<unsigned char>(pipe.buf[0]))) {
        // A request line starts here (as far as a test's small requests go).
        self->last_request_.assign(pipe.buf.data(), std::min<size_t>(n, 16));
      }
      if (!self->p_.DecideChunk(&pipe == &self->down_, self->last_request_, delay, blackholed)) {
        self->Close(/*reset=*/true);
        return;
      }
      // Keep byte order: a chunk is never due before the one ahead of it.
      const auto due = std::max(pipe.last_due, Clock::now() + delay);
      pipe.last_due = due;
      pipe.queue.push_back(Chunk{std::vector<char>(pipe.buf.begin(), pipe.buf.begin() + n), due});
      pipe.queued += n;
      self->Write(pipe);
      self->Read(pipe);
    });
  }

  void Write(Pipe& pipe) {
    if (closed_ || pipe.writing) return;
    if (pipe.queue.empty()) {
      if (pipe.eof) {
        boost::system::error_code ignored;
        pipe.to->shutdown(tcp::socket::shutdown_send, ignored);
      }
      return;
    }
    auto self = shared_from_this();
    const auto now = Clock::now();
    if (p_.Blackholed() || pipe.queue.front().due > now) {
      pipe.writing = true;
      pipe.timer.expires_at(p_.Blackholed() ? now + kBlackholePoll : pipe.queue.front().due);
      pipe.timer.async_wait([self, &pipe](const boost::system::error_code&) {
        pipe.writing = false;
        self->Write(pipe);
      });
      return;
    }
    pipe.writing = true;
    asio::async_write(*pipe.to, asio::buffer(pipe.queue.front().data),
                      [self, &pipe](const boost::system::error_code& ec, size_t n) {
                        pipe.writing = false;
                        if (self->closed_) return;
                        if (ec) {
                          self->Close(/*reset=*/true);
                          return;
                        }
                        self->p_.Count(&ProxyCounters::bytes, static_cast<int64_t>(n));
                        pipe.queued -= pipe.queue.front().data.size();
                        pipe.queue.pop_front();
                        self->Write(pipe);
                        self->Read(pipe);  // resumes a direction paused by back-pressure
                      });
  }

  FaultProxy::Impl& p_;
  tcp::socket client_;
  tcp::socket server_;
  Pipe up_;    // client → server
  Pipe down_;  // server → client
  bool closed_ = false;
  std::string last_request_;  // io thread: see DecideChunk
};

void FaultProxy::Impl::Accept() {
  acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      bool refuse = false;
      int target = 0;
      {
        std::lock_guard lk(mu);
        refuse = faults.refuse;
        target = target_port;
        ++(refuse ? counters.refused : counters.accepted);
      }
      if (refuse) {
        boost::system::error_code ignored;
        socket.set_option(asio::socket_base::linger(true, 0), ignored);
        socket.close(ignored);
      } else {
        auto conn = std::make_shared<ProxyConn>(*this, std::move(socket));
        conns.remove_if([](const std::weak_ptr<ProxyConn>& w) { return w.expired(); });
        conns.push_back(conn);
        conn->Connect(target);
      }
    }
    Accept();
  });
}

FaultProxy::FaultProxy(int target_port, uint64_t seed, int listen_port)
    : impl_(std::make_shared<Impl>()) {
  impl_->target_port = target_port;
  impl_->rng.seed(seed);
  tcp::endpoint ep(asio::ip::address_v4::loopback(), static_cast<uint16_t>(listen_port));
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->Accept();
  thread_ = std::thread([impl = impl_] { impl->io.run(); });
}

FaultProxy::~FaultProxy() {
  asio::post(impl_->io, [impl = impl_] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
    for (auto& w : impl->conns) {
      if (auto c = w.lock()) c->Close(/*reset=*/false);
    }
    impl->io.stop();
  });
  thread_.join();
}

void FaultProxy::SetFaults(const ProxyFaults& faults) {
  std::lock_guard lk(impl_->mu);
  impl_->faults = faults;
}

ProxyFaults FaultProxy::faults() const {
  std::lock_guard lk(impl_->mu);
  return impl_->faults;
}

void FaultProxy::Retarget(int target_port) {
  std::lock_guard lk(impl_->mu);
  impl_->target_port = target_port;
}

void FaultProxy::ResetAll() {
  std::promise<void> done;
  auto fut = done.get_future();
  asio::post(impl_->io, [impl = impl_, &done] {
    for (auto& w : impl->conns) {
      if (auto c = w.lock()) c->Close(/*reset=*/true);
    }
    impl->conns.clear();
    done.set_value();
  });
  fut.wait();
}

ProxyCounters FaultProxy::counters() const {
  std::lock_guard lk(impl_->mu);
  return impl_->counters;
}

}  // namespace rsc::testing
