#pragma once
// What the client runtimes (consumer_runtime.h, producer_runtime.h) exchange with their HTTP
// port: the library's HTTP thread and the simulator's network both carry these.

#include <string>
#include <string_view>

namespace rsc::client {

// One HTTP request to coordinator endpoint `endpoint` (an index into the driver's list).
struct HttpCall {
  int endpoint = 0;
  std::string method;
  std::string target;
  std::string body;
};

// Its outcome: status 0 = no answer (connect failure, reset, timeout: UNKNOWN_RESULT, C6).
struct HttpOutcome {
  int status = 0;
  std::string body;
  std::string error;  // status 0: why
  std::string where;  // the endpoint, for messages
};

// %-encodes everything but RFC 3986 unreserved characters (path segments, query values).
std::string PercentEncode(std::string_view s);

}  // namespace rsc::client
