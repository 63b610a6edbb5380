#include "sim/streams.h"

#include <fmt/format.h>

#include <charconv>

namespace rsc::sim {

namespace {
constexpr const char* kMaxIdText = "18446744073709551615-18446744073709551615";
}  // namespace

std::string StreamId::str() const {
  if (is_max()) return kMaxIdText;
  return fmt::format("{}-{}", ms, seq);
}

std::optional<StreamId> StreamId::Parse(const std::string& s) {
  if (s == kMaxIdText) return Max();
  const auto dash = s.find('-');
  if (dash == std::string::npos) return std::nullopt;
  StreamId id;
  auto r1 = std::from_chars(s.data(), s.data() + dash, id.ms);
  auto r2 = std::from_chars(s.data() + dash + 1, s.data() + s.size(), id.seq);
  if (r1.ec != std::errc() || r2.ec != std::errc()) return std::nullopt;
  return id;
}

namespace {

// Redis's words, to the letter (the contract test compares them); XREADGROUP adds `what`.
StreamReply NoGroup(const std::string& stream, const std::string& group, const char* what = "") {
  StreamReply r;
  r.error = fmt::format("NOGROUP No such key '{}' or consumer group '{}'{}", stream, group, what);
  return r;
}
constexpr const char* kInXReadGroup = " in XREADGROUP with GROUP option";

GroupState* FindGroup(Streams& s, const std::string& stream, const std::string& group) {
  auto it = s.find(stream);
  if (it == s.end()) return nullptr;
  auto g = it->second.groups.find(group);
  return g == it->second.groups.end() ? nullptr : &g->second;
}

}  // namespace

StreamOp XAdd(Streams& s, const std::string& stream, TimeMs now, const StreamEntry& fields,
              bool nomkstream) {
  if (nomkstream && !s.contains(stream)) {
    StreamOp nil;
    nil.reply.nil = true;
    return nil;
  }
  StreamState& st = s[stream];
  if (st.last_id.is_max()) {
    StreamOp refused;
    refused.reply.error = kExhausted;
    return refused;
  }
  StreamId id{now, 0};
  if (!(st.last_id < id)) id = StreamId{st.last_id.ms, st.last_id.seq + 1};
  StreamEntry e = fields;
  e.id = id;
  st.entries[id] = e;
  st.last_id = id;
  StreamOp op;
  op.reply.added = id;
  op.effect = [stream, e](Streams& r) {
    StreamState& rs = r[stream];
    rs.entries[e.id] = e;
    rs.last_id = std::max(rs.last_id, e.id);
  };
  return op;
}

StreamOp XAddSeal(Streams& s, const std::string& stream, int32_t generation,
                  const std::string& successor) {
  StreamState& st = s[stream];
  StreamOp op;
  if (st.last_id.is_max()) return op;  // sealed already: nothing written
  StreamEntry e;
  e.id = StreamId::Max();
  e.seal = generation;
  e.successor = successor;
  st.entries[e.id] = e;
  st.last_id = e.id;
  op.reply.added = e.id;
  op.reply.count = 1;
  op.effect = [stream, e](Streams& r) {
    StreamState& rs = r[stream];
    rs.entries[e.id] = e;
    rs.last_id = e.id;
  };
  return op;
}

StreamTop TopOf(const Streams& s, const std::string& stream) {
  StreamTop top;
  auto it = s.find(stream);
  if (it == s.end()) return top;
  const StreamState& st = it->second;
  top.exists = true;
  top.length = static_cast<int64_t>(st.entries.size());
  top.sealed = st.last_id.is_max();
  if (!st.entries.empty() && st.entries.rbegin()->first.is_max()) {
    top.seal_generation = st.entries.rbegin()->second.seal;
    top.successor = st.entries.rbegin()->second.successor;
  }
  return top;
}

StreamOp TrimSealed(Streams& s, const std::string& stream) {
  StreamOp op;
  StreamState& st = s[stream];  // a missing key becomes a tombstone too
  if (!st.entries.empty() && !st.entries.rbegin()->first.is_max()) return op;  // kept
  op.reply.count = 1;
  if (st.entries.empty() && st.last_id.is_max()) return op;  // a tombstone already
  st.entries.clear();
  st.last_id = StreamId::Max();
  op.effect = [stream](Streams& r) {
    StreamState& rs = r[stream];
    rs.entries.clear();
    rs.last_id = StreamId::Max();
  };
  return op;
}

StreamOp XInfoGroup(Streams& s, const std::string& stream, const std::string& group) {
  StreamOp op;
  GroupState* g = FindGroup(s, stream, group);
  if (!g) {
    op.reply = NoGroup(stream, group);
    return op;
  }
  op.reply.cursor = g->last_delivered;
  op.reply.count = static_cast<int64_t>(g->pel.size());
  return op;
}

StreamOp XGroupCreate(Streams& s, const std::string& stream, const std::string& group,
                      bool mkstream) {
  StreamOp op;
  if (!mkstream && !s.count(stream)) {
    op.reply.error =
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
        "want to use the MKSTREAM option to create an empty stream automatically.";
    return op;
  }
  StreamState& st = s[stream];
  if (st.groups.count(group)) {
    op.reply.error = "BUSYGROUP Consumer Group name already exists";
    // MKSTREAM may still have created the (empty) stream: replicate that.
    op.effect = [stream](Streams& r) { (void)r[stream]; };
    return op;
  }
  st.groups[group] = GroupState{};
  op.effect = [stream, group](Streams& r) {
    StreamState& rs = r[stream];
    if (!rs.groups.count(group)) rs.groups[group] = GroupState{};
  };
  return op;
}

StreamOp XAutoClaim(Streams& s, const std::string& stream, const std::string& group,
                    const std::string& consumer, StreamId cursor, int count) {
  StreamOp op;
  GroupState* g = FindGroup(s, stream, group);
  if (!g) {
    op.reply = NoGroup(stream, group);
    return op;
  }
  const StreamState& st = s[stream];
  // Redis 7.0 (xautoclaimCommand): a pending entry whose stream entry was deleted is not
  // claimed but dropped from the pending list and listed apart — and it counts towards
  // COUNT like a claimed one: COUNT bounds the entries looked at, and the cursor is the
  // next one (contract-tested; the 10 × COUNT attempts bound only matters with a min-idle
  // time, which we never give).
  auto it = g->pel.lower_bound(cursor);
  std::vector<StreamId> claimed;
  std::vector<StreamId> deleted;
  for (int n = 0; n < count && it != g->pel.end(); ++n) {
    if (!st.entries.count(it->first)) {
      deleted.push_back(it->first);
      it = g->pel.erase(it);
      continue;
    }
    it->second.consumer = consumer;
    claimed.push_back(it->first);
    ++it;
  }
  op.reply.cursor = it == g->pel.end() ? StreamId{} : it->first;
  op.reply.ids = claimed;
  op.reply.deleted = deleted;
  if (!claimed.empty() || !deleted.empty()) {
    op.effect = [stream, group, consumer, claimed, deleted](Streams& r) {
      GroupState* rg = FindGroup(r, stream, group);
      if (!rg) return;
      for (const StreamId& id : claimed) {
        auto p = rg->pel.find(id);
        if (p != rg->pel.end()) p->second.consumer = consumer;
      }
      for (const StreamId& id : deleted) rg->pel.erase(id);
    };
  }
  return op;
}

StreamOp XReadGroupPending(Streams& s, const std::string& stream, const std::string& group,
                           const std::string& consumer, StreamId after, int count) {
  StreamOp op;
  GroupState* g = FindGroup(s, stream, group);
  if (!g) {
    op.reply = NoGroup(stream, group, kInXReadGroup);
    return op;
  }
  const StreamState& st = s[stream];
  std::vector<StreamId> read;
  for (auto it = g->pel.upper_bound(after);
       it != g->pel.end() && static_cast<int>(op.reply.entries.size()) < count; ++it) {
    if (it->second.consumer != consumer) continue;
    auto e = st.entries.find(it->first);
    StreamEntry entry;
    entry.id = it->first;
    if (e != st.entries.end()) {
      entry = e->second;
      ++it->second.deliveries;
      read.push_back(it->first);
    }
    // else: deleted while pending. Redis 7 answers [id, nil] and leaves its delivery count
    // alone (t_stream.c streamReplyWithRangeFromConsumerPEL; contract-tested).
    op.reply.entries.push_back(entry);
  }
  if (!read.empty()) {
    op.effect = [stream, group, read](Streams& r) {
      GroupState* rg = FindGroup(r, stream, group);
      if (!rg) return;
      for (const StreamId& id : read) {
        auto p = rg->pel.find(id);
        if (p != rg->pel.end()) ++p->second.deliveries;
      }
    };
  }
  return op;
}

StreamOp XReadGroupNew(Streams& s, const std::string& stream, const std::string& group,
                       const std::string& consumer, int count) {
  StreamOp op;
  GroupState* g = FindGroup(s, stream, group);
  if (!g) {
    op.reply = NoGroup(stream, group, kInXReadGroup);
    return op;
  }
  const StreamState& st = s[stream];
  std::vector<StreamId> read;
  for (auto it = st.entries.upper_bound(g->last_delivered);
       it != st.entries.end() && static_cast<int>(read.size()) < count; ++it) {
    g->pel[it->first] = PendingInfo{consumer, 1};
    g->last_delivered = it->first;
    read.push_back(it->first);
    op.reply.entries.push_back(it->second);
  }
  if (!read.empty()) {
    op.effect = [stream, group, consumer, read](Streams& r) {
      GroupState* rg = FindGroup(r, stream, group);
      if (!rg) return;
      for (const StreamId& id : read) rg->pel[id] = PendingInfo{consumer, 1};
      rg->last_delivered = std::max(rg->last_delivered, read.back());
    };
  }
  return op;
}

StreamOp XAck(Streams& s, const std::string& stream, const std::string& group,
              const std::vector<StreamId>& ids) {
  StreamOp op;
  GroupState* g = FindGroup(s, stream, group);
  // Unlike the reads, XACK on a missing stream or group is no error in Redis: there is
  // nothing to acknowledge, so it answers 0 (t_stream.c xackCommand; contract-tested).
  if (!g) return op;
  for (const StreamId& id : ids) op.reply.count += static_cast<int64_t>(g->pel.erase(id));
  if (op.reply.count > 0) {
    op.effect = [stream, group, ids](Streams& r) {
      GroupState* rg = FindGroup(r, stream, group);
      if (!rg) return;
      for (const StreamId& id : ids) rg->pel.erase(id);
    };
  }
  return op;
}

StreamOp XPending(Streams& s, const std::string& stream, const std::string& group, int count) {
  StreamOp op;
  GroupState* g = FindGroup(s, stream, group);
  if (!g) {
    op.reply = NoGroup(stream, group);
    return op;
  }
  for (auto it = g->pel.begin();
       it != g->pel.end() && static_cast<int>(op.reply.pending.size()) < count; ++it) {
    op.reply.pending.push_back(PendingRow{it->first, it->second.consumer, it->second.deliveries});
  }
  return op;
}

}  // namespace rsc::sim
