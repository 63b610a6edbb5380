#pragma once
// RedisProcess: a real redis-server for tests, on a free loopback port in its own temp
// directory (ENGINEERING §5). Start waits for PING with a bounded deadline and fails with
// the server's log tail, never a blind sleep. The destructor kills the server by PID and
// removes the directory; the child also dies with the test process (PR_SET_PDEATHSIG).
//
// Run tests that use it inside scripts/netns.sh: the host loopback is throttled.
//
// Thread safety: none; drive one RedisProcess from one thread.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/redis_cli.h"

namespace rsc::testing {

struct RedisProcessOptions {
  std::string password;               // requirepass (legacy AUTH <password>)
  std::string acl_user;               // adds an ACL user with all permissions ...
  std::string acl_password;           // ... and this password
  std::optional<int> replicaof_port;  // REPLICAOF 127.0.0.1 <port>
  bool appendonly = false;
  std::string save;      // RDB save points ("" = none, e.g. "3600 1")
  bool cluster = false;  // cluster-enabled yes, own nodes.conf
  // Anything else, e.g. {"--enable-debug-command", "local"} or
  // {"--rename-command", "EVALSHA", ""}. "--repl-diskless-sync-delay 0" is always set.
  std::vector<std::string> extra_args;
  std::chrono::milliseconds start_timeout{10000};
  int port = 0;  // 0: a free loopback port is picked (again if the first is taken)
};

class RedisProcess {
 public:
  explicit RedisProcess(RedisProcessOptions options = {});
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Starts the server (picking a port on first start) and waits until it answers PING.
  ::testing::AssertionResult Start();
  // SHUTDOWN NOSAVE (or SAVE when `save`), falling back to SIGTERM then SIGKILL; waits for
  // the process to exit.
  ::testing::AssertionResult Stop(bool save = false);
  // SIGKILL, no chance to save.
  void Kill();
  // Stop (or nothing if not running), then Start on the same port and directory.
  ::testing::AssertionResult Restart(bool save = false);
  // What the next Start() replicates from (nullopt: it starts as a master). A promoted
  // replica must not come back as a replica when it restarts, nor a demoted master as one.
  void set_replicaof_port(std::optional<int> port) { options_.replicaof_port = port; }
  // SIGSTOP / SIGCONT, to simulate a hung server.
  void Pause();
  void Resume();

  bool running() const { return pid_ > 0; }
  pid_t Pid() const { return pid_; }
  int Port() const { return port_; }
  const std::string& Dir() const { return dir_; }
  // redis://[user:password@]127.0.0.1:port with the configured credentials.
  std::string Url() const;
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  // A fresh authenticated client; fails the current test (and returns nullptr) if it
  // cannot connect.
  std::unique_ptr<RedisCli> Cli() const;
  // Last lines of the server log, for failure messages.
  std::string LogTail(size_t lines = 20) const;

 private:
  // `port_taken`: another redis-server already answered on port_ (see Launch).
  ::testing::AssertionResult Launch(bool* port_taken);
  // Whether the server answering on port_ is the one this object spawned (INFO's
  // process_id); true when that cannot be asked (an ACL refusing INFO).
  bool AnsweredByOurs() const;
  bool Reap(std::chrono::milliseconds wait);  // waits for exit; true if exited
  std::vector<std::string> Args() const;

  RedisProcessOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A 3-master Redis Cluster, created with redis-cli --cluster create; with
// `replicas_per_master` 1, six nodes (nodes 0-2 start as the masters, 3-5 as their replicas;
// which node is which changes with failovers: ask MasterOf/ReplicaOf).
class Cluster3 {
 public:
  explicit Cluster3(RedisProcessOptions options = {}, int replicas_per_master = 0);
  ::testing::AssertionResult Start();
  RedisProcess& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  // redis://127.0.0.1:<first node's port>
  std::string Url() const { return nodes_[0]->Url(); }
  // Every node's URL, comma-separated (a seed list).
  std::string Urls() const;

  // The node index serving `slot` now, and a replica of master `master` (asked of a live
  // node; size() if none is known).
  size_t MasterOf(int slot);
  size_t ReplicaOf(size_t master);
  // Live nodes that are masters now.
  std::vector<size_t> Masters();
  // Waits until every live replica's link to its master is up and in sync.
  ::testing::AssertionResult WaitReplicasInSync(std::chrono::milliseconds wait);
  // Waits until `node` is a master and every live node reports cluster_state:ok with all
  // 16384 slots (after a kill: the failure detected and the replica elected).
  ::testing::AssertionResult WaitPromoted(size_t node, std::chrono::milliseconds wait);
  // CLUSTER FAILOVER on replica `node` (a manual failover: no writes lost) once the cluster
  // is settled, then WaitPromoted; asked again when Redis reverts it.
  ::testing::AssertionResult ManualFailover(size_t node, std::chrono::milliseconds wait);

  // Moves `slot` from node `src` to node `dst` the way `redis-cli --cluster reshard` does,
  // in two steps a test can act between: Begin marks the slot IMPORTING on dst and
  // MIGRATING on src and migrates `keys` (the source then answers ASK for them); Finish
  // assigns the slot to dst on every node (the others answer MOVED from then on).
  ::testing::AssertionResult BeginSlotMigration(int slot, size_t src, size_t dst,
                                                const std::vector<std::string>& keys);
  // Finish first migrates whatever the slot still holds on the source (keys the caller did
  // not name), then assigns the slot, then waits until the cluster is settled (WaitSettled).
  ::testing::AssertionResult FinishSlotMigration(int slot, size_t dst);

  // Waits until every live node reports the same cluster_current_epoch and slot map.
  ::testing::AssertionResult WaitSettled(std::chrono::milliseconds wait);
  // CLUSTER NODES of every node, for failure messages.
  std::string NodesReport();

 private:
  RedisProcessOptions options_;
  int replicas_per_master_ = 0;
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
};

}  // namespace rsc::testing
