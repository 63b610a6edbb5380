#pragma once
// Redis Cluster key slots (CRC16-CCITT/XMODEM of the key's first non-empty {hash tag}, mod
// 16384). Pure: the cluster executor routes by it and the coordinator chooses shard keys
// with it (SPEC D2, core/shard_keys.h). Written here rather than taken from a library:
// hiredis has no cluster support and the function is a dozen lines, pinned to the
// cluster specification's check value and to CLUSTER KEYSLOT by tests/redis/keys_test.cc.

#include <cstdint>
#include <string_view>

namespace rsc {

inline constexpr int kClusterSlots = 16384;

// CRC16 of `data`, continuing from `crc` (0 starts a fresh one): Crc16(b, Crc16(a)) is
// Crc16 of a then b.
uint16_t Crc16(std::string_view data, uint16_t crc = 0);
// The slot of a key: CRC16 of the first non-empty {...} section if any, else of the key.
int KeySlot(std::string_view key);

}  // namespace rsc
