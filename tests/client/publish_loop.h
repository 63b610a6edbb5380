#pragma once
// A keyed publish load for client integration tests: one thread publishes (key, seq)
// messages, key = "k-<seq mod keys>", with per-key increasing seq; a failed publish is
// retried as-is until it succeeds (10 s at most), so per-key seqs are acknowledged in
// increasing order. Records what was acknowledged and every error the caller saw.

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rsc/producer.h"

namespace rsc::testing {

class PublishLoop {
 public:
  PublishLoop(Producer* producer, int keys) : producer_(producer), keys_(keys) {
    thread_ = std::thread([this] { Run(); });
  }
  ~PublishLoop() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t published() const { return published_.load(); }
  std::map<std::string, std::vector<int>> Sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  std::map<std::string, int> Errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }
  // The first 10 error messages the caller saw.
  std::vector<std::string> ErrorMessages() const {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  std::string fatal() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fatal_;
  }

 private:
  void Run() {
    for (int seq = 0; !stop_; ++seq) {
      const std::string key = "k-" + std::to_string(seq % keys_);
      const StreamFields fields{{"key", key}, {"seq", std::to_string(seq)}};
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (;;) {
        ProducerResult<std::string> r = producer_->Publish(key, fields);
        if (r.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          sent_[key].push_back(seq);
          break;
        }
        std::lock_guard<std::mutex> lock(mu_);
        ++errors_[std::string(ProducerErrorCodeName(r.error().code))];
        if (messages_.size() < 10) messages_.push_back(r.error().message);
        if (r.error().code == ProducerErrorCode::kInvalidArgument ||
            r.error().code == ProducerErrorCode::kClosed ||
            std::chrono::steady_clock::now() > give_up) {
          fatal_ = std::string(ProducerErrorCodeName(r.error().code)) + ": " + r.error().message;
          return;
        }
      }
      published_.fetch_add(1);
      // Pacing (about 2000 messages/s), not synchronisation.
      if (seq % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  Producer* producer_;
  const int keys_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> published_{0};
  mutable std::mutex mu_;
  std::map<std::string, std::vector<int>> sent_;
  std::map<std::string, int> errors_;
  std::vector<std::string> messages_;
  std::string fatal_;
  std::thread thread_;
};

}  // namespace rsc::testing
