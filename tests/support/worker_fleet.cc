#include "support/worker_fleet.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "support/wait.h"

namespace rsc::testing {

using sim::HistEvent;
using sim::HistKind;
using sim::History;

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A SIGKILL can cut the line being written: only complete lines count.
std::string CompleteLines(const std::string& path) {
  std::string text = ReadFile(path);
  if (const size_t nl = text.rfind('\n'); nl != std::string::npos) {
    text.resize(nl + 1);
  } else {
    text.clear();
  }
  return text;
}

std::string Tail(const std::string& text, size_t lines) {
  std::vector<std::string> all;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "\n  | " + all[i];
  }
  return out;
}

}  // namespace

int64_t SteadyUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

WorkerFleet::WorkerFleet(std::string prefix, std::string keep_env)
    : prefix_(std::move(prefix)), keep_env_(std::move(keep_env)) {}

WorkerFleet::~WorkerFleet() {
  for (Worker& w : workers_) {
    if (w.pid > 0) {
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, nullptr, 0);
      w.pid = -1;
    }
  }
  if (dir_.empty()) return;
  if (::testing::Test::HasFailure() || std::getenv(keep_env_.c_str()) != nullptr) {
    std::cerr << prefix_ << ": logs kept in " << dir_ << "\n";
  } else {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string WorkerFleet::WorkerBinary() {
  return std::string(RSC_BINARY_DIR) + "/tests/rsc-e2e-worker";
}

::testing::AssertionResult WorkerFleet::Init() {
  std::string tmpl = "/tmp/" + prefix_ + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ::testing::AssertionFailure() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
  }
  dir_ = tmpl;
  harness_log_ = dir_ + "/harness.jsonl";
  if (::access(WorkerBinary().c_str(), X_OK) != 0) {
    return ::testing::AssertionFailure()
           << WorkerBinary() << " is missing: build it (cmake --build build --target "
           << "rsc-e2e-worker)";
  }
  return ::testing::AssertionSuccess();
}

void WorkerFleet::Record(HistEvent e) {
  if (e.t_us == 0) e.t_us = SteadyUs();
  std::ofstream(harness_log_, std::ios::app) << sim::ToJsonLine(e) << "\n";
}

void WorkerFleet::Record(HistKind kind, const std::string& proc, const std::string& detail) {
  HistEvent e;
  e.kind = kind;
  e.proc = proc;
  e.detail = detail;
  Record(std::move(e));
}

Worker* WorkerFleet::Spawn(const std::string& name, const std::vector<std::string>& args) {
  const int n = ++incarnations_[name];
  Worker w;
  w.name = name;
  w.proc = name + "#" + std::to_string(n);
  w.log_path = dir_ + "/" + name + "_" + std::to_string(n) + ".jsonl";
  w.out_path = dir_ + "/" + name + "_" + std::to_string(n) + ".out";
  std::vector<std::string> argv_s = {WorkerBinary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  argv_s.insert(argv_s.end(), common_args_.begin(), common_args_.end());
  argv_s.insert(argv_s.end(), {"--log", w.log_path, "--proc", w.proc});
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int fd = ::open(w.out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  w.pid = pid;
  workers_.push_back(std::move(w));
  return &workers_.back();
}

void WorkerFleet::Kill(Worker* w) {
  if (w->pid <= 0) {
    ADD_FAILURE() << w->proc << " is not running";
    return;
  }
  ::kill(w->pid, SIGKILL);  // also ends a stopped process
  ::waitpid(w->pid, nullptr, 0);
  w->pid = -1;
  w->paused = false;
  Record(HistKind::kCrash, w->proc, "SIGKILL");
}

void WorkerFleet::Term(Worker* w) {
  if (w->pid <= 0) return;
  ::kill(w->pid, SIGTERM);
  if (w->paused) Resume(w);
}

void WorkerFleet::Pause(Worker* w) {
  if (w->pid <= 0 || w->paused) return;
  ::kill(w->pid, SIGSTOP);
  w->paused = true;
}

void WorkerFleet::Resume(Worker* w) {
  if (w->pid <= 0 || !w->paused) return;
  ::kill(w->pid, SIGCONT);
  w->paused = false;
}

std::optional<int> WorkerFleet::Poll(Worker* w) {
  if (w->pid <= 0) return std::nullopt;
  int status = 0;
  if (::waitpid(w->pid, &status, WNOHANG) != w->pid) return std::nullopt;
  w->pid = -1;
  w->paused = false;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<int> WorkerFleet::WaitExit(Worker* w, std::chrono::milliseconds wait) {
  if (w->pid <= 0) {
    ADD_FAILURE() << w->proc << " was already reaped";
    return std::nullopt;
  }
  std::optional<int> code;
  const auto r = WaitFor(
      [&] {
        int status = 0;
        if (::waitpid(w->pid, &status, WNOHANG) != w->pid) return false;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
      },
      wait, w->proc + " exits");
  if (r) w->pid = -1;
  return code;
}

std::string WorkerFleet::Describe(const Worker& w) const {
  return w.proc + " output:" + Tail(ReadFile(w.out_path), 15) + "\n" + w.proc +
         " last events:" + Tail(ReadFile(w.log_path), 8);
}

int64_t WorkerFleet::CountKind(const std::string& path, std::string_view kind) {
  const std::string text = ReadFile(path);
  const std::string needle = "\"kind\":\"" + std::string(kind) + "\"";
  int64_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

History WorkerFleet::Merged() const {
  History all;
  std::vector<std::string> paths;
  for (const Worker& w : workers_) paths.push_back(w.log_path);
  paths.push_back(harness_log_);
  for (const std::string& p : paths) {
    sim::ParseOutcome parsed = sim::ParseJsonLines(CompleteLines(p));
    for (const std::string& e : parsed.errors) ADD_FAILURE() << p << ": " << e;
    all.insert(all.end(), parsed.events.begin(), parsed.events.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const HistEvent& a, const HistEvent& b) { return a.t_us < b.t_us; });
  return all;
}

std::set<std::pair<std::string, int64_t>> WorkerFleet::Delivered() const {
  std::set<std::pair<std::string, int64_t>> seen;
  for (const Worker& w : workers_) {
    for (const HistEvent& e : sim::ParseJsonLines(CompleteLines(w.log_path)).events) {
      if (e.kind == HistKind::kDeliver) seen.insert({e.key, e.seq});
    }
  }
  return seen;
}

std::set<int32_t> WorkerFleet::HeldShards() const {
  std::map<std::pair<std::string, int32_t>, bool> open;
  for (const HistEvent& e : Merged()) {
    if (e.kind == HistKind::kAcquire) open[{e.proc, e.shard}] = true;
    if (e.kind == HistKind::kRelease) {
      if (e.shard >= 0) {
        open.erase({e.proc, e.shard});
      } else {
        std::erase_if(open, [&](const auto& kv) { return kv.first.first == e.proc; });
      }
    }
    if (e.kind == HistKind::kCrash || e.kind == HistKind::kStop) {
      std::erase_if(open, [&](const auto& kv) { return kv.first.first == e.proc; });
    }
  }
  std::set<int32_t> held;
  for (const auto& [k, v] : open) held.insert(k.second);
  return held;
}

sim::CheckerConfig RealProcessCheckConfig(int32_t shards, const boost::json::object& group_config,
                                          int64_t convergence_bound_us) {
  auto ms = [&](const char* name) {
    const boost::json::value* v = group_config.if_contains(name);
    if (v == nullptr || !v->is_int64()) {
      ADD_FAILURE() << "the group config has no integer " << name << ": the checkers need it";
      return int64_t{0};
    }
    return v->as_int64();
  };
  sim::CheckerConfig c;
  c.shards = shards;
  c.max_assignment_lease_us = ms("assignmentLeaseMs") * 1000;
  c.max_routing_lease_us = ms("routingLeaseMs") * 1000;
  c.member_lease_us = ms("memberLeaseMs") * 1000;
  c.convergence_bound_us = convergence_bound_us;
  c.check_coordinator = false;
  c.check_delivery = true;
  return c;
}

std::string ShowViolations(const std::vector<sim::Violation>& vs, size_t max) {
  std::string out;
  for (size_t i = 0; i < vs.size() && i < max; ++i) {
    out += "\n  " + vs[i].invariant + " at t=" + std::to_string(vs[i].t_us) + " [event " +
           std::to_string(vs[i].event_index) + "]: " + vs[i].message;
  }
  if (vs.size() > max) out += "\n  ... " + std::to_string(vs.size() - max) + " more";
  return out;
}

}  // namespace rsc::testing
