#include "core/shard_keys.h"

#include <fmt/format.h>

#include "core/key_slot.h"
#include "core/metadata.h"

namespace rsc {

namespace {

// Tags are tried in order 0, 1, …, z, 10, … (base 36). A slot is one of 16,384 and the CRC
// of the varying suffix is close to uniform, so about 16,384 tries find one; the bound is
// for the impossible case, which falls back to the untagged key (correct, only unbalanced).
constexpr uint32_t kMaxTagTries = 1u << 22;
constexpr size_t kMaxTagLength = 8;

std::string Base36(uint32_t n) {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[n % 36]);
    n /= 36;
  } while (n != 0);
  return out;
}

}  // namespace

std::string ShardKeyInSlot(const std::string& stream, int32_t id, int slot) {
  const std::string prefix = fmt::format("{}:{}.", stream, id);
  const uint16_t prefix_crc = Crc16(prefix);
  for (uint32_t t = 0; t < kMaxTagTries; ++t) {
    const std::string tag = Base36(t);
    if (Crc16(tag, prefix_crc) % kClusterSlots == slot) return "{" + prefix + tag + "}";
  }
  return ShardStreamKey(stream, id);
}

std::vector<std::string> ChooseShardKeys(const std::string& stream, const std::vector<int32_t>& ids,
                                         const SlotPlacement& masters) {
  std::vector<std::string> keys;
  keys.reserve(ids.size());
  const uint16_t h = Crc16(stream);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (masters.empty()) {
      keys.push_back(ShardStreamKey(stream, ids[i]));
      continue;
    }
    const std::vector<int>& slots = masters[(h + i) % masters.size()];
    if (slots.empty()) {
      keys.push_back(ShardStreamKey(stream, ids[i]));
      continue;
    }
    keys.push_back(ShardKeyInSlot(stream, ids[i], slots[h % slots.size()]));
  }
  return keys;
}

bool IsShardKeyOf(std::string_view stream, int32_t id, std::string_view key) {
  const std::string prefix = fmt::format("{{{}:{}", stream, id);
  if (key.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = key.substr(prefix.size());
  if (rest == "}") return true;
  if (rest.size() < 3 || rest.front() != '.' || rest.back() != '}') return false;
  const std::string_view tag = rest.substr(1, rest.size() - 2);
  if (tag.size() > kMaxTagLength) return false;
  for (char c : tag) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'))) return false;
  }
  return true;
}

}  // namespace rsc
