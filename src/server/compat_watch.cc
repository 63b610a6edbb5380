#include "server/compat_watch.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace rsc {

CompatWatch::CompatWatch(CheckFn check, Clock& clock, Metrics& metrics, TimeMs interval_ms)
    : check_(std::move(check)), clock_(clock), metrics_(metrics), interval_ms_(interval_ms) {}

Status CompatWatch::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  const TimeMs now = clock_.NowMs();
  if (!checked_ms_ || now - *checked_ms_ >= interval_ms_) {
    checked_ms_ = now;
    Result<redis::CompatReport> report = check_();
    if (report.ok() && !report->ok()) {
      metrics_.OnRedisCompatFailure();
      const std::string what = redis::FormatCompatReport(*report);
      if (!incompatible_) spdlog::critical("event=redis_incompatible {}", what);
      incompatible_ = MakeError(ErrorCode::kRedisUnavailable, "Redis cannot be used: " + what);
    } else if (report.ok() && incompatible_) {
      spdlog::info("event=redis_compatible_again");
      incompatible_.reset();
    }
    // !report.ok(): unreachable, which the readiness round trip reports; the verdict stays.
  }
  if (incompatible_) return *incompatible_;
  return OkStatus();
}

}  // namespace rsc
