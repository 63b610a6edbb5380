#pragma once
// Result<T>: a value or an Error carrying one code per distinct caller reaction
// (FoundationDB's rule). g++ 12 has no std::expected, so this is a small variant wrapper.

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/check.h"

namespace rsc {

// Every code maps to exactly one client reaction; see SPEC §4.1 and docs/protocol.md.
enum class ErrorCode {
  kInvalidRequest,          // 400: fix the request
  kUnauthorized,            // 401: bearer token missing or not one the coordinator knows
  kForbidden,               // 403: a valid token whose role may not call this route (O4)
  kNotFound,                // 404: no such route
  kGroupNotFound,           // 404: group never existed (or key lost and not indexed)
  kStreamNotFound,          // 404: the stream has no layout and no groups
  kMethodNotAllowed,        // 405
  kFencedMemberEpoch,       // 409: zombie; drop all shards, rejoin
  kUnknownMemberId,         // 409: expired/removed; drop all shards, rejoin
  kGroupExists,             // 409: create on an existing group
  kRevisionConflict,        // 409: admin expectedRevision mismatch (I4)
  kLayoutMismatch,          // 409: the request contradicts the stream's layout (D3)
  kReshardInProgress,       // 409: a reshard is still preparing, or too many generations
  kClientsTooOld,           // 409: a live member does not implement layout-v2 (D5)
  kPayloadTooLarge,         // 413
  kRequestTimeout,          // 408: the body did not arrive in time; nothing was processed
  kInternal,                // 500: a bug; logged
  kMetadataMissing,         // 503: index lists the group, key gone: fail closed
  kMetadataUnreadable,      // 503: corrupt/unknown schema: fail closed
  kCoordinatorTerminating,  // 503: retry on another endpoint at once
  kRedisUnavailable,        // 503: retry with backoff
  kLockTimeout,             // 503: retry with backoff
  kUnknownResult,           // a timeout after sending: the write may or may not have happened
};

std::string_view ErrorCodeName(ErrorCode code);
int HttpStatus(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
};

inline Error MakeError(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    RSC_CHECK(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    RSC_CHECK(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    RSC_CHECK(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const {
    RSC_CHECK(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status OkStatus() { return Unit{}; }

}  // namespace rsc

#define RSC_CONCAT_INNER(a, b) a##b
#define RSC_CONCAT(a, b) RSC_CONCAT_INNER(a, b)
// `RSC_ASSIGN_OR_RETURN(auto x, Expr())`: unwraps a Result or returns its Error.
#define RSC_ASSIGN_OR_RETURN(lhs, expr) \
  RSC_ASSIGN_OR_RETURN_IMPL(RSC_CONCAT(rsc_result_, __LINE__), lhs, expr)
#define RSC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.error();              \
  lhs = std::move(tmp).value()
// `RSC_RETURN_IF_ERROR(Status)`.
#define RSC_RETURN_IF_ERROR(expr)                      \
  do {                                                 \
    auto rsc_status_ = (expr);                         \
    if (!rsc_status_.ok()) return rsc_status_.error(); \
  } while (0)
