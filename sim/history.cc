#include "sim/history.h"

#include <fmt/format.h>

#include <array>
#include <boost/json.hpp>
#include <charconv>
#include <limits>
#include <utility>

namespace rsc::sim {

namespace {

constexpr std::array<std::pair<HistKind, std::string_view>, 20> kKindNames = {{
    {HistKind::kAcquire, "acquire"},
    {HistKind::kLease, "lease"},
    {HistKind::kRead, "read"},
    {HistKind::kDeliver, "deliver"},
    {HistKind::kAck, "ack"},
    {HistKind::kRelease, "release"},
    {HistKind::kHeartbeat, "heartbeat"},
    {HistKind::kPublish, "publish"},
    {HistKind::kPublishRefused, "publish_refused"},
    {HistKind::kRouting, "routing"},
    {HistKind::kCommit, "commit"},
    {HistKind::kDecision, "decision"},
    {HistKind::kMutexEnter, "mutex_enter"},
    {HistKind::kMutexExit, "mutex_exit"},
    {HistKind::kStart, "start"},
    {HistKind::kStop, "stop"},
    {HistKind::kCrash, "crash"},
    {HistKind::kFault, "fault"},
    {HistKind::kLost, "lost"},
    {HistKind::kTaint, "taint"},
}};

// One table drives both directions, so a field added to HistEvent is added here once.
struct IntField {
  std::string_view name;
  int64_t HistEvent::*member;
  int64_t dflt;
};
constexpr std::array<IntField, 14> kIntFields = {{
    {"seq", &HistEvent::seq, -1},
    {"attempt", &HistEvent::attempt, 0},
    {"epoch", &HistEvent::epoch, -1},
    {"version", &HistEvent::version, -1},
    {"req_version", &HistEvent::req_version, -1},
    {"stored_version", &HistEvent::stored_version, -1},
    {"revision", &HistEvent::revision, -1},
    {"lease_end_us", &HistEvent::lease_end_us, -1},
    {"sent_us", &HistEvent::sent_us, -1},
    {"grant_ms", &HistEvent::grant_ms, -1},
    {"req_epoch", &HistEvent::req_epoch, -1},
    {"in_round", &HistEvent::in_round, -1},
    {"round_age_ms", &HistEvent::round_age_ms, -1},
    {"t_us", &HistEvent::t_us, 0},
}};
struct StrField {
  std::string_view name;
  std::string HistEvent::*member;
};
constexpr std::array<StrField, 17> kStrFields = {{
    {"proc", &HistEvent::proc},
    {"member", &HistEvent::member},
    {"stream", &HistEvent::stream},
    {"id", &HistEvent::id},
    {"key", &HistEvent::key},
    {"lineage", &HistEvent::lineage},
    {"req_lineage", &HistEvent::req_lineage},
    {"status", &HistEvent::status},
    {"detail", &HistEvent::detail},
    {"req_digest", &HistEvent::req_digest},
    {"absent", &HistEvent::absent},
    {"resp_digest", &HistEvent::resp_digest},
    {"claimed", &HistEvent::claimed},
    {"assigned", &HistEvent::assigned},
    {"revoked", &HistEvent::revoked},
    {"owned", &HistEvent::owned},
    {"blocked", &HistEvent::blocked},
}};

std::optional<int64_t> AsInt64(const boost::json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(v.get_uint64());
  }
  return std::nullopt;
}

// Decodes one line; an error names the offending field (the caller adds the line number).
std::optional<std::string> DecodeLine(std::string_view line, HistEvent& out) {
  boost::json::parse_options opts;
  // Strings are copied byte for byte by the writer; a log whose ids carry odd bytes is still
  // a log (the checkers only compare strings).
  opts.allow_invalid_utf8 = true;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(line, ec, {}, opts);
  if (ec) return fmt::format("malformed JSON: {}", ec.message());
  if (!v.is_object()) return std::string("not a JSON object");
  const boost::json::object& obj = v.get_object();

  const boost::json::value* kind = obj.if_contains("kind");
  if (!kind) return std::string("field 'kind' is missing");
  if (!kind->is_string()) return std::string("field 'kind' must be a string");
  const auto k = ParseHistKind(std::string_view(kind->get_string()));
  if (!k) {
    return fmt::format("unknown kind '{}'", std::string_view(kind->get_string()));
  }
  out.kind = *k;
  for (const IntField& f : kIntFields) {
    const boost::json::value* x = obj.if_contains(f.name);
    if (!x || x->is_null()) continue;
    const auto n = AsInt64(*x);
    if (!n) return fmt::format("field '{}' must be a 64-bit integer", f.name);
    out.*f.member = *n;
  }
  if (const boost::json::value* x = obj.if_contains("shard"); x && !x->is_null()) {
    const auto n = AsInt64(*x);
    if (!n || *n < std::numeric_limits<int32_t>::min() ||
        *n > std::numeric_limits<int32_t>::max()) {
      return std::string("field 'shard' must be a 32-bit integer");
    }
    out.shard = static_cast<int32_t>(*n);
  }
  for (const StrField& f : kStrFields) {
    const boost::json::value* x = obj.if_contains(f.name);
    if (!x || x->is_null()) continue;
    if (!x->is_string()) return fmt::format("field '{}' must be a string", f.name);
    out.*f.member = std::string(x->get_string());
  }
  return std::nullopt;
}

}  // namespace

std::string_view HistKindName(HistKind k) {
  for (const auto& [kind, name] : kKindNames) {
    if (kind == k) return name;
  }
  return "unknown";
}

std::optional<HistKind> ParseHistKind(std::string_view name) {
  for (const auto& [kind, n] : kKindNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

std::string ShardList(const std::vector<int32_t>& shards) {
  std::string out = "[";
  for (size_t i = 0; i < shards.size(); ++i) out += (i ? "," : "") + std::to_string(shards[i]);
  return out + "]";
}

std::optional<std::vector<int32_t>> ParseShardList(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<int32_t> out;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    int32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size()) return std::nullopt;
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

std::string ToJsonLine(const HistEvent& e) {
  boost::json::object obj;
  // Time and kind lead every line (a log read by a person starts there); t_us is written
  // even at 0. Every other field is omitted at its default.
  obj["t_us"] = e.t_us;
  obj["kind"] = HistKindName(e.kind);
  if (!e.proc.empty()) obj["proc"] = e.proc;
  if (!e.member.empty()) obj["member"] = e.member;
  if (e.shard != -1) obj["shard"] = e.shard;
  for (const StrField& f : kStrFields) {
    const std::string& s = e.*f.member;
    if (f.name == "proc" || f.name == "member" || s.empty()) continue;
    obj[f.name] = s;
  }
  for (const IntField& f : kIntFields) {
    const int64_t n = e.*f.member;
    if (f.name == "t_us" || n == f.dflt) continue;
    obj[f.name] = n;
  }
  return boost::json::serialize(obj);
}

ParseOutcome ParseJsonLines(std::string_view text) {
  ParseOutcome out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    const size_t nl = text.find('\n', pos);
    const bool terminated = nl != std::string_view::npos;
    std::string_view line = text.substr(pos, terminated ? nl - pos : std::string_view::npos);
    pos = terminated ? nl + 1 : text.size();
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty()) continue;
    HistEvent e;
    if (auto err = DecodeLine(line, e)) {
      // A writer killed by SIGKILL leaves its last line cut short: the history before it is
      // still good, so the line is reported and skipped like any other bad line.
      out.errors.push_back(terminated
                               ? fmt::format("line {}: {}", line_no, *err)
                               : fmt::format("line {}: truncated last line: {}", line_no, *err));
      continue;
    }
    out.events.push_back(std::move(e));
  }
  return out;
}

}  // namespace rsc::sim
