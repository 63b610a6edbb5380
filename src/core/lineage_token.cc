#include "core/lineage_token.h"

#include <fmt/format.h>

#include <boost/uuid/detail/sha1.hpp>

namespace rsc {
namespace {

std::array<uint8_t, 20> Sha1(std::string_view a, std::string_view b) {
  boost::uuids::detail::sha1 h;
  h.process_bytes(a.data(), a.size());
  h.process_bytes(b.data(), b.size());
  boost::uuids::detail::sha1::digest_type d;
  h.get_digest(d);
  std::array<uint8_t, 20> out{};
  for (size_t i = 0; i < 5; ++i) {  // the digest words are big-endian byte groups
    out[4 * i] = static_cast<uint8_t>(d[i] >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(d[i] >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(d[i] >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(d[i]);
  }
  return out;
}

std::string Tag(std::string_view key, const GroupKey& group, int64_t version,
                std::string_view nonce) {
  std::string msg = "rsc-lineage-v1";
  msg.push_back('\0');
  msg += group.stream;
  msg.push_back('\0');
  msg += group.group;
  msg.push_back('\0');
  msg += std::to_string(version);
  msg.push_back('\0');
  msg += nonce;
  const auto mac = HmacSha1(key, msg);
  std::string hex;
  for (size_t i = 0; i < kLineageTagHexLength / 2; ++i) hex += fmt::format("{:02x}", mac[i]);
  return hex;
}

}  // namespace

std::array<uint8_t, 20> HmacSha1(std::string_view key, std::string_view message) {
  constexpr size_t kBlock = 64;
  std::array<uint8_t, kBlock> k{};
  if (key.size() > kBlock) {
    const auto hk = Sha1(key, {});
    std::copy(hk.begin(), hk.end(), k.begin());
  } else {
    std::copy(key.begin(), key.end(), k.begin());
  }
  std::string ipad(kBlock, '\0'), opad(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = static_cast<char>(k[i] ^ 0x36);
    opad[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  const auto inner = Sha1(ipad, message);
  return Sha1(opad, std::string_view(reinterpret_cast<const char*>(inner.data()), inner.size()));
}

std::string IssueLineageToken(std::string_view key, const GroupKey& group, int64_t version,
                              std::string_view fresh_random) {
  const std::string_view nonce = fresh_random.substr(0, kLineageNonceLength);
  return std::string(nonce) + Tag(key, group, version, nonce);
}

bool VerifyLineageToken(std::string_view key, const GroupKey& group, int64_t version,
                        std::string_view token) {
  if (token.size() <= kLineageTagHexLength) return false;
  const std::string_view nonce = token.substr(0, token.size() - kLineageTagHexLength);
  const std::string_view tag = token.substr(token.size() - kLineageTagHexLength);
  const std::string want = Tag(key, group, version, nonce);
  unsigned diff = 0;  // constant time: a timing oracle would let a client guess a tag bytewise
  for (size_t i = 0; i < kLineageTagHexLength; ++i) {
    diff |= static_cast<unsigned>(static_cast<uint8_t>(want[i]) ^ static_cast<uint8_t>(tag[i]));
  }
  return diff == 0;
}

}  // namespace rsc
