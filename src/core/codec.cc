#include "core/codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>

#include "core/json_util.h"

namespace rsc {

namespace bj = boost::json;

namespace {

constexpr ErrorCode kBad = ErrorCode::kMetadataUnreadable;
constexpr int64_t kMaxInt = INT64_MAX;
constexpr size_t kMaxId = 256;

bj::object ConfigToJson(const GroupConfig& c) {
  return bj::object{{"heartbeatIntervalMs", c.heartbeat_interval_ms},
                    {"memberLeaseMs", c.member_lease_ms},
                    {"assignmentLeaseMs", c.assignment_lease_ms},
                    {"rebalanceTimeoutMs", c.rebalance_timeout_ms},
                    {"routingLeaseMs", c.routing_lease_ms},
                    {"routingRefreshMs", c.routing_refresh_ms}};
}

bj::value AggregateToJson(const GroupMetadata& m) {
  bj::array history;
  for (const LineageEntry& e : m.lineage_history) {
    history.push_back(bj::array{e.version.value(), bj::string(e.token)});
  }
  bj::array shards;
  for (const ShardState& s : m.shards) {
    bj::object o{{"id", s.id},
                 {"owner", s.owner},
                 {"target", s.target},
                 {"revokeSinceMs", s.revoke_since_ms},
                 {"revokeVersion", s.revoke_version}};
    if (s.taken_ms != 0) {  // absent when not taken (records stay as they were)
      o["takenMs"] = s.taken_ms;
      o["releaseAtMs"] = s.release_at_ms;
    }
    // Generations (SPEC §13): absent for generation 0 with its v1 key, not completed.
    if (s.generation != 0) o["generation"] = s.generation;
    if (s.stream != ShardStreamKey(m.key.stream, s.id)) o["stream"] = s.stream;
    if (s.completed) o["completed"] = true;
    shards.push_back(std::move(o));
  }
  bj::array members;
  for (const Member& mm : m.members) {
    bj::object o{{"id", mm.id.str()},         {"instanceId", mm.instance_id},
                 {"epoch", mm.epoch.value()}, {"joinedMs", mm.joined_ms},
                 {"leaving", mm.leaving},     {"fenced", mm.fenced}};
    if (mm.shard_lease) o["shardLease"] = true;
    if (mm.layout_v2) o["layoutV2"] = true;
    members.push_back(std::move(o));
  }
  bj::array tombstones;
  for (const Tombstone& t : m.tombstones) {
    tombstones.push_back(bj::object{{"id", t.id.str()},
                                    {"epoch", t.epoch.value()},
                                    {"fenced", t.fenced},
                                    {"left", t.left},
                                    {"atMs", t.at_ms},
                                    {"claimed", t.claimed}});
  }
  bj::value round = nullptr;
  if (m.round) {
    bj::array synced;
    for (const MemberId& id : m.round->synced) synced.push_back(bj::string(id.str()));
    bj::array blockers;
    for (const Blocker& b : m.round->blockers) {
      blockers.push_back(bj::object{{"shard", b.shard.value()},
                                    {"member", b.member.str()},
                                    {"untilMs", b.until_ms},
                                    {"sinceVersion", b.since_version}});
    }
    round = bj::object{{"id", m.round->id},
                       {"startedMs", m.round->started_ms},
                       {"startedVersion", m.round->started_version.value()},
                       {"synced", std::move(synced)},
                       {"blockers", std::move(blockers)}};
  }
  return bj::object{{"schemaVersion", kSchemaVersion},
                    {"stream", m.key.stream},
                    {"group", m.key.group},
                    {"shardCount", m.shard_count},
                    {"config", ConfigToJson(m.config)},
                    {"metadataVersion", m.version.value()},
                    {"lineage", m.lineage},
                    {"lineageHistory", std::move(history)},
                    {"assignmentEpoch", m.assignment_epoch.value()},
                    {"createdMs", m.created_ms},
                    {"updatedMs", m.updated_ms},
                    {"shards", std::move(shards)},
                    {"members", std::move(members)},
                    {"tombstones", std::move(tombstones)},
                    {"correctionRound", std::move(round)},
                    {"roundsStarted", m.rounds_started},
                    {"lineageKey", m.lineage_key},
                    {"lineageKeySinceMs", m.lineage_key_since_ms},
                    {"activeGeneration", m.active_generation},
                    {"layoutRevision", m.layout_revision}};
}

Result<GroupConfig> ConfigFromJson(const bj::object& o, const std::string& path, ErrorCode code) {
  json::Reader r(o, path, code);
  GroupConfig c;
  RSC_ASSIGN_OR_RETURN(c.heartbeat_interval_ms, r.Int("heartbeatIntervalMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(c.member_lease_ms, r.Int("memberLeaseMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(c.assignment_lease_ms, r.Int("assignmentLeaseMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(c.rebalance_timeout_ms, r.Int("rebalanceTimeoutMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(c.routing_lease_ms, r.Int("routingLeaseMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(c.routing_refresh_ms, r.Int("routingRefreshMs", 0, kMaxInt));
  return c;
}

Result<const bj::object*> ElemObj(const bj::value& v, const std::string& path) {
  if (!v.is_object()) return MakeError(kBad, path + ": must be an object");
  return &v.get_object();
}

Result<GroupMetadata> AggregateFromJson(const bj::value& root) {
  if (!root.is_object()) return MakeError(kBad, "aggregate: must be a JSON object");
  json::Reader r(root.get_object(), "", kBad);
  RSC_ASSIGN_OR_RETURN(int64_t schema, r.Int("schemaVersion", 0, kMaxInt));
  if (schema != kSchemaVersion) {
    return MakeError(kBad, fmt::format("aggregate.schemaVersion {} is not supported (this "
                                       "coordinator reads {})",
                                       schema, kSchemaVersion));
  }
  GroupMetadata m;
  RSC_ASSIGN_OR_RETURN(m.key.stream, r.Str("stream", 200));
  RSC_ASSIGN_OR_RETURN(m.key.group, r.Str("group", 128));
  RSC_ASSIGN_OR_RETURN(int64_t shard_count, r.Int("shardCount", 1, 1 << 20));
  m.shard_count = static_cast<int32_t>(shard_count);
  RSC_ASSIGN_OR_RETURN(const bj::object* cfg, r.Obj("config"));
  RSC_ASSIGN_OR_RETURN(m.config, ConfigFromJson(*cfg, "config", kBad));
  RSC_ASSIGN_OR_RETURN(int64_t version, r.Int("metadataVersion", 0, kMaxInt));
  m.version = MetadataVersion(version);
  RSC_ASSIGN_OR_RETURN(m.lineage, r.Str("lineage", kMaxId));
  RSC_ASSIGN_OR_RETURN(const bj::array* history, r.Arr("lineageHistory"));
  for (size_t i = 0; i < history->size(); ++i) {
    const bj::value& e = (*history)[i];
    const std::string p = fmt::format("lineageHistory[{}]", i);
    if (!e.is_array() || e.get_array().size() != 2 || !e.get_array()[1].is_string()) {
      return MakeError(kBad, p + ": must be [version, token]");
    }
    RSC_ASSIGN_OR_RETURN(int64_t v, json::AsInt(e.get_array()[0], p, 0, kMaxInt, kBad));
    const auto& t = e.get_array()[1].get_string();
    m.lineage_history.push_back({MetadataVersion(v), std::string(t.data(), t.size())});
  }
  RSC_ASSIGN_OR_RETURN(int64_t aepoch, r.Int("assignmentEpoch", 0, kMaxInt));
  m.assignment_epoch = AssignmentEpoch(aepoch);
  RSC_ASSIGN_OR_RETURN(m.created_ms, r.Int("createdMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(m.updated_ms, r.Int("updatedMs", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(m.rounds_started, r.Int("roundsStarted", 0, kMaxInt));
  // Absent in records written before tokens were keyed (see lineage_token.h).
  RSC_ASSIGN_OR_RETURN(m.lineage_key, r.StrOr("lineageKey", kMaxId, ""));
  RSC_ASSIGN_OR_RETURN(m.lineage_key_since_ms, r.IntOr("lineageKeySinceMs", 0, kMaxInt, 0));
  // Absent in records from before layouts: generation 0, nothing adopted.
  RSC_ASSIGN_OR_RETURN(int64_t active_generation, r.IntOr("activeGeneration", 0, INT32_MAX, 0));
  m.active_generation = static_cast<int32_t>(active_generation);
  RSC_ASSIGN_OR_RETURN(m.layout_revision, r.IntOr("layoutRevision", 0, kMaxInt, 0));

  RSC_ASSIGN_OR_RETURN(const bj::array* shards, r.Arr("shards"));
  for (size_t i = 0; i < shards->size(); ++i) {
    const std::string p = fmt::format("shards[{}]", i);
    RSC_ASSIGN_OR_RETURN(const bj::object* o, ElemObj((*shards)[i], p));
    json::Reader sr(*o, p, kBad);
    ShardState s;
    // Absent in records from before generations: shards 0..N-1 in order, generation 0.
    RSC_ASSIGN_OR_RETURN(int64_t id, sr.IntOr("id", 0, INT32_MAX, static_cast<int64_t>(i)));
    s.id = static_cast<int32_t>(id);
    RSC_ASSIGN_OR_RETURN(int64_t generation, sr.IntOr("generation", 0, INT32_MAX, 0));
    s.generation = static_cast<int32_t>(generation);
    RSC_ASSIGN_OR_RETURN(s.stream, sr.StrOr("stream", 512, ShardStreamKey(m.key.stream, s.id)));
    RSC_ASSIGN_OR_RETURN(s.completed, sr.BoolOr("completed", false));
    RSC_ASSIGN_OR_RETURN(s.owner, sr.Str("owner", kMaxId));
    RSC_ASSIGN_OR_RETURN(s.target, sr.Str("target", kMaxId));
    RSC_ASSIGN_OR_RETURN(s.revoke_since_ms, sr.Int("revokeSinceMs", 0, kMaxInt));
    // Absent in records written before it existed: 0 = any REVOKED report applies, as then.
    RSC_ASSIGN_OR_RETURN(s.revoke_version, sr.IntOr("revokeVersion", 0, kMaxInt, 0));
    // Absent in records from before stuck shards were taken: not taken.
    RSC_ASSIGN_OR_RETURN(s.taken_ms, sr.IntOr("takenMs", 0, kMaxInt, 0));
    RSC_ASSIGN_OR_RETURN(s.release_at_ms, sr.IntOr("releaseAtMs", 0, kMaxInt, 0));
    m.shards.push_back(std::move(s));
  }
  RSC_ASSIGN_OR_RETURN(const bj::array* members, r.Arr("members"));
  for (size_t i = 0; i < members->size(); ++i) {
    const std::string p = fmt::format("members[{}]", i);
    RSC_ASSIGN_OR_RETURN(const bj::object* o, ElemObj((*members)[i], p));
    json::Reader mr(*o, p, kBad);
    Member mm;
    RSC_ASSIGN_OR_RETURN(std::string id, mr.Str("id", kMaxId));
    mm.id = MemberId(std::move(id));
    RSC_ASSIGN_OR_RETURN(mm.instance_id, mr.Str("instanceId", kMaxId));
    RSC_ASSIGN_OR_RETURN(int64_t epoch, mr.Int("epoch", 1, kMaxInt));
    mm.epoch = MemberEpoch(epoch);
    RSC_ASSIGN_OR_RETURN(mm.joined_ms, mr.Int("joinedMs", 0, kMaxInt));
    RSC_ASSIGN_OR_RETURN(mm.leaving, mr.BoolOr("leaving", false));
    RSC_ASSIGN_OR_RETURN(mm.fenced, mr.BoolOr("fenced", false));
    RSC_ASSIGN_OR_RETURN(mm.shard_lease, mr.BoolOr("shardLease", false));
    RSC_ASSIGN_OR_RETURN(mm.layout_v2, mr.BoolOr("layoutV2", false));
    m.members.push_back(std::move(mm));
  }
  RSC_ASSIGN_OR_RETURN(const bj::array* tombs, r.Arr("tombstones"));
  for (size_t i = 0; i < tombs->size(); ++i) {
    const std::string p = fmt::format("tombstones[{}]", i);
    RSC_ASSIGN_OR_RETURN(const bj::object* o, ElemObj((*tombs)[i], p));
    json::Reader tr(*o, p, kBad);
    Tombstone t;
    RSC_ASSIGN_OR_RETURN(std::string id, tr.Str("id", kMaxId));
    t.id = MemberId(std::move(id));
    RSC_ASSIGN_OR_RETURN(int64_t epoch, tr.Int("epoch", 0, kMaxInt));
    t.epoch = MemberEpoch(epoch);
    RSC_ASSIGN_OR_RETURN(t.fenced, tr.BoolOr("fenced", false));
    RSC_ASSIGN_OR_RETURN(t.left, tr.BoolOr("left", false));
    RSC_ASSIGN_OR_RETURN(t.at_ms, tr.Int("atMs", 0, kMaxInt));
    RSC_ASSIGN_OR_RETURN(t.claimed, tr.BoolOr("claimed", false));
    m.tombstones.push_back(std::move(t));
  }
  const bj::value* round = r.Find("correctionRound");
  if (round && !round->is_null()) {
    RSC_ASSIGN_OR_RETURN(const bj::object* o, ElemObj(*round, "correctionRound"));
    json::Reader rr(*o, "correctionRound", kBad);
    CorrectionRound cr;
    RSC_ASSIGN_OR_RETURN(cr.id, rr.Int("id", 0, kMaxInt));
    RSC_ASSIGN_OR_RETURN(cr.started_ms, rr.Int("startedMs", 0, kMaxInt));
    RSC_ASSIGN_OR_RETURN(int64_t sv, rr.Int("startedVersion", 0, kMaxInt));
    cr.started_version = MetadataVersion(sv);
    RSC_ASSIGN_OR_RETURN(const bj::array* synced, rr.Arr("synced"));
    for (const bj::value& v : *synced) {
      if (!v.is_string()) return MakeError(kBad, "correctionRound.synced: must hold strings");
      cr.synced.emplace_back(std::string(v.get_string().data(), v.get_string().size()));
    }
    RSC_ASSIGN_OR_RETURN(const bj::array* blockers, rr.Arr("blockers"));
    for (size_t i = 0; i < blockers->size(); ++i) {
      const std::string p = fmt::format("correctionRound.blockers[{}]", i);
      RSC_ASSIGN_OR_RETURN(const bj::object* bo, ElemObj((*blockers)[i], p));
      json::Reader br(*bo, p, kBad);
      Blocker b;
      RSC_ASSIGN_OR_RETURN(int64_t shard, br.Int("shard", 0, 1 << 20));
      b.shard = ShardId(static_cast<int32_t>(shard));
      RSC_ASSIGN_OR_RETURN(std::string member, br.Str("member", kMaxId));
      b.member = MemberId(std::move(member));
      RSC_ASSIGN_OR_RETURN(b.until_ms, br.Int("untilMs", 0, kMaxInt));
      RSC_ASSIGN_OR_RETURN(b.since_version, br.IntOr("sinceVersion", 0, kMaxInt, 0));
      cr.blockers.push_back(std::move(b));
    }
    m.round = std::move(cr);
  }
  RSC_RETURN_IF_ERROR(CheckInvariants(m));
  return m;
}

}  // namespace

std::string EncodeAggregate(const GroupMetadata& m) { return bj::serialize(AggregateToJson(m)); }

Result<GroupMetadata> DecodeAggregate(std::string_view text) {
  RSC_ASSIGN_OR_RETURN(bj::value v, json::Parse(text, kBad));
  return AggregateFromJson(v);
}

std::string EncodeExport(const GroupMetadata& m, StoreRevision revision) {
  return bj::serialize(bj::object{{"kind", "rsc-group-export"},
                                  {"schemaVersion", kSchemaVersion},
                                  {"layoutVersion", kLayoutVersion},
                                  {"revision", revision.value()},
                                  {"aggregate", AggregateToJson(m)}});
}

Result<ExportDoc> DecodeExport(std::string_view text) {
  constexpr ErrorCode kInv = ErrorCode::kInvalidRequest;
  RSC_ASSIGN_OR_RETURN(bj::value v, json::Parse(text, kInv));
  if (!v.is_object()) return MakeError(kInv, "export: must be a JSON object");
  json::Reader r(v.get_object(), "", kInv);
  RSC_ASSIGN_OR_RETURN(std::string kind, r.Str("kind", 64));
  if (kind != "rsc-group-export") return r.Bad("kind", "must be \"rsc-group-export\"");
  RSC_ASSIGN_OR_RETURN(int64_t schema, r.Int("schemaVersion", 0, kMaxInt));
  RSC_ASSIGN_OR_RETURN(int64_t layout, r.Int("layoutVersion", 0, kMaxInt));
  if (schema != kSchemaVersion || layout != kLayoutVersion) {
    return MakeError(kInv, fmt::format("export has schemaVersion {} layoutVersion {}; this "
                                       "coordinator reads {} and {}",
                                       schema, layout, kSchemaVersion, kLayoutVersion));
  }
  RSC_ASSIGN_OR_RETURN(int64_t revision, r.Int("revision", 0, kMaxInt));
  const bj::value* agg = r.Find("aggregate");
  if (!agg) return r.Bad("aggregate", "is required");
  auto meta = AggregateFromJson(*agg);
  if (!meta.ok()) return MakeError(kInv, "export aggregate: " + meta.error().message);
  return ExportDoc{std::move(meta).value(), StoreRevision(revision)};
}

}  // namespace rsc
