#include "server/tick_loop.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace rsc {

TickLoop::TickLoop(GroupService& service, std::chrono::milliseconds interval)
    : service_(service), interval_(interval) {}

TickLoop::~TickLoop() { Stop(); }

void TickLoop::Start() {
  thread_ = std::thread([this] { Run(); });
  pthread_setname_np(thread_.native_handle(), "rsc-tick");
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
  return TickPass(service_, [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  });
}

int TickPass(GroupService& service, const std::function<bool()>& stopped) {
  auto groups = service.ListGroups();
  if (!groups.ok()) {
    spdlog::warn("event=tick_list_failed message=\"{}\"", groups.error().message);
    return 0;
  }
  int wrote = 0;
  // Streams first (SPEC §13): a reshard moves on before the groups' own maintenance.
  std::vector<std::string> streams;
  for (const GroupKey& key : *groups) streams.push_back(key.stream);
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  for (const std::string& stream : streams) {
    if (stopped()) return wrote;
    Status s = service.StreamTick(stream);
    if (!s.ok() && s.error().code != ErrorCode::kLockTimeout) {
      spdlog::warn("event=stream_tick_failed stream={} code={} message=\"{}\"", stream,
                   ErrorCodeName(s.error().code), s.error().message);
    }
  }
  for (const GroupKey& key : *groups) {
    if (stopped()) break;  // S1: no transition is scheduled once terminating
    auto r = service.Tick(key);
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
