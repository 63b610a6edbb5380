#pragma once
// JSON form of the stream layout (the `layout` field of redis-stream:coord:{P}:layout,
// SPEC D1). Decoding is strict like the aggregate codec: wrong types, unknown states,
// out-of-range numbers or broken invariants give METADATA_UNREADABLE naming the path, and
// the stream's operations fail closed (SPEC §7).

#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/layout.h"
#include "core/result.h"

namespace rsc {

boost::json::value LayoutToJson(const Layout& l);
std::string EncodeLayout(const Layout& l);
Result<Layout> DecodeLayout(std::string_view json);

// The fields of a stored layout hash as read (nullopt = field absent), checked the same way
// by every store: a known schemaVersion, an integer revision >= 1, a layout of `stream`.
struct LayoutHashFields {
  std::optional<std::string> layout, revision, schema_version;
};
Result<StoredLayout> DecodeLayoutHash(const std::string& stream, const LayoutHashFields& f);

}  // namespace rsc
