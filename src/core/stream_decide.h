#pragma once
// Decisions on a stream's own endpoints (SPEC D4): the stream's routing answer and
// PATCH /v1/streams/{P}. Pure: the shell (server/group_service.cc) loads the layout, calls
// these, writes the result with a compare-and-set on the layout's revision.

#include <cstdint>
#include <optional>
#include <string>

#include "core/decide.h"
#include "core/layout.h"
#include "core/protocol.h"
#include "core/result.h"

namespace rsc {

// GET /v1/streams/{P}/routing (SPEC D4): the ACTIVE generation's shards with the layout's
// version and lineage as metadataVersion/lineage, its generation, the layout's revision and
// its routing lease and refresh interval. `sync` when (observedVersion, lineage) is ahead
// of the layout (a higher version, or the same version with another non-empty lineage: the
// layout was rolled back, M1/M8 for the layout), reported as an event; nothing is written.
Decision<RoutingResponse> DecideStreamRouting(const StoredLayout& stored, int64_t observed_version,
                                              const std::string& observed_lineage);

// PATCH /v1/streams/{P} (SPEC D4): the layout with the request's routing lease and refresh
// interval, each 10 ms … 24 h and refresh < lease (as a group's config, docs/protocol.md
// 7.1). nullopt: the values are the stored ones (nothing to write). The caller checks
// expectedLayoutRevision against the stored revision before and by its CAS.
Result<std::optional<Layout>> DecidePatchStream(const Layout& stored, const PatchStreamRequest& req,
                                                const std::string& fresh_lineage);

}  // namespace rsc
