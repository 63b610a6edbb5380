#pragma once
// JSON codec of the group aggregate (the `aggregate` hash field) and of exports.
// Decoding is strict: wrong types, unknown enum values, out-of-range numbers, or broken
// invariants (CheckInvariants) yield METADATA_UNREADABLE with a message naming the path.

#include <string>
#include <string_view>

#include "core/metadata.h"
#include "core/result.h"

namespace rsc {

std::string EncodeAggregate(const GroupMetadata& m);
Result<GroupMetadata> DecodeAggregate(std::string_view json);

// Export document: {"schemaVersion":1,"layoutVersion":1,"revision":N,"aggregate":{...}}
std::string EncodeExport(const GroupMetadata& m, StoreRevision revision);
struct ExportDoc {
  GroupMetadata meta;
  StoreRevision revision;
};
// Errors: INVALID_REQUEST (not an export, or unknown versions; message says which).
Result<ExportDoc> DecodeExport(std::string_view json);

}  // namespace rsc
