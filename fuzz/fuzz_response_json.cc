// Fuzzes the response parsers of core/protocol_json.h (what clients and the CLI run on
// coordinator answers): no crash, and anything accepted round-trips unchanged.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "core/protocol_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rsc;
  std::string_view in(reinterpret_cast<const char*>(data), size);

  if (auto r = ParseHeartbeatResponse(in); r.ok()) {
    auto again = ParseHeartbeatResponse(SerializeHeartbeatResponse(*r));
    RSC_CHECK(again.ok() && *again == *r);
  } else {
    RSC_CHECK(r.error().code == ErrorCode::kInternal);
  }
  if (auto r = ParseRoutingResponse(in); r.ok()) {
    auto again = ParseRoutingResponse(SerializeRoutingResponse(*r));
    RSC_CHECK(again.ok() && *again == *r);
  }
  if (auto r = ParseGroupView(in); r.ok()) {
    std::string once = SerializeGroupView(*r);
    auto again = ParseGroupView(once);
    RSC_CHECK(again.ok() && SerializeGroupView(*again) == once);
  }
  if (auto r = ParseGroupList(in); r.ok()) {
    auto again = ParseGroupList(SerializeGroupList(*r));
    RSC_CHECK(again.ok() && *again == *r);
  }
  if (auto r = ParseErrorBody(in); r.ok()) {
    if (r->code) {
      auto again = ParseErrorBody(SerializeError(Error{*r->code, r->message}));
      RSC_CHECK(again.ok() && again->error == r->error && again->message == r->message);
    }
  }
  return 0;
}
