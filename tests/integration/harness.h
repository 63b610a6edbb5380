#pragma once
// Shared helpers of the Level-2 integration tests (real redis-server + real rsc-coordinator
// processes over HTTP). Run the binary inside scripts/netns.sh.
//
// - Paths and bodies of the coordinator API (SPEC §4, §5, §9).
// - Consumer: a well-behaved consumer model (SPEC §4.2 C1-C5, applied strictly): it
//   starts reading a shard only on status OK, drops revoked shards at once and reports
//   them REVOKED until the coordinator stops listing them, remembers the version and
//   lineage it observed, and drops everything on 409 (fenced / unknown member).
// - Redis inspection (HGETALL of the metadata hash) and /metrics scraping.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/coordinator_process.h"
#include "support/http_client.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::integration {

namespace json = boost::json;
using rsc::testing::CliReply;
using rsc::testing::CoordinatorOptions;
using rsc::testing::CoordinatorProcess;
using rsc::testing::HttpClient;
using rsc::testing::HttpResult;
using rsc::testing::JsonInt;
using rsc::testing::JsonInts;
using rsc::testing::JsonStr;
using rsc::testing::JsonString;
using rsc::testing::RedisCli;
using rsc::testing::RedisProcess;
using rsc::testing::RedisProcessOptions;
using rsc::testing::WaitFor;
using namespace std::chrono_literals;

// ── paths ────────────────────────────────────────────────────────────────────────
inline std::string GroupPath(const std::string& p, const std::string& g) {
  return "/v1/groups/" + p + "/" + g;
}
inline std::string HeartbeatPath(const std::string& p, const std::string& g) {
  return GroupPath(p, g) + "/heartbeat";
}
inline std::string RoutingPath(const std::string& p, const std::string& g, int64_t version = -1,
                               const std::string& lineage = "") {
  std::string path = GroupPath(p, g) + "/routing";
  if (version >= 0) {
    path += "?observedVersion=" + std::to_string(version);
    if (!lineage.empty()) path += "&lineage=" + rsc::testing::UrlEncode(lineage);
  }
  return path;
}
inline std::string MetadataKey(const std::string& p, const std::string& g) {
  return "redis-stream:coord:{" + p + ":" + g + "}:metadata";
}
inline std::string LayoutKey(const std::string& p) {
  return "redis-stream:coord:{" + p + "}:layout";
}
inline std::string LockKey(const std::string& p, const std::string& g) {
  return "redis-stream:coord:{" + p + ":" + g + "}:lock";
}
inline constexpr const char* kIndexKey = "redis-stream:coord:groups";

// Group configs. Leases are shortened where a test waits for them.
struct Config {
  int64_t heartbeat_interval_ms = 500;
  int64_t member_lease_ms = 10000;
  int64_t assignment_lease_ms = 8000;
  int64_t rebalance_timeout_ms = 30000;
  int64_t routing_lease_ms = 30000;
  int64_t routing_refresh_ms = 5000;
  json::object ToJson() const {
    return json::object{{"heartbeatIntervalMs", heartbeat_interval_ms},
                        {"memberLeaseMs", member_lease_ms},
                        {"assignmentLeaseMs", assignment_lease_ms},
                        {"rebalanceTimeoutMs", rebalance_timeout_ms},
                        {"routingLeaseMs", routing_lease_ms},
                        {"routingRefreshMs", routing_refresh_ms}};
  }
};
inline Config ShortLeases() { return Config{500, 3000, 2000, 3000}; }
// ShortLeases with a short routing lease: a reshard seals its parents one routing lease (plus
// 1 s) after its PREPARING write (docs/design/resharding.md "The routing-lease wait").
inline Config ReshardLeases() {
  Config c = ShortLeases();
  c.routing_lease_ms = 500;
  c.routing_refresh_ms = 200;
  return c;
}

inline json::object CreateBody(const std::string& p, const std::string& g, int shards,
                               const Config& config = {}) {
  return json::object{
      {"stream", p}, {"group", g}, {"shardCount", shards}, {"config", config.ToJson()}};
}

// POST /v1/groups; fails the test unless 201.
inline ::testing::AssertionResult CreateGroup(HttpClient& http, const std::string& p,
                                              const std::string& g, int shards,
                                              const Config& config = {},
                                              const HttpClient::Headers& headers = {}) {
  HttpResult r = http.Post("/v1/groups", json::value(CreateBody(p, g, shards, config)), headers);
  if (r.status != 201) {
    return ::testing::AssertionFailure() << "create " << p << "/" << g << ": " << r.Describe();
  }
  return ::testing::AssertionSuccess();
}

inline std::string ShardsStr(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}
inline std::string ShardsStr(const std::set<int>& v) {
  return ShardsStr(std::vector<int>(v.begin(), v.end()));
}

// ── a well-behaved consumer model ─────────────────────────────────────────────────
struct Consumer {
  std::string id;
  std::string instance_id;
  int64_t epoch = 0;  // 0: (re)join next
  int64_t assignment_epoch = 0;
  int64_t version = 0;  // highest observed (C5)
  std::string lineage;
  std::set<int> owned;     // shards it reads now
  std::set<int> revoking;  // shards it released and reports REVOKED
  std::string last_status;
  json::value last;                   // last successful response body
  std::vector<std::string> features;  // sent as `features` when not empty
  std::vector<int> completed;         // sent as `completedShards` when not empty (RS3)

  explicit Consumer(std::string member_id) : id(std::move(member_id)) {}

  json::object Request() const {
    json::array own;
    for (int s : owned) own.push_back(s);
    json::array rev;
    for (int s : revoking) rev.push_back(json::object{{"shard", s}, {"state", "REVOKED"}});
    json::object o{{"memberId", id},
                   {"memberEpoch", epoch},
                   {"assignmentEpoch", assignment_epoch},
                   {"metadataVersion", version},
                   {"lineage", lineage},
                   {"ownedShards", std::move(own)},
                   {"revokingShards", std::move(rev)}};
    if (!instance_id.empty()) o["instanceId"] = instance_id;
    if (!features.empty()) {
      json::array f;
      for (const std::string& name : features) f.push_back(json::string(name));
      o["features"] = std::move(f);
    }
    if (!completed.empty()) {
      json::array c;
      for (int s : completed) c.push_back(s);
      o["completedShards"] = std::move(c);
    }
    return o;
  }

  // Applies one answer. Returns false for an answer the model does not understand.
  bool Apply(const HttpResult& r) {
    if (r.status == 409) {
      const std::string code = r.ErrorCode();
      if (code == "FENCED_MEMBER_EPOCH" || code == "UNKNOWN_MEMBER_ID") {
        owned.clear();  // drop all shards now, rejoin
        revoking.clear();
        epoch = 0;
        last_status = code;
        return true;
      }
      return false;
    }
    if (r.status != 200 || !r.json.is_object()) return false;
    const json::value& b = r.json;
    last = b;
    last_status = JsonStr(b, "status");
    epoch = JsonInt(b, "memberEpoch");
    assignment_epoch = JsonInt(b, "assignmentEpoch");
    // C5 / M4: remember what the coordinator answered (SYNC_METADATA: the stored truth).
    version = JsonInt(b, "metadataVersion");
    lineage = JsonStr(b, "lineage");
    const std::vector<int> assigned = JsonInts(b, "assignedShards");
    const std::vector<int> revoke = JsonInts(b, "revokeShards");
    const std::set<int> assigned_set(assigned.begin(), assigned.end());
    const std::set<int> revoke_set(revoke.begin(), revoke.end());
    // C3: stop reading revoked shards at once; report REVOKED while they are listed.
    for (auto it = revoking.begin(); it != revoking.end();) {
      it = revoke_set.count(*it) ? std::next(it) : revoking.erase(it);
    }
    for (int s : revoke_set) {
      owned.erase(s);
      revoking.insert(s);
    }
    if (last_status == "OK") {
      owned = assigned_set;  // C2: new reads only on OK
    } else {
      std::set<int> keep;
      for (int s : owned) {
        if (assigned_set.count(s)) keep.insert(s);
      }
      owned = std::move(keep);
    }
    return true;
  }

  // Leave (memberEpoch -1) after releasing everything it reads (a clean shutdown).
  json::object LeaveRequest() {
    for (int s : owned) revoking.insert(s);
    owned.clear();
    json::object o = Request();
    o["memberEpoch"] = -1;
    return o;
  }
};

// One heartbeat through `http`, applied to `c`. The raw result is returned.
inline HttpResult Beat(HttpClient& http, Consumer& c, const std::string& p, const std::string& g) {
  HttpResult r = http.Post(HeartbeatPath(p, g), json::value(c.Request()));
  c.Apply(r);
  return r;
}

// ── group view helpers ─────────────────────────────────────────────────────────────
inline const json::object* FindMember(const json::value& view, const std::string& id) {
  if (!view.is_object()) return nullptr;
  const json::value* ms = view.as_object().if_contains("members");
  if (ms == nullptr || !ms->is_array()) return nullptr;
  for (const json::value& m : ms->as_array()) {
    if (m.is_object() && JsonStr(m, "memberId") == id) return &m.as_object();
  }
  return nullptr;
}
inline std::vector<int> MemberShards(const json::value& view, const std::string& id,
                                     std::string_view field) {
  const json::object* m = FindMember(view, id);
  if (m == nullptr) return {};
  return JsonInts(json::value(*m), field);
}

// ── Redis inspection ──────────────────────────────────────────────────────────────
inline std::map<std::string, std::string> HGetAll(RedisCli& cli, const std::string& key) {
  std::map<std::string, std::string> out;
  CliReply r = cli.Run({"HGETALL", key});
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    out[r.elements[i].str] = r.elements[i + 1].str;
  }
  return out;
}
inline std::string HGet(RedisCli& cli, const std::string& key, const std::string& field) {
  return cli.Run({"HGET", key, field}).str;
}
inline int64_t Exists(RedisCli& cli, const std::string& key) {
  return cli.Run({"EXISTS", key}).integer;
}
// Every key in the database with its TYPE, to prove nothing new was created.
inline std::set<std::string> AllKeys(RedisCli& cli) {
  std::set<std::string> out;
  CliReply r = cli.Run({"KEYS", "*"});
  for (const CliReply& e : r.elements) out.insert(e.str);
  return out;
}

// ── /metrics ──────────────────────────────────────────────────────────────────────
// Sum of every sample of metric `name` (all label sets) in Prometheus text format;
// `label_filter` (e.g. `status="OK"`) keeps only samples whose labels contain it.
inline double MetricSum(const std::string& text, const std::string& name,
                        const std::string& label_filter = "") {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    if (!label_filter.empty()) {
      size_t close = line.find('}');
      if (next != '{' || close == std::string::npos) continue;
      if (line.substr(0, close).find(label_filter) == std::string::npos) continue;
    }
    size_t sp = line.rfind(' ');
    try {
      sum += std::stod(line.substr(sp + 1));
    } catch (...) {
    }
  }
  return sum;
}
inline double Metric(HttpClient& http, const std::string& name,
                     const std::string& label_filter = "") {
  HttpResult r = http.Get("/metrics");
  EXPECT_EQ(r.status, 200) << r.Describe();
  return MetricSum(r.body, name, label_filter);
}

// Options for a coordinator against `redis` (admin open, the given tick period).
inline CoordinatorOptions CoordOpts(const RedisProcess& redis, int64_t tick_ms = 200) {
  CoordinatorOptions o;
  o.redis_url = redis.Url();
  o.tick_interval_ms = tick_ms;
  return o;
}

// A fixture with one redis-server, one coordinator on it (CoordOpts), an HTTP client and a
// redis-cli; the coordinator's log tail is printed when a test fails.
class LiveCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    CoordinatorOptions options = CoordOpts(redis_, TickMs());
    options.extra_args = ExtraArgs();
    coord_ = std::make_unique<CoordinatorProcess>(options);
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
    cli_ = redis_.Cli();
    ASSERT_NE(cli_, nullptr);
  }
  virtual int64_t TickMs() const { return 200; }
  virtual std::vector<std::string> ExtraArgs() const { return {}; }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<RedisCli> cli_;
};

// A fixture with one redis-server and a redis-cli on it; each test starts its coordinator
// (coord_, http_) with the options it is about. The coordinator's log tail is printed when
// a test fails.
class RedisFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    cli_ = redis_.Cli();
    ASSERT_NE(cli_, nullptr);
  }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }

  RedisProcess redis_;
  std::unique_ptr<RedisCli> cli_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace rsc::integration
