#pragma once
// Auditor: records each admin mutation the service committed (SPEC O4). The record
// (core/audit.h) is appended to the sink — the capped Redis stream
// `redis-stream:coord:audit` in production — and logged as one `event=audit` line.
//
// An append that fails does NOT fail the request: the mutation is committed already, and an
// error would make the client retry a change that happened (a create would then get
// GROUP_EXISTS, a delete GROUP_NOT_FOUND). Instead it is counted
// (rsc_audit_write_failures_total) and its `event=audit` line is written at warn level with
// `written=false` and the reason, so the log still holds the whole trail. Not audited:
// requests refused before anything was written, writes whose outcome is unknown
// (UNKNOWN_RESULT) and the coordinator's own ticks.
//
// Thread safety: Record may be called concurrently; `sink`, `clock` and `metrics` must be
// safe for concurrent use and outlive the Auditor.

#include "core/audit.h"
#include "core/clock.h"
#include "server/metrics.h"

namespace rsc {

class Auditor {
 public:
  Auditor(AuditSink& sink, Clock& clock, Metrics& metrics);

  // Stamps `at` with the clock, appends, logs. Never fails (see above).
  void Record(AuditRecord record);

 private:
  AuditSink& sink_;
  Clock& clock_;
  Metrics& metrics_;
};

}  // namespace rsc
