// Contract suite (ENGINEERING §1): the same operation scripts run against the in-memory
// MemoryStore used by the simulator and against RedisStore on a real redis-server, and
// must produce identical traces. A fake that drifts from Redis fails here.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/codec.h"
#include "core/decide.h"
#include "redis/redis_store.h"
#include "redis/redis_url.h"
#include "sim/memory_store.h"
#include "support/redis_process.h"

namespace rsc::testing {
namespace {

constexpr TimeMs kNow = 1'900'000'000'000;

class FixedClock : public Clock {
 public:
  TimeMs NowMs() override { return kNow; }
};
class CountingTokens : public TokenSource {
 public:
  std::string NewToken() override { return fmt::format("tok{:08d}", ++n_); }
  int n_ = 0;
};

// What a script can do besides calling the store: the raw edits an operator, a failover
// or a restore can make to the keys.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual MetadataStore& store() = 0;
  virtual void RawSetField(const GroupKey& k, const std::string& f, const std::string& v) = 0;
  virtual void RawDeleteHash(const GroupKey& k) = 0;
  virtual void RawSetLayoutField(const std::string& p, const std::string& f,
                                 const std::string& v) = 0;
};

class MemoryBackend : public Backend {
 public:
  MemoryBackend() : store_(clock_, tokens_) {}
  MetadataStore& store() override { return store_; }
  void RawSetField(const GroupKey& k, const std::string& f, const std::string& v) override {
    store_.SetField(k, f, v);
  }
  void RawDeleteHash(const GroupKey& k) override { store_.DeleteHash(k); }
  void RawSetLayoutField(const std::string& p, const std::string& f,
                         const std::string& v) override {
    store_.SetLayoutField(p, f, v);
  }

 private:
  FixedClock clock_;
  CountingTokens tokens_;
  sim::MemoryStore store_;
};

class RedisBackend : public Backend {
 public:
  explicit RedisBackend(RedisProcess& redis) : redis_(redis) {
    auto url = redis::ParseRedisUrl(redis.Url());
    auto s = redis::RedisStore::Open(*url, {});
    EXPECT_TRUE(s.ok());
    store_ = std::move(s).value();
  }
  MetadataStore& store() override { return *store_; }
  void RawSetField(const GroupKey& k, const std::string& f, const std::string& v) override {
    redis_.Cli()->Run({"HSET", "redis-stream:coord:{" + k.Tag() + "}:metadata", f, v});
  }
  void RawDeleteHash(const GroupKey& k) override {
    redis_.Cli()->Run({"DEL", "redis-stream:coord:{" + k.Tag() + "}:metadata"});
  }
  void RawSetLayoutField(const std::string& p, const std::string& f,
                         const std::string& v) override {
    redis_.Cli()->Run({"HSET", "redis-stream:coord:{" + p + "}:layout", f, v});
  }

 private:
  RedisProcess& redis_;
  std::unique_ptr<redis::RedisStore> store_;
};

const GroupKey kKey{"orders", "billing"};

GroupMetadata Meta(int members) {
  auto m = DecideCreate(CreateGroupRequest{"orders", "billing", 4, {}}, Env{kNow, "l1"}).value();
  m.updated_ms = kNow;
  for (int i = 0; i < members; ++i) {
    Member mem;
    mem.id = MemberId("m" + std::to_string(i));
    mem.joined_ms = kNow;
    m.members.push_back(mem);
  }
  return m;
}

GroupMetadata Bumped(GroupMetadata m) {
  m.version = MetadataVersion(m.version.value() + 1);
  m.lineage = "l" + std::to_string(m.version.value());
  m.lineage_history.push_back({m.version, m.lineage});
  return m;
}

// Results are traced as text without volatile parts (tokens, messages).
std::string Trace(const Result<StoredGroup>& r) {
  if (!r.ok()) return fmt::format("load {}", ErrorCodeName(r.error().code));
  std::string live;
  for (const auto& [id, dl] : r->liveness.deadline_ms) live += fmt::format("{}={} ", id, dl - kNow);
  return fmt::format("load rev={} v={} members={} complete={} live=[{}]", r->revision.value(),
                     r->meta->version.value(), r->meta->members.size(), r->liveness.complete, live);
}
std::string Trace(const Result<CasOutcome>& r) {
  if (!r.ok()) return fmt::format("cas {}", ErrorCodeName(r.error().code));
  return fmt::format("cas applied={} rev={}", r->applied, r->revision.value());
}
std::string Trace(const Result<StoreRevision>& r) {
  if (!r.ok()) return fmt::format("rev {}", ErrorCodeName(r.error().code));
  return fmt::format("rev {}", r->value());
}
std::string Trace(const Result<std::optional<StoredLayout>>& r) {
  if (!r.ok()) return fmt::format("layout {}", ErrorCodeName(r.error().code));
  if (!r->has_value()) return "layout none";
  return fmt::format("layout rev={} v={} groups={}", (*r)->revision.value(), (*r)->layout.version,
                     (*r)->layout.groups.size());
}
Layout StreamLayout(int64_t version) {
  Layout l = DeriveGeneration0("orders", 4, GroupConfig{}, {}, {}, "l").value();
  l.version = version;
  l.groups = {"billing"};
  return l;
}
std::string Trace(const Result<bool>& r) {
  if (!r.ok()) return fmt::format("confirm {}", ErrorCodeName(r.error().code));
  return fmt::format("confirm {}", *r);
}
std::string Trace(const Status& s) {
  return s.ok() ? "ok" : std::string(ErrorCodeName(s.error().code));
}

using Script = std::function<std::vector<std::string>(Backend&)>;

struct NamedScript {
  const char* name;
  Script run;
};

const std::vector<NamedScript>& Scripts() {
  static const std::vector<NamedScript> scripts = {
      {"CreateLoadCasConflict",
       [](Backend& b) {
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Load(kKey, kNow)));
         t.push_back(Trace(s.Create(Meta(0), kNow)));
         t.push_back(Trace(s.Create(Meta(0), kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));
         GroupMetadata next = Bumped(Meta(0));
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow)));
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));
         return t;
       }},
      {"LivenessDueAndComplete",
       [](Backend& b) {
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(2), kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));  // no liveness at all: complete
         LivenessUpdate u;
         u.set = {{"m0", kNow - 5}, {"m1", kNow + 5000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, u, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));  // counts agree: only due entries
         LivenessUpdate rm;
         rm.remove = {"m1"};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, rm, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));  // counts disagree: everything
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(9), nullptr, u, kNow)));
         auto all = s.LoadAllLiveness(kKey);
         t.push_back(fmt::format("all={}", all.ok() ? all->deadline_ms.size() : 99));
         return t;
       }},
      {"KeyLossFailsClosedNeverRecreated",
       [](Backend& b) {
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(1), kNow)));
         b.RawDeleteHash(kKey);
         t.push_back(Trace(s.Load(kKey, kNow)));
         GroupMetadata next = Bumped(Meta(1));
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));
         t.push_back(Trace(s.Delete(kKey, StoreRevision(1))));
         auto groups = s.ListGroups();
         t.push_back(fmt::format("groups={}", groups.ok() ? groups->size() : 99));
         return t;
       }},
      {"CorruptionIsUnreadable",
       [](Backend& b) {
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(0), kNow)));
         b.RawSetField(kKey, "schemaVersion", "99");
         t.push_back(Trace(s.Load(kKey, kNow)));
         b.RawSetField(kKey, "schemaVersion", "1");
         b.RawSetField(kKey, "layoutVersion", "7");
         t.push_back(Trace(s.Load(kKey, kNow)));
         b.RawSetField(kKey, "layoutVersion", "1");
         b.RawSetField(kKey, "aggregate", "{not json");
         t.push_back(Trace(s.Load(kKey, kNow)));
         b.RawSetField(kKey, "aggregate", EncodeAggregate(Meta(0)));
         b.RawSetField(kKey, "revision", "abc");
         t.push_back(Trace(s.Load(kKey, kNow)));
         return t;
       }},
      {"DeleteAndRestoreRevisions",
       [](Backend& b) {
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(1), kNow)));
         t.push_back(Trace(s.Delete(kKey, StoreRevision(7))));
         t.push_back(Trace(s.Restore(Bumped(Meta(1)), kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));
         t.push_back(Trace(s.Delete(kKey, StoreRevision(2))));
         t.push_back(Trace(s.Load(kKey, kNow)));
         t.push_back(Trace(s.Delete(kKey, StoreRevision(2))));
         t.push_back(Trace(s.Restore(Meta(1), kNow)));
         return t;
       }},
      {"OutOfRangeRevisionIsUnreadableAndARestoreStartsAtOne",
       [](Backend& b) {
         // A revision no coordinator can have loaded (beyond 2^53-1, where Lua's doubles
         // stop being exact) fails closed, and a restore over it starts afresh.
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(1), kNow)));
         b.RawSetField(kKey, "revision", "9007199254740993");
         t.push_back(Trace(s.Load(kKey, kNow)));
         b.RawSetField(kKey, "revision", "-4");
         t.push_back(Trace(s.Load(kKey, kNow)));
         t.push_back(Trace(s.Restore(Meta(1), kNow)));
         t.push_back(Trace(s.Load(kKey, kNow)));
         b.RawSetField(kKey, "revision", "9007199254740990");
         t.push_back(Trace(s.Load(kKey, kNow)));
         t.push_back(Trace(s.Restore(Meta(1), kNow)));
         return t;
       }},
      {"LivenessRenewalNeverShortensADeadline",
       [](Backend& b) {
         // A coordinator paused inside its section (mutex expired) writes a deadline from
         // its stale clock after another one renewed the member: the later deadline stays.
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(1), kNow)));
         LivenessUpdate renewed;
         renewed.set = {{"m0", kNow + 5000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, renewed, kNow)));
         LivenessUpdate stale;
         stale.set = {{"m0", kNow + 1000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, stale, kNow)));
         auto all = s.LoadAllLiveness(kKey);
         t.push_back(fmt::format("m0={}", all.ok() ? all->deadline_ms["m0"] - kNow : -1));
         LivenessUpdate later;
         later.set = {{"m0", kNow + 7000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, later, kNow)));
         all = s.LoadAllLiveness(kKey);
         t.push_back(fmt::format("m0={}", all.ok() ? all->deadline_ms["m0"] - kNow : -1));
         return t;
       }},
      {"ARemovalOfAMemberRenewedSinceTheLoadIsRefused",
       [](Backend& b) {
         // A section loaded m0's deadline (kNow + 1000) and decided to expire it; another
         // coordinator renewed it meanwhile (a liveness-only write: same revision). The
         // removal, bound to what the section loaded, must fail as a whole.
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.Create(Meta(2), kNow)));
         LivenessUpdate seed;
         seed.set = {{"m0", kNow + 1000}, {"m1", kNow + 1000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, seed, kNow)));
         LivenessUpdate renewed;
         renewed.set = {{"m0", kNow + 5000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, renewed, kNow)));
         GroupMetadata one = Bumped(Meta(2));
         one.members.erase(one.members.begin());
         LivenessUpdate expire;
         expire.remove = {"m0"};
         expire.remove_if_at_most = {{"m0", kNow + 1000}};
         expire.set = {{"m1", kNow + 2000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &one, expire, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow + 10000)));
         // "Had none" (-1) while it has one: refused too.
         expire.remove_if_at_most = {{"m0", kNoDeadline}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &one, expire, kNow)));
         // Bound to the renewed deadline: applied, m0 gone, m1 raised.
         expire.remove_if_at_most = {{"m0", kNow + 5000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &one, expire, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow + 10000)));
         // Unbound (a leave): removed whatever its deadline.
         LivenessUpdate leave;
         leave.remove = {"m1"};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(2), nullptr, leave, kNow)));
         t.push_back(Trace(s.Load(kKey, kNow + 10000)));
         return t;
       }},
      {"LayoutCreateCasAndCorruption",
       [](Backend& b) {
         // SPEC D1: the layout hash, created only if absent (expected 0), CAS on revision,
         // a corrupt or foreign record fails closed.
         std::vector<std::string> t;
         auto& s = b.store();
         t.push_back(Trace(s.LoadLayout("orders")));
         t.push_back(
             Trace(s.CompareAndSetLayout("orders", StoreRevision(0), StreamLayout(1), kNow)));
         t.push_back(
             Trace(s.CompareAndSetLayout("orders", StoreRevision(0), StreamLayout(2), kNow)));
         t.push_back(Trace(s.LoadLayout("orders")));
         t.push_back(
             Trace(s.CompareAndSetLayout("orders", StoreRevision(1), StreamLayout(2), kNow)));
         t.push_back(
             Trace(s.CompareAndSetLayout("orders", StoreRevision(1), StreamLayout(3), kNow)));
         t.push_back(Trace(s.LoadLayout("orders")));
         // RS2's barrier: the current revision is confirmed, a moved or absent one is not.
         t.push_back(Trace(s.ConfirmLayout("orders", StoreRevision(2), kNow)));
         t.push_back(Trace(s.ConfirmLayout("orders", StoreRevision(1), kNow)));
         t.push_back(Trace(s.ConfirmLayout("none", StoreRevision(1), kNow)));
         b.RawSetLayoutField("orders", "schemaVersion", "9");
         t.push_back(Trace(s.LoadLayout("orders")));
         b.RawSetLayoutField("orders", "schemaVersion", "1");
         b.RawSetLayoutField("orders", "layout", "{\"stream\":");
         t.push_back(Trace(s.LoadLayout("orders")));
         b.RawSetLayoutField("orders", "revision", "x");
         t.push_back(
             Trace(s.CompareAndSetLayout("orders", StoreRevision(2), StreamLayout(3), kNow)));
         // A hash without the fields (an operator's stray HSET) is unreadable, not absent.
         b.RawSetLayoutField("other", "note", "x");
         t.push_back(Trace(s.LoadLayout("other")));
         return t;
       }},
      {"SteadyRenewalOnlyWhenALoadWouldAgree",
       [](Backend& b) {
         // renew_if_steady.lua / MemoryStore::RenewIfSteady (issue 14): renews only while
         // the aggregate is the loaded one, no deadline is due, the liveness set has one
         // entry per member and no section holds the mutex; never lowers a deadline.
         std::vector<std::string> t;
         auto& s = b.store();
         using std::chrono::milliseconds;
         auto renew = [&](const AggregateStamp& st, size_t members, TimeMs m0) {
           auto r = s.RenewIfSteady(kKey, st, members, {{"m0", m0}}, kNow);
           t.push_back(r.ok() ? fmt::format("renew {}", *r)
                              : fmt::format("renew {}", ErrorCodeName(r.error().code)));
           auto all = s.LoadAllLiveness(kKey);
           t.push_back(fmt::format("m0={}", all.ok() && all->deadline_ms.count("m0")
                                                ? all->deadline_ms["m0"] - kNow
                                                : -1));
         };
         t.push_back(Trace(s.Create(Meta(2), kNow)));
         auto loaded = s.Load(kKey, kNow);
         t.push_back(Trace(loaded));
         if (!loaded.ok()) return t;
         const AggregateStamp st = loaded->stamp;
         t.push_back(fmt::format("stamp rev={} token={} len={}", st.revision.value(),
                                 !st.write_token.empty(), st.aggregate_len > 0));
         renew(st, 2, kNow + 9000);  // no liveness at all yet: refused (a Load is complete)
         LivenessUpdate u;
         u.set = {{"m0", kNow + 5000}, {"m1", kNow + 5000}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, u, kNow)));
         renew(st, 2, kNow + 9000);  // steady: renewed
         renew(st, 2, kNow + 1000);  // never lowered
         renew(st, 3, kNow + 9500);  // member count differs: refused
         AggregateStamp other = st;
         other.write_token = "someone-else";
         renew(other, 2, kNow + 9500);  // another aggregate: refused
         other = st;
         other.aggregate_len += 1;
         renew(other, 2, kNow + 9500);
         auto lock = s.Lock(kKey, milliseconds(60000), milliseconds(0));
         renew(st, 2, kNow + 9500);  // a section runs: refused
         if (lock.ok() && lock->has_value()) t.push_back(Trace(s.Unlock(kKey, **lock)));
         renew(st, 2, kNow + 9600);  // renewed again
         LivenessUpdate due;
         due.remove = {"m1"};
         due.set = {{"m2", kNow}};
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), nullptr, due, kNow)));
         renew(st, 2, kNow + 9700);  // m2 is due at now: refused
         GroupMetadata next = Bumped(Meta(2));
         t.push_back(Trace(s.CompareAndSet(kKey, StoreRevision(1), &next, {}, kNow)));
         renew(st, 2, kNow + 9800);  // a newer revision: refused
         b.RawSetField(kKey, "schemaVersion", "9");
         auto fresh = s.Load(kKey, kNow);
         t.push_back(Trace(fresh));
         return t;
       }},
      {"MutexIsExclusive",
       [](Backend& b) {
         std::vector<std::string> t;
         auto& s = b.store();
         using std::chrono::milliseconds;
         auto a = s.Lock(kKey, milliseconds(60000), milliseconds(0));
         t.push_back(fmt::format("lock1={}", a.ok() && a->has_value()));
         auto c = s.Lock(kKey, milliseconds(60000), milliseconds(0));
         t.push_back(fmt::format("lock2={}", c.ok() && c->has_value()));
         t.push_back(Trace(s.Unlock(kKey, "someone-else")));
         auto d = s.Lock(kKey, milliseconds(60000), milliseconds(0));
         t.push_back(fmt::format("lock3={}", d.ok() && d->has_value()));
         if (a.ok() && a->has_value()) t.push_back(Trace(s.Unlock(kKey, **a)));
         auto e = s.Lock(kKey, milliseconds(60000), milliseconds(0));
         t.push_back(fmt::format("lock4={}", e.ok() && e->has_value()));
         return t;
       }},
  };
  return scripts;
}

class Contract : public ::testing::TestWithParam<size_t> {};

TEST_P(Contract, MemoryStoreMatchesRealRedis) {
  const NamedScript& script = Scripts()[GetParam()];
  RedisProcess redis;
  ASSERT_TRUE(redis.Start());
  RedisBackend real(redis);
  MemoryBackend fake;
  const auto want = script.run(real);
  const auto got = script.run(fake);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << script.name << " step " << i;
  }
}

// The fake's answer is also pinned, so "both wrong the same way" cannot pass.
TEST(ContractExpectations, LivenessRenewalNeverShortensADeadline) {
  MemoryBackend fake;
  for (const NamedScript& s : Scripts()) {
    if (std::string(s.name) != "LivenessRenewalNeverShortensADeadline") continue;
    const auto t = s.run(fake);
    ASSERT_EQ(t.size(), 6u);
    EXPECT_EQ(t[3], "m0=5000") << "a stale renewal must not shorten the deadline";
    EXPECT_EQ(t[5], "m0=7000") << "a later renewal still extends it";
  }
}

TEST(ContractExpectations, ARemovalOfAMemberRenewedSinceTheLoadIsRefused) {
  MemoryBackend fake;
  for (const NamedScript& s : Scripts()) {
    if (std::string(s.name) != "ARemovalOfAMemberRenewedSinceTheLoadIsRefused") continue;
    const auto t = s.run(fake);
    ASSERT_EQ(t.size(), 10u);
    EXPECT_EQ(t[3], "cas applied=false rev=1") << "m0 was renewed after the load";
    EXPECT_EQ(t[4], "load rev=1 v=1 members=2 complete=false live=[m0=5000 m1=1000 ]")
        << "a refused write changes nothing";
    EXPECT_EQ(t[5], "cas applied=false rev=1");
    EXPECT_EQ(t[6], "cas applied=true rev=2");
    EXPECT_EQ(t[7], "load rev=2 v=2 members=1 complete=false live=[m1=2000 ]");
    EXPECT_EQ(t[8], "cas applied=true rev=2");
    EXPECT_EQ(t[9], "load rev=2 v=2 members=1 complete=true live=[]");
  }
}

TEST(ContractExpectations, LayoutCreateCasAndCorruption) {
  MemoryBackend fake;
  for (const NamedScript& s : Scripts()) {
    if (std::string(s.name) != "LayoutCreateCasAndCorruption") continue;
    const auto t = s.run(fake);
    const std::vector<std::string> want = {"layout none",
                                           "cas applied=true rev=1",
                                           "cas applied=false rev=1",
                                           "layout rev=1 v=1 groups=1",
                                           "cas applied=true rev=2",
                                           "cas applied=false rev=2",
                                           "layout rev=2 v=2 groups=1",
                                           "confirm true",
                                           "confirm false",
                                           "confirm false",
                                           "layout METADATA_UNREADABLE",
                                           "layout METADATA_UNREADABLE",
                                           "cas METADATA_UNREADABLE",
                                           "layout METADATA_UNREADABLE"};
    EXPECT_EQ(t, want);
  }
}

TEST(ContractExpectations, SteadyRenewalOnlyWhenALoadWouldAgree) {
  MemoryBackend fake;
  for (const NamedScript& s : Scripts()) {
    if (std::string(s.name) != "SteadyRenewalOnlyWhenALoadWouldAgree") continue;
    const auto t = s.run(fake);
    const std::vector<std::string> want = {"rev 1",
                                           "load rev=1 v=1 members=2 complete=true live=[]",
                                           "stamp rev=1 token=true len=true",
                                           "renew false",
                                           "m0=-1",
                                           "cas applied=true rev=1",
                                           "renew true",
                                           "m0=9000",
                                           "renew true",
                                           "m0=9000",
                                           "renew false",
                                           "m0=9000",
                                           "renew false",
                                           "m0=9000",
                                           "renew false",
                                           "m0=9000",
                                           "renew false",
                                           "m0=9000",
                                           "ok",
                                           "renew true",
                                           "m0=9600",
                                           "cas applied=true rev=1",
                                           "renew false",
                                           "m0=9600",
                                           "cas applied=true rev=2",
                                           "renew false",
                                           "m0=9600",
                                           "load METADATA_UNREADABLE"};
    EXPECT_EQ(t, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Scripts, Contract, ::testing::Range<size_t>(0, 10),
                         [](const auto& info) { return std::string(Scripts()[info.param].name); });

}  // namespace
}  // namespace rsc::testing
