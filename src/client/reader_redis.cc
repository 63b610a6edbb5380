#include "client/reader_redis.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "redis/cluster.h"

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

// The production constructor is in reader_net_os.cc, with the rest of the OS code.
ReaderRedis::ReaderRedis(std::unique_ptr<ReaderNet> net, Done done)
    : net_(std::move(net)),
      done_(std::move(done)),
      mu_(net_->Sync().NewMutex()),
      cv_(net_->Sync().NewCondVar()),
      join_mu_(net_->Sync().NewMutex()) {}

ReaderRedis::~ReaderRedis() { Stop(); }

void ReaderRedis::Start() {
  std::lock_guard<SyncPort::Mutex> join_lock(*join_mu_);
  {
    std::lock_guard<SyncPort::Mutex> lock(*mu_);
    if (stopping_ || started_) return;
    started_ = true;
  }
  // Started outside mu_, which the new thread takes first thing.
  join_ = net_->StartThread("rsc-redis-route", [this] { Run(); });
}

void ReaderRedis::Stop() {
  {
    std::lock_guard<SyncPort::Mutex> lock(*mu_);
    stopping_ = true;
  }
  halted_ = true;
  cv_->NotifyAll();
  {
    std::lock_guard<SyncPort::Mutex> join_lock(*join_mu_);
    if (join_) std::exchange(join_, nullptr)();
  }
  // No node is added once stopping_ is set; the nodes are stopped outside mu_, since their
  // threads may be waiting for it in a hook.
  std::vector<ReaderNodePort*> nodes;
  {
    std::lock_guard<SyncPort::Mutex> lock(*mu_);
    for (auto& [address, node] : nodes_) nodes.push_back(node.get());
  }
  // All halted before any is joined: nodes whose threads wait out a connect (an outage is
  // when a consumer is often stopped) end side by side, not one connect timeout per node.
  for (ReaderNodePort* node : nodes) node->Halt();
  for (ReaderNodePort* node : nodes) node->Stop();
}

template <typename Ready>
bool ReaderRedis::WaitLocked(std::unique_lock<SyncPort::Mutex>& lock,
                             std::optional<TimePoint> deadline, Ready ready) {
  (void)lock;  // held: the port's Wait releases and retakes the mutex underneath it
  while (!ready()) {
    if (!deadline) {
      cv_->Wait(*mu_);
      continue;
    }
    const TimePoint now = net_->Now();
    if (now >= *deadline) return false;
    cv_->WaitFor(*mu_, std::chrono::ceil<milliseconds>(*deadline - now));
  }
  return true;
}

void ReaderRedis::Submit(uint64_t token, const ReaderCoreConfig& config,
                         const ReaderCommand& command) {
  Item item;
  if (command.kind == ReaderCommandKind::kReadLive) {
    item = MakeNodeRead(token, config, command, redis::KeySlot(config.stream), net_->Now());
  } else {
    item = MakeNodeCommand(token, config, command);  // command.entry is valid only now
  }
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  if (stopping_) return;
  if (mode_ == Mode::kUnknown) {
    held_.push_back(std::move(item));
    cv_->NotifyOne();
    return;
  }
  DispatchLocked(std::move(item));
}

void ReaderRedis::Cancel(uint64_t token, bool now) {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
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
    cv_->NotifyOne();
    return;
  }
  // A few nodes at most; the one holding the read answers, the others find nothing.
  for (auto& [address, node] : nodes_) node->Cancel(token, now);
}

ReaderRedisStats ReaderRedis::Stats() const {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
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
      std::unique_lock<SyncPort::Mutex> lock(*mu_);
      auto ready = [&] {
        return stopping_ || !answers_.empty() || refresh_requested_ ||
               (mode_ == Mode::kUnknown && !held_.empty());
      };
      const bool watching = !watched_.empty() || retire_pending_;
      if (!WaitLocked(lock, watching ? std::optional<TimePoint>(next_watch_) : std::nullopt,
                      ready)) {
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
      std::lock_guard<SyncPort::Mutex> lock(*mu_);
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
    if (refresh && Cluster()) {
      // A node failed (failover?) or a slot moved: re-read the map, at most once per interval.
      net_->RefreshSlots();
      Result<std::vector<std::string>> masters = net_->Masters();
      std::vector<std::unique_ptr<ReaderNodePort>> retired;
      std::unique_lock<SyncPort::Mutex> lock(*mu_);
      const TimePoint now = net_->Now();
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
      (void)WaitLocked(lock, net_->Now() + kRefreshInterval, [&] { return stopping_; });
      if (stopping_) return;
    }
  }
}

bool ReaderRedis::Open(std::string* error) {
  if (net_->Now() < next_open_) {
    *error = open_error_;
    return false;
  }
  Result<bool> opened = net_->Open();
  if (!opened.ok()) {
    open_error_ = opened.error().message;
    open_backoff_ = std::clamp(open_backoff_ * 2, kOpenBackoffMin, kOpenBackoffMax);
    next_open_ = net_->Now() + open_backoff_;
    *error = open_error_;
    return false;
  }
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  if (*opened) {
    mode_ = Mode::kCluster;
  } else {
    mode_ = Mode::kSingle;
    single_.store(true, std::memory_order_release);
  }
  return true;
}

bool ReaderRedis::Cluster() {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  return mode_ == Mode::kCluster;
}

ReaderNodePort& ReaderRedis::NodeLocked(const std::string& address) {
  auto it = nodes_.find(address);
  if (it != nodes_.end()) return *it->second;
  ReaderNodeHooks hooks;
  hooks.answered = [this](std::vector<ReaderAnswer>& answers) { Deliver(answers); };
  hooks.bounced = [this, address](std::vector<NodeCommand> commands, std::vector<NodeRead> reads) {
    OnBounced(address, std::move(commands), std::move(reads));
  };
  hooks.failed = [this, address] { OnNodeFailed(address); };
  std::unique_ptr<ReaderNodePort> node = net_->MakeNode(address, std::move(hooks));
  node->Start();
  return *nodes_.emplace(address, std::move(node)).first->second;
}

std::string ReaderRedis::AddressLocked(const Item& item, const std::string& node) {
  if (mode_ != Mode::kCluster) return {};
  if (!node.empty()) return node;
  return net_->NodeForKey(std::visit(
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
  ReaderNodePort& target = NodeLocked(AddressLocked(item, node));
  if (NodeRead* read = std::get_if<NodeRead>(&item)) {
    std::vector<NodeRead> one;
    one.push_back(std::move(*read));
    target.Enqueue(std::move(one));
  } else {
    target.Enqueue(std::move(std::get<NodeCommand>(item)));
  }
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
    std::lock_guard<SyncPort::Mutex> lock(*mu_);
    if (stopping_ || mode_ != Mode::kCluster) return;
    auto follow = [&](auto& item) {
      std::optional<ReaderRedirect> r = net_->ParseRedirect(std::string_view(item.redirect), via);
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
        net_->NoteMoved(r->slot, r->target);
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
    if (refresh_requested_) cv_->NotifyOne();
  }
  Deliver(failed);
}

void ReaderRedis::OnNodeFailed(const std::string& address) {
  std::lock_guard<SyncPort::Mutex> lock(*mu_);
  if (stopping_ || mode_ != Mode::kCluster) return;
  refresh_requested_ = true;
  const TimePoint now = net_->Now();
  if (watched_.emplace(address, now + kWatchFor).second && watched_.size() == 1) {
    next_watch_ = now + kWatchInterval;
  }
  cv_->NotifyOne();
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
