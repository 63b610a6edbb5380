#pragma once
// Where the Redis connection layer's few log lines go. The layer is shared by the
// coordinator and the client library; a library must not write to the application's
// stdout on its own, so lines are dropped until a process installs a sink (the coordinator
// routes them to spdlog in main.cc).
//
// Thread safety: SetLogSink may be called at any time; Log is safe for concurrent use.

#include <string_view>

namespace rsc::redis {

enum class LogLevel { kDebug, kInfo, kWarn };

using LogSink = void (*)(LogLevel level, std::string_view line);

// nullptr drops every line (the default).
void SetLogSink(LogSink sink);
void Log(LogLevel level, std::string_view line);

}  // namespace rsc::redis
