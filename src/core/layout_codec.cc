#include "core/layout_codec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/json.hpp>
#include <vector>

#include "core/json_util.h"
#include "core/key_slot.h"
#include "core/shard_keys.h"

namespace rsc {

namespace bj = boost::json;

namespace {

constexpr ErrorCode kBad = ErrorCode::kMetadataUnreadable;
constexpr size_t kMaxToken = 256;
constexpr size_t kMaxKey = 512;

// A whole decimal integer, nothing else (no sign, spaces or trailing bytes).
bool ParseDecimal(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

Result<const bj::object*> AsObject(const bj::value& v, const std::string& path) {
  if (!v.is_object()) return MakeError(kBad, path + ": must be an object");
  return &v.get_object();
}

Result<Generation> GenerationFromJson(const bj::value& v, const std::string& path) {
  RSC_ASSIGN_OR_RETURN(const bj::object* o, AsObject(v, path));
  json::Reader r(*o, path, kBad);
  Generation g;
  RSC_ASSIGN_OR_RETURN(int64_t number, r.Int("generation", 0, INT32_MAX));
  g.generation = static_cast<int32_t>(number);
  RSC_ASSIGN_OR_RETURN(g.hash, r.Str("hash", 64));
  if (g.hash != "jump-xxh64") return r.Bad("hash", "must be \"jump-xxh64\"");
  RSC_ASSIGN_OR_RETURN(std::string state, r.Str("state", 16));
  std::optional<GenerationState> parsed = ParseGenerationState(state);
  if (!parsed) return r.Bad("state", fmt::format("unknown state '{}'", state));
  g.state = *parsed;
  // Absent from layouts written before retirement times were recorded.
  RSC_ASSIGN_OR_RETURN(g.retired_ms, r.IntOr("retiredAtMs", 0, kMaxCounter, 0));
  if (g.retired_ms != 0 && g.state != GenerationState::kRetired) {
    return r.Bad("retiredAtMs", "only a RETIRED generation has one");
  }
  // RS2's routing-lease wait: absent from layouts written before it existed, and once the
  // generation is ACTIVE.
  RSC_ASSIGN_OR_RETURN(g.prepared_ms, r.IntOr("preparedAtMs", 0, kMaxCounter, 0));
  RSC_ASSIGN_OR_RETURN(g.routing_wait_ms, r.IntOr("routingWaitMs", 0, kMaxRoutingWaitMs, 0));
  if ((g.prepared_ms != 0 || g.routing_wait_ms != 0) && g.state != GenerationState::kPreparing) {
    return r.Bad(g.prepared_ms != 0 ? "preparedAtMs" : "routingWaitMs",
                 "only a PREPARING generation has one");
  }
  if (g.routing_wait_ms != 0 && g.prepared_ms == 0) {
    return r.Bad("routingWaitMs", "comes with preparedAtMs");
  }
  RSC_ASSIGN_OR_RETURN(const bj::array* shards, r.Arr("shards"));
  RSC_ASSIGN_OR_RETURN(int64_t count, r.Int("shardCount", 1, kMaxShards));
  if (static_cast<size_t>(count) != shards->size()) {
    return r.Bad("shardCount", fmt::format("{} but shards lists {}", count, shards->size()));
  }
  for (size_t i = 0; i < shards->size(); ++i) {
    const std::string p = fmt::format("{}.shards[{}]", path, i);
    RSC_ASSIGN_OR_RETURN(const bj::object* so, AsObject((*shards)[i], p));
    json::Reader sr(*so, p, kBad);
    LayoutShard s;
    RSC_ASSIGN_OR_RETURN(int64_t id, sr.Int("id", 0, INT32_MAX));
    s.id = static_cast<int32_t>(id);
    RSC_ASSIGN_OR_RETURN(s.stream, sr.Str("stream", kMaxKey));
    g.shards.push_back(std::move(s));
  }
  return g;
}

}  // namespace

bj::value LayoutToJson(const Layout& l) {
  bj::array groups;
  for (const std::string& g : l.groups) groups.push_back(bj::string(g));
  bj::array generations;
  for (const Generation& g : l.generations) {
    bj::array shards;
    for (const LayoutShard& s : g.shards) {
      shards.push_back(bj::object{{"id", s.id}, {"stream", s.stream}});
    }
    bj::object o{{"generation", g.generation},
                 {"shardCount", g.shards.size()},
                 {"hash", g.hash},
                 {"state", GenerationStateName(g.state)},
                 {"shards", std::move(shards)}};
    if (g.retired_ms != 0) o["retiredAtMs"] = g.retired_ms;
    if (g.prepared_ms != 0) o["preparedAtMs"] = g.prepared_ms;
    if (g.routing_wait_ms != 0) o["routingWaitMs"] = g.routing_wait_ms;
    generations.push_back(std::move(o));
  }
  return bj::object{{"stream", l.stream},
                    {"version", l.version},
                    {"lineage", l.lineage},
                    {"routingLeaseMs", l.routing_lease_ms},
                    {"routingRefreshMs", l.routing_refresh_ms},
                    {"groups", std::move(groups)},
                    {"generations", std::move(generations)}};
}

std::string EncodeLayout(const Layout& l) { return bj::serialize(LayoutToJson(l)); }

Result<Layout> DecodeLayout(std::string_view text) {
  RSC_ASSIGN_OR_RETURN(bj::value root, json::Parse(text, kBad));
  RSC_ASSIGN_OR_RETURN(const bj::object* o, AsObject(root, "layout"));
  json::Reader r(*o, "", kBad);
  Layout l;
  RSC_ASSIGN_OR_RETURN(l.stream, r.Str("stream", 200));
  RSC_ASSIGN_OR_RETURN(l.version, r.Int("version", 1, kMaxCounter));
  RSC_ASSIGN_OR_RETURN(l.lineage, r.Str("lineage", kMaxToken));
  RSC_ASSIGN_OR_RETURN(l.routing_lease_ms, r.Int("routingLeaseMs", 1, INT64_MAX));
  RSC_ASSIGN_OR_RETURN(l.routing_refresh_ms, r.Int("routingRefreshMs", 1, INT64_MAX));
  RSC_ASSIGN_OR_RETURN(const bj::array* groups, r.Arr("groups"));
  for (size_t i = 0; i < groups->size(); ++i) {
    const bj::value& g = (*groups)[i];
    if (!g.is_string()) return MakeError(kBad, fmt::format("groups[{}]: must be a string", i));
    l.groups.emplace_back(g.get_string().data(), g.get_string().size());
  }
  RSC_ASSIGN_OR_RETURN(const bj::array* gens, r.Arr("generations"));
  for (size_t i = 0; i < gens->size(); ++i) {
    RSC_ASSIGN_OR_RETURN(Generation g,
                         GenerationFromJson((*gens)[i], fmt::format("generations[{}]", i)));
    l.generations.push_back(std::move(g));
  }
  RSC_RETURN_IF_ERROR(CheckLayoutInvariants(l));
  return l;
}

Result<StoredLayout> DecodeLayoutHash(const std::string& stream, const LayoutHashFields& f) {
  auto bad = [&](std::string_view what) {
    return MakeError(kBad, fmt::format("layout of stream '{}' is unreadable: {}", stream, what));
  };
  if (!f.schema_version || *f.schema_version != std::to_string(kLayoutSchemaVersion)) {
    return bad(fmt::format("schemaVersion {} is not supported (this coordinator reads {})",
                           f.schema_version.value_or("(absent)"), kLayoutSchemaVersion));
  }
  int64_t revision = 0;
  if (!f.revision || !ParseDecimal(*f.revision, &revision) || revision < 1) {
    return bad(
        fmt::format("revision '{}' is not a positive integer", f.revision.value_or("(absent)")));
  }
  if (!f.layout) return bad("the layout field is absent");
  Result<Layout> l = DecodeLayout(*f.layout);
  if (!l.ok()) return bad(l.error().message);
  if (l->stream != stream) return bad(fmt::format("it names stream '{}'", l->stream));
  return StoredLayout{StoreRevision(revision), std::move(*l)};
}

namespace {

constexpr size_t kMaxSlotPeriod = 64;  // masters; a cluster has far fewer
constexpr size_t kMaxHashName = 32;

}  // namespace

std::optional<std::string> EncodeSuccessor(const std::string& stream, const Generation& g) {
  if (g.shards.empty() || g.hash.empty() || g.hash.size() > kMaxHashName ||
      g.hash.find(' ') != std::string::npos) {
    return std::nullopt;
  }
  // Per position, the slot of its key (-1: an untagged key {P:id}, one server).
  std::vector<int> slots;
  for (size_t i = 0; i < g.shards.size(); ++i) {
    const LayoutShard& s = g.shards[i];
    if (s.id != g.shards.front().id + static_cast<int64_t>(i)) return std::nullopt;
    if (!IsShardKeyOf(stream, s.id, s.stream)) return std::nullopt;
    slots.push_back(s.stream == ShardStreamKey(stream, s.id) ? -1 : KeySlot(s.stream));
    if ((slots.back() < 0) != (slots.front() < 0)) return std::nullopt;  // mixed forms
  }
  const size_t limit = std::min(slots.size(), kMaxSlotPeriod);
  size_t period = 1;
  for (; period <= limit; ++period) {
    bool fits = true;
    for (size_t i = period; i < slots.size() && fits; ++i) fits = slots[i] == slots[i % period];
    if (fits) break;
  }
  if (period > limit) return std::nullopt;
  slots.resize(period);
  return fmt::format(
      "{} {} {} {} {}", g.generation, g.hash, g.shards.front().id, g.shards.size(),
      slots.front() < 0 ? std::string("-") : fmt::format("{}", fmt::join(slots, ",")));
}

Result<Generation> DecodeSuccessor(const std::string& stream, std::string_view text) {
  auto bad = [&](std::string_view why) {
    return MakeError(kBad, fmt::format("seal's rsc-next '{}' of stream '{}': {}",
                                       text.substr(0, 128), stream, why));
  };
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size() && parts.size() < 6) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (parts.size() != 5) return bad("expected '<generation> <hash> <first id> <count> <slots>'");
  int64_t generation = 0, first = 0, count = 0;
  if (!ParseDecimal(parts[0], &generation) || generation < 1 || generation > INT32_MAX) {
    return bad("generation must be an integer in 1..2147483647");
  }
  const std::string& hash = parts[1];
  if (hash.empty() || hash.size() > kMaxHashName) return bad("bad hash name");
  if (!ParseDecimal(parts[2], &first) || first > INT32_MAX) return bad("bad first id");
  if (!ParseDecimal(parts[3], &count) || count < 1 || count > kMaxShards) {
    return bad(fmt::format("shard count must be in 1..{}", kMaxShards));
  }
  if (first + count - 1 > INT32_MAX) return bad("ids past 2147483647");
  std::vector<int> slots;
  if (parts[4] != "-") {
    size_t from = 0;
    const std::string& t = parts[4];
    while (from <= t.size()) {
      size_t end = t.find(',', from);
      if (end == std::string::npos) end = t.size();
      int64_t slot = 0;
      if (!ParseDecimal(t.substr(from, end - from), &slot) || slot >= kClusterSlots) {
        return bad("slots are integers in 0..16383, comma-separated, or '-'");
      }
      slots.push_back(static_cast<int>(slot));
      if (slots.size() > kMaxSlotPeriod) return bad("more slots than masters");
      from = end + 1;
    }
  }
  Generation g;
  g.generation = static_cast<int32_t>(generation);
  g.hash = hash;
  g.state = GenerationState::kPreparing;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t id = static_cast<int32_t>(first + i);
    g.shards.push_back(
        {id, slots.empty()
                 ? ShardStreamKey(stream, id)
                 : ShardKeyInSlot(stream, id, slots[static_cast<size_t>(i) % slots.size()])});
  }
  return g;
}

}  // namespace rsc
