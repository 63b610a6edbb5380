#include "support/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "support/wait.h"

#ifndef RSC_BINARY_DIR
#error "RSC_BINARY_DIR must be defined (tests/CMakeLists.txt)"
#endif

extern char** environ;

namespace rsc::testing {
namespace {

using std::chrono::milliseconds;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

CoordinatorProcess::CoordinatorProcess(CoordinatorOptions options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/rsc-coord-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  dir_ = dir != nullptr ? dir : "";
  log_path_ = dir_ + "/coordinator.log";
}

CoordinatorProcess::~CoordinatorProcess() {
  Kill();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string CoordinatorProcess::BinaryPath() const {
  return std::string(RSC_BINARY_DIR) + "/src/server/rsc-coordinator";
}

std::vector<std::string> CoordinatorProcess::Args() const {
  std::vector<std::string> a = {BinaryPath(),
                                "--redis",
                                options_.redis_url,
                                "--listen",
                                "127.0.0.1:" + std::to_string(options_.port),
                                "--tick-interval-ms",
                                std::to_string(options_.tick_interval_ms),
                                "--shutdown-grace-ms",
                                std::to_string(options_.shutdown_grace_ms),
                                "--log-level",
                                options_.log_level,
                                "--state-dir",
                                dir_ + "/state"};
  if (!options_.admin_token.empty()) a.insert(a.end(), {"--admin-token", options_.admin_token});
  a.insert(a.end(), options_.extra_args.begin(), options_.extra_args.end());
  return a;
}

::testing::AssertionResult CoordinatorProcess::Spawn() {
  if (dir_.empty()) return ::testing::AssertionFailure() << "mkdtemp failed";
  if (running()) return ::testing::AssertionFailure() << "coordinator already running";
  if (::access(BinaryPath().c_str(), X_OK) != 0) {
    return ::testing::AssertionFailure()
           << "coordinator binary " << BinaryPath()
           << " is missing: build it (cmake --build build --target rsc-coordinator)";
  }
  exit_code_.reset();
  port_ = 0;
  // A restart appends to the same log: only lines written by this incarnation count, or
  // Start() would parse the previous incarnation's listening port.
  log_offset_ = Log().size();
  const std::vector<std::string> args = Args();
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("RSC_")) env_s.emplace_back(*e);
  }
  env_s.insert(env_s.end(), options_.env.begin(), options_.env.end());
  std::vector<char*> envp;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string log = log_path_;
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    // A signal mask inherited from a test thread must not leak into the coordinator.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  pid_ = pid;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult CoordinatorProcess::Start() {
  if (auto s = Spawn(); !s) return s;
  constexpr std::string_view kNeedle = "event=listening address=127.0.0.1:";
  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  for (;;) {
    const std::string log = Log();
    if (size_t p = log.find(kNeedle, log_offset_); p != std::string::npos) {
      port_ = std::atoi(log.c_str() + p + kNeedle.size());
      if (port_ > 0) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure()
             << "cannot parse the port from the listening line; log:" << LogTail();
    }
    if (auto code = WaitExit(milliseconds(0))) {
      return ::testing::AssertionFailure()
             << "rsc-coordinator exited with code " << *code << " before listening (redis "
             << options_.redis_url << "); log:" << LogTail();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      Kill();
      return ::testing::AssertionFailure()
             << "rsc-coordinator did not log 'event=listening' within "
             << options_.start_timeout.count() << " ms; killed. log:" << LogTail();
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
}

std::optional<int> CoordinatorProcess::WaitExit(milliseconds wait) {
  if (pid_ <= 0) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_code_ = DecodeStatus(status);
      return exit_code_;
    }
    if (r < 0 && errno == ECHILD) {
      pid_ = -1;
      exit_code_ = -1;
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

void CoordinatorProcess::SendTerm() {
  if (pid_ > 0) ::kill(pid_, SIGTERM);
}

std::optional<int> CoordinatorProcess::Terminate(milliseconds wait) {
  if (pid_ <= 0) return exit_code_;
  SendTerm();
  return WaitExit(wait);
}

void CoordinatorProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  WaitExit(milliseconds(30000));
}

std::string CoordinatorProcess::Log() const { return ReadFile(log_path_); }

std::string CoordinatorProcess::LogTail(size_t lines) const {
  std::istringstream in(Log());
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "\n  | " + l;
  return out.empty() ? " (empty)" : out;
}

bool CoordinatorProcess::LogContains(std::string_view needle) const {
  return Log().find(needle) != std::string::npos;
}

::testing::AssertionResult CoordinatorProcess::WaitForLog(std::string_view needle,
                                                          milliseconds wait) {
  auto r = WaitFor([&] { return LogContains(needle); }, wait,
                   "coordinator log line containing '" + std::string(needle) + "'");
  if (!r) r << "; log:" << LogTail();
  return r;
}

}  // namespace rsc::testing
