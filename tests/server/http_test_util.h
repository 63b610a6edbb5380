#pragma once
// Test helpers for the HTTP layer: a blocking raw-socket HTTP/1.1 client (so tests can
// send malformed or oversized requests byte by byte) and a scriptable fake
// CoordinatorApi. The fake is acceptable here because these tests cover the HTTP layer
// alone; the real GroupService is tested against Redis elsewhere.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/coordinator_api.h"

namespace rsc::testing_http {

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

inline std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A blocking client connection with a receive deadline per read.
class RawConn {
 public:
  explicit RawConn(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : timeout_(timeout) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    int one = 1;
    if (connected_) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return connected_; }

  // Sends everything; false if the peer closed or reset.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads one response (a 1xx interim response counts as one). nullopt on EOF, error or
  // deadline.
  std::optional<RawResponse> Read() {
    size_t header_end;
    while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    RawResponse r;
    std::string head = buf_.substr(0, header_end);
    buf_.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        r.headers[Lower(line.substr(0, colon))] = v;
      }
      pos = e + 2;
    }
    if (r.status >= 100 && r.status < 200) return r;
    size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (buf_.size() < length) {
      if (!Fill()) return std::nullopt;
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  // True when the server closes the connection (EOF or reset) before the deadline.
  bool WaitClosed() {
    while (true) {
      if (!buf_.empty()) buf_.clear();
      int rc = WaitReadable();
      if (rc <= 0) return false;  // deadline: still open
      char tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) return true;
    }
  }

 private:
  int WaitReadable() {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout_.count()));
  }
  bool Fill() {
    if (WaitReadable() <= 0) return false;
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::chrono::milliseconds timeout_;
  std::string buf_;
};

inline std::string MakeRequest(std::string_view method, std::string_view target,
                               std::string_view body = {},
                               std::vector<std::string> extra_headers = {}) {
  std::string r = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n";
  for (const auto& h : extra_headers) r += h + "\r\n";
  if (!body.empty() || method == "POST" || method == "PATCH") {
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n";
  r += body;
  return r;
}

// A CoordinatorApi whose answers tests script. Thread-safe.
class FakeApi : public CoordinatorApi {
 public:
  Result<HeartbeatResponse> Heartbeat(const GroupKey& key, const HeartbeatRequest& req) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      heartbeats.push_back({key, req});
      ++heartbeats_entered_;
      cv_.notify_all();
      if (block_heartbeats_) cv_.wait(lock, [this] { return !block_heartbeats_; });
      if (heartbeat_error) return *heartbeat_error;
    }
    HeartbeatResponse r;
    r.status = HeartbeatStatus::kOk;
    r.member_id = req.member_id;
    r.member_epoch = req.member_epoch <= 0 ? 1 : req.member_epoch;
    r.assignment_epoch = 2;
    r.metadata_version = 3;
    r.lineage = "lin";
    r.assigned_shards = {0, 1};
    r.heartbeat_interval_ms = 1000;
    r.assignment_lease_ms = 8000;
    return r;
  }
  // With DeferHeartbeats(): records the call and returns without answering, as a
  // GroupService does for a heartbeat queued behind its group's batch; AnswerDeferred()
  // answers them later, from the calling thread. Otherwise: Heartbeat() through `spawn`.
  void HeartbeatAsync(const GroupKey& key, HeartbeatRequest req, HeartbeatDone done,
                      const Spawn& spawn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (defer_heartbeats_) {
        deferred_.push_back({key, std::move(req), std::move(done)});
        cv_.notify_all();
        return;
      }
    }
    CoordinatorApi::HeartbeatAsync(key, std::move(req), std::move(done), spawn);
  }
  void DeferHeartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    defer_heartbeats_ = true;
  }
  bool WaitDeferred(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return deferred_.size() >= n; });
  }
  // Answers every deferred heartbeat (as Heartbeat() would) on this thread; their count.
  size_t AnswerDeferred() {
    std::vector<Deferred> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      defer_heartbeats_ = false;
      due.swap(deferred_);
    }
    for (Deferred& d : due) d.done(Heartbeat(d.key, d.req));
    return due.size();
  }

  Result<RoutingResponse> Routing(const GroupKey& key, int64_t observed_version,
                                  const std::string& lineage) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_routing = {key, observed_version, lineage};
    RoutingResponse r;
    r.metadata_version = 3;
    r.lineage = "lin";
    r.shard_count = 1;
    r.shards = {{0, "{" + key.stream + ":0}"}};
    r.routing_lease_ms = 30000;
    r.refresh_interval_ms = 5000;
    return r;
  }
  Result<GroupView> CreateGroup(const CreateGroupRequest& req, RevisionChange* change) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (change) *change = next_change;
    if (mutation_error) return *mutation_error;
    GroupView v = view;
    v.stream = req.stream;
    v.group = req.group;
    v.shard_count = req.shard_count;
    v.config = req.config;
    return v;
  }
  Result<std::vector<GroupKey>> ListGroups() override {
    return std::vector<GroupKey>{{"orders", "billing"}};
  }
  Result<GroupView> DescribeGroup(const GroupKey& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (describe_error) return *describe_error;
    GroupView v = view;
    v.stream = key.stream;
    v.group = key.group;
    return v;
  }
  Result<GroupView> PatchGroup(const GroupKey& key, const PatchGroupRequest& req,
                               RevisionChange* change) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_patch = req;
    if (change) *change = next_change;
    if (mutation_error) return *mutation_error;
    GroupView v = view;
    v.stream = key.stream;
    v.group = key.group;
    if (req.config) v.config = *req.config;
    if (req.shard_count) v.shard_count = *req.shard_count;
    return v;
  }
  Status DeleteGroup(const GroupKey&, int64_t expected_revision, RevisionChange* change) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_delete_revision = expected_revision;
    if (change) *change = next_change;
    if (mutation_error) return *mutation_error;
    return OkStatus();
  }
  Result<GroupView> FenceMember(const GroupKey&, const MemberId& member,
                                RevisionChange* change) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_fenced = member.str();
    if (change) *change = next_change;
    if (mutation_error) return *mutation_error;
    return view;
  }
  Result<std::string> ExportGroup(const GroupKey&) override {
    return std::string(R"({"schemaVersion":1,"layoutVersion":1,"revision":5,"aggregate":{}})");
  }
  Result<GroupView> RestoreGroup(std::string_view export_json, RevisionChange* change) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_restore = std::string(export_json);
    if (change) *change = next_change;
    if (mutation_error) return *mutation_error;
    return view;
  }
  Result<StreamView> Reshard(const std::string& stream, int64_t expected_revision, int32_t,
                             RevisionChange* change) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (change) *change = next_change;
    if (mutation_error) return *mutation_error;
    StreamView v;
    v.revision = expected_revision + 1;
    v.layout.stream = stream;
    return v;
  }
  Status Ready() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_error) return *ready_error;
    return OkStatus();
  }

  // Scripted state and recorded calls below are guarded by the fake's mutex: read and
  // write them through Locked() (sockets give no happens-before edge TSan can see).
  template <class F>
  auto Locked(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    return f();
  }

  // Makes Heartbeat() block until Unblock(); WaitEntered(n) waits until n calls arrived.
  void BlockHeartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    block_heartbeats_ = true;
  }
  void Unblock() {
    std::lock_guard<std::mutex> lock(mu_);
    block_heartbeats_ = false;
    cv_.notify_all();
  }
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return heartbeats_entered_ >= n; });
  }

  struct HeartbeatCall {
    GroupKey key;
    HeartbeatRequest req;
  };
  struct RoutingCall {
    GroupKey key;
    int64_t observed_version = 0;
    std::string lineage;
  };
  // Guarded by mu_ (see Locked()).
  std::vector<HeartbeatCall> heartbeats;
  std::optional<RoutingCall> last_routing;
  std::optional<PatchGroupRequest> last_patch;
  std::optional<int64_t> last_delete_revision;
  std::string last_fenced;
  std::string last_restore;
  std::optional<Error> heartbeat_error;
  std::optional<Error> describe_error;
  std::optional<Error> ready_error;
  // Every mutation reports `next_change` (as committed or not as it says), then fails with
  // `mutation_error` when that is set (a change committed by a request that then failed).
  std::optional<Error> mutation_error;
  RevisionChange next_change;
  GroupView view;

 private:
  struct Deferred {
    GroupKey key;
    HeartbeatRequest req;
    HeartbeatDone done;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  bool defer_heartbeats_ = false;
  std::vector<Deferred> deferred_;
  bool block_heartbeats_ = false;
  int heartbeats_entered_ = 0;
};

}  // namespace rsc::testing_http
