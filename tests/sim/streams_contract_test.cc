// Contract suite for the simulator's model of Redis Streams (sim/streams.h): the same
// operation scripts run against the model and against a real redis-server, and must
// produce identical traces (ENGINEERING §1; the metadata store has its own suite in
// contract_test.cc). A model that drifts from Redis fails here, not as a simulator run that
// is wrong in a way nobody notices.
//
// Normalization, and why the comparison can still be exact:
//  - Replies are parsed into the model's own reply type (sim::StreamReply) and both sides
//    are printed by the same code. Errors are compared verbatim.
//  - Ids. The model's XADD takes the time `now` and answers max(now-0, last id + 1), which
//    is what Redis's `XADD key *` does with its clock at `now`. The real server cannot be
//    given a clock, so the real side sends `XADD key <now>-*` (Redis 7: that ms, the next
//    sequence number) while `now` is not behind the stream's last id, and `XADD key *`
//    when it is: the scripts' times start at kBase, far ahead of the server's clock (checked
//    below), so `*` then means "last id + 1" on the server too. Ids therefore come out equal
//    on both sides and are compared as they are, monotonicity included.
//  - Idle times (XPENDING) are dropped: the model keeps none, no client reads them.
//  - Deletions: the model has no XDEL (the simulated clients never delete); the model side
//    erases the entry from the state (primary and replica alike), the real side sends XDEL.
//
// Every model operation also returns the effect that replicates it; the model side applies
// it to a replica copy and checks after every step that the replica equals the primary.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "redis/redis_store.h"
#include "redis/redis_stream_admin.h"
#include "redis/redis_url.h"
#include "sim/streams.h"
#include "support/redis_process.h"

namespace rsc::testing {
namespace {

using sim::PendingRow;
using sim::StreamEntry;
using sim::StreamId;
using sim::StreamReply;

// ms of the scripts' clock: year 2128, far ahead of any real server clock (see above).
constexpr int64_t kBase = 5'000'000'000'000;

StreamEntry Fields(const std::string& key, int64_t seq, const std::string& producer = "p1") {
  StreamEntry e;
  e.key = key;
  e.seq = seq;
  e.producer = producer;
  return e;
}

// A stream's entries, one group's position and pending list: all the state a client sees.
struct StateView {
  bool exists = false;
  StreamId last_id;
  std::vector<StreamEntry> entries;
  bool has_group = false;
  StreamId last_delivered;
  std::vector<PendingRow> pel;
};

// ── printing (shared by both sides) ─────────────────────────────────────────────────

std::string Str(const StreamEntry& e) {
  if (e.seal >= 0) return fmt::format("{}=seal{}", e.id.str(), e.seal);
  // The simulator's convention for an entry deleted while pending (sim_consumer.cc).
  if (e.key.empty() && e.seq < 0) return e.id.str() + "=nil";
  return fmt::format("{}={{{},{},{}}}", e.id.str(), e.key, e.seq, e.producer);
}
std::string Str(const std::vector<StreamEntry>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? " " : "") + Str(v[i]);
  return out + "]";
}
std::string Str(const std::vector<StreamId>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? " " : "") + v[i].str();
  return out + "]";
}
std::string Str(const std::vector<PendingRow>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out += fmt::format("{}{}:{}:{}", i ? " " : "", v[i].id.str(), v[i].consumer, v[i].deliveries);
  }
  return out + "]";
}
std::string Str(const StateView& s) {
  if (!s.exists) return "no stream";
  std::string out = fmt::format("last={} entries={}", s.last_id.str(), Str(s.entries));
  if (!s.has_group) return out + " no group";
  return out + fmt::format(" last-delivered={} pel={}", s.last_delivered.str(), Str(s.pel));
}

// ── the two sides ───────────────────────────────────────────────────────────────────

class StreamsBackend {
 public:
  virtual ~StreamsBackend() = default;
  virtual StreamReply XAdd(const std::string& stream, int64_t now, const StreamEntry& f) = 0;
  virtual StreamReply XGroupCreate(const std::string& stream, const std::string& group) = 0;
  // XGROUP CREATE stream group 0 (no MKSTREAM: a reader of a resharded stream, C9 (f)).
  virtual StreamReply XGroupCreateNoMk(const std::string& stream, const std::string& group) = 0;
  // XADD stream NOMKSTREAM … (producers, SPEC D3); the seal (XADD stream <max id> rsc-seal 0,
  // on a stream not sealed yet); XINFO GROUPS for one group (cursor = last-delivered-id,
  // count = pending).
  virtual StreamReply XAddNoMk(const std::string& stream, int64_t now, const StreamEntry& f) = 0;
  virtual StreamReply Seal(const std::string& stream) = 0;
  virtual StreamReply InfoGroup(const std::string& stream, const std::string& group) = 0;
  virtual StreamReply XReadNew(const std::string& stream, const std::string& group,
                               const std::string& consumer, int count) = 0;
  virtual StreamReply XReadPending(const std::string& stream, const std::string& group,
                                   const std::string& consumer, StreamId after, int count) = 0;
  virtual StreamReply XAutoClaim(const std::string& stream, const std::string& group,
                                 const std::string& consumer, StreamId cursor, int count) = 0;
  virtual StreamReply XAck(const std::string& stream, const std::string& group,
                           const std::vector<StreamId>& ids) = 0;
  virtual StreamReply XPending(const std::string& stream, const std::string& group, int count) = 0;
  virtual int64_t XDel(const std::string& stream, const std::vector<StreamId>& ids) = 0;
  // The coordinator's emptying of a retired key (RS5): 1 when it is a tombstone afterwards,
  // 0 when it was kept (an entry follows where the seal was).
  virtual int64_t TrimSealed(const std::string& stream) = 0;
  // XINFO STREAM as the coordinator reads it (RS6, StreamAdmin::Tops).
  virtual StreamTop Top(const std::string& stream) = 0;
  // The seal carrying the generation after it (`rsc-next`, RS6).
  virtual StreamReply SealWithSuccessor(const std::string& stream,
                                        const std::string& successor) = 0;
  virtual StateView State(const std::string& stream, const std::string& group) = 0;
};

class ModelBackend : public StreamsBackend {
 public:
  StreamReply XAdd(const std::string& stream, int64_t now, const StreamEntry& f) override {
    return Apply(sim::XAdd(primary_, stream, now, f));
  }
  StreamReply XGroupCreate(const std::string& stream, const std::string& group) override {
    return Apply(sim::XGroupCreate(primary_, stream, group));
  }
  StreamReply XGroupCreateNoMk(const std::string& stream, const std::string& group) override {
    return Apply(sim::XGroupCreate(primary_, stream, group, false));
  }
  StreamReply XAddNoMk(const std::string& stream, int64_t now, const StreamEntry& f) override {
    return Apply(sim::XAdd(primary_, stream, now, f, true));
  }
  StreamReply Seal(const std::string& stream) override {
    return Apply(sim::XAddSeal(primary_, stream, 0));
  }
  StreamReply InfoGroup(const std::string& stream, const std::string& group) override {
    return Apply(sim::XInfoGroup(primary_, stream, group));
  }
  StreamReply XReadNew(const std::string& stream, const std::string& group,
                       const std::string& consumer, int count) override {
    return Apply(sim::XReadGroupNew(primary_, stream, group, consumer, count));
  }
  StreamReply XReadPending(const std::string& stream, const std::string& group,
                           const std::string& consumer, StreamId after, int count) override {
    return Apply(sim::XReadGroupPending(primary_, stream, group, consumer, after, count));
  }
  StreamReply XAutoClaim(const std::string& stream, const std::string& group,
                         const std::string& consumer, StreamId cursor, int count) override {
    return Apply(sim::XAutoClaim(primary_, stream, group, consumer, cursor, count));
  }
  StreamReply XAck(const std::string& stream, const std::string& group,
                   const std::vector<StreamId>& ids) override {
    return Apply(sim::XAck(primary_, stream, group, ids));
  }
  StreamReply XPending(const std::string& stream, const std::string& group, int count) override {
    return Apply(sim::XPending(primary_, stream, group, count));
  }
  int64_t XDel(const std::string& stream, const std::vector<StreamId>& ids) override {
    int64_t n = 0;
    for (sim::Streams* s : {&primary_, &replica_}) {
      auto it = s->find(stream);
      if (it == s->end()) continue;
      int64_t erased = 0;
      for (const StreamId& id : ids) erased += static_cast<int64_t>(it->second.entries.erase(id));
      if (s == &primary_) n = erased;
    }
    return n;
  }
  int64_t TrimSealed(const std::string& stream) override {
    return Apply(sim::TrimSealed(primary_, stream)).count;
  }
  StreamTop Top(const std::string& stream) override { return sim::TopOf(primary_, stream); }
  StreamReply SealWithSuccessor(const std::string& stream, const std::string& successor) override {
    return Apply(sim::XAddSeal(primary_, stream, 1, successor));
  }
  StateView State(const std::string& stream, const std::string& group) override {
    return View(primary_, stream, group);
  }

 private:
  static StateView View(const sim::Streams& s, const std::string& stream,
                        const std::string& group) {
    StateView v;
    auto it = s.find(stream);
    if (it == s.end()) return v;
    v.exists = true;
    v.last_id = it->second.last_id;
    for (const auto& [id, e] : it->second.entries) v.entries.push_back(e);
    auto g = it->second.groups.find(group);
    if (g == it->second.groups.end()) return v;
    v.has_group = true;
    v.last_delivered = g->second.last_delivered;
    for (const auto& [id, p] : g->second.pel)
      v.pel.push_back(PendingRow{id, p.consumer, p.deliveries});
    return v;
  }
  static std::string Everything(const sim::Streams& s) {
    std::string out;
    for (const auto& [name, st] : s) {
      out += name + ": " + Str(View(s, name, "")) + "\n";
      for (const auto& [g, gs] : st.groups) out += "  " + g + ": " + Str(View(s, name, g)) + "\n";
    }
    return out;
  }
  StreamReply Apply(sim::StreamOp op) {
    if (op.effect) op.effect(replica_);
    // The effect replicates exactly what the operation did (sim_redis.h relies on it).
    EXPECT_EQ(Everything(replica_), Everything(primary_)) << "replica drifted from the primary";
    return std::move(op.reply);
  }

  sim::Streams primary_;
  sim::Streams replica_;
};

StreamId ParseId(const CliReply& r) {
  auto id = StreamId::Parse(r.str);
  EXPECT_TRUE(id.has_value()) << "not a stream id: " << r.ToString();
  return id.value_or(StreamId{-1, -1});
}

int64_t ParseInt(const std::string& s) {
  int64_t v = -1;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// [id, [f, v, …] | nil] → the model's entry (fields k, seq, p; nil: deleted while pending).
StreamEntry ParseEntry(const CliReply& r) {
  StreamEntry e;
  if (r.type != CliReply::Type::kArray || r.elements.size() != 2) {
    ADD_FAILURE() << "not an entry: " << r.ToString();
    return e;
  }
  e.id = ParseId(r.elements[0]);
  const CliReply& f = r.elements[1];
  if (f.IsNil()) return e;
  for (size_t i = 0; i + 1 < f.elements.size(); i += 2) {
    const std::string& name = f.elements[i].str;
    const std::string& value = f.elements[i + 1].str;
    if (name == "k") e.key = value;
    if (name == "seq") e.seq = ParseInt(value);
    if (name == "p") e.producer = value;
    if (name == "rsc-seal") e.seal = static_cast<int32_t>(ParseInt(value));
  }
  return e;
}

class RedisBackend : public StreamsBackend {
 public:
  explicit RedisBackend(RedisProcess& redis) : cli_(redis.Cli()) {
    auto url = redis::ParseRedisUrl(redis.Url());
    auto store = url.ok() ? redis::RedisStore::Open(*url, {})
                          : Result<std::unique_ptr<redis::RedisStore>>(url.error());
    EXPECT_TRUE(store.ok()) << (store.ok() ? "" : store.error().message);
    if (store.ok()) {
      store_ = std::move(store).value();
      admin_ = std::make_unique<redis::RedisStreamAdmin>(store_->executor());
    }
  }

  StreamReply XAdd(const std::string& stream, int64_t now, const StreamEntry& f) override {
    // `<now>-*` while the clock is not behind the last id, else `*` (see the file comment).
    const std::string id = now >= last_ms_[stream] ? fmt::format("{}-*", now) : "*";
    CliReply r =
        Run({"XADD", stream, id, "k", f.key, "seq", std::to_string(f.seq), "p", f.producer});
    StreamReply out;
    if (!Error(r, &out)) {
      out.added = ParseId(r);
      last_ms_[stream] = std::max(last_ms_[stream], out.added.ms);
    }
    return out;
  }
  StreamReply XGroupCreate(const std::string& stream, const std::string& group) override {
    StreamReply out;
    Error(Run({"XGROUP", "CREATE", stream, group, "0", "MKSTREAM"}), &out);
    return out;
  }
  StreamReply XGroupCreateNoMk(const std::string& stream, const std::string& group) override {
    StreamReply out;
    Error(Run({"XGROUP", "CREATE", stream, group, "0"}), &out);
    return out;
  }
  StreamReply XAddNoMk(const std::string& stream, int64_t now, const StreamEntry& f) override {
    const std::string id = now >= last_ms_[stream] ? fmt::format("{}-*", now) : "*";
    CliReply r = Run({"XADD", stream, "NOMKSTREAM", id, "k", f.key, "seq", std::to_string(f.seq),
                      "p", f.producer});
    StreamReply out;
    if (Error(r, &out)) return out;
    if (r.IsNil()) {
      out.nil = true;
      return out;
    }
    out.added = ParseId(r);
    last_ms_[stream] = std::max(last_ms_[stream], out.added.ms);
    return out;
  }
  StreamReply Seal(const std::string& stream) override {
    CliReply r =
        Run({"XADD", stream, "18446744073709551615-18446744073709551615", "rsc-seal", "0"});
    StreamReply out;
    if (Error(r, &out)) return out;
    out.added = ParseId(r);
    out.count = 1;
    last_ms_[stream] = INT64_MAX;  // later XADDs are `*`, as producers send them
    return out;
  }
  StreamReply InfoGroup(const std::string& stream, const std::string& group) override {
    CliReply r = Run({"XINFO", "GROUPS", stream});
    StreamReply out;
    if (Error(r, &out)) return out;
    for (const CliReply& g : r.elements) {
      if (Field(g, "name").str != group) continue;
      out.cursor = ParseId(Field(g, "last-delivered-id"));
      out.count = Field(g, "pending").integer;
      return out;
    }
    out.error = fmt::format("NOGROUP No such key '{}' or consumer group '{}'", stream, group);
    return out;
  }
  StreamReply XReadNew(const std::string& stream, const std::string& group,
                       const std::string& consumer, int count) override {
    return Read({"XREADGROUP", "GROUP", group, consumer, "COUNT", std::to_string(count), "STREAMS",
                 stream, ">"});
  }
  StreamReply XReadPending(const std::string& stream, const std::string& group,
                           const std::string& consumer, StreamId after, int count) override {
    return Read({"XREADGROUP", "GROUP", group, consumer, "COUNT", std::to_string(count), "STREAMS",
                 stream, after.str()});
  }
  StreamReply XAutoClaim(const std::string& stream, const std::string& group,
                         const std::string& consumer, StreamId cursor, int count) override {
    CliReply r = Run({"XAUTOCLAIM", stream, group, consumer, "0", cursor.str(), "COUNT",
                      std::to_string(count), "JUSTID"});
    StreamReply out;
    if (Error(r, &out)) return out;
    // Redis 7: [next cursor, [claimed ids], [ids deleted while pending]].
    if (r.type != CliReply::Type::kArray || r.elements.size() != 3) {
      ADD_FAILURE() << "XAUTOCLAIM reply: " << r.ToString();
      return out;
    }
    out.cursor = ParseId(r.elements[0]);
    for (const CliReply& id : r.elements[1].elements) out.ids.push_back(ParseId(id));
    for (const CliReply& id : r.elements[2].elements) out.deleted.push_back(ParseId(id));
    return out;
  }
  StreamReply XAck(const std::string& stream, const std::string& group,
                   const std::vector<StreamId>& ids) override {
    std::vector<std::string> args{"XACK", stream, group};
    for (const StreamId& id : ids) args.push_back(id.str());
    CliReply r = Run(args);
    StreamReply out;
    if (!Error(r, &out)) out.count = r.integer;
    return out;
  }
  StreamReply XPending(const std::string& stream, const std::string& group, int count) override {
    CliReply r = Run({"XPENDING", stream, group, "-", "+", std::to_string(count)});
    StreamReply out;
    if (Error(r, &out)) return out;
    out.pending = Rows(r);
    return out;
  }
  int64_t XDel(const std::string& stream, const std::vector<StreamId>& ids) override {
    std::vector<std::string> args{"XDEL", stream};
    for (const StreamId& id : ids) args.push_back(id.str());
    return Run(args).integer;
  }
  // The product's code (redis_stream_admin.cc), not a copy of it.
  int64_t TrimSealed(const std::string& stream) override {
    if (admin_ == nullptr) return -1;
    Result<bool> r = admin_->TrimSealed(stream, 0);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() && *r ? 1 : 0;
  }
  // The product's code (redis_stream_admin.cc) for both.
  StreamTop Top(const std::string& stream) override {
    if (admin_ == nullptr) return StreamTop{};
    std::vector<Result<StreamTop>> r = admin_->Tops({stream});
    EXPECT_TRUE(r.size() == 1 && r[0].ok())
        << (r.size() == 1 && !r[0].ok() ? r[0].error().message : "");
    return r.size() == 1 && r[0].ok() ? *r[0] : StreamTop{};
  }
  StreamReply SealWithSuccessor(const std::string& stream, const std::string& successor) override {
    StreamReply out;
    if (admin_ == nullptr) return out;
    Result<bool> r = admin_->Seal(stream, 1, successor);
    if (!r.ok()) {
      out.error = r.error().message;
    } else if (*r) {
      out.added = StreamId::Max();
      out.count = 1;
      last_ms_[stream] = INT64_MAX;
    }
    return out;
  }
  StateView State(const std::string& stream, const std::string& group) override {
    StateView v;
    v.exists = Run({"EXISTS", stream}).integer == 1;
    if (!v.exists) return v;
    v.last_id = ParseId(Field(Run({"XINFO", "STREAM", stream}), "last-generated-id"));
    for (const CliReply& e : Run({"XRANGE", stream, "-", "+"}).elements) {
      v.entries.push_back(ParseEntry(e));
    }
    for (const CliReply& g : Run({"XINFO", "GROUPS", stream}).elements) {
      if (Field(g, "name").str != group) continue;
      v.has_group = true;
      v.last_delivered = ParseId(Field(g, "last-delivered-id"));
      v.pel = Rows(Run({"XPENDING", stream, group, "-", "+", "100000"}));
    }
    return v;
  }
  // The server's clock (TIME), ms.
  int64_t ServerMs() {
    CliReply r = Run({"TIME"});
    if (r.elements.size() != 2) return -1;
    return ParseInt(r.elements[0].str) * 1000 + ParseInt(r.elements[1].str) / 1000;
  }

 private:
  CliReply Run(const std::vector<std::string>& args) {
    if (!cli_) {  // Cli() failed the test already
      CliReply r;
      r.type = CliReply::Type::kTransportError;
      return r;
    }
    CliReply r = cli_->Run(args);
    EXPECT_NE(r.type, CliReply::Type::kTransportError) << args[0] << ": " << r.str;
    return r;
  }
  static bool Error(const CliReply& r, StreamReply* out) {
    if (r.ok()) return false;
    out->error = r.str;
    return true;
  }
  StreamReply Read(const std::vector<std::string>& args) {
    CliReply r = Run(args);
    StreamReply out;
    if (Error(r, &out) || r.IsNil()) return out;  // nil: nothing new
    // [[stream, [entry, …]]]
    if (r.elements.size() != 1 || r.elements[0].elements.size() != 2) {
      ADD_FAILURE() << "XREADGROUP reply: " << r.ToString();
      return out;
    }
    for (const CliReply& e : r.elements[0].elements[1].elements) {
      out.entries.push_back(ParseEntry(e));
    }
    return out;
  }
  static std::vector<PendingRow> Rows(const CliReply& r) {
    std::vector<PendingRow> rows;
    for (const CliReply& row : r.elements) {  // [id, consumer, idle ms, deliveries]
      if (row.elements.size() != 4) {
        ADD_FAILURE() << "XPENDING row: " << row.ToString();
        continue;
      }
      rows.push_back(
          PendingRow{ParseId(row.elements[0]), row.elements[1].str, row.elements[3].integer});
    }
    return rows;
  }
  // The value of `name` in a flat [name, value, …] reply (XINFO).
  static CliReply Field(const CliReply& r, const std::string& name) {
    for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      if (r.elements[i].str == name) return r.elements[i + 1];
    }
    ADD_FAILURE() << "no field " << name << " in " << r.ToString();
    return CliReply{};
  }

  std::unique_ptr<RedisCli> cli_;
  std::unique_ptr<redis::RedisStore> store_;
  std::unique_ptr<redis::RedisStreamAdmin> admin_;
  std::map<std::string, int64_t> last_ms_;
};

// ── scripts ─────────────────────────────────────────────────────────────────────────

// Runs operations on one backend and keeps their trace; what the scripts pass as ids comes
// from this backend's own answers (each side's, equal while the traces agree).
class Tracer {
 public:
  explicit Tracer(StreamsBackend& b) : b_(b) {}

  StreamId Add(const std::string& stream, int64_t now, const std::string& key, int64_t seq) {
    StreamReply r = b_.XAdd(stream, now, Fields(key, seq));
    Line(fmt::format("XADD {} @{}", stream, now - kBase), r.ok() ? r.added.str() : Err(r));
    if (r.ok()) added_[stream].push_back(r.added);
    return r.added;
  }
  void AddNoMk(const std::string& stream, int64_t now, const std::string& key, int64_t seq) {
    StreamReply r = b_.XAddNoMk(stream, now, Fields(key, seq));
    Line(fmt::format("XADD {} NOMKSTREAM @{}", stream, now - kBase), !r.ok() ? Err(r)
                                                                     : r.nil ? "nil"
                                                                             : r.added.str());
    if (r.ok() && !r.nil) added_[stream].push_back(r.added);
  }
  void Seal(const std::string& stream) {
    StreamReply r = b_.Seal(stream);
    Line(fmt::format("XADD {} <max id> rsc-seal 0", stream), r.ok() ? r.added.str() : Err(r));
  }
  void Info(const std::string& stream, const std::string& group) {
    StreamReply r = b_.InfoGroup(stream, group);
    Line(fmt::format("XINFO GROUPS {} ({})", stream, group),
         r.ok() ? fmt::format("last-delivered={} pending={}", r.cursor.str(), r.count) : Err(r));
  }
  void Create(const std::string& stream, const std::string& group) {
    StreamReply r = b_.XGroupCreate(stream, group);
    Line(fmt::format("XGROUP CREATE {} {} 0 MKSTREAM", stream, group), r.ok() ? "OK" : Err(r));
  }
  void CreateNoMk(const std::string& stream, const std::string& group) {
    StreamReply r = b_.XGroupCreateNoMk(stream, group);
    Line(fmt::format("XGROUP CREATE {} {} 0", stream, group), r.ok() ? "OK" : Err(r));
  }
  std::vector<StreamEntry> ReadNew(const std::string& stream, const std::string& group,
                                   const std::string& consumer, int count) {
    StreamReply r = b_.XReadNew(stream, group, consumer, count);
    Line(fmt::format("XREADGROUP {} {} COUNT {} {} >", group, consumer, count, stream),
         r.ok() ? Str(r.entries) : Err(r));
    return r.entries;
  }
  std::vector<StreamEntry> ReadPending(const std::string& stream, const std::string& group,
                                       const std::string& consumer, StreamId after, int count) {
    StreamReply r = b_.XReadPending(stream, group, consumer, after, count);
    Line(
        fmt::format("XREADGROUP {} {} COUNT {} {} {}", group, consumer, count, stream, after.str()),
        r.ok() ? Str(r.entries) : Err(r));
    return r.entries;
  }
  StreamReply AutoClaim(const std::string& stream, const std::string& group,
                        const std::string& consumer, StreamId cursor, int count) {
    StreamReply r = b_.XAutoClaim(stream, group, consumer, cursor, count);
    Line(fmt::format("XAUTOCLAIM {} {} {} 0 {} COUNT {} JUSTID", stream, group, consumer,
                     cursor.str(), count),
         r.ok() ? fmt::format("cursor={} claimed={} deleted={}", r.cursor.str(), Str(r.ids),
                              Str(r.deleted))
                : Err(r));
    return r;
  }
  int64_t Ack(const std::string& stream, const std::string& group,
              const std::vector<StreamId>& ids) {
    StreamReply r = b_.XAck(stream, group, ids);
    Line(fmt::format("XACK {} {} {}", stream, group, Str(ids)),
         r.ok() ? std::to_string(r.count) : Err(r));
    return r.count;
  }
  std::vector<PendingRow> Pending(const std::string& stream, const std::string& group, int count) {
    StreamReply r = b_.XPending(stream, group, count);
    Line(fmt::format("XPENDING {} {} - + {}", stream, group, count),
         r.ok() ? Str(r.pending) : Err(r));
    return r.pending;
  }
  void Del(const std::string& stream, const std::vector<StreamId>& ids) {
    Line(fmt::format("XDEL {} {}", stream, Str(ids)), std::to_string(b_.XDel(stream, ids)));
  }
  void State(const std::string& stream, const std::string& group) {
    Line(fmt::format("STATE {} {}", stream, group), Str(b_.State(stream, group)));
  }
  void Top(const std::string& stream) {
    StreamTop top = b_.Top(stream);
    Line(fmt::format("TOP {}", stream),
         fmt::format("exists={} length={} sealed={} seal-generation={} successor='{}'", top.exists,
                     top.length, top.sealed, top.seal_generation, top.successor));
  }
  void SealWithSuccessor(const std::string& stream, const std::string& successor) {
    StreamReply r = b_.SealWithSuccessor(stream, successor);
    Line(fmt::format("SEAL {} rsc-next '{}'", stream, successor),
         r.ok() ? fmt::format("wrote={}", r.count) : Err(r));
  }
  void TrimSealed(const std::string& stream) {
    Line(fmt::format("TRIM-IF-SEALED {}", stream), std::to_string(b_.TrimSealed(stream)));
  }

  const std::vector<StreamId>& added(const std::string& stream) { return added_[stream]; }
  const std::vector<std::string>& trace() const { return trace_; }

 private:
  static std::string Err(const StreamReply& r) { return "(error) " + r.error; }
  void Line(const std::string& op, const std::string& result) {
    trace_.push_back(op + " -> " + result);
  }

  StreamsBackend& b_;
  std::vector<std::string> trace_;
  std::map<std::string, std::vector<StreamId>> added_;
};

using Script = std::function<void(Tracer&)>;
struct NamedScript {
  const char* name;
  Script run;
};

const std::string kS = "{orders:0}";
const std::string kS2 = "{orders:1}";
const std::string kG = "billing";

// Adds `n` entries to kS at kBase+1, kBase+2, … (keys k0, k1, … seq 0, 1, …).
std::vector<StreamId> AddN(Tracer& t, int n, const std::string& stream = kS) {
  std::vector<StreamId> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(t.Add(stream, kBase + 1 + i, fmt::format("k{}", i % 3), i));
  return ids;
}

const std::vector<NamedScript>& Scripts() {
  static const std::vector<NamedScript> scripts = {
      // SPEC RS2, RS3, D3: NOMKSTREAM creates nothing; a seal makes every `XADD *` fail with
      // Redis's words; the group delivers the seal like any entry and, once it is acked, is
      // complete (last-delivered = the maximum ID, nothing pending).
      {"SealEndsTheStreamAndNoMkStreamCreatesNothing",
       [](Tracer& t) {
         t.AddNoMk(kS2, kBase, "a", 0);
         t.State(kS2, kG);
         t.Create(kS, kG);
         t.Add(kS, kBase + 10, "a", 1);
         t.Seal(kS);
         t.Add(kS, kBase + 20, "a", 2);
         t.AddNoMk(kS, kBase + 30, "a", 3);
         std::vector<StreamEntry> got = t.ReadNew(kS, kG, "c1", 10);
         t.Info(kS, kG);
         std::vector<StreamId> ids;
         for (const StreamEntry& e : got) ids.push_back(e.id);
         t.Ack(kS, kG, ids);
         t.Info(kS, kG);
         t.ReadNew(kS, kG, "c1", 10);
         t.ReadPending(kS, kG, "c1", StreamId::Max(), 10);
         t.State(kS, kG);
       }},
      // SPEC RS6: what the coordinator reads of a stream's end to find a layout behind its
      // streams: missing, an entry on top, the seal with its successor (written once; a
      // second seal writes nothing), then a tombstone (sealed, no entry, no successor).
      {"TheTopOfAStreamShowsItsSealAndTheGenerationAfterIt",
       [](Tracer& t) {
         t.Top(kS);
         t.Create(kS, kG);
         t.Top(kS);
         t.Add(kS, kBase + 10, "a", 1);
         t.Top(kS);
         t.SealWithSuccessor(kS, "2 jump-xxh64 8 4 -");
         t.Top(kS);
         t.SealWithSuccessor(kS, "3 jump-xxh64 12 4 -");
         t.Top(kS);
         t.TrimSealed(kS);
         t.Top(kS);
         t.SealWithSuccessor(kS2, "");
         t.Top(kS2);
       }},
      // SPEC RS5: a retired key is emptied only while it ends with its seal, and stays a
      // tombstone: no entries, the maximum last ID, so `XADD *` (with or without NOMKSTREAM)
      // keeps failing and MKSTREAM creates nothing. A missing or empty key becomes one; a
      // key whose top entry is not the seal is kept untouched.
      {"ARetiredKeyBecomesATombstoneOnlyWhileItEndsWithItsSeal",
       [](Tracer& t) {
         t.TrimSealed(kS);  // missing: a tombstone now
         t.State(kS, kG);
         t.Add(kS, kBase + 1, "a", 0);
         t.AddNoMk(kS, kBase + 2, "a", 1);
         t.TrimSealed(kS);  // a tombstone already
         t.Create(kS, kG);  // a reader re-creating its group: nothing to read
         t.ReadNew(kS, kG, "c1", 10);
         t.State(kS, kG);
         AddN(t, 2, kS2);
         t.Create(kS2, kG);
         t.TrimSealed(kS2);  // not sealed: kept
         t.Seal(kS2);
         t.ReadNew(kS2, kG, "c1", 10);
         t.TrimSealed(kS2);
         t.State(kS2, kG);
         t.Add(kS2, kBase + 10, "a", 2);
         t.Info(kS2, kG);
         const std::string k3 = "{orders:2}";
         AddN(t, 1, k3);
         t.Seal(k3);
         t.Del(k3, {StreamId::Max()});  // the seal lost: the top entry is an ordinary one
         t.TrimSealed(k3);
         t.State(k3, kG);
       }},
      {"AddIdsAreStrictlyIncreasing",
       [](Tracer& t) {
         t.Add(kS, kBase, "a", 0);      // kBase-0
         t.Add(kS, kBase, "a", 1);      // same ms: kBase-1
         t.Add(kS, kBase + 5, "a", 2);  // clock ahead: (kBase+5)-0
         t.Add(kS, kBase + 3, "a", 3);  // clock behind: last + 1
         t.Add(kS, kBase + 1, "a", 4);  // still behind
         t.Add(kS, kBase + 5, "a", 5);  // caught up to the last ms: next seq
         t.Add(kS, kBase + 6, "a", 6);  // ahead again
         t.State(kS, kG);
         t.Add(kS2, 0, "b", 0);  // time 0 on an empty stream: 0-0 is not a valid id, 0-1
         t.Add(kS2, 0, "b", 1);
         t.State(kS2, kG);
       }},
      {"GroupCreateMkStreamAndBusyGroup",
       [](Tracer& t) {
         t.State(kS, kG);
         t.Create(kS, kG);  // MKSTREAM: an empty stream with the group
         t.State(kS, kG);
         t.Create(kS, kG);  // BUSYGROUP
         t.Create(kS, "other");
         AddN(t, 3);
         t.Create(kS, "late");  // from 0: entries added before the group count
         t.ReadNew(kS, "late", "c1", 10);
         t.State(kS, "late");
         t.State(kS, kG);  // untouched by the other group's reads
       }},
      {"GroupCreateWithoutMkStreamNeedsTheKey",
       [](Tracer& t) {
         t.CreateNoMk(kS, kG);  // no key: an error, nothing created
         t.State(kS, kG);
         t.Create(kS2, "other");  // another key, created
         t.CreateNoMk(kS2, kG);   // the key exists: the group is created
         t.CreateNoMk(kS2, kG);   // BUSYGROUP
         t.State(kS2, kG);
       }},
      {"NoGroupOnMissingStreamOrGroup",
       [](Tracer& t) {
         for (int phase = 0; phase < 3; ++phase) {
           // 0: no stream; 1: a stream without the group; 2: the group exists, wrong name.
           if (phase == 1) AddN(t, 2);
           if (phase == 2) t.Create(kS, kG);
           const std::string group = phase == 2 ? "nosuchgroup" : kG;
           t.ReadNew(kS, group, "c1", 5);
           t.ReadPending(kS, group, "c1", StreamId{}, 5);
           t.AutoClaim(kS, group, "c1", StreamId{}, 5);
           t.Ack(kS, group, {StreamId{kBase + 1, 0}});  // no error: 0
           t.Pending(kS, group, 1);
           t.State(kS, group);
         }
       }},
      {"ReadNewFillsThePendingListInCountSteps",
       [](Tracer& t) {
         t.Create(kS, kG);
         t.ReadNew(kS, kG, "c1", 5);  // nothing yet
         AddN(t, 5);
         t.ReadNew(kS, kG, "c1", 2);
         t.ReadNew(kS, kG, "c2", 2);
         t.ReadNew(kS, kG, "c1", 10);  // the one left
         t.ReadNew(kS, kG, "c1", 10);  // nothing new
         t.Pending(kS, kG, 10);
         AddN(t, 2);  // the same times again: behind the last id, so last id + 1
         t.ReadNew(kS, kG, "c3", 1);
         t.State(kS, kG);
       }},
      {"ReadPendingAfterAnIdCountsADelivery",
       [](Tracer& t) {
         t.Create(kS, kG);
         auto ids = AddN(t, 6);
         t.ReadNew(kS, kG, "c1", 3);
         t.ReadNew(kS, kG, "c2", 2);
         t.ReadNew(kS, kG, "c1", 1);                  // c1: ids 0,1,2,5; c2: ids 3,4
         t.ReadPending(kS, kG, "c1", StreamId{}, 2);  // ids 0,1
         t.ReadPending(kS, kG, "c1", ids[1], 2);      // ids 2 and 5 (skips c2's)
         t.ReadPending(kS, kG, "c1", ids[5], 2);      // nothing after our last
         t.ReadPending(kS, kG, "c1", ids[3], 10);     // an id of another consumer's entry
         t.ReadPending(kS, kG, "c2", StreamId{}, 10);
         t.ReadPending(kS, kG, "c9", StreamId{}, 10);  // a consumer with nothing pending
         t.Pending(kS, kG, 10);                        // delivery counts: 0:2 1:2 2:2 3:2 4:2 5:3
         t.State(kS, kG);
       }},
      {"AutoClaimPagesWithCursorAndJustIdCountsNoDelivery",
       [](Tracer& t) {
         t.Create(kS, kG);
         t.AutoClaim(kS, kG, "c3", StreamId{}, 3);  // empty pending list: cursor 0-0
         auto ids = AddN(t, 7);
         t.ReadNew(kS, kG, "c1", 2);
         t.ReadNew(kS, kG, "c2", 3);
         t.ReadNew(kS, kG, "c1", 2);
         t.ReadPending(kS, kG, "c2", StreamId{}, 1);  // one entry with 2 deliveries
         StreamReply r = t.AutoClaim(kS, kG, "c3", StreamId{}, 3);
         while (r.ok() && r.cursor != StreamId{}) r = t.AutoClaim(kS, kG, "c3", r.cursor, 3);
         t.Pending(kS, kG, 10);  // all c3's, counts unchanged (JUSTID)
         t.AutoClaim(kS, kG, "c1", StreamId{ids[3].ms, ids[3].seq + 1}, 2);  // from between ids
         t.AutoClaim(kS, kG, "c1", StreamId{kBase + 1000, 0}, 2);            // past the end
         t.ReadPending(kS, kG, "c3", StreamId{}, 10);
         t.Pending(kS, kG, 10);
         t.State(kS, kG);
       }},
      {"AckCountsOnlyWhatWasPending",
       [](Tracer& t) {
         t.Create(kS, kG);
         auto ids = AddN(t, 5);
         t.ReadNew(kS, kG, "c1", 3);
         t.ReadNew(kS, kG, "c2", 1);
         t.Ack(kS, kG, {ids[0]});
         t.Ack(kS, kG, {ids[0]});                          // double ack: 0
         t.Ack(kS, kG, {ids[4]});                          // never delivered: 0
         t.Ack(kS, kG, {StreamId{7, 7}});                  // unknown id: 0
         t.Ack(kS, kG, {ids[1], ids[1], ids[2], ids[0]});  // duplicates count once
         t.Ack(kS, kG, {ids[3]});                          // another consumer's: acked too
         t.Ack(kS, "other", {ids[3]});
         t.Ack(kS2, kG, {ids[3]});
         t.Pending(kS, kG, 10);
         t.State(kS, kG);
       }},
      {"EntriesDeletedWhilePending",
       [](Tracer& t) {
         t.Create(kS, kG);
         auto ids = AddN(t, 6);
         t.ReadNew(kS, kG, "c1", 4);
         t.ReadNew(kS, kG, "c2", 2);
         t.Del(kS, {ids[0], ids[2], ids[5]});
         t.Pending(kS, kG, 10);                        // still pending
         t.ReadPending(kS, kG, "c1", StreamId{}, 10);  // ids 0, 2 nil; not counted
         t.ReadPending(kS, kG, "c1", StreamId{}, 2);   // COUNT includes the nil entries
         t.Pending(kS, kG, 1);                         // the lowest is a deleted entry
         t.Pending(kS, kG, 10);
         // XAUTOCLAIM drops deleted entries from the pending list and lists them apart.
         t.AutoClaim(kS, kG, "c3", StreamId{}, 1);
         t.Pending(kS, kG, 10);
         t.AutoClaim(kS, kG, "c3", StreamId{}, 10);
         t.Pending(kS, kG, 10);
         auto more = AddN(t, 2);
         t.ReadNew(kS, kG, "c2", 10);  // new entries only
         t.Del(kS, {more[1]});
         t.Ack(kS, kG, {more[1]});              // pending though deleted: acked
         t.Del(kS, {more[1], StreamId{9, 9}});  // already gone: 0
         t.State(kS, kG);
       }},
      {"AutoClaimCountsDeletedEntriesTowardsCount",
       [](Tracer& t) {
         t.Create(kS, kG);
         auto ids = AddN(t, 12);
         t.ReadNew(kS, kG, "c1", 12);
         t.Del(kS, {ids[0], ids[1], ids[2], ids[4], ids[5], ids[6], ids[7], ids[8]});
         StreamReply r = t.AutoClaim(kS, kG, "c2", StreamId{}, 1);  // one deleted, nothing claimed
         r = t.AutoClaim(kS, kG, "c2", r.cursor, 3);                // two deleted, then one claimed
         r = t.AutoClaim(kS, kG, "c2", r.cursor, 4);                // four deleted
         t.AutoClaim(kS, kG, "c2", r.cursor, 4);  // deleted, then claimed to the end
         t.Pending(kS, kG, 30);
         t.State(kS, kG);
       }},
      {"PendingFirstTellsAForeignOwner",
       [](Tracer& t) {
         // The runtime's check for entries a previous owner's late read took after our
         // takeover (reader_core.cc, the late-read check): XPENDING … - + 1.
         t.Pending(kS, kG, 1);  // no group: NOGROUP
         t.Create(kS, kG);
         t.Pending(kS, kG, 1);  // nothing pending: []
         auto ids = AddN(t, 4);
         t.ReadNew(kS, kG, "old", 2);                 // the previous owner
         t.AutoClaim(kS, kG, "new", StreamId{}, 10);  // our takeover
         t.ReadNew(kS, kG, "old", 1);                 // its late read
         t.Pending(kS, kG, 1);                        // ours first
         t.ReadPending(kS, kG, "new", StreamId{}, 10);
         t.Ack(kS, kG, {ids[0], ids[1]});
         t.Pending(kS, kG, 1);  // the late read's entry: foreign
         t.AutoClaim(kS, kG, "new", StreamId{}, 10);
         t.Pending(kS, kG, 1);  // ours again
         t.ReadPending(kS, kG, "new", StreamId{}, 10);
         t.Pending(kS, kG, 1);  // delivered twice
         t.ReadNew(kS, kG, "new", 10);
         t.Ack(kS, kG, {ids[2], ids[3]});
         t.Pending(kS, kG, 1);
       }},
  };
  return scripts;
}

// ~400 random operations over 2 streams × 3 consumers, from a fixed seed: ids passed as
// arguments are drawn from the backend's own XADD answers, so the draws do not depend on
// the backend while the traces agree.
void RandomScript(Tracer& t, uint32_t seed, int ops) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const std::vector<std::string> streams{kS, kS2};
  const std::vector<std::string> consumers{"c0", "c1", "c2"};
  int64_t now = kBase;
  std::map<std::string, StreamId> cursor;
  auto some_id = [&](const std::string& s) {
    const auto& added = t.added(s);
    const int r = pick(10);
    if (added.empty() || r == 0) return StreamId{};
    if (r == 1) return StreamId{kBase + 100000, 0};  // beyond every id
    return added[static_cast<size_t>(pick(static_cast<int>(added.size())))];
  };
  for (int i = 0; i < ops; ++i) {
    const std::string& s = streams[static_cast<size_t>(pick(2))];
    const std::string& c = consumers[static_cast<size_t>(pick(3))];
    const std::string group = pick(25) == 0 ? "other" : kG;
    const int op = pick(100);
    if (op < 28) {
      now += std::vector<int64_t>{0, 0, 1, 3}[static_cast<size_t>(pick(4))];
      const int64_t at = pick(8) == 0 ? now - 1 - pick(4) : now;  // a clock behind now and then
      t.Add(s, at, fmt::format("k{}", pick(4)), i);
    } else if (op < 31) {
      t.Create(s, group);
    } else if (op < 45) {
      t.ReadNew(s, group, c, 1 + pick(4));
    } else if (op < 58) {
      t.ReadPending(s, group, c, some_id(s), 1 + pick(4));
    } else if (op < 68) {
      const StreamId from = pick(3) == 0 ? cursor[s] : some_id(s);
      StreamReply r = t.AutoClaim(s, group, c, from, 1 + pick(3));
      if (r.ok()) cursor[s] = r.cursor;
    } else if (op < 80) {
      std::vector<StreamId> ids;
      for (int n = 1 + pick(4); n > 0; --n) ids.push_back(some_id(s));
      t.Ack(s, group, ids);
    } else if (op < 90) {
      t.Pending(s, group, pick(2) == 0 ? 1 : 1 + pick(5));
    } else if (op < 94) {
      t.Del(s, {some_id(s)});
    } else {
      t.State(s, group);
    }
  }
  for (const std::string& s : streams) t.State(s, kG);
}

void ExpectSameTraces(const std::vector<std::string>& model, const std::vector<std::string>& real,
                      const std::string& name) {
  ASSERT_EQ(model.size(), real.size()) << name;
  for (size_t i = 0; i < real.size(); ++i) {
    if (model[i] == real[i]) continue;
    std::string context;
    for (size_t j = i >= 3 ? i - 3 : 0; j < i; ++j) context += "  " + real[j] + "\n";
    FAIL() << name << " step " << i << " differs\n  model: " << model[i] << "\n  redis: " << real[i]
           << "\nafter (redis):\n"
           << context;
  }
}

class StreamsContract : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    // `XADD key *` stands for a clock behind the stream (file comment): the server's clock
    // must be behind every id the scripts make.
    RedisBackend real(redis_);
    const int64_t server_ms = real.ServerMs();
    ASSERT_GT(server_ms, 0);
    ASSERT_LT(server_ms, kBase);
  }
  // Each run on an empty server, with a fresh client side (its view of the last ids).
  std::vector<std::string> RunReal(const Script& s) {
    redis_.Cli()->Run({"FLUSHALL"});
    RedisBackend real(redis_);
    Tracer t(real);
    s(t);
    return t.trace();
  }
  static std::vector<std::string> RunModel(const Script& s) {
    ModelBackend m;
    Tracer t(m);
    s(t);
    return t.trace();
  }

  RedisProcess redis_;
};

class StreamsContractScript : public StreamsContract,
                              public ::testing::WithParamInterface<size_t> {};

TEST_P(StreamsContractScript, ModelMatchesRealRedis) {
  const NamedScript& s = Scripts()[GetParam()];
  const auto real = RunReal(s.run);
  const auto model = RunModel(s.run);
  ExpectSameTraces(model, real, s.name);
}

INSTANTIATE_TEST_SUITE_P(StreamsContract, StreamsContractScript,
                         ::testing::Range<size_t>(0, Scripts().size()),
                         [](const auto& info) { return std::string(Scripts()[info.param].name); });

TEST_F(StreamsContract, RandomOperationsMatchRealRedis) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Script script = [seed](Tracer& t) { RandomScript(t, seed, 400); };
    const auto real = RunReal(script);
    const auto model = RunModel(script);
    ExpectSameTraces(model, real, fmt::format("random seed {}", seed));
  }
}

// The model's answers are also pinned, so "both wrong the same way" (say, a parse of the
// real reply that hides a field) cannot pass.
std::vector<std::string> ModelTrace(const char* name) {
  for (const NamedScript& s : Scripts()) {
    if (std::string(s.name) == name) {
      ModelBackend m;
      Tracer t(m);
      s.run(t);
      return t.trace();
    }
  }
  ADD_FAILURE() << "no script " << name;
  return {};
}

TEST(StreamsContractExpectations, ModelAnswers) {
  const std::string b = std::to_string(kBase);
  auto ids = ModelTrace("AddIdsAreStrictlyIncreasing");
  ASSERT_EQ(ids.size(), 11u);
  EXPECT_EQ(ids[0], fmt::format("XADD {} @0 -> {}-0", kS, b));
  EXPECT_EQ(ids[1], fmt::format("XADD {} @0 -> {}-1", kS, b));
  EXPECT_EQ(ids[3], fmt::format("XADD {} @3 -> {}-1", kS, kBase + 5));
  EXPECT_EQ(ids[5], fmt::format("XADD {} @5 -> {}-3", kS, kBase + 5));
  EXPECT_EQ(ids[8], fmt::format("XADD {} @{} -> 0-1", kS2, -kBase));

  auto top = ModelTrace("TheTopOfAStreamShowsItsSealAndTheGenerationAfterIt");
  ASSERT_EQ(top.size(), 13u);
  EXPECT_EQ(top[0], fmt::format("TOP {} -> exists=false length=0 sealed=false seal-generation=-1 "
                                "successor=''",
                                kS));
  EXPECT_EQ(top[6], fmt::format("TOP {} -> exists=true length=2 sealed=true seal-generation=1 "
                                "successor='2 jump-xxh64 8 4 -'",
                                kS));
  EXPECT_EQ(top[7], fmt::format("SEAL {} rsc-next '3 jump-xxh64 12 4 -' -> wrote=0", kS));
  EXPECT_EQ(top[8], top[6]) << "a second seal changes nothing";
  EXPECT_EQ(top[10], fmt::format("TOP {} -> exists=true length=0 sealed=true seal-generation=-1 "
                                 "successor=''",
                                 kS))
      << "a tombstone: sealed, nothing to read the successor from";

  auto nogroup = ModelTrace("NoGroupOnMissingStreamOrGroup");
  ASSERT_GE(nogroup.size(), 5u);
  EXPECT_NE(nogroup[0].find("(error) NOGROUP"), std::string::npos) << nogroup[0];
  EXPECT_NE(nogroup[2].find("(error) NOGROUP"), std::string::npos) << nogroup[2];
  EXPECT_EQ(nogroup[3], fmt::format("XACK {} {} [{}-0] -> 0", kS, kG, kBase + 1));

  auto claim = ModelTrace("AutoClaimPagesWithCursorAndJustIdCountsNoDelivery");
  const std::string pel = fmt::format("XPENDING {} {} - + 10 -> [", kS, kG);
  auto after_claim = std::find_if(claim.begin(), claim.end(),
                                  [&](const std::string& l) { return l.starts_with(pel); });
  ASSERT_NE(after_claim, claim.end());
  EXPECT_EQ(*after_claim, pel + fmt::format("{0}-0:c3:1 {1}-0:c3:1 {2}-0:c3:2 {3}-0:c3:1 "
                                            "{4}-0:c3:1 {5}-0:c3:1 {6}-0:c3:1]",
                                            kBase + 1, kBase + 2, kBase + 3, kBase + 4, kBase + 5,
                                            kBase + 6, kBase + 7));

  auto del = ModelTrace("EntriesDeletedWhilePending");
  ASSERT_GE(del.size(), 14u);
  EXPECT_EQ(del[11], fmt::format("XREADGROUP {} c1 COUNT 10 {} 0-0 -> [{}-0=nil {}-0={{k1,1,p1}} "
                                 "{}-0=nil {}-0={{k0,3,p1}}]",
                                 kG, kS, kBase + 1, kBase + 2, kBase + 3, kBase + 4));
  EXPECT_EQ(del[13], fmt::format("XPENDING {} {} - + 1 -> [{}-0:c1:1]", kS, kG, kBase + 1))
      << "a deleted entry's delivery count stays";

  auto counted = ModelTrace("AutoClaimCountsDeletedEntriesTowardsCount");
  ASSERT_GE(counted.size(), 16u);
  EXPECT_EQ(counted[15], fmt::format("XAUTOCLAIM {} {} c2 0 0-0 COUNT 1 JUSTID -> cursor={}-0 "
                                     "claimed=[] deleted=[{}-0]",
                                     kS, kG, kBase + 2, kBase + 1))
      << "a deleted pending entry leaves the pending list and uses up the COUNT";

  auto foreign = ModelTrace("PendingFirstTellsAForeignOwner");
  ASSERT_EQ(foreign.size(), 21u);
  EXPECT_EQ(foreign[10], fmt::format("XPENDING {} {} - + 1 -> [{}-0:new:1]", kS, kG, kBase + 1));
  EXPECT_EQ(foreign[13], fmt::format("XPENDING {} {} - + 1 -> [{}-0:old:1]", kS, kG, kBase + 3))
      << "the late read's entry is the lowest pending one, another consumer's";
  EXPECT_EQ(foreign[17], fmt::format("XPENDING {} {} - + 1 -> [{}-0:new:2]", kS, kG, kBase + 3));
  EXPECT_EQ(foreign[20], fmt::format("XPENDING {} {} - + 1 -> []", kS, kG));
}

}  // namespace
}  // namespace rsc::testing
