#pragma once
// A bare heartbeat client for the benchmarks that load the coordinator with many members
// (heartbeat_bench, coordinator_rss): a blocking keep-alive HTTP/1.1 connection and a
// member that behaves like a well-behaved consumer draining instantly. Free of the client
// library's own overhead, so what is measured is the coordinator.
//
// Thread safety: none; one MiniHttp per thread, and a Member used by one thread at a time.

#include <cstdint>
#include <string>
#include <vector>

namespace rsc::bench {

// Keep-alive HTTP/1.1 client over a blocking socket (Content-Length bodies only). Aborts
// if it cannot connect: a benchmark without its server has nothing to measure.
class MiniHttp {
 public:
  explicit MiniHttp(int port);
  ~MiniHttp();
  MiniHttp(const MiniHttp&) = delete;
  MiniHttp& operator=(const MiniHttp&) = delete;

  // Returns the status code (-1 on a transport failure); the body in `body`.
  int Post(const std::string& path, const std::string& json, std::string& body);

 private:
  int ReadResponse(std::string& body);
  bool Fill();
  int fd_;
  std::string buf_;
};

// One member's view of the group, as its heartbeats report it.
struct Member {
  std::string id;
  int64_t epoch = 0;
  int64_t version = 0;
  std::string lineage;
  std::vector<int64_t> owned;
  std::vector<int64_t> revoked;
};

// The member's next heartbeat request body.
std::string RequestFor(const Member& m);

// Applies a heartbeat response like a well-behaved consumer that drains instantly (an error
// answer makes it rejoin).
void Apply(Member& m, const std::string& body);

}  // namespace rsc::bench
