// Contract suite for the simulated Redis in the wire form (sim/wire_redis.h): the reader
// commands as the library builds them (ReaderCommandArgs, NodeCore's combined reads) go to a
// real redis-server and to the simulator's Redis, and the replies must print the same
// (redis::Reply::DebugString) — the shapes the library's parsers read. The stream semantics
// behind them are pinned by streams_contract_test.cc; this pins the replies' form, the
// combined multi-stream read (streams without new entries left out, NOGROUP naming the first
// stream without the group, nothing read then), CLIENT UNBLOCK and the producer's XADD.
//
// Normalization: ids are the simulator's (its XADD picks them; the real side is given the
// same ids explicitly); XPENDING's idle times are zeroed (the model keeps none).

#include "sim/wire_redis.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/node_core.h"
#include "client/publish_call.h"
#include "client/reader_wire.h"
#include "redis/connection.h"
#include "redis/redis_url.h"
#include "sim/sim_redis.h"
#include "support/redis_process.h"

namespace rsc::sim {
namespace {

using redis::Command;
using redis::Reply;
using rsc::testing::RedisProcess;

// XPENDING's extended rows [id, owner, idle, deliveries]: the idle time zeroed.
void ZeroIdle(const Command& cmd, Reply& r) {
  if (cmd[0] != "XPENDING" || !r.IsArray()) return;
  for (Reply& row : r.elements) {
    if (row.IsArray() && row.elements.size() == 4) row.elements[2].integer = 0;
  }
}

class WireContract : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    Result<redis::RedisUrl> url = redis::ParseRedisUrl(redis_.Url());
    ASSERT_TRUE(url.ok());
    real_ = std::make_unique<redis::Connection>(redis::ConnectionOptions::FromUrl(*url));
    world_.RunUntil(1000);
  }

  // An entry on both sides: the simulator's XADD picks the id, the real side is given it.
  std::string Add(const std::string& stream, const std::string& key, int64_t seq) {
    StreamEntry e;
    e.key = key;
    e.seq = seq;
    e.producer = "p1";
    StreamReply r = sim_.XAdd(stream, e);
    EXPECT_TRUE(r.ok()) << r.error;
    const std::string id = r.added.str();
    Real({"XADD", stream, id, "key", key, "seq", std::to_string(seq), "producer", "p1"});
    world_.RunUntil(world_.now() + 1);
    return id;
  }

  Reply Real(const Command& cmd) {
    Result<Reply> r = real_->Run(cmd, redis::CommandKind::kWrite);
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return Reply{};
    ZeroIdle(cmd, *r);
    return std::move(r).value();
  }

  // The simulated side; a blocking read is waited for in simulated time.
  Reply Sim(const Command& cmd, int64_t client_id = 1) {
    std::optional<Reply> out;
    RunWirePipeline(sim_, {cmd}, WireClient{client_id},
                    [&](std::vector<Reply> replies, bool reset) {
                      ASSERT_FALSE(reset);
                      ASSERT_EQ(replies.size(), 1u);
                      out = std::move(replies[0]);
                    });
    for (int i = 0; i < 100 && !out; ++i) world_.RunUntil(world_.now() + 10);
    EXPECT_TRUE(out.has_value()) << "no simulated reply";
    if (!out) return Reply{};
    ZeroIdle(cmd, *out);
    return *out;
  }

  // Sends `cmd` to both; the replies must print the same. Returns the real one.
  Reply Both(const Command& cmd) {
    Reply real = Real(cmd);
    Reply sim = Sim(cmd);
    EXPECT_EQ(sim.DebugString(), real.DebugString()) << "command: " << Join(cmd);
    return real;
  }

  static std::string Join(const Command& cmd) {
    std::string s;
    for (const std::string& a : cmd) s += (s.empty() ? "" : " ") + a;
    return s;
  }

  client::ReaderCoreConfig Config(const std::string& stream, const std::string& consumer) {
    client::ReaderCoreConfig c;
    c.stream = stream;
    c.group = "g";
    c.consumer_name = consumer;
    return c;
  }

  RedisProcess redis_;
  std::unique_ptr<redis::Connection> real_;
  World world_{1, Buggify::Mode::kAllOff};
  SimRedis sim_{world_};
};

client::ReaderCommand Cmd(client::ReaderCommandKind kind, int count = 10,
                          std::string cursor = "0-0") {
  client::ReaderCommand c;
  c.kind = kind;
  c.count = count;
  c.cursor = std::move(cursor);
  return c;
}

TEST_F(WireContract, TheReaderCommandsAnswerInRedisShapes) {
  using K = client::ReaderCommandKind;
  client::ReaderCoreConfig a = Config("{s}:1", "c1");
  a.create_key = true;
  Both(client::ReaderCommandArgs(a, Cmd(K::kCreateGroup)));
  Both(client::ReaderCommandArgs(a, Cmd(K::kCreateGroup)));  // BUSYGROUP
  client::ReaderCoreConfig missing = Config("{s}:9", "c1");
  missing.create_key = false;
  Both(client::ReaderCommandArgs(missing, Cmd(K::kCreateGroup)));  // no MKSTREAM: no key
  const std::string id1 = Add("{s}:1", "k1", 1);
  const std::string id2 = Add("{s}:1", "k1", 2);
  Add("{s}:1", "k2", 1);
  // A single-stream live read, as ReaderCommandArgs writes it (non-blocking here: BLOCK 0
  // would be "forever"; the blocking form is below).
  client::ReaderCommand read = Cmd(K::kReadLive, 2);
  read.block_ms = 5;
  Both(client::ReaderCommandArgs(a, read));
  Both(client::ReaderCommandArgs(a, Cmd(K::kReadPending, 10, "0")));
  Both(client::ReaderCommandArgs(a, Cmd(K::kCheckForeign, 1)));
  // Another consumer name takes everything pending over.
  client::ReaderCoreConfig b = Config("{s}:1", "c2");
  Both(client::ReaderCommandArgs(b, Cmd(K::kAutoClaim, 10, "0-0")));
  Both(client::ReaderCommandArgs(a, Cmd(K::kCheckForeign, 1)));
  Both(client::ReaderCommandArgs(b, Cmd(K::kReadPending, 1, id1)));
  client::ReaderCommand ack = Cmd(K::kAck);
  ack.ids = {id1, id2, "1-1"};
  Reply acked = Both(client::ReaderCommandArgs(b, ack));
  EXPECT_EQ(acked.integer, 2);
  // The library parses both sides alike, of course; this is what it makes of the claim.
  Reply claim = Both(client::ReaderCommandArgs(a, Cmd(K::kAutoClaim, 10, "0-0")));
  EXPECT_EQ(client::ParseReaderReply(Cmd(K::kAutoClaim), claim).count, 0);
}

TEST_F(WireContract, ACombinedReadNamesOnlyStreamsWithNewEntriesAndNogroupNamesTheFirstMissing) {
  for (const char* s : {"{s}:1", "{s}:2", "{s}:3"}) {
    Both({"XGROUP", "CREATE", s, "g", "0", "MKSTREAM"});
  }
  Add("{s}:1", "k1", 1);
  Add("{s}:3", "k3", 1);
  Add("{s}:3", "k3", 2);
  // As NodeCore combines three readers' live reads (COUNT the smallest, one `>` each).
  client::NodeCore core(false);
  std::vector<client::NodeRead> reads;
  const auto now = client::NodeCore::TimePoint{} + std::chrono::seconds(1);
  for (const char* s : {"{s}:1", "{s}:2", "{s}:3"}) {
    client::NodeRead r;
    r.token = reads.size() + 1;
    r.stream = s;
    r.group = "g";
    r.consumer_name = "c1";
    r.count = 10;
    r.deadline = now + std::chrono::milliseconds(50);
    reads.push_back(r);
  }
  core.Enqueue(std::move(reads), now);
  client::NodeCore::Output out;
  ASSERT_TRUE(core.PrepareRound(now, true, "", &out));
  Command combined = core.round().buckets[0].args;
  // BLOCK would wait when nothing is new; entries are there, so both answer at once.
  Reply first = Both(combined);
  ASSERT_EQ(first.elements.size(), 2u) << "only the streams with new entries";
  EXPECT_EQ(first.elements[1].elements[0].str, "{s}:3");
  EXPECT_EQ(first.elements[1].elements[1].elements.size(), 2u);
  // Now nothing is new: the blocking read times out (nil) on both.
  EXPECT_TRUE(Both(combined).IsNil());
  Command nogroup = {"XREADGROUP", "GROUP", "g",     "c1", "COUNT", "1", "STREAMS",
                     "{s}:1",      "{s}:8", "{s}:9", ">",  ">",     ">"};
  Reply refused = Both(nogroup);
  ASSERT_TRUE(refused.IsError());
  EXPECT_NE(refused.str.find("'{s}:8'"), std::string::npos) << refused.str;
  Add("{s}:1", "k1", 2);
  Both(nogroup);  // nothing read: the entry is still new
  Both({"XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "{s}:1", ">"});
}

TEST_F(WireContract, ASealAndItsSuccessorReadAsTheCoordinatorWroteThem) {
  Both({"XGROUP", "CREATE", "{s}:1", "g", "0", "MKSTREAM"});
  Add("{s}:1", "k1", 1);
  ASSERT_TRUE(sim_.Seal("{s}:1", 1, "2:4").ok());
  Real({"XADD", "{s}:1", "18446744073709551615-18446744073709551615", "rsc-seal", "1", "rsc-next",
        "2:4"});
  Both({"XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "{s}:1", ">"});
}

// The producer's XADD as PublishCall writes it: nil for a missing key (NOMKSTREAM, D3), an id
// (a bulk string; the ids themselves differ), and Redis's own refusal once the stream is sealed
// (RS2) — the texts ProducerRuntime::IsStaleTarget reads.
TEST_F(WireContract, TheProducersXaddAnswersInRedisShapes) {
  const Command add =
      client::XaddArgs("{s}:1", {{"key", "k1"}, {"seq", "1"}, {"producer", "p1"}}, true);
  EXPECT_TRUE(Both(add).IsNil());
  Both({"XGROUP", "CREATE", "{s}:1", "g", "0", "MKSTREAM"});
  const Reply real = Real(add);
  const Reply sim = Sim(add);
  EXPECT_TRUE(real.IsString()) << real.DebugString();
  EXPECT_TRUE(sim.IsString()) << sim.DebugString();
  ASSERT_TRUE(sim_.Seal("{s}:1", 1, "").ok());
  Real({"XADD", "{s}:1", "18446744073709551615-18446744073709551615", "rsc-seal", "1"});
  const Reply refused = Both(add);
  ASSERT_TRUE(refused.IsError());
  EXPECT_TRUE(client::ProducerRuntime::IsStaleTarget(
      client::XaddReply{client::XaddReply::Kind::kError, refused.str}))
      << refused.str;
}

TEST_F(WireContract, ClientIdAndUnblockOfAClientThatIsNotBlocked) {
  Both({"CLIENT", "UNBLOCK", "987654", "TIMEOUT"});
  EXPECT_TRUE(Real({"CLIENT", "ID"}).IsInteger());
  EXPECT_EQ(Sim({"CLIENT", "ID"}, 42).integer, 42);
  EXPECT_TRUE(Sim({"ASKING"}).IsStatus()) << "as a cluster node answers it";
}

// A blocked combined read is answered nil by CLIENT UNBLOCK … TIMEOUT (the simulator; the real
// server's behaviour is pinned by reader_redis_test.cc's unblock tests), and an entry added
// to any of its streams serves it.
TEST(WireRedis, ABlockedReadIsServedByANewEntryOrAnsweredNilByAnUnblock) {
  World w(3, Buggify::Mode::kAllOff);
  SimRedis redis(w);
  w.RunUntil(100);
  for (const char* s : {"{s}:1", "{s}:2"}) {
    RunWirePipeline(redis, {{"XGROUP", "CREATE", s, "g", "0", "MKSTREAM"}}, WireClient{1},
                    [](std::vector<Reply>, bool) {});
  }
  const Command read = {"XREADGROUP", "GROUP",   "g",     "c1",    "COUNT", "5", "BLOCK",
                        "1000",       "STREAMS", "{s}:1", "{s}:2", ">",     ">"};
  std::optional<Reply> got;
  RunWirePipeline(redis, {read, {"XPENDING", "{s}:2", "g", "-", "+", "1"}}, WireClient{7},
                  [&](std::vector<Reply> r, bool) {
                    ASSERT_EQ(r.size(), 2u);
                    got = r[0];
                    EXPECT_EQ(r[1].elements.size(), 1u) << "the check behind it sees the entry";
                  });
  w.RunUntil(200);
  EXPECT_FALSE(got.has_value()) << "blocked";
  StreamEntry e;
  e.key = "k";
  e.seq = 1;
  ASSERT_TRUE(redis.XAdd("{s}:2", e).ok());
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->IsArray());
  EXPECT_EQ(got->elements[0].elements[0].str, "{s}:2");

  got.reset();
  RunWirePipeline(redis, {read}, WireClient{8}, [&](std::vector<Reply> r, bool) { got = r[0]; });
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(redis.ClientUnblock(7), 0) << "not blocked any more";
  EXPECT_EQ(redis.ClientUnblock(8), 1);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->IsNil());
}

}  // namespace
}  // namespace rsc::sim
