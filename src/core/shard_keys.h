#pragma once
// The Redis keys of a generation's shards (SPEC D2, docs/design/resharding.md "Shard keys on
// a cluster"). Pure: the slot map is read by the shell (StreamAdmin::Placement) and passed in.
//
// On one server a shard's key is {P:id}. On a Redis Cluster the coordinator spreads a
// generation's shards over the masters (round robin, so shards per master differ by at most
// one) and puts all of one master's shards of the stream in one slot of that master, so a
// consumer's live reads there combine into one blocking XREADGROUP (reader_node.h): the key
// is {P:id.<tag>}, the tag searched until CRC16("P:id.<tag>") falls in that slot. Clients
// never compute keys; they are published in routing and heartbeat answers.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rsc {

// A cluster's masters, each with the slots it serves (ascending), in a stable order (by
// address). Empty: one server.
using SlotPlacement = std::vector<std::vector<int>>;

// Keys for shards `ids` of one generation of `stream`, in order. Position i goes to master
// (h + i) mod M and that master's slot number h mod (its slot count), h being CRC16 of the
// stream name: streams of one shard do not all land on the first master, and every
// generation of a stream uses the same slot of a master (their shards are read together
// while a reshard drains the parents).
std::vector<std::string> ChooseShardKeys(const std::string& stream, const std::vector<int32_t>& ids,
                                         const SlotPlacement& masters);

// The key ChooseShardKeys gives shard `id` of `stream` on a master serving `slot`: the first
// tag (base 36 order) whose key hashes to that slot. Deterministic, so a generation's keys are
// described by the slots of its positions alone (a seal's `rsc-next`, core/layout_codec.h).
std::string ShardKeyInSlot(const std::string& stream, int32_t id, int slot);

// Whether `key` is a key ChooseShardKeys may give shard `id` of `stream`: {P:id} or
// {P:id.<tag>} with a tag of 1 to 8 characters [0-9a-z]. A layout or group naming any other
// key is corrupt (it would route producers to a key no group reads).
bool IsShardKeyOf(std::string_view stream, int32_t id, std::string_view key);

}  // namespace rsc
