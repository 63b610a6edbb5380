#include "server/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace rsc {
namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Error Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidRequest, std::move(message));
}

// A tokens-file key: a role, and whether it names the previous token.
struct FileKey {
  Role role;
  bool previous;
};
std::optional<FileKey> ParseFileKey(std::string_view key) {
  for (Role r : kAllRoles) {
    if (key == RoleName(r)) return FileKey{r, false};
    if (key.size() == RoleName(r).size() + 9 && key.starts_with(RoleName(r)) &&
        key.substr(RoleName(r).size()) == ".previous") {
      return FileKey{r, true};
    }
  }
  return std::nullopt;
}

std::string KeyName(Role r, bool previous) {
  return std::string(RoleName(r)) + (previous ? ".previous" : "");
}

}  // namespace

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kMonitor:
      return "monitor";
    case Role::kMember:
      return "member";
  }
  return "admin";
}

const RoleTokens& TokenConfig::Of(Role r) const {
  switch (r) {
    case Role::kMonitor:
      return monitor;
    case Role::kMember:
      return member;
    case Role::kAdmin:
      break;
  }
  return admin;
}

RoleTokens& TokenConfig::Of(Role r) {
  return const_cast<RoleTokens&>(std::as_const(*this).Of(r));  // *this is not const here
}

bool TokenConfig::Empty() const {
  for (Role r : kAllRoles) {
    if (!Of(r).token.empty() || !Of(r).previous.empty()) return false;
  }
  return true;
}

bool IsValidToken(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenLength) return false;
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

Status ValidateTokens(const TokenConfig& tokens) {
  struct Named {
    std::string name;
    const std::string* token;
  };
  std::vector<Named> all;
  for (Role r : kAllRoles) {
    const RoleTokens& t = tokens.Of(r);
    for (bool previous : {false, true}) {
      const std::string& value = previous ? t.previous : t.token;
      if (value.empty()) continue;
      if (!IsValidToken(value)) {
        return Invalid(
            fmt::format("the {} token must be 1 to {} printable ASCII characters without blanks",
                        KeyName(r, previous), kMaxTokenLength));
      }
      all.push_back({KeyName(r, previous), &value});
    }
    if (t.token.empty() && !t.previous.empty()) {
      return Invalid(
          fmt::format("{}.previous is set but no {} token: a previous token is only "
                      "accepted next to the current one",
                      RoleName(r), RoleName(r)));
    }
  }
  for (Role r : {Role::kMonitor, Role::kMember}) {
    if (tokens.Configured(r) && !tokens.Configured(Role::kAdmin)) {
      return Invalid(fmt::format(
          "a {} token needs an admin token: without one every admin endpoint would be open "
          "to anybody (give --admin-token, RSC_ADMIN_TOKEN or admin= in the tokens file)",
          RoleName(r)));
    }
  }
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (*all[i].token == *all[j].token) {
        return Invalid(
            fmt::format("the {} and {} tokens are the same: every token must be "
                        "distinct (a token identifies its role)",
                        all[i].name, all[j].name));
      }
    }
  }
  return OkStatus();
}

Result<TokenConfig> ParseTokensFile(std::string_view text) {
  TokenConfig out;
  bool seen[3][2] = {};
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = TrimBlanks(line);
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      // Not quoted: the line may be a bare token.
      return Invalid(fmt::format("line {}: expected role=token", line_no));
    }
    const std::string_view key = TrimBlanks(line.substr(0, eq));
    const std::string_view token = TrimBlanks(line.substr(eq + 1));
    const std::optional<FileKey> k = ParseFileKey(key);
    if (!k) {
      // The key is not quoted either: a bare base64 token ending in '=' would be most of it.
      return Invalid(fmt::format(
          "line {}: unknown role (expected admin, monitor, member, or one of them followed "
          "by .previous)",
          line_no));
    }
    bool& was_seen = seen[static_cast<int>(k->role)][k->previous ? 1 : 0];
    if (was_seen) {
      return Invalid(
          fmt::format("line {}: {} is given twice", line_no, KeyName(k->role, k->previous)));
    }
    was_seen = true;
    if (token.empty()) {
      return Invalid(
          fmt::format("line {}: the {} token is empty", line_no, KeyName(k->role, k->previous)));
    }
    if (!IsValidToken(token)) {
      return Invalid(fmt::format(
          "line {}: the {} token must be 1 to {} printable ASCII characters without blanks "
          "(no comment after it on the same line)",
          line_no, KeyName(k->role, k->previous), kMaxTokenLength));
    }
    RoleTokens& t = out.Of(k->role);
    (k->previous ? t.previous : t.token) = std::string(token);
  }
  RSC_RETURN_IF_ERROR(ValidateTokens(out));
  return out;
}

Result<TokenConfig> LoadTokensFile(const std::string& path) {
  auto fail = [&path](const std::string& why) {
    return Invalid(fmt::format("tokens file {}: {}", path, why));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return fail(std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) != 0) {
    ::close(fd);
    return fail(
        fmt::format("mode {:03o} lets other users read or change it; the tokens grant "
                    "admin access: chmod 600 (or 640 for a group that runs the "
                    "coordinator)",
                    st.st_mode & 0777));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxTokensFileBytes) {
    ::close(fd);
    return fail(fmt::format("larger than {} bytes", kMaxTokensFileBytes));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(std::strerror(e));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTokensFileBytes) {
      ::close(fd);
      return fail(fmt::format("larger than {} bytes", kMaxTokensFileBytes));
    }
  }
  ::close(fd);
  Result<TokenConfig> parsed = ParseTokensFile(text);
  if (!parsed.ok()) return fail(parsed.error().message);
  return parsed;
}

Result<TokenConfig> CombineTokens(const TokenConfig& from_flags,
                                  const std::optional<TokenConfig>& from_file) {
  TokenConfig out = from_flags;
  if (from_file) {
    for (Role r : kAllRoles) {
      const RoleTokens& f = from_file->Of(r);
      if (f.token.empty() && f.previous.empty()) continue;
      if (from_flags.Configured(r)) {
        std::string env(RoleName(r));
        for (char& c : env) c = static_cast<char>(c - 'a' + 'A');
        return Invalid(fmt::format(
            "the {} token is given both by --{}-token (or RSC_{}_TOKEN) and in the tokens "
            "file: configure each role in one place",
            RoleName(r), RoleName(r), env));
      }
      out.Of(r) = f;
    }
  }
  RSC_RETURN_IF_ERROR(ValidateTokens(out));
  return out;
}

std::optional<std::string_view> BearerToken(std::string_view h) {
  constexpr std::string_view kScheme = "bearer";
  if (h.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = h[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return std::nullopt;
  }
  std::string_view token = h.substr(kScheme.size());
  if (token.empty() || (token[0] != ' ' && token[0] != '\t')) return std::nullopt;
  token = TrimBlanks(token);
  if (token.empty()) return std::nullopt;
  return token;
}

bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

Authorizer::Authorizer(TokenConfig tokens) : tokens_(std::move(tokens)) {
  // A monitor token without an admin token would leave every mutation open: never serve that.
  RSC_CHECK(ValidateTokens(tokens_).ok());
}

bool Authorizer::Roles::Has(Role r) const {
  switch (r) {
    case Role::kAdmin:
      return admin;
    case Role::kMonitor:
      return monitor;
    case Role::kMember:
      return member;
  }
  return false;
}

Authorizer::Roles Authorizer::Admitted(Access a) const {
  const bool admin = Configured(Role::kAdmin);
  const bool monitor = Configured(Role::kMonitor);
  const bool member = Configured(Role::kMember);
  switch (a) {
    case Access::kPublic:
      return {};
    case Access::kMetrics:
      return monitor ? Roles{true, true, false} : Roles{};
    case Access::kRead:
      if (monitor) return Roles{true, true, false};
      return admin ? Roles{true, false, false} : Roles{};
    case Access::kMember:
      return member ? Roles{true, false, true} : Roles{};
    case Access::kAdmin:
      return admin ? Roles{true, false, false} : Roles{};
  }
  return Roles{true, false, false};
}

std::optional<Role> Authorizer::Identify(std::string_view token, bool* previous) const {
  std::optional<Role> found;
  for (Role r : kAllRoles) {
    const RoleTokens& t = tokens_.Of(r);
    // Both compared whatever the first said: no early exit.
    const bool is_current = !t.token.empty() && ConstantTimeEquals(token, t.token);
    const bool is_previous = !t.previous.empty() && ConstantTimeEquals(token, t.previous);
    if (is_current || is_previous) {
      found = r;  // tokens are distinct (ValidateTokens): one match
      *previous = is_previous;
    }
  }
  return found;
}

Result<std::string_view> Authorizer::Check(Route route, std::string_view authorization,
                                           bool* previous) const {
  bool by_previous = false;
  if (previous != nullptr) *previous = false;
  const Roles admitted = Admitted(RequiredAccess(route));
  if (admitted.Open()) return kAnonymousActor;
  std::string needs;
  for (Role r : kAllRoles) {
    if (!admitted.Has(r)) continue;
    needs += (needs.empty() ? "" : " or ") + std::string(RoleName(r));
  }
  const std::optional<std::string_view> token = BearerToken(authorization);
  const std::optional<Role> role = token ? Identify(*token, &by_previous) : std::nullopt;
  if (!role) {
    return MakeError(ErrorCode::kUnauthorized,
                     fmt::format("{}: missing or wrong 'Authorization: Bearer' token (needs the "
                                 "{} token)",
                                 RouteName(route), needs));
  }
  if (!admitted.Has(*role)) {
    return MakeError(ErrorCode::kForbidden,
                     fmt::format("{}: the {} token does not allow this (needs the {} token)",
                                 RouteName(route), RoleName(*role), needs));
  }
  if (previous != nullptr) *previous = by_previous;
  return RoleName(*role);
}

std::string Authorizer::Summary() const {
  std::string s;
  for (Role r : kAllRoles) {
    if (!Configured(r)) continue;
    s += (s.empty() ? "" : ",") + std::string(RoleName(r));
  }
  return s.empty() ? "off" : s;
}

}  // namespace rsc
