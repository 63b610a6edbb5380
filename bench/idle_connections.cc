// idle_connections: one coordinator HTTP server holds N idle keep-alive connections with
// a bounded thread count, then serves a request on every one of them.
//
//   scripts/netns.sh ./build/bench/idle_connections [N] [io_threads] [worker_threads]
//
// Run it inside the private network namespace: the machine's default loopback is
// throttled (ENGINEERING.md §3). The server runs in this process behind a trivial
// CoordinatorApi (the HTTP layer is what is measured); the client is a forked child
// process with plain blocking sockets, so each process needs only N descriptors and the
// thread count measured is the server's own.
//
// Exit status 0 when every connection was accepted, stayed open while idle, and
// answered 200 on the same connection, and the thread count never exceeded
// io_threads + worker_threads + 1.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server/api.h"
#include "server/coordinator_api.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/shutdown_gate.h"

namespace rsc {
namespace {

using Clock = std::chrono::steady_clock;

// Answers every call at once; the service is not what this program measures.
class NullApi : public CoordinatorApi {
 public:
  Result<HeartbeatResponse> Heartbeat(const GroupKey&, const HeartbeatRequest& req) override {
    HeartbeatResponse r;
    r.member_id = req.member_id;
    r.member_epoch = 1;
    r.heartbeat_interval_ms = 1000;
    r.assignment_lease_ms = 8000;
    return r;
  }
  Result<RoutingResponse> Routing(const GroupKey&, int64_t, const std::string&) override {
    return RoutingResponse{};
  }
  Result<GroupView> CreateGroup(const CreateGroupRequest&, RevisionChange*) override {
    return GroupView{};
  }
  Result<std::vector<GroupKey>> ListGroups() override { return std::vector<GroupKey>{}; }
  Result<GroupView> DescribeGroup(const GroupKey&) override { return GroupView{}; }
  Result<GroupView> PatchGroup(const GroupKey&, const PatchGroupRequest&,
                               RevisionChange*) override {
    return GroupView{};
  }
  Status DeleteGroup(const GroupKey&, int64_t, RevisionChange*) override { return OkStatus(); }
  Result<GroupView> FenceMember(const GroupKey&, const MemberId&, RevisionChange*) override {
    return GroupView{};
  }
  Result<std::string> ExportGroup(const GroupKey&) override { return std::string("{}"); }
  Result<GroupView> RestoreGroup(std::string_view, RevisionChange*) override { return GroupView{}; }
  Status Ready() override { return OkStatus(); }
};

long ProcStatus(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      return std::strtol(line.c_str() + n + 1, nullptr, 10);
    }
  }
  return -1;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Raises the RLIMIT_NOFILE soft limit to the hard limit; returns the soft limit.
long RaiseNoFile() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  getrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<long>(lim.rlim_cur);
}

int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Reads one response; returns its status (0 on failure).
int ReadStatus(int fd) {
  std::string buf;
  char tmp[2048];
  while (true) {
    size_t end = buf.find("\r\n\r\n");
    if (end != std::string::npos) {
      size_t cl = buf.find("Content-Length: ");
      size_t len = cl == std::string::npos ? 0 : std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
      if (buf.size() >= end + 4 + len) return std::atoi(buf.c_str() + 9);
    }
    ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return 0;
    buf.append(tmp, static_cast<size_t>(n));
  }
}

// One line over a pipe, so parent and child run in lock step.
void SendLine(int fd, const std::string& line) {
  std::string l = line + "\n";
  if (::write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) std::_Exit(3);
}

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1) {
    if (c == '\n') return line;
    line.push_back(c);
  }
  return line;
}

// The client process: connects n times, reports, waits for "go", sends one request on
// every connection, reads every response, reports, waits for "exit".
[[noreturn]] void Client(int in, int out, int n) {
  uint16_t port = static_cast<uint16_t>(std::atoi(ReadLine(in).c_str()));
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    int fd = Connect(port);
    if (fd < 0) {
      std::fprintf(stderr, "client: connect %d failed: %s\n", i, std::strerror(errno));
      break;
    }
    fds.push_back(fd);
  }
  SendLine(out, std::to_string(fds.size()));
  ReadLine(in);  // "go"
  const std::string body = R"({"memberId":"bench","memberEpoch":0})";
  const std::string req =
      "POST /v1/groups/bench/g/heartbeat HTTP/1.1\r\nHost: b\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  auto t = Clock::now();
  size_t sent = 0;
  // All sent first, then all read: the server has up to n requests queued at once.
  for (int fd : fds) {
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      ++sent;
    }
  }
  size_t ok = 0;
  for (int fd : fds) {
    if (ReadStatus(fd) == 200) ++ok;
  }
  char line[128];
  std::snprintf(line, sizeof(line), "%zu %zu %.3f", sent, ok, Seconds(t));
  SendLine(out, line);
  ReadLine(in);  // "exit"
  for (int fd : fds) ::close(fd);
  std::_Exit(0);
}

int Run(int n, int io_threads, int worker_threads) {
  // The client runs in a child process forked before any server thread exists: the two
  // ends of n connections would not fit one process's descriptor limit, and the thread
  // count measured below is then the server's alone.
  int p2c[2], c2p[2];
  if (::pipe(p2c) != 0 || ::pipe(c2p) != 0) return 2;
  long nofile = RaiseNoFile();
  if (nofile < n + 64) {
    std::printf("note: RLIMIT_NOFILE is %ld; fewer than %d connections may fit\n", nofile, n);
  }
  pid_t child = ::fork();
  if (child < 0) return 2;
  if (child == 0) {
    ::close(p2c[1]);
    ::close(c2p[0]);
    Client(p2c[0], c2p[1], n);
  }
  ::close(p2c[0]);
  ::close(c2p[1]);
  const int to_child = p2c[1], from_child = c2p[0];

  NullApi api;
  ShutdownGate gate;
  Metrics metrics;
  Api handler(api, gate, metrics);
  HttpServerOptions opts;
  opts.io_threads = io_threads;
  opts.worker_threads = worker_threads;
  HttpServer server(opts, handler);
  if (Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "server start failed: %s\n", s.error().message.c_str());
    ::kill(child, SIGKILL);
    return 2;
  }
  const long thread_bound = io_threads + worker_threads + 1;
  long max_threads = ProcStatus("Threads");
  long rss_before_kb = ProcStatus("VmRSS");

  auto t0 = Clock::now();
  SendLine(to_child, std::to_string(server.port()));
  long opened = std::atol(ReadLine(from_child).c_str());
  // Accepting is asynchronous: wait (bounded) until the server holds them all.
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (server.open_connections() < opened && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double connect_s = Seconds(t0);
  int64_t accepted = server.open_connections();
  long threads_idle = ProcStatus("Threads");
  long rss_idle_kb = ProcStatus("VmRSS");
  max_threads = std::max(max_threads, threads_idle);

  std::this_thread::sleep_for(std::chrono::seconds(2));  // idle, then check none dropped
  int64_t still_open = server.open_connections();

  SendLine(to_child, "go");
  // Sample the thread count while the requests are being served.
  std::string result;
  while (true) {
    pollfd p{from_child, POLLIN, 0};
    max_threads = std::max(max_threads, ProcStatus("Threads"));
    if (::poll(&p, 1, 5) > 0) {
      result = ReadLine(from_child);
      break;
    }
  }
  size_t sent = 0, ok = 0;
  double serve_s = 0;
  std::sscanf(result.c_str(), "%zu %zu %lf", &sent, &ok, &serve_s);
  int64_t open_after = server.open_connections();
  long rss_after_kb = ProcStatus("VmRSS");
  max_threads = std::max(max_threads, ProcStatus("Threads"));
  SendLine(to_child, "exit");
  int status = 0;
  ::waitpid(child, &status, 0);
  server.Stop();

  std::printf("\n%-32s %12s\n", "metric (server process)", "value");
  std::printf("%-32s %12d\n", "connections wanted", n);
  std::printf("%-32s %12ld\n", "connections opened by client", opened);
  std::printf("%-32s %12lld\n", "accepted by server", static_cast<long long>(accepted));
  std::printf("%-32s %12lld\n", "still open after 2 s idle", static_cast<long long>(still_open));
  std::printf("%-32s %12.2f\n", "connect + accept all (s)", connect_s);
  std::printf("%-32s %12ld\n", "threads while idle", threads_idle);
  std::printf("%-32s %12ld\n", "max threads (sampled)", max_threads);
  std::printf("%-32s %12ld\n", "thread bound (io+workers+1)", thread_bound);
  std::printf("%-32s %12.1f\n", "RSS before (MiB)", rss_before_kb / 1024.0);
  std::printf("%-32s %12.1f\n", "RSS with idle conns (MiB)", rss_idle_kb / 1024.0);
  std::printf("%-32s %12.2f\n", "RSS KiB per idle connection",
              opened > 0 ? static_cast<double>(rss_idle_kb - rss_before_kb) / opened : 0.0);
  std::printf("%-32s %12.1f\n", "RSS after requests (MiB)", rss_after_kb / 1024.0);
  std::printf("%-32s %12zu\n", "requests sent", sent);
  std::printf("%-32s %12zu\n", "responses 200 (same conn)", ok);
  std::printf("%-32s %12lld\n", "open after requests", static_cast<long long>(open_after));
  std::printf("%-32s %12.2f\n", "serve one request on each (s)", serve_s);
  std::printf("%-32s %12.0f\n", "requests/s", serve_s > 0 ? ok / serve_s : 0.0);

  bool pass = opened == n && accepted == n && still_open == n && ok == static_cast<size_t>(n) &&
              open_after == n && max_threads <= thread_bound && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
  std::printf("\n%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace rsc

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  int io = argc > 2 ? std::atoi(argv[2]) : 2;
  int workers = argc > 3 ? std::atoi(argv[3]) : 8;
  if (n <= 0 || io <= 0 || workers <= 0) {
    std::fprintf(stderr, "usage: %s [connections=10000] [io_threads=2] [worker_threads=8]\n",
                 argv[0]);
    return 2;
  }
  return rsc::Run(n, io, workers);
}
