// Level 2: what real Redis does to the coordinator (SPEC L5, M2-M10, §10.1 scenarios 6-8,
// the PSYNC2 postmortem's failure classes): script cache flushes, restarts, a rollback to
// an older snapshot, and a failover to a replica that missed the last write.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

namespace fs = std::filesystem;

class RedisFailuresTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* c : {coord_.get(), coord2_.get()}) {
      if (c) std::cerr << "coordinator " << c->Pid() << " log:" << c->LogTail(40) << "\n";
    }
  }
  void StartCoordinator(const RedisProcess& redis) {
    coord_ = std::make_unique<CoordinatorProcess>(CoordOpts(redis));
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
  }

  std::unique_ptr<CoordinatorProcess> coord_, coord2_;
  std::unique_ptr<HttpClient> http_;
};

// L5: SCRIPT FLUSH between requests: every request still succeeds (NOSCRIPT -> reload),
// reads (load script) and writes (compare-and-set script) alike.
TEST_F(RedisFailuresTest, ScriptFlushIsSurvived) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start());
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(redis));
  auto cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  constexpr const char* kP = "flush";
  constexpr const char* kG = "g";
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("a"), b("b");
  for (int round = 0; round < 4; ++round) {
    ASSERT_TRUE(cli->Run({"SCRIPT", "FLUSH"}).ok());
    HttpResult r = Beat(*http_, a, kP, kG);
    ASSERT_EQ(r.status, 200) << "round " << round << ": " << r.Describe();
    ASSERT_TRUE(cli->Run({"SCRIPT", "FLUSH"}).ok());
    HttpResult rr = http_->Get(RoutingPath(kP, kG, a.version, a.lineage));
    ASSERT_EQ(rr.status, 200) << rr.Describe();
    ASSERT_TRUE(cli->Run({"SCRIPT", "FLUSH"}).ok());
    HttpResult rb = Beat(*http_, b, kP, kG);  // join (round 0) then heartbeats: writes
    ASSERT_EQ(rb.status, 200) << rb.Describe();
  }
  // The handoff completed across flushes.
  HttpResult ra = Beat(*http_, a, kP, kG);
  ASSERT_EQ(ra.status, 200) << ra.Describe();
  HttpResult rb = Beat(*http_, b, kP, kG);
  ASSERT_EQ(rb.status, 200) << rb.Describe();
  EXPECT_EQ(a.last_status, "OK");
  EXPECT_EQ(b.last_status, "OK");
  EXPECT_EQ(a.owned.size() + b.owned.size(), 4u);
  // The admin paths use scripts too (create, delete).
  ASSERT_TRUE(cli->Run({"SCRIPT", "FLUSH"}).ok());
  ASSERT_TRUE(CreateGroup(*http_, kP, "second", 4));  // the stream's layout (D3)
}

// SPEC §11 / L5: the reloads that kept the service alive are visible in /metrics
// (rsc_script_reloads_total, "Lua scripts reloaded after NOSCRIPT").
TEST_F(RedisFailuresTest, ScriptReloadsAreCountedInMetrics) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start());
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(redis));
  auto cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  ASSERT_TRUE(CreateGroup(*http_, "flush", "g", 1));
  Consumer a("a");
  ASSERT_EQ(Beat(*http_, a, "flush", "g").status, 200);
  const double before = Metric(*http_, "rsc_script_reloads_total");
  ASSERT_TRUE(cli->Run({"SCRIPT", "FLUSH"}).ok());
  ASSERT_EQ(Beat(*http_, a, "flush", "g").status, 200);
  // The counter may be exported with a delay (up to a few tick passes), not never.
  EXPECT_TRUE(WaitFor([&] { return Metric(*http_, "rsc_script_reloads_total") > before; }, 3s,
                      "rsc_script_reloads_total to count the NOSCRIPT recovery (SCRIPT FLUSH, "
                      "then a heartbeat succeeded)"));
}

// A redis-server restart mid-run (AOF keeps the data): requests during the outage get a
// retryable 503 REDIS_UNAVAILABLE, afterwards they succeed again on the same state.
TEST_F(RedisFailuresTest, RedisRestartIsSurvivedWithRetryable503sDuringTheOutage) {
  RedisProcessOptions ro;
  ro.appendonly = true;
  RedisProcess redis(ro);
  ASSERT_TRUE(redis.Start());
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(redis));
  constexpr const char* kP = "restart";
  constexpr const char* kG = "g";
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("a");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.last_status, "OK");
  const int64_t epoch = a.epoch;
  const int64_t version = a.version;

  // A background consumer keeps beating through the restart.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> unexpected;
  std::atomic<int> ok{0}, unavailable{0};
  std::atomic<int64_t> slowest_ms{0};
  std::thread background([&] {
    HttpClient h(coord_->Port(), 5s);
    Consumer b("b");
    while (!stop.load()) {
      const auto t0 = std::chrono::steady_clock::now();
      HttpResult r = Beat(h, b, kP, kG);
      const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
      if (ms > slowest_ms.load()) slowest_ms = ms;
      if (r.status == 200) {
        ++ok;
      } else if (r.status == 503 &&
                 (r.ErrorCode() == "REDIS_UNAVAILABLE" || r.ErrorCode() == "LOCK_TIMEOUT")) {
        ++unavailable;
      } else {
        std::lock_guard<std::mutex> lock(mu);
        unexpected.push_back(r.Describe());
      }
      std::this_thread::sleep_for(10ms);
    }
  });
  ASSERT_TRUE(WaitFor([&] { return ok.load() >= 3; }, 5s, "background consumer heartbeats"));

  ASSERT_TRUE(redis.Stop());
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpResult hb = http_->Post(HeartbeatPath(kP, kG), json::value(a.Request()));
    std::cout << "outage heartbeat " << i << ": " << hb.status << " after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - t0)
                     .count()
              << " ms\n";
    EXPECT_EQ(hb.status, 503) << hb.Describe();
    EXPECT_EQ(hb.ErrorCode(), "REDIS_UNAVAILABLE") << hb.Describe();
  }
  HttpResult routing = http_->Get(RoutingPath(kP, kG));
  EXPECT_EQ(routing.ErrorCode(), "REDIS_UNAVAILABLE") << routing.Describe();
  EXPECT_EQ(http_->Get("/readyz").status, 503);
  EXPECT_EQ(http_->Get("/healthz").status, 200);
  // The outage lasts until the background consumer has met it too: the requests above take
  // about a millisecond, less than the consumer's pause between heartbeats (CI: it once
  // slept through the whole outage).
  EXPECT_TRUE(WaitFor([&] { return unavailable.load() >= 1; }, 5s,
                      "the background consumer to get a retryable 503 during the outage"));

  ASSERT_TRUE(redis.Start());
  const auto restarted = std::chrono::steady_clock::now();
  HttpResult back;
  ASSERT_TRUE(WaitFor(
      [&] {
        back = http_->Post(HeartbeatPath(kP, kG), json::value(a.Request()));
        return back.status == 200;
      },
      10s, "a heartbeat to succeed after the restart"))
      << "last: " << back.Describe();
  std::cout << "first success "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - restarted)
                   .count()
            << " ms after the restart\n";
  a.Apply(back);
  EXPECT_EQ(a.epoch, epoch) << "membership lost across the restart: " << back.body;
  EXPECT_GE(a.version, version) << back.body;
  EXPECT_NE(a.last_status, "SYNC_METADATA") << "AOF kept every write: no regression expected";
  EXPECT_EQ(http_->Get("/readyz").status, 200);
  const int ok_before = ok.load();
  ASSERT_TRUE(WaitFor([&] { return ok.load() >= ok_before + 3; }, 5s,
                      "background heartbeats after the restart"));
  stop = true;
  background.join();
  EXPECT_GE(unavailable.load(), 1) << "the background consumer never saw the outage";
  std::cout << "background consumer: " << ok.load() << " OK, " << unavailable.load()
            << " retryable 503s, slowest answer " << slowest_ms.load() << " ms\n";
  for (const auto& u : unexpected) ADD_FAILURE() << "unexpected answer during restart: " << u;
}

// Scenario 6/7/8 with a real rollback: SAVE, more writes seen by a client, SHUTDOWN
// NOSAVE, the old dump restored. The client's next heartbeat (higher version + lineage)
// gets SYNC_METADATA with the stored, lower version (never the client's), repeated
// identically; routing says sync; the member unknown to the restored state has its claims
// recorded as blockers; the round ends once the blockers' leases passed.
TEST_F(RedisFailuresTest, RollbackToOlderSnapshotAnswersSyncMetadataWithStoredVersion) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start());
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(redis));
  auto cli = redis.Cli();
  ASSERT_NE(cli, nullptr);
  constexpr const char* kP = "rollback";
  constexpr const char* kG = "g";
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4, ShortLeases()));
  Consumer a("a");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.owned.size(), 4u);

  ASSERT_EQ(cli->Run({"SAVE"}).str, "OK");
  const std::string dump = redis.Dir() + "/dump.rdb";
  const std::string backup = redis.Dir() + "/backup.rdb";
  fs::copy_file(dump, backup, fs::copy_options::overwrite_existing);
  const int64_t saved_version = a.version;

  // More writes that A observes: B joins, A drains and revokes, B takes over.
  Consumer b("b");
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.last_status, "DRAIN");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);  // REVOKED
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  ASSERT_EQ(b.last_status, "OK");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.last_status, "OK");
  ASSERT_GE(a.version, saved_version + 2) << "A must have seen at least two newer versions";
  const int64_t seen_version = a.version;
  const std::string seen_lineage = a.lineage;

  // The rollback.
  ASSERT_TRUE(redis.Stop(/*save=*/false));
  fs::copy_file(backup, dump, fs::copy_options::overwrite_existing);
  ASSERT_TRUE(redis.Start());
  cli = redis.Cli();
  ASSERT_NE(cli, nullptr);

  const json::object a_req = a.Request();
  HttpResult s1 = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  ASSERT_TRUE(WaitFor(
      [&] {
        if (s1.status == 200) return true;
        s1 = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
        return s1.status == 200;
      },
      10s, "the coordinator to reach the restarted redis"))
      << s1.Describe();
  EXPECT_EQ(JsonStr(s1.json, "status"), "SYNC_METADATA") << s1.body;
  const int64_t answered = JsonInt(s1.json, "metadataVersion");
  EXPECT_LT(answered, seen_version) << "the stored version was bumped to the client's: " << s1.body;
  EXPECT_GT(answered, 0);
  EXPECT_NE(JsonStr(s1.json, "lineage"), seen_lineage) << s1.body;
  // A keeps only what the stored state gives it (it owned everything at the snapshot).
  for (int s : JsonInts(s1.json, "assignedShards")) EXPECT_TRUE(s >= 0 && s < 4);
  {
    HttpResult v = http_->Get(GroupPath(kP, kG));
    ASSERT_EQ(v.status, 200) << v.Describe();
    EXPECT_EQ(JsonInt(v.json, "metadataVersion"), answered) << v.body;
    EXPECT_FALSE(v.json.at("correctionRound").is_null()) << v.body;
    EXPECT_EQ(FindMember(v.json, "b"), nullptr) << "B is not in the restored state";
  }
  // Scenario 7: the SYNC_METADATA response lost -> the same request, the same answer.
  HttpResult s2 = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  ASSERT_EQ(s2.status, 200) << s2.Describe();
  EXPECT_EQ(s2.body, s1.body);
  // R5.1: a producer that saw the newer version is told to adopt the stored routing.
  {
    HttpResult r = http_->Get(RoutingPath(kP, kG, seen_version, seen_lineage));
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_TRUE(r.json.at("sync").as_bool()) << r.body;
    EXPECT_EQ(JsonInt(r.json, "metadataVersion"), answered) << r.body;
    HttpResult cur = http_->Get(RoutingPath(kP, kG, answered, JsonStr(s1.json, "lineage")));
    EXPECT_FALSE(cur.json.at("sync").as_bool()) << cur.body;
  }
  // B is unknown to the restored state: it must drop everything; its claims block.
  {
    const std::set<int> b_claims = b.owned;
    ASSERT_FALSE(b_claims.empty());
    HttpResult r = Beat(*http_, b, kP, kG);
    EXPECT_EQ(r.status, 409) << r.Describe();
    EXPECT_EQ(r.ErrorCode(), "UNKNOWN_MEMBER_ID") << r.Describe();
    HttpResult v = http_->Get(GroupPath(kP, kG));
    std::set<int> blocked;
    for (const json::value& bl : v.json.at("correctionRound").at("blockers").as_array()) {
      if (JsonStr(bl, "member") == "b") blocked.insert(static_cast<int>(JsonInt(bl, "shard")));
    }
    EXPECT_EQ(blocked, b_claims) << v.body;
  }
  // Applying SYNC_METADATA, A keeps what it still reads and is assigned; it gets OK again
  // only after B's blockers expired and the round ended (M6, scenario 8).
  a.Apply(s2);
  EXPECT_EQ(a.version, answered);
  HttpClient poll(coord_->Port());
  ASSERT_TRUE(WaitFor(
      [&] {
        HttpResult r = Beat(poll, a, kP, kG);
        if (r.status != 200) return false;
        EXPECT_TRUE(a.last_status == "OK" || a.last_status == "REVOKE_PENDING" ||
                    a.last_status == "SYNC_METADATA")
            << r.body;
        return a.last_status == "OK";
      },
      15s, "the correction round to end (A: OK)"));
  EXPECT_EQ(a.owned, (std::set<int>{0, 1, 2, 3}));
  HttpClient m(coord_->Port());
  EXPECT_GE(Metric(m, "rsc_metadata_version_regressions_total") +
                Metric(m, "rsc_client_version_ahead_total"),
            1);
}

// A failover that loses the last write (ENGINEERING §3 recipe): write, REPLICAOF NO ONE
// on the replica, write again on the old master (a client sees it), then the coordinator
// is pointed at the new master. The client's version/lineage is unknown there: M2 / M8.
TEST_F(RedisFailuresTest, ReplicaFailoverLosingTheLastWriteAnswersSyncMetadata) {
  RedisProcess master;
  ASSERT_TRUE(master.Start());
  RedisProcessOptions ro;
  ro.replicaof_port = master.Port();
  RedisProcess replica(ro);
  ASSERT_TRUE(replica.Start());
  auto mcli = master.Cli();
  auto rcli = replica.Cli();
  ASSERT_NE(mcli, nullptr);
  ASSERT_NE(rcli, nullptr);
  ASSERT_TRUE(WaitFor(
      [&] {
        return rcli->Run({"INFO", "replication"}).str.find("master_link_status:up") !=
               std::string::npos;
      },
      10s, "the replica to sync with the master"));

  ASSERT_NO_FATAL_FAILURE(StartCoordinator(master));
  constexpr const char* kP = "failover";
  constexpr const char* kG = "g";
  // Default (10 s) member lease: A's liveness on the replica dates from before the split.
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 4));
  Consumer a("a");
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.owned.size(), 4u);
  // WAIT only covers the calling client's own writes: write a marker after the
  // coordinator's writes; replication is one ordered stream, so its ack covers them all.
  ASSERT_TRUE(mcli->Run({"SET", "test:marker", "1"}).ok());
  CliReply waited = mcli->Run({"WAIT", "1", "5000"});
  ASSERT_EQ(waited.integer, 1) << waited.ToString();
  ASSERT_EQ(HGet(*rcli, MetadataKey(kP, kG), "revision"),
            HGet(*mcli, MetadataKey(kP, kG), "revision"));
  const int64_t replicated_version = a.version;

  // The replica is promoted; the old master still takes one more write, which A sees.
  ASSERT_TRUE(rcli->Run({"REPLICAOF", "NO", "ONE"}).ok());
  Consumer b("b");
  ASSERT_EQ(Beat(*http_, b, kP, kG).status, 200);
  ASSERT_EQ(Beat(*http_, a, kP, kG).status, 200);
  ASSERT_EQ(a.last_status, "DRAIN");
  ASSERT_GT(a.version, replicated_version);
  const int64_t seen_version = a.version;
  const std::string seen_lineage = a.lineage;

  // The coordinator now talks to the new master (a fresh process: no memory, R3.5).
  ASSERT_EQ(coord_->Terminate(10s), std::optional<int>(0)) << coord_->LogTail();
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(replica));
  const json::object a_req = a.Request();
  HttpResult s1 = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  ASSERT_EQ(s1.status, 200) << s1.Describe();
  EXPECT_EQ(JsonStr(s1.json, "status"), "SYNC_METADATA") << s1.body;
  EXPECT_LE(JsonInt(s1.json, "metadataVersion"), seen_version) << s1.body;
  EXPECT_NE(JsonStr(s1.json, "lineage"), seen_lineage)
      << "the new master's version must not alias the lost one (M8): " << s1.body;
  HttpResult s2 = http_->Post(HeartbeatPath(kP, kG), json::value(a_req));
  ASSERT_EQ(s2.status, 200) << s2.Describe();
  EXPECT_EQ(s2.body, s1.body) << "a repeated stale heartbeat must get the same SYNC_METADATA";
  HttpResult routing = http_->Get(RoutingPath(kP, kG, seen_version, seen_lineage));
  ASSERT_EQ(routing.status, 200) << routing.Describe();
  EXPECT_TRUE(routing.json.at("sync").as_bool()) << routing.body;
  HttpResult rb = Beat(*http_, b, kP, kG);
  EXPECT_EQ(rb.ErrorCode(), "UNKNOWN_MEMBER_ID") << rb.Describe();

  // Finally the old master follows the new one and the lost write is gone for good.
  ASSERT_TRUE(mcli->Run({"REPLICAOF", "127.0.0.1", std::to_string(replica.Port())}).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        return mcli->Run({"INFO", "replication"}).str.find("master_link_status:up") !=
               std::string::npos;
      },
      10s, "the old master to follow the new one"));
  ASSERT_TRUE(WaitFor(
      [&] {
        return HGet(*mcli, MetadataKey(kP, kG), "revision") ==
               HGet(*rcli, MetadataKey(kP, kG), "revision");
      },
      5s, "the old master to hold the new master's metadata"));
}

}  // namespace
}  // namespace rsc::integration
