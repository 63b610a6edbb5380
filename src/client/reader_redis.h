#pragma once
// ReaderRedis: the Redis port of the consumer runtime's readers. One event-loop runtime
// drives every shard's ReaderCore (client/reader_core.h) and hands the cores' ReaderCommands
// here; the replies come back through one callback. Its threads, clock, nodes and slot map
// are behind ReaderNet (reader_net.h): production's OsReaderNet (hiredis, std::thread), or
// the simulator's simulated nodes and cluster — the routing below is the same code in both.
//
// The port finds out what the URL names on its first command (ReaderNet::Open; in production
// redis::OpenExecutor: `INFO cluster`; a server refusing INFO counts as single) and sends
// each command to the node that serves its shard stream:
// * One server: one ReaderNode (reader_node.h) — two connections, two threads, every idle
//   shard of a (group, consumer name) waiting in one blocking XREADGROUP.
// * A Redis Cluster (SPEC §13.3 CL1): one ReaderNode per master that serves a shard of this
//   consumer (two connections and two threads each: they grow with masters, not shards), plus
//   the slot map of the connection layer (redis::ClusterExecutor). A reply MOVED updates the
//   map (and has it re-read whole in the background) and the command or read goes to the new
//   master; ASK sends it once more, after ASKING, to the importing master; a node whose
//   connection fails has the map re-read (a failover), again every 200 ms while the map still
//   names it a master (up to 30 s), so the core's own retry after its backoff goes to the
//   promoted master rather than failing once more on the dead one. A node the map no longer
//   names a master is stopped once idle (nothing is routed to it any more). A redirected command
//   did not run, so following it is safe for writes (XACK, XCLAIM, the dead-letter script). After
//   kMaxRedirects a command is answered kTransport. Reads combine only within a slot: a master
//   serving several shards of this consumer in different slots is polled (reader_node.h).
// Until the first command the port holds what is submitted; a URL that cannot be reached
// answers them kTransport (the cores retry after their backoff, and the port tries again).
//
// Ordering: the commands of one token are answered in Submit order provided a token submits
// its next command only after the previous one was answered — which is how a ReaderCore
// drives it. Answers of different tokens come in no particular order.
//
// Threads: `done` (or the batch callback) runs on a node's threads or the port's own thread,
// never under the port's lock, possibly on several threads at once. It must not block long.
// Submit, Cancel and Stats may be called from any thread, also from inside `done`; Stop may
// not be called from inside `done`.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "client/node_core.h"
#include "client/reader_core.h"
#include "client/reader_net.h"
#include "client/reader_port.h"
#include "redis/connection.h"

namespace rsc::client {

class ReaderRedis : public ReaderPort {
 public:
  using Answer = ReaderAnswer;
  // Optional (set before Start): receives the answers of one pipeline or one read together,
  // instead of one `done` call each — an owner that takes a lock per call takes it once per
  // batch. Same threads and rules as `done`.
  using BatchDone = std::function<void(std::vector<ReaderAnswer>& answers)>;
  void SetBatchDone(BatchDone batch_done) { batch_done_ = std::move(batch_done); }

  // Called with the token given to Submit, exactly once per Submit (unless Stop() ran first).
  using Done = std::function<void(uint64_t token, ReaderReply reply)>;

  static constexpr size_t kMaxPipeline = NodeCore::kMaxPipeline;
  static constexpr int kMaxRedirects = 8;

  // Production (OsReaderNet, reader_net_os.cc): `redis`: the server, or any node of a
  // cluster. `redis.command_timeout`: the socket timeout of every command; a live read gets
  // its BLOCK on top. Nothing connects before Start().
  ReaderRedis(redis::ConnectionOptions redis, Done done);
  // Over any ReaderNet (the simulator's).
  ReaderRedis(std::unique_ptr<ReaderNet> net, Done done);
  ~ReaderRedis() override;  // Stop()
  ReaderRedis(const ReaderRedis&) = delete;
  ReaderRedis& operator=(const ReaderRedis&) = delete;

  // Starts the port's thread. Commands submitted before are sent then. Call at most once.
  void Start() override;
  // Cuts every connection and joins the threads; returns within about a round trip even with
  // a read blocked — unless the port's own thread is detecting the cluster or re-reading its
  // slot map at that moment: then within that connect (or command) timeout per node it asks.
  // Outstanding Submits get no reply, later ones are dropped; `done` is not called once Stop()
  // returned. Idempotent.
  void Stop() override;
  // Queues one command of reader `token`. `config` gives the stream, group, consumer name and
  // dead-letter stream; the wire args are built here, so command.entry (kDeadLetter) need
  // only be valid during the call. kReadLive: at most one per token at a time, block_ms ≥ 1.
  void Submit(uint64_t token, const ReaderCoreConfig& config,
              const ReaderCommand& command) override;
  // Reader `token` is being abandoned or drained: its live read, if queued and not sent yet,
  // is answered kNil at once (from another thread); if it is part of a blocked combined read,
  // that read is cut short so its readers are answered soon. Other commands of the token are
  // left alone (they are short). No effect on an unknown token.
  //
  // `now` (an abandon: the reader must end at once, even if Redis or the network does not
  // answer): a blocked read it is part of is cut at the socket instead (that connection
  // reconnects for the next read); the other readers of that read are carried over to the
  // next one, like after an unblock. A cancelled read that comes back redirected is answered
  // kNil, not sent again; a Cancel that arrives while a redirected read is on its way between
  // two nodes finds it nowhere, and that read is answered by its deadline.
  void Cancel(uint64_t token, bool now = false) override;
  // Summed over the nodes, plus the port's own thread.
  ReaderRedisStats Stats() const override;
  // The server is known to be one server, not a cluster: a kReadLive may then carry an XACK
  // (ReaderCommand::ids) and a check (check_foreign), sent with it in one pipeline.
  bool SingleServer() const override { return single_.load(std::memory_order_acquire); }

 private:
  using TimePoint = ReaderNet::TimePoint;
  using Item = std::variant<NodeCommand, NodeRead>;
  enum class Mode { kUnknown, kSingle, kCluster };

  void Run();
  // Opens the executor (mode detection) unless done; false: `error` says why.
  bool Open(std::string* error);
  bool Cluster();  // the mode is kCluster (takes mu_)
  // Sends an item to its node (`node`: a redirection's target, else the slot's master).
  void DispatchLocked(Item item, const std::string& node = {});
  // The address of the node an item goes to ("" on one server; `node`: a redirection's).
  std::string AddressLocked(const Item& item, const std::string& node);
  // Sends everything held while the server was unknown: the reads of one node in one
  // ReaderNode::Enqueue, so they go out as one combined read.
  void DispatchHeldLocked();
  ReaderNodePort& NodeLocked(const std::string& address);
  // Waits on cv_ until `ready` or `deadline` (nullopt: no deadline); false: the deadline came.
  template <typename Ready>
  bool WaitLocked(std::unique_lock<SyncPort::Mutex>& lock, std::optional<TimePoint> deadline,
                  Ready ready);
  // `via`: the node that answered with the redirections.
  void OnBounced(const std::string& via, std::vector<NodeCommand> commands,
                 std::vector<NodeRead> reads);
  void OnNodeFailed(const std::string& address);
  void Deliver(std::vector<ReaderAnswer>& answers);

  const std::unique_ptr<ReaderNet> net_;
  const Done done_;
  BatchDone batch_done_;             // set before Start(), then read-only
  std::atomic<bool> halted_{false};  // set by Stop(): no `done` from then on
  std::atomic<bool> single_{false};  // mode_ became kSingle (it never changes after)

  const std::unique_ptr<SyncPort::Mutex> mu_;
  const std::unique_ptr<SyncPort::CondVar> cv_;  // held_, refresh_requested_, stopping_
  bool started_ = false;                         // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  Mode mode_ = Mode::kUnknown;                   // guarded by mu_; set once by the port's thread
  // Nodes by address ("" on one server). A node the slot map no longer names a master is
  // stopped and removed once idle (a node that comes back gets a new one). Guarded by mu_.
  std::map<std::string, std::unique_ptr<ReaderNodePort>> nodes_;
  // Counters of the nodes stopped since (nodes: how many). Guarded by mu_.
  ReaderRedisStats retired_stats_;
  std::deque<Item> held_;              // guarded by mu_: submitted before the mode is known
  std::vector<ReaderAnswer> answers_;  // guarded by mu_: for the port's thread to deliver
  bool refresh_requested_ = false;     // guarded by mu_
  // Failed nodes still named masters by the map, each looked up until a deadline; the next
  // look-up. Guarded by mu_.
  std::map<std::string, TimePoint> watched_;
  TimePoint next_watch_;
  bool retire_pending_ = false;  // guarded by mu_: a node to retire was busy at the last look
  std::map<std::string, int> not_master_looks_;  // guarded by mu_: looks in a row
  TimePoint next_open_;                          // port's thread: no new attempt before
  std::chrono::milliseconds open_backoff_{0};
  std::string open_error_;  // port's thread: the last failure to open

  const std::unique_ptr<SyncPort::Mutex> join_mu_;  // serializes Start/Stop's thread handling
  std::function<void()> join_;                      // waits for the port's thread
};

}  // namespace rsc::client
