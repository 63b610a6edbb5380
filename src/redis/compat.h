#pragma once
// Start-up compatibility check of the Redis server (SPEC L4).
//
// What is checked, and why:
//   * version: streams need Redis >= 5.0 (XAUTOCLAIM needs 6.2; below that the documented
//     fallback XPENDING+XCLAIM is used and noted in `fallbacks`).
//   * the commands the coordinator and clients use, via COMMAND INFO: a command renamed
//     away or disabled is absent from the table.
//   * real probes, because COMMAND INFO cannot see ACL denials or a read-only replica:
//     EVAL of a script that writes and deletes a probe key, and SCRIPT LOAD + EVALSHA.
//     Lua scripting has no fallback: without it the coordinator must refuse to start.
//   * policy (warnings only, exported as metrics by the server): maxmemory-policy other
//     than noeviction (Redis may evict metadata), no persistence (neither RDB save points
//     nor AOF: a restart loses every group), and cluster mode (informational).
//
// Thread safety: functions are stateless; the Connection is used by the calling thread.

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "redis/connection.h"

namespace rsc::redis {

struct CompatReport {
  std::string address;
  std::string server_version;  // INFO server redis_version, e.g. "7.0.15"
  std::string redis_mode;      // standalone | cluster | sentinel
  std::string role;            // master | slave
  bool cluster_enabled = false;
  std::string maxmemory_policy;
  bool aof_enabled = false;
  std::optional<bool> rdb_save_configured;  // nullopt: CONFIG GET save was refused
  bool has_xautoclaim = false;

  // Each entry names one missing thing, e.g. "EVALSHA (unknown command)". Non-empty means
  // the coordinator must not start.
  std::vector<std::string> missing_required;
  // Documented fallbacks in use, e.g. "XAUTOCLAIM missing: using XPENDING+XCLAIM".
  std::vector<std::string> fallbacks;
  // Policy problems to log and export; they do not stop the coordinator.
  std::vector<std::string> warnings;

  bool ok() const { return missing_required.empty(); }
  bool eviction_warning() const {
    return !maxmemory_policy.empty() && maxmemory_policy != "noeviction";
  }
  bool persistence_warning() const { return !aof_enabled && rdb_save_configured != true; }
};

// Commands the system cannot work without, and the optional ones.
const std::vector<std::string>& RequiredCommands();
const std::vector<std::string>& OptionalCommands();

// Runs every check on `conn` (which it may reconnect). Errors: REDIS_UNAVAILABLE when the
// server cannot be reached or refuses AUTH; an incompatible but reachable server is a
// successful report with ok() == false.
Result<CompatReport> CheckCompatibility(Connection& conn);

// The node to run the check on: the URL's node (the first of a seed list that answers), or on
// a Redis Cluster one of its masters — the URL may name a replica, and a failover turns the
// master checked last into one. Errors: as OpenExecutor (REDIS_UNAVAILABLE when no node
// answers).
Result<ConnectionOptions> CompatCheckTarget(const ConnectionOptions& options);

// One line for the log and the exit message, naming exactly what is missing, e.g.
// "redis 7.0.15 at 127.0.0.1:6379 (standalone master) is NOT compatible: missing EVALSHA
//  (unknown command) — Lua scripting has no fallback; warnings: ..."
std::string FormatCompatReport(const CompatReport& report);

}  // namespace rsc::redis
