#pragma once
// Process and wire helpers shared by the benchmarks that run real processes (a
// redis-server, an rsc-coordinator, client processes): spawning and stopping children,
// waiting with a deadline, one-shot HTTP calls, /proc figures and the JSON rows that
// bench/run.sh collects. Not a library for the product: benchmarks only.
//
// Every helper that cannot go on (a child that does not start, a failed fork) prints why and
// exits the benchmark with status 1: a benchmark that lost its setting has nothing to report.
//
// Thread safety: none, unless stated; drive the children from one thread.

#include <sys/types.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::bench {

using BenchClock = std::chrono::steady_clock;

// Prints "<program>: why" on stderr and exits 1.
[[noreturn]] void Die(const std::string& why);
// The name Die() prints (set once at start-up).
void SetProgramName(std::string name);

// A child process with stdout/stderr in `log`, killed with the benchmark (PR_SET_PDEATHSIG)
// and by the destructor.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(); }

  void Spawn(const std::vector<std::string>& args, const std::string& log);
  // True once the child has exited (reaped here).
  bool Exited();
  // SIGTERM, then SIGKILL after 5 s.
  void Stop();
  // SIGKILL and reap.
  void Kill();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

void SleepMs(int64_t ms);

// Polls `pred` every 10 ms until it holds (true) or `timeout` passes (false).
template <class Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds timeout) {
  const auto end = BenchClock::now() + timeout;
  while (!pred()) {
    if (BenchClock::now() >= end) return false;
    SleepMs(10);
  }
  return true;
}

std::string ReadFile(const std::string& path);

// A redis-server without persistence on a free port of 127.0.0.1, its files in `dir`;
// returns the port once it answers.
int StartRedis(Child& child, const std::string& dir);
// An rsc-coordinator (`binary`) on `redis_url`, listening on a free port of 127.0.0.1, its
// log in dir/<name>.log; returns the port once it logs that it listens.
int StartCoordinator(Child& child, const std::string& binary, const std::string& redis_url,
                     const std::string& dir, const std::string& name,
                     const std::vector<std::string>& extra_args = {});

// A blocking TCP connection to 127.0.0.1:port; -1 if refused.
int ConnectLoopback(int port);

// One HTTP/1.1 request on a new connection; returns the status (-1 on a transport failure)
// and fills `body` if given.
int HttpCall(int port, const std::string& method, const std::string& path, const std::string& json,
             std::string* body = nullptr);

// A field of /proc/<pid>/status in kB ("VmRSS", "VmHWM", "Threads"); -1 if absent. pid 0:
// this process.
int64_t ProcStatus(pid_t pid, std::string_view key);

// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the soft limit.
int64_t RaiseNoFile();

// The 1-minute load average, from /proc/loadavg.
std::string LoadAverage();

// Comma-separated integers ("1,4,16").
std::vector<int> ParseList(const std::string& s);

// p in [0, 1] of `v` (sorted here; nearest rank); 0 when empty.
double Percentile(std::vector<double> v, double p);

// Writes `value` to `path` (for bench/run.sh); dies if the file cannot be written.
void WriteJson(const std::string& path, const boost::json::value& value);

}  // namespace rsc::bench
