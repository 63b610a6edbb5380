#include "core/result.h"

namespace rsc {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidRequest:
      return "INVALID_REQUEST";
    case ErrorCode::kUnauthorized:
      return "UNAUTHORIZED";
    case ErrorCode::kForbidden:
      return "FORBIDDEN";
    case ErrorCode::kNotFound:
      return "NOT_FOUND";
    case ErrorCode::kGroupNotFound:
      return "GROUP_NOT_FOUND";
    case ErrorCode::kStreamNotFound:
      return "STREAM_NOT_FOUND";
    case ErrorCode::kMethodNotAllowed:
      return "METHOD_NOT_ALLOWED";
    case ErrorCode::kFencedMemberEpoch:
      return "FENCED_MEMBER_EPOCH";
    case ErrorCode::kUnknownMemberId:
      return "UNKNOWN_MEMBER_ID";
    case ErrorCode::kGroupExists:
      return "GROUP_EXISTS";
    case ErrorCode::kRevisionConflict:
      return "REVISION_CONFLICT";
    case ErrorCode::kLayoutMismatch:
      return "LAYOUT_MISMATCH";
    case ErrorCode::kReshardInProgress:
      return "RESHARD_IN_PROGRESS";
    case ErrorCode::kClientsTooOld:
      return "CLIENTS_TOO_OLD";
    case ErrorCode::kPayloadTooLarge:
      return "PAYLOAD_TOO_LARGE";
    case ErrorCode::kRequestTimeout:
      return "REQUEST_TIMEOUT";
    case ErrorCode::kInternal:
      return "INTERNAL";
    case ErrorCode::kMetadataMissing:
      return "METADATA_MISSING";
    case ErrorCode::kMetadataUnreadable:
      return "METADATA_UNREADABLE";
    case ErrorCode::kCoordinatorTerminating:
      return "COORDINATOR_TERMINATING";
    case ErrorCode::kRedisUnavailable:
      return "REDIS_UNAVAILABLE";
    case ErrorCode::kLockTimeout:
      return "LOCK_TIMEOUT";
    case ErrorCode::kUnknownResult:
      return "UNKNOWN_RESULT";
  }
  return "INTERNAL";
}

int HttpStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidRequest:
      return 400;
    case ErrorCode::kUnauthorized:
      return 401;
    case ErrorCode::kForbidden:
      return 403;
    case ErrorCode::kNotFound:
    case ErrorCode::kGroupNotFound:
    case ErrorCode::kStreamNotFound:
      return 404;
    case ErrorCode::kMethodNotAllowed:
      return 405;
    case ErrorCode::kFencedMemberEpoch:
    case ErrorCode::kUnknownMemberId:
    case ErrorCode::kGroupExists:
    case ErrorCode::kRevisionConflict:
    case ErrorCode::kLayoutMismatch:
    case ErrorCode::kReshardInProgress:
    case ErrorCode::kClientsTooOld:
      return 409;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kRequestTimeout:
      return 408;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kMetadataMissing:
    case ErrorCode::kMetadataUnreadable:
    case ErrorCode::kCoordinatorTerminating:
    case ErrorCode::kRedisUnavailable:
    case ErrorCode::kLockTimeout:
    case ErrorCode::kUnknownResult:
      return 503;
  }
  return 500;
}

}  // namespace rsc
