#include "redis/redis_audit_sink.h"

#include <fmt/format.h>

#include <string>

#include "core/check.h"

namespace rsc::redis {

RedisAuditSink::RedisAuditSink(Executor& executor, int64_t max_len)
    : executor_(executor), max_len_(max_len) {
  RSC_CHECK(max_len_ >= 1);
}

Status RedisAuditSink::Append(const AuditRecord& record) {
  const std::string key(kAuditKey);
  Command cmd = {"XADD", key, "MAXLEN", "~", std::to_string(max_len_), "*"};
  for (auto& [field, value] : AuditFields(record)) {
    cmd.push_back(std::move(field));
    cmd.push_back(std::move(value));
  }
  RSC_ASSIGN_OR_RETURN(Reply reply, executor_.Run(key, cmd, CommandKind::kWrite));
  if (reply.IsError()) {
    return MakeError(ErrorCode::kRedisUnavailable,
                     fmt::format("XADD {}: {}", kAuditKey, reply.str));
  }
  return OkStatus();
}

}  // namespace rsc::redis
