// The simulation's faults (the chaos driver of the safety phase) and its operator (`rsc`
// admin actions through a coordinator): sim/simulation_internal.h.

#include <fmt/format.h>

#include "core/codec.h"
#include "core/layout_codec.h"
#include "core/protocol_json.h"
#include "sim/simulation_internal.h"

namespace rsc::sim {

void Simulation::OperatorCall(HttpRequest req, std::function<bool(const HttpResponse&)> done,
                              int attempts_left, std::function<void()> on_timeout) {
  // Try the endpoints from a random one; a lost answer is retried after a timeout.
  int slot = static_cast<int>(world_.rng().Uniform(0, p_.coord_slots - 1));
  for (int i = 0; i < p_.coord_slots && !LiveCoordinator(slot); ++i) {
    slot = (slot + 1) % p_.coord_slots;
  }
  auto answered = std::make_shared<bool>(false);
  auto retry = [this, req, done, attempts_left] {
    if (attempts_left > 1) {
      world_.After(
          500, [this, req, done, attempts_left] { OperatorCall(req, done, attempts_left - 1); });
    }
  };
  SendHttp("operator", slot, req, [answered, done, retry](const HttpResponse& resp) {
    if (*answered) return;
    *answered = true;
    if (!done(resp)) retry();
  });
  world_.After(3000, [answered, retry, on_timeout] {
    if (*answered) return;
    *answered = true;
    if (on_timeout) on_timeout();
    retry();
  });
}

void Simulation::OperatorCreate() {
  CreateGroupRequest c;
  c.stream = kStream;
  c.group = kGroup;
  // A stream that has a layout (the group was lost, its stream was not) is joined as it is
  // now, maybe resharded since (D3: no shardCount adopts the stream's); a new one is created.
  c.shard_count = redis_.PeekLayout(kStream) ? 0 : p_.shards;
  c.config = p_.group;
  HttpRequest req;
  req.method = "POST";
  req.target = "/v1/groups";
  req.body = SerializeCreateGroupRequest(c);
  OperatorCall(
      req, [](const HttpResponse& r) { return r.status == 201 || r.status == 409; }, 1000);
}

void Simulation::NoteRestoreAcrossReshard(const std::string& exported, const std::string& answer) {
  // An export from before a reshard, restored after it: the answer shows a generation the
  // export did not have (the group took the current layout in its write, protocol.md 7.3).
  Result<ExportDoc> doc = DecodeExport(exported);
  Result<GroupView> view = ParseGroupView(answer);
  if (!doc.ok() || !view.ok()) return;
  for (const ShardView& sh : view->shards) {
    if (sh.generation > doc->meta.active_generation) {
      world_.probes().Hit("restored_across_reshard");
      return;
    }
  }
}

void Simulation::OperatorRepair() {
  // The metadata key is gone (deleted, or a rollback lost it): an operator restores the
  // latest export (`rsc restore`), or creates the group again if there is none.
  if (redis_.HasMetadata(key_)) {
    repair_pending_ = false;
    return;
  }
  // Some operators have no export at hand (runbook §3 "No export"): they create the group
  // again over the lost key, which must hold every grant back while the lost group's leases
  // may run (seed 8431395707449856820). A quarter of the repairs take that path.
  if (export_.empty() || world_.rng().Chance(0.25)) {
    repair_pending_ = false;
    world_.probes().Hit("lost_group_created_again");
    OperatorCreate();
    return;
  }
  HttpRequest req;
  req.method = "POST";
  req.target = "/v1/groups/restore";
  req.body = export_;
  // One attempt at a time: a retry goes through this function again, so an operator who
  // sees the key back (a lost answer to a restore that did apply) does not restore twice.
  OperatorCall(
      req,
      [this, exported = export_](const HttpResponse& r) {
        if (r.status == 200) NoteRestoreAcrossReshard(exported, r.body);
        if (r.status != 200 && !redis_.HasMetadata(key_)) {
          world_.After(500, [this] { OperatorRepair(); });
          return true;
        }
        repair_pending_ = false;
        return true;
      },
      1, [this] { world_.After(500, [this] { OperatorRepair(); }); });
}

void Simulation::OperatorReshard() {
  if (phase_ != Phase::kSafety) return;
  HttpRequest get;
  get.method = "GET";
  get.target = fmt::format("/v1/streams/{}", kStream);
  OperatorCall(
      get,
      [this](const HttpResponse& r) {
        if (r.status != 200) return r.status != 0 && r.status < 500;  // 404: not created yet
        Result<StreamView> view = ParseStreamView(r.body);
        if (!view.ok()) return true;
        layout_before_reshard_ = redis_.LayoutHash(kStream);
        ReshardRequest rr;
        rr.expected_layout_revision = view->revision;
        rr.shard_count = static_cast<int32_t>(world_.rng().Uniform(1, 16));
        HttpRequest post;
        post.method = "POST";
        post.target = fmt::format("/v1/streams/{}/reshard", kStream);
        post.body = SerializeReshardRequest(rr);
        const int32_t n = rr.shard_count;
        OperatorCall(
            post,
            [this, n](const HttpResponse& a) {
              // 409s (in progress, conflict, clients too old) end it: an operator would
              // look and decide again; the next scheduled reshard does.
              if (a.status == 200) {
                world_.probes().Hit("reshard_started");
                world_.Fault("reshard", fmt::format("to {} shards", n));
                NoteReusedKeys();
              }
              return a.status != 0 && a.status < 500;
            },
            3);
        return true;
      },
      3);
}

void Simulation::NoteErasedGenerations(const std::optional<Layout>& before) {
  if (!before) return;
  const std::optional<Layout> after = redis_.PeekLayout(kStream);
  for (const Generation& g : before->generations) {
    if (g.state != GenerationState::kActive && g.state != GenerationState::kSealed) continue;
    bool kept = false;
    if (after) {
      for (const Generation& a : after->generations) kept = kept || a.generation == g.generation;
    }
    if (kept) continue;
    for (const LayoutShard& s : g.shards) erased_keys_.insert(s.stream);
  }
}

void Simulation::NoteReusedKeys() {
  const std::optional<Layout> now = redis_.PeekLayout(kStream);
  if (!now || now->generations.empty()) return;
  for (const LayoutShard& s : now->generations.back().shards) {
    if (erased_keys_.count(s.stream) > 0) {
      world_.probes().Hit("erased_generation_keys_reused");
      return;
    }
  }
}

namespace {

// A layout hash as the store keeps it, decoded.
Result<StoredLayout> DecodeStored(const std::string& stream, const MemoryStore::Hash& hash) {
  LayoutHashFields f;
  auto field = [&](const char* name) -> std::optional<std::string> {
    auto it = hash.fields.find(name);
    if (it == hash.fields.end()) return std::nullopt;
    return it->second;
  };
  f.layout = field("layout");
  f.revision = field("revision");
  f.schema_version = field("schemaVersion");
  return DecodeLayoutHash(stream, f);
}

}  // namespace

void Simulation::LayoutRollback() {
  if (phase_ != Phase::kSafety || !layout_before_reshard_) return;
  Result<StoredLayout> before = DecodeStored(kStream, *layout_before_reshard_);
  const std::optional<MemoryStore::Hash> current = redis_.LayoutHash(kStream);
  if (!before.ok() || !current || before->layout.Active() == nullptr) return;
  Result<StoredLayout> now = DecodeStored(kStream, *current);
  if (!now.ok()) return;
  // Only back: a snapshot restore since the hash was saved may have taken the layout to
  // before it, and putting it "back" then would be a layout from the future of its streams
  // (a generation the restore unsealed, the layout saying it was read out). No restore by
  // hand does that, and RS6 is about a layout behind its streams. Found by seed 20266797
  // (--reshards 2 --coord-workers 1 --pipelined 0), which the NodeCore change (issue 10)
  // drew: a producer wrote to the unsealed parent while the children were read.
  if (before->revision.value() >= now->revision.value()) {
    if (now->layout.generations != before->layout.generations) {
      world_.probes().Hit("layout_put_back_refused_forward");
    }
    return;
  }
  const int32_t active = before->layout.Active()->generation;
  // Every generation it names is still in the stream and not retired: a retired one's keys
  // become tombstones, whose seals name no successor (that case fails closed, runbook 7e,
  // and is a core and integration test, not a run the simulator can heal from).
  for (const Generation& b : before->layout.generations) {
    bool kept = false;
    for (const Generation& g : now->layout.generations) {
      kept = kept || (g.generation == b.generation && g.state != GenerationState::kRetired);
    }
    if (!kept) return;
  }
  if (now->layout.generations == before->layout.generations) return;
  redis_.PutLayoutBack(kStream, *layout_before_reshard_);
  world_.Fault("layout_rollback",
               fmt::format("layout hash put back to revision {} (ACTIVE generation {})",
                           before->revision.value(), active));
}

void Simulation::OperatorFence(const std::string& member) {
  HttpRequest req;
  req.method = "POST";
  req.target = fmt::format("/v1/groups/{}/{}/members/{}/fence", kStream, kGroup, member);
  OperatorCall(
      req, [](const HttpResponse&) { return true; }, 1);
}

void Simulation::ExportTick() {
  if (phase_ == Phase::kSafety) {
    HttpRequest req;
    req.method = "GET";
    req.target = fmt::format("/v1/groups/{}/{}/export", kStream, kGroup);
    OperatorCall(
        req,
        [this](const HttpResponse& r) {
          if (r.status == 200) export_ = r.body;
          return true;
        },
        1);
  }
  world_.After(world_.rng().Uniform(3000, 10000), [this] { ExportTick(); });
}

void Simulation::SnapshotTick() {
  if (phase_ != Phase::kSafety) return;
  if (redis_.HasMetadata(key_)) redis_.TakeSnapshot();
  world_.After(world_.rng().Uniform(2000, 8000), [this] { SnapshotTick(); });
}

// ── faults ──────────────────────────────────────────────────────────────────────────

std::vector<std::string> Simulation::Nodes() const {
  std::vector<std::string> out;
  for (int i = 0; i < p_.coord_slots; ++i) out.push_back(CoordNode(i));
  for (const auto& s : consumer_slots_) out.push_back(s->node);
  for (const auto& s : producer_slots_) out.push_back(s->node);
  out.push_back("redis");
  return out;
}

void Simulation::RandomLink(std::string* a, std::string* b) {
  // A link that carries traffic: client–coordinator, client–redis or coordinator–redis.
  const std::vector<std::string> nodes = Nodes();
  Rng& rng = world_.rng();
  for (;;) {
    *a = nodes[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(nodes.size()) - 1))];
    *b = nodes[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(nodes.size()) - 1))];
    if (*a == *b) continue;
    const bool a_coord = a->rfind("coord", 0) == 0;
    const bool b_coord = b->rfind("coord", 0) == 0;
    const bool a_redis = *a == "redis";
    const bool b_redis = *b == "redis";
    if ((a_coord && b_coord) || (!a_coord && !a_redis && !b_coord && !b_redis)) continue;
    return;
  }
}

void Simulation::RecordLost(const std::vector<LostEntry>& lost) {
  for (const LostEntry& l : lost) {
    HistEvent e;
    e.kind = HistKind::kLost;
    e.proc = "sim";
    e.shard = ShardOfStream(l.stream);
    e.stream = l.stream;
    e.id = l.entry.id.str();
    e.key = l.entry.key;
    e.seq = l.entry.seq;
    world_.Emit(std::move(e));
    if (auto a = acked_.find({l.stream, l.entry.id}); a != acked_.end()) {
      world_.probes().Hit("acked_publish_lost");
      undelivered_.erase(a->second);  // S3 excuses it; nobody will deliver it
    }
  }
}

void Simulation::DeleteWhenQuiet(int attempts) {
  // The operator's DEL lands between requests: an answer decided before the DEL but sent
  // after it would look, in the history, like a decision on a deleted key.
  for (int i = 0; i < p_.coord_slots; ++i) {
    if (SimCoordinator* c = LiveCoordinator(i); c && c->busy()) {
      if (attempts > 1) {
        world_.After(1, [this, attempts] { DeleteWhenQuiet(attempts - 1); });
      } else {
        deleting_ = false;
        key_deleted_ = false;
      }
      return;
    }
  }
  deleting_ = false;
  if (!redis_.HasMetadata(key_)) {
    key_deleted_ = false;
    return;
  }
  redis_.DeleteMetadata(key_);
  world_.Fault("key_delete", "DEL of the metadata hash");
}

namespace {
// A heartbeat answer's (version, lineage) the store `now` does not have: above its version,
// or a version its lineage history names with another token.
bool ViewAheadOf(const std::optional<GroupMetadata>& now, int64_t version,
                 const std::string& lineage) {
  if (version <= 0) return false;
  if (!now || version > now->version.value()) return true;
  for (const LineageEntry& h : now->lineage_history) {
    if (h.version.value() == version && h.token != lineage) return true;
  }
  return false;
}
}  // namespace

// The rollback taint, as narrow as what the rollback did (issue 9): only when the group's
// revision or a member's liveness deadline went back, and only the consumer processes whose
// view is now ahead of the store — their last answer's (version, lineage) is not in the
// restored history — or whose member's deadline went back. Those are the ones a coordinator
// cannot know about until they report (sim/checkers.h: kTaint).
void Simulation::TaintWhoseViewWentBack(int64_t revision_before,
                                        const std::map<std::string, TimeMs>& live_before) {
  const std::optional<GroupMetadata> now = redis_.PeekMetadata(key_);
  const auto live_now = redis_.PeekLiveness(key_);
  std::set<std::string> deadline_back;  // member ids
  for (const auto& [member, deadline] : live_before) {
    auto it = live_now.find(member);
    if (it == live_now.end() || it->second < deadline) deadline_back.insert(member);
  }
  if (redis_.RevisionOf(key_) == revision_before && deadline_back.empty()) return;
  view_rollback_at_ = world_.now();
  view_rollback_deadline_back_ = deadline_back;
  view_rollback_tainted_.clear();
  struct Seen {
    std::string member;
    int64_t version = -1;
    std::string lineage;
  };
  std::map<std::string, Seen> last;  // proc → its last answered heartbeat
  for (const HistEvent& e : world_.history()) {
    if (e.kind != HistKind::kHeartbeat) continue;
    Seen& s = last[e.proc];
    s.member = e.member;
    if (e.version >= 0) {
      s.version = e.version;
      s.lineage = e.lineage;
    }
  }
  for (const auto& [proc, seen] : last) {
    const bool ahead =
        deadline_back.count(seen.member) > 0 || ViewAheadOf(now, seen.version, seen.lineage);
    if (!ahead) continue;
    view_rollback_tainted_.insert(proc);
    HistEvent t;
    t.kind = HistKind::kTaint;
    t.proc = proc;
    t.member = seen.member;
    world_.Emit(std::move(t));
  }
}

// Seed 14721432028603566224: a join was committed, the failover lost it, and the answer
// (decided before, delayed by a slow Redis call) reached the consumer after it: a grant
// the store no longer has, held by a process no earlier taint could name. Only an answer
// whose own state was committed while its request was in flight and before the rollback
// (a kCommit of its version and lineage in [sent, rollback)) is excused: one answered
// after the rollback from a state cached earlier (the steady_renewal_unchecked mutant's
// bug) was committed before the request was sent, and stays judged.
void Simulation::TaintAnswerAcrossRollback(const HistEvent& e) {
  if (e.kind != HistKind::kHeartbeat || view_rollback_at_ < 0 || e.sent_us < 0) return;
  const int64_t rollback_us = view_rollback_at_ * 1000;
  if (e.sent_us >= rollback_us) return;  // sent after it: decided on what is left
  if (e.version <= 0) return;            // not an answer (timed out, an error status)
  if (view_rollback_tainted_.count(e.proc) > 0) return;  // tainted by the rollback already
  const bool lost = view_rollback_deadline_back_.count(e.member) > 0 ||
                    ViewAheadOf(redis_.PeekMetadata(key_), e.version, e.lineage);
  if (!lost) return;
  bool committed_in_flight = false;
  const History& h = world_.history();
  // Backwards to a minute before the send: some events carry an earlier stamp than their
  // place in the history (a publish is stamped when its XADD left), so not to the send only.
  for (auto it = h.rbegin(); it != h.rend() && it->t_us >= e.sent_us - 60'000'000; ++it) {
    if (it->t_us < e.sent_us) continue;
    if (it->kind == HistKind::kCommit && it->t_us < rollback_us && it->version == e.version &&
        it->lineage == e.lineage) {
      committed_in_flight = true;
      break;
    }
  }
  if (!committed_in_flight) return;
  view_rollback_tainted_.insert(e.proc);
  world_.probes().Hit("answer_across_rollback_tainted");
  HistEvent t;
  t.kind = HistKind::kTaint;
  t.proc = e.proc;
  t.member = e.member;
  // Stamped at the rollback, as if heard just before it: an answer to a request sent after
  // the rollback still lifts it (sim/checkers.h kTaint). `e` is not used after this.
  world_.EmitAt(std::move(t), view_rollback_at_);
}

void Simulation::AfterRollback() {
  last_rollback_ = world_.now();
  // Operators notice a vanished key (Supervise schedules the repair).
}

void Simulation::ChaosTick() {
  if (phase_ != Phase::kSafety) return;
  Rng& rng = world_.rng();
  const Buggify& bug = world_.buggify();
  struct Action {
    const char* site;
    int weight;
    std::function<void()> run;
  };
  auto live_consumer = [this, &rng]() -> SimConsumer* {
    std::vector<SimConsumer*> live;
    for (SimConsumer* c : consumer_current_) {
      if (c && !c->dead()) live.push_back(c);
    }
    if (live.empty()) return nullptr;
    return live[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(live.size()) - 1))];
  };
  auto live_coordinator = [this, &rng]() -> SimCoordinator* {
    std::vector<SimCoordinator*> live;
    for (int i = 0; i < p_.coord_slots; ++i) {
      if (SimCoordinator* c = LiveCoordinator(i)) live.push_back(c);
    }
    if (live.empty()) return nullptr;
    return live[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(live.size()) - 1))];
  };
  auto live_producer = [this, &rng]() -> SimProducer* {
    std::vector<SimProducer*> live;
    for (SimProducer* p : producer_current_) {
      if (p && !p->dead()) live.push_back(p);
    }
    if (live.empty()) return nullptr;
    return live[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(live.size()) - 1))];
  };
  // Rollbacks are spaced out, and none while a deleted key waits for its restore: a
  // failover that resurrected the key would undo the operator's DEL behind the checker's
  // back (S8 forbids any decision between key_delete and restore).
  if (key_deleted_ && !deleting_ && redis_.HasMetadata(key_)) key_deleted_ = false;
  const bool rollback_ok = world_.now() - last_rollback_ >= 8000 && !key_deleted_;
  if (key_deleted_ && world_.now() - last_rollback_ >= 8000) {
    world_.probes().Hit("rollback_deferred_for_restore");
  }
  std::vector<Action> actions = {
      {"net.partition", 3,
       [&] {
         std::string a, b;
         RandomLink(&a, &b);
         const TimeMs d = rng.Uniform(500, 12000);
         net_.Partition(a, b);
         world_.Fault("partition", fmt::format("{}|{} for {} ms", a, b, d));
         world_.After(d, [this, a, b] { net_.Unpartition(a, b); });
       }},
      {"net.clog", 2,
       [&] {
         const int n = static_cast<int>(rng.Uniform(2, 6));
         world_.Fault("clog", fmt::format("swizzle-clog of {} links", n));
         for (int i = 0; i < n; ++i) {
           std::string a, b;
           RandomLink(&a, &b);
           const TimeMs start = rng.Uniform(0, 1500);
           const TimeMs until = world_.now() + start + rng.Uniform(1000, 6000);
           world_.After(start, [this, a, b, until] {
             if (phase_ == Phase::kSafety) net_.Clog(a, b, until);
           });
         }
       }},
      {"coord.crash", 2,
       [&] {
         if (SimCoordinator* c = live_coordinator()) c->Crash("killed (chaos)");
       }},
      {"coord.clock_jump", 1,
       [&] {
         if (SimCoordinator* c = live_coordinator()) {
           const TimeMs skew = rng.Uniform(-p_.skew_bound_ms, p_.skew_bound_ms);
           world_.Fault(
               "skew", fmt::format("{} wall clock {:+} ms -> {:+} ms", c->name(), c->skew(), skew));
           c->set_skew(skew);
         }
       }},
      {"redis.failover", rollback_ok ? 1 : 0,
       [&] {
         const int64_t before = redis_.RevisionOf(key_);
         const auto live_before = redis_.PeekLiveness(key_);
         const size_t backlog = redis_.replication_backlog();
         // The generations and their states: a reshard's prepare or activation the replica
         // had not acknowledged shows here (RS2's WAIT is what keeps its seals); other layout
         // writes (a group added, a retention stamp) do not.
         auto generations = [this] {
           std::string out;
           if (auto l = redis_.PeekLayout(kStream)) {
             for (const Generation& g : l->generations) {
               out += fmt::format("{}:{} ", g.generation, static_cast<int>(g.state));
             }
           }
           return out;
         };
         const std::string before_failover = generations();
         std::vector<LostEntry> lost = redis_.Failover(rng.Uniform(200, 2000));
         // On a cluster, one master fails; its replica takes over later, under an address of
         // its own.
         if (cluster_) {
           const int master = static_cast<int>(rng.Uniform(0, SimCluster::kMasters - 1));
           cluster_->FailOver(
               master, rng.Chance(0.2) ? rng.Uniform(31'000, 40'000) : rng.Uniform(500, 20'000));
         }
         if (!before_failover.empty() && generations() != before_failover) {
           world_.probes().Hit("failover_lost_layout_write");
         }
         world_.Fault("failover",
                      fmt::format("replica promoted: {} replication entries lost, {} stream "
                                  "entries lost, revision {} -> {}",
                                  backlog, lost.size(), before, redis_.RevisionOf(key_)));
         RecordLost(lost);
         TaintWhoseViewWentBack(before, live_before);
         AfterRollback();
       }},
      {"redis.snapshot_restore", redis_.has_snapshot() && rollback_ok ? 1 : 0,
       [&] {
         const int64_t before = redis_.RevisionOf(key_);
         const auto live_before = redis_.PeekLiveness(key_);
         const std::optional<Layout> layout_before = redis_.PeekLayout(kStream);
         std::vector<LostEntry> lost = redis_.RestoreSnapshot(rng.Uniform(500, 3000));
         NoteErasedGenerations(layout_before);
         world_.Fault("snapshot_restore",
                      fmt::format("restarted from a snapshot: {} stream entries lost, revision "
                                  "{} -> {}",
                                  lost.size(), before, redis_.RevisionOf(key_)));
         RecordLost(lost);
         TaintWhoseViewWentBack(before, live_before);
         AfterRollback();
       }},
      {"redis.key_delete", redis_.HasMetadata(key_) && !export_.empty() && rollback_ok ? 1 : 0,
       [&] {
         key_deleted_ = true;
         deleting_ = true;
         AfterRollback();
         DeleteWhenQuiet(2000);
       }},
      {"redis.slot_migration", cluster_ ? 1 : 0,
       [&] { cluster_->MigrateSlot(rng.Uniform(100, 3000)); }},
      {"redis.script_flush", 1,
       [&] {
         redis_.FlushScripts();
         world_.Fault("script_flush", "SCRIPT FLUSH");
       }},
      {"redis.mutex_expire", 2,
       [&] {
         if (redis_.lock_held(key_)) {
           if (redis_.DropLock(key_)) world_.Fault("mutex_expire", "the mutex vanished");
         } else {
           redis_.ArmLockDrop();
         }
       }},
      {"redis.replication_stall", 1,
       [&] {
         const TimeMs d = rng.Uniform(2000, 10000);
         const TimeMs lag = rng.Uniform(500, 4000);
         redis_.Stall(world_.now() + d, lag);
         world_.Fault("replication_stall", fmt::format("lag ~{} ms for {} ms", lag, d));
       }},
      {"consumer.crash", 3,
       [&] {
         if (SimConsumer* c = live_consumer()) c->Crash("killed (chaos)");
       }},
      {"consumer.shutdown", 1,
       [&] {
         if (SimConsumer* c = live_consumer()) c->Shutdown();
       }},
      {"consumer.clock_jump", 1,
       [&] {
         if (SimConsumer* c = live_consumer()) c->JumpClock(rng.Uniform(50, 2000));
       }},
      {"producer.crash", 1,
       [&] {
         if (SimProducer* pr = live_producer()) pr->Crash("killed (chaos)");
       }},
      {"producer.clock_jump", 1,
       [&] {
         if (SimProducer* pr = live_producer()) pr->JumpClock(rng.Uniform(50, 2000));
       }},
      {"operator.fence", 1,
       [&] {
         if (SimConsumer* c = live_consumer()) OperatorFence(c->member());
       }},
  };
  int total = 0;
  for (const Action& a : actions) total += bug.Enabled(a.site) ? a.weight : 0;
  if (total > 0) {
    int pick = static_cast<int>(rng.Uniform(0, total - 1));
    for (const Action& a : actions) {
      if (!bug.Enabled(a.site) || a.weight == 0) continue;
      if (pick < a.weight) {
        a.run();
        break;
      }
      pick -= a.weight;
    }
  }
  world_.After(rng.Uniform(300, 2500), [this] { ChaosTick(); });
}

// ── heal and the end ────────────────────────────────────────────────────────────────

}  // namespace rsc::sim
