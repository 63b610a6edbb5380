#pragma once
// OsReaderNet: ReaderRedis's production port (reader_net.h): std::thread and the steady
// clock, the connection layer's executor for server detection and the cluster's slot map
// (redis::OpenExecutor, redis::ClusterExecutor), and one ReaderNode (two hiredis connections,
// two threads) per node.

#include <memory>
#include <mutex>
#include <string>

#include "client/reader_net.h"
#include "redis/connection.h"

namespace rsc::redis {
class ClusterExecutor;
class Executor;
}  // namespace rsc::redis

namespace rsc::client {

class OsReaderNet : public ReaderNet {
 public:
  // `redis`: the server, or any node of a cluster. Nothing connects before Open().
  explicit OsReaderNet(redis::ConnectionOptions redis);
  ~OsReaderNet() override;

  SyncPort& Sync() override { return SyncPort::Os(); }
  TimePoint Now() override { return NodeCore::Clock::now(); }
  std::function<void()> StartThread(const char* name, std::function<void()> body) override;
  Result<bool> Open() override;
  std::unique_ptr<ReaderNodePort> MakeNode(const std::string& address,
                                           ReaderNodeHooks hooks) override;
  std::string NodeForKey(std::string_view key) override;
  std::optional<ReaderRedirect> ParseRedirect(std::string_view error,
                                              const std::string& via) override;
  void NoteMoved(int slot, const std::string& target) override;
  void RefreshSlots() override;
  Result<std::vector<std::string>> Masters() override;

 private:
  const redis::ConnectionOptions options_;
  // Set once by Open(), then read-only (the executor's slot map is thread-safe itself).
  std::mutex mu_;
  redis::ConnectionOptions single_options_;  // the server that answered, on one server
  std::unique_ptr<redis::Executor> executor_;
  redis::ClusterExecutor* cluster_ = nullptr;
};

}  // namespace rsc::client
