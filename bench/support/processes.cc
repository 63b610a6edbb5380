#include "processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "server/embedded_redis.h"  // PickFreePort

namespace rsc::bench {

namespace {
std::string& ProgramName() {
  static std::string name = "bench";
  return name;
}
}  // namespace

void Die(const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", ProgramName().c_str(), why.c_str());
  std::exit(1);
}

void SetProgramName(std::string name) { ProgramName() = std::move(name); }

void SleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

void Child::Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) Die("fork failed");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
}

bool Child::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

void Child::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (WaitUntil([&] { return Exited(); }, std::chrono::seconds(5))) return;
  Kill();
}

void Child::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int StartRedis(Child& child, const std::string& dir) {
  auto port = PickFreePort();
  if (!port.ok()) Die(port.error().message);
  const std::string log = dir + "/redis.log";
  child.Spawn({"redis-server", "--port", std::to_string(*port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--maxclients", "20000"},
              log);
  const bool up = WaitUntil(
      [&] {
        if (child.Exited()) Die("redis-server exited; log: " + ReadFile(log));
        redisContext* c = redisConnect("127.0.0.1", *port);
        const bool ok = c != nullptr && c->err == 0;
        if (c != nullptr) redisFree(c);
        return ok;
      },
      std::chrono::seconds(10));
  if (!up) Die("redis-server did not answer; log: " + ReadFile(log));
  return *port;
}

int StartCoordinator(Child& child, const std::string& binary, const std::string& redis_url,
                     const std::string& dir, const std::string& name,
                     const std::vector<std::string>& extra_args) {
  const std::string log = dir + "/" + name + ".log";
  std::vector<std::string> args = {binary,        "--redis",     redis_url,
                                   "--listen",    "127.0.0.1:0", "--tick-interval-ms",
                                   "200",         "--state-dir", dir + "/" + name + "-state",
                                   "--log-level", "info"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  child.Spawn(args, log);
  int listening = 0;
  const bool up = WaitUntil(
      [&] {
        if (child.Exited()) Die("rsc-coordinator (" + binary + ") exited; log: " + ReadFile(log));
        constexpr std::string_view kNeedle = "event=listening address=127.0.0.1:";
        const std::string text = ReadFile(log);
        const size_t at = text.find(kNeedle);
        if (at == std::string::npos) return false;
        listening = std::atoi(text.c_str() + at + kNeedle.size());
        return listening > 0;
      },
      std::chrono::seconds(15));
  if (!up) Die("rsc-coordinator did not listen; log: " + ReadFile(log));
  return listening;
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int HttpCall(int port, const std::string& method, const std::string& path, const std::string& json,
             std::string* body) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return -1;
  const std::string req = fmt::format(
      "{} {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\n\r\n{}",
      method, path, json.size(), json);
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return -1;
  }
  std::string resp;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) {
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (body != nullptr) {
    const size_t at = resp.find("\r\n\r\n");
    *body = at == std::string::npos ? "" : resp.substr(at + 4);
  }
  return resp.size() > 12 ? std::atoi(resp.c_str() + 9) : -1;
}

int64_t ProcStatus(pid_t pid, std::string_view key) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ':') {
      return std::atoll(line.c_str() + key.size() + 1);
    }
  }
  return -1;
}

int64_t RaiseNoFile() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  ::getrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<int64_t>(lim.rlim_cur);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::atoi(part.c_str()));
  return out;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  return v[static_cast<size_t>(rank + 0.5)];
}

void WriteJson(const std::string& path, const boost::json::value& value) {
  std::ofstream out(path, std::ios::trunc);
  out << boost::json::serialize(value) << "\n";
  if (!out) Die("cannot write " + path);
}

}  // namespace rsc::bench
