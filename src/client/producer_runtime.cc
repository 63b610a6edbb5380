#include "client/producer_runtime.h"

#include <fmt/format.h>

#include "core/protocol_json.h"

namespace rsc {

std::string_view ProducerErrorCodeName(ProducerErrorCode code) {
  switch (code) {
    case ProducerErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ProducerErrorCode::kNoRouting:
      return "NO_ROUTING";
    case ProducerErrorCode::kRoutingExpired:
      return "ROUTING_EXPIRED";
    case ProducerErrorCode::kStaleRouting:
      return "STALE_ROUTING";
    case ProducerErrorCode::kRedisError:
      return "REDIS_ERROR";
    case ProducerErrorCode::kRedisUnavailable:
      return "REDIS_UNAVAILABLE";
    case ProducerErrorCode::kUnknownResult:
      return "UNKNOWN_RESULT";
    case ProducerErrorCode::kClosed:
      return "CLOSED";
  }
  return "UNKNOWN";
}

}  // namespace rsc

namespace rsc::client {

namespace {

ProducerError Err(ProducerErrorCode code, std::string message) {
  return ProducerError{code, std::move(message)};
}

ProducerError FromRouteError(const RouteError& e) {
  switch (e.kind) {
    case RouteErrorKind::kNoRouting:
      return Err(ProducerErrorCode::kNoRouting, e.message);
    case RouteErrorKind::kRoutingExpired:
      return Err(ProducerErrorCode::kRoutingExpired, e.message);
    case RouteErrorKind::kStaleRouting:
      return Err(ProducerErrorCode::kStaleRouting, e.message);
  }
  return Err(ProducerErrorCode::kNoRouting, e.message);
}

}  // namespace

ProducerRuntime::ProducerRuntime(ProducerRuntimeOptions options, ProducerPorts* ports)
    : options_(std::move(options)),
      ports_(ports),
      base_path_(options_.group.empty() ? "/v1/streams/" + PercentEncode(options_.stream)
                                        : "/v1/groups/" + PercentEncode(options_.stream) + "/" +
                                              PercentEncode(options_.group)),
      core_(options_.core),
      current_(options_.first_endpoint % std::max(1, options_.endpoint_count)) {}

void ProducerRuntime::SeedObserved(const ObservedVersion& version) {
  core_.SeedObserved(version);
  saved_ = core_.observed();
}

void ProducerRuntime::Tick() {
  const TimeMs now = ports_->NowMs(false);
  if (round_) {
    if (round_->resume_at && now >= *round_->resume_at) {
      round_->resume_at.reset();
      Send();
    }
    return;
  }
  std::optional<RefreshRouting> action = core_.Tick(now);
  if (!action) return;
  round_ = Round{};
  round_->observed = action->observed;
  round_->endpoint = current_;
  Send();
}

std::optional<TimeMs> ProducerRuntime::NextWakeupMs() const {
  if (round_) return round_->resume_at;
  return core_.NextWakeMs();
}

void ProducerRuntime::Send() {
  HttpCall call;
  call.endpoint = round_->endpoint;
  call.method = "GET";
  call.target =
      base_path_ + "/routing?observedVersion=" + std::to_string(round_->observed.metadata_version);
  if (!round_->observed.lineage.empty()) {
    call.target += "&lineage=" + PercentEncode(round_->observed.lineage);
  }
  round_->sent_at = ports_->NowMs(false);
  round_->call = next_call_++;
  ports_->Http(*round_->call, call);
}

void ProducerRuntime::OnHttp(uint64_t call, HttpOutcome outcome) {
  if (!round_ || round_->call != call) return;  // late: its round moved on
  round_->call.reset();
  std::string error;
  bool next_at_once = false;
  if (outcome.status == 200) {
    Result<RoutingResponse> parsed = ParseRoutingResponse(outcome.body);
    if (parsed.ok()) {
      RoutingResponse answer = std::move(parsed).value();
      ports_->ObserveRouting(answer, round_->sent_at);
      ports_->BeforeRouting(answer);
      current_ = round_->endpoint;
      const TimeMs sent_at = round_->sent_at;
      round_.reset();
      core_.OnRoutingResponse(answer, sent_at, ports_->NowMs(false));
      AfterRound();
      return;
    }
    error = parsed.error().message;
  } else if (outcome.status == 0) {
    error = outcome.error;
  } else {
    Result<ErrorBody> body = ParseErrorBody(outcome.body);
    const std::string code = body.ok() ? body->error : "HTTP_" + std::to_string(outcome.status);
    error = fmt::format("HTTP {} {}: {}", outcome.status, code,
                        body.ok() ? body->message : outcome.body.substr(0, 200));
    if (outcome.status < 500) {
      // 4xx (GROUP_NOT_FOUND, INVALID_REQUEST): every coordinator would say the same.
      Fail(fmt::format("{} from {}", error, outcome.where));
      return;
    }
    next_at_once = code == "COORDINATOR_TERMINATING";
  }
  round_->errors.push_back(fmt::format("{}: {}", outcome.where, error));
  if (round_->attempt + 1 < options_.endpoint_count) {
    // C6: the next endpoint, after a bounded pause with jitter.
    ++round_->attempt;
    round_->endpoint = (round_->endpoint + 1) % options_.endpoint_count;
    const TimeMs base = options_.endpoint_backoff_ms;
    const TimeMs pause =
        next_at_once ? 0
                     : base / 2 + static_cast<TimeMs>(ports_->Random() * static_cast<double>(base));
    round_->resume_at = ports_->NowMs(false) + pause;
    if (pause == 0) Tick();
    return;
  }
  std::string joined;
  for (const std::string& e : round_->errors) joined += (joined.empty() ? "" : "; ") + e;
  Fail("routing refresh failed on every coordinator endpoint: " + joined);
}

void ProducerRuntime::Fail(std::string error) {
  round_.reset();
  current_ = (current_ + 1) % std::max(1, options_.endpoint_count);
  core_.OnRoutingFailure(ports_->NowMs(false), std::move(error), ports_->Random());
  AfterRound();
}

void ProducerRuntime::AfterRound() {
  if (core_.observed() != saved_) {
    saved_ = core_.observed();
    ports_->SaveVersion(saved_);
  }
}

std::vector<ProducerResult<RouteTarget>> ProducerRuntime::Route(
    const std::vector<std::string_view>& keys) {
  // Rounded up: a route granted now leaves the XADD inside the routing lease (PR5).
  const TimeMs now = ports_->NowMs(true);
  std::vector<ProducerResult<RouteTarget>> out;
  out.reserve(keys.size());
  for (std::string_view key : keys) {
    RouteResult r = core_.Route(key, now);
    if (r.ok()) {
      out.emplace_back(r.value());
      continue;
    }
    if (r.error().kind == RouteErrorKind::kRoutingExpired) ++refused_expired_;
    out.emplace_back(FromRouteError(r.error()));
  }
  return out;
}

ProducerResult<std::string> ProducerRuntime::PublishOutcome(const XaddReply& reply,
                                                            const std::string& stream) {
  switch (reply.kind) {
    case XaddReply::Kind::kId:
      return reply.text;
    case XaddReply::Kind::kNil:
      return Err(ProducerErrorCode::kStaleRouting,
                 fmt::format("XADD to {} refused: the key does not exist (a retired shard, or a "
                             "rollback); nothing was written, routing is being refreshed",
                             stream));
    case XaddReply::Kind::kError:
      if (IsStaleTarget(reply)) {
        return Err(ProducerErrorCode::kStaleRouting,
                   fmt::format("XADD to {} refused: the shard is sealed by a reshard (RS2); "
                               "nothing was written, routing is being refreshed",
                               stream));
      }
      return Err(ProducerErrorCode::kRedisError,
                 fmt::format("XADD to {} refused: {}", stream, reply.text));
    case XaddReply::Kind::kNoReply:
      return Err(ProducerErrorCode::kUnknownResult,
                 fmt::format("XADD to {} sent, no reply ({}): the entry may or may not exist",
                             stream, reply.text));
    case XaddReply::Kind::kUnexpected:
      break;
  }
  return Err(ProducerErrorCode::kRedisError,
             fmt::format("XADD to {}: unexpected reply type {}", stream, reply.text));
}

bool ProducerRuntime::IsStaleTarget(const XaddReply& reply) {
  // Redis' answer to `XADD key *` once the stream's last ID is the maximum (t_stream.c), and
  // NOMKSTREAM's nil for a missing key.
  return reply.kind == XaddReply::Kind::kNil ||
         (reply.kind == XaddReply::Kind::kError &&
          reply.text.find("exhausted the last possible ID") != std::string::npos);
}

void ProducerRuntime::OnStaleTarget() {
  core_.OnPublishError(PublishErrorKind::kStaleRouting, ports_->NowMs(false));
}

}  // namespace rsc::client
