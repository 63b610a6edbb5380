#include "redis/executor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "redis/sha1.h"

namespace rsc::redis {

SingleNodeExecutor::SingleNodeExecutor(ConnectionOptions options, size_t pool_size,
                                       std::chrono::milliseconds checkout_wait)
    : pool_(std::move(options), pool_size, checkout_wait) {}

Result<Reply> SingleNodeExecutor::Run(std::string_view /*key*/, const Command& cmd,
                                      CommandKind kind) {
  auto lease = pool_.Checkout();
  if (!lease.ok()) return lease.error();
  return (*lease)->Run(cmd, kind);
}

Result<std::vector<std::string>> SingleNodeExecutor::Masters() {
  return std::vector<std::string>{pool_.options().Address()};
}

Result<Reply> SingleNodeExecutor::RunOn(const std::string& node, const Command& cmd,
                                        CommandKind kind) {
  if (node != pool_.options().Address()) {
    return MakeError(ErrorCode::kInternal, fmt::format("unknown redis node '{}'", node));
  }
  return Run("", cmd, kind);
}

std::string SingleNodeExecutor::Describe() const {
  return fmt::format("single redis {} db {}", pool_.options().Address(), pool_.options().db);
}

LuaScript::LuaScript(std::string_view name, std::string_view body)
    : name_(name), body_(body), sha_(Sha1Hex(body)) {}

Result<Reply> LuaScript::Eval(Executor& executor, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args, CommandKind kind,
                              std::atomic<int64_t>* reloads) const {
  Command cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.push_back("EVALSHA");
  cmd.push_back(sha_);
  cmd.push_back(std::to_string(keys.size()));
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  cmd.insert(cmd.end(), args.begin(), args.end());
  const std::string_view route = keys.empty() ? std::string_view() : std::string_view(keys[0]);

  auto reply = executor.Run(route, cmd, kind);
  if (!reply.ok() || !reply->ErrorIs("NOSCRIPT")) return reply;

  // NOSCRIPT means the script did not run, so retrying is safe even for writes. The retry
  // is EVAL with the body: it loads the script into this node's cache and runs it in one
  // step, and being an ordinary keyed command it follows MOVED/ASK like the first attempt
  // (a separate SCRIPT LOAD has no key, so in a cluster it could reach the wrong node).
  if (reloads != nullptr) reloads->fetch_add(1, std::memory_order_relaxed);
  spdlog::info(
      "redis: script '{}' missing from the script cache (restart, failover or "
      "SCRIPT FLUSH); loading it again",
      name_);
  cmd[0] = "EVAL";
  cmd[1] = body_;
  return executor.Run(route, cmd, kind);
}

}  // namespace rsc::redis
