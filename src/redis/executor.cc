#include "redis/executor.h"

#include <fmt/format.h>

#include <cstdlib>

#include "redis/log.h"
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

std::vector<Result<Reply>> RunPipeline(Connection& conn, const std::vector<const Command*>& cmds,
                                       CommandKind kind, const BeforeWrite& before_write) {
  std::vector<Result<Reply>> out;
  out.reserve(cmds.size());
  auto fail_all = [&](const Error& e) {
    while (out.size() < cmds.size()) out.emplace_back(e);
  };
  if (Status ready = conn.Ready(); !ready.ok()) {
    fail_all(ready.error());
    return out;
  }
  if (before_write && !before_write()) {
    fail_all(MakeError(ErrorCode::kRedisUnavailable, "not sent: its deadline passed"));
    return out;
  }
  if (Status sent = conn.Send(cmds, kind); !sent.ok()) {
    fail_all(sent.error());
    return out;
  }
  for (size_t i = 0; i < cmds.size(); ++i) {
    Result<Reply> r = conn.Receive();
    if (!r.ok()) {
      // This reply and every later one of the pipeline are lost with the connection.
      fail_all(r.error());
      break;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Result<Reply>> SingleNodeExecutor::RunBatch(const std::vector<KeyedCommand>& cmds,
                                                        CommandKind kind,
                                                        const BeforeWrite& before_write) {
  if (cmds.empty()) return {};
  auto lease = pool_.Checkout();
  if (!lease.ok()) return std::vector<Result<Reply>>(cmds.size(), lease.error());
  std::vector<const Command*> batch;
  batch.reserve(cmds.size());
  for (const KeyedCommand& c : cmds) batch.push_back(&c.cmd);
  return RunPipeline(**lease, batch, kind, before_write);
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

Result<int64_t> ConnectedReplicas(Executor& executor, std::string_view key) {
  RSC_ASSIGN_OR_RETURN(Reply r, executor.Run(key, {"INFO", "replication"}, CommandKind::kRead));
  if (r.IsError()) return int64_t{0};
  constexpr std::string_view kField = "connected_slaves:";
  const size_t at = r.str.find(kField);
  if (at == std::string::npos) return int64_t{0};
  return std::strtoll(r.str.c_str() + at + kField.size(), nullptr, 10);
}

Result<AcknowledgedReply> RunAcknowledged(Executor& executor, const std::string& key,
                                          const Command& write, std::chrono::milliseconds wait) {
  AcknowledgedReply out;
  RSC_ASSIGN_OR_RETURN(out.replicas, ConnectedReplicas(executor, key));
  if (out.replicas == 0) {
    RSC_ASSIGN_OR_RETURN(out.reply, executor.Run(key, write, CommandKind::kWrite));
    return out;
  }
  std::vector<Result<Reply>> replies = executor.RunBatch(
      {{key, write}, {key, {"WAIT", "1", std::to_string(wait.count())}}}, CommandKind::kWrite);
  RSC_ASSIGN_OR_RETURN(out.reply, std::move(replies[0]));
  if (out.reply.IsError()) return out;
  RSC_ASSIGN_OR_RETURN(Reply acked, std::move(replies[1]));
  if (acked.IsError()) {
    return MakeError(ErrorCode::kRedisUnavailable,
                     fmt::format("WAIT after a write on {}: {}", key, acked.str));
  }
  out.acknowledged = acked.integer >= 1;
  return out;
}

Command LuaScript::EvalCommand(const std::vector<std::string>& keys,
                               const std::vector<std::string>& args) const {
  Command cmd = {"EVAL", body_, std::to_string(keys.size())};
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

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
  Log(LogLevel::kInfo, fmt::format("redis: script '{}' missing from the script cache "
                                   "(restart, failover or SCRIPT FLUSH); loading it again",
                                   name_));
  cmd[0] = "EVAL";
  cmd[1] = body_;
  return executor.Run(route, cmd, kind);
}

}  // namespace rsc::redis
