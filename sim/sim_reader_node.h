#pragma once
// SimReaderNode: a simulated consumer process's reader connections to one Redis node — the
// library's NodeCore (client/node_core.h) as shipped, driven over the simulated network and
// Redis instead of hiredis and threads; the ReaderNodePort that SimReaderNet
// (sim/sim_reader_net.h) gives the library's ReaderRedis. Like ReaderNode (client/reader_node.h) it
// keeps two connections whatever the number of shards: the command connection sends every queued
// command in one pipeline, the live connection carries one combined blocking
// `XREADGROUP … STREAMS s1 s2 … > > …` (with the XACKs and late-read checks that ride in its
// pipeline); the simulated Redis runs them in the wire form (sim/wire_redis.h). What this
// class does is what ReaderNode does around the core: wait, send, receive, learn the live
// connection's CLIENT ID, cut the live connection for an abandon, reconnect after a failure.
//
// On a simulated cluster (sim/sim_cluster.h) the node has an address: connections to a failed
// master's old address are refused, and every command is checked against the slots the
// address serves (MOVED/ASK come back as their error replies, which NodeCore hands to
// Hooks::bounced).
//
// Answers go to the hooks, never synchronously from Enqueue or Cancel. Events still scheduled
// when the node is destroyed (ReaderRedis retires nodes) find it gone.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/node_core.h"
#include "client/reader_net.h"
#include "sim/services.h"
#include "sim/sim_cluster.h"
#include "sim/wire_redis.h"

namespace rsc::sim {

class SimReaderNet;

class SimReaderNode : public client::ReaderNodePort {
 public:
  // `from_node`: the process's network node; `address`: the node's ("" on one server, else a
  // master of `cluster`). `skip_takeover`: MUTANT c7_skip_takeover, the simulated Redis claims
  // nothing for this process's XAUTOCLAIM.
  SimReaderNode(Services& env, SimReaderNet& net, std::string from_node, std::string address,
                SimCluster* cluster, bool skip_takeover, client::ReaderNodeHooks hooks);
  ~SimReaderNode() override;
  SimReaderNode(const SimReaderNode&) = delete;
  SimReaderNode& operator=(const SimReaderNode&) = delete;

  void Start() override {}
  void Halt() override { Stop(); }
  // Also the process's death: its connections close (Redis frees its blocked read), nothing
  // more is sent or answered.
  void Stop() override;
  void Enqueue(client::NodeCommand command) override;
  void Enqueue(std::vector<client::NodeRead> reads) override;
  void Cancel(uint64_t token, bool now) override;
  // As ReaderNode::Idle: the core's queues, and nothing on the way (a pipeline or a CLIENT ID
  // in flight: the core has handed those out).
  bool Idle() const override { return core_.Idle() && !command_busy_ && !live_busy_; }
  client::ReaderRedisStats Stats() const override { return core_.Stats(); }

 private:
  using TimePoint = client::NodeCore::TimePoint;

  TimePoint Now() const;
  bool Due(std::optional<TimePoint> due) const { return due && *due <= Now(); }
  // Runs whatever is due on both connections, then arms the next wake-up.
  void Pump();
  void Schedule();
  void SendCommands();
  // Probes the unblocks of a command batch that cut a read short.
  void NoteUnblocks(const std::vector<client::NodeCore::Queued>& batch,
                    const std::vector<std::optional<redis::Reply>>& replies);
  void ConnectLive();
  void SendRound();
  // Cuts the round in flight (an abandon): answered at once as ReaderNode's cut read is, and
  // its blocked read freed at Redis when the close arrives (a network latency later).
  void CutRound();
  // The round's replies came back (`replies` in RoundWire order), or none (`error`).
  void OnRoundDone(const std::vector<redis::Reply>* replies, const std::string& error);
  void LiveLost();
  void Deliver(client::NodeCore::Output& out);
  // Sends a pipeline to this node's address: refused at a failed master's old address,
  // routed by the cluster's slots (WireClient::route).
  WireClient Client(int64_t client_id) const;
  // `exec` at this node's address: refused at a failed master's old one.
  RedisExec AtAddress(RedisExec exec) const;
  void Send(uint64_t& epoch, std::vector<redis::Command> cmds, WireClient client,
            std::shared_ptr<std::vector<redis::Reply>> result, std::shared_ptr<bool> closing,
            std::function<void(const StreamReply&)> on_reply);

  Services& env_;
  SimReaderNet& net_;
  const std::string node_;
  const std::string address_;
  SimCluster* const cluster_;
  const bool skip_takeover_;
  const client::ReaderNodeHooks hooks_;
  client::NodeCore core_;
  bool stopped_ = false;
  // Set when the node is destroyed: its scheduled events and replies find it gone.
  const std::shared_ptr<bool> gone_ = std::make_shared<bool>(false);

  uint64_t command_epoch_ = 0;  // the command connection (0: connect at the next command)
  bool command_busy_ = false;   // a pipeline in flight

  uint64_t live_epoch_ = 0;  // the live connection (0: connect at the next round)
  bool live_ready_ = false;  // connected and its CLIENT ID known
  int64_t client_id_ = 0;
  bool live_busy_ = false;  // CLIENT ID or a round in flight
  uint64_t live_seq_ = 0;   // bumped by a cut: the cut round's late reply is ignored
  TimePoint round_sent_at_;
  std::shared_ptr<bool> round_closing_;  // the round in flight's connection was cut

  std::optional<TimeMs> pump_at_;
  uint64_t pump_gen_ = 0;
};

}  // namespace rsc::sim
