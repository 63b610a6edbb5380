#include "redis/log.h"

#include <atomic>

namespace rsc::redis {
namespace {
std::atomic<LogSink> g_sink{nullptr};
}  // namespace

void SetLogSink(LogSink sink) { g_sink.store(sink, std::memory_order_release); }

void Log(LogLevel level, std::string_view line) {
  if (LogSink sink = g_sink.load(std::memory_order_acquire); sink != nullptr) sink(level, line);
}

}  // namespace rsc::redis
