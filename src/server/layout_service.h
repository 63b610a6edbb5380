#pragma once
// LayoutService: the shell around core/layout.h (SPEC D1–D3). Every change of a stream's
// layout is  load → Decide*(stored) → CompareAndSetLayout  and a conflict (another
// coordinator wrote first) starts again from a fresh load; it never overwrites.
//
// The layout key ({P}) and a group's keys ({P:G}) live in different cluster slots, so no
// script writes both. The order of the two single-key writes is what keeps them consistent
// (docs/design/resharding.md): a group is registered in the layout before its metadata key
// is created and removed after it is deleted, so `groups` is never missing a group that
// exists. A failure between the two leaves an extra name, never a missing one.
//
// Thread safety: all methods may be called concurrently (the CAS serializes writers).

#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/layout.h"
#include "core/store.h"
#include "core/stream_admin.h"

namespace rsc {

class LayoutService {
 public:
  // `streams` (optional) gives the cluster's slot map for a new stream's keys (D2).
  LayoutService(MetadataStore& store, Clock& clock, TokenSource& tokens, StreamAdmin* streams)
      : store_(store), clock_(clock), tokens_(tokens), streams_(streams) {}

  // The stream's layout; a v1 stream (groups, no layout) gets generation 0 derived from its
  // groups and written first. nullopt: the stream has neither. Errors: the store's, and
  // METADATA_UNREADABLE for a group of the stream that cannot be read while deriving.
  Result<std::optional<StoredLayout>> Load(const std::string& stream);

  // D3, before the group's metadata key is created: registers `group` and returns the shard
  // count to create it with. `shard_count` 0 adopts the stream's; a different count than
  // the ACTIVE generation's is LAYOUT_MISMATCH. A new stream gets generation 0 of
  // `shard_count` shards with `config`'s routing lease and refresh.
  // `written` (optional) receives the layout as stored after the call, for the group to
  // adopt at once (a stream resharded before has more than generation 0). A new stream's
  // keys are chosen for the cluster's masters (D2), or taken from `restored` (a restore onto
  // a stream without a layout: its shards hold its messages). With `restored` and a stored
  // layout, the count is not compared: CheckRestoreFitsLayout decides (core/layout.h).
  Result<int32_t> AddGroup(const std::string& stream, const std::string& group, int32_t shard_count,
                           const GroupConfig& config, StoredLayout* written = nullptr,
                           const GroupMetadata* restored = nullptr);

  // The cluster's masters and their slots (D2); empty on one server or without a StreamAdmin.
  Result<SlotPlacement> Placement();

  // After the group's metadata key was deleted. A stream without a layout: nothing to do.
  Status RemoveGroup(const std::string& stream, const std::string& group);

 private:
  // The v1 groups of `stream` as the index and their aggregates show them.
  Result<std::vector<ExistingGroup>> FindV1Groups(const std::string& stream);

  MetadataStore& store_;
  Clock& clock_;
  TokenSource& tokens_;
  StreamAdmin* streams_;
};

}  // namespace rsc
