#include "core/protocol.h"

namespace rsc {
namespace {

// Byte-wise checks on purpose: names become parts of Redis keys and hash tags (R2.4),
// so locale-dependent classification (std::isalnum) has no place here.
bool IsNameChar(char c, bool allow_colon) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || (allow_colon && c == ':');
}

bool IsValidName(std::string_view s, size_t max_len, bool allow_colon) {
  if (s.empty() || s.size() > max_len || IsOnlyDots(s)) return false;
  for (char c : s) {
    if (!IsNameChar(c, allow_colon)) return false;
  }
  return true;
}

}  // namespace

bool IsOnlyDots(std::string_view s) {
  return !s.empty() && s.find_first_not_of('.') == std::string_view::npos;
}

std::string_view HeartbeatStatusName(HeartbeatStatus s) {
  switch (s) {
    case HeartbeatStatus::kOk:
      return "OK";
    case HeartbeatStatus::kRevokePending:
      return "REVOKE_PENDING";
    case HeartbeatStatus::kDrain:
      return "DRAIN";
    case HeartbeatStatus::kSyncMetadata:
      return "SYNC_METADATA";
  }
  return "OK";
}

bool IsValidGroupName(std::string_view g) { return IsValidName(g, 128, /*allow_colon=*/false); }

bool IsValidStreamName(std::string_view p) { return IsValidName(p, 200, /*allow_colon=*/true); }

}  // namespace rsc
