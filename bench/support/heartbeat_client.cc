#include "heartbeat_client.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>

#include "processes.h"

namespace rsc::bench {

MiniHttp::MiniHttp(int port) : fd_(ConnectLoopback(port)) {
  if (fd_ < 0) std::abort();
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

MiniHttp::~MiniHttp() { ::close(fd_); }

int MiniHttp::Post(const std::string& path, const std::string& json, std::string& body) {
  std::string req = fmt::format(
      "POST {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
      "{}\r\n\r\n{}",
      path, json.size(), json);
  if (::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    return -1;
  }
  return ReadResponse(body);
}

int MiniHttp::ReadResponse(std::string& body) {
  for (;;) {
    const size_t end = buf_.find("\r\n\r\n");
    if (end != std::string::npos) {
      const int status = std::atoi(buf_.c_str() + 9);
      size_t len = 0;
      const size_t cl = buf_.find("Content-Length: ");
      const size_t cl2 = buf_.find("content-length: ");
      const size_t at = cl != std::string::npos ? cl : cl2;
      if (at != std::string::npos && at < end)
        len = std::strtoul(buf_.c_str() + at + 16, nullptr, 10);
      while (buf_.size() < end + 4 + len) {
        if (!Fill()) return -1;
      }
      body = buf_.substr(end + 4, len);
      buf_.erase(0, end + 4 + len);
      return status;
    }
    if (!Fill()) return -1;
  }
}

bool MiniHttp::Fill() {
  char tmp[16384];
  const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

std::string RequestFor(const Member& m) {
  boost::json::object o{{"memberId", m.id},
                        {"memberEpoch", m.epoch},
                        {"metadataVersion", m.version},
                        {"lineage", m.lineage}};
  boost::json::array owned, rev;
  for (auto s : m.owned) owned.push_back(s);
  for (auto s : m.revoked) rev.push_back(boost::json::object{{"shard", s}, {"state", "REVOKED"}});
  o["ownedShards"] = std::move(owned);
  o["revokingShards"] = std::move(rev);
  return boost::json::serialize(o);
}

// Applies a heartbeat response like a well-behaved consumer that drains instantly.
void Apply(Member& m, const std::string& body) {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return;
  auto& o = v.as_object();
  if (!o.contains("status")) {
    m.epoch = 0;  // error: rejoin
    m.owned.clear();
    m.revoked.clear();
    return;
  }
  m.epoch = o["memberEpoch"].as_int64();
  const int64_t ver = o["metadataVersion"].as_int64();
  const std::string status(o["status"].as_string());
  if (ver > m.version || status == "SYNC_METADATA") {
    m.version = ver;
    m.lineage = std::string(o["lineage"].as_string());
  }
  std::vector<int64_t> assigned, revoke;
  for (auto& x : o["assignedShards"].as_array()) assigned.push_back(x.as_int64());
  for (auto& x : o["revokeShards"].as_array()) revoke.push_back(x.as_int64());
  m.revoked = revoke;  // report every listed revoke as released (drained instantly)
  std::vector<int64_t> keep;
  for (auto s : m.owned) {
    if (std::find(assigned.begin(), assigned.end(), s) != assigned.end()) keep.push_back(s);
  }
  if (status == "OK") keep = assigned;
  m.owned = keep;
}

}  // namespace rsc::bench
