#include "client/node_core.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "client/reader_wire.h"

// The CLIENT UNBLOCK races. The live connection carries a blocking read; the command connection
// sends the unblock. Two orders can go wrong, and neither may leave a reader waiting up to
// BLOCK or answered wrongly:
// * The unblock reaches Redis before the read does (the read is still in the socket): Redis
//   answers 0, nothing was unblocked. While that same read (live_gen_) is still in flight the
//   unblock is sent again after 1, 2, 4 ... ms (OnCommandReplies).
// * The unblock reaches Redis after its read returned and the next read started: it cuts that
//   next read instead. An unblock gets its args only while its read is in flight (TakeCommands,
//   just before the pipeline is written), so this takes a read returning in that round trip.
//   The cut read returns nil before its BLOCK ran out, which the driver tells from a timeout
//   by the clock (OnRoundReplies' `timed_out`); its readers are carried over into the
//   following read, not answered. So a stale unblock costs one extra XREADGROUP and answers
//   nobody.
// Whichever read an unblock hits, every reader gets exactly one answer: each read is answered
// (or carried over) once, from the list of readers it was sent with.

namespace rsc::client {
namespace {

using std::chrono::milliseconds;
using wire::Nil;

// A CLIENT UNBLOCK that came before its read reached the server is sent again after 1, 2,
// 4 ... ms, at most this far apart: the read is normally a moment behind.
constexpr milliseconds kUnblockRetryMax{100};
constexpr milliseconds kUnblockGrace{2};

// Polling (reader_node.h): the pause between empty poll rounds doubles from 1 ms up to
// kPollPauseMax, plus kPollPauseMax per further kPollStreamsPerStep streams polled (so a
// master with 300 idle shards is asked about 3,000 times a second, not 15,000), capped.
constexpr milliseconds kPollPauseMax{20};
constexpr size_t kPollStreamsPerStep = 64;
constexpr milliseconds kPollPauseCap{200};

const redis::Command kAsking{"ASKING"};

}  // namespace

NodeRead MakeNodeRead(uint64_t token, const ReaderCoreConfig& config, const ReaderCommand& command,
                      int slot, std::chrono::steady_clock::time_point now) {
  NodeRead read;
  read.token = token;
  read.stream = config.stream;
  read.group = config.group;
  read.consumer_name = config.consumer_name;
  read.slot = slot;
  read.count = command.count;
  read.deadline = now + milliseconds(std::max<TimeMs>(1, command.block_ms));
  if (!command.ids.empty()) {
    read.ack_args = {"XACK", config.stream, config.group};
    read.ack_args.insert(read.ack_args.end(), command.ids.begin(), command.ids.end());
  }
  read.check = command.check_foreign;
  return read;
}

NodeCommand MakeNodeCommand(uint64_t token, const ReaderCoreConfig& config,
                            const ReaderCommand& command) {
  NodeCommand cmd;
  cmd.token = token;
  cmd.kind = command.kind;
  cmd.key = config.stream;
  cmd.args = ReaderCommandArgs(config, command);
  return cmd;
}

bool NodeCore::Enqueue(std::vector<NodeRead> reads, TimePoint now) {
  if (reads.empty()) return false;
  live_queue_.insert(live_queue_.end(), std::make_move_iterator(reads.begin()),
                     std::make_move_iterator(reads.end()));
  arrived_ = true;
  // A reader came back while the others wait in a blocked read: cut that read short so this
  // one joins the next, instead of waiting up to BLOCK for its turn. Only once the read has
  // been out for kUnblockGrace: a read that finds entries returns by then on its own (a
  // backlog), and cutting it would cost a command per returning reader.
  if (live_busy_ && live_round_.blocking) return RequestUnblock(now, live_sent_at_ + kUnblockGrace);
  return false;
}

void NodeCore::Enqueue(NodeCommand command) {
  Queued q;
  q.type = Queued::Type::kCommand;
  q.command = std::move(command);
  command_queue_.push_back(std::move(q));
}

bool NodeCore::Cancel(uint64_t token, bool now) {
  for (auto it = live_queue_.begin(); it != live_queue_.end(); ++it) {
    if (it->token != token) continue;
    // Answered from the command connection's side: the caller must not get an answer
    // synchronously, and the live side may be inside a read.
    NodeRead read = std::move(*it);
    live_queue_.erase(it);
    AnswerUnsent(std::move(read), /*may_ack=*/!now);
    return false;
  }
  if (!live_busy_) return false;
  for (Bucket& bucket : live_round_.buckets) {
    for (NodeRead& read : bucket.reads) {
      if (read.token != token) continue;
      read.cancelled = true;
      if (!now) {
        // A poll round comes back within a round trip anyway. The unblock's time was checked
        // when the round was chosen; `now` does not matter without a not-before.
        if (live_round_.blocking) RequestUnblock(TimePoint::min());
        return false;
      }
      // One cut per round, and only of a round that is out (see the header).
      if (live_cut_) return false;
      live_cut_ = true;
      return live_sent_;
    }
  }
  return false;
}

bool NodeCore::Idle() const {
  return command_queue_.empty() && !unblock_retry_ && live_queue_.empty() && !live_busy_;
}

bool NodeCore::RequestUnblock(TimePoint now, std::optional<TimePoint> not_before) {
  // Without the live connection's id (CLIENT ID refused, say by an ACL) the read just runs
  // its course: later, never wrong.
  if (!live_busy_ || !live_round_.blocking || live_unblock_requested_ || !live_client_id_) {
    return false;
  }
  live_unblock_requested_ = true;
  Queued q;
  q.type = Queued::Type::kUnblock;
  q.gen = live_gen_;
  if (not_before && *not_before > now) {
    // Sent from the command connection at that time if the read is still out (as a retry is).
    unblock_retry_ = std::move(q);
    unblock_retry_at_ = *not_before;
  } else {
    command_queue_.push_back(std::move(q));
  }
  return true;
}

std::optional<NodeCore::TimePoint> NodeCore::CommandDue() const {
  if (!command_queue_.empty()) return TimePoint::min();
  if (unblock_retry_) return unblock_retry_at_;
  return std::nullopt;
}

std::vector<NodeCore::Queued> NodeCore::TakeCommands(TimePoint now) {
  std::vector<Queued> batch;
  if (unblock_retry_ && now >= unblock_retry_at_) {
    batch.push_back(std::move(*unblock_retry_));
    unblock_retry_.reset();
  }
  while (!command_queue_.empty() && batch.size() < kMaxPipeline) {
    batch.push_back(std::move(command_queue_.front()));
    command_queue_.pop_front();
  }
  // An unblock goes out only while the read it was asked for is in flight, with the live
  // connection's current id. It can still reach Redis after that read returned and hit the
  // next one: OnRoundReplies tells such an early return from a timeout.
  for (Queued& q : batch) {
    if (q.type != Queued::Type::kUnblock) continue;
    q.command.args.clear();
    if (live_busy_ && live_round_.blocking && live_gen_ == q.gen && live_client_id_) {
      q.command.args = {"CLIENT", "UNBLOCK", std::to_string(*live_client_id_), "TIMEOUT"};
    }
  }
  return batch;
}

void NodeCore::AnswerUnsent(const std::vector<Queued>& batch, Output* out) {
  for (const Queued& q : batch) {
    if (q.type != Queued::Type::kAnswerNil) continue;
    ReaderReply nil = Nil();
    if (q.acked) nil.count = *q.acked;
    if (!q.refused.empty()) nil = ReaderReply::Error(ReaderReply::Kind::kTransport, q.refused);
    out->answers.push_back({q.command.token, std::move(nil)});
  }
}

std::vector<const redis::Command*> NodeCore::CommandWire(const std::vector<Queued>& batch,
                                                         int64_t* commands, int64_t* unblocks) {
  std::vector<const redis::Command*> cmds;
  *commands = 0;
  *unblocks = 0;
  for (const Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil || q.command.args.empty()) continue;
    if (q.command.asking) cmds.push_back(&kAsking);
    cmds.push_back(&q.command.args);
    ++*(q.type == Queued::Type::kUnblock ? unblocks : commands);
  }
  return cmds;
}

void NodeCore::OnCommandsSent(int64_t commands, int64_t unblocks) {
  stats_.commands += commands;
  stats_.unblocks += unblocks;
}

void NodeCore::AnswerCommands(std::vector<Queued>& batch,
                              std::vector<std::optional<redis::Reply>>& replies,
                              const std::string& error, Output* out) const {
  size_t next = 0;
  auto take = [&]() -> std::optional<redis::Reply>* {
    return next < replies.size() ? &replies[next++] : nullptr;
  };
  for (Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil || q.command.args.empty()) continue;  // answered
    if (q.command.asking) (void)take();                                          // ASKING's +OK
    std::optional<redis::Reply>* slot = take();
    if (q.type != Queued::Type::kCommand) continue;
    redis::Reply* reply = slot != nullptr && slot->has_value() ? &**slot : nullptr;
    if (reply != nullptr && cluster_ && wire::IsRedirect(*reply)) {
      // A copy, not a move: OnCommandReplies walks this batch again and knows which entries
      // were sent (so which reply is whose) by their args; a moved-from entry would read as
      // unsent and shift the replies of every unblock after it. Redirections are rare.
      out->bounced_commands.push_back(q.command);
      out->bounced_commands.back().redirect = std::move(reply->str);
      continue;
    }
    ReaderCommand as;
    as.kind = q.command.kind;
    out->answers.push_back(
        {q.command.token, reply != nullptr
                              ? ParseReaderReply(as, *reply)
                              : ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
  }
}

void NodeCore::OnCommandReplies(std::vector<Queued>& batch,
                                const std::vector<std::optional<redis::Reply>>& replies,
                                const Output& out, TimePoint now) {
  stats_.redirects += static_cast<int64_t>(out.bounced_commands.size());
  size_t next = 0;
  for (Queued& q : batch) {
    if (q.type == Queued::Type::kAnswerNil || q.command.args.empty()) continue;
    if (q.command.asking) ++next;
    const std::optional<redis::Reply>* reply = next < replies.size() ? &replies[next] : nullptr;
    ++next;
    if (q.type != Queued::Type::kUnblock) continue;
    const bool received = reply != nullptr && reply->has_value();
    const bool unblocked = received && (*reply)->IsInteger() && (*reply)->integer == 1;
    const bool refused = received && (*reply)->IsError();
    if (unblocked || refused) continue;
    if (live_busy_ && live_round_.blocking && live_gen_ == q.gen) {
      const milliseconds wait =
          std::min(kUnblockRetryMax, milliseconds(int64_t{1} << std::min(q.attempt, 7)));
      unblock_retry_at_ = now + wait;
      ++q.attempt;
      unblock_retry_ = std::move(q);
    }
  }
}

milliseconds NodeCore::PollPauseMax() const {
  const auto steps = static_cast<int64_t>(live_queue_.size() / kPollStreamsPerStep);
  return std::min(kPollPauseCap, kPollPauseMax * (1 + steps));
}

std::optional<NodeCore::TimePoint> NodeCore::LiveDue() const {
  if (live_busy_ || live_queue_.empty()) return std::nullopt;
  if (poll_pause_.count() == 0 || arrived_) return TimePoint::min();
  // Polling and nothing came last round: wait, but not past a reader's deadline, and not once
  // a reader comes back (arrived_).
  TimePoint wake = poll_resume_at_;
  for (const NodeRead& r : live_queue_) wake = std::min(wake, r.deadline);
  return wake;
}

bool NodeCore::PrepareRound(TimePoint now, bool connected, const std::string& error, Output* out) {
  // A read whose block time ran out while it waited (behind another group's read, carried
  // over from a read cut short, or polled without entries) gets the timeout it asked for.
  for (auto it = live_queue_.begin(); it != live_queue_.end();) {
    if (it->deadline <= now) {
      if (it->ack_args.empty() && !it->acked) {
        out->answers.push_back({it->token, Nil()});
      } else {
        AnswerUnsent(std::move(*it), /*may_ack=*/false);
      }
      it = live_queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (!connected) {
    for (const NodeRead& r : live_queue_) {
      out->answers.push_back({r.token, ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
    }
    live_queue_.clear();
    out->failed = true;
    return false;
  }
  if (live_queue_.empty() || live_busy_ ||
      (poll_pause_.count() > 0 && !arrived_ && now < poll_resume_at_)) {
    return false;
  }
  ChooseRound(now);
  return live_busy_;
}

void NodeCore::ChooseRound(TimePoint now) {
  live_round_ = LiveRound{};
  arrived_ = false;
  bool one_bucket = true;
  if (cluster_) {
    const NodeRead& first = live_queue_.front();
    for (const NodeRead& r : live_queue_) {
      if (r.asking || r.slot != first.slot || r.group != first.group ||
          r.consumer_name != first.consumer_name) {
        one_bucket = false;
        break;
      }
    }
  }
  if (one_bucket) {
    ChooseBlocking(now);
  } else {
    ChoosePolls();
  }
  if (live_round_.buckets.empty()) return;
  live_busy_ = true;
  live_sent_ = false;
  live_sent_at_ = now;
  ++live_gen_;
  live_unblock_requested_ = false;
}

void NodeCore::ChooseBlocking(TimePoint now) {
  // One (group, consumer name) per command; another pair than the last one goes first, so
  // two pairs take turns.
  size_t first = 0;
  for (size_t i = 0; i < live_queue_.size(); ++i) {
    if (std::tie(live_queue_[i].group, live_queue_[i].consumer_name) !=
        std::tie(last_pair_.first, last_pair_.second)) {
      first = i;
      break;
    }
  }
  last_pair_ = {live_queue_[first].group, live_queue_[first].consumer_name};
  Bucket bucket;
  std::set<std::string> streams;
  int count = 0;
  for (auto it = live_queue_.begin() + static_cast<ptrdiff_t>(first); it != live_queue_.end();) {
    // Redis would answer a stream named twice twice: the second read waits its turn.
    if (it->group != last_pair_.first || it->consumer_name != last_pair_.second ||
        !streams.insert(it->stream).second) {
      ++it;
      continue;
    }
    count = count == 0 ? it->count : std::min(count, it->count);
    bucket.reads.push_back(std::move(*it));
    it = live_queue_.erase(it);
  }
  // No reader waits past its own block time, not even one left in the queue.
  TimePoint until = bucket.reads.front().deadline;
  for (const NodeRead& r : bucket.reads) until = std::min(until, r.deadline);
  for (const NodeRead& r : live_queue_) until = std::min(until, r.deadline);
  const milliseconds block =
      std::max(milliseconds(1), std::chrono::ceil<milliseconds>(until - now));
  bucket.count = std::max(1, count);
  bucket.args = {"XREADGROUP",     "GROUP",
                 last_pair_.first, last_pair_.second,
                 "COUNT",          std::to_string(std::max(1, count)),
                 "BLOCK",          std::to_string(block.count()),
                 "STREAMS"};
  for (const NodeRead& r : bucket.reads) bucket.args.push_back(r.stream);
  bucket.args.insert(bucket.args.end(), bucket.reads.size(), ">");
  AddPipelined(bucket);
  ++stats_.live_reads;
  stats_.live_read_streams += static_cast<int64_t>(bucket.reads.size());
  live_round_.blocking = true;
  live_round_.block = block;
  live_round_.buckets.push_back(std::move(bucket));
}

void NodeCore::ChoosePolls() {
  // One non-blocking read per (group, consumer name, slot); a read after ASKING alone.
  std::map<std::tuple<std::string, std::string, int>, size_t> index;
  std::set<std::pair<size_t, std::string>> named;  // (bucket, stream)
  for (auto it = live_queue_.begin(); it != live_queue_.end();) {
    size_t b = 0;
    if (it->asking) {
      b = live_round_.buckets.size();
      live_round_.buckets.emplace_back().asking = true;
    } else {
      auto [pos, added] =
          index.try_emplace({it->group, it->consumer_name, it->slot}, live_round_.buckets.size());
      if (added) live_round_.buckets.emplace_back();
      b = pos->second;
      // Redis would answer a stream named twice twice: the second read waits its turn.
      if (!named.emplace(b, it->stream).second) {
        ++it;
        continue;
      }
    }
    live_round_.buckets[b].reads.push_back(std::move(*it));
    it = live_queue_.erase(it);
  }
  for (Bucket& bucket : live_round_.buckets) {
    int count = bucket.reads.front().count;
    for (const NodeRead& r : bucket.reads) count = std::min(count, r.count);
    bucket.count = std::max(1, count);
    bucket.args = {"XREADGROUP",
                   "GROUP",
                   bucket.reads.front().group,
                   bucket.reads.front().consumer_name,
                   "COUNT",
                   std::to_string(std::max(1, count)),
                   "STREAMS"};
    for (const NodeRead& r : bucket.reads) bucket.args.push_back(r.stream);
    bucket.args.insert(bucket.args.end(), bucket.reads.size(), ">");
    AddPipelined(bucket);
    ++stats_.polls;
  }
  live_round_.blocking = false;
}

void NodeCore::AddPipelined(Bucket& bucket) {
  for (size_t i = 0; i < bucket.reads.size(); ++i) {
    NodeRead& read = bucket.reads[i];
    if (!read.ack_args.empty()) {
      bucket.acks.push_back(std::move(read.ack_args));
      bucket.acks_of.push_back(i);
      read.ack_args.clear();
    }
    if (read.check) {
      bucket.checks.push_back({"XPENDING", read.stream, read.group, "-", "+", "1"});
      bucket.checks_of.push_back(i);
    }
  }
}

void NodeCore::AnswerUnsent(NodeRead read, bool may_ack) {
  // A read taken out of the live queue unsent: answered kNil from the command connection's
  // side, with the count of an XACK an earlier round sent for it. An XACK it carries that
  // was not sent yet goes alone when `may_ack` (a drain: the lease still runs), and its
  // reply is the read's answer (no entries), so the batch it settles is not handled twice.
  Queued q;
  q.command.token = read.token;
  if (read.ack_args.empty()) {
    q.type = Queued::Type::kAnswerNil;
    q.acked = read.acked;
  } else if (!may_ack) {
    // C4: an abandoned shard's lease may have ended, and a read whose block time ran out
    // may have been bounded by it: its XACK is not sent; the batch stays pending and is
    // handled again by whoever reads the shard next.
    q.type = Queued::Type::kAnswerNil;
    q.refused =
        "the read carrying the batch's XACK was not sent (abandoned, or its block "
        "time ran out first): the XACK was dropped";
  } else {
    q.type = Queued::Type::kCommand;
    q.command.kind = ReaderCommandKind::kAck;
    q.command.key = read.stream;
    q.command.args = std::move(read.ack_args);
  }
  command_queue_.push_back(std::move(q));
}

std::vector<const redis::Command*> NodeCore::RoundWire(const LiveRound& round, bool* writes) {
  std::vector<const redis::Command*> cmds;
  *writes = false;
  for (const Bucket& bucket : round.buckets) {
    for (const redis::Command& ack : bucket.acks) cmds.push_back(&ack);
    *writes = *writes || !bucket.acks.empty();
    if (bucket.asking) cmds.push_back(&kAsking);
    cmds.push_back(&bucket.args);
    for (const redis::Command& check : bucket.checks) cmds.push_back(&check);
  }
  return cmds;
}

void NodeCore::ApplyAcks(Bucket& bucket, BucketReplies& replies, const std::string& error,
                         Output* out) const {
  if (bucket.acks_of.empty()) return;
  std::vector<bool> failed(bucket.reads.size(), false);
  for (size_t k = 0; k < bucket.acks_of.size(); ++k) {
    NodeRead& read = bucket.reads[bucket.acks_of[k]];
    std::optional<redis::Reply>& reply = replies.acks[k];
    if (reply && reply->IsInteger()) {
      read.acked = reply->integer;
      continue;
    }
    // The XACK failed: the batch stays pending, and so do the entries this read brought.
    ReaderCommand as;
    as.kind = ReaderCommandKind::kAck;
    out->answers.push_back(
        {read.token, reply ? ParseReaderReply(as, *reply)
                           : ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
    failed[bucket.acks_of[k]] = true;
  }
  // Those readers are answered: out of the bucket (and its checks' indexes with them).
  std::vector<size_t> new_index(bucket.reads.size());
  std::vector<NodeRead> kept;
  for (size_t i = 0; i < bucket.reads.size(); ++i) {
    new_index[i] = kept.size();
    if (!failed[i]) kept.push_back(std::move(bucket.reads[i]));
  }
  std::vector<size_t> checks_of;
  std::vector<std::optional<redis::Reply>> checks;
  for (size_t k = 0; k < bucket.checks_of.size(); ++k) {
    if (failed[bucket.checks_of[k]]) continue;
    checks_of.push_back(new_index[bucket.checks_of[k]]);
    checks.push_back(std::move(replies.checks[k]));
  }
  bucket.reads = std::move(kept);
  bucket.checks_of = std::move(checks_of);
  replies.checks = std::move(checks);
}

void NodeCore::ApplyChecks(const Bucket& bucket, BucketReplies& replies,
                           std::vector<ReaderAnswer>* answers, size_t first) {
  std::unordered_map<uint64_t, const NodeRead*> acked;
  std::unordered_map<uint64_t, std::optional<redis::Reply>*> checks;
  for (const NodeRead& read : bucket.reads) {
    if (read.acked) acked.emplace(read.token, &read);
  }
  for (size_t k = 0; k < bucket.checks_of.size(); ++k) {
    checks.emplace(bucket.reads[bucket.checks_of[k]].token, &replies.checks[k]);
  }
  if (acked.empty() && checks.empty()) return;
  for (size_t i = first; i < answers->size(); ++i) {
    ReaderAnswer& a = (*answers)[i];
    if (!a.reply.ok()) continue;  // the core drops the entries; a count would not be read
    if (auto it = acked.find(a.token); it != acked.end()) a.reply.count = *it->second->acked;
    auto it = checks.find(a.token);
    if (it == checks.end()) continue;
    std::optional<redis::Reply>& reply = *it->second;
    ReaderCommand as;
    as.kind = ReaderCommandKind::kCheckForeign;
    if (!reply) {  // the connection failed after the read's reply
      a.reply = ReaderReply::Error(ReaderReply::Kind::kTransport, "no reply to the check");
      continue;
    }
    ReaderReply check = ParseReaderReply(as, *reply);
    if (!check.ok()) {  // the entries stay pending: read again after the setup
      a.reply = std::move(check);
      continue;
    }
    a.reply.lowest_owner = std::move(check.lowest_owner);
    a.reply.lowest_id = std::move(check.lowest_id);
    a.reply.checked = true;
  }
}

bool NodeCore::OnRoundSent() {
  if (!live_busy_) return false;
  live_sent_ = true;
  return live_cut_;
}

NodeCore::RoundEnd NodeCore::OnRoundReplies(std::vector<BucketReplies>& replies,
                                            const std::string& error, bool timed_out, TimePoint now,
                                            Output* out) {
  const bool transport_failed = !error.empty();
  LiveRound round = std::move(live_round_);
  live_round_ = LiveRound{};
  live_busy_ = false;
  live_sent_ = false;
  if (transport_failed) live_client_id_.reset();  // reconnected for the next read
  std::vector<NodeRead> carry;
  bool found = false;
  bool full = false;
  const size_t bounced_before = out->bounced_reads.size();
  for (size_t i = 0; i < round.buckets.size(); ++i) {
    ApplyAcks(round.buckets[i], replies[i], error, out);
    const size_t first = out->answers.size();
    redis::Reply cut;  // nil
    redis::Reply* reply = replies[i].read ? &*replies[i].read : nullptr;
    bool as_timed_out = timed_out;
    if (!reply && live_cut_) {
      // Our own cut: answered like an unblocked read (the cancelled readers kNil, the
      // others carried over), not as a failure of Redis.
      reply = &cut;
      as_timed_out = false;
    }
    if (round.blocking) {
      AnswerBlocking(round.buckets[i].reads, reply, error, as_timed_out, now, out, &carry);
    } else {
      AnswerPoll(round.buckets[i].reads, reply, error, now, out, &carry, &found);
    }
    ApplyChecks(round.buckets[i], replies[i], &out->answers, first);
    for (size_t a = first; a < out->answers.size(); ++a) {
      if (static_cast<int>(out->answers[a].reply.entries.size()) >= round.buckets[i].count) {
        full = true;
      }
    }
  }
  stats_.redirects += static_cast<int64_t>(out->bounced_reads.size() - bounced_before);
  // Carried-over readers go first in the next round, in their order.
  live_queue_.insert(live_queue_.begin(), std::make_move_iterator(carry.begin()),
                     std::make_move_iterator(carry.end()));
  if (round.blocking || found || transport_failed) {
    poll_pause_ = milliseconds(0);
  } else {
    poll_pause_ = std::min(PollPauseMax(), std::max(milliseconds(1), poll_pause_ * 2));
    poll_resume_at_ = now + poll_pause_;
  }
  RoundEnd end;
  end.lost = transport_failed;
  end.full = full && !transport_failed;
  if (!transport_failed && live_cut_) {
    // The cut came after the replies: the socket is shut down all the same.
    end.disconnect = true;
    end.lost = true;
    live_client_id_.reset();
  }
  if (transport_failed && !live_cut_) out->failed = true;
  live_cut_ = false;
  return end;
}

void NodeCore::AnswerReadError(std::vector<NodeRead>& reads, redis::Reply& reply, Output* out) {
  if (cluster_ && wire::IsRedirect(reply)) {
    // A multi-stream read shares one slot, so the redirection holds for all of them.
    for (NodeRead& read : reads) {
      read.redirect = reply.str;
      read.asking = false;
      out->bounced_reads.push_back(std::move(read));
    }
    return;
  }
  // NOGROUP names the key: "NOGROUP No such key 's' or consumer group 'G' in XREADGROUP
  // with GROUP option". Only that reader must recreate its group.
  const std::string text = wire::ClusterRefusal(reply).value_or(reply.str);
  const NodeRead* named = nullptr;
  int matches = 0;
  for (const NodeRead& read : reads) {
    if (text.find("key '" + read.stream + "'") != std::string::npos) {
      named = &read;
      ++matches;
    }
  }
  for (const NodeRead& read : reads) {
    if (matches != 1 || &read == named) {
      out->answers.push_back({read.token, ReaderReply::Error(ReaderReply::Kind::kError, text)});
    } else {
      out->answers.push_back({read.token, Nil()});
    }
  }
}

void NodeCore::AnswerBlocking(std::vector<NodeRead>& reads, redis::Reply* reply,
                              const std::string& error, bool timed_out, TimePoint now, Output* out,
                              std::vector<NodeRead>* carry) {
  auto all = [&](const ReaderReply& r) {
    for (const NodeRead& read : reads) out->answers.push_back({read.token, r});
  };
  ReaderCommand as;
  as.kind = ReaderCommandKind::kReadLive;
  if (reply == nullptr) {
    all(ReaderReply::Error(ReaderReply::Kind::kTransport, error));
    return;
  }
  if (reply->IsError()) {
    AnswerReadError(reads, *reply, out);
    return;
  }
  if (reply->IsNil()) {
    if (timed_out) {
      all(Nil());
      return;
    }
    // Cut short by CLIENT UNBLOCK, ours for this read or a late one meant for the previous
    // read. Readers that did not ask to stop go into the next read with the rest of their
    // block time, so a cut never answers (and brings back) readers who are still waiting.
    for (NodeRead& read : reads) {
      if (read.cancelled || read.deadline <= now) {
        out->answers.push_back({read.token, Nil()});
      } else {
        read.cancelled = false;
        carry->push_back(std::move(read));
      }
    }
    return;
  }
  if (!reply->IsArray() ||
      !std::all_of(reply->elements.begin(), reply->elements.end(), wire::IsStreamReply)) {
    all(wire::Unexpected(as, *reply));
    return;
  }
  std::unordered_map<std::string_view, redis::Reply*> by_stream;
  for (redis::Reply& s : reply->elements) by_stream.emplace(s.elements[0].str, &s.elements[1]);
  for (const NodeRead& read : reads) {
    ReaderReply r = Nil();
    if (auto it = by_stream.find(read.stream); it != by_stream.end()) {
      r.kind = ReaderReply::Kind::kOk;
      r.entries = wire::ParseEntries(*it->second);
    }
    out->answers.push_back({read.token, std::move(r)});
  }
}

void NodeCore::AnswerPoll(std::vector<NodeRead>& reads, redis::Reply* reply,
                          const std::string& error, TimePoint now, Output* out,
                          std::vector<NodeRead>* carry, bool* found) {
  ReaderCommand as;
  as.kind = ReaderCommandKind::kReadLive;
  if (reply == nullptr) {
    for (const NodeRead& read : reads) {
      out->answers.push_back(
          {read.token, ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
    }
    return;
  }
  if (reply->IsError()) {
    AnswerReadError(reads, *reply, out);
    return;
  }
  if (!reply->IsNil() &&
      (!reply->IsArray() ||
       !std::all_of(reply->elements.begin(), reply->elements.end(), wire::IsStreamReply))) {
    for (const NodeRead& read : reads) {
      out->answers.push_back({read.token, wire::Unexpected(as, *reply)});
    }
    return;
  }
  std::unordered_map<std::string_view, redis::Reply*> by_stream;
  if (reply->IsArray()) {
    for (redis::Reply& s : reply->elements) {
      if (!s.elements[1].elements.empty()) by_stream.emplace(s.elements[0].str, &s.elements[1]);
    }
  }
  // Readers without entries are polled again, unless they asked to stop or their block time
  // is up.
  for (NodeRead& read : reads) {
    if (auto it = by_stream.find(read.stream); it != by_stream.end()) {
      ReaderReply r;
      r.kind = ReaderReply::Kind::kOk;
      r.entries = wire::ParseEntries(*it->second);
      out->answers.push_back({read.token, std::move(r)});
      *found = true;
    } else if (read.cancelled || read.deadline <= now) {
      out->answers.push_back({read.token, Nil()});
    } else {
      // Polled again as it was, after ASKING again if so: the slot is still migrating.
      carry->push_back(std::move(read));
    }
  }
}

}  // namespace rsc::client
