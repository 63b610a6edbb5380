// Resharding with the shipped client library (SPEC §13.2 RS2–RS5, D2, D5; issue 12), against
// a real redis-server and a real rsc-coordinator. Run inside scripts/netns.sh.
//
// Two Consumers and one Producer (keyed messages, per-key increasing seq, published
// continuously from a thread; routed by the stream, D4, or by the group) while the stream is
// resharded 4 → 8 → 2. Asserted, for the library's side of the protocol ("layout-v2"):
// - the consumers declare layout-v2, so the reshard is accepted (D5);
// - the producer's callers see no failure across the seals: an XADD refused by a sealed
//   shard is sent again on the new generation (RS2);
// - no seal entry reaches a handler; each sealed shard is read to its end and XACKed, so
//   every generation retires (RS3, RS5) and the consumers end up reading exactly the last
//   generation's shards, at the keys the coordinator published (D2);
// - every acknowledged publish is consumed, and per key the first deliveries come in
//   increasing seq order across both reshards (RS4: children are read only after their
//   parents are complete).

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "client/live_group.h"
#include "client/publish_loop.h"
#include "rsc/consumer.h"
#include "rsc/producer.h"
#include "support/coordinator_process.h"
#include "support/http_client.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using rsc::testing::CoordinatorProcess;
using rsc::testing::FieldValue;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::JsonInt;
using rsc::testing::PublishLoop;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;

constexpr int kKeys = 48;
constexpr char kStream[] = "resharded";
constexpr char kGroup[] = "readers";
constexpr char kSealId[] = "18446744073709551615-18446744073709551615";

// Every delivery, in handler-call order across both consumers. Thread-safe.
class Deliveries {
 public:
  void Add(const Message& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.id == kSealId || !FieldValue(m.fields, "rsc-seal").empty()) {
      ++seals_;
      return;
    }
    const std::string key = FieldValue(m.fields, "key");
    const int seq = std::stoi(FieldValue(m.fields, "seq"));
    all_.push_back({key, seq, m.shard, m.stream});
    seen_.insert({key, seq});
  }
  struct D {
    std::string key;
    int seq;
    int32_t shard;
    std::string stream;
  };
  std::vector<D> All() const {
    std::lock_guard<std::mutex> lock(mu_);
    return all_;
  }
  bool Seen(const std::string& key, int seq) const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.contains({key, seq});
  }
  int seals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seals_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<D> all_;
  std::set<std::pair<std::string, int>> seen_;
  int seals_ = 0;
};

// The parameter: the producer routes by the stream (SPEC D4, the default) or by the group.
class ReshardFlow : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, kStream, kGroup, 4,
                                             rsc::testing::FastLeases()));
    http_ = std::make_unique<HttpClient>(coordinator_->Port());
  }

  std::unique_ptr<Consumer> MakeConsumer(Deliveries* out) {
    return rsc::testing::MakeLiveConsumer(*coordinator_, redis_, kStream, kGroup,
                                          [out](const Message& m) {
                                            out->Add(m);
                                            return HandlerResult::Ok();
                                          });
  }

  json::value View() { return http_->Get(std::string("/v1/streams/") + kStream).json; }

  // State of `generation` in the stream view ("absent" if not listed).
  std::string StateOf(int generation) {
    const json::value v = View();
    if (!v.is_object() || !v.as_object().contains("generations")) return "no view";
    for (const json::value& g : v.at("generations").as_array()) {
      if (JsonInt(g, "generation") == generation) return std::string(g.at("state").as_string());
    }
    return "absent";
  }

  // Shard id → key of `generation`.
  std::map<int32_t, std::string> ShardsOf(int generation) {
    std::map<int32_t, std::string> out;
    const json::value v = View();
    for (const json::value& g : v.at("generations").as_array()) {
      if (JsonInt(g, "generation") != generation) continue;
      for (const json::value& s : g.at("shards").as_array()) {
        out[static_cast<int32_t>(JsonInt(s, "id"))] = std::string(s.at("stream").as_string());
      }
    }
    return out;
  }

  HttpResult Reshard(int shards) {
    const int64_t revision = JsonInt(View(), "revision");
    return http_->Post(
        std::string("/v1/streams/") + kStream + "/reshard",
        json::value(json::object{{"expectedLayoutRevision", revision}, {"shardCount", shards}}));
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  std::unique_ptr<HttpClient> http_;
};

TEST_P(ReshardFlow, FourToEightToTwoUnderLoadLosesNothingAndKeepsKeyOrder) {
  Deliveries got;
  std::unique_ptr<Consumer> a = MakeConsumer(&got);
  std::unique_ptr<Consumer> b = MakeConsumer(&got);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a->Start();
  b->Start();
  auto reading = [&] { return rsc::testing::ReadingUnion({a.get(), b.get()}); };
  auto both = [&] {
    return "a: " + rsc::testing::DescribeConsumer(a->Status()) +
           "\nb: " + rsc::testing::DescribeConsumer(b->Status());
  };
  ASSERT_TRUE(WaitFor([&] { return reading().size() == 4; }, 15s, "all 4 shards read")) << both();

  std::unique_ptr<Producer> producer =
      rsc::testing::MakeLiveProducer(*coordinator_, redis_, kStream, GetParam() ? "" : kGroup);
  ASSERT_NE(producer, nullptr);
  PublishLoop loop(producer.get(), kKeys);
  ASSERT_TRUE(WaitFor([&] { return loop.published() >= 1000 || !loop.fatal().empty(); }, 10s,
                      "1000 messages on 4 shards"));

  // 4 → 8 (generation 1), 8 → 2 (generation 2), each under load, each to retirement.
  int generation = 0;
  for (const int shards : {8, 2}) {
    const HttpResult r = Reshard(shards);
    ASSERT_EQ(r.status, 200) << r.Describe();
    ++generation;
    ASSERT_TRUE(WaitFor([&] { return StateOf(generation) == "ACTIVE"; }, 10s,
                        "generation " + std::to_string(generation) + " ACTIVE"))
        << StateOf(generation);
    const int64_t at = loop.published();
    ASSERT_TRUE(WaitFor([&] { return loop.published() >= at + 500 || !loop.fatal().empty(); }, 10s,
                        "500 messages on the new generation"));
    ASSERT_TRUE(WaitFor([&] { return StateOf(generation - 1) == "RETIRED"; }, 30s,
                        "generation " + std::to_string(generation - 1) + " read to its end"))
        << StateOf(generation - 1) << "\n"
        << both();
  }
  const std::map<int32_t, std::string> last = ShardsOf(2);
  ASSERT_EQ(last.size(), 2U);
  EXPECT_GE(last.begin()->first, 12) << "D2: ids above every id used before (0-3, 4-11)";
  std::set<int32_t> last_ids;
  for (const auto& [id, key] : last) last_ids.insert(id);
  EXPECT_TRUE(WaitFor([&] { return reading() == last_ids; }, 15s,
                      "the consumers read exactly the last generation's shards"))
      << both();

  loop.Stop();
  ASSERT_EQ(loop.fatal(), "");
  std::string first_errors;
  for (const std::string& m : loop.ErrorMessages()) first_errors += "\n  " + m;
  EXPECT_TRUE(loop.Errors().empty())
      << "RS2: callers see no failure across the seals; first errors:" << first_errors;
  ::testing::Test::RecordProperty("seal_refresh_waits",
                                  static_cast<int>(producer->Metrics().seal_refresh_waits));

  const std::map<std::string, std::vector<int>> sent = loop.Sent();
  const bool all_read = WaitFor(
      [&] {
        for (const auto& [key, seqs] : sent) {
          for (int seq : seqs) {
            if (!got.Seen(key, seq)) return false;
          }
        }
        return true;
      },
      30s, "every acknowledged publish consumed");
  EXPECT_TRUE(all_read) << both();
  EXPECT_EQ(got.seals(), 0) << "RS3: a seal entry reached a handler";

  // RS4: per key, first deliveries in increasing seq order, across the generations.
  std::map<std::string, int> highest;
  std::set<std::pair<std::string, int>> delivered;
  int inversions = 0;
  std::string first_inversion;
  for (const Deliveries::D& d : got.All()) {
    if (!delivered.insert({d.key, d.seq}).second) continue;  // a redelivery
    auto [it, fresh] = highest.try_emplace(d.key, d.seq);
    if (!fresh && d.seq < it->second) {
      if (inversions++ == 0) {
        first_inversion = d.key + " seq " + std::to_string(d.seq) + " (shard " +
                          std::to_string(d.shard) + ") after seq " + std::to_string(it->second);
      }
    }
    it->second = std::max(it->second, d.seq);
  }
  EXPECT_EQ(inversions, 0) << "first: " << first_inversion;
  int64_t total = 0;
  for (const auto& [key, seqs] : sent) total += static_cast<int64_t>(seqs.size());
  std::cout << "[ReshardFlow] published=" << total << " deliveries=" << got.All().size()
            << " seal_refresh_waits=" << producer->Metrics().seal_refresh_waits
            << " inversions=" << inversions << "\n";

  a->Stop();
  b->Stop();
  producer->Close();
}

INSTANTIATE_TEST_SUITE_P(Routing, ReshardFlow, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "ByStream" : "ByGroup";
                         });

}  // namespace
}  // namespace rsc
