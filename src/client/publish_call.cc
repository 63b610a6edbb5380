#include "client/publish_call.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace rsc::client {
namespace {

ProducerError Err(ProducerErrorCode code, std::string message) {
  return ProducerError{code, std::move(message)};
}

// Redis < 6.2 parses NOMKSTREAM as the entry ID.
bool UnknownNoMkStream(const std::string& error) {
  return error.find("Invalid stream ID") != std::string::npos ||
         error.find("syntax error") != std::string::npos;
}

// An XADD's reply as ProducerRuntime::PublishOutcome reads it.
XaddReply ReadXadd(Result<redis::Reply>& r) {
  if (!r.ok()) return {XaddReply::Kind::kNoReply, r.error().message};
  if (r->IsNil()) return {XaddReply::Kind::kNil, "nil"};
  if (r->IsString() || r->IsStatus()) return {XaddReply::Kind::kId, std::move(r->str)};
  if (r->IsError()) return {XaddReply::Kind::kError, std::move(r->str)};
  return {XaddReply::Kind::kUnexpected, r->DebugString()};
}

}  // namespace

std::vector<std::string> XaddArgs(const std::string& stream, const StreamFields& fields,
                                  bool nomkstream) {
  std::vector<std::string> args{"XADD", stream};
  if (nomkstream) args.emplace_back("NOMKSTREAM");
  args.emplace_back("*");
  for (const auto& [f, v] : fields) {
    args.push_back(f);
    args.push_back(v);
  }
  return args;
}

PublishCall::PublishCall(std::vector<std::string_view> keys,
                         std::vector<const StreamFields*> fields)
    : keys_(std::move(keys)),
      fields_(std::move(fields)),
      results_(keys_.size(), Err(ProducerErrorCode::kUnknownResult, "not attempted")),
      routes_(keys_.size()) {
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (fields_[i]->empty()) {
      results_[i] = Err(ProducerErrorCode::kInvalidArgument,
                        "a stream entry needs at least one field/value pair");
    } else {
      todo_.push_back(i);
    }
  }
  if (todo_.empty()) stage_ = Stage::kDone;
}

std::vector<std::string_view> PublishCall::RouteKeys() const {
  std::vector<std::string_view> out;
  out.reserve(todo_.size());
  for (size_t i : todo_) out.push_back(keys_[i]);
  return out;
}

std::vector<redis::KeyedCommand> PublishCall::Write(std::vector<ProducerResult<RouteTarget>> routes,
                                                    const Status& opened, bool nomkstream) {
  std::vector<redis::KeyedCommand> cmds;
  sent_.clear();
  lease_end_ms_ = std::numeric_limits<TimeMs>::max();
  for (size_t j = 0; j < todo_.size(); ++j) {
    const size_t i = todo_[j];
    if (!routes[j].ok()) {
      results_[i] = std::move(routes[j]).error();
      continue;
    }
    if (!opened.ok()) {
      results_[i] = Err(ProducerErrorCode::kRedisUnavailable, opened.error().message);
      continue;
    }
    RouteTarget& route = routes[j].value();
    cmds.push_back({route.stream, XaddArgs(route.stream, *fields_[i], nomkstream)});
    sent_.push_back(i);
    lease_end_ms_ = std::min(lease_end_ms_, route.lease_end_ms);
    routes_[i] = std::move(route);
  }
  todo_.clear();
  if (cmds.empty()) stage_ = Stage::kDone;
  return cmds;
}

PublishCall::Outcome PublishCall::OnReplies(std::vector<Result<redis::Reply>> replies,
                                            bool lease_ended, bool* nomkstream) {
  Outcome out;
  std::vector<size_t> again;    // the server turned NOMKSTREAM down: nothing written
  std::vector<size_t> refused;  // a stale target: nothing written
  const bool with_nomkstream = *nomkstream;
  for (size_t k = 0; k < sent_.size(); ++k) {
    const size_t i = sent_[k];
    const RouteTarget& route = *routes_[i];
    Result<redis::Reply>& r = replies[k];
    if (!r.ok() && r.error().code != ErrorCode::kUnknownResult) {
      // Never sent: the connection failed first, or the routing lease ended meanwhile.
      results_[i] = lease_ended ? Err(ProducerErrorCode::kStaleRouting,
                                      "not sent: the routing lease ended while connecting to Redis")
                                : Err(ProducerErrorCode::kRedisUnavailable, r.error().message);
      continue;
    }
    if (with_nomkstream && r.ok() && r->IsError() && UnknownNoMkStream(r->str)) {
      // Send without it from now on (a missing key is then created, as before D3).
      *nomkstream = false;
      again.push_back(i);
      continue;
    }
    const XaddReply reply = ReadXadd(r);
    results_[i] = ProducerRuntime::PublishOutcome(reply, route.stream);
    if (ProducerRuntime::IsStaleTarget(reply)) {
      ++(reply.kind == XaddReply::Kind::kNil ? out.missing : out.sealed);
      refused.push_back(i);
      refused_version_ = route.metadata_version;
      refused_lease_end_ms_ = route.lease_end_ms;
    }
    if (results_[i].ok()) out.written.push_back(i);
  }
  sent_.clear();
  if (!again.empty()) {
    // Sent again at once, with the refused ones among them if any (input order).
    again.insert(again.end(), refused.begin(), refused.end());
    std::sort(again.begin(), again.end());
    todo_ = std::move(again);
    stage_ = Stage::kRoute;
  } else if (!refused.empty()) {
    // The lease of the routing the first wait began under bounds every retry.
    if (!retry_until_) retry_until_ = refused_lease_end_ms_;
    refused_ = std::move(refused);
    stage_ = Stage::kWait;
  } else {
    stage_ = Stage::kDone;
  }
  return out;
}

PublishCall::Wait PublishCall::OnWait(TimeMs now, std::optional<int64_t> routing_version) {
  Wait w;
  if (stage_ != Stage::kWait || !retry_until_ || now >= *retry_until_) {
    stage_ = Stage::kDone;
    return w;  // kGiveUp: the refused entries keep their kStaleRouting
  }
  if (routing_version && *routing_version != refused_version_) {
    todo_ = std::move(refused_);
    refused_.clear();
    stage_ = Stage::kRoute;
    w.what = Wait::What::kRouteAgain;
    return w;
  }
  w.what = Wait::What::kRefresh;
  w.sleep_ms = std::max<TimeMs>(1, std::min<TimeMs>(kSealRetryMs, *retry_until_ - now));
  return w;
}

}  // namespace rsc::client
