// The steady heartbeat path (issue 14; GroupService::TrySteadyBatch, renew_if_steady.lua)
// against a real redis-server: a steady heartbeat costs one Redis round trip and no mutex,
// and whatever a locked load would have seen differently — another coordinator's write, a
// member that is due — sends the batch to the locked path, whose answer is the one given.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/core_harness.h"
#include "redis/redis_store.h"
#include "redis/redis_url.h"
#include "server/group_service.h"
#include "server/system.h"
#include "support/redis_process.h"

namespace rsc::testing {
namespace {

class ManualClock : public Clock {
 public:
  TimeMs NowMs() override { return now; }
  std::atomic<TimeMs> now{1'900'000'000'000};
};

class RenewalLog : public ServiceObserver {
 public:
  void OnSteadyRenewal(const GroupKey&, bool applied) override {
    (applied ? applied_ : refused_).fetch_add(1);
  }
  int applied() const { return applied_; }
  int refused() const { return refused_; }

 private:
  std::atomic<int> applied_{0};
  std::atomic<int> refused_{0};
};

// One coordinator: its own store (and so its own connections and cache) and service.
struct Coordinator {
  explicit Coordinator(const std::string& url, ManualClock& clock) {
    auto parsed = redis::ParseRedisUrl(url);
    EXPECT_TRUE(parsed.ok());
    auto s = redis::RedisStore::Open(*parsed, {});
    EXPECT_TRUE(s.ok());
    store = std::move(s).value();
    service =
        std::make_unique<GroupService>(*store, clock, tokens, log, GroupServiceOptions{}, nullptr);
  }
  std::unique_ptr<redis::RedisStore> store;
  RandomTokens tokens;
  RenewalLog log;
  std::unique_ptr<GroupService> service;
};

// A member that behaves like a consumer draining at once (core_harness.h's FakeMember).
struct Member : FakeMember {
  explicit Member(std::string name) { id = std::move(name); }
  Result<HeartbeatResponse> Beat(GroupService& service, const GroupKey& key) {
    auto r = service.Heartbeat(key, Request());
    if (r.ok()) Observe(*r);
    return r;
  }
};

int64_t CommandCalls(RedisCli& cli, const char* command) {
  CliReply r = cli.Run({"INFO", "commandstats"});
  const std::string needle = std::string("cmdstat_") + command + ":calls=";
  const size_t at = r.str.find(needle);
  return at == std::string::npos ? 0 : std::atoll(r.str.c_str() + at + needle.size());
}

const GroupKey kKey{"orders", "billing"};

// Heartbeats every member until a whole round answers OK with nothing to revoke.
void Settle(GroupService& service, std::vector<Member*> members) {
  for (int round = 0; round < 20; ++round) {
    bool calm = true;
    for (Member* m : members) {
      auto r = m->Beat(service, kKey);
      ASSERT_TRUE(r.ok()) << r.error().message;
      calm = calm && r->status == HeartbeatStatus::kOk && r->revoke_shards.empty() &&
             r->pending_shards.empty();
    }
    if (calm) return;
  }
  FAIL() << "the group did not settle within 20 rounds";
}

// A redis-server, a manual clock and one coordinator with the group of 4 shards created.
class SteadyRenewal : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis.Start());
    c = std::make_unique<Coordinator>(redis.Url(), clock);
    ASSERT_TRUE(c->service->CreateGroup({"orders", "billing", 4, {}}, nullptr).ok());
  }
  RedisProcess redis;
  ManualClock clock;
  std::unique_ptr<Coordinator> c;
};

TEST_F(SteadyRenewal, ASteadyHeartbeatIsOneRoundTripWithoutTheMutex) {
  auto cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  Coordinator& c = *this->c;
  Member a("a");
  Settle(*c.service, {&a});
  ASSERT_EQ(a.owned.size(), 4u);

  clock.now += 3000;
  const int64_t evalsha = CommandCalls(*cli, "evalsha");
  const int64_t set = CommandCalls(*cli, "set");
  const int applied = c.log.applied();
  auto r = a.Beat(*c.service, kKey);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, HeartbeatStatus::kOk);
  EXPECT_EQ(r->assigned_shards.size(), 4u);
  EXPECT_EQ(c.log.applied(), applied + 1);
  EXPECT_EQ(CommandCalls(*cli, "evalsha") - evalsha, 1) << "one script, no load or unlock";
  EXPECT_EQ(CommandCalls(*cli, "set") - set, 0) << "no mutex taken";
  auto live = c.store->LoadAllLiveness(kKey);
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->deadline_ms["a"], clock.now + GroupConfig{}.member_lease_ms);
}

TEST_F(SteadyRenewal, AWriteByAnotherCoordinatorIsAnsweredFromTheNewState) {
  Coordinator& c1 = *c;
  Coordinator c2(redis.Url(), clock);
  Member a("a");
  Settle(*c1.service, {&a});
  const int64_t before = a.version;

  // b joins through the other coordinator: the group changes under c1's cached copy.
  Member b("b");
  auto joined = b.Beat(*c2.service, kKey);
  ASSERT_TRUE(joined.ok()) << joined.error().message;
  ASSERT_GT(joined->metadata_version, before);

  const int refused = c1.log.refused();
  auto r = a.Beat(*c1.service, kKey);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(c1.log.refused(), refused + 1) << "the cached aggregate is not the stored one";
  EXPECT_GE(r->metadata_version, joined->metadata_version) << "answered from the new state";
  EXPECT_FALSE(r->revoke_shards.empty()) << "a gives shards to b";
}

// A group deleted and created again starts at revision 1: the steady path must take the new
// group's aggregate as its basis, not keep the old one's higher revision (every batch would
// then be refused and pay a round trip more than the locked cycle alone).
TEST_F(SteadyRenewal, AGroupCreatedAgainIsRenewedOnItsOwnAggregate) {
  Coordinator& c = *this->c;
  Member a("a");
  Member b("b");
  Settle(*c.service, {&a, &b});
  Settle(*c.service, {&a, &b});  // a few revisions, so the old basis is well above 1
  auto view = c.service->DescribeGroup(kKey);
  ASSERT_TRUE(view.ok()) << view.error().message;
  ASSERT_GT(view->revision, 1);
  ASSERT_TRUE(c.service->DeleteGroup(kKey, view->revision, nullptr).ok());
  ASSERT_TRUE(c.service->CreateGroup({"orders", "billing", 4, {}}, nullptr).ok());
  Member a2("a");
  Settle(*c.service, {&a2});

  clock.now += 1000;
  const int applied = c.log.applied();
  const int refused = c.log.refused();
  ASSERT_TRUE(a2.Beat(*c.service, kKey).ok());
  EXPECT_EQ(c.log.applied(), applied + 1) << "renewed on the new group's aggregate";
  EXPECT_EQ(c.log.refused(), refused);
}

TEST_F(SteadyRenewal, ADueMemberSendsTheBatchToTheLockedPath) {
  Coordinator& c = *this->c;
  Member a("a");
  Member b("b");
  Settle(*c.service, {&a, &b});
  ASSERT_EQ(a.owned.size() + b.owned.size(), 4u);
  const int64_t lease = GroupConfig{}.member_lease_ms;

  clock.now += lease / 2;
  const int applied = c.log.applied();
  ASSERT_TRUE(a.Beat(*c.service, kKey).ok());
  EXPECT_EQ(c.log.applied(), applied + 1);

  // b's deadline passes; a's (renewed above) does not.
  clock.now += lease / 2 + 1;
  const int refused = c.log.refused();
  auto r = a.Beat(*c.service, kKey);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(c.log.refused(), refused + 1) << "b is due: a Load would not be empty";
  auto view = c.service->DescribeGroup(kKey);
  ASSERT_TRUE(view.ok()) << view.error().message;
  ASSERT_EQ(view->members.size(), 1u) << "the locked path expired b";
  EXPECT_EQ(view->members[0].member_id, "a");
}

}  // namespace
}  // namespace rsc::testing
