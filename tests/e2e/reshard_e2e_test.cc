// End-to-end resharding with real processes (issue 12's acceptance test; SPEC §13.2 RS1–RS5,
// RS4 above all): one redis-server, one rsc-coordinator, one stream with two groups
// (`billing` created with 8 shards, `audit` adopting the stream's layout, D3), three
// producer processes (two on billing's routing, one on the stream's, D4) publishing keyed
// messages continuously (72 keys, so keys move between
// shards at every reshard), three consumer processes for billing and two for audit
// (tests/e2e/worker.cc). While the load runs the stream is resharded 8 → 16 → 4 → 12 over
// the admin API (POST /v1/streams/{P}/reshard), each time waiting for the new generation to
// be ACTIVE and read by both groups. Consumers of each group are SIGKILLed and restarted:
// a static member of each group dies before 8 → 16 (its parents are sealed with a backlog
// nobody reads) and comes back with its instance id once generation 1 is ACTIVE; after
// 16 → 4 is read, a dynamic member of each group dies and a new member takes its place, and
// 4 → 12 seals parents whose reader is still waiting out that member's lease.
//
// Each group is judged on its own: the merged history (sim/history.h) filtered to that
// group's consumer processes, every producer and the harness's records, fed to the
// simulator's checkers (sim/checkers.h, which know one group): S1 no split ownership, S2
// handoffs justified, S3 every acked publish delivered, S4 per-key order except
// redeliveries (across generations: RS4), S5 publishes inside their routing lease, L1
// convergence on the newest generation (the harness records the kFault "shards" with its
// ids, as the simulator does, before "heal"). Coordinator-side rules (S6–S13, S12 among
// them) need coordinator events, which a real coordinator does not log. Direct checks back
// them up per group: 0 lost (every acked publish delivered), 0 first deliveries of a key out
// of seq order, deliveries only inside acquire … release, no XACKed entry delivered again,
// no seal (or any entry no producer wrote) handed to a handler; and for the producers: no
// caller-visible publish failure (RS2: a seal refusal is retried on the new generation
// inside the library). Every generation got publishes and deliveries in both groups, and
// every generation but the last retired (RS5). And the run must have put order at risk:
// the producers hit seals (their `seal_refresh_waits`), and in each group some message was
// still undelivered on its parent when its key's next message was acked on a child.
//
// A negative control removes, from each group's history, the deliveries of one message
// whose key moved to another generation at its next message: the checkers must report S3
// and S4, so the per-group judging (and S4 across generations) is not vacuous.
//
// It runs twice: on one redis-server, and on a 3-master + 3-replica Redis Cluster
// (`.../Cluster`), where each generation's shards are spread over the masters (D2, checked)
// and every seal waits for a replica (RS2's WAIT).
//
// Run inside scripts/netns.sh (the host loopback is throttled).

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/live_group.h"
#include "redis/cluster.h"
#include "sim/checkers.h"
#include "sim/history.h"
#include "support/coordinator_process.h"
#include "support/http_client.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"
#include "support/worker_fleet.h"

namespace rsc {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using rsc::sim::HistEvent;
using rsc::sim::HistKind;
using rsc::sim::History;
using rsc::testing::Cluster3;
using rsc::testing::CoordinatorProcess;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::JsonInt;
using rsc::testing::RedisProcess;
using rsc::testing::WaitFor;
using rsc::testing::Worker;
using rsc::testing::WorkerFleet;

constexpr const char* kStream = "ledger";
constexpr const char* kBilling = "billing";
constexpr const char* kAudit = "audit";
constexpr int kInitialShards = 8;
// FastLeases with a routing lease of 1.5 s and a member lease of 4 s: each reshard seals its
// parents 2.5 s after it begins (RS2's routing-lease wait), before the member lease of a
// consumer killed right before it ends (its parents still hold a backlog at the seal).
json::object ReshardLeases() {
  json::object c = rsc::testing::FastLeases();
  c["routingLeaseMs"] = 1500;
  c["routingRefreshMs"] = 300;
  c["memberLeaseMs"] = 4000;
  c["rebalanceTimeoutMs"] = 4000;
  return c;
}
constexpr int kProducers = 3;
constexpr int kKeysPerProducer = 24;   // 72 keys in all
constexpr int64_t kIntervalUs = 6000;  // per producer: ~500 messages/s in all
constexpr int64_t kHandlerDelayUs = 2000;
// Acked publishes between the steps (≈ 1.2 s of load): every generation is written.
constexpr int64_t kPublishesPerStep = 600;
constexpr char kSealId[] = "18446744073709551615-18446744073709551615";
// L1: after the heal, every shard of the newest generation is held by exactly one live
// consumer of each group within this (children wait for their parents to be read first).
constexpr int64_t kConvergenceBoundUs = 10'000'000;

// Reads the fleet's logs incrementally (only lines appended since the last poll), so the
// test can watch a run of tens of thousands of events without re-parsing it all each time:
// what each live process holds, what each group got delivered, what was published.
class LiveLogs {
 public:
  explicit LiveLogs(const WorkerFleet& fleet) : fleet_(fleet) {}

  // `group_of`: worker name → group, for consumers.
  void Poll(const std::map<std::string, std::string>& group_of) {
    std::vector<std::string> paths;
    for (const Worker& w : fleet_.workers()) paths.push_back(w.log_path);
    paths.push_back(fleet_.harness_log());
    for (const std::string& path : paths) {
      for (const HistEvent& e : NewEvents(path)) Apply(e, group_of);
    }
  }

  // Shards some live consumer of `group` holds now.
  std::set<int32_t> Held(const std::string& group) const {
    std::set<int32_t> out;
    for (const auto& [proc, shards] : held_) {
      if (ended_.count(proc) == 0 && GroupOfProc(proc) == group) {
        out.insert(shards.begin(), shards.end());
      }
    }
    return out;
  }
  int64_t published() const { return static_cast<int64_t>(published_.size()); }
  // Acked publishes `group` has not had delivered yet.
  int64_t Undelivered(const std::string& group) const {
    auto it = delivered_.find(group);
    int64_t n = 0;
    for (const auto& ks : published_) n += it == delivered_.end() || it->second.count(ks) == 0;
    return n;
  }

 private:
  sim::History NewEvents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    size_t& offset = offsets_[path];
    in.seekg(static_cast<std::streamoff>(offset));
    std::ostringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    const size_t nl = text.rfind('\n');
    if (nl == std::string::npos) return {};
    text.resize(nl + 1);  // complete lines only: a writer may be mid-line
    offset += text.size();
    return sim::ParseJsonLines(text).events;
  }

  std::string GroupOfProc(const std::string& proc) const {
    auto it = group_of_proc_.find(proc);
    return it == group_of_proc_.end() ? "" : it->second;
  }

  void Apply(const HistEvent& e, const std::map<std::string, std::string>& group_of) {
    if (!e.proc.empty() && group_of_proc_.count(e.proc) == 0) {
      auto g = group_of.find(e.proc.substr(0, e.proc.find('#')));
      if (g != group_of.end()) group_of_proc_[e.proc] = g->second;
    }
    switch (e.kind) {
      case HistKind::kAcquire:
        held_[e.proc].insert(e.shard);
        break;
      case HistKind::kRelease:
        if (e.shard < 0) {
          held_[e.proc].clear();
        } else {
          held_[e.proc].erase(e.shard);
        }
        break;
      case HistKind::kCrash:
      case HistKind::kStop:
        ended_.insert(e.proc);
        break;
      case HistKind::kPublish:
        published_.insert({e.key, e.seq});
        break;
      case HistKind::kDeliver:
        delivered_[GroupOfProc(e.proc)].insert({e.key, e.seq});
        break;
      default:
        break;
    }
  }

  const WorkerFleet& fleet_;
  std::map<std::string, size_t> offsets_;
  std::map<std::string, std::string> group_of_proc_;
  std::map<std::string, std::set<int32_t>> held_;
  std::set<std::string> ended_;
  std::set<std::pair<std::string, int64_t>> published_;
  std::map<std::string, std::set<std::pair<std::string, int64_t>>> delivered_;
};

// The parameter: true runs on a 3-master cluster with a replica each, false on one server.
class ReshardEndToEnd : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fleet_.Init());
    if (GetParam()) {
      cluster_ = std::make_unique<Cluster3>(rsc::testing::RedisProcessOptions{},
                                            /*replicas_per_master=*/1);
      ASSERT_TRUE(cluster_->Start());
      ASSERT_TRUE(cluster_->WaitReplicasInSync(20s));
      redis_url_ = cluster_->Url();
      coordinator_ = std::make_unique<CoordinatorProcess>(
          rsc::testing::CoordinatorOptions{.redis_url = redis_url_});
      ASSERT_TRUE(coordinator_->Start());
      const HttpResult billing =
          HttpClient(coordinator_->Port())
              .Post("/v1/groups", json::value(json::object{{"stream", kStream},
                                                           {"group", kBilling},
                                                           {"shardCount", kInitialShards},
                                                           {"config", ReshardLeases()}}));
      ASSERT_EQ(billing.status, 201) << billing.Describe();
    } else {
      ASSERT_TRUE(rsc::testing::StartLiveGroup(redis_, coordinator_, kStream, kBilling,
                                               kInitialShards, ReshardLeases()));
      redis_url_ = redis_.Url();
    }
    http_ = std::make_unique<HttpClient>(coordinator_->Port());
    // D3: the second group adopts the stream's layout (no shardCount).
    const HttpResult audit = http_->Post(
        "/v1/groups", json::value(json::object{
                          {"stream", kStream}, {"group", kAudit}, {"config", ReshardLeases()}}));
    ASSERT_EQ(audit.status, 201) << audit.Describe();
    ASSERT_EQ(JsonInt(audit.json, "shardCount"), kInitialShards) << audit.body;
    fleet_.SetCommonArgs({"--coordinator", "127.0.0.1:" + std::to_string(coordinator_->Port()),
                          "--redis", redis_url_, "--stream", kStream});
    fleet_.Record(HistKind::kStart, "coordinator#1");
  }

  Worker* SpawnConsumer(const std::string& group, const std::string& name,
                        const std::string& instance) {
    group_of_[name] = group;
    std::vector<std::string> args = {"consume", "--group", group, "--handler-delay-us",
                                     std::to_string(kHandlerDelayUs)};
    if (!instance.empty()) args.insert(args.end(), {"--instance", instance});
    return fleet_.Spawn(name, args);
  }

  // Publishes until SIGTERM (the deadline is only a backstop). Even producers route by the
  // billing group's routing, odd ones by the stream's (SPEC D4).
  Worker* SpawnProducer(int i) {
    const int64_t backstop_us = rsc::testing::SteadyUs() + 300'000'000;
    std::vector<std::string> args = {"produce",
                                     "--until-us",
                                     std::to_string(backstop_us),
                                     "--keys",
                                     std::to_string(kKeysPerProducer),
                                     "--key-prefix",
                                     "p" + std::to_string(i) + "-",
                                     "--interval-us",
                                     std::to_string(kIntervalUs),
                                     "--give-up-ms",
                                     "20000"};
    if (i % 2 == 0) args.insert(args.end(), {"--group", kBilling});
    return fleet_.Spawn("p" + std::to_string(i), args);
  }

  LiveLogs& Logs() {
    logs_.Poll(group_of_);
    return logs_;
  }

  json::value View() {
    const HttpResult r = http_->Get(std::string("/v1/streams/") + kStream);
    return r.status == 200 ? r.json : json::value();
  }
  const json::object* Generation(const json::value& view, int generation) {
    if (!view.is_object() || !view.as_object().contains("generations")) return nullptr;
    for (const json::value& g : view.at("generations").as_array()) {
      if (JsonInt(g, "generation") == generation) return &g.as_object();
    }
    return nullptr;
  }
  std::string StateOf(int generation) {
    const json::value v = View();
    const json::object* g = Generation(v, generation);
    return g == nullptr ? "absent" : std::string(g->at("state").as_string());
  }
  // Shard id → stream key of `generation`, from the stream view.
  std::map<int32_t, std::string> ShardsOf(int generation) {
    std::map<int32_t, std::string> out;
    const json::value v = View();
    if (const json::object* g = Generation(v, generation)) {
      for (const json::value& s : g->at("shards").as_array()) {
        out[static_cast<int32_t>(JsonInt(s, "id"))] = std::string(s.at("stream").as_string());
      }
    }
    return out;
  }

  // RS1: a new generation of `shards` on the current layout revision.
  ::testing::AssertionResult Reshard(int shards) {
    const int64_t revision = JsonInt(View(), "revision");
    const HttpResult r = http_->Post(
        std::string("/v1/streams/") + kStream + "/reshard",
        json::value(json::object{{"expectedLayoutRevision", revision}, {"shardCount", shards}}));
    if (r.status != 200) {
      return ::testing::AssertionFailure() << "reshard to " << shards << ": " << r.Describe();
    }
    return ::testing::AssertionSuccess();
  }

  // A connection to the server holding `key` (its slot's master on the cluster).
  std::unique_ptr<rsc::testing::RedisCli> CliFor(const std::string& key) {
    if (!cluster_) return redis_.Cli();
    const size_t node = cluster_->MasterOf(redis::KeySlot(key));
    return node < cluster_->size() ? cluster_->node(node).Cli() : nullptr;
  }

  // D2: on the cluster, the masters holding the keys given, and how many each holds.
  std::map<size_t, int> KeysPerMaster(const std::map<int32_t, std::string>& shards) {
    std::map<size_t, int> out;
    for (const auto& [id, key] : shards) ++out[cluster_->MasterOf(redis::KeySlot(key))];
    return out;
  }

  // Pending entries of `group` on the shard keys given.
  int64_t Pending(const std::string& group, const std::map<int32_t, std::string>& shards) {
    int64_t total = 0;
    for (const auto& [id, key] : shards) {
      std::unique_ptr<rsc::testing::RedisCli> cli = CliFor(key);
      if (cli == nullptr) return -1;
      const rsc::testing::CliReply r = cli->Run({"XPENDING", key, group});
      if (r.type != rsc::testing::CliReply::Type::kArray || r.elements.empty()) return -1;
      total += r.elements[0].integer;
    }
    return total;
  }

  std::string Consumers() {
    std::string out;
    for (const Worker& w : fleet_.workers()) {
      if (w.running() && group_of_.count(w.name)) out += "\n" + fleet_.Describe(w);
    }
    return out + "\ncoordinator:" + coordinator_->LogTail(20);
  }

  // Every shard id in `want` is held by a live consumer of each group.
  ::testing::AssertionResult WaitChildrenRead(const std::map<int32_t, std::string>& want,
                                              int generation) {
    for (const char* group : {kBilling, kAudit}) {
      ::testing::AssertionResult r = WaitFor(
          [&] {
            const std::set<int32_t> held = Logs().Held(group);
            return std::all_of(want.begin(), want.end(),
                               [&](const auto& kv) { return held.count(kv.first) > 0; });
          },
          20s,
          std::string(group) + " reads every shard of generation " + std::to_string(generation));
      if (!r) return r << Consumers();
    }
    return ::testing::AssertionSuccess();
  }

  // Waits until `more` publishes more than at the call were acked.
  ::testing::AssertionResult WaitPublished(int64_t more, const std::string& what) {
    const int64_t target = Logs().published() + more;
    return WaitFor([&] { return Logs().published() >= target; }, 20s,
                   std::to_string(more) + " more acked publishes " + what);
  }

  // The run as group `group` saw it: its own consumers' events, every producer's, the
  // harness's records (crash records name their victim, so another group's are left out).
  History GroupHistory(const History& all, const std::string& group) const {
    History out;
    for (const HistEvent& e : all) {
      auto it = group_of_.find(e.proc.substr(0, e.proc.find('#')));
      if (it == group_of_.end() || it->second == group) out.push_back(e);
    }
    return out;
  }

  static rsc::sim::CheckerConfig CheckConfig() {
    return rsc::testing::RealProcessCheckConfig(kInitialShards, ReshardLeases(),
                                                kConvergenceBoundUs);
  }

  // Judges one group: the checkers, and the direct checks. Returns the checkers' counters.
  rsc::sim::CheckerCounters ExpectGroupGuarantees(const History& h, const std::string& group,
                                                  int64_t published) {
    SCOPED_TRACE("group " + group);
    const rsc::sim::CheckReport report = rsc::sim::CheckHistory(h, CheckConfig());
    EXPECT_TRUE(report.violations.empty())
        << report.violations.size()
        << " violations:" << rsc::testing::ShowViolations(report.violations) << "\nlogs in "
        << fleet_.dir();
    EXPECT_EQ(report.counters.publishes, published);
    EXPECT_EQ(report.counters.delivered_unique, published);

    std::set<std::pair<std::string, int32_t>> open;
    std::set<std::pair<std::string, std::string>> acked;  // (stream, id)
    std::set<std::pair<std::string, int64_t>> delivered;
    std::map<std::string, int64_t> highest;  // key → highest seq first-delivered so far
    int64_t outside = 0, acked_again = 0, seals = 0, inversions = 0;
    std::string first_outside, first_acked_again, first_seal, first_inversion;
    for (const HistEvent& e : h) {
      switch (e.kind) {
        case HistKind::kAcquire:
          open.insert({e.proc, e.shard});
          break;
        case HistKind::kRelease:
          if (e.shard < 0) {
            std::erase_if(open, [&](const auto& ps) { return ps.first == e.proc; });
          } else {
            open.erase({e.proc, e.shard});
          }
          break;
        case HistKind::kAck:
          acked.insert({e.stream, e.id});
          break;
        case HistKind::kFault:
          if (e.detail == "foreign_message_in_handler" && seals++ == 0) {
            first_seal = rsc::sim::ToJsonLine(e);
          }
          break;
        case HistKind::kDeliver: {
          if ((e.id == kSealId || e.key.empty()) && seals++ == 0) {
            first_seal = rsc::sim::ToJsonLine(e);
          }
          if (open.count({e.proc, e.shard}) == 0 && outside++ == 0) {
            first_outside = rsc::sim::ToJsonLine(e);
          }
          if (acked.count({e.stream, e.id}) != 0 && acked_again++ == 0) {
            first_acked_again = rsc::sim::ToJsonLine(e);
          }
          if (!delivered.insert({e.key, e.seq}).second) break;  // a redelivery
          auto [it, fresh] = highest.try_emplace(e.key, e.seq);
          if (!fresh && e.seq < it->second && inversions++ == 0) {
            first_inversion = "key " + e.key + " seq " + std::to_string(e.seq) + " after seq " +
                              std::to_string(it->second) + ": " + rsc::sim::ToJsonLine(e);
          }
          it->second = std::max(it->second, e.seq);
          break;
        }
        default:
          break;
      }
    }
    EXPECT_EQ(seals, 0) << "RS2/RS3: an entry no producer wrote reached a handler, first: "
                        << first_seal;
    EXPECT_EQ(inversions, 0) << "RS4: per-key order broken (first deliveries), first: "
                             << first_inversion;
    EXPECT_EQ(outside, 0) << "deliveries outside their acquire/release window, first: "
                          << first_outside;
    EXPECT_EQ(acked_again, 0) << "acknowledged entries delivered again, first: "
                              << first_acked_again;
    int64_t lost = 0;
    for (const HistEvent& e : h) {
      if (e.kind == HistKind::kPublish && delivered.count({e.key, e.seq}) == 0 && lost++ < 5) {
        ADD_FAILURE() << "RS4: acked publish never delivered to " << group << ": "
                      << rsc::sim::ToJsonLine(e);
      }
    }
    EXPECT_EQ(lost, 0);
    return report.counters;
  }

  RedisProcess redis_;                 // one server (parameter false)
  std::unique_ptr<Cluster3> cluster_;  // or a cluster (true)
  std::string redis_url_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  std::unique_ptr<HttpClient> http_;
  std::map<std::string, std::string> group_of_;  // consumer worker name → group
  std::map<std::string, int64_t> held_back_;     // group → messages a child had to wait for
  // Declared last, destroyed first: its workers die before the coordinator and Redis.
  WorkerFleet fleet_{"rsc-reshard-e2e", "RSC_E2E_KEEP"};
  LiveLogs logs_{fleet_};
};

TEST_P(ReshardEndToEnd, TwoGroupsThreeProducersCrashesAndReshards8To16To4To12LoseNothing) {
  const auto test_start = std::chrono::steady_clock::now();
  auto secs = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - test_start).count();
  };
  std::vector<std::string> timeline;
  auto mark = [&](const std::string& what) {
    timeline.push_back(std::to_string(secs()).substr(0, 5) + " s " + what);
  };

  // Billing: two static members and a dynamic one; audit: one static, one dynamic.
  Worker* b1 = SpawnConsumer(kBilling, "b1", "inst-b1");
  Worker* b2 = SpawnConsumer(kBilling, "b2", "inst-b2");
  Worker* b3 = SpawnConsumer(kBilling, "b3", "");
  Worker* a1 = SpawnConsumer(kAudit, "a1", "inst-a1");
  Worker* a2 = SpawnConsumer(kAudit, "a2", "");
  ASSERT_TRUE(b1 && b2 && b3 && a1 && a2);
  std::map<int, std::map<int32_t, std::string>> shards_of;  // generation → id → key
  shards_of[0] = ShardsOf(0);
  ASSERT_EQ(shards_of[0].size(), static_cast<size_t>(kInitialShards));
  ASSERT_TRUE(WaitChildrenRead(shards_of[0], 0));
  mark("8 shards read by both groups");

  std::vector<Worker*> producers;
  for (int i = 1; i <= kProducers; ++i) {
    producers.push_back(SpawnProducer(i));
    ASSERT_NE(producers.back(), nullptr);
  }
  ASSERT_TRUE(WaitPublished(kPublishesPerStep, "on generation 0"))
      << fleet_.Describe(*producers[0]);
  mark("load on generation 0");

  // ── 8 → 16. A static member of each group is SIGKILLed before the reshard, so its
  //    parents hold a backlog when they are sealed, and restarted with its instance id once
  //    the new generation is ACTIVE: the children of its parents must wait for it.
  // (The seal comes one routing lease + 1 s after the reshard, before their member lease
  // ends: killed right before it, nobody reads their parents until then.)
  fleet_.Kill(b1);
  fleet_.Kill(a1);
  ASSERT_TRUE(Reshard(16));
  ASSERT_TRUE(WaitPublished(300, "while b1 and a1 are dead"));
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "ACTIVE"; }, 10s, "generation 1 ACTIVE"))
      << StateOf(1) << coordinator_->LogTail();
  mark("8 -> 16: generation 1 ACTIVE (b1, a1 SIGKILLed before)");
  shards_of[1] = ShardsOf(1);
  ASSERT_EQ(shards_of[1].size(), 16u);
  EXPECT_GE(shards_of[1].begin()->first, kInitialShards) << "D2: ids above every id used";
  if (cluster_) {
    std::string spread;
    for (const auto& [master, n] : KeysPerMaster(shards_of[1])) {
      spread += " node " + std::to_string(master) + ": " + std::to_string(n);
    }
    const std::map<size_t, int> per_master = KeysPerMaster(shards_of[1]);
    EXPECT_EQ(per_master.size(), 3u) << "D2: 16 shards on every master:" << spread;
    for (const auto& [master, n] : per_master) {
      EXPECT_TRUE(n == 5 || n == 6) << "D2: 16 shards spread 6/5/5:" << spread;
    }
  }
  b1 = SpawnConsumer(kBilling, "b1", "inst-b1");
  a1 = SpawnConsumer(kAudit, "a1", "inst-a1");
  ASSERT_TRUE(b1 && a1);
  ASSERT_TRUE(WaitPublished(kPublishesPerStep, "on generation 1"));
  ASSERT_TRUE(WaitChildrenRead(shards_of[1], 1));
  mark("generation 1 read by both groups (b1, a1 restarted)");
  ASSERT_TRUE(WaitFor([&] { return StateOf(0) == "RETIRED"; }, 20s, "generation 0 RETIRED"))
      << StateOf(0) << Consumers();
  mark("generation 0 RETIRED");

  // ── 16 → 4. Once the children are read, a dynamic member of each group is SIGKILLed and
  //    replaced by a new member (its shards wait for its member lease, and the next
  //    reshard seals them before anyone reads them again).
  ASSERT_TRUE(Reshard(4));
  ASSERT_TRUE(WaitFor([&] { return StateOf(2) == "ACTIVE"; }, 10s, "generation 2 ACTIVE"))
      << StateOf(2) << coordinator_->LogTail();
  mark("16 -> 4: generation 2 ACTIVE");
  shards_of[2] = ShardsOf(2);
  ASSERT_EQ(shards_of[2].size(), 4u);
  ASSERT_TRUE(WaitChildrenRead(shards_of[2], 2));
  mark("generation 2 read by both groups");
  fleet_.Kill(b3);
  fleet_.Kill(a2);
  Worker* b4 = SpawnConsumer(kBilling, "b4", "");
  Worker* a3 = SpawnConsumer(kAudit, "a3", "");
  ASSERT_TRUE(b4 && a3);
  ASSERT_TRUE(WaitPublished(kPublishesPerStep, "on generation 2"));
  ASSERT_TRUE(WaitFor([&] { return StateOf(1) == "RETIRED"; }, 20s, "generation 1 RETIRED"))
      << StateOf(1) << Consumers();
  mark("generation 1 RETIRED (b3, a2 SIGKILLed and replaced by b4, a3)");

  // ── 4 → 12, the last change: from here the checkers' L1 judges generation 3.
  ASSERT_TRUE(Reshard(12));
  ASSERT_TRUE(WaitFor([&] { return StateOf(3) == "ACTIVE"; }, 10s, "generation 3 ACTIVE"))
      << StateOf(3) << coordinator_->LogTail();
  mark("4 -> 12: generation 3 ACTIVE");
  shards_of[3] = ShardsOf(3);
  ASSERT_EQ(shards_of[3].size(), 12u);
  {
    std::string ids;
    for (const auto& [id, key] : shards_of[3]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    HistEvent newest;
    newest.kind = HistKind::kFault;
    newest.proc = "harness";
    newest.member = ids;  // the checkers read the ids from `member` (as the simulator writes)
    newest.detail = "shards";
    fleet_.Record(newest);
    fleet_.Record(HistKind::kFault, "harness", "heal");
  }
  ASSERT_TRUE(WaitChildrenRead(shards_of[3], 3));
  mark("generation 3 read by both groups");
  ASSERT_TRUE(WaitPublished(kPublishesPerStep, "on generation 3"));

  // Stop the producers (each finishes the message in hand), let both groups drain.
  for (Worker* p : producers) fleet_.Term(p);
  for (Worker* p : producers) {
    const std::optional<int> code = fleet_.WaitExit(p, 20s);
    ASSERT_TRUE(code.has_value()) << fleet_.Describe(*p);
    EXPECT_EQ(*code, 0) << fleet_.Describe(*p);
  }
  mark("producers stopped (" + std::to_string(Logs().published()) + " acked publishes)");
  for (const char* group : {kBilling, kAudit}) {
    ASSERT_TRUE(WaitFor([&] { return Logs().Undelivered(group) == 0; }, 30s,
                        std::string(group) + " got every acked publish"))
        << Logs().Undelivered(group) << " undelivered" << Consumers();
    ASSERT_TRUE(WaitFor([&] { return Pending(group, shards_of[3]) == 0; }, 15s,
                        std::string(group) + " XACKed everything"))
        << "pending " << Pending(group, shards_of[3]);
  }
  ASSERT_TRUE(WaitFor([&] { return StateOf(2) == "RETIRED"; }, 20s, "generation 2 RETIRED"))
      << StateOf(2) << Consumers();
  EXPECT_EQ(StateOf(3), "ACTIVE");
  mark("both groups drained, generation 2 RETIRED");

  std::vector<Worker*> consumers = {b1, b2, b4, a1, a3};
  for (Worker* w : consumers) fleet_.Term(w);
  for (Worker* w : consumers) {
    const std::optional<int> code = fleet_.WaitExit(w, 15s);
    ASSERT_TRUE(code.has_value()) << fleet_.Describe(*w);
    EXPECT_EQ(*code, 0) << fleet_.Describe(*w);
  }
  mark("consumers stopped");

  // ── Judging ──
  const History all = fleet_.Merged();
  int64_t published = 0, refused = 0, crashes = 0, seal_waits = 0;
  std::string first_refusal;
  std::map<int, int64_t> published_on;  // generation → acked publishes
  auto generation_of = [&](int32_t shard) {
    for (const auto& [g, ids] : shards_of) {
      if (ids.count(shard)) return g;
    }
    return -1;
  };
  for (const HistEvent& e : all) {
    crashes += e.kind == HistKind::kCrash;
    if (e.kind == HistKind::kPublish) {
      ++published;
      ++published_on[generation_of(e.shard)];
    }
    if (e.kind == HistKind::kStop && e.detail.starts_with("seal_refresh_waits=")) {
      seal_waits += std::stoll(e.detail.substr(e.detail.find('=') + 1));
    }
    if (e.kind == HistKind::kPublishRefused && refused++ == 0) {
      first_refusal = rsc::sim::ToJsonLine(e);
    }
  }
  EXPECT_EQ(refused, 0) << "RS2: producers' callers saw publish failures, first: " << first_refusal;
  EXPECT_GT(seal_waits, 0) << "no XADD ever hit a seal: the no-failure check above is vacuous";
  EXPECT_EQ(crashes, 4) << "b1#1, a1#1, b3#1, a2#1";
  EXPECT_EQ(published_on.count(-1), 0u) << "publishes to a shard of no generation";
  for (int g = 0; g <= 3; ++g) {
    EXPECT_GT(published_on[g], 0) << "no publish on generation " << g << ": not under load";
  }

  std::map<std::string, rsc::sim::CheckerCounters> counters;
  for (const char* group : {kBilling, kAudit}) {
    const History h = GroupHistory(all, group);
    counters[group] = ExpectGroupGuarantees(h, group, published);
    std::map<int, int64_t> delivered_on;
    for (const HistEvent& e : h) {
      if (e.kind == HistKind::kDeliver) ++delivered_on[generation_of(e.shard)];
    }
    for (int g = 0; g <= 3; ++g) {
      EXPECT_GT(delivered_on[g], 0) << group << " read nothing of generation " << g;
    }
    // The reshards were a real risk for key order: messages whose key's next message was
    // published on a later generation before this group had the message delivered (the
    // next one sat on a child that had to wait for its parent).
    std::map<std::pair<std::string, int64_t>, std::pair<int, int64_t>> pub;  // → (gen, t)
    std::map<std::pair<std::string, int64_t>, int64_t> first_delivery;
    for (const HistEvent& e : h) {
      if (e.kind == HistKind::kPublish) pub[{e.key, e.seq}] = {generation_of(e.shard), e.t_us};
      if (e.kind == HistKind::kDeliver) first_delivery.try_emplace({e.key, e.seq}, e.t_us);
    }
    int64_t held_back = 0;
    for (const auto& [ks, gt] : pub) {
      auto next = pub.find({ks.first, ks.second + 1});
      auto d = first_delivery.find(ks);
      if (next != pub.end() && d != first_delivery.end() && next->second.first > gt.first &&
          next->second.second < d->second) {
        ++held_back;
      }
    }
    held_back_[group] = held_back;
    EXPECT_GT(held_back, 0) << group << ": no key's next message reached a child before the "
                            << "message itself was delivered from its parent: RS4 was not "
                            << "exercised";

    // Negative control: a message whose key's next message went to a later generation
    // loses its deliveries in a copy of this group's history → S3 (lost) and S4 (its
    // successor, read from a child, now comes before it).
    std::map<std::pair<std::string, int64_t>, int> gen_of_msg;
    for (const HistEvent& e : h) {
      if (e.kind == HistKind::kPublish) gen_of_msg[{e.key, e.seq}] = generation_of(e.shard);
    }
    std::optional<std::pair<std::string, int64_t>> victim;
    for (const auto& [ks, g] : gen_of_msg) {
      auto next = gen_of_msg.find({ks.first, ks.second + 1});
      if (next != gen_of_msg.end() && next->second > g) {
        victim = ks;
        break;
      }
    }
    ASSERT_TRUE(victim.has_value()) << "no key moved to another generation";
    History doctored;
    for (const HistEvent& e : h) {
      if (!(e.kind == HistKind::kDeliver && e.key == victim->first && e.seq == victim->second)) {
        doctored.push_back(e);
      }
    }
    const rsc::sim::CheckReport bad = rsc::sim::CheckHistory(doctored, CheckConfig());
    for (const char* inv : {"S3", "S4"}) {
      EXPECT_TRUE(std::any_of(bad.violations.begin(), bad.violations.end(),
                              [&](const rsc::sim::Violation& v) { return v.invariant == inv; }))
          << group << ": deliveries of " << victim->first << "/" << victim->second
          << " removed, yet no " << inv
          << " violation:" << rsc::testing::ShowViolations(bad.violations);
    }
  }

  std::cout << "reshard e2e (" << (cluster_ ? "cluster" : "one server") << "): " << published
            << " acked publishes (per generation:";
  for (const auto& [g, n] : published_on) std::cout << " g" << g << "=" << n;
  std::cout << "), " << seal_waits << " seal refusals retried by the producers, " << all.size()
            << " events\n";
  for (const auto& [group, n] : counters) {
    std::cout << "  " << group << ": intervals=" << n.intervals << " handoffs=" << n.handoffs
              << " delivered_unique=" << n.delivered_unique << " redeliveries=" << n.redeliveries
              << " refused_publishes=" << n.refused_publishes
              << " held_back_across_generations=" << held_back_[group] << "\n";
  }
  for (const std::string& t : timeline) std::cout << "  " << t << "\n";
}

INSTANTIATE_TEST_SUITE_P(Redis, ReshardEndToEnd, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Cluster" : "OneServer";
                         });

}  // namespace
}  // namespace rsc
