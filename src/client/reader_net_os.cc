#include "client/reader_net_os.h"

#include <pthread.h>

#include <thread>
#include <utility>

#include "client/reader_node.h"
#include "client/reader_redis.h"
#include "redis/cluster.h"
#include "redis/executor.h"

namespace rsc::client {

OsReaderNet::OsReaderNet(redis::ConnectionOptions redis)
    : options_(std::move(redis)), single_options_(options_) {}

OsReaderNet::~OsReaderNet() = default;

std::function<void()> OsReaderNet::StartThread(const char* name, std::function<void()> body) {
  auto thread = std::make_shared<std::thread>(std::move(body));
  pthread_setname_np(thread->native_handle(), name);
  return [thread] {
    if (thread->joinable()) thread->join();
  };
}

Result<bool> OsReaderNet::Open() {
  Result<std::unique_ptr<redis::Executor>> opened =
      redis::OpenExecutor(options_, redis::ClusterMode::kAuto, 1, options_.connect_timeout);
  if (!opened.ok()) return opened.error();
  std::unique_ptr<redis::Executor> executor = std::move(opened).value();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto* one = dynamic_cast<redis::SingleNodeExecutor*>(executor.get())) {
    // One server, perhaps named in a list: the node is the one that answered when the
    // executor was opened, not the first named (and not a second probe's answer: a probe
    // that failed would have pinned the first named node for the port's life).
    single_options_ = one->options();
  }
  cluster_ = dynamic_cast<redis::ClusterExecutor*>(executor.get());
  // A cluster's executor is kept for its slot map (and the connection it re-reads the map
  // on); one server's pool is not needed: the node has its own connections.
  if (cluster_ != nullptr) executor_ = std::move(executor);
  return cluster_ != nullptr;
}

std::unique_ptr<ReaderNodePort> OsReaderNet::MakeNode(const std::string& address,
                                                      ReaderNodeHooks hooks) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool cluster = cluster_ != nullptr;
  return std::make_unique<ReaderNode>(cluster ? cluster_->NodeOptions(address) : single_options_,
                                      cluster, std::move(hooks));
}

std::string OsReaderNet::NodeForKey(std::string_view key) { return cluster_->NodeForKey(key); }

std::optional<ReaderRedirect> OsReaderNet::ParseRedirect(std::string_view error,
                                                         const std::string& via) {
  std::optional<redis::ClusterExecutor::Redirect> r = cluster_->ParseRedirect(error, via);
  if (!r) return std::nullopt;
  return ReaderRedirect{r->ask, r->slot, std::move(r->target)};
}

void OsReaderNet::NoteMoved(int slot, const std::string& target) {
  cluster_->NoteMoved(slot, target);
}

void OsReaderNet::RefreshSlots() { (void)cluster_->RefreshSlots(); }

Result<std::vector<std::string>> OsReaderNet::Masters() { return cluster_->Masters(); }

// The production port (declared in reader_redis.h): kept here with the rest of the OS code.
ReaderRedis::ReaderRedis(redis::ConnectionOptions redis, Done done)
    : ReaderRedis(std::make_unique<OsReaderNet>(std::move(redis)), std::move(done)) {}

}  // namespace rsc::client
