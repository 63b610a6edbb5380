#include "redis/keys.h"

#include <fmt/format.h>

namespace rsc::redis {

std::string MetadataKey(const GroupKey& key) {
  return fmt::format("{}{{{}}}:metadata", kKeyPrefix, key.Tag());
}

std::string LivenessKey(const GroupKey& key) {
  return fmt::format("{}{{{}}}:liveness", kKeyPrefix, key.Tag());
}

std::string LockKey(const GroupKey& key) {
  return fmt::format("{}{{{}}}:lock", kKeyPrefix, key.Tag());
}

std::string LayoutKey(const std::string& stream) {
  return fmt::format("{}{{{}}}:layout", kKeyPrefix, stream);
}

std::optional<GroupKey> ParseIndexMember(std::string_view member) {
  size_t colon = member.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == member.size()) {
    return std::nullopt;
  }
  return GroupKey{std::string(member.substr(0, colon)), std::string(member.substr(colon + 1))};
}

std::optional<GroupKey> ParseMetadataKey(std::string_view key) {
  constexpr std::string_view kSuffix = "}:metadata";
  if (!key.starts_with(kKeyPrefix)) return std::nullopt;
  key.remove_prefix(kKeyPrefix.size());
  if (!key.starts_with('{') || !key.ends_with(kSuffix)) return std::nullopt;
  key.remove_prefix(1);
  key.remove_suffix(kSuffix.size());
  return ParseIndexMember(key);
}

}  // namespace rsc::redis
