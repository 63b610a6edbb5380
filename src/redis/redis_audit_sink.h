#pragma once
// AuditSink (core/audit.h) on Redis: one `XADD redis-stream:coord:audit MAXLEN ~ N * <fields>`
// per record, through the store's Executor (the key has no hash tag: on a cluster it lives
// in one slot, on whichever master serves it). The stream is capped approximately: Redis
// trims whole macro nodes, so it holds at least N entries and at most about 100 more.
//
// Thread safety: safe for concurrent use (the Executor is).

#include <cstdint>
#include <string_view>

#include "core/audit.h"
#include "redis/executor.h"

namespace rsc::redis {

inline constexpr std::string_view kAuditKey = "redis-stream:coord:audit";

class RedisAuditSink : public AuditSink {
 public:
  // Precondition: max_len >= 1.
  RedisAuditSink(Executor& executor, int64_t max_len);
  // Errors: REDIS_UNAVAILABLE (transport, or Redis refused: e.g. WRONGTYPE when the key is
  // not a stream, NOPERM from an ACL), UNKNOWN_RESULT (sent, no reply).
  Status Append(const AuditRecord& record) override;

 private:
  Executor& executor_;
  const int64_t max_len_;
};

}  // namespace rsc::redis
