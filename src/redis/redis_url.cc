#include "redis/redis_url.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

namespace rsc::redis {
namespace {

constexpr std::string_view kScheme = "redis://";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; returns false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexValue(in[i + 1]);
    int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// The URL with the userinfo's password part replaced, for error messages.
std::string RedactRaw(std::string_view url) {
  size_t start = url.find("://");
  start = start == std::string_view::npos ? 0 : start + 3;
  size_t at = url.find('@', start);
  if (at == std::string_view::npos) return std::string(url);
  std::string_view userinfo = url.substr(start, at - start);
  size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) return std::string(url);
  return fmt::format("{}{}:***{}", url.substr(0, start), userinfo.substr(0, colon), url.substr(at));
}

bool ParseInt(std::string_view s, int min, int max, int* out) {
  if (s.empty()) return false;
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < min || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

namespace {

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

// One "host[:port]" of the authority; an error text when malformed.
std::optional<std::string> ParseNode(std::string_view authority, RedisUrl::Node* out) {
  std::string_view port_text;
  if (authority.starts_with('[')) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return "unterminated '[' in IPv6 host";
    out->host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return "unexpected text after IPv6 host";
      port_text = after.substr(1);
      if (port_text.empty()) return "empty port after ':'";
    }
  } else {
    size_t colon = authority.rfind(':');
    out->host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return "empty port after ':'";
    }
    if (out->host.find(':') != std::string::npos) {
      return "IPv6 hosts must be written in brackets, e.g. redis://[::1]:6379";
    }
  }
  if (out->host.empty()) return "missing host";
  if (!port_text.empty() && !ParseInt(port_text, 1, 65535, &out->port)) {
    return fmt::format("port '{}' is not a number in 1..65535", port_text);
  }
  return std::nullopt;
}

}  // namespace

std::string RedisUrl::Address() const { return JoinHostPort(host, port); }

std::string RedisUrl::Redacted() const {
  std::string auth;
  if (!user.empty() && !password.empty()) {
    auth = fmt::format("{}:***@", user);
  } else if (!user.empty()) {
    auth = fmt::format("{}@", user);
  } else if (!password.empty()) {
    auth = ":***@";
  }
  std::string nodes = Address();
  for (const Node& n : more_nodes) nodes += "," + JoinHostPort(n.host, n.port);
  return fmt::format("redis://{}{}/{}", auth, nodes, db);
}

Result<RedisUrl> ParseRedisUrl(std::string_view url) {
  auto fail = [&](std::string_view what) {
    return MakeError(ErrorCode::kInvalidRequest,
                     fmt::format("invalid Redis URL '{}': {}", RedactRaw(url), what));
  };
  if (url.starts_with("rediss://")) {
    return fail("TLS (rediss://) is not supported by this build; use redis://");
  }
  if (url.starts_with("unix://") || url.starts_with("redis+unix://")) {
    return fail("unix sockets are not supported; use redis://host:port");
  }
  if (!url.starts_with(kScheme)) return fail("expected redis://[user[:password]@]host[:port][/db]");
  std::string_view rest = url.substr(kScheme.size());

  RedisUrl out;
  // Userinfo ends at the LAST '@' before the path so an unescaped '@' in a password still
  // parses the way the operator meant.
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    std::string_view user = userinfo.substr(0, colon);
    if (!PercentDecode(user, &out.user)) return fail("malformed %-escape in user name");
    if (colon != std::string_view::npos) {
      if (!PercentDecode(userinfo.substr(colon + 1), &out.password)) {
        return fail("malformed %-escape in password");
      }
      if (out.password.empty()) return fail("empty password after ':'");
    } else if (out.user.empty()) {
      return fail("empty user information before '@'");
    }
  }

  // Hosts, each with an optional port, separated by commas (a cluster's seed nodes).
  std::vector<RedisUrl::Node> nodes;
  for (size_t start = 0;;) {
    const size_t comma = authority.find(',', start);
    RedisUrl::Node node;
    if (std::optional<std::string> bad = ParseNode(authority.substr(start, comma - start), &node)) {
      return fail(*bad);
    }
    nodes.push_back(std::move(node));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  out.host = nodes[0].host;
  out.port = nodes[0].port;
  out.more_nodes.assign(nodes.begin() + 1, nodes.end());

  // Database number; query strings are refused rather than ignored.
  if (path.find('?') != std::string_view::npos) return fail("query parameters are not supported");
  if (path.size() > 1) {
    if (!ParseInt(path.substr(1), 0, 1 << 20, &out.db)) {
      return fail(fmt::format("database '{}' is not a non-negative integer", path.substr(1)));
    }
  }
  return out;
}

}  // namespace rsc::redis
