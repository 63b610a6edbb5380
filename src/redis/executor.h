#pragma once
// Executor: sends a command to the Redis node that serves a key. The store speaks only to
// this interface, so the same store code runs against one server (SingleNodeExecutor) or
// a Redis Cluster (ClusterExecutor in cluster.h, which follows MOVED/ASK).
//
// Thread safety: implementations are safe for concurrent use.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "redis/connection.h"
#include "redis/reply.h"

namespace rsc::redis {

class Executor {
 public:
  virtual ~Executor() = default;

  // Runs `cmd` on the node serving `key`'s slot. Error replies come back as Reply{kError}
  // (except cluster redirections, which are followed); transport failures as errors
  // mapped per connection.h.
  virtual Result<Reply> Run(std::string_view key, const Command& cmd, CommandKind kind) = 0;

  // Addresses ("host:port") of every master: one for a single server.
  virtual Result<std::vector<std::string>> Masters() = 0;
  // Runs `cmd` on one master named by Masters() (SCAN, INFO, SCRIPT FLUSH...).
  virtual Result<Reply> RunOn(const std::string& node, const Command& cmd, CommandKind kind) = 0;

  // "single redis://host:port/0" or "cluster (3 masters)": for logs.
  virtual std::string Describe() const = 0;
};

class SingleNodeExecutor : public Executor {
 public:
  SingleNodeExecutor(ConnectionOptions options, size_t pool_size,
                     std::chrono::milliseconds checkout_wait);

  Result<Reply> Run(std::string_view key, const Command& cmd, CommandKind kind) override;
  Result<std::vector<std::string>> Masters() override;
  Result<Reply> RunOn(const std::string& node, const Command& cmd, CommandKind kind) override;
  std::string Describe() const override;

 private:
  ConnectionPool pool_;
};

// A Lua script run by EVALSHA. On NOSCRIPT (script cache emptied by a restart, failover or
// SCRIPT FLUSH — SPEC L5, the failure class of the PSYNC2 postmortem) it is run once more
// with EVAL, which loads it into that node's cache again; each such reload is counted.
//
// Thread safety: immutable after construction.
class LuaScript {
 public:
  LuaScript(std::string_view name, std::string_view body);

  // keys[0] routes the call; all keys must share one hash tag.
  Result<Reply> Eval(Executor& executor, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args, CommandKind kind,
                     std::atomic<int64_t>* reloads) const;

  const std::string& name() const { return name_; }
  const std::string& sha() const { return sha_; }

 private:
  std::string name_;
  std::string body_;
  std::string sha_;
};

}  // namespace rsc::redis
