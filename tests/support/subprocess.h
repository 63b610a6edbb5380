#pragma once
// RunProcess: runs a program to completion with a deadline and captures its output, for tests
// that drive a command-line tool (ENGINEERING §5: bounded waits, clear failures).
//
// The child gets stdin from /dev/null, dies with the test process (PR_SET_PDEATHSIG), and
// runs in its own process group, so a program that starts helpers of its own (a browser)
// is ended as a whole: when the deadline passes, and again after it exits, every process
// left in that group gets SIGKILL. Output is read until every process holding the pipes
// closed them.
//
// Thread safety: none needed; each call is independent.

#include <chrono>
#include <string>
#include <vector>

namespace rsc::testing {

struct ProcessRun {
  int exit_code = -1;  // 128 + signal when killed; -1 when it could not be started
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string error;  // why it could not be run ("" otherwise)
  // "exit 0" plus both outputs (each cut to `limit` bytes), for failure messages.
  std::string Describe(size_t limit = 4000) const;
};

// `argv[0]` is a path or a name looked up in PATH. `env` replaces the environment when not
// empty.
ProcessRun RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds deadline,
                      const std::vector<std::string>& env = {});

// This process's environment ("NAME=value" each) without the variables whose names are in
// `names`, for RunProcess's `env`.
std::vector<std::string> EnvironmentWithout(const std::vector<std::string>& names);

// The first of `names` found as an executable in PATH, or "".
std::string FindInPath(const std::vector<std::string>& names);

}  // namespace rsc::testing
