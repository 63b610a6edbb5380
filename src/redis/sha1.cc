#include "redis/sha1.h"

#include <fmt/format.h>

#include <boost/uuid/detail/sha1.hpp>

namespace rsc::redis {

// Boost's SHA-1 (header-only, already a dependency) rather than our own: the digest only
// names scripts in Redis's cache, so a detail-namespace API is an acceptable risk; the
// known-answer test in tests/redis pins its behaviour across Boost upgrades.
std::string Sha1Hex(std::string_view data) {
  boost::uuids::detail::sha1 h;
  h.process_bytes(data.data(), data.size());
  boost::uuids::detail::sha1::digest_type d;
  h.get_digest(d);
  return fmt::format("{:08x}{:08x}{:08x}{:08x}{:08x}", d[0], d[1], d[2], d[3], d[4]);
}

}  // namespace rsc::redis
