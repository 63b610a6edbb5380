#pragma once
// The real-process chaos environment (issue 4): a redis-server master with one replica,
// two rsc-coordinator processes, and seeded TCP fault proxies in front of everything a
// client or a coordinator talks to:
//
//   workers ──► coord_proxy[0] ──► coordinator 0 ──┐
//           ──► coord_proxy[1] ──► coordinator 1 ──┼─► redis_proxy ──► master ◄── repl_proxy ◄──
//           replica ──────────────────────────────────────┘   (the "virtual IP")      (replication
//           link)
//
// The faults it can inject, each recorded in the driver's own history (sim/history.h) with
// CLOCK_MONOTONIC stamps so the same checkers judge it together with the workers' logs:
//   * failover that loses the last writes: the replication link is blackholed, writes go
//     on for a while on the master only, then the replica is promoted and the virtual IP
//     moves to it; every acknowledged stream entry only the old master had is recorded as
//     `lost` (the S3 excuse), and the fault as `failover` (the S1 taint);
//   * restore of an older snapshot: the master restarts from an RDB saved earlier
//     (`snapshot_restore`, with `lost` entries);
//   * SCRIPT FLUSH on master and replica (`script_flush`);
//   * deletion of the group's metadata key (`key_delete`) and the operator's restore from
//     an export taken just before (`restore`);
//   * coordinator SIGKILL + restart (a new process behind the same proxy), SIGSTOP/SIGCONT,
//     both coordinators down (`coordinators_down` … `coordinators_up`, what L2 judges),
//     proxy delay/reset/blackhole.
// Sleeping in this file is the length of a fault, never synchronisation; every wait for a
// state is bounded and says what did not happen.
//
// Thread safety: none; the chaos test drives it from one thread.

#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <boost/json.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim/history.h"
#include "support/coordinator_process.h"
#include "support/fault_proxy.h"
#include "support/http_client.h"
#include "support/redis_cli.h"
#include "support/redis_process.h"
#include "support/wait.h"

namespace rsc::testing {

inline int64_t MonotonicUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

struct ChaosConfig {
  std::string stream = "chaos";
  std::string group = "workers";
  int shards = 8;
  uint64_t seed = 1;
  boost::json::object group_config;
};

class ChaosEnv {
 public:
  explicit ChaosEnv(ChaosConfig config) : config_(std::move(config)), rng_(config_.seed) {}
  ~ChaosEnv() { DropSnapshot(); }
  ChaosEnv(const ChaosEnv&) = delete;
  ChaosEnv& operator=(const ChaosEnv&) = delete;

  // ── set-up ──
  ::testing::AssertionResult Start() {
    nodes_[0] = std::make_unique<RedisProcess>(RedisProcessOptions{});
    if (auto r = nodes_[0]->Start(); !r) return r;
    repl_proxy_ = std::make_unique<FaultProxy>(nodes_[0]->Port(), rng_());
    nodes_[1] =
        std::make_unique<RedisProcess>(RedisProcessOptions{.replicaof_port = repl_proxy_->port()});
    if (auto r = nodes_[1]->Start(); !r) return r;
    redis_proxy_ = std::make_unique<FaultProxy>(nodes_[0]->Port(), rng_());
    for (int i = 0; i < 2; ++i) {
      coordinators_[i] = std::make_unique<CoordinatorProcess>(
          CoordinatorOptions{.redis_url = RedisUrl(), .tick_interval_ms = 100});
      if (auto r = coordinators_[i]->Start(); !r) return r;
      Record(sim::HistKind::kStart, "", CoordinatorProc(i));
      coord_proxies_[i] = std::make_unique<FaultProxy>(coordinators_[i]->Port(), rng_());
    }
    HttpClient http(coordinators_[0]->Port());
    HttpResult created = http.Post(
        "/v1/groups", boost::json::value(boost::json::object{{"stream", config_.stream},
                                                             {"group", config_.group},
                                                             {"shardCount", config_.shards},
                                                             {"config", config_.group_config}}));
    if (created.status != 201) {
      return ::testing::AssertionFailure() << "creating the group: " << created.Describe();
    }
    return WaitReplicaInSync(std::chrono::seconds(10));
  }

  // What clients use: the virtual IP of Redis and the two coordinator proxies.
  std::string RedisUrl() const {
    return "redis://127.0.0.1:" + std::to_string(redis_proxy_->port());
  }
  std::vector<std::string> CoordinatorEndpoints() const {
    return {"127.0.0.1:" + std::to_string(coord_proxies_[0]->port()),
            "127.0.0.1:" + std::to_string(coord_proxies_[1]->port())};
  }
  RedisProcess& master() { return *nodes_[master_]; }
  RedisProcess& replica() { return *nodes_[1 - master_]; }
  CoordinatorProcess& coordinator(int i) { return *coordinators_[i]; }
  FaultProxy& coord_proxy(int i) { return *coord_proxies_[i]; }
  FaultProxy& redis_proxy() { return *redis_proxy_; }
  std::mt19937_64& rng() { return rng_; }
  const sim::History& history() const { return history_; }

  // ── the driver's own history ──
  // Every event recorded is also passed to `sink` (e.g. a JSONL log), in recording order.
  void set_sink(std::function<void(const sim::HistEvent&)> sink) { sink_ = std::move(sink); }
  void Record(sim::HistKind kind, std::string detail, std::string proc = "driver") {
    RecordAt(MonotonicUs(), kind, std::move(detail), std::move(proc));
  }
  void RecordAt(int64_t t_us, sim::HistKind kind, std::string detail, std::string proc = "driver") {
    sim::HistEvent e;
    e.t_us = t_us;
    e.kind = kind;
    e.proc = std::move(proc);
    e.detail = std::move(detail);
    Append(std::move(e));
  }
  void RecordFault(const std::string& kind) { Record(sim::HistKind::kFault, kind); }

  // ── Redis faults ──

  // Shard stream contents as a node holds them: id → what the entry carries.
  struct Entry {
    std::string key;   // field `key` ("" when the writer sets none)
    int64_t seq = -1;  // field `seq` (-1 when absent)
    bool operator==(const Entry&) const = default;
  };
  using StreamContents = std::map<int, std::map<std::string, Entry>>;

  // Reads every shard stream of `node` (paged XRANGE, reconnecting on transport errors).
  // Fails — never answers with a partial or empty picture — when the node cannot be read
  // or answers anything but an array: an unreadable old master read as empty would hide
  // every loss of a failover, an unreadable promoted node would excuse every entry
  // (issue 8: a failover's `lost` records named one shard of eight).
  ::testing::AssertionResult ReadStreams(RedisProcess& node, StreamContents* out) {
    out->clear();
    std::unique_ptr<RedisCli> cli;
    int failures = 0;
    std::string last_error;
    for (int s = 0; s < config_.shards; ++s) {
      std::string start = "-";
      for (;;) {
        if (!cli) {
          cli =
              RedisCli::Connect(node.Port(), "", "", std::chrono::milliseconds(5000), &last_error);
          if (!cli) {
            if (++failures > 10) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // reconnect backoff
            continue;
          }
        }
        const CliReply r = cli->Run({"XRANGE", ShardStream(s), start, "+", "COUNT", "1000"});
        if (r.type == CliReply::Type::kTransportError) {
          last_error = r.str;
          cli.reset();
          if (++failures > 10) break;
          continue;
        }
        if (r.type != CliReply::Type::kArray) {
          return ::testing::AssertionFailure() << "XRANGE " << ShardStream(s) << " on "
                                               << node.Address() << " answered: " << r.ToString();
        }
        for (const CliReply& entry : r.elements) {
          if (entry.elements.size() != 2 || entry.elements[1].type != CliReply::Type::kArray) {
            return ::testing::AssertionFailure()
                   << "XRANGE " << ShardStream(s) << ": malformed entry " << entry.ToString();
          }
          Entry content;
          const auto& f = entry.elements[1].elements;
          for (size_t i = 0; i + 1 < f.size(); i += 2) {
            if (f[i].str == "key") content.key = f[i + 1].str;
            if (f[i].str == "seq") content.seq = std::strtoll(f[i + 1].str.c_str(), nullptr, 10);
          }
          (*out)[s][entry.elements[0].str] = std::move(content);
        }
        if (r.elements.size() < 1000) break;
        start = "(" + r.elements.back().elements[0].str;  // exclusive: the next page
      }
      if (failures > 10) {
        return ::testing::AssertionFailure() << "cannot read the streams of " << node.Address()
                                             << " (" << failures << " failures): " << last_error;
      }
    }
    return ::testing::AssertionSuccess();
  }

  // The group's metadata revision and liveness deadlines as `node` holds them (what a
  // rollback must change for the checkers to taint anyone). "?" when unreadable: then it
  // counts as changed.
  std::string GroupStateOf(RedisProcess& node) {
    std::string err;
    auto cli = RedisCli::Connect(node.Port(), "", "", std::chrono::milliseconds(5000), &err);
    if (!cli) return "?" + std::to_string(MonotonicUs());
    const std::string tag = config_.stream + ":" + config_.group;
    const CliReply rev =
        cli->Run({"HGET", "redis-stream:coord:{" + tag + "}:metadata", "revision"});
    const CliReply live =
        cli->Run({"ZRANGE", "redis-stream:coord:{" + tag + "}:liveness", "0", "-1", "WITHSCORES"});
    if (rev.type == CliReply::Type::kTransportError || live.type != CliReply::Type::kArray) {
      return "?" + std::to_string(MonotonicUs());
    }
    return rev.ToString() + "|" + live.ToString();
  }

  // Records a `lost` event (with the entry's key and seq) for every entry `before` has that
  // `after` lacks — also when `after` holds that id with other content (a promoted node
  // may reuse an id the old master gave to a message it lost).
  // The records are stamped `t`: when the loss happened (the failover), not when reading the
  // nodes finished — a delivery in between must already see them (a 10-minute run reported
  // S4 for entries a failover lost, delivered around while the harness was still reading).
  int64_t RecordLost(const StreamContents& before, const StreamContents& after, int64_t t) {
    int64_t n = 0;
    for (const auto& [shard, entries] : before) {
      auto it = after.find(shard);
      for (const auto& [id, content] : entries) {
        if (it != after.end()) {
          auto kept = it->second.find(id);
          if (kept != it->second.end() && kept->second == content) continue;
        }
        sim::HistEvent e;
        e.t_us = t;
        e.kind = sim::HistKind::kLost;
        e.proc = "driver";
        e.shard = shard;
        e.stream = ShardStream(shard);
        e.id = id;
        e.key = content.key;
        e.seq = content.seq;
        Append(std::move(e));
        ++n;
      }
    }
    lost_ += n;
    return n;
  }
  int64_t lost() const { return lost_; }

  // Failover that loses the last writes (see the file comment). `cut_for`: how long the
  // master accepts writes the replica never gets.
  ::testing::AssertionResult FailoverLosingWrites(std::chrono::milliseconds cut_for) {
    if (auto r = WaitReplicaInSync(std::chrono::seconds(10)); !r) return r;
    repl_proxy_->SetFaults({.blackhole = true});
    std::this_thread::sleep_for(cut_for);  // the fault's length: writes the replica misses
    RedisProcess& old_master = master();
    RedisProcess& promoted = replica();
    if (!promoted.Cli()->Run({"REPLICAOF", "NO", "ONE"}).ok()) {
      return ::testing::AssertionFailure() << "REPLICAOF NO ONE failed";
    }
    promoted.set_replicaof_port(std::nullopt);  // a later restart comes back as the master
    redis_proxy_->Retarget(promoted.Port());
    redis_proxy_->ResetAll();
    // The rollback happens here: from now on every command reaches the promoted replica
    // (a request sent after this record is answered from the state it holds).
    const int64_t failover_t = MonotonicUs();
    // Every reply a client received from the old master was sent before the reset, so the
    // old master's streams now hold every acknowledged entry it will ever have.
    StreamContents before, after;
    if (auto r = ReadStreams(old_master, &before); !r) return r << " (the old master)";
    if (auto r = ReadStreams(promoted, &after); !r) return r << " (the promoted replica)";
    // A rollback (the checkers' taint) only if the group's metadata or a liveness deadline
    // went back; a failover that lost stream entries alone is recorded as such (issue 9).
    RecordAt(
        failover_t, sim::HistKind::kFault,
        GroupStateOf(old_master) == GroupStateOf(promoted) ? "failover_streams_only" : "failover");
    RecordLost(before, after, failover_t);
    old_master.Kill();
    master_ = 1 - master_;
    // The old master comes back as the new replica (its own data is discarded by the full
    // resynchronisation), so the next failover has a replica again.
    repl_proxy_->Retarget(master().Port());
    repl_proxy_->ResetAll();
    repl_proxy_->SetFaults({});
    old_master.set_replicaof_port(repl_proxy_->port());
    return old_master.Start();
  }

  // Saves a snapshot of the master now (RDB), for a later RestoreOlderSnapshot.
  ::testing::AssertionResult SaveSnapshot() {
    if (!master().Cli()->Run({"SAVE"}).ok()) return ::testing::AssertionFailure() << "SAVE";
    DropSnapshot();
    std::error_code ec;
    snapshot_path_ = master().Dir() + "/../chaos-snapshot-" + std::to_string(config_.seed) + "-" +
                     std::to_string(++snapshots_) + ".rdb";
    std::filesystem::copy_file(master().Dir() + "/dump.rdb", snapshot_path_,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return ::testing::AssertionFailure() << "copying dump.rdb: " << ec.message();
    snapshot_from_ = master_;
    return ::testing::AssertionSuccess();
  }
  bool has_snapshot() const { return !snapshot_path_.empty() && snapshot_from_ == master_; }

  // The master restarts from the snapshot saved earlier: everything written since is lost
  // (metadata, liveness, stream entries, consumer-group state) — an operator restoring a
  // backup, or a restart from a stale disk.
  ::testing::AssertionResult RestoreOlderSnapshot() {
    if (!has_snapshot()) return ::testing::AssertionFailure() << "no snapshot of this master";
    redis_proxy_->SetFaults({.blackhole = true});  // clients wait, as for a restarting host
    const int64_t restore_t = MonotonicUs();
    StreamContents before;
    if (auto r = ReadStreams(master(), &before); !r) return r << " (before the restore)";
    const std::string group_before = GroupStateOf(master());
    if (auto r = master().Stop(/*save=*/false); !r) return r;
    std::error_code ec;
    std::filesystem::copy_file(snapshot_path_, master().Dir() + "/dump.rdb",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return ::testing::AssertionFailure() << "restoring dump.rdb: " << ec.message();
    if (auto r = master().Start(); !r) return r;
    StreamContents after;
    if (auto r = ReadStreams(master(), &after); !r) return r << " (after the restore)";
    RecordAt(restore_t, sim::HistKind::kFault,
             group_before == GroupStateOf(master()) ? "snapshot_restore_streams_only"
                                                    : "snapshot_restore");
    RecordLost(before, after, restore_t);
    redis_proxy_->ResetAll();
    redis_proxy_->SetFaults({});
    DropSnapshot();
    // The replica resynchronises from the restarted master (its offset is ahead of the
    // snapshot's, so a full resync discards what it had).
    return ::testing::AssertionSuccess();
  }

  void ScriptFlush() {
    RecordFault("script_flush");
    for (auto& n : nodes_) {
      if (n && n->running()) {
        if (auto cli = n->Cli()) cli->Run({"SCRIPT", "FLUSH"});
      }
    }
  }

  // Deletes the group's metadata hash, waits `gone_for`, then restores it from an export
  // taken just before the deletion (the operator's runbook path). The admin calls go to a
  // running coordinator directly; like an operator, the driver retries them while they
  // fail (Redis behind a faulty proxy, a coordinator busy), for at most 10 s each.
  ::testing::AssertionResult DeleteMetadataThenRestore(std::chrono::milliseconds gone_for) {
    HttpResult exported;
    auto export_ok = WaitFor(
        [&] {
          if (LiveCoordinatorPort() == 0) return false;
          HttpClient http(LiveCoordinatorPort(), std::chrono::seconds(2));
          exported = http.Get("/v1/groups/" + config_.stream + "/" + config_.group + "/export");
          return exported.status == 200;
        },
        std::chrono::seconds(10), "the group's export", std::chrono::milliseconds(100));
    if (!export_ok) return export_ok << ": " << exported.Describe();
    RecordFault("key_delete");
    master().Cli()->Run(
        {"DEL", "redis-stream:coord:{" + config_.stream + ":" + config_.group + "}:metadata"});
    std::this_thread::sleep_for(gone_for);  // the outage's length
    HttpResult restored;
    auto restore_ok = WaitFor(
        [&] {
          if (LiveCoordinatorPort() == 0) return false;
          HttpClient http(LiveCoordinatorPort(), std::chrono::seconds(2));
          restored = http.Post("/v1/groups/restore", std::string_view(exported.body));
          return restored.status == 200;
        },
        std::chrono::seconds(10), "the group's restore", std::chrono::milliseconds(100));
    if (!restore_ok) return restore_ok << ": " << restored.Describe();
    RecordFault("restore");
    return ::testing::AssertionSuccess();
  }

  // ── coordinator faults ──
  // Proc name of coordinator i's current incarnation in the history ("coordinator-0#2").
  std::string CoordinatorProc(int i) const {
    return "coordinator-" + std::to_string(i) + "#" + std::to_string(incarnations_[i]);
  }
  bool coordinator_running(int i) const { return coordinators_[i]->running(); }
  bool coordinator_paused(int i) const { return paused_[i]; }
  bool coordinators_down() const { return coordinators_down_; }

  // SIGKILL (a paused process too), reap, then record the crash: nothing it answers can
  // follow the record.
  void KillCoordinator(int i) {
    if (!coordinators_[i]->running()) return;
    coordinators_[i]->Kill();
    paused_[i] = false;
    Record(sim::HistKind::kCrash, "SIGKILL", CoordinatorProc(i));
  }
  // A new process (new port) behind the same proxy; connections to the old one are cut.
  // Like a supervisor, it starts the process again when it exits at start-up (the
  // coordinator exits non-zero when its start-up check cannot reach Redis, SPEC L4: a
  // Redis-proxy fault can cause that), at most 10 times.
  ::testing::AssertionResult RestartCoordinator(int i) {
    if (coordinators_[i]->running()) return ::testing::AssertionSuccess();
    for (int attempt = 1;; ++attempt) {
      ::testing::AssertionResult r = coordinators_[i]->Start();
      if (r) break;
      if (attempt == 10 || coordinators_[i]->running()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a supervisor's backoff
    }
    ++incarnations_[i];
    Record(sim::HistKind::kStart, "", CoordinatorProc(i));
    coord_proxies_[i]->Retarget(coordinators_[i]->Port());
    coord_proxies_[i]->ResetAll();
    return ::testing::AssertionSuccess();
  }
  void PauseCoordinator(int i) {
    if (!coordinators_[i]->running() || paused_[i]) return;
    ::kill(coordinators_[i]->Pid(), SIGSTOP);
    paused_[i] = true;
  }
  void ResumeCoordinator(int i) {
    if (!coordinators_[i]->running() || !paused_[i]) return;
    ::kill(coordinators_[i]->Pid(), SIGCONT);
    paused_[i] = false;
  }

  // Every coordinator dies. `coordinators_down` is stamped after both were reaped, so every
  // answer given was to a request sent before it: every lease granted ends before the
  // record + the lease (L2).
  void CoordinatorsDown() {
    for (int i = 0; i < 2; ++i) KillCoordinator(i);
    coordinators_down_ = true;
    RecordFault("coordinators_down");
  }
  // `coordinators_up` is stamped before any coordinator starts: no lease a new process
  // grants can precede the record.
  ::testing::AssertionResult CoordinatorsUp() {
    RecordFault("coordinators_up");
    coordinators_down_ = false;
    for (int i = 0; i < 2; ++i) {
      if (auto r = RestartCoordinator(i); !r) return r;
    }
    return ::testing::AssertionSuccess();
  }

  // Lifts every proxy fault and resumes every paused coordinator.
  void HealNetwork() {
    for (auto& p : coord_proxies_) p->SetFaults({});
    redis_proxy_->SetFaults({});
    repl_proxy_->SetFaults({});
    for (int i = 0; i < 2; ++i) ResumeCoordinator(i);
  }

  // The replica has everything the master had when this was called. Not "equal offsets":
  // while clients keep writing, the two offsets sampled a moment apart rarely match (a
  // 10-minute run once waited 10 s for that and failed).
  ::testing::AssertionResult WaitReplicaInSync(std::chrono::milliseconds deadline) {
    int64_t target = -1;
    return WaitFor(
        [&] {
          auto m = master().Cli();
          auto r = replica().Cli();
          if (!m || !r) return false;
          if (target < 0) {
            const std::string mo =
                InfoField(m->Run({"INFO", "replication"}).str, "master_repl_offset");
            if (mo.empty()) return false;
            target = std::strtoll(mo.c_str(), nullptr, 10);
          }
          const CliReply ri = r->Run({"INFO", "replication"});
          const std::string ro = InfoField(ri.str, "master_repl_offset");
          return !ro.empty() && InfoField(ri.str, "master_link_status") == "up" &&
                 std::strtoll(ro.c_str(), nullptr, 10) >= target;
        },
        deadline, "the replica has what the master had");
  }

  // A coordinator that runs and is not paused (0 if none): the operator's admin calls go
  // to it directly, not through a faulty proxy.
  int LiveCoordinatorPort() const {
    for (int i = 0; i < 2; ++i) {
      if (coordinators_[i]->running() && !paused_[i]) return coordinators_[i]->Port();
    }
    return 0;
  }

  std::string ShardStream(int s) const {
    return "{" + config_.stream + ":" + std::to_string(s) + "}";
  }

 private:
  void Append(sim::HistEvent e) {
    if (sink_) sink_(e);
    history_.push_back(std::move(e));
  }

  static std::string InfoField(const std::string& info, const std::string& name) {
    const std::string needle = name + ":";
    const size_t at = info.find(needle);
    if (at == std::string::npos) return "";
    const size_t end = info.find_first_of("\r\n", at);
    return info.substr(at + needle.size(), end - at - needle.size());
  }

  // A snapshot file lives next to the nodes' directories (it outlives a failover of its
  // node): removed once used, replaced, or at the end.
  void DropSnapshot() {
    if (snapshot_path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove(snapshot_path_, ec);
    snapshot_path_.clear();
  }

  ChaosConfig config_;
  std::mt19937_64 rng_;
  std::unique_ptr<RedisProcess> nodes_[2];
  int master_ = 0;
  std::unique_ptr<FaultProxy> repl_proxy_;
  std::unique_ptr<FaultProxy> redis_proxy_;
  std::unique_ptr<CoordinatorProcess> coordinators_[2];
  std::unique_ptr<FaultProxy> coord_proxies_[2];
  int incarnations_[2] = {1, 1};
  bool paused_[2] = {false, false};
  bool coordinators_down_ = false;
  sim::History history_;
  std::function<void(const sim::HistEvent&)> sink_;
  std::string snapshot_path_;
  int snapshot_from_ = -1;
  int snapshots_ = 0;
  int64_t lost_ = 0;
};

}  // namespace rsc::testing
