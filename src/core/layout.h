#pragma once
// The stream layout (SPEC §13.1 D1–D3, docs/design/resharding.md): one record per stream
// `P`, shared by every group of `P`, stored in redis-stream:coord:{P}:layout. It says which
// generations of shards the stream has, which one producers write (ACTIVE), and which groups
// read it. Pure data and pure decisions; the JSON form is in layout_codec.h.
//
// A group created on a stream adopts its layout (same shard count, or 409 LAYOUT_MISMATCH);
// a v1 stream gets its generation 0 derived from its groups; resharding adds generations
// (RS1–RS5). Shard keys are chosen by core/shard_keys.h (D2).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/metadata.h"
#include "core/result.h"
#include "core/shard_keys.h"

namespace rsc {

// Version of the stored layout hash (`schemaVersion` field). A coordinator refuses a
// layout whose schemaVersion it does not know (fails closed, SPEC §7).
inline constexpr int kLayoutSchemaVersion = 1;
// Groups one stream may have (the layout lists them all).
inline constexpr size_t kMaxGroupsPerStream = 1024;
// Generations not yet RETIRED a stream may have (RS5): a reshard beyond is refused with
// RESHARD_IN_PROGRESS until the oldest retires.
inline constexpr size_t kMaxUnretiredGenerations = 4;

enum class GenerationState { kPreparing, kActive, kSealed, kRetired };
std::string_view GenerationStateName(GenerationState s);
std::optional<GenerationState> ParseGenerationState(std::string_view s);

struct LayoutShard {
  int32_t id = 0;
  std::string stream;  // the Redis key, published to clients (they never compute it, D2)
  bool operator==(const LayoutShard&) const = default;
};

struct Generation {
  int32_t generation = 0;
  std::string hash = "jump-xxh64";
  GenerationState state = GenerationState::kActive;
  std::vector<LayoutShard> shards;  // ascending id; the routing hash picks a position
  // When it became RETIRED (RS5; coordinator wall clock, ms). Its keys are deleted, and the
  // generation dropped from the layout, `retiredRetentionMs` later. 0: not retired, or
  // retired by a coordinator that did not record it (stamped by the next tick).
  int64_t retired_ms = 0;
  // RS2's routing-lease wait (docs/protocol.md 7.5 step 1). When a reshard wrote it
  // PREPARING (coordinator wall clock, ms), and how long after that its parents are sealed
  // and its keys created: the longest routing lease then in force (the stream's and every
  // group's) plus kPrepareMarginMs. A Redis rolled back to before an earlier reshard that
  // used the same ids (a snapshot restore) has no trace of it, but producers may still
  // route by it until their lease ends, and would write into the keys once they exist
  // again. Both 0: no wait (a generation rolled forward from its seals: its reshard
  // waited). Only a PREPARING generation has them.
  int64_t prepared_ms = 0;
  int64_t routing_wait_ms = 0;
  bool operator==(const Generation&) const = default;
};

// The skew between coordinators' wall clocks that a PREPARING generation's wait absorbs.
inline constexpr int64_t kPrepareMarginMs = 1000;
// The longest routing-lease wait a layout may record: the longest routing lease a config may
// set, plus the margin.
inline constexpr int64_t kMaxRoutingWaitMs = kMaxDurationMs + kPrepareMarginMs;

struct Layout {
  std::string stream;
  // M1/M8 for the layout itself: +1 on every write, a fresh token per version. Starts
  // above every group's metadataVersion when the layout is created (D1).
  int64_t version = 1;
  std::string lineage;
  int64_t routing_lease_ms = 30000;
  int64_t routing_refresh_ms = 5000;
  std::vector<std::string> groups;      // sorted; the authoritative list of the stream's groups
  std::vector<Generation> generations;  // ascending generation
  bool operator==(const Layout&) const = default;

  const Generation* Active() const;
  bool HasGroup(std::string_view group) const;
};

// The stored record: the layout plus the hash's CAS revision.
struct StoredLayout {
  StoreRevision revision;
  Layout layout;
};

// Structural rules every stored layout satisfies: exactly one ACTIVE generation, ascending
// generations and ids, ids unique across generations, non-empty keys, groups sorted,
// unique and valid names, counters within kMaxCounter. The message names the broken rule.
Status CheckLayoutInvariants(const Layout& l);

// A group of stream `P` as found before its stream had a layout (a v1 group).
struct ExistingGroup {
  std::string group;
  int32_t shard_count = 0;
  int64_t metadata_version = 0;
  GroupConfig config;
  // Its generation-0 shards (ids and keys) and the newest generation it has shards of.
  std::vector<LayoutShard> generation0;
  int32_t newest_generation = 0;
};
// What a group's aggregate says for deriving its stream's generation 0.
ExistingGroup DescribeExistingGroup(const GroupMetadata& m);

// Generation 0 of a stream (D2). `groups` are the groups found for the stream without a
// layout (v1 groups, or a restored one); N is the largest of their shard counts and the
// keys are theirs ({P:s} for a v1 group). Without groups (a new stream) N is `shard_count`
// and the keys are chosen for `placement` (core/shard_keys.h). The version starts above
// every group's metadataVersion.
// Errors: INVALID_REQUEST (a new stream without a shard count, or one out of range);
// METADATA_UNREADABLE (fail closed, RS6) when a group has shards of a later generation —
// the stream was resharded and its layout is lost: generation 0 rebuilt from the groups
// could route producers to sealed or retired keys — or when two groups name different keys
// for one shard.
Result<Layout> DeriveGeneration0(const std::string& stream, int32_t shard_count,
                                 const GroupConfig& config,
                                 const std::vector<ExistingGroup>& groups,
                                 const SlotPlacement& placement, const std::string& fresh_lineage);

// D3: registers `group` in the layout (before its metadata key is created). A shard count
// of 0 adopts the layout's; another one than the ACTIVE generation's is refused with
// LAYOUT_MISMATCH. Returns the layout to write, or nullopt when `group` is already listed
// (nothing to write). `shard_count_out` receives the count the group is created with.
Result<std::optional<Layout>> DecideAddGroup(const Layout& stored, const std::string& group,
                                             int32_t shard_count, int32_t* shard_count_out,
                                             const std::string& fresh_lineage);

// D3 for a restore: the restored aggregate `restored` (an export, possibly from before a
// reshard) may join a stream whose layout moved on, as long as it describes this stream's
// history: each of its shards is in the layout under the same generation and key, or
// belongs to a generation the layout already dropped (retired, keys deleted). Its shard
// count need not be the ACTIVE generation's: the group adopts the layout right after the
// restore, as a stream tick would (children wait for their parents, RS3). Anything else —
// a shard of another generation or key, an ACTIVE generation newer than the layout's
// (the layout is behind, RS6) — is LAYOUT_MISMATCH, naming the first difference.
Status CheckRestoreFitsLayout(const Layout& l, const GroupMetadata& restored);

// Removes `group` after its metadata key was deleted; nullopt when it is not listed.
std::optional<Layout> DecideRemoveGroup(const Layout& stored, const std::string& group,
                                        const std::string& fresh_lineage);

// RS1: a new generation of `shard_count` shards in state PREPARING, with ids above every id
// the layout holds (ids of generations already dropped were lower still) and keys chosen for
// `placement` (D2, core/shard_keys.h: {P:id} on one server, spread over the masters of a
// cluster). Refused:
// a count outside 1..kMaxShards (INVALID_REQUEST); a generation still PREPARING or
// kMaxUnretiredGenerations unretired ones (RESHARD_IN_PROGRESS).
Result<Layout> DecideReshard(const Layout& stored, int32_t shard_count,
                             const SlotPlacement& placement, const std::string& fresh_lineage);

// RS2, once every shard of the ACTIVE generation is sealed: the PREPARING generation becomes
// ACTIVE and the ACTIVE one SEALED. nullopt when no generation is PREPARING.
std::optional<Layout> DecideActivate(const Layout& stored, const std::string& fresh_lineage);

// RS5: the SEALED `generation`, complete for every group, becomes RETIRED at `now_ms`.
// nullopt when it is not SEALED (already retired, or never sealed) or not the oldest
// unretired generation (generations retire in order).
std::optional<Layout> DecideRetire(const Layout& stored, int32_t generation, int64_t now_ms,
                                   const std::string& fresh_lineage);

// RS5, after the retention: what a stream tick does with RETIRED generations at `now_ms`.
// `stamp`: a layout that records `now_ms` as the retirement time of RETIRED generations
// without one (written by a coordinator before the field existed) — the retention then
// counts from now. `drop`: the oldest RETIRED generation retired at least `retention_ms`
// ago; the caller deletes its keys, then writes DecideDropRetired. Otherwise both empty.
struct RetiredWork {
  std::optional<Layout> stamp;
  std::optional<Generation> drop;
};
RetiredWork DecideRetiredWork(const Layout& stored, int64_t now_ms, int64_t retention_ms,
                              const std::string& fresh_lineage);
// The layout without RETIRED `generation` (its keys are deleted); nullopt when it is not
// the oldest generation or not RETIRED. Ids and generation numbers of later generations are
// higher, so D2 (ids above every id ever used) holds without it.
std::optional<Layout> DecideDropRetired(const Layout& stored, int32_t generation,
                                        const std::string& fresh_lineage);

// How long after `g.prepared_ms` PREPARING generation `g` of `l` waits: its routingWaitMs,
// or for a layout written before that field the stream's lease (capped) plus the margin.
int64_t RoutingWaitMs(const Layout& l, const Generation& g);
// RS2's routing-lease wait for PREPARING generation `g` of `l` at `now_ms`: kReady once it is
// over (or there is none), kWaiting before; kRestamp when `g` was stamped more than the
// margin ahead of `now_ms` (a clock ahead of this one, or this clock went back): the caller
// writes DecideRestampPrepared's layout (the wait from now, by this clock) so a bad clock
// delays a reshard by at most one more wait, never indefinitely.
enum class RoutingWait { kReady, kWaiting, kRestamp };
RoutingWait DecideRoutingWait(const Layout& l, const Generation& g, int64_t now_ms);
// The layout with its PREPARING generation stamped at `now_ms` (kRestamp above).
Layout DecideRestampPrepared(const Layout& stored, int64_t now_ms,
                             const std::string& fresh_lineage);

// RS6: a layout found behind its streams. Run while no generation is PREPARING (otherwise
// the tick's seal-and-activate continues the reshard, nothing is behind). `active_tops`: the
// ends (StreamTop, below) of the ACTIVE generation's shard streams, in shard order; `above`: the
// end of the key a next generation's first shard would get (ChooseShardKeys for the highest id +
// 1).
// - Nothing sealed, `above` empty or missing: in step, both fields empty.
// - A seal of the ACTIVE generation naming its successor (`rsc-next`, every such seal
//   agreeing): `roll_forward`, the layout with that generation back as PREPARING, for the
//   seal-and-activate pass to finish (confirm, seal the rest, activate: RS2 unchanged).
// - Otherwise (seals naming nothing, disagreeing or with another generation, a successor
//   that does not fit the layout, entries above the highest id with no seal): `behind`, the
//   reason. The caller fails the stream's routing closed with it (METADATA_UNREADABLE): the
//   layout would route producers to sealed keys or past messages no group reads.
struct BehindDecision {
  std::optional<Layout> roll_forward;
  std::optional<std::string> behind;
};
// RS6: the end of one shard stream as the coordinator reads it (XINFO STREAM, through
// StreamAdmin::Tops): whether a seal closed it, and what the seal says of the generation after.
struct StreamTop {
  bool exists = false;
  int64_t length = 0;
  bool sealed = false;           // its last ID is the maximum (a seal, or a retired tombstone)
  int32_t seal_generation = -1;  // the last entry's `rsc-seal <g>`, when that entry is the seal
  std::string successor;         // the seal's `rsc-next` (layout_codec.h), "" when it has none
};
BehindDecision DecideLayoutBehind(const Layout& stored, const std::vector<StreamTop>& active_tops,
                                  const StreamTop& above, const std::string& fresh_lineage);

// The generation a shard id belongs to, or nullptr.
const Generation* GenerationOf(const Layout& l, int32_t shard_id);

}  // namespace rsc
