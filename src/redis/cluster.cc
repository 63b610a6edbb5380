#include "redis/cluster.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <set>
#include <thread>

#include "redis/log.h"

namespace rsc::redis {
namespace {

constexpr int kMaxRedirects = 8;

// Splits "host:port" at the last ':' (IPv6 hosts may come unbracketed from CLUSTER SLOTS).
bool SplitAddress(std::string_view address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view h = address.substr(0, colon);
  if (h.starts_with('[') && h.ends_with(']')) h = h.substr(1, h.size() - 2);
  std::string_view p = address.substr(colon + 1);
  // Redis 7 may append "@cport" in some outputs.
  if (size_t at = p.find('@'); at != std::string_view::npos) p = p.substr(0, at);
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), *port);
  if (ec != std::errc() || ptr != p.data() + p.size()) return false;
  *host = std::string(h);
  return true;
}

bool IsRedirect(const Result<Reply>& r) {
  return r.ok() && (r->ErrorIs("MOVED") || r->ErrorIs("ASK") || r->ErrorIs("TRYAGAIN"));
}

std::string JoinAddress(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace

ClusterExecutor::ClusterExecutor(ConnectionOptions seed, size_t pool_size,
                                 std::chrono::milliseconds checkout_wait)
    : seed_(std::move(seed)),
      pool_size_(pool_size),
      checkout_wait_(checkout_wait),
      slots_(kClusterSlots) {}

Result<std::unique_ptr<ClusterExecutor>> ClusterExecutor::Connect(
    const ConnectionOptions& seed, size_t pool_size, std::chrono::milliseconds checkout_wait) {
  std::unique_ptr<ClusterExecutor> ex(new ClusterExecutor(seed, pool_size, checkout_wait));
  Status loaded = ex->LoadSlotsFrom(seed.Address());
  for (size_t i = 0; !loaded.ok() && i < seed.seeds.size(); ++i) {
    loaded = ex->LoadSlotsFrom(seed.seeds[i]);
  }
  if (!loaded.ok()) return loaded.error();
  return ex;
}

std::string ClusterExecutor::NormalizeAddress(std::string_view address, std::string_view via,
                                              std::string_view seed_host) {
  std::string host;
  int port = 0;
  if (!SplitAddress(address, &host, &port)) return std::string(address);
  if (host.empty() || host == "?") {
    std::string via_host;
    int via_port = 0;
    host = SplitAddress(via, &via_host, &via_port) ? via_host : std::string(seed_host);
  }
  return JoinAddress(host, port);
}

ConnectionOptions ClusterExecutor::NodeOptions(const std::string& address) const {
  ConnectionOptions o = seed_;
  if (!SplitAddress(address, &o.host, &o.port)) {
    o.host = seed_.host;
    o.port = seed_.port;
  }
  o.db = 0;
  o.seeds.clear();
  return o;
}

std::optional<ClusterExecutor::Redirect> ClusterExecutor::ParseRedirect(
    const Reply& reply, const std::string& via) const {
  if (!reply.IsError()) return std::nullopt;
  return ParseRedirect(std::string_view(reply.str), via);
}

std::optional<ClusterExecutor::Redirect> ClusterExecutor::ParseRedirect(
    std::string_view text, const std::string& via) const {
  return ParseRedirect(text, via, seed_.host);
}

std::optional<ClusterExecutor::Redirect> ClusterExecutor::ParseRedirect(
    std::string_view text, std::string_view via, std::string_view seed_host) {
  // "MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381"
  const bool ask = text.starts_with("ASK ");
  if (!ask && !text.starts_with("MOVED ")) return std::nullopt;
  const size_t first_space = text.find(' ');
  const size_t last_space = text.rfind(' ');
  if (first_space == std::string_view::npos || last_space <= first_space) return std::nullopt;
  Redirect r;
  r.ask = ask;
  std::string_view slot = text.substr(first_space + 1, last_space - first_space - 1);
  auto [ptr, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), r.slot);
  if (ec != std::errc() || r.slot < 0 || r.slot >= kClusterSlots) return std::nullopt;
  r.target = NormalizeAddress(text.substr(last_space + 1), via, seed_host);
  return r;
}

void ClusterExecutor::NoteMoved(int slot, const std::string& target) {
  if (slot < 0 || slot >= kClusterSlots) return;
  moved_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  slots_[static_cast<size_t>(slot)] = target;
}

ConnectionPool* ClusterExecutor::PoolFor(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pools_.find(address);
  if (it != pools_.end()) return it->second.get();
  ConnectionOptions o = NodeOptions(address);
  auto pool = std::make_unique<ConnectionPool>(o, pool_size_, checkout_wait_);
  ConnectionPool* raw = pool.get();
  pools_.emplace(address, std::move(pool));
  return raw;
}

std::string ClusterExecutor::NodeForSlot(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& node = slots_[static_cast<size_t>(slot)];
  return node.empty() ? seed_.Address() : node;
}

Status ClusterExecutor::LoadSlotsFrom(const std::string& address) {
  ConnectionPool* pool = PoolFor(address);
  auto lease = pool->Checkout();
  if (!lease.ok()) return lease.error();
  auto reply = (*lease)->Run({"CLUSTER", "SLOTS"}, CommandKind::kRead);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("redis {}: CLUSTER SLOTS failed: {}", address, reply->str));
  }
  std::vector<std::string> slots(kClusterSlots);
  size_t covered = 0;
  for (const Reply& range : reply->elements) {
    if (!range.IsArray() || range.elements.size() < 3 || !range.elements[0].IsInteger() ||
        !range.elements[1].IsInteger() || !range.elements[2].IsArray() ||
        range.elements[2].elements.size() < 2) {
      return MakeError(
          ErrorCode::kRedisUnavailable,
          fmt::format("redis {}: malformed CLUSTER SLOTS entry {}", address, range.DebugString()));
    }
    const Reply& master = range.elements[2];
    std::string node =
        NormalizeAddress(fmt::format("{}:{}", master.elements[0].str, master.elements[1].integer),
                         address, seed_.host);
    for (int64_t s = range.elements[0].integer; s <= range.elements[1].integer && s < kClusterSlots;
         ++s) {
      if (s < 0) continue;
      slots[static_cast<size_t>(s)] = node;
      ++covered;
    }
  }
  if (covered < kClusterSlots) {
    Log(LogLevel::kWarn, fmt::format("redis cluster: only {} of {} slots are served (via {})",
                                     covered, kClusterSlots, address));
  }
  std::lock_guard<std::mutex> lock(mu_);
  slots_ = std::move(slots);
  return OkStatus();
}

Status ClusterExecutor::RefreshSlots() {
  std::vector<std::string> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> seen(slots_.begin(), slots_.end());
    seen.erase("");
    candidates.assign(seen.begin(), seen.end());
  }
  candidates.push_back(seed_.Address());
  candidates.insert(candidates.end(), seed_.seeds.begin(), seed_.seeds.end());
  Error last = MakeError(ErrorCode::kRedisUnavailable, "redis cluster: no node to ask for slots");
  for (const std::string& node : candidates) {
    Status s = LoadSlotsFrom(node);
    if (s.ok()) return s;
    last = s.error();
  }
  return last;
}

Result<Reply> ClusterExecutor::Run(std::string_view key, const Command& cmd, CommandKind kind) {
  return RunOne(key, cmd, kind, {});
}

std::vector<Result<Reply>> ClusterExecutor::RunBatch(const std::vector<KeyedCommand>& cmds,
                                                     CommandKind kind,
                                                     const BeforeWrite& before_write) {
  std::vector<Result<Reply>> out(cmds.size(), MakeError(ErrorCode::kInternal, "not run"));
  std::map<std::string, std::vector<size_t>> by_node;
  for (size_t i = 0; i < cmds.size(); ++i) {
    by_node[NodeForSlot(KeySlot(cmds[i].key))].push_back(i);
  }
  for (const auto& [node, indices] : by_node) {
    {
      // Returned before the follow-ups below, which may need this node's connection again.
      auto lease = PoolFor(node)->Checkout();
      if (!lease.ok()) {
        for (size_t i : indices) out[i] = lease.error();
      } else {
        std::vector<const Command*> batch;
        batch.reserve(indices.size());
        for (size_t i : indices) batch.push_back(&cmds[i].cmd);
        std::vector<Result<Reply>> replies = RunPipeline(**lease, batch, kind, before_write);
        for (size_t j = 0; j < indices.size(); ++j) out[indices[j]] = std::move(replies[j]);
      }
    }
    // A redirection means the command did not run, nor did one that failed before it was
    // sent (REDIS_UNAVAILABLE): both are sent again on their own, in input order, following
    // the cluster from there (a failover relearns the slot map once).
    for (size_t i : indices) {
      const bool unsent = !out[i].ok() && out[i].error().code == ErrorCode::kRedisUnavailable;
      if (IsRedirect(out[i]) || unsent) {
        out[i] = RunOne(cmds[i].key, cmds[i].cmd, kind, before_write);
      }
    }
  }
  return out;
}

Result<Reply> ClusterExecutor::RunOne(std::string_view key, const Command& cmd, CommandKind kind,
                                      const BeforeWrite& before_write) {
  const int slot = KeySlot(key);
  std::string node = NodeForSlot(slot);
  bool asking = false;
  bool refreshed_after_failure = false;
  for (int attempt = 0; attempt <= kMaxRedirects; ++attempt) {
    auto lease = PoolFor(node)->Checkout();
    if (!lease.ok()) return lease.error();
    Result<Reply> reply = MakeError(ErrorCode::kInternal, "not run");
    if (Status ready = (*lease)->Ready(); !ready.ok()) {
      reply = ready.error();
    } else if (before_write && !before_write()) {
      return MakeError(ErrorCode::kRedisUnavailable, "not sent: its deadline passed");
    } else if (asking) {
      auto replies = (*lease)->Pipeline({{"ASKING"}, cmd}, kind);
      if (replies.ok()) {
        reply = std::move(replies.value()[1]);
      } else {
        reply = replies.error();
      }
      asking = false;
    } else {
      reply = (*lease)->Run(cmd, kind);
    }
    if (!reply.ok()) {
      // Nothing was applied (REDIS_UNAVAILABLE): the node may have failed over; learn the
      // new map once and retry. UNKNOWN_RESULT goes back to the caller untouched.
      if (reply.error().code == ErrorCode::kRedisUnavailable && !refreshed_after_failure) {
        refreshed_after_failure = true;
        if (RefreshSlots().ok()) {
          node = NodeForSlot(slot);
          continue;
        }
      }
      return reply;
    }
    if (std::optional<Redirect> redirect = ParseRedirect(*reply, node)) {
      if (!redirect->ask) {
        NoteMoved(slot, redirect->target);
        // One slot moved usually means many did (resharding, failover): relearn the map.
        (void)RefreshSlots();
      } else {
        ask_.fetch_add(1, std::memory_order_relaxed);
        asking = true;
      }
      node = redirect->target;
      continue;
    }
    if (reply->ErrorIs("TRYAGAIN")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1)));
      continue;
    }
    return reply;
  }
  return MakeError(ErrorCode::kRedisUnavailable,
                   fmt::format("redis cluster: too many redirections for slot {}", slot));
}

Result<std::vector<std::string>> ClusterExecutor::Masters() {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> seen(slots_.begin(), slots_.end());
  seen.erase("");
  return std::vector<std::string>(seen.begin(), seen.end());
}

Result<std::vector<std::vector<int>>> ClusterExecutor::SlotsByMaster() {
  RSC_RETURN_IF_ERROR(RefreshSlots());
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::vector<int>> by_master;
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    const std::string& node = slots_[static_cast<size_t>(slot)];
    if (!node.empty()) by_master[node].push_back(slot);
  }
  std::vector<std::vector<int>> out;
  for (auto& [node, slots] : by_master) out.push_back(std::move(slots));
  return out;
}

Result<Reply> ClusterExecutor::RunOn(const std::string& node, const Command& cmd,
                                     CommandKind kind) {
  auto lease = PoolFor(node)->Checkout();
  if (!lease.ok()) return lease.error();
  return (*lease)->Run(cmd, kind);
}

std::string ClusterExecutor::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> seen(slots_.begin(), slots_.end());
  seen.erase("");
  std::string nodes;
  for (const auto& n : seen) nodes += (nodes.empty() ? "" : ",") + n;
  return fmt::format("redis cluster, {} masters: {}", seen.size(), nodes);
}

Result<ConnectionOptions> FirstReachable(const ConnectionOptions& options, Result<Reply>* info) {
  std::vector<std::string> nodes = {options.Address()};
  nodes.insert(nodes.end(), options.seeds.begin(), options.seeds.end());
  std::string failures;
  for (const std::string& node : nodes) {
    // Asked on database 0: a cluster refuses SELECT, which would hide the real reason.
    ConnectionOptions db0 = options.WithAddress(node);
    db0.db = 0;
    Connection probe(db0);
    Result<Reply> reply = probe.Run({"INFO", "cluster"}, CommandKind::kRead);
    if (reply.ok()) {
      if (info != nullptr) *info = std::move(reply);
      return options.WithAddress(node);
    }
    if (nodes.size() == 1) return reply.error();
    failures += fmt::format("{}{}: {}", failures.empty() ? "" : "; ", node, reply.error().message);
  }
  return MakeError(ErrorCode::kRedisUnavailable,
                   fmt::format("none of the {} Redis nodes answered ({})", nodes.size(), failures));
}

Result<std::unique_ptr<Executor>> OpenExecutor(const ConnectionOptions& given, ClusterMode mode,
                                               size_t pool_size,
                                               std::chrono::milliseconds checkout_wait) {
  ConnectionOptions options = given;
  if (mode == ClusterMode::kAuto || !given.seeds.empty()) {
    Result<Reply> info = MakeError(ErrorCode::kInternal, "not asked");
    Result<ConnectionOptions> reached = FirstReachable(given, &info);
    if (!reached.ok()) return reached.error();
    options = std::move(reached).value();
    if (mode == ClusterMode::kAuto) {
      // A server that refuses INFO (renamed by a managed service) is treated as single.
      mode = info->IsString() && info->str.find("cluster_enabled:1") != std::string::npos
                 ? ClusterMode::kCluster
                 : ClusterMode::kSingle;
    }
  }
  if (mode == ClusterMode::kSingle) {
    options.seeds.clear();  // one server: the node that answered
    return std::unique_ptr<Executor>(
        std::make_unique<SingleNodeExecutor>(options, pool_size, checkout_wait));
  }
  if (options.db != 0) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("Redis Cluster has only database 0, but the URL for {} selects {}",
                                 options.Address(), options.db));
  }
  auto cluster = ClusterExecutor::Connect(options, pool_size, checkout_wait);
  if (!cluster.ok()) return cluster.error();
  return std::unique_ptr<Executor>(std::move(cluster).value());
}

}  // namespace rsc::redis
