#pragma once
// CompatWatch: the start-up compatibility check (SPEC L4, redis/compat.h) run again while
// the coordinator serves, so that a Redis that changes under it — an ACL that loses EVAL,
// a failover to a node with a renamed command or an older version — is seen, counted and
// reported instead of surfacing only as failing requests.
//
// Why here and like this: the start-up check alone made rsc_redis_compat_failures_total
// unscrapeable (it was incremented just before exit 4; issue 13). /readyz is what load
// balancers and orchestrators already poll, so the re-check runs from it, at most once per
// interval (the check costs a few round trips and a probe script), and its verdict is
// cached in between. A Redis that cannot be reached is not "incompatible": that is the
// readiness probe's other half (one round trip), so an unreachable check keeps the last
// verdict.
//
// Thread safety: Current() may be called from any thread; checks are serialized (the
// check function and its connection are used by one thread at a time).

#include <functional>
#include <mutex>
#include <optional>

#include "core/clock.h"
#include "core/result.h"
#include "redis/compat.h"
#include "server/metrics.h"

namespace rsc {

class CompatWatch {
 public:
  using CheckFn = std::function<Result<redis::CompatReport>()>;

  CompatWatch(CheckFn check, Clock& clock, Metrics& metrics, TimeMs interval_ms);

  // The latest verdict, re-checking first when the last check is `interval_ms` old (or
  // there was none). An incompatible Redis is REDIS_UNAVAILABLE naming what is missing;
  // every failing check increments rsc_redis_compat_failures_total.
  Status Current();

 private:
  CheckFn check_;
  Clock& clock_;
  Metrics& metrics_;
  const TimeMs interval_ms_;
  std::mutex mu_;
  std::optional<TimeMs> checked_ms_;
  std::optional<Error> incompatible_;  // the verdict: nullopt = compatible (or unknown)
};

}  // namespace rsc
