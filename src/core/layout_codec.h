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

// RS6: the generation after a sealed one, as its seals carry it (the seal entry's `rsc-next`
// field, docs/redis-layout.md): "<generation> <hash> <first id> <count> <slots>", ids being
// consecutive from the first and <slots> the cluster slots of the keys by position,
// repeating with the period of the masters ("5460,10922,0"), or "-" for keys {P:id}: a
// key is the first tag that falls in its slot (ShardKeyInSlot), so slots name the keys.
// From any one seal of a layout found behind its streams the coordinator writes that
// generation back. nullopt when the keys do not follow that form (nothing to write; that
// layout cannot be rolled forward from its seals, only failed closed).
std::optional<std::string> EncodeSuccessor(const std::string& stream, const Generation& g);
// The generation (state PREPARING) a seal's `rsc-next` names; METADATA_UNREADABLE naming the
// fault for anything else (shard count out of 1..kMaxShards, ids past INT32_MAX, bad slots).
Result<Generation> DecodeSuccessor(const std::string& stream, std::string_view text);

}  // namespace rsc
