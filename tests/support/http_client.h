#pragma once
// HttpClient: a small blocking HTTP/1.1 keep-alive client for the Level-2 integration
// tests (real coordinator processes). Plain sockets, so a test can also send raw bytes
// (malformed requests, oversized bodies) on the same connection it uses for normal calls.
//
// Every call has a deadline (the `timeout` given at construction, per read/write wait).
// A transport failure never throws: it comes back as HttpResult{status = 0, error = ...}.
//
// Keep-alive: the connection is reused until the server closes it (Connection: close,
// EOF) or a call fails. With `retry_stale` (default on), a request whose *reused*
// connection turns out to be closed before any byte of the response arrived is sent
// once more on a fresh connection (what every HTTP client does for idempotent calls);
// turn it off where a test must see exactly what happened to one request (SIGTERM).
//
// Thread safety: none; one HttpClient per thread.

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::testing {

struct HttpResult {
  int status = 0;                              // 0: transport failure (see `error`)
  std::string error;                           // transport failure text
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  boost::json::value json;  // parsed body, or null if it is not JSON

  bool transport_ok() const { return status != 0; }
  // Header value ("" when absent); `name` lower-case.
  std::string Header(const std::string& name) const;
  // The `error` field of an error body, or "".
  std::string ErrorCode() const;
  // "HTTP 503 {...body...}" or "transport error: ...", bounded, for failure messages.
  std::string Describe() const;
};

class HttpClient {
 public:
  explicit HttpClient(int port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  using Headers = std::vector<std::pair<std::string, std::string>>;

  HttpResult Get(const std::string& target, const Headers& headers = {});
  HttpResult Post(const std::string& target, std::string_view body, const Headers& headers = {});
  HttpResult Post(const std::string& target, const char* body, const Headers& headers = {}) {
    return Post(target, std::string_view(body), headers);
  }
  HttpResult Post(const std::string& target, const boost::json::value& body,
                  const Headers& headers = {});
  HttpResult Patch(const std::string& target, std::string_view body, const Headers& headers = {});
  HttpResult Patch(const std::string& target, const char* body, const Headers& headers = {}) {
    return Patch(target, std::string_view(body), headers);
  }
  HttpResult Patch(const std::string& target, const boost::json::value& body,
                   const Headers& headers = {});
  HttpResult Delete(const std::string& target, const Headers& headers = {});
  HttpResult Request(std::string_view method, const std::string& target, std::string_view body,
                     const Headers& headers = {});

  // Sends `bytes` verbatim on the current connection (connecting first if needed) and
  // reads one response. `retry_stale` does not apply.
  HttpResult SendRaw(std::string_view bytes);
  // Sends `bytes` without reading anything (e.g. half a request that then stalls).
  // False on a connect or send failure.
  bool SendBytes(std::string_view bytes);
  // True when the server closed the connection (EOF or reset) within `wait`.
  bool WaitServerClose(std::chrono::milliseconds wait);

  void Close();
  bool connected() const { return fd_ >= 0; }
  // Connections opened so far (to prove a keep-alive connection was reused).
  int connections_opened() const { return connections_opened_; }
  int port() const { return port_; }
  void set_retry_stale(bool on) { retry_stale_ = on; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  bool Connect(std::string* error);
  bool SendAll(std::string_view data, std::string* error);
  // Reads one complete response; `*got_bytes` tells whether anything arrived.
  bool ReadResponse(HttpResult* out, bool* got_bytes, bool head_request);
  bool Fill(std::string* error, std::chrono::steady_clock::time_point deadline);
  HttpResult Exchange(std::string_view request, bool allow_retry, bool head_request);

  int port_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  bool retry_stale_ = true;
  bool reused_ = false;  // the current connection has served a response already
  int connections_opened_ = 0;
  std::string buf_;
};

// Helpers for building request bodies and reading JSON replies in tests.
std::string JsonString(const boost::json::value& v);
// v.at(key) as int64 (also from a double holding an integer), or `fallback`.
int64_t JsonInt(const boost::json::value& v, std::string_view key, int64_t fallback = -1);
std::string JsonStr(const boost::json::value& v, std::string_view key);
// An array of integers at `key` as a sorted vector (empty when absent).
std::vector<int> JsonInts(const boost::json::value& v, std::string_view key);
// Percent-encodes a path segment or query value (unreserved characters kept).
std::string UrlEncode(std::string_view s);

// The stream keys of the ACTIVE generation of `stream`, by position (GET /v1/streams/{P}):
// on a cluster the coordinator chooses them (SPEC D2), so tests never compute them. Empty
// when the view cannot be read.
std::vector<std::string> ActiveShardKeys(HttpClient& http, const std::string& stream);

}  // namespace rsc::testing
