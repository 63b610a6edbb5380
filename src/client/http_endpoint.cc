#include "client/http_endpoint.h"

#include <charconv>

#include "core/check.h"

namespace rsc::client {

bool IsValidBearerToken(std::string_view token) {
  if (token.empty() || token.size() > 1024) return false;
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::vector<std::pair<std::string, std::string>> BearerHeaders(const std::string& token) {
  if (token.empty()) return {};
  RSC_CHECK(IsValidBearerToken(token));  // no CR/LF can reach the request
  return {{"Authorization", "Bearer " + token}};
}

std::string HttpEndpoint::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<HttpEndpoint> ParseHttpEndpoint(std::string_view text, std::string* error) {
  std::string_view s = text;
  if (s.starts_with("https://")) {
    *error = "coordinator endpoint '" + std::string(text) + "': https is not supported";
    return std::nullopt;
  }
  if (s.starts_with("http://")) s.remove_prefix(7);
  if (s.ends_with("/")) s.remove_suffix(1);
  HttpEndpoint ep;
  std::string_view port_text;
  if (s.starts_with("[")) {
    size_t close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      *error = "coordinator endpoint '" + std::string(text) + "': expected [host]:port";
      return std::nullopt;
    }
    ep.host = std::string(s.substr(1, close - 1));
    port_text = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      *error = "coordinator endpoint '" + std::string(text) + "': expected host:port";
      return std::nullopt;
    }
    ep.host = std::string(s.substr(0, colon));
    port_text = s.substr(colon + 1);
  }
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), ep.port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || ep.port < 1 ||
      ep.port > 65535 || ep.host.empty() || ep.host.find('/') != std::string::npos) {
    *error = "coordinator endpoint '" + std::string(text) + "': bad host or port";
    return std::nullopt;
  }
  return ep;
}

}  // namespace rsc::client
