#include "server/embedded_redis.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

namespace rsc {

Result<int> PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return MakeError(ErrorCode::kInternal, std::string("socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return MakeError(ErrorCode::kInternal, std::string("bind: ") + strerror(errno));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

namespace {

enum class Ping { kPong, kLoading, kNone };

// PONG; or -LOADING (alive, still reading its append-only file); or nothing yet.
Ping PingOf(int port) {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c) return Ping::kNone;
  Ping out = Ping::kNone;
  if (!c->err) {
    redisSetTimeout(c, tv);
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    if (r && r->type == REDIS_REPLY_STATUS && std::string(r->str) == "PONG") out = Ping::kPong;
    if (r && r->type == REDIS_REPLY_ERROR && std::string_view(r->str).starts_with("LOADING")) {
      out = Ping::kLoading;
    }
    if (r) freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

}  // namespace

EmbeddedRedis::~EmbeddedRedis() { Stop(); }

Status EmbeddedRedis::Start() {
  namespace fs = std::filesystem;
  std::error_code ec;
  data_dir_ = (fs::absolute(options_.state_dir) / "redis").string();
  fs::create_directories(data_dir_, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     fmt::format("cannot create state directory {}: {}", data_dir_, ec.message()));
  }
  if (options_.port != 0) {
    port_ = options_.port;
  } else {
    RSC_ASSIGN_OR_RETURN(port_, PickFreePort());
  }
  const std::string log = data_dir_ + "/redis.log";
  std::vector<std::string> args = {options_.binary,
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   data_dir_,
                                   "--appendonly",
                                   "yes",
                                   "--appendfsync",
                                   "everysec",
                                   "--save",
                                   "",
                                   "--maxmemory-policy",
                                   "noeviction",
                                   "--daemonize",
                                   "no",
                                   "--logfile",
                                   log};
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) return MakeError(ErrorCode::kInternal, std::string("fork: ") + strerror(errno));
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(1);
    ::setpgid(0, 0);  // Ctrl-C reaches the coordinator, which shuts this down in order
    sigset_t none;    // the parent blocks SIGTERM for sigwait; redis-server must not inherit it
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  // start_timeout bounds the time to a first answer. A server that answers LOADING is
  // reading its data (the groups and the producers' streams, which may be large): it gets
  // start_timeout again after every such answer, for as long as it is alive.
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const Ping ping = PingOf(port_);
    if (ping == Ping::kPong) return OkStatus();
    if (ping == Ping::kLoading)
      deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return MakeError(ErrorCode::kInternal,
                       fmt::format("{} exited at start (status {}); see {} — is redis-server "
                                   "installed (scripts/bootstrap.sh)?",
                                   options_.binary, status, log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a child process
  }
  Stop();
  return MakeError(ErrorCode::kInternal,
                   fmt::format("embedded redis-server did not answer PING on port {} within {} "
                               "ms; see {}",
                               port_, options_.start_timeout.count(), log));
}

void EmbeddedRedis::Stop(std::chrono::milliseconds wait) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace rsc
