#include "client/reader_redis.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <utility>

#include "redis/cluster.h"
#include "redis/executor.h"

namespace rsc::client {
namespace {

using std::chrono::milliseconds;

// A failed open (mode detection) is tried again no sooner than this, doubling up to the max:
// the cores retry after their own backoff, and an unreachable URL should not cost a connect
// per command.
constexpr milliseconds kOpenBackoffMin{100};
constexpr milliseconds kOpenBackoffMax{2000};
// Slot-map re-reads after a node failure or MOVED: at most one per this interval.
constexpr milliseconds kRefreshInterval{100};
// After a node failed, the map is re-read every kWatchInterval until it no longer names that
// node as a master (its replica was promoted) or kWatchFor passed: the readers of its shards
// are in their backoff then, and their next try should find the promoted master, not fail
// once more on the dead one and back off again.
constexpr milliseconds kWatchInterval{200};
constexpr std::chrono::seconds kWatchFor{30};

ReaderReply Nil() {
  ReaderReply r;
  r.kind = ReaderReply::Kind::kNil;
  return r;
}

}  // namespace

ReaderRedis::ReaderRedis(redis::ConnectionOptions redis, Done done)
    : options_(std::move(redis)), done_(std::move(done)) {}

ReaderRedis::~ReaderRedis() { Stop(); }

void ReaderRedis::Start() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  pthread_setname_np(thread_.native_handle(), "rsc-redis-route");
}

void ReaderRedis::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  halted_ = true;
  cv_.notify_all();
  {
    std::lock_guard<std::mutex> join_lock(join_mu_);
    if (thread_.joinable()) thread_.join();
  }
  // No node is added once stopping_ is set; the nodes are stopped outside mu_, since their
  // threads may be waiting for it in a hook.
  std::vector<ReaderNode*> nodes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [address, node] : nodes_) nodes.push_back(node.get());
  }
  // All halted before any is joined: nodes whose threads wait out a connect (an outage is
  // when a consumer is often stopped) end side by side, not one connect timeout per node.
  for (ReaderNode* node : nodes) node->Halt();
  for (ReaderNode* node : nodes) node->Stop();
}

void ReaderRedis::Submit(uint64_t token, const ReaderCoreConfig& config,
                         const ReaderCommand& command) {
  Item item;
  if (command.kind == ReaderCommandKind::kReadLive) {
    item = MakeNodeRead(token, config, command, redis::KeySlot(config.stream), Clock::now());
  } else {
    item = MakeNodeCommand(token, config, command);  // command.entry is valid only now
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  if (mode_ == Mode::kUnknown) {
    held_.push_back(std::move(item));
    cv_.notify_one();
    return;
  }
  DispatchLocked(std::move(item));
}

void ReaderRedis::Cancel(uint64_t token, bool now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    const NodeRead* read = std::get_if<NodeRead>(&*it);
    if (read == nullptr || read->token != token) continue;
    // Answered by the port's thread: the caller must not get `done` synchronously. An XACK
    // it carried was not sent (held reads carry none: only a known single server takes them).
    answers_.push_back({token, read->ack_args.empty()
                                   ? Nil()
                                   : ReaderReply::Error(ReaderReply::Kind::kTransport,
                                                        "cancelled before it was sent")});
    held_.erase(it);
    cv_.notify_one();
    return;
  }
  // A few nodes at most; the one holding the read answers, the others find nothing.
  for (auto& [address, node] : nodes_) node->Cancel(token, now);
}

ReaderRedisStats ReaderRedis::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReaderRedisStats s = retired_stats_;
  s.retired_nodes = s.nodes;
  s.nodes = 0;
  s.threads = started_ && !stopping_ ? 1 : 0;
  for (const auto& [address, node] : nodes_) {
    const ReaderRedisStats n = node->Stats();
    s.commands += n.commands;
    s.live_reads += n.live_reads;
    s.live_read_streams += n.live_read_streams;
    s.polls += n.polls;
    s.unblocks += n.unblocks;
    s.redirects += n.redirects;
    s.connections += n.connections;
    s.threads += n.threads;
    s.nodes += n.nodes;
  }
  return s;
}

void ReaderRedis::Run() {
  for (;;) {
    std::vector<ReaderAnswer> answers;
    bool open = false;
    bool refresh = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] {
        return stopping_ || !answers_.empty() || refresh_requested_ ||
               (mode_ == Mode::kUnknown && !held_.empty());
      };
      if (watched_.empty() && !retire_pending_) {
        cv_.wait(lock, ready);
      } else if (!cv_.wait_until(lock, next_watch_, ready)) {
        refresh_requested_ = true;  // a watched node's time to be looked up again
      }
      if (stopping_) return;
      answers.swap(answers_);
      open = mode_ == Mode::kUnknown && !held_.empty();
      refresh = refresh_requested_;
      refresh_requested_ = false;
    }
    Deliver(answers);
    if (open) {
      std::string error;
      const bool opened = Open(&error);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      if (opened) {
        DispatchHeldLocked();
      } else {
        for (const Item& item : held_) {
          const uint64_t token = std::visit([](const auto& i) { return i.token; }, item);
          answers_.push_back({token, ReaderReply::Error(ReaderReply::Kind::kTransport, error)});
        }
        held_.clear();
      }
    }
    if (refresh && cluster_ != nullptr) {
      // A node failed (failover?) or a slot moved: re-read the map, at most once per interval.
      (void)cluster_->RefreshSlots();
      Result<std::vector<std::string>> masters = cluster_->Masters();
      std::vector<std::unique_ptr<ReaderNode>> retired;
      std::unique_lock<std::mutex> lock(mu_);
      const Clock::time_point now = Clock::now();
      retire_pending_ = false;
      if (masters.ok()) {
        // A node the map no longer names a master (failed over, or gone) is stopped once
        // idle: nothing is routed to it any more (dispatch takes mu_), so it would only keep
        // two idle threads. Its counters are kept. Only after two looks in a row: the map
        // read before mu_ was taken may predate a MOVED that just made a node a master.
        for (auto it = nodes_.begin(); it != nodes_.end();) {
          const bool master =
              std::find(masters->begin(), masters->end(), it->first) != masters->end();
          int& looks = not_master_looks_[it->first];
          looks = master ? 0 : looks + 1;
          if (master || looks < 2 || !it->second->Idle()) {
            retire_pending_ = retire_pending_ || !master;  // look again soon
            ++it;
            continue;
          }
          not_master_looks_.erase(it->first);
          const ReaderRedisStats n = it->second->Stats();
          retired_stats_.commands += n.commands;
          retired_stats_.live_reads += n.live_reads;
          retired_stats_.live_read_streams += n.live_read_streams;
          retired_stats_.polls += n.polls;
          retired_stats_.unblocks += n.unblocks;
          retired_stats_.redirects += n.redirects;
          ++retired_stats_.nodes;  // counted as retired, not as in use
          retired.push_back(std::move(it->second));
          it = nodes_.erase(it);
        }
      }
      for (auto it = watched_.begin(); it != watched_.end();) {
        const bool still_master = masters.ok() && std::find(masters->begin(), masters->end(),
                                                            it->first) != masters->end();
        it = still_master && now < it->second ? std::next(it) : watched_.erase(it);
      }
      next_watch_ = now + kWatchInterval;
      lock.unlock();
      for (auto& node : retired) node->Stop();  // outside mu_: its hooks may wait for it
      retired.clear();
      lock.lock();
      cv_.wait_for(lock, kRefreshInterval, [&] { return stopping_; });
      if (stopping_) return;
    }
  }
}

bool ReaderRedis::Open(std::string* error) {
  const Clock::time_point now = Clock::now();
  if (now < next_open_) {
    *error = open_error_;
    return false;
  }
  Result<std::unique_ptr<redis::Executor>> opened =
      redis::OpenExecutor(options_, redis::ClusterMode::kAuto, 1, options_.connect_timeout);
  if (!opened.ok()) {
    open_error_ = opened.error().message;
    open_backoff_ = std::clamp(open_backoff_ * 2, kOpenBackoffMin, kOpenBackoffMax);
    next_open_ = Clock::now() + open_backoff_;
    *error = open_error_;
    return false;
  }
  std::unique_ptr<redis::Executor> executor = std::move(opened).value();
  auto* cluster = dynamic_cast<redis::ClusterExecutor*>(executor.get());
  redis::ConnectionOptions single = options_;
  if (auto* one = dynamic_cast<redis::SingleNodeExecutor*>(executor.get())) {
    // One server, perhaps named in a list: the node is the one that answered when the
    // executor was opened, not the first named (and not a second probe's answer: a probe
    // that failed would have pinned the first named node for the port's life).
    single = one->options();
  }
  std::lock_guard<std::mutex> lock(mu_);
  single_options_ = std::move(single);
  if (cluster != nullptr) {
    // Kept for its slot map (and the connection it re-reads the map on).
    executor_ = std::move(executor);
    cluster_ = cluster;
    mode_ = Mode::kCluster;
  } else {
    mode_ = Mode::kSingle;  // the executor's pool is not needed: the node has its own
    single_.store(true, std::memory_order_release);
  }
  return true;
}

ReaderNode& ReaderRedis::NodeLocked(const std::string& address) {
  auto it = nodes_.find(address);
  if (it != nodes_.end()) return *it->second;
  const bool cluster = mode_ == Mode::kCluster;
  ReaderNode::Hooks hooks;
  hooks.answered = [this](std::vector<ReaderAnswer>& answers) { Deliver(answers); };
  hooks.bounced = [this, address](std::vector<NodeCommand> commands, std::vector<NodeRead> reads) {
    OnBounced(address, std::move(commands), std::move(reads));
  };
  hooks.failed = [this, address] { OnNodeFailed(address); };
  auto node = std::make_unique<ReaderNode>(
      cluster ? cluster_->NodeOptions(address) : single_options_, cluster, std::move(hooks));
  node->Start();
  return *nodes_.emplace(address, std::move(node)).first->second;
}

std::string ReaderRedis::AddressLocked(const Item& item, const std::string& node) {
  if (mode_ != Mode::kCluster) return {};
  if (!node.empty()) return node;
  return cluster_->NodeForKey(std::visit(
      [](const auto& i) -> const std::string& {
        if constexpr (std::is_same_v<std::decay_t<decltype(i)>, NodeRead>) {
          return i.stream;
        } else {
          return i.key;
        }
      },
      item));
}

void ReaderRedis::DispatchLocked(Item item, const std::string& node) {
  ReaderNode& target = NodeLocked(AddressLocked(item, node));
  std::visit([&](auto& i) { target.Enqueue(std::move(i)); }, item);
}

void ReaderRedis::DispatchHeldLocked() {
  std::map<std::string, std::vector<NodeRead>> reads;  // by node address
  while (!held_.empty()) {
    Item item = std::move(held_.front());
    held_.pop_front();
    if (NodeRead* read = std::get_if<NodeRead>(&item)) {
      reads[AddressLocked(item, {})].push_back(std::move(*read));
    } else {
      DispatchLocked(std::move(item));
    }
  }
  for (auto& [address, batch] : reads) NodeLocked(address).Enqueue(std::move(batch));
}

void ReaderRedis::OnBounced(const std::string& via, std::vector<NodeCommand> commands,
                            std::vector<NodeRead> reads) {
  std::vector<ReaderAnswer> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || cluster_ == nullptr) return;
    auto follow = [&](auto& item) {
      std::optional<redis::ClusterExecutor::Redirect> r =
          cluster_->ParseRedirect(std::string_view(item.redirect), via);
      if (!r || ++item.redirects > kMaxRedirects) {
        failed.push_back(
            {item.token, ReaderReply::Error(ReaderReply::Kind::kTransport,
                                            fmt::format("redis cluster: gave up following '{}' "
                                                        "after {} redirections",
                                                        item.redirect, item.redirects))});
        return;
      }
      if (!r->ask) {
        // The slot moved for good: learn it now, and the whole map soon (a resharding or a
        // failover rarely moves one slot).
        cluster_->NoteMoved(r->slot, r->target);
        refresh_requested_ = true;
      }
      item.asking = r->ask;
      item.redirect.clear();
      DispatchLocked(std::move(item), r->target);
    };
    for (NodeCommand& c : commands) follow(c);
    for (NodeRead& r : reads) {
      // Cancelled while it was out: not sent again (it would wait out its block elsewhere).
      if (r.cancelled) {
        failed.push_back({r.token, Nil()});
        continue;
      }
      follow(r);
    }
    if (refresh_requested_) cv_.notify_one();
  }
  Deliver(failed);
}

void ReaderRedis::OnNodeFailed(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || cluster_ == nullptr) return;
  refresh_requested_ = true;
  if (watched_.emplace(address, Clock::now() + kWatchFor).second && watched_.size() == 1) {
    next_watch_ = Clock::now() + kWatchInterval;
  }
  cv_.notify_one();
}

void ReaderRedis::Deliver(std::vector<ReaderAnswer>& answers) {
  // Stop() promised the owner silence: it may be tearing down what `done` reaches.
  if (answers.empty() || halted_) return;
  if (batch_done_) {
    batch_done_(answers);
  } else {
    for (ReaderAnswer& a : answers) done_(a.token, std::move(a.reply));
  }
  answers.clear();
}

}  // namespace rsc::client
