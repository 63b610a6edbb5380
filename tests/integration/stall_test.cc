// Level 2, issue 8 item 4: "any client can stall a group". Heartbeats need no token; an
// unknown member id claiming every shard with a made-up metadataVersion (2^62), or with a
// wrong lineage at version 1, every 200 ms used to record a correction round and blockers
// for as long as it went on: honest members got REVOKE_PENDING, a newcomer got nothing.
// Against a real coordinator and Redis: during such an attack honest members keep getting
// OK, a newcomer gets its shards, and no round starts (claims with a lineage token the group
// never issued are answered, counted and logged, but are no evidence of lost writes).

#include <gtest/gtest.h>

#include <thread>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kP = "orders";
constexpr const char* kG = "stall";

class StallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    coord_ = std::make_unique<CoordinatorProcess>(CoordOpts(redis_));
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
    attacker_http_ = std::make_unique<HttpClient>(coord_->Port());
    ASSERT_TRUE(CreateGroup(*http_, kP, kG, 8, ShortLeases()));
  }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }

  // One heartbeat round of every honest member; counts their statuses.
  void BeatHonest() {
    for (Consumer* c : honest_) {
      HttpResult r = Beat(*http_, *c, kP, kG);
      ASSERT_EQ(r.status, 200) << c->id << ": " << r.Describe();
      ++beats_;
      ok_ += c->last_status == "OK" ? 1 : 0;
    }
  }

  // Runs honest heartbeats every 500 ms (the group's interval) and `attack` every 200 ms
  // for `length`; `at_2s` runs once two seconds in.
  template <class F, class G>
  void RunFor(std::chrono::milliseconds length, F&& attack, G&& at_2s) {
    const auto start = std::chrono::steady_clock::now();
    auto next_honest = start;
    bool fired = false;
    while (std::chrono::steady_clock::now() - start < length) {
      attack();
      if (std::chrono::steady_clock::now() >= next_honest) {
        BeatHonest();
        next_honest += 500ms;
      }
      if (!fired && std::chrono::steady_clock::now() - start >= 2s) {
        fired = true;
        at_2s();
      }
      std::this_thread::sleep_for(200ms);  // the attack's pace, not a synchronisation
    }
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::unique_ptr<HttpClient> http_, attacker_http_;
  Consumer a_{"honest-a"}, b_{"honest-b"};
  std::vector<Consumer*> honest_{&a_, &b_};
  int beats_ = 0, ok_ = 0;
};

TEST_F(StallTest, ForgedVersionsFromAnUnknownMemberStallNothing) {
  // Settle, and run past the group key's first member lease (3 s), in which claims it cannot
  // verify still count (a recreated group's old consumers).
  RunFor(
      4s, [] {}, [] {});
  ASSERT_EQ(a_.owned.size() + b_.owned.size(), 8u);

  const std::string id_prefix = "intruder-";
  int n = 0;
  auto attack = [&](int64_t version, const std::string& lineage) {
    json::array all;
    for (int s = 0; s < 8; ++s) all.push_back(s);
    json::object body{{"memberId", id_prefix + std::to_string(n++ % 4)},
                      {"memberEpoch", 1},
                      {"metadataVersion", version},
                      {"lineage", lineage},
                      {"ownedShards", all}};
    HttpResult r = attacker_http_->Post(HeartbeatPath(kP, kG), json::value(body));
    EXPECT_EQ(r.status, 409) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "UNKNOWN_MEMBER_ID") << r.Describe();
  };
  Consumer c("newcomer-c");
  beats_ = ok_ = 0;
  RunFor(
      8s, [&] { attack(int64_t{1} << 62, "forged"); }, [&] { honest_.push_back(&c); });
  EXPECT_FALSE(c.owned.empty()) << "the newcomer got shards during the attack; last answer "
                                << json::serialize(c.last);
  EXPECT_EQ(a_.owned.size() + b_.owned.size() + c.owned.size(), 8u);
  EXPECT_GE(ok_, beats_ * 8 / 10) << ok_ << " of " << beats_ << " honest heartbeats were OK";

  // A wrong lineage at version 1 (inside the lineage window): not a divergence either.
  beats_ = ok_ = 0;
  RunFor(
      4s, [&] { attack(1, "00000000000000000000000000000000"); }, [] {});
  EXPECT_EQ(ok_, beats_) << ok_ << " of " << beats_ << " honest heartbeats were OK";

  HttpResult view = http_->Get(GroupPath(kP, kG));
  ASSERT_EQ(view.status, 200) << view.Describe();
  EXPECT_TRUE(view.json.at("correctionRound").is_null()) << view.body;
  EXPECT_GT(Metric(*http_, "rsc_unproven_client_versions_total"), 20);
  EXPECT_EQ(Metric(*http_, "rsc_metadata_version_regressions_total"), 0);
  EXPECT_TRUE(coord_->LogContains("event=unproven_version")) << coord_->LogTail(10);
}

}  // namespace
}  // namespace rsc::integration
