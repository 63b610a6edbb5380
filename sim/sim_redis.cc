#include "sim/sim_redis.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/codec.h"

namespace rsc::sim {

int32_t ShardOfStream(const std::string& stream) {
  const auto colon = stream.rfind(':');
  const auto close = stream.rfind('}');
  if (colon == std::string::npos || close == std::string::npos || close < colon) return -1;
  int32_t shard = -1;
  auto r = std::from_chars(stream.data() + colon + 1, stream.data() + close, shard);
  return r.ec == std::errc() ? shard : -1;
}

SimRedis::SimRedis(World& world)
    : world_(world), clock_(world), tokens_(world), primary_(clock_, tokens_) {}

namespace {

// The kCommit history events S6 judges decisions against: what `proc` wrote at `revision`.
// A batch of heartbeats commits several versions in one write (each decision's state is in
// the written lineage history): one kCommit per version above `replaced_version`, the last
// one the written state's, when the history has each of them. Creates and restores commit
// the written version alone.
void EmitCommit(World& world, const std::string& proc, int64_t revision,
                const GroupMetadata& written, const char* how, int64_t round_age_ms = -1,
                int64_t replaced_version = std::numeric_limits<int64_t>::max()) {
  auto emit = [&](int64_t version, const std::string& lineage, const char* detail,
                  int64_t round_age) {
    HistEvent e;
    e.kind = HistKind::kCommit;
    e.proc = proc;
    e.revision = revision;
    e.version = version;
    e.lineage = lineage;
    e.detail = detail;
    e.round_age_ms = round_age;
    world.Emit(std::move(e));
  };
  // Only a history that continues the replaced state one version per decision, as the
  // batch's decisions write it: a history the write made up (the bump_version_on_rollback
  // mutant copies a client's claimed version into it) commits nothing but its last version.
  std::vector<const LineageEntry*> between;
  for (const LineageEntry& l : written.lineage_history) {
    if (l.version.value() > replaced_version && l.version.value() < written.version.value()) {
      between.push_back(&l);
    }
  }
  bool contiguous = replaced_version != std::numeric_limits<int64_t>::max();
  for (size_t i = 0; contiguous && i < between.size(); ++i) {
    contiguous = between[i]->version.value() == replaced_version + 1 + static_cast<int64_t>(i);
  }
  if (contiguous && !between.empty() &&
      between.back()->version.value() + 1 == written.version.value()) {
    for (const LineageEntry* l : between) {
      world.probes().Hit("batch_wrote_versions");
      emit(l->version.value(), l->token, "cas (batched)", -1);
    }
  }
  emit(written.version.value(), written.lineage, how, round_age_ms);
}

// What a write replaces, for its kCommit events: the stored version (-1: none) and, S13
// oracle data, when the write ends the correction round of that state, how long the round
// lasted (coordinator wall clocks: the write's updatedMs − the round's startedMs; -1: no
// round ended).
struct Replaced {
  int64_t version = -1;
  int64_t round_age_ms = -1;
};
Replaced ReplacedBy(const MemoryStore& store, const GroupKey& key, const GroupMetadata& next) {
  Replaced out;
  auto h = store.data().hashes.find(key.Tag());
  if (h == store.data().hashes.end()) return out;
  auto agg = h->second.fields.find("aggregate");
  if (agg == h->second.fields.end()) return out;
  auto decoded = store.Decoded(key.Tag(), agg->second);
  if (!decoded.ok()) return out;
  const GroupMetadata& old = **decoded;
  out.version = old.version.value();
  if (!old.round) return out;
  if (next.round && next.round->id == old.round->id) return out;  // still going
  out.round_age_ms = next.updated_ms - old.round->started_ms;
  return out;
}

}  // namespace

Status SimRedis::Up() const {
  if (!up()) return MakeError(ErrorCode::kRedisUnavailable, "redis is restarting (simulated)");
  return OkStatus();
}

Dataset SimRedis::Current() const {
  return Dataset{primary_.data(), primary_.locks(), primary_streams_};
}

void SimRedis::Install(const Dataset& d) {
  primary_.ReplaceData(d.meta);
  primary_.ReplaceLocks(d.locks);
  primary_streams_ = d.streams;
}

void SimRedis::Replicate(std::function<void(Dataset&)> fn) {
  const TimeMs now = world_.now();
  const TimeMs lag = now < stall_until_ ? world_.rng().Uniform(stall_lag_ / 2, stall_lag_)
                                        : world_.rng().Uniform(0, max_lag_ms_);
  last_ready_ = std::max(last_ready_, now + lag);
  log_.push_back(LogEntry{last_ready_, ++offset_, std::move(fn)});
  CatchUp();
}

void SimRedis::ReplicateMeta() {
  Replicate([meta = primary_.data(), locks = primary_.locks()](Dataset& r) {
    r.meta = meta;
    r.locks = locks;
  });
}

void SimRedis::CatchUp() {
  const TimeMs now = world_.now();
  while (!log_.empty() && log_.front().ready <= now) {
    log_.front().apply(replica_);
    log_.pop_front();
  }
}

TimeMs SimRedis::AcknowledgedAt(uint64_t offset) const {
  // The log holds the unapplied suffix in offset order; anything before its front (or an
  // empty log) has been applied.
  if (log_.empty() || offset < log_.front().offset) return world_.now();
  const uint64_t i = offset - log_.front().offset;
  if (i >= log_.size()) return world_.now();  // not a write of this epoch: nothing to wait
  return log_[static_cast<size_t>(i)].ready;
}

void SimRedis::Stall(TimeMs until, TimeMs lag) {
  stall_until_ = until;
  stall_lag_ = lag;
}

bool SimRedis::TakeScriptReload() {
  if (scripts_loaded_) return false;
  scripts_loaded_ = true;
  return true;
}

int64_t SimRedis::RevisionOf(const GroupKey& key) const {
  auto it = primary_.data().hashes.find(key.Tag());
  if (it == primary_.data().hashes.end()) return -1;
  auto f = it->second.fields.find("revision");
  if (f == it->second.fields.end()) return -1;
  int64_t v = -1;
  std::from_chars(f->second.data(), f->second.data() + f->second.size(), v);
  return v;
}

std::optional<GroupMetadata> SimRedis::PeekMetadata(const GroupKey& key) const {
  auto it = primary_.data().hashes.find(key.Tag());
  if (it == primary_.data().hashes.end()) return std::nullopt;
  auto agg = it->second.fields.find("aggregate");
  if (agg == it->second.fields.end()) return std::nullopt;
  auto m = primary_.Decoded(key.Tag(), agg->second);
  if (!m.ok()) return std::nullopt;
  return **m;
}

std::optional<Layout> SimRedis::PeekLayout(const std::string& stream) {
  Result<std::optional<StoredLayout>> r = primary_.LoadLayout(stream);
  if (!r.ok() || !r->has_value()) return std::nullopt;
  return (*r)->layout;
}

std::optional<MemoryStore::Hash> SimRedis::LayoutHash(const std::string& stream) const {
  auto it = primary_.data().layouts.find(stream);
  if (it == primary_.data().layouts.end()) return std::nullopt;
  return it->second;
}

void SimRedis::PutLayoutBack(const std::string& stream, const MemoryStore::Hash& hash) {
  MemoryStore::Data d = primary_.data();
  d.layouts[stream] = hash;
  primary_.ReplaceData(std::move(d));
  ReplicateMeta();
}

std::map<std::string, TimeMs> SimRedis::PeekLiveness(const GroupKey& key) const {
  auto it = primary_.data().live.find(key.Tag());
  return it == primary_.data().live.end() ? std::map<std::string, TimeMs>{} : it->second;
}

bool SimRedis::HasMetadata(const GroupKey& key) const {
  return primary_.data().hashes.count(key.Tag()) > 0;
}

// ── metadata ──────────────────────────────────────────────────────────────────────

Result<StoredGroup> SimRedis::Load(const GroupKey& key, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(Up());
  return primary_.Load(key, now_ms);
}

Result<CasOutcome> SimRedis::CompareAndSet(const std::string& proc, const GroupKey& key,
                                           StoreRevision expected, const GroupMetadata* next,
                                           const LivenessUpdate& liveness, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(Up());
  const Replaced replaced = next != nullptr ? ReplacedBy(primary_, key, *next) : Replaced{};
  const auto deadlines = PeekLiveness(key);
  auto r = primary_.CompareAndSet(key, expected, next, liveness, now_ms);
  if (r.ok() && !r->applied && r->revision == expected) {
    // compare_and_set.lua: a member this write would remove was renewed after its load.
    world_.probes().Hit("stale_removal_refused");
  }
  if (r.ok() && r->applied) {
    for (const auto& [member, deadline] : liveness.set) {
      auto it = deadlines.find(member);
      if (it != deadlines.end() && it->second > deadline) {
        world_.probes().Hit("stale_deadline_kept");  // compare_and_set.lua: never lowered
      }
    }
  }
  if (r.ok() && r->applied) {
    ReplicateMeta();
    if (next != nullptr) {
      EmitCommit(world_, proc, r->revision.value(), *next, "cas", replaced.round_age_ms,
                 replaced.version >= 0 ? replaced.version : std::numeric_limits<int64_t>::max());
    }
  }
  return r;
}

Result<bool> SimRedis::RenewIfSteady(const GroupKey& key, const AggregateStamp& basis,
                                     size_t member_count,
                                     const std::vector<std::pair<std::string, TimeMs>>& set,
                                     TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(Up());
  CheckExpiredSection(key);
  auto r = primary_.RenewIfSteady(key, basis, member_count, set, now_ms);
  if (r.ok() && *r) ReplicateMeta();
  return r;
}

Result<StoreRevision> SimRedis::Create(const std::string& proc, const GroupMetadata& meta,
                                       TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(Up());
  auto r = primary_.Create(meta, now_ms);
  ReplicateMeta();  // the index entry is written even when the group exists
  if (r.ok()) {
    world_.Fault("create", "group created by " + proc);
    EmitCommit(world_, proc, r->value(), meta, "create");
  }
  return r;
}

Result<std::optional<StoredLayout>> SimRedis::LoadLayout(const std::string& stream) {
  RSC_RETURN_IF_ERROR(Up());
  return primary_.LoadLayout(stream);
}

Result<CasOutcome> SimRedis::CompareAndSetLayout(const std::string& stream, StoreRevision expected,
                                                 const Layout& next, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(Up());
  auto r = primary_.CompareAndSetLayout(stream, expected, next, now_ms);
  if (r.ok() && r->applied) ReplicateMeta();
  return r;
}

Result<StoreRevision> SimRedis::Restore(const std::string& proc, const GroupMetadata& meta,
                                        TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(Up());
  auto r = primary_.Restore(meta, now_ms);
  if (r.ok()) {
    ReplicateMeta();
    world_.Fault("restore", fmt::format("operator restore by {}: version {} revision {}", proc,
                                        meta.version.value(), r->value()));
    world_.probes().Hit("restore_applied");
    EmitCommit(world_, proc, r->value(), meta, "restore");
  }
  return r;
}

Status SimRedis::Delete(const GroupKey& key, StoreRevision expected) {
  RSC_RETURN_IF_ERROR(Up());
  auto r = primary_.Delete(key, expected);
  if (r.ok()) ReplicateMeta();
  return r;
}

Result<std::vector<GroupKey>> SimRedis::ListGroups() {
  RSC_RETURN_IF_ERROR(Up());
  return primary_.ListGroups();
}

Result<Liveness> SimRedis::LoadAllLiveness(const GroupKey& key) {
  RSC_RETURN_IF_ERROR(Up());
  return primary_.LoadAllLiveness(key);
}

void SimRedis::CheckExpiredSection(const GroupKey& key) {
  auto it = primary_.locks().find(key.Tag());
  if (it == primary_.locks().end() || it->second.expires_ms > world_.now()) return;
  auto s = sections_.find(it->second.token);
  if (s == sections_.end()) return;
  // The holder is still inside its critical section, but its mutex expired: a real
  // expiry under a slow holder (the CAS, not the mutex, must keep the metadata safe).
  world_.Fault("mutex_expire", "the mutex of " + s->second + " expired while it was inside");
  world_.probes().Hit("mutex_expired_in_section");
  sections_.erase(s);
}

Result<std::optional<std::string>> SimRedis::TryLock(const std::string& proc, const GroupKey& key,
                                                     std::chrono::milliseconds ttl) {
  RSC_RETURN_IF_ERROR(Up());
  CheckExpiredSection(key);
  auto r = primary_.Lock(key, ttl, std::chrono::milliseconds(0));
  if (r.ok() && r->has_value()) {
    sections_[**r] = proc;
    ReplicateMeta();
    if (drop_next_lock_) {
      drop_next_lock_ = false;
      world_.After(world_.rng().Uniform(0, 2), [this, key, proc] {
        if (DropLock(key)) world_.Fault("mutex_expire", "the mutex vanished under " + proc);
      });
    }
  }
  return r;
}

Status SimRedis::Unlock(const GroupKey& key, const std::string& token) {
  RSC_RETURN_IF_ERROR(Up());
  sections_.erase(token);
  const bool held = lock_held(key);
  auto r = primary_.Unlock(key, token);
  if (held && !lock_held(key)) ReplicateMeta();
  return r;
}

bool SimRedis::lock_held(const GroupKey& key) const {
  auto it = primary_.locks().find(key.Tag());
  return it != primary_.locks().end() && it->second.expires_ms > world_.now();
}

bool SimRedis::DropLock(const GroupKey& key) {
  auto it = primary_.locks().find(key.Tag());
  if (it == primary_.locks().end()) return false;
  bool inside = false;
  if (it->second.expires_ms > world_.now()) {
    auto s = sections_.find(it->second.token);
    if (s != sections_.end()) {
      inside = true;
      const std::string holder = s->second;
      sections_.erase(s);
      world_.probes().Hit("mutex_expired_in_section");
      if (on_lock_lost_) on_lock_lost_(holder);
    }
  }
  primary_.DropLock(key);
  ReplicateMeta();
  return inside;
}

void SimRedis::DeleteMetadata(const GroupKey& key) {
  primary_.DeleteHash(key);
  ReplicateMeta();
}

// ── streams ───────────────────────────────────────────────────────────────────────

StreamReply SimRedis::Stream(const std::function<StreamOp(Streams&)>& op) {
  StreamOp r = op(primary_streams_);
  if (r.effect) Replicate([effect = std::move(r.effect)](Dataset& d) { effect(d.streams); });
  return std::move(r.reply);
}

StreamReply SimRedis::XAdd(const std::string& stream, const StreamEntry& fields) {
  // As producers send it: XADD key NOMKSTREAM * … (SPEC D3).
  StreamReply r =
      Stream([&](Streams& s) { return sim::XAdd(s, stream, world_.now(), fields, true); });
  ServeWaiters(stream);
  return r;
}

Result<Unit> SimRedis::CreateConsumerGroup(const std::string& stream, const std::string& group) {
  // BUSYGROUP is success (an existing group is kept, D3).
  (void)Stream([&](Streams& s) { return sim::XGroupCreate(s, stream, group); });
  return Unit{};
}

Result<bool> SimRedis::Seal(const std::string& stream, int32_t generation,
                            const std::string& successor) {
  StreamReply r =
      Stream([&](Streams& s) { return sim::XAddSeal(s, stream, generation, successor); });
  if (r.count > 0) ServeWaiters(stream);  // a blocked XREADGROUP gets the seal
  return r.count > 0;
}

std::vector<StreamTop> SimRedis::Tops(const std::vector<std::string>& streams) {
  std::vector<StreamTop> out;
  out.reserve(streams.size());
  for (const std::string& stream : streams) out.push_back(sim::TopOf(primary_streams_, stream));
  return out;
}

Result<bool> SimRedis::TrimSealed(const std::string& stream) {
  StreamReply r = Stream([&](Streams& s) { return sim::TrimSealed(s, stream); });
  return r.count > 0;
}

Result<GroupProgress> SimRedis::Progress(const std::string& stream, const std::string& group) {
  StreamReply r = Stream([&](Streams& s) { return sim::XInfoGroup(s, stream, group); });
  GroupProgress p;
  if (!r.ok()) return p;  // no stream or no group: not complete
  p.exists = true;
  p.last_delivered_id = r.cursor.str();
  p.pending = r.count;
  return p;
}

SimRedis::MultiRead SimRedis::ReadNew(const std::vector<std::string>& streams,
                                      const std::string& group, const std::string& consumer,
                                      int count) {
  MultiRead out;
  // Redis checks every key and its group before it serves any (t_stream.c, xreadCommand).
  for (const std::string& stream : streams) {
    auto it = primary_streams_.find(stream);
    if (it == primary_streams_.end() || !it->second.groups.count(group)) {
      out.error =
          Stream([&](Streams& s) { return XReadGroupNew(s, stream, group, consumer, 1); }).error;
      return out;
    }
  }
  for (const std::string& stream : streams) {
    StreamReply r =
        Stream([&](Streams& s) { return XReadGroupNew(s, stream, group, consumer, count); });
    if (!r.entries.empty()) out.streams.emplace_back(stream, std::move(r.entries));
  }
  return out;
}

void SimRedis::XReadGroupMulti(const std::vector<std::string>& streams, const std::string& group,
                               const std::string& consumer, int count, TimeMs block_ms,
                               int64_t client_id, std::function<void(MultiRead)> done,
                               Redirect redirect) {
  MultiRead r = ReadNew(streams, group, consumer, count);
  if (!r.error.empty() || !r.streams.empty() || block_ms < 0) {
    done(std::move(r));
    return;
  }
  const uint64_t id = next_waiter_++;
  waiters_.push_back(
      Waiter{id, streams, group, consumer, count, client_id, std::move(done), std::move(redirect)});
  const uint64_t epoch = epoch_;
  world_.After(block_ms, [this, id, epoch] {
    if (epoch != epoch_) return;  // already failed by the rollback
    auto it =
        std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.id == id; });
    if (it != waiters_.end()) Release(it, MultiRead{});  // BLOCK timed out: nil
  });
}

void SimRedis::Release(std::vector<Waiter>::iterator it, MultiRead reply) {
  auto done = std::move(it->done);
  waiters_.erase(it);
  done(std::move(reply));
}

int64_t SimRedis::ClientUnblock(int64_t client_id) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [&](const Waiter& w) { return w.client_id == client_id; });
  if (it == waiters_.end()) return 0;
  Release(it, MultiRead{});  // TIMEOUT: answered as if the block time ran out
  return 1;
}

void SimRedis::DropBlockedClient(int64_t client_id) {
  std::erase_if(waiters_, [&](const Waiter& w) { return w.client_id == client_id; });
}

void SimRedis::DropBlockedReadsOf(const std::string& consumer) {
  if (std::erase_if(waiters_, [&](const Waiter& w) { return w.consumer == consumer; }) > 0) {
    world_.probes().Hit("dead_consumer_read_freed");
  }
}

void SimRedis::ServeWaiters(const std::string& stream) {
  for (size_t i = 0; i < waiters_.size();) {
    Waiter& w = waiters_[i];
    if (std::find(w.streams.begin(), w.streams.end(), stream) == w.streams.end()) {
      ++i;
      continue;
    }
    MultiRead r;
    if (std::optional<std::string> moved = w.redirect ? w.redirect() : std::nullopt) {
      r.error = std::move(*moved);  // its slot left the node: redirected, nothing served
      world_.probes().Hit("cluster_blocked_read_redirected");
    } else {
      r = ReadNew(w.streams, w.group, w.consumer, w.count);
      if (r.error.empty() && r.streams.empty()) {
        ++i;
        continue;
      }
    }
    Release(waiters_.begin() + static_cast<std::ptrdiff_t>(i), std::move(r));
  }
}

void SimRedis::RedirectBlocked() {
  for (size_t i = 0; i < waiters_.size();) {
    std::optional<std::string> moved = waiters_[i].redirect ? waiters_[i].redirect() : std::nullopt;
    if (!moved) {
      ++i;
      continue;
    }
    world_.probes().Hit("cluster_blocked_read_redirected");
    MultiRead r;
    r.error = std::move(*moved);
    Release(waiters_.begin() + static_cast<std::ptrdiff_t>(i), std::move(r));
  }
}

// ── rollbacks ─────────────────────────────────────────────────────────────────────

std::vector<LostEntry> SimRedis::Rollback(const Dataset& to, TimeMs down_ms) {
  std::vector<LostEntry> lost;
  for (const auto& [name, st] : primary_streams_) {
    auto kept = to.streams.find(name);
    for (const auto& [id, entry] : st.entries) {
      if (kept == to.streams.end() || !kept->second.entries.count(id)) {
        lost.push_back(LostEntry{name, entry});
      }
    }
  }
  Install(to);
  replica_ = to;
  log_.clear();
  last_ready_ = world_.now();
  ++epoch_;
  up_at_ = world_.now() + down_ms;
  scripts_loaded_ = false;  // a new process: empty script cache (SPEC L5)
  std::vector<Waiter> waiters;
  waiters.swap(waiters_);
  for (Waiter& w : waiters) {
    MultiRead r;
    r.reset = true;
    w.done(std::move(r));
  }
  return lost;
}

std::vector<LostEntry> SimRedis::Failover(TimeMs down_ms) {
  CatchUp();
  Dataset promoted = replica_;
  return Rollback(promoted, down_ms);
}

void SimRedis::TakeSnapshot() {
  snapshots_.emplace_back(world_.now(), Current());
  while (snapshots_.size() > 3) snapshots_.pop_front();
}

std::vector<LostEntry> SimRedis::RestoreSnapshot(TimeMs down_ms) {
  if (snapshots_.empty()) return {};
  const size_t pick =
      static_cast<size_t>(world_.rng().Uniform(0, static_cast<int64_t>(snapshots_.size()) - 1));
  Dataset d = snapshots_[pick].second;
  // Later snapshots describe a future this Redis never had.
  snapshots_.erase(snapshots_.begin() + static_cast<std::ptrdiff_t>(pick) + 1, snapshots_.end());
  return Rollback(d, down_ms);
}

}  // namespace rsc::sim
