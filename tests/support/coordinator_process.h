#pragma once
// CoordinatorProcess: a real `rsc-coordinator` process for the Level-2 integration tests
// (ENGINEERING §5). It listens on 127.0.0.1:<port> (0 = free); Start() waits (bounded) for the log
// line `event=listening address=127.0.0.1:PORT` and parses the port from it. stdout and stderr go
// to a log file in the process's own temp directory; Log()/LogTail() return it for failure
// messages. The destructor kills the process by PID (SIGKILL) and removes the directory; the child
// also dies with the test process (PR_SET_PDEATHSIG).
//
// Run tests that use it inside scripts/netns.sh: the host loopback is throttled.
//
// Thread safety: none; drive one CoordinatorProcess from one thread (Port() and Pid() may
// be read from other threads once Start() returned).

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rsc::testing {

struct CoordinatorOptions {
  std::string redis_url;    // --redis (required: the tests never use the embedded mode)
  std::string admin_token;  // --admin-token ("" = admin open)
  // --listen 127.0.0.1:<port>; 0 = a free port. A fixed port lets a new process take the
  // place of a killed one at the address the clients were configured with.
  int port = 0;
  int64_t tick_interval_ms = 200;
  int64_t shutdown_grace_ms = 5000;
  std::string log_level = "info";
  std::vector<std::string> extra_args;  // anything else, e.g. {"--max-body-bytes", "4096"}
  // Added to (or replacing in) the test's environment, "NAME=value" each; RSC_* variables of
  // the test's own environment are never passed on.
  std::vector<std::string> env;
  std::chrono::milliseconds start_timeout{15000};
};

class CoordinatorProcess {
 public:
  explicit CoordinatorProcess(CoordinatorOptions options);
  ~CoordinatorProcess();
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // Spawns the process and waits until it logs that it listens. Fails (with the log) if
  // it exits first or does not listen within `start_timeout`.
  ::testing::AssertionResult Start();
  // Spawns the process without waiting (for start-up failure tests; see WaitExit).
  ::testing::AssertionResult Spawn();
  // Waits up to `wait` for the process to exit. Returns its exit code, 128 + signal if a
  // signal killed it, or nullopt if it still runs.
  std::optional<int> WaitExit(std::chrono::milliseconds wait);
  // SIGTERM (without waiting).
  void SendTerm();
  // SIGTERM, then waits up to `wait` for the exit; returns as WaitExit (nullopt: still
  // running, and then it is left running for the caller to inspect or Kill()).
  std::optional<int> Terminate(std::chrono::milliseconds wait = std::chrono::seconds(10));
  // SIGKILL and reap.
  void Kill();

  bool running() const { return pid_ > 0; }
  pid_t Pid() const { return pid_; }
  int Port() const { return port_; }
  const std::string& Dir() const { return dir_; }
  const CoordinatorOptions& options() const { return options_; }
  std::string BinaryPath() const;
  // Whole log, and its last lines formatted for failure messages.
  std::string Log() const;
  std::string LogTail(size_t lines = 30) const;
  // True once the log contains `needle`; WaitForLog polls with a deadline.
  bool LogContains(std::string_view needle) const;
  ::testing::AssertionResult WaitForLog(std::string_view needle, std::chrono::milliseconds wait);

 private:
  std::vector<std::string> Args() const;

  CoordinatorOptions options_;
  std::string dir_;
  std::string log_path_;
  size_t log_offset_ = 0;  // log size when the current incarnation was spawned
  pid_t pid_ = -1;
  int port_ = 0;
  std::optional<int> exit_code_;
};

}  // namespace rsc::testing
