// Fuzzes the router (server/router.h): the first byte picks the method, the rest is the
// request-target. Whatever matches must carry names that pass SPEC R2.4, because they
// become parts of Redis keys; a console path (kUi) must stay under /ui.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "core/protocol.h"
#include "core/protocol_json.h"
#include "server/router.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rsc;
  if (size == 0) return 0;
  static constexpr std::string_view kMethods[] = {"GET", "POST", "PATCH", "DELETE", "PUT"};
  std::string_view method = kMethods[data[0] % 5];
  std::string_view target(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string allow;
  auto m = MatchRoute(method, target, &allow);
  if (m.ok()) {
    switch (m->route) {
      case Route::kHealthz:
      case Route::kReadyz:
      case Route::kMetrics:
      case Route::kListGroups:
      case Route::kCreateGroup:
      case Route::kRestoreGroup:
        break;
      case Route::kDescribeStream:
      case Route::kPatchStream:
      case Route::kStreamRouting:
      case Route::kReshard:  // stream routes name a stream and no group
        RSC_CHECK(IsValidStreamName(m->key.stream) && m->key.group.empty());
        break;
      case Route::kUi:  // the console's files: looked up by name in the embedded table only
        RSC_CHECK(m->path == "/ui" || m->path.starts_with("/ui/"));
        break;
      default:
        RSC_CHECK(IsValidStreamName(m->key.stream) && IsValidGroupName(m->key.group));
    }
    if (m->route == Route::kFenceMember) RSC_CHECK(IsValidMemberId(m->member));
    (void)ParseQuery(m->query);
  } else {
    ErrorCode c = m.error().code;
    RSC_CHECK(c == ErrorCode::kNotFound || c == ErrorCode::kMethodNotAllowed ||
              c == ErrorCode::kInvalidRequest);
    RSC_CHECK((c == ErrorCode::kMethodNotAllowed) == !allow.empty());
  }
  (void)PercentDecode(target);
  return 0;
}
