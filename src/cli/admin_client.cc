#include "cli/admin_client.h"

#include <utility>

#include "cli/exit_codes.h"
#include "core/protocol_json.h"

namespace rsc::cli {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The 503 codes that promise nothing was applied and another replica (or a later try)
// may succeed (docs/protocol.md §8). METADATA_* need an operator, UNKNOWN_RESULT a re-read.
bool IsRetryable503(std::string_view code) {
  return code == "COORDINATOR_TERMINATING" || code == "REDIS_UNAVAILABLE" || code == "LOCK_TIMEOUT";
}

std::string Shorten(std::string_view text) {
  constexpr size_t kMax = 300;
  std::string s(text.substr(0, kMax));
  if (text.size() > kMax) s += "...";
  return s;
}

// A non-2xx answer: "CODE: message" from the error body, or the raw status for anything
// that is not one (a proxy, a wrong port).
CallOutcome ErrorOutcome(const client::HttpReply& reply) {
  CallOutcome out;
  out.status = reply.status;
  out.body = reply.body;
  out.exit_code = kExitServerError;
  Result<ErrorBody> parsed = ParseErrorBody(reply.body);
  if (parsed.ok()) {
    out.code = parsed->error;
    out.message = parsed->error + ": " + parsed->message;
    if (out.code == "REVISION_CONFLICT") out.exit_code = kExitRevisionConflict;
  } else {
    out.message = "HTTP " + std::to_string(reply.status) + ": " + Shorten(reply.body);
  }
  return out;
}

}  // namespace

bool ParseEndpointList(std::string_view text, std::vector<client::HttpEndpoint>* out,
                       std::string* error) {
  out->clear();
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = Trim(text.substr(0, comma));
    if (!item.empty()) {
      std::optional<client::HttpEndpoint> ep = client::ParseHttpEndpoint(item, error);
      if (!ep) return false;
      out->push_back(std::move(*ep));
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out->empty()) {
    *error = "no coordinator endpoint given";
    return false;
  }
  return true;
}

bool IsValidAdminToken(std::string_view token) {
  return token.empty() || client::IsValidBearerToken(token);
}

std::string EncodePathSegment(std::string_view segment) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : segment) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                       c == '.' || c == '_' || c == '~' || c == ':' || c == '-';
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

AdminClient::AdminClient(std::vector<client::HttpEndpoint> endpoints, AdminToken token,
                         std::chrono::milliseconds timeout)
    : token_(std::move(token)) {
  for (client::HttpEndpoint& ep : endpoints) {
    transports_.push_back(std::make_unique<client::HttpTransport>(std::move(ep), timeout));
  }
}

void AdminClient::AddAuthHint(CallOutcome& out) const {
  if (out.code == "UNAUTHORIZED") {
    out.message += token_.value.empty()
                       ? " (rsc sent no token: give --admin-token or set RSC_ADMIN_TOKEN; "
                         "--monitor-token / RSC_MONITOR_TOKEN is enough for reads)"
                       : " (the coordinator does not know the token given by " + token_.flag + ")";
  } else if (out.code == "FORBIDDEN") {
    out.message += " (rsc sent the token given by " + token_.flag +
                   (token_.flag == "--admin-token"
                        ? ", which the coordinator knows as another role's token)"
                        : "; changes and export need --admin-token / RSC_ADMIN_TOKEN)");
  }
}

CallOutcome AdminClient::Call(std::string_view method, std::string_view path, std::string_view body,
                              Replay replay) {
  const std::string target(path);
  const auto headers = client::BearerHeaders(token_.value);
  std::string unreachable;  // "endpoint: error; ..." for the final message
  CallOutcome refused;      // the last retryable 503, if any
  const size_t n = transports_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (preferred_ + i) % n;
    client::HttpTransport& transport = *transports_[index];
    const std::string endpoint = transport.endpoint().ToString();
    client::HttpReply reply = transport.Request(
        method, target, body, headers,
        replay == Replay::kSafe ? client::HttpTransport::Repeat::kIfClosedUnanswered
                                : client::HttpTransport::Repeat::kNever);
    if (reply.status == 0) {
      if (reply.sent && replay == Replay::kUnsafe) {
        CallOutcome out;
        out.exit_code = kExitUnreachable;
        out.endpoint = endpoint;
        out.code = "UNKNOWN_RESULT";
        out.message = "UNKNOWN_RESULT: " + std::string(method) + " " + std::string(path) +
                      " was sent to " + endpoint + " but no reply came (" + reply.error +
                      "); the change may or may not have been applied: run `rsc describe` "
                      "before retrying";
        return out;
      }
      unreachable += (unreachable.empty() ? "" : "; ") + endpoint + ": " + reply.error;
      continue;
    }
    if (reply.status == 503) {
      CallOutcome err = ErrorOutcome(reply);
      if (IsRetryable503(err.code)) {
        refused = std::move(err);
        refused.exit_code = kExitRetryable;
        refused.endpoint = endpoint;
        refused.message += " (from " + endpoint + ")";
        continue;
      }
    }
    preferred_ = index;
    if (reply.status >= 200 && reply.status < 300) {
      CallOutcome out;
      out.status = reply.status;
      out.body = std::move(reply.body);
      out.endpoint = endpoint;
      return out;
    }
    CallOutcome err = ErrorOutcome(reply);
    err.endpoint = endpoint;
    AddAuthHint(err);
    return err;
  }
  if (refused.exit_code == kExitRetryable) {
    if (!unreachable.empty()) refused.message += "; unreachable: " + unreachable;
    return refused;
  }
  CallOutcome out;
  out.exit_code = kExitUnreachable;
  out.message = "coordinator unreachable: " + unreachable;
  return out;
}

}  // namespace rsc::cli
