#pragma once
// SimReaderNode: a simulated consumer process's reader connections to Redis — the library's
// NodeCore (client/node_core.h) as shipped, driven over the simulated network and Redis
// instead of hiredis and threads. Like ReaderNode (client/reader_node.h) it keeps two
// connections whatever the number of shards: the command connection sends every queued
// command in one pipeline, the live connection carries one combined blocking
// `XREADGROUP … STREAMS s1 s2 … > > …` (with the XACKs and late-read checks that ride in its
// pipeline); the simulated Redis runs them in the wire form (sim/wire_redis.h). What this
// class does is what ReaderNode does around the core: wait, send, receive, learn the live
// connection's CLIENT ID, cut the live connection for an abandon, reconnect after a failure.
//
// Answers go to the owner's callback, never synchronously from Submit or Cancel.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/node_core.h"
#include "sim/services.h"

namespace rsc::sim {

class SimReaderNode {
 public:
  using Answered = std::function<void(std::vector<client::ReaderAnswer>& answers)>;

  // `from_node`: the process's network node.
  SimReaderNode(Services& env, std::string from_node, Answered answered);
  SimReaderNode(const SimReaderNode&) = delete;
  SimReaderNode& operator=(const SimReaderNode&) = delete;

  // As client::ReaderRedis::Submit (on one server: a live read may carry its XACK and check).
  void Submit(uint64_t token, const client::ReaderCoreConfig& config,
              const client::ReaderCommand& command);
  // As client::ReaderRedis::Cancel.
  void Cancel(uint64_t token, bool now);
  // The process died: its connections close (Redis frees its blocked read), nothing more is
  // sent or answered.
  void Stop();
  // MUTANT c7_skip_takeover: the simulated Redis claims nothing for this process's XAUTOCLAIM.
  void set_skip_takeover(bool skip) { skip_takeover_ = skip; }
  client::ReaderRedisStats Stats() const { return core_.Stats(); }

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

  Services& env_;
  const std::string node_;
  const Answered answered_;
  client::NodeCore core_{/*cluster=*/false};
  bool stopped_ = false;
  bool skip_takeover_ = false;

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
