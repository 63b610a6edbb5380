#pragma once
// The audit trail of admin mutations (SPEC O4): one record per admin mutation the
// coordinator committed, appended to the capped Redis stream
// `redis-stream:coord:audit` (redis/redis_audit_sink.h) and logged as `event=audit`
// (server/audit.h). docs/redis-layout.md §6a documents the entries.
//
// Every entry has the seven fields of SPEC O4, in this order ("" where a value does not
// apply), plus `member` for a fence:
//   at              wall-clock ms since the Unix epoch when the coordinator recorded it
//   actor           the role whose token admitted the request ("admin"), or "anonymous"
//                   when no admin token is configured
//   action          the route name: create_group, patch_group, delete_group, fence_member,
//                   restore_group, patch_stream, reshard
//   stream, group   P and G; group is "" for patch_stream and reshard (the layout belongs
//                   to the stream)
//   revisionBefore  the group's storeRevision the mutation was checked against, or the
//                   layout revision for patch_stream and reshard; "" before a create (and a
//                   restore over no readable group)
//   revisionAfter   the revision the mutation produced; "" after a delete. Equal to
//                   revisionBefore when it wrote nothing (a patch to the current values, a
//                   fence of a fenced member)
//   member          fence_member only: the fenced member id
//
// Pure data and a port, header-only (the client library links the core and has no use for
// it); no I/O here.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/types.h"

namespace rsc {

struct AuditRecord {
  TimeMs at = 0;
  std::string actor;
  std::string action;
  std::string stream;
  std::string group;
  std::optional<int64_t> revision_before;
  std::optional<int64_t> revision_after;
  std::string member;  // fence_member only
};

// The entry's field/value pairs in the documented order.
inline std::vector<std::pair<std::string, std::string>> AuditFields(const AuditRecord& r) {
  auto revision = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string();
  };
  std::vector<std::pair<std::string, std::string>> f = {
      {"at", std::to_string(r.at)},
      {"actor", r.actor},
      {"action", r.action},
      {"stream", r.stream},
      {"group", r.group},
      {"revisionBefore", revision(r.revision_before)},
      {"revisionAfter", revision(r.revision_after)},
  };
  if (!r.member.empty()) f.emplace_back("member", r.member);
  return f;
}

// Where records are appended. Implementations may block (a Redis round trip) and must be
// safe for concurrent use.
class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual Status Append(const AuditRecord& record) = 0;
};

}  // namespace rsc
