#pragma once
// Named types for numbers and ids that must never be mixed (Redpanda style).

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace rsc {

template <class Tag, class Rep>
class Named {
 public:
  using rep = Rep;
  constexpr Named() = default;
  constexpr explicit Named(Rep v) : v_(v) {}
  constexpr Rep value() const { return v_; }
  constexpr auto operator<=>(const Named&) const = default;

 private:
  Rep v_{};
};

using ShardId = Named<struct ShardIdTag, int32_t>;
using MemberEpoch = Named<struct MemberEpochTag, int64_t>;
using AssignmentEpoch = Named<struct AssignmentEpochTag, int64_t>;
using MetadataVersion = Named<struct MetadataVersionTag, int64_t>;
using StoreRevision = Named<struct StoreRevisionTag, int64_t>;

// Client-generated member ids (UUIDs) are opaque strings; the wrapper stops them being
// confused with instance ids or stream names.
class MemberId {
 public:
  MemberId() = default;
  explicit MemberId(std::string v) : v_(std::move(v)) {}
  const std::string& str() const { return v_; }
  bool empty() const { return v_.empty(); }
  auto operator<=>(const MemberId&) const = default;

 private:
  std::string v_;
};

// Identifies one group: stream prefix P and consumer group G (SPEC R2.1, R2.4).
struct GroupKey {
  std::string stream;
  std::string group;
  auto operator<=>(const GroupKey&) const = default;
  // "P:G", the hash-tag body used by every key of this group.
  std::string Tag() const { return stream + ":" + group; }
};

// Time in milliseconds. The cores take `now` as an argument; only shells read clocks.
using TimeMs = int64_t;

}  // namespace rsc

template <>
struct std::hash<rsc::MemberId> {
  size_t operator()(const rsc::MemberId& m) const noexcept {
    return std::hash<std::string>{}(m.str());
  }
};
