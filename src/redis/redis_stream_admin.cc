#include "redis/redis_stream_admin.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

namespace rsc::redis {

namespace {

Error Failed(std::string_view what, const std::string& key, const std::string& reply) {
  return MakeError(ErrorCode::kRedisUnavailable, fmt::format("{} on {}: {}", what, key, reply));
}

// Redis refusing a seal because the stream's last ID is already the maximum: Redis 7 says
// "exhausted the last possible ID", older ones "equal or smaller than the target stream top
// item".
bool AlreadyAtTheMaximumId(const Reply& r) {
  return r.str.find("last possible ID") != std::string::npos ||
         r.str.find("equal or smaller") != std::string::npos;
}

}  // namespace

Status RedisStreamAdmin::CreateConsumerGroup(const std::string& key, const std::string& group) {
  RSC_ASSIGN_OR_RETURN(
      Reply r,
      executor_.Run(key, {"XGROUP", "CREATE", key, group, "0", "MKSTREAM"}, CommandKind::kWrite));
  if (r.IsError() && !r.ErrorIs("BUSYGROUP")) return Failed("XGROUP CREATE", key, r.str);
  return OkStatus();
}

Result<bool> RedisStreamAdmin::Seal(const std::string& key, int32_t generation,
                                    const std::string& successor) {
  // The seal is the stream's last possible entry: Redis itself refuses a second one (and
  // every later `XADD *`), so "already sealed" is that refusal. A stream whose top entry
  // is anything else takes it. MKSTREAM is implied: a lost parent key comes back sealed.
  Command seal = {"XADD", key, kSealId, "rsc-seal", std::to_string(generation)};
  if (!successor.empty()) {
    seal.push_back("rsc-next");  // RS6: how a layout found behind this seal rolls forward
    seal.push_back(successor);
  }
  // RS2: a replica acknowledges the seal before the generation after it is activated, so a
  // failover right after the activation does not lose it. Not acknowledged in time: an
  // error, and the tick activates nothing; the next tick finds the seal written and does not
  // wait again (its connection wrote nothing then), and the re-checks of every tick re-seal
  // a seal a failover lost (parent_resealed).
  RSC_ASSIGN_OR_RETURN(AcknowledgedReply w, RunAcknowledged(executor_, key, seal, seal_wait_));
  const Reply& r = w.reply;
  if (!r.IsError() && !w.acknowledged) {
    return MakeError(ErrorCode::kRedisUnavailable,
                     fmt::format("seal of {} written, but none of its {} replicas "
                                 "acknowledged it within {} ms (WAIT): the next generation "
                                 "is not activated on it yet (RS2)",
                                 key, w.replicas, seal_wait_.count()));
  }
  if (!r.IsError()) return true;
  if (AlreadyAtTheMaximumId(r)) return false;
  return Failed("XADD seal", key, r.str);
}

namespace {

// Consumer group `group` in an XINFO GROUPS reply; nullopt when it is not listed.
struct GroupInfo {
  std::string last_delivered_id;
  int64_t pending = 0;
  std::optional<int64_t> lag;
};
Result<std::optional<GroupInfo>> FindGroup(const Reply& r, const std::string& key,
                                           const std::string& group) {
  if (!r.IsArray()) return Failed("XINFO GROUPS", key, "unexpected reply type");
  for (const Reply& g : r.elements) {
    // Each group is a flat list of field, value pairs (RESP2).
    std::string name;
    GroupInfo info;
    int64_t pending = -1;
    for (size_t i = 0; i + 1 < g.elements.size(); i += 2) {
      const std::string& f = g.elements[i].str;
      const Reply& v = g.elements[i + 1];
      if (f == "name") name = v.str;
      if (f == "last-delivered-id") info.last_delivered_id = v.str;
      if (f == "pending") pending = v.integer;
      if (f == "lag" && v.IsInteger()) info.lag = v.integer;
    }
    if (name != group) continue;
    if (pending < 0) return Failed("XINFO GROUPS", key, "group entry without pending");
    info.pending = pending;
    return std::optional<GroupInfo>(std::move(info));
  }
  return std::optional<GroupInfo>();
}

bool NoSuchKey(const Reply& r) { return r.str.find("no such key") != std::string::npos; }

Result<GroupProgress> ProgressFrom(const Reply& r, const std::string& key,
                                   const std::string& group) {
  GroupProgress p;
  if (r.IsError()) {
    if (NoSuchKey(r)) return p;
    return Failed("XINFO GROUPS", key, r.str);
  }
  RSC_ASSIGN_OR_RETURN(std::optional<GroupInfo> g, FindGroup(r, key, group));
  if (!g) return p;
  p.exists = true;
  p.last_delivered_id = g->last_delivered_id;
  p.pending = g->pending;
  return p;
}

}  // namespace

Result<GroupProgress> RedisStreamAdmin::Progress(const std::string& key, const std::string& group) {
  RSC_ASSIGN_OR_RETURN(Reply r, executor_.Run(key, {"XINFO", "GROUPS", key}, CommandKind::kRead));
  return ProgressFrom(r, key, group);
}

namespace {

// `XINFO <what> <key>` for every key, pipelined per node, each reply parsed by `parse`
// (reply, key) in its place; a key whose command failed is that error.
template <class T, class Parse>
std::vector<Result<T>> XInfoEach(Executor& executor, const char* what,
                                 const std::vector<std::string>& keys, Parse parse) {
  std::vector<KeyedCommand> cmds;
  cmds.reserve(keys.size());
  for (const std::string& key : keys) cmds.push_back({key, {"XINFO", what, key}});
  std::vector<Result<Reply>> replies = executor.RunBatch(cmds, CommandKind::kRead);
  std::vector<Result<T>> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!replies[i].ok()) {
      out.push_back(replies[i].error());
    } else {
      out.push_back(parse(*replies[i], keys[i]));
    }
  }
  return out;
}

}  // namespace

std::vector<Result<GroupProgress>> RedisStreamAdmin::Progresses(
    const std::vector<std::string>& keys, const std::string& group) {
  return XInfoEach<GroupProgress>(
      executor_, "GROUPS", keys,
      [&](const Reply& r, const std::string& key) { return ProgressFrom(r, key, group); });
}

std::vector<Result<ShardBacklog>> RedisStreamAdmin::Backlogs(const std::vector<std::string>& keys,
                                                             const std::string& group) {
  std::vector<KeyedCommand> cmds;
  cmds.reserve(2 * keys.size());
  for (const std::string& key : keys) {
    cmds.push_back({key, {"XINFO", "GROUPS", key}});
    cmds.push_back({key, {"XPENDING", key, group, "-", "+", "1"}});
  }
  std::vector<Result<Reply>> replies = executor_.RunBatch(cmds, CommandKind::kRead);
  std::vector<Result<ShardBacklog>> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back([&]() -> Result<ShardBacklog> {
      RSC_ASSIGN_OR_RETURN(Reply info, std::move(replies[2 * i]));
      ShardBacklog b;
      if (info.IsError()) {
        if (NoSuchKey(info)) return b;
        return Failed("XINFO GROUPS", keys[i], info.str);
      }
      RSC_ASSIGN_OR_RETURN(std::optional<GroupInfo> g, FindGroup(info, keys[i], group));
      if (!g) return b;
      b.exists = true;
      b.lag = g->lag;
      b.pending = g->pending;
      RSC_ASSIGN_OR_RETURN(Reply oldest, std::move(replies[2 * i + 1]));
      // [[id, consumer, idle ms, deliveries]] or [] (nothing pending).
      if (oldest.IsArray() && !oldest.elements.empty() && oldest.elements[0].elements.size() >= 3 &&
          oldest.elements[0].elements[2].IsInteger()) {
        b.oldest_idle_ms = oldest.elements[0].elements[2].integer;
      }
      return b;
    }());
  }
  return out;
}

namespace {

// XINFO STREAM's reply (RESP2: a flat list of field, value pairs) as a StreamTop.
Result<StreamTop> TopFrom(const Reply& r, const std::string& key) {
  StreamTop top;
  if (r.IsError()) {
    if (NoSuchKey(r)) return top;
    return Failed("XINFO STREAM", key, r.str);
  }
  if (!r.IsArray()) return Failed("XINFO STREAM", key, "unexpected reply type");
  top.exists = true;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    const Reply& v = r.elements[i + 1];
    if (f == "length" && v.IsInteger()) top.length = v.integer;
    if (f == "last-generated-id") top.sealed = v.str == kSealId;
    // [id, [field, value, ...]] or nil for an empty stream.
    if (f == "last-entry" && v.IsArray() && v.elements.size() == 2 &&
        v.elements[0].str == kSealId) {
      const Reply& fields = v.elements[1];
      for (size_t j = 0; j + 1 < fields.elements.size(); j += 2) {
        const std::string& name = fields.elements[j].str;
        const std::string& value = fields.elements[j + 1].str;
        if (name == "rsc-seal") {
          int32_t g = -1;
          auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), g);
          if (ec == std::errc() && end == value.data() + value.size() && g >= 0) {
            top.seal_generation = g;
          }
        }
        if (name == "rsc-next") top.successor = value;
      }
    }
  }
  return top;
}

}  // namespace

std::vector<Result<StreamTop>> RedisStreamAdmin::Tops(const std::vector<std::string>& keys) {
  return XInfoEach<StreamTop>(executor_, "STREAM", keys, TopFrom);
}

Result<bool> RedisStreamAdmin::TrimSealed(const std::string& key, int32_t generation) {
  RSC_ASSIGN_OR_RETURN(Reply top, executor_.Run(key, {"XREVRANGE", key, "+", "-", "COUNT", "1"},
                                                CommandKind::kRead));
  if (top.IsError()) {
    if (top.ErrorIs("WRONGTYPE")) return false;  // not a stream: never ours to touch
    return Failed("XREVRANGE", key, top.str);
  }
  if (!top.IsArray()) return Failed("XREVRANGE", key, "unexpected reply type");
  if (top.elements.empty()) {
    // Missing, or already empty: the seal written and trimmed in one command makes it a
    // tombstone; one whose last ID is already the maximum refuses it, and is one already.
    RSC_ASSIGN_OR_RETURN(Reply r, executor_.Run(key,
                                                {"XADD", key, "MAXLEN", "0", kSealId, "rsc-seal",
                                                 std::to_string(generation)},
                                                CommandKind::kWrite));
    if (!r.IsError() || AlreadyAtTheMaximumId(r)) return true;
    return Failed("XADD MAXLEN 0 seal", key, r.str);
  }
  const Reply& entry = top.elements.front();
  if (!entry.IsArray() || entry.elements.empty() || entry.elements.front().str != kSealId) {
    return false;
  }
  RSC_ASSIGN_OR_RETURN(Reply r,
                       executor_.Run(key, {"XTRIM", key, "MAXLEN", "0"}, CommandKind::kWrite));
  if (r.IsError()) return Failed("XTRIM", key, r.str);
  return true;
}

}  // namespace rsc::redis
