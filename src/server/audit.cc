#include "server/audit.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

namespace rsc {
namespace {

std::string Or(const std::string& s) { return s.empty() ? "-" : s; }
std::string Or(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

}  // namespace

Auditor::Auditor(AuditSink& sink, Clock& clock, Metrics& metrics)
    : sink_(sink), clock_(clock), metrics_(metrics) {}

void Auditor::Record(AuditRecord r) {
  r.at = clock_.NowMs();
  const Status appended = sink_.Append(r);
  // One line in the same shape either way, so the log is a complete trail even while the
  // stream cannot be written.
  const std::string line = fmt::format(
      "actor={} action={} stream={} group={} revision_before={} revision_after={} member={} "
      "at={}",
      r.actor, r.action, Or(r.stream), Or(r.group), Or(r.revision_before), Or(r.revision_after),
      Or(r.member), r.at);
  if (appended.ok()) {
    spdlog::info("event=audit {} written=true", line);
    return;
  }
  metrics_.OnAuditWriteFailure();
  spdlog::warn("event=audit {} written=false message=\"{}\"", line, appended.error().message);
}

}  // namespace rsc
