#pragma once
// Executor: sends a command to the Redis node that serves a key. The store speaks only to
// this interface, so the same store code runs against one server (SingleNodeExecutor) or
// a Redis Cluster (ClusterExecutor in cluster.h, which follows MOVED/ASK).
//
// Thread safety: implementations are safe for concurrent use.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "redis/connection.h"
#include "redis/reply.h"

namespace rsc::redis {

// One command and the key that routes it (its slot on a cluster).
struct KeyedCommand {
  std::string key;
  Command cmd;
};

// Asked right before a pipeline is written, after its connection is up: false leaves those
// commands unsent (REDIS_UNAVAILABLE "not sent"). The producer's routing-lease check: a
// connect can take up to the connect timeout, and no XADD may leave after the lease ended.
using BeforeWrite = std::function<bool()>;

class Executor {
 public:
  virtual ~Executor() = default;

  // Runs every command on the node serving its key, one pipeline per node, and answers in
  // input order (per-node order = input order, so commands on one key keep their order).
  // Redirections are followed per command; transport failures are mapped per command as
  // in connection.h (a command whose pipeline failed before it was sent: REDIS_UNAVAILABLE;
  // after: UNKNOWN_RESULT for kWrite). Commands on one node after a failure in its pipeline
  // are not sent again.
  virtual std::vector<Result<Reply>> RunBatch(const std::vector<KeyedCommand>& cmds,
                                              CommandKind kind,
                                              const BeforeWrite& before_write = {}) = 0;

  // Runs `cmd` on the node serving `key`'s slot. Error replies come back as Reply{kError}
  // (except cluster redirections, which are followed); transport failures as errors
  // mapped per connection.h.
  virtual Result<Reply> Run(std::string_view key, const Command& cmd, CommandKind kind) = 0;

  // Addresses ("host:port") of every master: one for a single server.
  virtual Result<std::vector<std::string>> Masters() = 0;
  // The slots each master serves (ascending), masters ordered by address, read afresh on a
  // cluster (SPEC D2 spreads a new generation's shard keys over them); empty for one server.
  virtual Result<std::vector<std::vector<int>>> SlotsByMaster() {
    return std::vector<std::vector<int>>{};
  }
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
  std::vector<Result<Reply>> RunBatch(const std::vector<KeyedCommand>& cmds, CommandKind kind,
                                      const BeforeWrite& before_write = {}) override;
  Result<std::vector<std::string>> Masters() override;
  Result<Reply> RunOn(const std::string& node, const Command& cmd, CommandKind kind) override;
  std::string Describe() const override;
  // The server's connection options: of a seed list, the node that answered (no seeds).
  const ConnectionOptions& options() const { return pool_.options(); }

 private:
  ConnectionPool pool_;
};

enum class ClusterMode {
  kAuto,    // ask the server (INFO cluster) when opening
  kSingle,  // one server (or a proxy that hides the cluster)
  kCluster  // Redis Cluster: slot routing, MOVED/ASK
};

// The executor for a URL's server: kAuto asks it (`INFO cluster`; a server that refuses INFO,
// as some managed services do, counts as single). A cluster is named by any one of its nodes,
// or by a seed list (options.seeds: the first node that answers is used); it has only
// database 0. Errors: REDIS_UNAVAILABLE (cannot reach it), INVALID_REQUEST (a
// database other than 0 on a cluster, a node not in cluster mode or slots not all served).
Result<std::unique_ptr<Executor>> OpenExecutor(const ConnectionOptions& options, ClusterMode mode,
                                               size_t pool_size,
                                               std::chrono::milliseconds checkout_wait);

// The first of options' node and its seeds that answers `INFO cluster` (the options for it,
// seeds kept; the reply in *info). One node: its own error; several: REDIS_UNAVAILABLE naming
// each node's failure.
Result<ConnectionOptions> FirstReachable(const ConnectionOptions& options, Result<Reply>* info);

// Runs one pipeline of `cmds` on `conn`, asking `before_write` first: a reply or mapped
// error per command. Shared by the executors.
std::vector<Result<Reply>> RunPipeline(Connection& conn, const std::vector<const Command*>& cmds,
                                       CommandKind kind, const BeforeWrite& before_write);

// A Lua script run by EVALSHA. On NOSCRIPT (script cache emptied by a restart, failover or
// SCRIPT FLUSH — SPEC L5, the failure class of the PSYNC2 postmortem) it is run once more
// with EVAL, which loads it into that node's cache again; each such reload is counted.
//
// Thread safety: immutable after construction.
// The replicas connected to the master serving `key` (INFO replication); 0 when INFO is
// refused (an ACL without +info: no replica is known, nothing waits).
Result<int64_t> ConnectedReplicas(Executor& executor, std::string_view key);

// `write` on the master serving `key`, acknowledged by a replica where the master has any:
// pipelined with `WAIT 1 <wait>` on the same connection (WAIT covers the writes of its own
// connection). `acknowledged` is true without replicas, or when one acknowledged in time;
// an error reply to `write` is returned as its reply (no wait then).
struct AcknowledgedReply {
  Reply reply;
  int64_t replicas = 0;
  bool acknowledged = true;
};
Result<AcknowledgedReply> RunAcknowledged(Executor& executor, const std::string& key,
                                          const Command& write, std::chrono::milliseconds wait);

class LuaScript {
 public:
  LuaScript(std::string_view name, std::string_view body);

  // `EVAL <body> …`: for a pipeline (RunAcknowledged), where a NOSCRIPT retry cannot be
  // slipped in. For rare calls only: the body travels each time.
  Command EvalCommand(const std::vector<std::string>& keys,
                      const std::vector<std::string>& args) const;

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
