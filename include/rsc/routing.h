#pragma once
// Key → shard routing of librsc producers (SPEC R5.2): the function named "jump-xxh64" in
// routing responses. It is specified exactly so producers written in other languages route
// every key to the same shard as this library; docs/routing.md has the definition and a
// table of test vectors (asserted verbatim by tests/client/routing_hash_test.cc).
//
//   shard = JumpConsistentHash(XXH64(key bytes, seed 0), shardCount)
//
// Jump consistent hash (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash
// Algorithm", 2014, arXiv:1406.2294): growing the count from n to m moves a key only onto one
// of the new buckets n..m-1, never between old ones. The result is a *position* in the
// routing answer's shard list (after a reshard, shard ids are not positions). The hash alone
// does not keep per-key order across a change of the shard count: a reshard does, by sealing
// the old generation and reading it to its end before the new one (docs/protocol.md 7.5).
//
// The key is hashed as raw bytes: no normalisation, no terminating NUL, UTF-8 is just bytes.
//
// Thread safety: pure functions, safe from any thread.

#include <cstdint>
#include <string_view>

namespace rsc {

// The `hash` value of a routing response that these functions implement.
inline constexpr std::string_view kJumpXxh64 = "jump-xxh64";

// XXH64 of the key bytes with seed 0 (the reference xxHash, via libxxhash).
uint64_t RoutingKeyHash(std::string_view key);

// Lamping–Veach jump consistent hash: a bucket in [0, num_buckets). Precondition:
// num_buckets >= 1 (values < 1 return 0, so a misuse can never index out of range).
int32_t JumpConsistentHash(uint64_t key, int32_t num_buckets);

// The "jump-xxh64" shard of `key` among `shard_count` shards (>= 1).
int32_t ShardForKey(std::string_view key, int32_t shard_count);

}  // namespace rsc
