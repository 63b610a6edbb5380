#pragma once
// The simulation's orchestrator, shared by simulation.cc (processes, transport, heal, the
// run), chaos.cc (faults and the operator) and nothing else. Not a public interface: use
// RunSimulation (sim/simulation.h).

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rsc/metrics.h"
#include "sim/metrics_watch.h"
#include "sim/network.h"
#include "sim/services.h"
#include "sim/sim_consumer.h"
#include "sim/sim_coordinator.h"
#include "sim/sim_producer.h"
#include "sim/sim_redis.h"
#include "sim/simulation.h"
#include "sim/world.h"

namespace rsc::sim {

inline constexpr const char* kStream = "orders";
inline constexpr const char* kGroup = "g1";

class Simulation : public Services {
 public:
  explicit Simulation(const SimOptions& o)
      : opt_(o), p_(DrawParams(o)), world_(o.seed, o.sites), redis_(world_), net_(world_) {
    key_ = GroupKey{kStream, kGroup};
    coord_ctx_.world = &world_;
    coord_ctx_.redis = &redis_;
    coord_ctx_.net = &net_;
    coord_ctx_.group = key_;
    coord_ctx_.service.lock_ttl = std::chrono::milliseconds(p_.lock_ttl_ms);
    coord_ctx_.service.lock_wait = std::chrono::milliseconds(p_.lock_wait_ms);
    coord_ctx_.tick_interval_ms = p_.tick_ms;
    coord_ctx_.workers = p_.coord_workers;
    // RS5: delete a retired generation's keys as early as production may (after the routing
    // lease), so the runs exercise it.
    coord_ctx_.service.retired_retention_ms = 0;
    world_.set_mutant(o.mutant);
    mutant_decider_ = MakeMutantDecider(o.mutant);
    coord_ctx_.service.decider = mutant_decider_.get();
    coord_ctx_.redis_timeout_ms = p_.coord_redis_timeout_ms;
    redis_.set_on_lock_lost([this](const std::string& proc) {
      // The mutex went away under its holder: model why — the holder stalled — so the
      // others get time to write before it wakes up and tries its CAS.
      for (auto& c : coordinators_) {
        if (c->name() == proc && c->alive()) c->Stall(world_.rng().Uniform(100, 1500));
      }
    });
    coord_ctx_.on_exit = [this](int slot) { world_.After(0, [this, slot] { OnCoordExit(slot); }); };
    consumer_params_.group = key_;
    consumer_params_.endpoint_count = p_.coord_slots;
    consumer_params_.http_timeout_ms = p_.http_timeout_ms;
    consumer_params_.max_batch = p_.max_batch;
    consumer_params_.block_ms = p_.block_ms;
    consumer_params_.pipelined = p_.pipelined;
    if (!p_.pipelined) cluster_ = std::make_unique<SimCluster>(world_, redis_);
    coord_ctx_.cluster = cluster_.get();
    consumer_params_.handler_max_ms = p_.handler_max_ms;
    consumer_params_.member_lease_ms = p_.group.member_lease_ms;
    consumer_params_.rebalance_timeout_ms = p_.group.rebalance_timeout_ms;
    producer_params_.group = key_;
    producer_params_.endpoint_count = p_.coord_slots;
    producer_params_.http_timeout_ms = p_.http_timeout_ms;
    producer_params_.publish_min_ms = p_.publish_min_ms;
    producer_params_.publish_max_ms = p_.publish_max_ms;
    producer_params_.keys = p_.keys;
  }

  ~Simulation() override {
    for (auto& c : coordinators_) c->Teardown();
  }

  SimResult Run();

  // ── Services ──
  World& world() override { return world_; }
  SimRedis& redis() override { return redis_; }
  SimCluster* cluster() override { return cluster_.get(); }
  Network& net() override { return net_; }
  void SendHttp(const std::string& from_node, int slot, HttpRequest request,
                std::function<void(const HttpResponse&)> on_reply) override;
  void SendRedis(const std::string& from_node, uint64_t& conn_epoch, RedisExec exec,
                 std::function<void(const StreamReply&)> on_reply) override;
  bool in_fault_phase() const override { return phase_ == Phase::kSafety; }
  int64_t CountDelivery(const std::string& key, int64_t seq) override {
    undelivered_.erase({key, seq});
    return deliveries_[{key, seq}]++;
  }
  void NotePublished(const std::string& stream, const StreamId& id, const std::string& key,
                     int64_t seq) override {
    acked_[{stream, id}] = {key, seq};
    if (!deliveries_.count({key, seq})) undelivered_.insert({key, seq});
  }

 private:
  enum class Phase { kSafety, kHealing, kLiveness };
  struct CoordSlot {
    SimCoordinator* current = nullptr;
    int incarnations = 0;
    bool desired = false;
    bool restart_pending = false;
  };

  static std::string CoordNode(int slot) { return fmt::format("coord-{}", slot); }
  SimCoordinator* LiveCoordinator(int slot) {
    SimCoordinator* c = coord_slots_[static_cast<size_t>(slot)].current;
    return c && c->alive() ? c : nullptr;
  }

  void StartCoordinator(int slot);
  void OnCoordExit(int slot);
  void StartConsumer(int slot);
  void StartProducer(int slot);
  void Supervise();
  void ChaosTick();
  void SnapshotTick();
  void ExportTick();
  void BeginHeal();
  void CheckHealed();
  // L1 judges the stream's newest generation (a kFault "shards" naming its ids); after the
  // heal, a newer one (a layout rolled forward, RS6) is judged from when it appears.
  void JudgeNewestGeneration(const Layout& l);
  void WatchNewestGeneration();
  // Every 5 simulated s (no draw: the run is the same with or without it): scrapes every live
  // client's metrics as an application's /metrics would and hands them to metrics_ (O2).
  void MetricsTick();
  void RearmL1();
  void WatchParentsDraining(const Layout& l);
  void RecordLost(const std::vector<LostEntry>& lost);
  void DeleteWhenQuiet(int attempts);
  void AfterRollback();
  void TaintWhoseViewWentBack(int64_t revision_before,
                              const std::map<std::string, TimeMs>& live_before);
  // An answer to a heartbeat sent before the last rollback that went back, heard after it,
  // was decided on what the rollback may have lost: tainted as if heard just before it.
  void TaintAnswerAcrossRollback(const HistEvent& e);
  std::vector<std::string> Nodes() const;
  void RandomLink(std::string* a, std::string* b);

  // Operator (rsc CLI) actions through a coordinator, retried until answered.
  void OperatorCall(HttpRequest req, std::function<bool(const HttpResponse&)> done,
                    int attempts_left, std::function<void()> on_timeout = nullptr);
  void OperatorCreate();
  void OperatorRepair();
  void NoteRestoreAcrossReshard(const std::string& exported, const std::string& answer);
  void OperatorFence(const std::string& member);
  // POST /v1/streams/{P}/reshard to 1–16 shards with the current layout revision.
  void OperatorReshard();
  // RS6: puts the layout hash back to `layout_before_reshard_` when the generation it names
  // ACTIVE is still in the stream (not retired: a tombstone names no successor).
  void LayoutRollback();
  // Probe erased_generation_keys_reused: records the keys of routed generations a snapshot
  // restore erased (`before`: the layout before it), then checks a new reshard's keys.
  void NoteErasedGenerations(const std::optional<Layout>& before);
  void NoteReusedKeys();
  std::string DumpState();

  const SimOptions opt_;
  const SimParams p_;
  World world_;
  SimRedis redis_;
  Network net_;
  // The consumers' readers see a cluster in the seeds whose consumers do not pipeline their
  // live reads (production pipelines them on one server only).
  std::unique_ptr<SimCluster> cluster_;
  GroupKey key_;
  Phase phase_ = Phase::kSafety;
  TimeMs heal_at_ = -1;
  TimeMs end_at_ = -1;
  TimeMs drain_cap_ = -1;  // the end waits for the last deliveries until then at most
  TimeMs last_rollback_ = -1'000'000;
  int32_t judged_generation_ = 0;  // the generation L1 judges (WatchNewestGeneration)
  // WatchParentsDraining: the incomplete sealed parents as last seen advancing (cursor,
  // pending), and when L1 was last re-armed for them.
  std::vector<std::pair<std::string, int64_t>> parents_seen_;
  TimeMs parents_rearmed_at_ = -1'000'000;
  // The last rollback whose taint ran (TaintWhoseViewWentBack) and the members whose
  // liveness deadline it put back.
  TimeMs view_rollback_at_ = -1;
  std::set<std::string> view_rollback_deadline_back_;
  std::set<std::string> view_rollback_tainted_;  // procs it tainted (at the time or later)

  std::unique_ptr<Decider> mutant_decider_;  // sim/mutants.h; null in a correct run
  CoordContext coord_ctx_;
  std::vector<CoordSlot> coord_slots_;
  int coords_alive_ = 0;
  bool coords_down_ = false;
  std::vector<std::unique_ptr<SimCoordinator>> coordinators_;

  ConsumerParams consumer_params_;
  std::vector<std::unique_ptr<ConsumerSlot>> consumer_slots_;
  std::vector<SimConsumer*> consumer_current_;
  std::vector<bool> consumer_restart_pending_;
  std::vector<std::unique_ptr<SimConsumer>> consumers_;

  ProducerParams producer_params_;
  std::vector<std::unique_ptr<ProducerSlot>> producer_slots_;
  std::vector<SimProducer*> producer_current_;
  std::vector<bool> producer_restart_pending_;
  std::vector<std::unique_ptr<SimProducer>> producers_;
  MetricsWatch metrics_;
  MetricsRegistry registry_;  // the live clients, as an application registers them
  static constexpr TimeMs kMetricsEveryMs = 5000;

  std::string export_;
  std::optional<MemoryStore::Hash> layout_before_reshard_;  // as it was before the last reshard
  // Keys of generations producers could route to (ACTIVE or SEALED) that a snapshot restore
  // erased from the layout: a later reshard choosing one (D2: highest id + 1) is the path
  // of seed 20265809 (probe erased_generation_keys_reused).
  std::set<std::string> erased_keys_;
  bool repair_pending_ = false;
  bool key_deleted_ = false;  // a DEL is pending or done, and no restore happened since
  bool deleting_ = false;     // the DEL waits for a moment with no coordinator inside
  std::map<std::pair<std::string, int64_t>, int64_t> deliveries_;
  std::map<std::pair<std::string, StreamId>, std::pair<std::string, int64_t>> acked_;
  // Acked (key, seq) not delivered yet: the run ends only once this drains (bounded).
  std::set<std::pair<std::string, int64_t>> undelivered_;
};

}  // namespace rsc::sim
