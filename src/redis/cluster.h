#pragma once
// Redis Cluster routing for the store: CRC16 key slots with {hash tags}, a slot -> master
// map from CLUSTER SLOTS, and redirections followed the way the cluster spec says:
//   MOVED slot host:port  the slot lives elsewhere for good: update the map (and refresh
//                         it whole, since a resharding or failover rarely moves one slot)
//   ASK slot host:port    one-off during a slot migration: send ASKING then the command to
//                         that node, leave the map alone
//   TRYAGAIN              multi-key operation during migration: back off briefly, retry
// A redirection means the command did not run, so following it is safe for writes.
// All keys of one group share the {P:G} tag, hence one slot, so every store script is a
// single-slot script.
//
// Thread safety: ClusterExecutor is safe for concurrent use; slots_ and pools_ are
// guarded by mu_ (pools are never removed, so a pool pointer stays valid).

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/key_slot.h"
#include "redis/executor.h"

namespace rsc::redis {

// Key slots are pure (core/key_slot.h); named here too for the redis layer's users.
using ::rsc::Crc16;
using ::rsc::kClusterSlots;
using ::rsc::KeySlot;

class ClusterExecutor : public Executor {
 public:
  // Reads the slot map from `seed` (any node of the cluster). Errors: REDIS_UNAVAILABLE,
  // or INVALID_REQUEST if the node is not in cluster mode or not all slots are served.
  static Result<std::unique_ptr<ClusterExecutor>> Connect(const ConnectionOptions& seed,
                                                          size_t pool_size,
                                                          std::chrono::milliseconds checkout_wait);

  Result<Reply> Run(std::string_view key, const Command& cmd, CommandKind kind) override;
  std::vector<Result<Reply>> RunBatch(const std::vector<KeyedCommand>& cmds, CommandKind kind,
                                      const BeforeWrite& before_write = {}) override;
  Result<std::vector<std::string>> Masters() override;
  Result<std::vector<std::vector<int>>> SlotsByMaster() override;
  Result<Reply> RunOn(const std::string& node, const Command& cmd, CommandKind kind) override;
  std::string Describe() const override;

  // Re-reads CLUSTER SLOTS from any known node.
  Status RefreshSlots();

  // For clients that keep their own connections per master (the consumer's reader port):
  // the master serving `key`'s slot now ("host:port"; the seed for a slot no master serves),
  // the connection options for a node (the seed's credentials and timeouts, database 0),
  // and a redirection read from a reply (`via`: the node that answered it).
  struct Redirect {
    bool ask = false;  // ASK: this command only, after ASKING; MOVED: the slot moved for good
    int slot = 0;
    std::string target;  // "host:port"
  };
  std::string NodeForKey(std::string_view key) { return NodeForSlot(KeySlot(key)); }
  ConnectionOptions NodeOptions(const std::string& address) const;
  std::optional<Redirect> ParseRedirect(const Reply& reply, const std::string& via) const;
  // The same from an error reply's text ("MOVED 3999 10.0.0.2:6379").
  std::optional<Redirect> ParseRedirect(std::string_view error, const std::string& via) const;
  // The same without an executor (the simulator's cluster): an address without a host takes
  // `via`'s host, else `seed_host`.
  static std::optional<Redirect> ParseRedirect(std::string_view error, std::string_view via,
                                               std::string_view seed_host);
  // Records a MOVED: `slot` is served by `target` from now on (until the next refresh).
  void NoteMoved(int slot, const std::string& target);
  // Redirections followed so far; for tests and stats.
  int64_t moved_count() const { return moved_.load(std::memory_order_relaxed); }
  int64_t ask_count() const { return ask_.load(std::memory_order_relaxed); }

 private:
  ClusterExecutor(ConnectionOptions seed, size_t pool_size,
                  std::chrono::milliseconds checkout_wait);

  // Run, with `before_write` asked before each attempt is written.
  Result<Reply> RunOne(std::string_view key, const Command& cmd, CommandKind kind,
                       const BeforeWrite& before_write);
  ConnectionPool* PoolFor(const std::string& address);
  std::string NodeForSlot(int slot);
  // Parses "host:port" of a redirection; an empty host means "the host you reached me at".
  static std::string NormalizeAddress(std::string_view address, std::string_view via,
                                      std::string_view seed_host);
  Status LoadSlotsFrom(const std::string& address);

  const ConnectionOptions seed_;
  const size_t pool_size_;
  const std::chrono::milliseconds checkout_wait_;
  std::atomic<int64_t> moved_{0};
  std::atomic<int64_t> ask_{0};

  mutable std::mutex mu_;
  std::vector<std::string> slots_;                                // guarded by mu_
  std::map<std::string, std::unique_ptr<ConnectionPool>> pools_;  // guarded by mu_
};

}  // namespace rsc::redis
