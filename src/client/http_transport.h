#pragma once
// HttpTransport: a small blocking HTTP/1.1 keep-alive client for talking to one
// rsc-coordinator endpoint (routing refreshes, heartbeats). Plain sockets, no Beast, so the
// client library stays light. Every call is bounded by `timeout` (connect, shared by the
// addresses a name resolves to, and the whole exchange) — except the name look-up itself
// (getaddrinfo), which waits as long as the system's resolver does: where a resolver may
// hang, name the endpoints by address. It speaks what the coordinator sends: Content-Length
// or chunked bodies (a body ended by the server closing is accepted only if it closed in
// order).
//
// A kept-alive connection is checked before it is reused: one the server closed while idle
// (it does after 120 s; docs/protocol.md §11) is replaced before anything is sent. If the
// server still closes or resets it after the request went out and before any byte of the
// answer, a request the caller says may be repeated (Repeat::kIfClosedUnanswered: routing
// GETs and heartbeats, SPEC §6) is sent once more on a new connection, within the same
// deadline; any other failure after the send — a deadline above all — is returned with
// `sent` true, never retried: the request may have been processed. An answer the server sends
// before it took the whole request (a 413 for a body over its limit, then a close) is returned
// as the request's outcome, not taken for a broken connection.
//
// Thread safety: none; one HttpTransport per thread (the runtimes use theirs from their
// background thread only).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/http_endpoint.h"
#include "client/runtime_ports.h"  // PercentEncode

namespace rsc::client {

// Local monotonic milliseconds: the clock the client cores' leases are measured in.
inline int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The same clock in microseconds: the stamps of ConsumerEvent / PublishEvent.
inline int64_t SteadyNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The clock rounded UP to the millisecond, for deciding whether a lease still allows an
// action now (C1, C4, PR5). Leases end on whole milliseconds; with the rounded-down clock a
// check at end - 0.1 ms passes and the action (a read, its BLOCK, an XADD) happens after
// the lease ended. Rounded up, a passing check leaves at least 1 ms, and a BLOCK capped by
// `end - now` ends before the lease does. Lease starts use SteadyNowMs (rounded down): both
// err on the short side.
inline int64_t SteadyNowMsCeil() {
  const int64_t us = SteadyNowUs();
  return us / 1000 + (us % 1000 != 0 ? 1 : 0);
}

struct HttpReply {
  int status = 0;     // 0: transport failure (see `error`)
  std::string error;  // transport failure text
  bool sent = false;  // the request left this process (a failure may be an unknown result)
  std::string body;
};

class HttpTransport {
 public:
  HttpTransport(HttpEndpoint endpoint, std::chrono::milliseconds timeout);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Whether a request that the server closed the connection on, after it was sent and
  // before any byte of the answer, is sent again (once). kNever: for a change that must
  // not be applied twice; that case is then an unknown result (status 0, sent true).
  enum class Repeat { kIfClosedUnanswered, kNever };
  // `headers`: extra request headers (name, value); neither may contain CR or LF.
  HttpReply Request(std::string_view method, std::string_view target, std::string_view body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {},
                    Repeat repeat = Repeat::kIfClosedUnanswered);
  void Close();
  const HttpEndpoint& endpoint() const { return endpoint_; }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  bool Connect(SteadyTime deadline, std::string* error);
  // False on failure, or with *answered set when the server sent something before taking the
  // whole request (then read it with ReadResponse).
  bool SendAll(std::string_view data, SteadyTime deadline, std::string* error, bool* answered);
  bool Fill(SteadyTime deadline, std::string* error);
  bool ReadResponse(HttpReply* out, bool* got_bytes, bool* keep_alive, SteadyTime deadline);
  bool PeerClosedWhileIdle();

  HttpEndpoint endpoint_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  bool reused_ = false;
  std::string buf_;
  // How the last Fill found the connection ended (kNo: it did not, or not by the peer).
  enum class Closed { kNo, kOrderly, kReset };
  Closed closed_ = Closed::kNo;
};

}  // namespace rsc::client
