#pragma once
// Human renderings of the coordinator's answers (docs/cli.md shows examples). `--json`
// output never goes through here: it is the server's JSON as sent.

#include <cstdint>
#include <string>
#include <vector>

#include "core/protocol.h"

namespace rsc::cli {

// [0,1,2,5,7,8] -> "0-2,5,7-8"; empty -> "-".
std::string FormatShardSet(const std::vector<int32_t>& shards);

// 9985 -> "9.985s"; 0 -> "0s".
std::string FormatLeaseMs(int64_t ms);

// Header (revision, versions, lineage, epochs, shard count, correction round, config),
// the members table and the shards table (owner, and the target while a shard moves).
std::string FormatGroupView(const GroupView& view);

// The stream's layout (GET /v1/streams/{P}): a header and one row per generation.
std::string FormatStreamView(const StreamView& view);

// How far a reshard to `generation` has come (rsc reshard waits on it): the generation's
// state, then per group of the stream one line — parents completed, children being read,
// what the children still wait for. `done` once the generation is no longer PREPARING and
// every group with a live member reads every child (groups with no live member are shown,
// never waited for: SPEC RS1). `views` are the groups' views as far as they could be read.
struct ReshardProgress {
  bool done = false;
  bool superseded = false;  // done because a later reshard took over (or it is gone since)
  std::string text;
};
// `now_ms`: this machine's wall clock (whether a new generation's routing-lease wait is over).
ReshardProgress DescribeReshardProgress(const StreamView& stream, int32_t generation,
                                        const std::vector<GroupView>& views, int64_t now_ms);

// One line per group: "STREAM  GROUP".
std::string FormatGroupList(const std::vector<GroupKey>& groups);

}  // namespace rsc::cli
