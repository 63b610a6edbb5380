#include "redis/compat.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "redis/cluster.h"
#include "redis/executor.h"
#include "redis/keys.h"
#include "redis/sha1.h"

namespace rsc::redis {
namespace {

// "key:value" lines of an INFO section.
std::map<std::string, std::string> ParseInfo(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (!line.empty() && line[0] != '#' && colon != std::string::npos) {
      out[line.substr(0, colon)] = line.substr(colon + 1);
    }
    pos = end + 1;
  }
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Why a probe failed, in words an operator can act on.
std::string Explain(const std::string& error) {
  if (error.find("NOPERM") != std::string::npos) return "denied by ACL: " + error;
  if (error.find("READONLY") != std::string::npos) {
    return "server is a read-only replica: " + error;
  }
  if (error.find("unknown command") != std::string::npos)
    return "unknown command (renamed or disabled)";
  return error;
}

void AddMissing(CompatReport* r, const std::string& name, const std::string& why) {
  for (const std::string& m : r->missing_required) {
    if (m.starts_with(name + " ") || m == name) return;  // one entry per command
  }
  r->missing_required.push_back(fmt::format("{} ({})", name, why));
}

bool VersionAtLeast(const std::string& version, int major, int minor) {
  int ma = 0;
  int mi = 0;
  const char* p = version.data();
  const char* end = p + version.size();
  auto r1 = std::from_chars(p, end, ma);
  if (r1.ec != std::errc()) return false;
  if (r1.ptr < end && *r1.ptr == '.') std::from_chars(r1.ptr + 1, end, mi);
  return ma > major || (ma == major && mi >= minor);
}

// A hash tag whose slot this cluster node serves (from CLUSTER NODES' "myself" line);
// empty if it serves none or the line cannot be read.
Result<std::string> ProbeTagForThisNode(Connection& conn) {
  auto nodes = conn.Run({"CLUSTER", "NODES"}, CommandKind::kRead);
  if (!nodes.ok()) return nodes.error();
  if (nodes->IsError()) return MakeError(ErrorCode::kInvalidRequest, nodes->str);
  if (!nodes->IsString()) return std::string();
  std::vector<std::pair<int, int>> ranges;
  size_t pos = 0;
  const std::string& text = nodes->str;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.find("myself") == std::string::npos) continue;
    // Fields: id addr flags master ping pong epoch link slot-range...
    std::vector<std::string> fields;
    size_t f = 0;
    while (f < line.size()) {
      size_t sp = line.find(' ', f);
      if (sp == std::string::npos) sp = line.size();
      if (sp > f) fields.push_back(line.substr(f, sp - f));
      f = sp + 1;
    }
    for (size_t i = 8; i < fields.size(); ++i) {
      if (fields[i].starts_with('[')) continue;  // migrating/importing marker
      int lo = 0;
      int hi = 0;
      const char* b = fields[i].data();
      const char* e = b + fields[i].size();
      auto r1 = std::from_chars(b, e, lo);
      if (r1.ec != std::errc()) continue;
      hi = lo;
      if (r1.ptr < e && *r1.ptr == '-') std::from_chars(r1.ptr + 1, e, hi);
      ranges.emplace_back(lo, hi);
    }
  }
  if (ranges.empty()) return std::string();
  for (int n = 0; n < 1'000'000; ++n) {
    std::string tag = "compat-probe-" + std::to_string(n);
    const int slot = KeySlot(tag);
    for (const auto& [lo, hi] : ranges) {
      if (slot >= lo && slot <= hi) return tag;
    }
  }
  return std::string();
}

}  // namespace

const std::vector<std::string>& RequiredCommands() {
  static const std::vector<std::string> kCommands = {
      // Coordinator metadata (scripts and the commands they call).
      "EVAL", "EVALSHA", "SCRIPT", "HGET", "HSET", "HMGET", "HSTRLEN", "EXISTS", "TYPE", "GET",
      "SET", "DEL", "ZADD", "ZREM", "ZCARD", "ZRANGE", "ZRANGEBYSCORE", "SADD", "SREM", "SMEMBERS",
      "SISMEMBER", "SCAN",
      // Clients: producing and consuming shard streams.
      "XADD", "XREADGROUP", "XACK", "XGROUP", "XPENDING", "XCLAIM",
      // Resharding (SPEC RS2, RS3, RS5): a replica's acknowledgement of a seal, completion
      // checks, retired keys' last entry and deletion.
      "WAIT", "XINFO", "XREVRANGE", "XTRIM"};
  return kCommands;
}

const std::vector<std::string>& OptionalCommands() {
  static const std::vector<std::string> kCommands = {"XAUTOCLAIM"};
  return kCommands;
}

Result<CompatReport> CheckCompatibility(Connection& conn) {
  CompatReport r;
  r.address = conn.options().Address();

  // INFO sections, one at a time: older servers reject several sections per call.
  std::map<std::string, std::string> info;
  for (const char* section : {"server", "persistence", "replication", "cluster", "memory"}) {
    auto reply = conn.Run({"INFO", section}, CommandKind::kRead);
    if (!reply.ok()) return reply.error();
    if (reply->IsError()) {
      r.warnings.push_back(fmt::format("INFO {} refused: {}", section, reply->str));
      continue;
    }
    auto parsed = ParseInfo(reply->str);
    info.insert(parsed.begin(), parsed.end());
  }
  r.server_version = info.count("redis_version") ? info["redis_version"] : "unknown";
  r.redis_mode = info.count("redis_mode") ? info["redis_mode"] : "unknown";
  r.role = info.count("role") ? info["role"] : "unknown";
  r.cluster_enabled = info["cluster_enabled"] == "1";
  r.maxmemory_policy = info["maxmemory_policy"];
  r.aof_enabled = info["aof_enabled"] == "1";

  if (r.server_version != "unknown" && !VersionAtLeast(r.server_version, 5, 0)) {
    r.missing_required.push_back(
        fmt::format("Redis >= 5.0 (streams), server is {}", r.server_version));
  }

  // Command table. A renamed or disabled command is absent (nil entry).
  Command info_cmd = {"COMMAND", "INFO"};
  for (const auto& c : RequiredCommands()) info_cmd.push_back(c);
  for (const auto& c : OptionalCommands()) info_cmd.push_back(c);
  auto table = conn.Run(info_cmd, CommandKind::kRead);
  if (!table.ok()) return table.error();
  if (table->IsError() || !table->IsArray() || table->elements.size() != info_cmd.size() - 2) {
    r.warnings.push_back(fmt::format("COMMAND INFO unavailable ({}); relying on probes only",
                                     table->IsError() ? table->str : "unexpected reply"));
  } else {
    const size_t required = RequiredCommands().size();
    for (size_t i = 0; i < table->elements.size(); ++i) {
      const Reply& e = table->elements[i];
      const bool present = e.IsArray() && !e.elements.empty();
      const std::string& name = info_cmd[i + 2];
      if (i < required) {
        if (!present) AddMissing(&r, name, "not in COMMAND INFO: renamed or disabled");
      } else if (name == "XAUTOCLAIM") {
        r.has_xautoclaim = present;
      }
    }
  }
  if (!r.has_xautoclaim) {
    r.fallbacks.push_back("XAUTOCLAIM missing: consumers use XPENDING+XCLAIM");
  }

  // Probe 1: EVAL with a script that writes, reads back and deletes a probe key in our
  // namespace. Catches ACL denials (on EVAL or on the commands inside) and replicas.
  std::string probe_tag = "compat-probe";
  if (r.cluster_enabled) {
    // The probe key must live on this node, or the node answers MOVED instead of running
    // the script: pick a tag that hashes into one of the slots it serves.
    auto tag = ProbeTagForThisNode(conn);
    if (!tag.ok() && tag.error().code == ErrorCode::kInvalidRequest) {
      // An error reply (an ACL without +cluster|nodes): say so, not "serves no slots".
      AddMissing(&r, "CLUSTER NODES", Explain(tag.error().message));
    } else if (!tag.ok()) {
      return tag.error();
    } else if (tag->empty()) {
      AddMissing(&r, "write access", "this cluster node serves no slots (a replica?)");
    } else {
      probe_tag = *tag;
    }
  }
  const std::string probe_key = std::string(kKeyPrefix) + "{" + probe_tag + "}:probe";
  const std::string write_probe =
      "redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000) "
      "local v = redis.call('GET', KEYS[1]) redis.call('DEL', KEYS[1]) return v";
  auto eval = conn.Run({"EVAL", write_probe, "1", probe_key, "rsc-probe"}, CommandKind::kWrite);
  if (!eval.ok()) return eval.error();
  if (eval->IsError()) {
    if (eval->str.find("READONLY") != std::string::npos) {
      AddMissing(&r, "write access", Explain(eval->str));
    } else {
      AddMissing(&r, "EVAL", Explain(eval->str));
    }
  } else if (!eval->IsString() || eval->str != "rsc-probe") {
    AddMissing(&r, "EVAL", "probe script returned " + eval->DebugString());
  }

  // Probe 2: SCRIPT LOAD + EVALSHA, the path every store operation takes (L5).
  const std::string sha_probe = "return 'rsc-evalsha-probe'";
  auto load = conn.Run({"SCRIPT", "LOAD", sha_probe}, CommandKind::kRead);
  if (!load.ok()) return load.error();
  if (load->IsError()) {
    AddMissing(&r, "SCRIPT", "SCRIPT LOAD failed: " + Explain(load->str));
  }
  auto evalsha = conn.Run({"EVALSHA", Sha1Hex(sha_probe), "0"}, CommandKind::kRead);
  if (!evalsha.ok()) return evalsha.error();
  if (evalsha->IsError()) {
    if (!evalsha->ErrorIs("NOSCRIPT") || !load->IsError())
      AddMissing(&r, "EVALSHA", Explain(evalsha->str));
  } else if (!evalsha->IsString() || evalsha->str != "rsc-evalsha-probe") {
    AddMissing(&r, "EVALSHA", "probe returned " + evalsha->DebugString());
  }

  // Persistence: RDB save points come from CONFIG (INFO does not show them).
  auto save = conn.Run({"CONFIG", "GET", "save"}, CommandKind::kRead);
  if (!save.ok()) return save.error();
  if (save->IsArray() && save->elements.size() == 2) {
    r.rdb_save_configured = !save->elements[1].str.empty();
  }

  if (r.eviction_warning()) {
    r.warnings.push_back(
        fmt::format("maxmemory-policy is {}, not noeviction: Redis may evict group metadata",
                    r.maxmemory_policy));
  }
  if (r.persistence_warning()) {
    r.warnings.push_back(
        r.rdb_save_configured.has_value()
            ? "no persistence (no RDB save points, appendonly no): a restart "
              "loses every group"
            : "persistence unknown (CONFIG GET save refused) and appendonly is off");
  }
  if (Lower(r.role) != "master" && r.role != "unknown") {
    r.warnings.push_back(fmt::format("server role is {}, not master", r.role));
  }
  return r;
}

std::string FormatCompatReport(const CompatReport& r) {
  std::string where =
      fmt::format("redis {} at {} ({}{}, {})", r.server_version, r.address, r.redis_mode,
                  r.cluster_enabled ? ", cluster enabled" : "", r.role);
  std::string out;
  if (r.ok()) {
    out = where + " is compatible";
  } else {
    out =
        fmt::format("{} is NOT compatible: missing {}", where, fmt::join(r.missing_required, ", "));
    bool scripting = false;
    for (const std::string& m : r.missing_required) {
      if (m.starts_with("EVAL") || m.starts_with("SCRIPT")) scripting = true;
    }
    if (scripting) out += " - Lua scripting (EVAL/EVALSHA) has no fallback";
  }
  if (!r.fallbacks.empty()) out += fmt::format("; fallbacks: {}", fmt::join(r.fallbacks, ", "));
  if (!r.warnings.empty()) out += fmt::format("; warnings: {}", fmt::join(r.warnings, "; "));
  return out;
}

Result<ConnectionOptions> CompatCheckTarget(const ConnectionOptions& options) {
  Result<Reply> info = MakeError(ErrorCode::kInternal, "not asked");
  Result<ConnectionOptions> reached = FirstReachable(options, &info);
  if (!reached.ok()) return reached.error();
  const bool cluster =
      info.ok() && info->IsString() && info->str.find("cluster_enabled:1") != std::string::npos;
  if (!cluster) return reached;
  auto executor = ClusterExecutor::Connect(*reached, 1, options.connect_timeout);
  if (!executor.ok()) return executor.error();
  Result<std::vector<std::string>> masters = (*executor)->Masters();
  if (!masters.ok()) return masters.error();
  if (masters->empty()) {
    return MakeError(
        ErrorCode::kRedisUnavailable,
        "redis cluster: the slot map names no master (via " + reached->Address() + ")");
  }
  ConnectionOptions master = reached->WithAddress(masters->front());
  master.seeds.clear();
  return master;
}

}  // namespace rsc::redis
