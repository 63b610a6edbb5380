#include "sim/simulation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "sim/simulation_internal.h"

namespace rsc::sim {

std::string SimParams::Describe() const {
  return fmt::format(
      "shards={} consumers={} producers={} coordinators={} heartbeat={}ms assignmentLease={}ms "
      "memberLease={}ms rebalanceTimeout={}ms routingLease={}ms routingRefresh={}ms "
      "lockTtl={}ms tick={}ms httpTimeout={}ms maxLag={}ms batch={} block={}ms safety={}s "
      "convergenceBound={}s reshards={} coordWorkers={} pipelined={}",
      shards, consumers, producers, schedule, group.heartbeat_interval_ms,
      group.assignment_lease_ms, group.member_lease_ms, group.rebalance_timeout_ms,
      group.routing_lease_ms, group.routing_refresh_ms, lock_ttl_ms, tick_ms, http_timeout_ms,
      max_lag_ms, max_batch, block_ms, safety_ms / 1000, convergence_bound_ms / 1000, reshards,
      coord_workers, pipelined);
}

SimParams DrawParams(const SimOptions& o) {
  Rng rng(o.seed * 0x9e3779b97f4a7c15ULL + 0x5eed);
  SimParams p;
  static constexpr int64_t kHeartbeats[] = {100, 200, 300, 500, 1000};
  GroupConfig& g = p.group;
  g.heartbeat_interval_ms = kHeartbeats[rng.Uniform(0, 4)];
  g.assignment_lease_ms = std::max<int64_t>(500, g.heartbeat_interval_ms * rng.Uniform(2, 6));
  g.member_lease_ms = g.assignment_lease_ms + kMinLeaseMarginMs + rng.Uniform(0, 2000);
  g.rebalance_timeout_ms = g.member_lease_ms * rng.Uniform(10, 30) / 10;
  g.routing_lease_ms = rng.Uniform(2000, 20000);
  g.routing_refresh_ms = g.routing_lease_ms * rng.Uniform(20, 50) / 100;
  RSC_CHECK(ValidateConfig(g).ok());
  p.shards = o.shards > 0 ? o.shards : static_cast<int32_t>(rng.Uniform(1, 16));
  p.consumers = o.consumers > 0 ? o.consumers : static_cast<int>(rng.Uniform(1, 6));
  p.producers = o.producers > 0 ? o.producers : static_cast<int>(rng.Uniform(1, 3));
  const int64_t pick = rng.Uniform(0, 99);
  p.schedule = pick < 15 ? "1" : pick < 30 ? "2" : pick < 40 ? "3" : pick < 70 ? "1-2-1" : "1-0-1";
  p.coord_slots = p.schedule == "3" ? 3 : p.schedule == "1" || p.schedule == "1-0-1" ? 1 : 2;
  p.safety_ms = o.safety_ms > 0 ? o.safety_ms : rng.Uniform(45, 90) * 1000;
  p.schedule_t1 = p.safety_ms * rng.Uniform(15, 45) / 100;
  if (p.schedule == "1-0-1") {
    // The zero-replica gap: shorter or longer than the assignment lease (S2).
    p.schedule_t2 = p.schedule_t1 + g.assignment_lease_ms * rng.Uniform(3, 25) / 10;
  } else {
    p.schedule_t2 = p.safety_ms * rng.Uniform(50, 85) / 100;
  }
  p.lock_ttl_ms = rng.Uniform(500, 2000);
  p.lock_wait_ms = rng.Uniform(100, 1000);
  p.tick_ms = rng.Uniform(200, 1000);
  p.http_timeout_ms = rng.Uniform(300, 2000);
  p.coord_redis_timeout_ms = rng.Uniform(200, 1000);
  p.max_batch = static_cast<int>(rng.Uniform(1, 10));
  p.block_ms = rng.Uniform(50, 1000);
  p.handler_max_ms = rng.Uniform(2, 20);
  p.publish_min_ms = rng.Uniform(10, 100);
  p.publish_max_ms = p.publish_min_ms + rng.Uniform(0, 300);
  p.keys = static_cast<int>(rng.Uniform(1, 6));
  static constexpr int64_t kLags[] = {0, 2, 20, 200, 1000};
  p.max_lag_ms = kLags[rng.Uniform(0, 4)];
  // Time to converge after the heal: a dead member's lease, a correction round (at least a
  // member lease), a rebalance timeout for a stuck drain, plus backoffs and restarts.
  p.convergence_bound_ms =
      g.rebalance_timeout_ms + 3 * g.member_lease_ms + 10 * g.heartbeat_interval_ms + 15000;
  p.tail_ms = 15000;
  // Drawn last, so every earlier draw of a seed stays what it was before reshards existed.
  p.reshards = rng.Chance(0.3) ? static_cast<int>(rng.Uniform(1, 3)) : 0;
  if (o.reshards >= 0) p.reshards = o.reshards;
  if (p.reshards > 0) {
    // After the heal every sealed parent must be read to its end and seen complete (a tick,
    // or the hint) before its children are assigned.
    p.convergence_bound_ms += 2 * p.tick_ms + 5 * g.heartbeat_interval_ms;
    // A generation still PREPARING at the heal is sealed and activated one routing lease
    // (plus the skew margin) after its PREPARING write (Generation::prepared_ms).
    p.convergence_bound_ms += g.routing_lease_ms + kPrepareMarginMs;
  }
  // Drawn after the reshards, for the same reason. One worker in a quarter of the runs (the
  // strictly ordered coordinator), else 2–4: heartbeats batch and ticks run beside requests.
  p.coord_workers = rng.Chance(0.25) ? 1 : static_cast<int>(rng.Uniform(2, 4));
  if (o.coord_workers > 0) p.coord_workers = o.coord_workers;
  // Drawn last too. Half the runs send a backlog's XACK, next read and late-read check as one
  // pipeline (what the library does on one server), half one command at a time (a cluster).
  p.pipelined = rng.Chance(0.5);
  if (o.pipelined >= 0) p.pipelined = o.pipelined > 0;
  return p;
}

// ── transport ───────────────────────────────────────────────────────────────────────

void Simulation::SendHttp(const std::string& from_node, int slot, HttpRequest request,
                          std::function<void(const HttpResponse&)> on_reply) {
  auto reset = [this, on_reply](const std::string& why) {
    world_.After(world_.rng().Uniform(1, 10), [on_reply, why] {
      HttpResponse r;
      r.status = 0;
      r.body = why;
      on_reply(r);
    });
  };
  if (slot < 0 || slot >= p_.coord_slots || !LiveCoordinator(slot)) {
    reset("connection refused");
    return;
  }
  const std::string node = CoordNode(slot);
  const std::vector<TimeMs> plan = net_.Plan(from_node, node, Link::kHttp);
  if (plan.size() > 1 && request.target.find("/heartbeat") != std::string::npos) {
    world_.probes().Hit("heartbeat_duplicated");
  }
  for (TimeMs d : plan) {
    world_.After(d, [this, slot, node, from_node, request, on_reply, reset] {
      SimCoordinator* c = LiveCoordinator(slot);
      if (!c) {
        reset("connection reset: the coordinator is gone");
        return;
      }
      HttpCall call;
      call.request = request;
      call.reply = [this, node, from_node, on_reply](const HttpResponse& resp) {
        for (TimeMs back : net_.Plan(node, from_node, Link::kHttp)) {
          world_.After(back, [on_reply, resp] { on_reply(resp); });
        }
      };
      c->Receive(std::move(call));
    });
  }
}

void Simulation::SendRedis(const std::string& from_node, uint64_t& conn_epoch, RedisExec exec,
                           std::function<void(const StreamReply&)> on_reply) {
  auto fail = [this](std::function<void(const StreamReply&)> cb, const std::string& why,
                     TimeMs after) {
    world_.After(after, [cb = std::move(cb), why] {
      StreamReply r;
      r.error = std::string(kConnError) + why;
      cb(r);
    });
  };
  if (net_.Cut(from_node, "redis") || !redis_.up()) {
    conn_epoch = 0;
    fail(std::move(on_reply), "connection refused", world_.rng().Uniform(1, 20));
    return;
  }
  if (conn_epoch == 0) {
    conn_epoch = redis_.epoch();
  } else if (conn_epoch != redis_.epoch()) {
    conn_epoch = 0;
    fail(std::move(on_reply), "connection reset (redis restarted)", world_.rng().Uniform(0, 2));
    return;
  }
  const uint64_t epoch = conn_epoch;
  world_.After(net_.RedisLatency(), [this, epoch, exec = std::move(exec),
                                     on_reply = std::move(on_reply), fail]() mutable {
    if (redis_.epoch() != epoch || !redis_.up()) {
      fail(std::move(on_reply), "connection reset", net_.RedisLatency());
      return;
    }
    exec(redis_, [this, on_reply = std::move(on_reply)](StreamReply r) {
      if (world_.buggify().Fire("net.redis_reset", 0.01, world_.rng())) {
        r = StreamReply{};
        r.error = std::string(kConnError) + "connection reset by peer (reply lost)";
      }
      world_.After(net_.RedisLatency(), [on_reply, r = std::move(r)] { on_reply(r); });
    });
  });
}

// ── processes ───────────────────────────────────────────────────────────────────────

void Simulation::StartCoordinator(int slot) {
  CoordSlot& s = coord_slots_[static_cast<size_t>(slot)];
  const TimeMs skew = world_.rng().Uniform(-p_.skew_bound_ms, p_.skew_bound_ms);
  coordinators_.push_back(
      std::make_unique<SimCoordinator>(coord_ctx_, slot, ++s.incarnations, skew));
  s.current = coordinators_.back().get();
  ++coords_alive_;
  if (coords_down_) {
    coords_down_ = false;
    world_.Fault("coordinators_up", s.current->name());
  }
}

void Simulation::OnCoordExit(int slot) {
  CoordSlot& s = coord_slots_[static_cast<size_t>(slot)];
  if (!s.current || s.current->alive()) return;
  s.current = nullptr;
  --coords_alive_;
  if (coords_alive_ == 0) {
    coords_down_ = true;
    world_.Fault("coordinators_down", CoordNode(slot) + " was the last one");
  }
}

void Simulation::StartConsumer(int slot) {
  ConsumerSlot& s = *consumer_slots_[static_cast<size_t>(slot)];
  consumers_.push_back(std::make_unique<SimConsumer>(*this, consumer_params_, s));
  consumer_current_[static_cast<size_t>(slot)] = consumers_.back().get();
  consumers_.back()->Start();
}

void Simulation::StartProducer(int slot) {
  ProducerSlot& s = *producer_slots_[static_cast<size_t>(slot)];
  producers_.push_back(std::make_unique<SimProducer>(*this, producer_params_, s));
  producer_current_[static_cast<size_t>(slot)] = producers_.back().get();
  producers_.back()->Start();
}

void Simulation::Supervise() {
  Rng& rng = world_.rng();
  const bool healing = phase_ != Phase::kSafety;
  for (int i = 0; i < p_.coord_slots; ++i) {
    CoordSlot& s = coord_slots_[static_cast<size_t>(i)];
    if (s.desired && !s.current && !s.restart_pending) {
      s.restart_pending = true;
      world_.After(healing ? rng.Uniform(10, 200) : rng.Uniform(200, 3000), [this, i] {
        CoordSlot& cs = coord_slots_[static_cast<size_t>(i)];
        cs.restart_pending = false;
        if (cs.desired && !cs.current) StartCoordinator(i);
      });
    }
    if (!s.desired && s.current && s.current->alive() && !s.current->terminating()) {
      s.current->Terminate();
    }
  }
  for (size_t i = 0; i < consumer_current_.size(); ++i) {
    SimConsumer* c = consumer_current_[i];
    if (!c || !c->dead() || consumer_restart_pending_[i]) continue;
    consumer_restart_pending_[i] = true;
    // At least half a second: a dead process's last commands land at Redis first.
    world_.After(healing ? rng.Uniform(500, 800) : rng.Uniform(500, 5000), [this, i] {
      consumer_restart_pending_[i] = false;
      ConsumerSlot& s = *consumer_slots_[i];
      Rng& r = world_.rng();
      if (!s.instance_id.empty()) {
        const int64_t pick = r.Uniform(0, 99);
        if (pick >= 85) {
          s.instance_id.clear();
        } else if (pick >= 60) {
          s.instance_id = fmt::format("inst-{}-{}", s.index, s.incarnations + 1);
        }
      } else if (r.Chance(0.2)) {
        s.instance_id = fmt::format("inst-{}-{}", s.index, s.incarnations + 1);
      }
      StartConsumer(static_cast<int>(i));
    });
  }
  for (size_t i = 0; i < producer_current_.size(); ++i) {
    SimProducer* pr = producer_current_[i];
    if (!pr || !pr->dead() || producer_restart_pending_[i]) continue;
    producer_restart_pending_[i] = true;
    world_.After(healing ? rng.Uniform(100, 300) : rng.Uniform(200, 3000), [this, i] {
      producer_restart_pending_[i] = false;
      StartProducer(static_cast<int>(i));
      if (end_at_ >= 0 && world_.now() >= end_at_ - p_.tail_ms) {
        producer_current_[i]->StopPublishing();
      }
    });
  }
  // The key is gone (deleted, or a rollback lost it, even the create): the operator repairs
  // it — restore from the latest export, or create again if there is none yet.
  if (!redis_.HasMetadata(key_) && !repair_pending_) {
    repair_pending_ = true;
    world_.After(healing ? 0 : rng.Uniform(1000, 12000), [this] { OperatorRepair(); });
  }
  world_.After(250, [this] { Supervise(); });
}

// ── operator ────────────────────────────────────────────────────────────────────────

void Simulation::BeginHeal() {
  phase_ = Phase::kHealing;
  world_.buggify().set_active(false);
  net_.HealAll();
  redis_.Stall(0, 0);
  if (cluster_) cluster_->Settle();
  // The replica schedule's final state, and never zero replicas.
  bool any = false;
  for (const CoordSlot& s : coord_slots_) any = any || s.desired;
  if (!any) coord_slots_[0].desired = true;
  CheckHealed();
}

void Simulation::CheckHealed() {
  bool healed = redis_.up() && redis_.HasMetadata(key_) && !repair_pending_ && coords_alive_ > 0;
  for (int i = 0; i < p_.coord_slots; ++i) {
    const CoordSlot& s = coord_slots_[static_cast<size_t>(i)];
    if (s.desired && !LiveCoordinator(i)) healed = false;
  }
  for (SimConsumer* c : consumer_current_) {
    healed = healed && c && !c->dead() && !c->shutting_down();
  }
  for (SimProducer* pr : producer_current_) healed = healed && pr && !pr->dead();
  if (!healed) {
    // Run() reports a heal that never completes (hard stop) as a simulator failure.
    world_.After(100, [this] { CheckHealed(); });
    return;
  }
  phase_ = Phase::kLiveness;
  heal_at_ = world_.now();
  end_at_ = heal_at_ + p_.convergence_bound_ms + p_.tail_ms;
  drain_cap_ = end_at_ + 300'000;
  if (std::optional<Layout> l = redis_.PeekLayout(kStream)) {
    // L1 judges the newest generation (a PREPARING one becomes ACTIVE on the next tick):
    // the sealed ones are read to their end and owned by no one.
    // (Once resharded, also when older generations were deleted and dropped, RS5.)
    judged_generation_ = l->generations.back().generation;
    if (judged_generation_ != 0) JudgeNewestGeneration(*l);
  }
  world_.Fault("heal", "all");
  WatchNewestGeneration();
  world_.At(end_at_ - p_.tail_ms, [this] {
    for (SimProducer* pr : producer_current_) {
      if (pr) pr->StopPublishing();
    }
  });
}

void Simulation::JudgeNewestGeneration(const Layout& l) {
  std::vector<int32_t> ids;
  for (const LayoutShard& sh : l.generations.back().shards) ids.push_back(sh.id);
  world_.Fault("shards", "the newest generation", fmt::format("{}", fmt::join(ids, ",")));
}

// Seed 20263872: a layout put back past a reshard shortly before the heal named only the
// sealed generation then; the coordinator rolled it forward after the heal (RS6), and L1
// kept judging the sealed shards, read to their end and owned by no one. A newer generation
// appearing after the heal is judged from then on (a kFault after the heal re-arms L1 from
// it; a roll-forward that never comes still fails L1 on the sealed shards).
void Simulation::WatchNewestGeneration() {
  if (phase_ != Phase::kLiveness) return;
  if (std::optional<Layout> l = redis_.PeekLayout(kStream)) {
    if (l->generations.back().generation > judged_generation_) {
      judged_generation_ = l->generations.back().generation;
      world_.probes().Hit("newest_generation_after_heal");
      JudgeNewestGeneration(*l);
      RearmL1();
    }
    WatchParentsDraining(*l);
  }
  world_.After(100, [this] { WatchNewestGeneration(); });
}

void Simulation::MetricsTick() {
  // What an application's /metrics serves: the library's MetricsRegistry of its live clients
  // (the real Consumer and Producer objects of every live process). A process that died or
  // stopped leaves it; its restart is a new process and a new series.
  for (const auto& c : consumers_) {
    if (c->dead()) {
      registry_.Remove(c->consumer());
    } else {
      registry_.Add(c->consumer(), {{"process", c->name()}});
    }
  }
  for (const auto& p : producers_) {
    if (p->dead()) {
      registry_.Remove(p->producer());
    } else {
      registry_.Add(p->producer(), {{"process", p->name()}});
    }
  }
  if (std::optional<std::string> wrong = metrics_.Scrape(registry_.Render())) {
    world_.Fail(Violation{"O2", "client metrics: " + *wrong, world_.now() * 1000, 0});
    return;
  }
  world_.probes().Hit("metrics_scraped");
  world_.After(kMetricsEveryMs, [this] { MetricsTick(); });
}

void Simulation::RearmL1() {
  // The re-armed bound must fit in the run (Finish() judges a pending L1 check).
  end_at_ = std::max(end_at_, world_.now() + p_.convergence_bound_ms + p_.tail_ms);
  drain_cap_ = std::max(drain_cap_, end_at_ + 300'000);
}

// Seed 20269224: RS3 has the judged generation's children wait until every parent is read
// to its end, and a parent's backlog at the heal is as long as the load made it (a shrink
// to one shard under three producers: 7,815 entries, one reader at ~100/s). That wait is the
// protocol, not a failure to converge. So while a sealed parent is incomplete and its
// reading advanced (last-delivered id moved, or fewer pending) since the last look, L1's
// clock restarts from now (a "parents_draining" fault, at most once a second). A parent
// nobody reads does not advance, and L1 fails as before.
void Simulation::WatchParentsDraining(const Layout& l) {
  std::vector<std::pair<std::string, int64_t>> now;  // per incomplete parent: cursor, pending
  for (const Generation& g : l.generations) {
    if (g.state != GenerationState::kSealed) continue;
    for (const LayoutShard& s : g.shards) {
      Result<GroupProgress> p = redis_.Progress(s.stream, kGroup);
      if (!p.ok() || p->Complete()) continue;
      now.emplace_back(p->last_delivered_id, p->pending);
    }
  }
  if (now.empty()) {
    parents_seen_.clear();
    return;
  }
  bool advanced = now.size() != parents_seen_.size();
  for (size_t i = 0; i < now.size() && !advanced; ++i) {
    advanced = now[i].first != parents_seen_[i].first || now[i].second < parents_seen_[i].second;
  }
  if (!advanced || world_.now() < parents_rearmed_at_ + 1000) return;
  parents_seen_ = std::move(now);
  parents_rearmed_at_ = world_.now();
  world_.probes().Hit("l1_rearmed_parents_draining");
  world_.Fault("parents_draining", "a sealed parent of the judged generation is still read");
  RearmL1();
}

SimResult Simulation::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  CheckerConfig cc;
  cc.shards = p_.shards;
  cc.max_assignment_lease_us = p_.group.assignment_lease_ms * 1000;
  cc.max_routing_lease_us = p_.group.routing_lease_ms * 1000;
  cc.member_lease_us = p_.group.member_lease_ms * 1000;
  cc.convergence_bound_us = p_.convergence_bound_ms * 1000;
  cc.clock_skew_us = 2 * p_.skew_bound_ms * 1000;
  cc.taint_on_rollback_fault = false;   // the simulator emits kTaint for whom it concerns
  cc.check_deliveries_in_lease = true;  // one clock: the lease check and the stamp agree
  world_.SetChecker(cc);
  world_.set_trace(opt_.trace);
  world_.set_observer([this](const HistEvent& e) { TaintAnswerAcrossRollback(e); });
  redis_.set_max_lag_ms(p_.max_lag_ms);
  Rng& rng = world_.rng();

  // Coordinators and their replica schedule.
  coord_slots_.resize(static_cast<size_t>(p_.coord_slots));
  const int initial = p_.schedule == "2" ? 2 : p_.schedule == "3" ? 3 : 1;
  for (int i = 0; i < initial; ++i) {
    coord_slots_[static_cast<size_t>(i)].desired = true;
    StartCoordinator(i);
  }
  if (p_.schedule == "1-2-1") {
    world_.At(p_.schedule_t1, [this] { coord_slots_[1].desired = true; });   // scale up
    world_.At(p_.schedule_t2, [this] { coord_slots_[0].desired = false; });  // old one leaves
  } else if (p_.schedule == "1-0-1") {
    world_.At(p_.schedule_t1, [this] { coord_slots_[0].desired = false; });
    world_.At(p_.schedule_t2, [this] { coord_slots_[0].desired = true; });
  }
  world_.After(rng.Uniform(0, 200), [this] { OperatorCreate(); });
  for (int i = 0; i < p_.reshards; ++i) {
    // SPEC RS4: reshards (grow and shrink) under every fault of the safety phase.
    world_.At(p_.safety_ms * rng.Uniform(10, 80) / 100, [this] { OperatorReshard(); });
  }
  if (p_.reshards > 0 && world_.buggify().Enabled("redis.layout_rollback")) {
    // SPEC RS6: the layout hash alone goes back past a reshard. Drawn from a generator of
    // its own, so every other draw of the seed stays what it was.
    Rng own(opt_.seed ^ 0x6c61796f75745f72ULL);
    const int64_t n = own.Uniform(1, 3);
    for (int64_t i = 0; i < n; ++i) {
      world_.At(p_.safety_ms * own.Uniform(15, 95) / 100, [this] { LayoutRollback(); });
    }
  }

  for (int i = 0; i < p_.consumers; ++i) {
    auto s = std::make_unique<ConsumerSlot>();
    s->index = i;
    s->node = fmt::format("consumer-{}", i);
    if (rng.Chance(0.5)) s->instance_id = fmt::format("inst-{}", i);
    s->version_store = rng.Chance(0.5);
    s->endpoint_offset = static_cast<int>(rng.Uniform(0, p_.coord_slots - 1));
    consumer_slots_.push_back(std::move(s));
    consumer_current_.push_back(nullptr);
    consumer_restart_pending_.push_back(false);
    world_.After(rng.Uniform(0, 3000), [this, i] { StartConsumer(i); });
  }
  for (int i = 0; i < p_.producers; ++i) {
    auto s = std::make_unique<ProducerSlot>();
    s->index = i;
    s->node = fmt::format("producer-{}", i);
    s->version_store = rng.Chance(0.5);
    s->by_stream = i % 2 == 1;
    producer_slots_.push_back(std::move(s));
    producer_current_.push_back(nullptr);
    producer_restart_pending_.push_back(false);
    world_.After(rng.Uniform(0, 3000), [this, i] { StartProducer(i); });
  }
  world_.After(250, [this] { Supervise(); });
  world_.After(2000, [this] { ChaosTick(); });
  world_.After(1000, [this] { SnapshotTick(); });
  world_.After(1500, [this] { ExportTick(); });
  world_.After(kMetricsEveryMs, [this] { MetricsTick(); });
  world_.At(p_.safety_ms, [this] { BeginHeal(); });

  const TimeMs hard_stop = p_.safety_ms + 120'000 + p_.convergence_bound_ms + p_.tail_ms;
  while (!world_.stopped()) {
    const TimeMs until = end_at_ >= 0 ? end_at_ : std::min(world_.now() + 1000, hard_stop);
    world_.RunUntil(until);
    if (end_at_ >= 0 && world_.now() >= end_at_) {
      // S3 is judged at the end: consumers get time to work off a backlog first (after a
      // rollback a group may re-read its stream from the start), within a bound.
      if (!undelivered_.empty() && world_.now() < drain_cap_) {
        world_.probes().Hit("end_waited_for_backlog");
        end_at_ += 5000;
        continue;
      }
      break;
    }
    if (world_.now() >= hard_stop) break;
  }
  SimResult r;
  r.seed = opt_.seed;
  r.params = p_;
  if (!world_.stopped()) {
    if (end_at_ < 0) {
      Violation v;
      v.invariant = "SIM";
      v.message = "the heal never completed (processes, coordinators or metadata not back)";
      v.t_us = world_.now() * 1000;
      r.violation = v;
    } else {
      world_.FinishChecker();
    }
  }
  if (!r.violation) r.violation = world_.violation();
  const History& h = world_.history();
  const size_t from = h.size() > opt_.tail ? h.size() - opt_.tail : 0;
  r.tail.assign(h.begin() + static_cast<std::ptrdiff_t>(from), h.end());
  if (r.violation) r.state = DumpState();
  r.digest = world_.digest();
  r.events = static_cast<int64_t>(h.size());
  r.simulated_ms = world_.now();
  r.faults = world_.fault_counts();
  r.probes = world_.probes().counts();
  r.sites = world_.buggify().sites();
  if (const CheckerCounters* c = world_.checker_counters()) r.counters = *c;
  r.real_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string Simulation::DumpState() {
  std::string out;
  auto loaded = redis_.Load(key_, world_.now());
  if (loaded.ok()) {
    const GroupMetadata& m = *loaded->meta;
    out += fmt::format(
        "  metadata: revision {} version {} assignmentEpoch {} activeGeneration {} "
        "layoutRevision {}\n",
        loaded->revision.value(), m.version.value(), m.assignment_epoch.value(),
        m.active_generation, m.layout_revision);
    for (const ShardState& sh : m.shards) {
      out += fmt::format("    shard {}: owner={} target={} generation={}{}\n", sh.id, sh.owner,
                         sh.target, sh.generation, sh.completed ? " completed" : "");
    }
    for (const Member& mem : m.members) {
      out += fmt::format("    member {} epoch {}{}{}\n", mem.id.str(), mem.epoch.value(),
                         mem.leaving ? " leaving" : "", mem.fenced ? " fenced" : "");
    }
    if (m.round) {
      out += fmt::format("    correction round {} started at version {}, {} blockers\n",
                         m.round->id, m.round->started_version.value(), m.round->blockers.size());
    }
  } else {
    out += "  metadata: " + loaded.error().message + "\n";
  }
  for (SimConsumer* c : consumer_current_) {
    if (!c) continue;
    const client::ConsumerStatus st = c->core().Status(0);
    std::string held;
    for (int32_t s : c->HeldShards()) held += fmt::format("{} ", s);
    out += fmt::format("  {} ({}): {} epoch {} reading {} draining {} revoked {} held [{}]\n",
                       c->name(), c->member(), c->dead() ? "dead" : ConsumerPhaseName(st.phase),
                       st.member_epoch, st.reading.size(), st.draining.size(), st.revoked.size(),
                       held);
  }
  for (int i = 0; i < p_.coord_slots; ++i) {
    SimCoordinator* c = LiveCoordinator(i);
    out += fmt::format("  coord-{}: {}\n", i, c ? c->name() : "down");
  }
  return out;
}

SimResult RunSimulation(const SimOptions& options) {
  spdlog::set_level(spdlog::level::off);  // the Api logs every 503; the history says more
  Simulation sim(options);
  return sim.Run();
}

std::string ReplayCommand(const SimOptions& o, const std::string& binary) {
  std::string cmd = fmt::format("{} --seed {}", binary, o.seed);
  if (o.safety_ms > 0) cmd += fmt::format(" --safety-seconds {}", o.safety_ms / 1000);
  if (o.shards > 0) cmd += fmt::format(" --shards {}", o.shards);
  if (o.consumers > 0) cmd += fmt::format(" --consumers {}", o.consumers);
  if (o.producers > 0) cmd += fmt::format(" --producers {}", o.producers);
  if (o.reshards >= 0) cmd += fmt::format(" --reshards {}", o.reshards);
  if (o.coord_workers > 0) cmd += fmt::format(" --coord-workers {}", o.coord_workers);
  if (o.pipelined >= 0) cmd += fmt::format(" --pipelined {}", o.pipelined);
  if (o.sites == Buggify::Mode::kAllOn) cmd += " --all-faults";
  if (o.sites == Buggify::Mode::kAllOff) cmd += " --no-faults";
  if (!o.mutant.empty()) cmd += " --mutant " + o.mutant;
  return cmd + " --trace";
}

std::string FailureReport(const SimOptions& options, const SimResult& r,
                          const std::string& binary) {
  std::string out;
  out += fmt::format("FAILED seed {}: {} — {}\n", r.seed, r.violation->invariant,
                     r.violation->message);
  out += fmt::format("  at t={:.3f}s of simulated time; {}\n",
                     static_cast<double>(r.violation->t_us) / 1e6, r.params.Describe());
  std::string on;
  for (const auto& [site, enabled] : r.sites) {
    if (enabled) on += site + " ";
  }
  out += "  fault sites on: " + on + "\n";
  out += fmt::format("last {} events:\n", r.tail.size());
  for (const HistEvent& e : r.tail) out += "  " + FormatEvent(e) + "\n";
  out += "state at the end:\n" + r.state;
  out += "replay: " + ReplayCommand(options, binary) + "\n";
  return out;
}

}  // namespace rsc::sim
