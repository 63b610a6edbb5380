#include "sim/wire_redis.h"

#include <charconv>
#include <memory>
#include <string>
#include <utility>

#include "core/check.h"

namespace rsc::sim {
namespace {

using redis::Command;
using redis::Reply;

Reply Status(std::string s) { return Reply::Status(std::move(s)); }
Reply Bulk(std::string s) { return Reply::Bulk(std::move(s)); }
Reply Integer(int64_t n) { return Reply::Integer(n); }
Reply Error(std::string s) { return Reply::Error(std::move(s)); }
Reply Array(std::vector<Reply> elements = {}) { return Reply::Array(std::move(elements)); }

StreamId Id(const std::string& text) {
  if (text == "0") return StreamId{};
  std::optional<StreamId> id = StreamId::Parse(text);
  RSC_CHECK(id.has_value());
  return *id;
}

int Int(const std::string& text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  RSC_CHECK(ec == std::errc() && end == text.data() + text.size());
  return n;
}

// [id, [field, value, ...]], or [id, nil] for an entry deleted while pending.
Reply EntryReply(const StreamEntry& e) {
  std::vector<Reply> fields;
  if (e.seal >= 0) {  // a seal entry (RS2), as the coordinator writes it
    fields = {Bulk("rsc-seal"), Bulk(std::to_string(e.seal))};
    if (!e.successor.empty()) fields.insert(fields.end(), {Bulk("rsc-next"), Bulk(e.successor)});
  } else if (e.key.empty() && e.seq < 0) {
    return Array({Bulk(e.id.str()), Reply{}});
  } else {
    fields = {Bulk("key"),      Bulk(e.key),     Bulk("seq"), Bulk(std::to_string(e.seq)),
              Bulk("producer"), Bulk(e.producer)};
  }
  return Array({Bulk(e.id.str()), Array(std::move(fields))});
}

Reply StreamReplyOf(const std::string& stream, const std::vector<StreamEntry>& entries) {
  std::vector<Reply> list;
  list.reserve(entries.size());
  for (const StreamEntry& e : entries) list.push_back(EntryReply(e));
  return Array({Bulk(stream), Array(std::move(list))});
}

Reply IdList(const std::vector<StreamId>& ids) {
  std::vector<Reply> out;
  out.reserve(ids.size());
  for (const StreamId& id : ids) out.push_back(Bulk(id.str()));
  return Array(std::move(out));
}

// XREADGROUP GROUP g c COUNT n [BLOCK ms] STREAMS k1 … kn id1 … idn, taken apart.
struct ReadArgs {
  std::string group, consumer;
  int count = 1;
  TimeMs block_ms = -1;  // no BLOCK
  std::vector<std::string> streams, ids;
};

ReadArgs ParseRead(const Command& c) {
  ReadArgs a;
  RSC_CHECK(c.size() >= 7 && c[1] == "GROUP");
  a.group = c[2];
  a.consumer = c[3];
  size_t i = 4;
  for (; i < c.size() && c[i] != "STREAMS"; i += 2) {
    RSC_CHECK(i + 1 < c.size());
    if (c[i] == "COUNT") {
      a.count = Int(c[i + 1]);
    } else if (c[i] == "BLOCK") {
      a.block_ms = Int(c[i + 1]);
    } else {
      RSC_CHECK(false && "an XREADGROUP option the simulated Redis does not model");
    }
  }
  const size_t rest = c.size() - i - 1;
  RSC_CHECK(i < c.size() && rest > 0 && rest % 2 == 0);
  a.streams.assign(c.begin() + static_cast<std::ptrdiff_t>(i + 1),
                   c.begin() + static_cast<std::ptrdiff_t>(i + 1 + rest / 2));
  a.ids.assign(c.begin() + static_cast<std::ptrdiff_t>(i + 1 + rest / 2), c.end());
  return a;
}

bool IsNewRead(const ReadArgs& a) {
  for (const std::string& id : a.ids) {
    if (id != ">") return false;
  }
  return true;
}

// A command that answers at once.
Reply Execute(SimRedis& redis, const Command& c, const WireClient& client) {
  RSC_CHECK(!c.empty());
  const std::string& name = c[0];
  auto stream_op = [&](const std::function<StreamOp(Streams&)>& op) { return redis.Stream(op); };
  if (name == "ASKING") return Status("OK");
  if (name == "CLIENT" && c.size() == 2 && c[1] == "ID") return Integer(client.client_id);
  if (name == "CLIENT" && c.size() == 4 && c[1] == "UNBLOCK" && c[3] == "TIMEOUT") {
    return Integer(redis.ClientUnblock(std::stoll(c[2])));
  }
  if (name == "XGROUP" && c.size() >= 5 && c[1] == "CREATE" && c[4] == "0") {
    const bool mkstream = c.size() == 6 && c[5] == "MKSTREAM";
    StreamReply r = stream_op([&](Streams& s) { return XGroupCreate(s, c[2], c[3], mkstream); });
    return r.ok() ? Status("OK") : Error(r.error);
  }
  if (name == "XAUTOCLAIM" && c.size() == 9 && c[4] == "0" && c[6] == "COUNT" && c[8] == "JUSTID") {
    if (client.skip_takeover) return Array({Bulk("0-0"), Array(), Array()});
    StreamReply r =
        stream_op([&](Streams& s) { return XAutoClaim(s, c[1], c[2], c[3], Id(c[5]), Int(c[7])); });
    if (!r.ok()) return Error(r.error);
    return Array({Bulk(r.cursor.str()), IdList(r.ids), IdList(r.deleted)});
  }
  if (name == "XPENDING" && c.size() == 6 && c[3] == "-" && c[4] == "+") {
    StreamReply r = stream_op([&](Streams& s) { return XPending(s, c[1], c[2], Int(c[5])); });
    if (!r.ok()) return Error(r.error);
    std::vector<Reply> rows;
    for (const PendingRow& row : r.pending) {
      // Idle time is not modelled (nothing reads it).
      rows.push_back(
          Array({Bulk(row.id.str()), Bulk(row.consumer), Integer(0), Integer(row.deliveries)}));
    }
    return Array(std::move(rows));
  }
  if (name == "XACK" && c.size() >= 4) {
    std::vector<StreamId> ids;
    for (size_t i = 3; i < c.size(); ++i) ids.push_back(Id(c[i]));
    StreamReply r = stream_op([&](Streams& s) { return XAck(s, c[1], c[2], ids); });
    return r.ok() ? Integer(r.count) : Error(r.error);
  }
  if (name == "XADD") {
    // As producers send it (client/publish_call.h XaddArgs): NOMKSTREAM, an id Redis picks,
    // and the simulated workload's fields.
    RSC_CHECK(c.size() == 10 && c[2] == "NOMKSTREAM" && c[3] == "*" && c[4] == "key" &&
              c[6] == "seq" && c[8] == "producer");
    StreamEntry e;
    e.key = c[5];
    e.seq = std::stoll(c[7]);
    e.producer = c[9];
    StreamReply r = redis.XAdd(c[1], e);
    if (!r.ok()) return Error(r.error);
    return r.nil ? Reply{} : Bulk(r.added.str());
  }
  if (name == "XREADGROUP") {  // the pending read: one stream, after an id
    const ReadArgs a = ParseRead(c);
    RSC_CHECK(a.streams.size() == 1 && a.block_ms < 0);
    StreamReply r = stream_op([&](Streams& s) {
      return XReadGroupPending(s, a.streams[0], a.group, a.consumer, Id(a.ids[0]), a.count);
    });
    if (!r.ok()) return Error(r.error);
    return Array({StreamReplyOf(a.streams[0], r.entries)});
  }
  RSC_CHECK(false && "a reader command the simulated Redis does not model");
  return Error("ERR unknown command");
}

struct Run {
  SimRedis& redis;
  std::vector<Command> cmds;
  WireClient client;
  std::function<void(std::vector<Reply>, bool)> done;
  std::vector<Reply> replies;
  size_t next = 0;
  bool asking = false;  // the previous command was ASKING
};

void Step(const std::shared_ptr<Run>& run) {
  while (run->next < run->cmds.size()) {
    const Command& c = run->cmds[run->next++];
    bool asking = false;
    if (run->client.route) {
      asking = std::exchange(run->asking, c[0] == "ASKING");
      if (std::optional<std::string> redirect = run->client.route(c, asking, true)) {
        run->replies.push_back(Error(*redirect));
        continue;
      }
    }
    if (c[0] == "XREADGROUP") {
      ReadArgs a = ParseRead(c);
      if (IsNewRead(a)) {
        if (run->client.closing) a.block_ms = -1;
        // Answered at once or, blocking, later: the rest of the pipeline waits for it.
        // On a cluster node, a read blocked on a slot the node stops serving is answered with
        // the redirection when the slot moves (sim/sim_cluster.h).
        SimRedis::Redirect redirect;
        if (run->client.route) {
          redirect = [route = run->client.route, c, asking] { return route(c, asking, false); };
        }
        run->redis.XReadGroupMulti(
            a.streams, a.group, a.consumer, a.count, a.block_ms, run->client.client_id,
            [run](SimRedis::MultiRead r) {
              if (r.reset) {
                run->done({}, true);
                return;
              }
              if (!r.error.empty()) {
                run->replies.push_back(Error(r.error));
              } else if (r.streams.empty()) {
                run->replies.push_back(Reply{});  // nil
              } else {
                std::vector<Reply> streams;
                for (const auto& [stream, entries] : r.streams) {
                  streams.push_back(StreamReplyOf(stream, entries));
                }
                run->replies.push_back(Array(std::move(streams)));
              }
              Step(run);
            },
            std::move(redirect));
        return;
      }
    }
    run->replies.push_back(Execute(run->redis, c, run->client));
  }
  run->done(std::move(run->replies), false);
}

}  // namespace

void RunWirePipeline(SimRedis& redis, std::vector<redis::Command> cmds, WireClient client,
                     std::function<void(std::vector<redis::Reply> replies, bool reset)> done) {
  auto run = std::make_shared<Run>(Run{redis, std::move(cmds), client, std::move(done), {}, 0});
  Step(run);
}

RedisExec WirePipeline(std::vector<redis::Command> cmds, WireClient client,
                       std::shared_ptr<std::vector<redis::Reply>> result,
                       std::shared_ptr<bool> closing) {
  return [cmds = std::move(cmds), client, result, closing](SimRedis& redis,
                                                           std::function<void(StreamReply)> done) {
    WireClient at_redis = client;
    at_redis.closing = closing && *closing;
    RunWirePipeline(
        redis, cmds, at_redis,
        [result, done = std::move(done)](std::vector<redis::Reply> replies, bool reset) {
          StreamReply r;
          if (reset) {
            r.error = std::string(kConnError) + "connection reset (failover)";
          } else {
            *result = std::move(replies);
          }
          done(std::move(r));
        });
  };
}

}  // namespace rsc::sim
