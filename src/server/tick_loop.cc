#include "server/tick_loop.h"

#include <spdlog/spdlog.h>

namespace rsc {

TickLoop::TickLoop(GroupService& service, std::chrono::milliseconds interval)
    : service_(service), interval_(interval) {}

TickLoop::~TickLoop() { Stop(); }

void TickLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void TickLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int TickLoop::RunOnce() {
  auto groups = service_.ListGroups();
  if (!groups.ok()) {
    spdlog::warn("event=tick_list_failed message=\"{}\"", groups.error().message);
    return 0;
  }
  int wrote = 0;
  for (const GroupKey& key : *groups) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;  // S1: no transition is scheduled once terminating
    }
    auto r = service_.Tick(key);
    if (r.ok()) {
      wrote += *r ? 1 : 0;
    } else if (r.error().code != ErrorCode::kLockTimeout &&
               r.error().code != ErrorCode::kGroupNotFound) {
      spdlog::warn("event=tick_failed group={} code={} message=\"{}\"", key.Tag(),
                   ErrorCodeName(r.error().code), r.error().message);
    }
  }
  return wrote;
}

void TickLoop::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (cv_.wait_for(lock, interval_, [this] { return stop_; })) break;
    lock.unlock();
    RunOnce();
    lock.lock();
  }
}

}  // namespace rsc
