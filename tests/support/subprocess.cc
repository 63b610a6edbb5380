#include "support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string_view>
#include <thread>

extern char** environ;

namespace rsc::testing {

std::string ProcessRun::Describe(size_t limit) const {
  std::ostringstream o;
  if (!error.empty()) o << "could not run: " << error << "\n";
  o << "exit " << exit_code << (timed_out ? " (killed at the deadline)" : "") << "\n--- stdout:\n"
    << out.substr(0, limit) << (out.size() > limit ? "\n[...]" : "") << "\n--- stderr:\n"
    << err.substr(0, limit) << (err.size() > limit ? "\n[...]" : "");
  return o.str();
}

std::vector<std::string> EnvironmentWithout(const std::vector<std::string>& names) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const std::string& n : names) drop = drop || name == n;
    if (!drop) env.emplace_back(kv);
  }
  return env;
}

std::string FindInPath(const std::vector<std::string>& names) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::vector<std::string> list;
  for (std::string d; std::getline(dirs, d, ':');) list.push_back(d.empty() ? "." : d);
  for (const std::string& name : names) {
    for (const std::string& d : list) {
      const std::string candidate = d + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

ProcessRun RunProcess(const std::vector<std::string>& args, std::chrono::milliseconds deadline,
                      const std::vector<std::string>& env) {
  ProcessRun run;
  if (args.empty()) {
    run.error = "no program";
    return run;
  }
  const std::string program =
      args[0].find('/') != std::string::npos ? args[0] : FindInPath({args[0]});
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    run.error = args[0] + " is not an executable (nor in PATH)";
    return run;
  }
  std::vector<std::string> argv_s = args;
  std::vector<char*> argv, envp;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = env;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    run.error = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    run.error = std::string("pipe: ") + std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return run;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    run.error = std::string("fork: ") + std::strerror(errno);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return run;
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (env.empty()) {
      ::execv(program.c_str(), argv.data());
    } else {
      ::execve(program.c_str(), argv.data(), envp.data());
    }
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from here, so the group exists before any kill below
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_fds = 2;
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[16384];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  // Output closed: wait (bounded) for the exit itself, without reaping yet (WNOWAIT).
  while (!run.timed_out) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      break;
    }
    if (std::chrono::steady_clock::now() >= end) {
      run.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The child is not reaped yet, so its process group id cannot have been reused: this ends
  // whatever it left behind (all of it at the deadline).
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace rsc::testing
