// Level 2 smoke test of `rsc demo` (src/cli/demo_command.cc, the demo scripts/run.sh shows):
// run as a process for a few seconds against a real rsc-coordinator and redis-server, with
// membership changes every 3 s (join, clean stop, crash, restart). It must exit 0 and its
// summary must report consumed messages and no per-key order violation.
//
// Needs the built `rsc` (integration_tests depends on it, see tests/CMakeLists.txt).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

struct DemoRun {
  int exit_code = -1;  // 128 + signal when killed; -1 when it could not be run
  std::string out;     // stdout and stderr, interleaved
};

// Runs `rsc args...` (stdin /dev/null), killing it after `deadline`.
DemoRun RunDemo(const std::vector<std::string>& args, std::chrono::milliseconds deadline) {
  DemoRun run;
  const std::string rsc = std::string(RSC_BINARY_DIR) + "/src/cli/rsc";
  if (::access(rsc.c_str(), X_OK) != 0) {
    ADD_FAILURE() << rsc << " is missing: cmake --build build --target rsc";
    return run;
  }
  std::vector<std::string> argv_s = {rsc};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return run;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(out_pipe[1], 2);
    ::unsetenv("RSC_COORDINATOR");
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  const auto end = std::chrono::steady_clock::now() + deadline;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{out_pipe[0], POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    if (fd.revents == 0) continue;
    char buf[8192];
    const ssize_t n = ::read(out_pipe[0], buf, sizeof(buf));
    if (n > 0) {
      run.out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out_pipe[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (timed_out) ADD_FAILURE() << "rsc demo did not finish within " << deadline.count() << " ms";
  return run;
}

int64_t SummaryNumber(const std::string& out, const std::string& name) {
  std::smatch m;
  const std::regex re("summary:.*" + name + " (\\d+)");
  if (!std::regex_search(out, m, re)) return -1;
  return std::stoll(m[1].str());
}

TEST(DemoTest, RunsTheScenarioAndKeepsPerKeyOrder) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start());
  CoordinatorProcess coord(CoordOpts(redis));
  ASSERT_TRUE(coord.Start());

  const DemoRun r =
      RunDemo({"--coordinator", "http://127.0.0.1:" + std::to_string(coord.Port()), "demo",
               "--redis", redis.Url(), "--seconds", "12", "--event-seconds", "3", "--rate", "100"},
              std::chrono::seconds(60));
  const std::string described = "exit " + std::to_string(r.exit_code) + "\n" + r.out;
  ASSERT_EQ(r.exit_code, 0) << described << "\ncoordinator log:" << coord.LogTail(40);
  EXPECT_NE(r.out.find("created group demo/demo-group with 8 shards"), std::string::npos)
      << described;
  // The scripted events of the first 12 s: a join at 3 s, a clean stop at 6 s, a crash at 9 s.
  EXPECT_NE(r.out.find("c4 joined"), std::string::npos) << described;
  EXPECT_NE(r.out.find("stopped cleanly"), std::string::npos) << described;
  EXPECT_NE(r.out.find("c4 killed"), std::string::npos) << described;
  const int64_t produced = SummaryNumber(r.out, "produced");
  const int64_t consumed = SummaryNumber(r.out, "consumed");
  EXPECT_GT(produced, 0) << described;
  EXPECT_GT(consumed, 0) << described;
  EXPECT_EQ(SummaryNumber(r.out, "order violations"), 0) << described;
}

}  // namespace
}  // namespace rsc::integration
