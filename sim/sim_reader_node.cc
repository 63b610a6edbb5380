#include "sim/sim_reader_node.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "core/check.h"
#include "sim/sim_reader_net.h"
#include "sim/wire_redis.h"

namespace rsc::sim {
namespace {

using client::NodeCore;

TimeMs ToMs(NodeCore::TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::vector<redis::Command> Copy(const std::vector<const redis::Command*>& wire) {
  std::vector<redis::Command> out;
  out.reserve(wire.size());
  for (const redis::Command* c : wire) out.push_back(*c);
  return out;
}

}  // namespace

SimReaderNode::SimReaderNode(Services& env, SimReaderNet& net, std::string from_node,
                             std::string address, SimCluster* cluster, bool skip_takeover,
                             client::ReaderNodeHooks hooks)
    : env_(env),
      net_(net),
      node_(std::move(from_node)),
      address_(std::move(address)),
      cluster_(cluster),
      skip_takeover_(skip_takeover),
      hooks_(std::move(hooks)),
      core_(cluster != nullptr) {
  net_.Register(this);
}

SimReaderNode::~SimReaderNode() {
  // ReaderRedis retired it: its master failed over (or lost its slots) and it went idle.
  if (!net_.closing()) env_.world().probes().Hit("cluster_node_retired");
  Stop();
  *gone_ = true;
  net_.Unregister(this);
}

RedisExec SimReaderNode::AtAddress(RedisExec exec) const {
  if (cluster_ == nullptr) return exec;
  return [cluster = cluster_, address = address_, exec = std::move(exec), &w = env_.world()](
             SimRedis& redis, std::function<void(StreamReply)> done) {
    if (!cluster->Down(address)) return exec(redis, std::move(done));
    w.probes().Hit("cluster_refused");
    StreamReply r;
    r.error = std::string(kConnError) + "connection refused (a failed master's address)";
    done(std::move(r));
  };
}

void SimReaderNode::Send(uint64_t& epoch, std::vector<redis::Command> cmds, WireClient client,
                         std::shared_ptr<std::vector<redis::Reply>> result,
                         std::shared_ptr<bool> closing,
                         std::function<void(const StreamReply&)> on_reply) {
  env_.SendRedis(node_, epoch,
                 AtAddress(WirePipeline(std::move(cmds), std::move(client), std::move(result),
                                        std::move(closing))),
                 std::move(on_reply));
}

WireClient SimReaderNode::Client(int64_t client_id) const {
  WireClient c{client_id, skip_takeover_};
  if (cluster_ != nullptr) {
    c.route = [cluster = cluster_, address = address_](const redis::Command& cmd, bool asking,
                                                       bool arriving) {
      return cluster->Route(address, cmd, asking, arriving);
    };
  }
  return c;
}

NodeCore::TimePoint SimReaderNode::Now() const {
  return TimePoint{} + std::chrono::milliseconds(env_.world().now());
}

void SimReaderNode::Enqueue(client::NodeCommand command) {
  if (stopped_) return;
  core_.Enqueue(std::move(command));
  Schedule();
}

void SimReaderNode::Enqueue(std::vector<client::NodeRead> reads) {
  if (stopped_ || reads.empty()) return;
  (void)core_.Enqueue(std::move(reads), Now());
  Schedule();
}

void SimReaderNode::Cancel(uint64_t token, bool now) {
  if (stopped_) return;
  // The core asks for the cut once per round, and only once the round is out (a cut asked
  // for while SendRound hands out what PrepareRound answered comes from OnRoundSent).
  if (core_.Cancel(token, now)) CutRound();
  Schedule();
}

void SimReaderNode::CutRound() {
  // ReaderNode cuts the live socket: its blocked receive fails at once, and Redis frees the
  // blocked read when the close reaches it (entries it serves before then are lost with the
  // reply, pending for this consumer). `close_after`: the close's way to Redis.
  const TimeMs close_after = env_.net().RedisLatency();
  env_.world().probes().Hit("live_read_cut");
  ++live_seq_;  // the round's own reply, if any, is ignored
  *round_closing_ = true;
  const int64_t id = client_id_;
  World& w = env_.world();
  w.After(close_after, [&redis = env_.redis(), id] { redis.DropBlockedClient(id); });
  w.After(0, [this, gone = gone_] {
    if (!*gone && !stopped_) OnRoundDone(nullptr, "connection cut (the reader was abandoned)");
  });
}

void SimReaderNode::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (round_closing_) *round_closing_ = true;
  if (live_ready_) env_.redis().DropBlockedClient(client_id_);
}

void SimReaderNode::Schedule() {
  if (stopped_) return;
  std::optional<TimePoint> due;
  auto earliest = [&](std::optional<TimePoint> t) {
    if (t && (!due || *t < *due)) due = t;
  };
  if (!command_busy_) earliest(core_.CommandDue());
  if (!live_busy_) earliest(core_.LiveDue());
  if (!due) return;
  World& w = env_.world();
  const TimeMs at = std::max(w.now(), ToMs(std::max(*due, TimePoint{})));
  if (pump_at_ && *pump_at_ <= at) return;
  pump_at_ = at;
  const uint64_t gen = ++pump_gen_;
  w.At(at, [this, gen, gone = gone_] {
    if (*gone || stopped_ || gen != pump_gen_) return;
    pump_at_.reset();
    Pump();
  });
}

void SimReaderNode::Pump() {
  if (!command_busy_ && Due(core_.CommandDue())) SendCommands();
  if (!stopped_ && !live_busy_ && Due(core_.LiveDue())) {
    // A connection Redis reset while idle (a failover) is replaced before the next read, and
    // its new CLIENT ID learnt (ReaderNode::EnsureLive).
    if (live_ready_ && live_epoch_ != env_.redis().epoch()) LiveLost();
    if (!live_ready_) {
      ConnectLive();
    } else {
      SendRound();
    }
  }
  Schedule();
}

void SimReaderNode::SendCommands() {
  std::vector<NodeCore::Queued> batch = core_.TakeCommands(Now());
  NodeCore::Output out;
  NodeCore::AnswerUnsent(batch, &out);
  Deliver(out);
  int64_t commands = 0;
  int64_t unblocks = 0;
  std::vector<redis::Command> cmds = Copy(NodeCore::CommandWire(batch, &commands, &unblocks));
  if (cmds.empty() || stopped_) return;
  core_.OnCommandsSent(commands, unblocks);
  command_busy_ = true;
  auto result = std::make_shared<std::vector<redis::Reply>>();
  auto held = std::make_shared<std::vector<NodeCore::Queued>>(std::move(batch));
  const size_t n = cmds.size();
  Send(command_epoch_, std::move(cmds), Client(0), result, nullptr,
       [this, gone = gone_, result, held, n](const StreamReply& r) {
         if (*gone || stopped_) return;
         command_busy_ = false;
         std::vector<std::optional<redis::Reply>> replies(n);
         if (r.ok()) {
           RSC_CHECK(result->size() == n);
           for (size_t i = 0; i < n; ++i) replies[i] = std::move((*result)[i]);
         } else {
           command_epoch_ = 0;  // reconnect at the next command
         }
         NoteUnblocks(*held, replies);
         NodeCore::Output out;
         core_.AnswerCommands(*held, replies, r.ok() ? "" : r.error, &out);
         core_.OnCommandReplies(*held, replies, out, Now());
         out.failed = !r.ok();
         Deliver(out);
         Schedule();
       });
}

void SimReaderNode::NoteUnblocks(const std::vector<NodeCore::Queued>& batch,
                                 const std::vector<std::optional<redis::Reply>>& replies) {
  size_t k = 0;
  for (const NodeCore::Queued& q : batch) {
    if (q.type == NodeCore::Queued::Type::kAnswerNil || q.command.args.empty()) continue;
    if (q.command.asking) ++k;
    const std::optional<redis::Reply>& reply = replies[k++];
    if (q.type == NodeCore::Queued::Type::kUnblock && reply && reply->IsInteger() &&
        reply->integer == 1) {
      env_.world().probes().Hit("live_read_unblocked");
    }
  }
}

void SimReaderNode::ConnectLive() {
  live_busy_ = true;
  auto id = std::make_shared<int64_t>(0);
  const uint64_t seq = live_seq_;
  RedisExec exec = [id](SimRedis& redis, std::function<void(StreamReply)> done) {
    *id = redis.NewClientId();  // this connection's
    done(StreamReply{});
  };
  env_.SendRedis(node_, live_epoch_, AtAddress(std::move(exec)),
                 [this, gone = gone_, id, seq](const StreamReply& r) {
                   if (*gone || stopped_ || seq != live_seq_) return;
                   live_busy_ = false;
                   if (r.ok()) {
                     live_ready_ = true;
                     client_id_ = *id;
                     core_.OnLiveConnected(client_id_);
                   } else {
                     // Every queued read is answered kTransport (ReaderNode::RunLive, !connected).
                     live_epoch_ = 0;
                     NodeCore::Output out;
                     (void)core_.PrepareRound(Now(), false, r.error, &out);
                     Deliver(out);
                   }
                   Pump();
                 });
}

void SimReaderNode::SendRound() {
  NodeCore::Output out;
  const bool round = core_.PrepareRound(Now(), true, "", &out);
  Deliver(out);
  if (!round || stopped_) return;
  bool writes = false;
  std::vector<redis::Command> cmds = Copy(NodeCore::RoundWire(core_.round(), &writes));
  if (core_.round().blocking && core_.round().buckets[0].reads.size() > 1) {
    env_.world().probes().Hit("live_read_combined");
  }
  if (!core_.round().blocking) env_.world().probes().Hit("live_read_polled");
  live_busy_ = true;
  round_sent_at_ = Now();
  const uint64_t seq = live_seq_;
  auto result = std::make_shared<std::vector<redis::Reply>>();
  round_closing_ = std::make_shared<bool>(false);
  Send(live_epoch_, std::move(cmds), Client(client_id_), result, round_closing_,
       [this, gone = gone_, result, seq](const StreamReply& r) {
         if (*gone || stopped_ || seq != live_seq_) return;  // cut: answered already
         OnRoundDone(r.ok() ? result.get() : nullptr, r.error);
       });
  if (core_.OnRoundSent()) CutRound();
}

void SimReaderNode::OnRoundDone(const std::vector<redis::Reply>* replies,
                                const std::string& error) {
  const NodeCore::LiveRound& round = core_.round();
  std::vector<NodeCore::BucketReplies> split(round.buckets.size());
  size_t next = 0;
  auto take = [&](std::optional<redis::Reply>* into) {
    if (replies != nullptr && next < replies->size()) *into = (*replies)[next];
    ++next;
  };
  for (size_t i = 0; i < round.buckets.size(); ++i) {
    const NodeCore::Bucket& bucket = round.buckets[i];
    split[i].acks.resize(bucket.acks.size());
    split[i].checks.resize(bucket.checks.size());
    for (auto& ack : split[i].acks) take(&ack);
    std::optional<redis::Reply> asking;
    if (bucket.asking) take(&asking);
    take(&split[i].read);
    for (auto& check : split[i].checks) take(&check);
  }
  RSC_CHECK(replies == nullptr || next == replies->size());
  const TimePoint now = Now();
  // Redis starts the BLOCK when the read arrives, after it was sent: a nil reply earlier than
  // this was an unblock, not a timeout.
  const bool timed_out = now >= round_sent_at_ + round.block;
  NodeCore::Output out;
  const NodeCore::RoundEnd end =
      core_.OnRoundReplies(split, replies == nullptr ? error : "", timed_out, now, &out);
  live_busy_ = false;
  if (end.lost) LiveLost();
  // As ReaderNode::RunRound (NodeCore::NextRoundFirst): in a backlog, the readers that came
  // back while this round was out go to Redis before this round's answers are handed out.
  if (core_.NextRoundFirst(end) && !stopped_ && live_ready_ &&
      live_epoch_ == env_.redis().epoch()) {
    env_.world().probes().Hit("live_round_before_answers");
    SendRound();
  }
  Deliver(out);
  Schedule();
}

void SimReaderNode::LiveLost() {
  live_ready_ = false;
  live_epoch_ = 0;
  core_.OnLiveLost();
}

void SimReaderNode::Deliver(NodeCore::Output& out) {
  if (stopped_) return;
  // As ReaderNode::Deliver: answers, then redirections, then a failure. A hook may stop this
  // node (ReaderRedis does not from its hooks, but the process may die in between).
  if (!out.answers.empty()) hooks_.answered(out.answers);
  out.answers.clear();
  if ((!out.bounced_commands.empty() || !out.bounced_reads.empty()) && !stopped_) {
    RSC_CHECK(cluster_ != nullptr);  // one server never redirects
    hooks_.bounced(std::move(out.bounced_commands), std::move(out.bounced_reads));
  }
  out.bounced_commands.clear();
  out.bounced_reads.clear();
  if (out.failed && !stopped_ && hooks_.failed) hooks_.failed();
  out.failed = false;
}

}  // namespace rsc::sim
