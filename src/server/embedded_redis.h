#pragma once
// The embedded default (SPEC S4): when no Redis URL is given the coordinator starts a
// local redis-server of its own, bound to 127.0.0.1 on a free port, with its data (AOF)
// in a state directory so a restart of the coordinator finds its groups again. The child
// dies with the coordinator (PR_SET_PDEATHSIG) and is shut down cleanly on exit.

#include <sys/types.h>

#include <chrono>
#include <string>

#include "core/result.h"

namespace rsc {

struct EmbeddedRedisOptions {
  std::string state_dir = ".state";  // data goes to <state_dir>/redis
  std::string binary = "redis-server";
  int port = 0;  // 0: a free port
  // Until the first answer; a server answering LOADING gets it again after each such answer.
  std::chrono::milliseconds start_timeout{10000};
};

class EmbeddedRedis {
 public:
  explicit EmbeddedRedis(EmbeddedRedisOptions options) : options_(std::move(options)) {}
  ~EmbeddedRedis();
  EmbeddedRedis(const EmbeddedRedis&) = delete;
  EmbeddedRedis& operator=(const EmbeddedRedis&) = delete;

  // Starts the process and waits until it answers PING. Errors: kInternal with the
  // reason (binary missing, port busy, did not answer in time; its log path is named).
  Status Start();
  // SHUTDOWN (saves the AOF) via SIGTERM, waits up to `wait`, then SIGKILL.
  void Stop(std::chrono::milliseconds wait = std::chrono::seconds(5));

  std::string Url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string data_dir() const { return data_dir_; }

 private:
  EmbeddedRedisOptions options_;
  std::string data_dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A free TCP port on 127.0.0.1 (bind to port 0, read it, close). Racy by nature; callers
// retry on a bind failure.
Result<int> PickFreePort();

}  // namespace rsc
