// Fuzzes the tokens file parser (server/auth.h, SPEC O4): the coordinator reads the file at
// start-up, so a malformed one must end in a clear refusal, never a crash. An accepted file
// is a valid configuration that an Authorizer can serve; a refusal quotes no value of the
// file long enough to be a token.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "server/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rsc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Result<TokenConfig> t = ParseTokensFile(text);
  if (t.ok()) {
    RSC_CHECK(ValidateTokens(*t).ok());
    const Authorizer auth(*t);
    for (Role r : kAllRoles) {
      const RoleTokens& rt = t->Of(r);
      if (rt.token.empty()) continue;
      // Each configured token is admitted as its own role where that role may go.
      const Result<std::string_view> actor = auth.Check(
          r == Role::kMember ? Route::kHeartbeat : Route::kDescribeGroup, "Bearer " + rt.token);
      RSC_CHECK(actor.ok() && *actor == RoleName(r));
    }
    return 0;
  }
  RSC_CHECK(t.error().code == ErrorCode::kInvalidRequest && !t.error().message.empty());
  // No blank-free run of 16+ bytes after a line's '=' (or of a line without one) appears
  // in the message (the message's own words are shorter than that).
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos) line = line.substr(eq + 1);
    size_t start = 0;
    while (start < line.size()) {
      size_t end = line.find_first_of(" \t\r", start);
      if (end == std::string_view::npos) end = line.size();
      if (end - start >= 16) {
        RSC_CHECK(t.error().message.find(line.substr(start, end - start)) == std::string::npos);
      }
      start = end + 1;
    }
  }
  return 0;
}
