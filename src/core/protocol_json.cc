#include "core/protocol_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <unordered_set>
#include <utility>

#include "core/layout_codec.h"

namespace rsc {
namespace json = boost::json;
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

std::string_view KindName(json::kind k) {
  switch (k) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "an integer";
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

std::string Join(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return fmt::format("{}.{}", prefix, key);
}

std::string Index(std::string_view prefix, size_t i) { return fmt::format("{}[{}]", prefix, i); }

bool IsIdChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':';
}

// Reads typed fields out of a parsed document and keeps the FIRST problem found, so the
// message names the first bad field. After a failure every accessor returns "absent";
// callers check ok() before using results.
class Reader {
 public:
  explicit Reader(ErrorCode code) : code_(code) {}

  bool ok() const { return !error_.has_value(); }
  Error error() const { return *error_; }

  void Fail(std::string_view path, std::string_view what) {
    if (error_) return;
    std::string msg = code_ == ErrorCode::kInvalidRequest
                          ? fmt::format("{}: {}", path, what)
                          : fmt::format("malformed response: {}: {}", path, what);
    error_ = Error{code_, std::move(msg)};
  }

  // The value under `key`, or nullptr when absent or null (null == absent).
  const json::value* Find(const json::object& o, std::string_view key, std::string_view prefix,
                          bool required) {
    if (!ok()) return nullptr;
    auto it = o.find(key);
    if (it == o.end() || it->value().is_null()) {
      if (required) Fail(Join(prefix, key), "is required");
      return nullptr;
    }
    return &it->value();
  }

  std::optional<int64_t> IntValue(const json::value& v, std::string_view path, int64_t lo,
                                  int64_t hi) {
    if (!ok()) return std::nullopt;
    int64_t n = 0;
    switch (v.kind()) {
      case json::kind::int64:
        n = v.get_int64();
        break;
      case json::kind::uint64:
        if (v.get_uint64() > static_cast<uint64_t>(kInt64Max)) {
          Fail(path, "is out of range (overflows a 64-bit integer)");
          return std::nullopt;
        }
        n = static_cast<int64_t>(v.get_uint64());
        break;
      case json::kind::double_: {
        // Boost.JSON turns integers beyond 64 bits into doubles; say "out of range" for
        // those and "not an integer" for fractions and exponents.
        double d = v.get_double();
        if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) >= 9.2e18) {
          Fail(path, "is out of range (overflows a 64-bit integer)");
        } else {
          Fail(path, "must be an integer, got a non-integral number");
        }
        return std::nullopt;
      }
      default:
        Fail(path, fmt::format("must be an integer, got {}", KindName(v.kind())));
        return std::nullopt;
    }
    if (n < lo || n > hi) {
      if (hi == kInt64Max) {
        Fail(path, fmt::format("must be >= {}, got {}", lo, n));
      } else {
        Fail(path, fmt::format("must be between {} and {}, got {}", lo, hi, n));
      }
      return std::nullopt;
    }
    return n;
  }

  std::optional<int64_t> Int(const json::object& o, std::string_view key, std::string_view prefix,
                             int64_t lo, int64_t hi, bool required) {
    const json::value* v = Find(o, key, prefix, required);
    if (v == nullptr) return std::nullopt;
    return IntValue(*v, Join(prefix, key), lo, hi);
  }

  std::optional<bool> Bool(const json::object& o, std::string_view key, std::string_view prefix,
                           bool required) {
    const json::value* v = Find(o, key, prefix, required);
    if (v == nullptr) return std::nullopt;
    if (!v->is_bool()) {
      Fail(Join(prefix, key), fmt::format("must be a boolean, got {}", KindName(v->kind())));
      return std::nullopt;
    }
    return v->get_bool();
  }

  // `syntax` describes the accepted form in error messages; `valid` checks it.
  template <class Valid>
  std::optional<std::string> String(const json::object& o, std::string_view key,
                                    std::string_view prefix, bool required, Valid valid,
                                    std::string_view syntax) {
    const json::value* v = Find(o, key, prefix, required);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      Fail(Join(prefix, key), fmt::format("must be a string, got {}", KindName(v->kind())));
      return std::nullopt;
    }
    std::string_view s = v->get_string();
    if (!valid(s)) {
      // The value is not echoed: it may be long or contain control characters.
      Fail(Join(prefix, key), fmt::format("must match {}", syntax));
      return std::nullopt;
    }
    return std::string(s);
  }

  std::optional<std::string> AnyString(const json::object& o, std::string_view key,
                                       std::string_view prefix, bool required) {
    return String(
        o, key, prefix, required, [](std::string_view) { return true; }, "a string");
  }

  const json::object* Object(const json::value& v, std::string_view path) {
    if (!ok()) return nullptr;
    if (!v.is_object()) {
      Fail(path, fmt::format("must be an object, got {}", KindName(v.kind())));
      return nullptr;
    }
    return &v.get_object();
  }

  const json::array* Array(const json::object& o, std::string_view key, std::string_view prefix,
                           bool required, size_t max_entries) {
    const json::value* v = Find(o, key, prefix, required);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) {
      Fail(Join(prefix, key), fmt::format("must be an array, got {}", KindName(v->kind())));
      return nullptr;
    }
    if (v->get_array().size() > max_entries) {
      Fail(Join(prefix, key),
           fmt::format("has {} entries, at most {} allowed", v->get_array().size(), max_entries));
      return nullptr;
    }
    return &v->get_array();
  }

  // An array of integers in [lo, hi].
  std::vector<int64_t> IntArray(const json::object& o, std::string_view key,
                                std::string_view prefix, int64_t lo, int64_t hi, bool required) {
    std::vector<int64_t> out;
    const json::array* a = Array(o, key, prefix, required, kMaxReportedShards);
    if (a == nullptr) return out;
    std::string path = Join(prefix, key);
    out.reserve(a->size());
    for (size_t i = 0; i < a->size() && ok(); ++i) {
      auto n = IntValue((*a)[i], Index(path, i), lo, hi);
      if (n) out.push_back(*n);
    }
    return out;
  }

 private:
  ErrorCode code_;
  std::optional<Error> error_;
};

// Parses `body` into an object. `code` is the error code of the calling direction.
Result<json::value> ParseDocument(std::string_view body, ErrorCode code) {
  const char* prefix = code == ErrorCode::kInvalidRequest ? "" : "malformed response: ";
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Error{code, fmt::format("{}body is empty, expected a JSON object", prefix)};
  }
  json::parse_options opt;
  opt.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, json::storage_ptr(), opt);
  if (ec) return Error{code, fmt::format("{}body is not valid JSON: {}", prefix, ec.message())};
  if (!v.is_object()) {
    return Error{code,
                 fmt::format("{}body must be a JSON object, got {}", prefix, KindName(v.kind()))};
  }
  return v;
}

// Runs a parser body and converts any escaping exception (in practice only bad_alloc on
// absurd inputs) into an error: the boundary never throws.
template <class T, class F>
Result<T> Guarded(ErrorCode code, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Error{code, fmt::format("could not parse body: {}", e.what())};
  } catch (...) {
    return Error{code, "could not parse body"};
  }
}

// ── Heartbeat / leave ─────────────────────────────────────────────────────────────

constexpr std::string_view kIdSyntax = "[A-Za-z0-9._:-]{1,128}";
constexpr std::string_view kLineageSyntax = "a string of at most 64 bytes";

bool ValidLineage(std::string_view s) { return s.size() <= kMaxLineageLength; }

// Feature names: short lowercase words joined by '-' ("shard-lease", "layout-v2").
constexpr size_t kMaxFeatures = 16;
constexpr std::string_view kFeatureSyntax = "[a-z0-9-]{1,32}";
bool ValidFeature(std::string_view s) {
  return !s.empty() && s.size() <= 32 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}
bool ValidInstanceId(std::string_view s) { return s.empty() || IsValidMemberId(s); }

void ReadHeartbeatFields(Reader& r, const json::object& o, HeartbeatRequest& req, int64_t* epoch) {
  if (auto id = r.String(o, "memberId", "", true, IsValidMemberId, kIdSyntax)) {
    req.member_id = MemberId(std::move(*id));
  }
  if (auto e = r.Int(o, "memberEpoch", "", -1, kInt64Max, true)) *epoch = *e;
  if (auto s = r.String(o, "instanceId", "", false, ValidInstanceId, kIdSyntax)) {
    req.instance_id = std::move(*s);
  }
  req.assignment_epoch = r.Int(o, "assignmentEpoch", "", 0, kInt64Max, false).value_or(0);
  req.metadata_version = r.Int(o, "metadataVersion", "", 0, kInt64Max, false).value_or(0);
  if (auto l = r.String(o, "lineage", "", false, ValidLineage, kLineageSyntax)) {
    req.lineage = std::move(*l);
  }
  if (!r.ok()) return;

  // One set across both arrays: a shard is either being read or being released. Ids go up
  // to kMaxShardId (D2), so a set rather than a bitmap.
  std::unordered_set<int64_t> seen;
  for (int64_t s : r.IntArray(o, "ownedShards", "", 0, kMaxShardId, false)) {
    if (!seen.insert(s).second) {
      r.Fail("ownedShards", fmt::format("duplicate shard {}", s));
      return;
    }
    req.owned_shards.push_back(static_cast<int32_t>(s));
  }
  const json::array* rev = r.Array(o, "revokingShards", "", false, kMaxReportedShards);
  for (size_t i = 0; rev != nullptr && i < rev->size() && r.ok(); ++i) {
    std::string path = Index("revokingShards", i);
    const json::object* e = r.Object((*rev)[i], path);
    if (e == nullptr) return;
    auto shard = r.Int(*e, "shard", path, 0, kMaxShardId, true);
    auto state = r.AnyString(*e, "state", path, true);
    if (!r.ok()) return;
    RevokingReport rep;
    rep.shard = static_cast<int32_t>(*shard);
    if (*state == "DRAINING") {
      rep.state = RevokeState::kDraining;
    } else if (*state == "REVOKED") {
      rep.state = RevokeState::kRevoked;
    } else {
      r.Fail(Join(path, "state"), "must be \"DRAINING\" or \"REVOKED\"");
      return;
    }
    if (!seen.insert(rep.shard).second) {
      r.Fail(Join(path, "shard"),
             fmt::format("shard {} is listed twice (in ownedShards or revokingShards)", rep.shard));
      return;
    }
    req.revoking_shards.push_back(rep);
  }
  const json::array* features = r.Array(o, "features", "", false, kMaxFeatures);
  for (size_t i = 0; features != nullptr && i < features->size() && r.ok(); ++i) {
    const json::value& f = (*features)[i];
    if (!f.is_string() || !ValidFeature(f.get_string())) {
      r.Fail(Index("features", i), fmt::format("must match {}", kFeatureSyntax));
      return;
    }
    req.features.emplace_back(f.get_string());
  }
  std::sort(req.features.begin(), req.features.end());
  req.features.erase(std::unique(req.features.begin(), req.features.end()), req.features.end());
  // RS3: a hint, not a claim — the coordinator checks each in Redis; duplicates are harmless.
  for (int64_t s : r.IntArray(o, "completedShards", "", 0, kMaxShardId, false)) {
    req.completed_shards.push_back(static_cast<int32_t>(s));
  }
  std::sort(req.completed_shards.begin(), req.completed_shards.end());
  req.completed_shards.erase(std::unique(req.completed_shards.begin(), req.completed_shards.end()),
                             req.completed_shards.end());
  std::sort(req.owned_shards.begin(), req.owned_shards.end());
  std::sort(req.revoking_shards.begin(), req.revoking_shards.end(),
            [](const RevokingReport& a, const RevokingReport& b) { return a.shard < b.shard; });
}

json::array ShardArray(const std::vector<int32_t>& shards) {
  json::array a;
  a.reserve(shards.size());
  for (int32_t s : shards) a.emplace_back(s);
  return a;
}

json::object HeartbeatRequestObject(const HeartbeatRequest& req, int64_t epoch) {
  json::object o;
  o["memberId"] = req.member_id.str();
  o["memberEpoch"] = epoch;
  if (!req.instance_id.empty()) o["instanceId"] = req.instance_id;
  o["assignmentEpoch"] = req.assignment_epoch;
  o["metadataVersion"] = req.metadata_version;
  o["lineage"] = req.lineage;
  o["ownedShards"] = ShardArray(req.owned_shards);
  json::array rev;
  for (const RevokingReport& r : req.revoking_shards) {
    rev.push_back(json::object{
        {"shard", r.shard}, {"state", r.state == RevokeState::kDraining ? "DRAINING" : "REVOKED"}});
  }
  o["revokingShards"] = std::move(rev);
  if (!req.features.empty()) {
    json::array f;
    for (const std::string& name : req.features) f.emplace_back(name);
    o["features"] = std::move(f);
  }
  if (!req.completed_shards.empty()) o["completedShards"] = ShardArray(req.completed_shards);
  return o;
}

// ── Config ────────────────────────────────────────────────────────────────────────

struct ConfigField {
  std::string_view name;
  std::optional<int64_t> GroupConfigPatch::*patch;
  int64_t GroupConfig::*config;
};

constexpr ConfigField kConfigFields[] = {
    {"heartbeatIntervalMs", &GroupConfigPatch::heartbeat_interval_ms,
     &GroupConfig::heartbeat_interval_ms},
    {"memberLeaseMs", &GroupConfigPatch::member_lease_ms, &GroupConfig::member_lease_ms},
    {"assignmentLeaseMs", &GroupConfigPatch::assignment_lease_ms,
     &GroupConfig::assignment_lease_ms},
    {"rebalanceTimeoutMs", &GroupConfigPatch::rebalance_timeout_ms,
     &GroupConfig::rebalance_timeout_ms},
    {"routingLeaseMs", &GroupConfigPatch::routing_lease_ms, &GroupConfig::routing_lease_ms},
    {"routingRefreshMs", &GroupConfigPatch::routing_refresh_ms, &GroupConfig::routing_refresh_ms},
};

GroupConfigPatch ReadConfigPatch(Reader& r, const json::value& v, std::string_view path) {
  GroupConfigPatch p;
  const json::object* o = r.Object(v, path);
  if (o == nullptr) return p;
  for (const ConfigField& f : kConfigFields) {
    p.*(f.patch) = r.Int(*o, f.name, path, 1, kMaxConfigMs, false);
  }
  return p;
}

json::object ConfigObject(const GroupConfig& c) {
  json::object o;
  for (const ConfigField& f : kConfigFields) o[f.name] = c.*(f.config);
  return o;
}

json::object ConfigPatchObject(const GroupConfigPatch& p) {
  json::object o;
  for (const ConfigField& f : kConfigFields) {
    if (p.*(f.patch)) o[f.name] = *(p.*(f.patch));
  }
  return o;
}

// Lenient config read for responses: missing fields keep their defaults.
GroupConfig ReadConfig(Reader& r, const json::value& v, std::string_view path) {
  return ReadConfigPatch(r, v, path).ApplyTo(GroupConfig{});
}

// ValidateConfig's messages already name the field ("config.memberLeaseMs ..."); only the
// code is pinned, since every config problem is the caller's to fix.
Status CheckConfig(const GroupConfig& c) {
  Status s = ValidateConfig(c);
  if (!s.ok()) return Error{ErrorCode::kInvalidRequest, s.error().message};
  return OkStatus();
}

// ── Views ─────────────────────────────────────────────────────────────────────────

json::array RoutingShards(const std::vector<RoutingShard>& shards) {
  json::array a;
  a.reserve(shards.size());
  for (const RoutingShard& s : shards)
    a.push_back(json::object{{"id", s.id}, {"stream", s.stream}});
  return a;
}

std::vector<RoutingShard> ReadRoutingShards(Reader& r, const json::object& o) {
  std::vector<RoutingShard> out;
  const json::array* a = r.Array(o, "shards", "", true, kMaxReportedShards);
  for (size_t i = 0; a != nullptr && i < a->size() && r.ok(); ++i) {
    std::string path = Index("shards", i);
    const json::object* e = r.Object((*a)[i], path);
    if (e == nullptr) break;
    RoutingShard s;
    s.id = static_cast<int32_t>(r.Int(*e, "id", path, 0, kMaxShardId, true).value_or(0));
    s.stream = r.AnyString(*e, "stream", path, true).value_or("");
    out.push_back(std::move(s));
  }
  return out;
}

json::array ShardViews(const std::vector<ShardView>& shards) {
  json::array a;
  a.reserve(shards.size());
  for (const ShardView& s : shards) {
    json::object e{{"id", s.id},       {"stream", s.stream}, {"generation", s.generation},
                   {"owner", s.owner}, {"target", s.target}, {"state", s.state}};
    if (!s.waiting_for.empty()) e["waitingFor"] = ShardArray(s.waiting_for);
    if (s.lag) e["lag"] = *s.lag;
    if (s.pending) e["pending"] = *s.pending;
    if (s.oldest_pending_ms) e["oldestPendingMs"] = *s.oldest_pending_ms;
    a.push_back(std::move(e));
  }
  return a;
}

std::vector<ShardView> ReadShardViews(Reader& r, const json::object& o) {
  std::vector<ShardView> out;
  const json::array* a = r.Array(o, "shards", "", true, kMaxReportedShards);
  for (size_t i = 0; a != nullptr && i < a->size() && r.ok(); ++i) {
    const std::string path = Index("shards", i);
    const json::object* e = r.Object((*a)[i], path);
    if (e == nullptr) break;
    ShardView s;
    s.id = static_cast<int32_t>(r.Int(*e, "id", path, 0, kMaxShardId, true).value_or(0));
    s.stream = r.AnyString(*e, "stream", path, true).value_or("");
    s.generation =
        static_cast<int32_t>(r.Int(*e, "generation", path, 0, kMaxShardId, false).value_or(0));
    s.owner = r.AnyString(*e, "owner", path, false).value_or("");
    s.target = r.AnyString(*e, "target", path, false).value_or("");
    s.state = r.AnyString(*e, "state", path, false).value_or("");
    for (int64_t w : r.IntArray(*e, "waitingFor", path, 0, kMaxShardId, false)) {
      s.waiting_for.push_back(static_cast<int32_t>(w));
    }
    s.lag = r.Int(*e, "lag", path, 0, kInt64Max, false);
    s.pending = r.Int(*e, "pending", path, 0, kInt64Max, false);
    s.oldest_pending_ms = r.Int(*e, "oldestPendingMs", path, 0, kInt64Max, false);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<int32_t> ReadShardList(Reader& r, const json::object& o, std::string_view key,
                                   std::string_view prefix) {
  std::vector<int32_t> out;
  for (int64_t s : r.IntArray(o, key, prefix, 0, kMaxShardId, true)) {
    out.push_back(static_cast<int32_t>(s));
  }
  return out;
}

json::value RoundObject(const std::optional<CorrectionRound>& round) {
  if (!round) return nullptr;
  json::array synced;
  for (const MemberId& m : round->synced) synced.emplace_back(m.str());
  json::array blockers;
  for (const Blocker& b : round->blockers) {
    blockers.push_back(json::object{{"shard", b.shard.value()},
                                    {"member", b.member.str()},
                                    {"untilMs", b.until_ms},
                                    {"sinceVersion", b.since_version}});
  }
  return json::object{{"id", round->id},
                      {"startedMs", round->started_ms},
                      {"startedVersion", round->started_version.value()},
                      {"synced", std::move(synced)},
                      {"blockers", std::move(blockers)}};
}

std::optional<CorrectionRound> ReadRound(Reader& r, const json::object& o) {
  const json::value* v = r.Find(o, "correctionRound", "", false);
  if (v == nullptr) return std::nullopt;
  const json::object* ro = r.Object(*v, "correctionRound");
  if (ro == nullptr) return std::nullopt;
  constexpr std::string_view p = "correctionRound";
  CorrectionRound round;
  round.id = r.Int(*ro, "id", p, kInt64Min, kInt64Max, true).value_or(0);
  round.started_ms = r.Int(*ro, "startedMs", p, kInt64Min, kInt64Max, true).value_or(0);
  round.started_version =
      MetadataVersion(r.Int(*ro, "startedVersion", p, kInt64Min, kInt64Max, true).value_or(0));
  const json::array* synced = r.Array(*ro, "synced", p, true, kMaxReportedShards);
  for (size_t i = 0; synced != nullptr && i < synced->size() && r.ok(); ++i) {
    if (!(*synced)[i].is_string()) {
      r.Fail(Index("correctionRound.synced", i), "must be a string");
      break;
    }
    round.synced.emplace_back(std::string((*synced)[i].get_string()));
  }
  const json::array* blockers = r.Array(*ro, "blockers", p, true, kMaxReportedShards);
  for (size_t i = 0; blockers != nullptr && i < blockers->size() && r.ok(); ++i) {
    std::string path = Index("correctionRound.blockers", i);
    const json::object* b = r.Object((*blockers)[i], path);
    if (b == nullptr) break;
    Blocker blk;
    blk.shard =
        ShardId(static_cast<int32_t>(r.Int(*b, "shard", path, 0, kMaxShardId, true).value_or(0)));
    blk.member = MemberId(r.AnyString(*b, "member", path, true).value_or(""));
    blk.until_ms = r.Int(*b, "untilMs", path, kInt64Min, kInt64Max, true).value_or(0);
    blk.since_version = r.Int(*b, "sinceVersion", path, 0, kInt64Max, false).value_or(0);
    round.blockers.push_back(std::move(blk));
  }
  return round;
}

json::object MemberObject(const MemberView& m) {
  return json::object{{"memberId", m.member_id},
                      {"memberEpoch", m.member_epoch},
                      {"instanceId", m.instance_id},
                      {"assignedShards", ShardArray(m.assigned_shards)},
                      {"pendingShards", ShardArray(m.pending_shards)},
                      {"revokingShards", ShardArray(m.revoking_shards)},
                      {"leaseRemainingMs", m.lease_remaining_ms},
                      {"leaving", m.leaving},
                      {"fenced", m.fenced}};
}

MemberView ReadMember(Reader& r, const json::value& v, std::string_view path) {
  MemberView m;
  const json::object* o = r.Object(v, path);
  if (o == nullptr) return m;
  m.member_id = r.AnyString(*o, "memberId", path, true).value_or("");
  m.member_epoch = r.Int(*o, "memberEpoch", path, kInt64Min, kInt64Max, true).value_or(0);
  m.instance_id = r.AnyString(*o, "instanceId", path, false).value_or("");
  m.assigned_shards = ReadShardList(r, *o, "assignedShards", path);
  m.pending_shards = ReadShardList(r, *o, "pendingShards", path);
  m.revoking_shards = ReadShardList(r, *o, "revokingShards", path);
  m.lease_remaining_ms =
      r.Int(*o, "leaseRemainingMs", path, kInt64Min, kInt64Max, false).value_or(0);
  m.leaving = r.Bool(*o, "leaving", path, false).value_or(false);
  m.fenced = r.Bool(*o, "fenced", path, false).value_or(false);
  return m;
}

std::string Serialize(const json::value& v) { return json::serialize(v); }

}  // namespace

bool IsValidMemberId(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdLength || IsOnlyDots(id)) return false;
  return std::all_of(id.begin(), id.end(), IsIdChar);
}

// ── Requests ─────────────────────────────────────────────────────────────────────

Result<HeartbeatRequest> ParseHeartbeatRequest(std::string_view body) {
  return Guarded<HeartbeatRequest>(ErrorCode::kInvalidRequest, [&]() -> Result<HeartbeatRequest> {
    auto doc = ParseDocument(body, ErrorCode::kInvalidRequest);
    if (!doc.ok()) return doc.error();
    Reader r(ErrorCode::kInvalidRequest);
    HeartbeatRequest req;
    ReadHeartbeatFields(r, doc->get_object(), req, &req.member_epoch);
    if (!r.ok()) return r.error();
    return req;
  });
}

std::string SerializeHeartbeatRequest(const HeartbeatRequest& req) {
  return Serialize(HeartbeatRequestObject(req, req.member_epoch));
}

Result<LeaveRequest> ParseLeaveRequest(std::string_view body) {
  return Guarded<LeaveRequest>(ErrorCode::kInvalidRequest, [&]() -> Result<LeaveRequest> {
    auto doc = ParseDocument(body, ErrorCode::kInvalidRequest);
    if (!doc.ok()) return doc.error();
    Reader r(ErrorCode::kInvalidRequest);
    LeaveRequest req;
    ReadHeartbeatFields(r, doc->get_object(), req.heartbeat, &req.member_epoch);
    if (!r.ok()) return r.error();
    req.heartbeat.member_epoch = -1;
    req.heartbeat.leave_epoch = req.member_epoch > 0 ? req.member_epoch : 0;
    return req;
  });
}

std::string SerializeLeaveRequest(const LeaveRequest& req) {
  return Serialize(HeartbeatRequestObject(req.heartbeat, req.member_epoch));
}

bool GroupConfigPatch::Empty() const {
  return std::none_of(std::begin(kConfigFields), std::end(kConfigFields),
                      [this](const ConfigField& f) { return (this->*(f.patch)).has_value(); });
}

bool GroupConfigPatch::Complete() const {
  return std::all_of(std::begin(kConfigFields), std::end(kConfigFields),
                     [this](const ConfigField& f) { return (this->*(f.patch)).has_value(); });
}

GroupConfig GroupConfigPatch::ApplyTo(GroupConfig base) const {
  for (const ConfigField& f : kConfigFields) {
    if (this->*(f.patch)) base.*(f.config) = *(this->*(f.patch));
  }
  return base;
}

GroupConfigPatch GroupConfigPatch::Full(const GroupConfig& c) {
  GroupConfigPatch p;
  for (const ConfigField& f : kConfigFields) p.*(f.patch) = c.*(f.config);
  return p;
}

Result<CreateGroupRequest> ParseCreateGroupRequest(std::string_view body) {
  return Guarded<CreateGroupRequest>(
      ErrorCode::kInvalidRequest, [&]() -> Result<CreateGroupRequest> {
        auto doc = ParseDocument(body, ErrorCode::kInvalidRequest);
        if (!doc.ok()) return doc.error();
        const json::object& o = doc->get_object();
        Reader r(ErrorCode::kInvalidRequest);
        CreateGroupRequest req;
        req.stream = r.String(o, "stream", "", true, IsValidStreamName, "[A-Za-z0-9._:-]{1,200}")
                         .value_or("");
        req.group =
            r.String(o, "group", "", true, IsValidGroupName, "[A-Za-z0-9._-]{1,128}").value_or("");
        // Optional: absent (0) adopts the stream's layout; a new stream needs it (SPEC D3).
        req.shard_count =
            static_cast<int32_t>(r.Int(o, "shardCount", "", 1, kMaxShardCount, false).value_or(0));
        if (const json::value* c = r.Find(o, "config", "", false)) {
          req.config = ReadConfigPatch(r, *c, "config").ApplyTo(GroupConfig{});
        }
        if (!r.ok()) return r.error();
        if (Status s = CheckConfig(req.config); !s.ok()) return s.error();
        return req;
      });
}

std::string SerializeCreateGroupRequest(const CreateGroupRequest& req) {
  json::object o{{"stream", req.stream}, {"group", req.group}};
  if (req.shard_count != 0) o["shardCount"] = req.shard_count;  // 0: adopt the stream's
  o["config"] = ConfigObject(req.config);
  return Serialize(o);
}

Result<PatchGroupBody> ParsePatchGroupBody(std::string_view body) {
  return Guarded<PatchGroupBody>(ErrorCode::kInvalidRequest, [&]() -> Result<PatchGroupBody> {
    auto doc = ParseDocument(body, ErrorCode::kInvalidRequest);
    if (!doc.ok()) return doc.error();
    const json::object& o = doc->get_object();
    Reader r(ErrorCode::kInvalidRequest);
    PatchGroupBody p;
    p.expected_revision = r.Int(o, "expectedRevision", "", 0, kInt64Max, true).value_or(0);
    if (auto n = r.Int(o, "shardCount", "", 1, kMaxShardCount, false)) {
      p.shard_count = static_cast<int32_t>(*n);
    }
    if (const json::value* c = r.Find(o, "config", "", false)) {
      GroupConfigPatch cp = ReadConfigPatch(r, *c, "config");
      if (!cp.Empty()) p.config = cp;
    }
    if (!r.ok()) return r.error();
    if (!p.shard_count && !p.config) {
      return Error{ErrorCode::kInvalidRequest,
                   "patch changes nothing: give shardCount and/or config fields"};
    }
    return p;
  });
}

std::string SerializePatchGroupBody(const PatchGroupBody& body) {
  json::object o;
  o["expectedRevision"] = body.expected_revision;
  if (body.shard_count) o["shardCount"] = *body.shard_count;
  if (body.config) o["config"] = ConfigPatchObject(*body.config);
  return Serialize(o);
}

Result<PatchGroupRequest> ResolvePatch(const PatchGroupBody& body, const GroupConfig& current) {
  PatchGroupRequest req;
  req.expected_revision = body.expected_revision;
  req.shard_count = body.shard_count;
  if (body.config) {
    GroupConfig merged = body.config->ApplyTo(current);
    if (Status s = CheckConfig(merged); !s.ok()) return s.error();
    req.config = merged;
  }
  return req;
}

// ── Responses ────────────────────────────────────────────────────────────────────

std::string SerializeHeartbeatResponse(const HeartbeatResponse& resp) {
  json::object o{{"status", HeartbeatStatusName(resp.status)},
                 {"memberId", resp.member_id.str()},
                 {"memberEpoch", resp.member_epoch},
                 {"assignmentEpoch", resp.assignment_epoch},
                 {"metadataVersion", resp.metadata_version},
                 {"lineage", resp.lineage},
                 {"assignedShards", ShardArray(resp.assigned_shards)},
                 {"pendingShards", ShardArray(resp.pending_shards)},
                 {"revokeShards", ShardArray(resp.revoke_shards)},
                 {"heartbeatIntervalMs", resp.heartbeat_interval_ms},
                 {"assignmentLeaseMs", resp.assignment_lease_ms}};
  if (!resp.taken_shards.empty()) o["takenShards"] = ShardArray(resp.taken_shards);
  if (!resp.streams.empty()) {
    json::object keys;
    for (const RoutingShard& s : resp.streams) keys[std::to_string(s.id)] = s.stream;
    o["streams"] = std::move(keys);
  }
  return Serialize(o);
}

Result<HeartbeatResponse> ParseHeartbeatResponse(std::string_view body) {
  return Guarded<HeartbeatResponse>(ErrorCode::kInternal, [&]() -> Result<HeartbeatResponse> {
    auto doc = ParseDocument(body, ErrorCode::kInternal);
    if (!doc.ok()) return doc.error();
    const json::object& o = doc->get_object();
    Reader r(ErrorCode::kInternal);
    HeartbeatResponse resp;
    std::string status = r.AnyString(o, "status", "", true).value_or("");
    if (!r.ok()) return r.error();
    bool known = false;
    for (HeartbeatStatus s : {HeartbeatStatus::kOk, HeartbeatStatus::kRevokePending,
                              HeartbeatStatus::kDrain, HeartbeatStatus::kSyncMetadata}) {
      if (HeartbeatStatusName(s) == status) {
        resp.status = s;
        known = true;
      }
    }
    if (!known) r.Fail("status", "unknown heartbeat status");
    resp.member_id = MemberId(r.AnyString(o, "memberId", "", true).value_or(""));
    resp.member_epoch = r.Int(o, "memberEpoch", "", kInt64Min, kInt64Max, true).value_or(0);
    resp.assignment_epoch = r.Int(o, "assignmentEpoch", "", 0, kInt64Max, true).value_or(0);
    resp.metadata_version = r.Int(o, "metadataVersion", "", 0, kInt64Max, true).value_or(0);
    resp.lineage = r.AnyString(o, "lineage", "", true).value_or("");
    resp.assigned_shards = ReadShardList(r, o, "assignedShards", "");
    resp.pending_shards = ReadShardList(r, o, "pendingShards", "");
    resp.revoke_shards = ReadShardList(r, o, "revokeShards", "");
    if (o.contains("takenShards")) resp.taken_shards = ReadShardList(r, o, "takenShards", "");
    if (const json::value* keys = r.Find(o, "streams", "", false)) {
      if (!keys->is_object()) {
        r.Fail("streams", "must be an object of shard id to key");
      } else {
        for (const auto& kv : keys->get_object()) {
          int32_t id = -1;
          const std::string_view name = kv.key();
          auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
          if (ec != std::errc() || p != name.data() + name.size() || id < 0 ||
              !kv.value().is_string() || kv.value().get_string().empty()) {
            r.Fail("streams", "must map shard ids to non-empty keys");
            break;
          }
          resp.streams.push_back({id, std::string(kv.value().get_string())});
        }
        std::sort(resp.streams.begin(), resp.streams.end(),
                  [](const RoutingShard& a, const RoutingShard& b) { return a.id < b.id; });
      }
    }
    resp.heartbeat_interval_ms =
        r.Int(o, "heartbeatIntervalMs", "", 0, kInt64Max, true).value_or(0);
    resp.assignment_lease_ms = r.Int(o, "assignmentLeaseMs", "", 0, kInt64Max, true).value_or(0);
    if (!r.ok()) return r.error();
    return resp;
  });
}

std::string SerializeRoutingResponse(const RoutingResponse& resp) {
  return Serialize(json::object{{"metadataVersion", resp.metadata_version},
                                {"lineage", resp.lineage},
                                {"shardCount", resp.shard_count},
                                {"shards", RoutingShards(resp.shards)},
                                {"hash", resp.hash},
                                {"routingLeaseMs", resp.routing_lease_ms},
                                {"refreshIntervalMs", resp.refresh_interval_ms},
                                {"sync", resp.sync},
                                {"generation", resp.generation},
                                {"layoutRevision", resp.layout_revision}});
}

Result<RoutingResponse> ParseRoutingResponse(std::string_view body) {
  return Guarded<RoutingResponse>(ErrorCode::kInternal, [&]() -> Result<RoutingResponse> {
    auto doc = ParseDocument(body, ErrorCode::kInternal);
    if (!doc.ok()) return doc.error();
    const json::object& o = doc->get_object();
    Reader r(ErrorCode::kInternal);
    RoutingResponse resp;
    resp.metadata_version = r.Int(o, "metadataVersion", "", 0, kInt64Max, true).value_or(0);
    resp.lineage = r.AnyString(o, "lineage", "", true).value_or("");
    resp.shard_count =
        static_cast<int32_t>(r.Int(o, "shardCount", "", 0, kMaxShardCount, true).value_or(0));
    resp.shards = ReadRoutingShards(r, o);
    resp.hash = r.AnyString(o, "hash", "", true).value_or("");
    resp.routing_lease_ms = r.Int(o, "routingLeaseMs", "", 0, kInt64Max, true).value_or(0);
    resp.refresh_interval_ms = r.Int(o, "refreshIntervalMs", "", 0, kInt64Max, true).value_or(0);
    resp.sync = r.Bool(o, "sync", "", true).value_or(false);
    // Absent from coordinators before layouts (SPEC D4).
    resp.generation =
        static_cast<int32_t>(r.Int(o, "generation", "", 0, INT32_MAX, false).value_or(0));
    resp.layout_revision = r.Int(o, "layoutRevision", "", 0, kInt64Max, false).value_or(0);
    if (!r.ok()) return r.error();
    return resp;
  });
}

std::string SerializeGroupView(const GroupView& view) {
  json::array members;
  members.reserve(view.members.size());
  for (const MemberView& m : view.members) members.push_back(MemberObject(m));
  json::object o{{"stream", view.stream},
                 {"group", view.group},
                 {"revision", view.revision},
                 {"metadataVersion", view.metadata_version},
                 {"lineage", view.lineage},
                 {"assignmentEpoch", view.assignment_epoch},
                 {"shardCount", view.shard_count},
                 {"config", ConfigObject(view.config)},
                 {"members", std::move(members)},
                 {"correctionRound", RoundObject(view.correction_round)},
                 {"shards", ShardViews(view.shards)}};
  if (!view.taken_shards.empty()) {
    json::array taken;
    for (const TakenShardView& t : view.taken_shards) {
      taken.push_back(json::object{{"shard", t.shard},
                                   {"member", t.member},
                                   {"takenMs", t.taken_ms},
                                   {"releaseAtMs", t.release_at_ms}});
    }
    o["takenShards"] = std::move(taken);
  }
  if (!view.generations.empty()) {
    json::array gens;
    for (const GroupGenerationView& g : view.generations) {
      gens.push_back(json::object{{"generation", g.generation},
                                  {"shards", ShardArray(g.shards)},
                                  {"completed", ShardArray(g.completed)},
                                  {"waitingFor", ShardArray(g.waiting_for)}});
    }
    o["generations"] = std::move(gens);
  }
  return Serialize(o);
}

Result<GroupView> ParseGroupView(std::string_view body) {
  return Guarded<GroupView>(ErrorCode::kInternal, [&]() -> Result<GroupView> {
    auto doc = ParseDocument(body, ErrorCode::kInternal);
    if (!doc.ok()) return doc.error();
    const json::object& o = doc->get_object();
    Reader r(ErrorCode::kInternal);
    GroupView v;
    v.stream = r.AnyString(o, "stream", "", true).value_or("");
    v.group = r.AnyString(o, "group", "", true).value_or("");
    v.revision = r.Int(o, "revision", "", 0, kInt64Max, true).value_or(0);
    v.metadata_version = r.Int(o, "metadataVersion", "", 0, kInt64Max, true).value_or(0);
    v.lineage = r.AnyString(o, "lineage", "", true).value_or("");
    v.assignment_epoch = r.Int(o, "assignmentEpoch", "", 0, kInt64Max, true).value_or(0);
    v.shard_count =
        static_cast<int32_t>(r.Int(o, "shardCount", "", 0, kMaxShardCount, true).value_or(0));
    if (const json::value* c = r.Find(o, "config", "", true))
      v.config = ReadConfig(r, *c, "config");
    const json::array* members = r.Array(o, "members", "", true, kMaxReportedShards);
    for (size_t i = 0; members != nullptr && i < members->size() && r.ok(); ++i) {
      v.members.push_back(ReadMember(r, (*members)[i], Index("members", i)));
    }
    v.correction_round = ReadRound(r, o);
    v.shards = ReadShardViews(r, o);
    const json::array* taken = r.Array(o, "takenShards", "", false, kMaxReportedShards);
    for (size_t i = 0; taken != nullptr && i < taken->size() && r.ok(); ++i) {
      const std::string path = Index("takenShards", i);
      const json::object* t = r.Object((*taken)[i], path);
      if (t == nullptr) break;
      TakenShardView tv;
      tv.shard = static_cast<int32_t>(r.Int(*t, "shard", path, 0, kMaxShardId, true).value_or(0));
      tv.member = r.AnyString(*t, "member", path, true).value_or("");
      tv.taken_ms = r.Int(*t, "takenMs", path, 0, kInt64Max, true).value_or(0);
      tv.release_at_ms = r.Int(*t, "releaseAtMs", path, 0, kInt64Max, true).value_or(0);
      v.taken_shards.push_back(std::move(tv));
    }
    // Absent from coordinators before layouts.
    const json::array* gens = r.Array(o, "generations", "", false, kMaxReportedShards);
    for (size_t i = 0; gens != nullptr && i < gens->size() && r.ok(); ++i) {
      const std::string path = Index("generations", i);
      const json::object* g = r.Object((*gens)[i], path);
      if (g == nullptr) break;
      GroupGenerationView gv;
      gv.generation =
          static_cast<int32_t>(r.Int(*g, "generation", path, 0, INT32_MAX, true).value_or(0));
      gv.shards = ReadShardList(r, *g, "shards", path);
      gv.completed = ReadShardList(r, *g, "completed", path);
      gv.waiting_for = ReadShardList(r, *g, "waitingFor", path);
      v.generations.push_back(std::move(gv));
    }
    if (!r.ok()) return r.error();
    return v;
  });
}

std::string SerializeGroupList(const std::vector<GroupKey>& groups) {
  json::array a;
  a.reserve(groups.size());
  for (const GroupKey& k : groups)
    a.push_back(json::object{{"stream", k.stream}, {"group", k.group}});
  return Serialize(json::object{{"groups", std::move(a)}});
}

Result<ReshardRequest> ParseReshardRequest(std::string_view body) {
  return Guarded<ReshardRequest>(ErrorCode::kInvalidRequest, [&]() -> Result<ReshardRequest> {
    auto doc = ParseDocument(body, ErrorCode::kInvalidRequest);
    if (!doc.ok()) return doc.error();
    const json::object& o = doc->get_object();
    Reader r(ErrorCode::kInvalidRequest);
    ReshardRequest req;
    req.expected_layout_revision =
        r.Int(o, "expectedLayoutRevision", "", 1, kInt64Max, true).value_or(0);
    req.shard_count =
        static_cast<int32_t>(r.Int(o, "shardCount", "", 1, kMaxShardCount, true).value_or(0));
    if (!r.ok()) return r.error();
    return req;
  });
}

std::string SerializeReshardRequest(const ReshardRequest& req) {
  return Serialize(json::object{{"expectedLayoutRevision", req.expected_layout_revision},
                                {"shardCount", req.shard_count}});
}

Result<PatchStreamRequest> ParsePatchStreamRequest(std::string_view body) {
  return Guarded<PatchStreamRequest>(
      ErrorCode::kInvalidRequest, [&]() -> Result<PatchStreamRequest> {
        auto doc = ParseDocument(body, ErrorCode::kInvalidRequest);
        if (!doc.ok()) return doc.error();
        const json::object& o = doc->get_object();
        Reader r(ErrorCode::kInvalidRequest);
        PatchStreamRequest req;
        req.expected_layout_revision =
            r.Int(o, "expectedLayoutRevision", "", 1, kInt64Max, true).value_or(0);
        req.routing_lease_ms = r.Int(o, "routingLeaseMs", "", 1, kMaxConfigMs, false);
        req.routing_refresh_ms = r.Int(o, "routingRefreshMs", "", 1, kMaxConfigMs, false);
        if (!r.ok()) return r.error();
        if (!req.routing_lease_ms && !req.routing_refresh_ms) {
          return Error{ErrorCode::kInvalidRequest,
                       "patch changes nothing: give routingLeaseMs and/or routingRefreshMs"};
        }
        return req;
      });
}

std::string SerializePatchStreamRequest(const PatchStreamRequest& req) {
  json::object o{{"expectedLayoutRevision", req.expected_layout_revision}};
  if (req.routing_lease_ms) o["routingLeaseMs"] = *req.routing_lease_ms;
  if (req.routing_refresh_ms) o["routingRefreshMs"] = *req.routing_refresh_ms;
  return Serialize(o);
}

std::string SerializeStreamView(const StreamView& view) {
  json::value v = LayoutToJson(view.layout);
  v.as_object()["revision"] = view.revision;
  return Serialize(v);
}

Result<StreamView> ParseStreamView(std::string_view body) {
  // The layout's own strict decoder reads the view (the extra "revision" is ignored by it).
  auto layout = DecodeLayout(body);
  if (!layout.ok())
    return MakeError(ErrorCode::kInternal, "stream view: " + layout.error().message);
  auto doc = ParseDocument(body, ErrorCode::kInternal);
  if (!doc.ok()) return doc.error();
  Reader r(ErrorCode::kInternal);
  const int64_t revision = r.Int(doc->get_object(), "revision", "", 1, kInt64Max, true).value_or(0);
  if (!r.ok()) return r.error();
  return StreamView{revision, std::move(*layout)};
}

Result<std::vector<GroupKey>> ParseGroupList(std::string_view body) {
  using Out = std::vector<GroupKey>;
  return Guarded<Out>(ErrorCode::kInternal, [&]() -> Result<Out> {
    auto doc = ParseDocument(body, ErrorCode::kInternal);
    if (!doc.ok()) return doc.error();
    Reader r(ErrorCode::kInternal);
    Out out;
    const json::array* a =
        r.Array(doc->get_object(), "groups", "", true, std::numeric_limits<size_t>::max());
    for (size_t i = 0; a != nullptr && i < a->size() && r.ok(); ++i) {
      std::string path = Index("groups", i);
      const json::object* e = r.Object((*a)[i], path);
      if (e == nullptr) break;
      GroupKey k;
      k.stream = r.AnyString(*e, "stream", path, true).value_or("");
      k.group = r.AnyString(*e, "group", path, true).value_or("");
      out.push_back(std::move(k));
    }
    if (!r.ok()) return r.error();
    return out;
  });
}

std::string SerializeDeleted(const GroupKey& key) {
  return Serialize(json::object{{"stream", key.stream}, {"group", key.group}, {"deleted", true}});
}

std::string SerializeError(const Error& error) {
  return Serialize(json::object{{"error", ErrorCodeName(error.code)}, {"message", error.message}});
}

std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  // kUnknownResult is the last enumerator of ErrorCode (result.h).
  for (int i = 0; i <= static_cast<int>(ErrorCode::kUnknownResult); ++i) {
    auto code = static_cast<ErrorCode>(i);
    if (ErrorCodeName(code) == name) return code;
  }
  return std::nullopt;
}

Result<ErrorBody> ParseErrorBody(std::string_view body) {
  return Guarded<ErrorBody>(ErrorCode::kInternal, [&]() -> Result<ErrorBody> {
    auto doc = ParseDocument(body, ErrorCode::kInternal);
    if (!doc.ok()) return doc.error();
    Reader r(ErrorCode::kInternal);
    ErrorBody e;
    e.error = r.AnyString(doc->get_object(), "error", "", true).value_or("");
    e.message = r.AnyString(doc->get_object(), "message", "", false).value_or("");
    if (!r.ok()) return r.error();
    e.code = ErrorCodeFromName(e.error);
    return e;
  });
}

std::string SerializeGroupConfig(const GroupConfig& config) {
  return Serialize(ConfigObject(config));
}

}  // namespace rsc
