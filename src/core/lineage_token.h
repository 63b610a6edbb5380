#pragma once
// Lineage tokens that prove where they came from (SPEC M2/M8; issue 8, "any client can stall
// a group").
//
// A client that reports a (metadataVersion, lineage) pair the stored history does not hold —
// ahead of it, or diverging inside its window — is the coordinator's only evidence that
// Redis lost writes, and that evidence starts a correction round and records blockers that
// hold every member of the group back. Unauthenticated, anyone could send it (a made-up
// version 2^62 every 200 ms stalled a group indefinitely). So each group has a secret key,
// stored in its aggregate, and every token it issues carries a tag over what it names:
//
//   token = nonce ‖ tag,  tag = hex(first 8 bytes of HMAC-SHA1(key, "rsc-lineage-v1" 0x00
//                                  stream 0x00 group 0x00 decimal(version) 0x00 nonce))
//
// A claim whose token verifies was issued by a coordinator of this group for that version:
// genuine evidence. One that does not is answered with the stored truth (SYNC_METADATA) but
// is not evidence: no round, no blocker, no released shard. The key survives every rollback
// that keeps the group (it is written once, with the group) and travels in exports.
//
// Pure functions (no I/O, no clock, no RNG): the key and nonce come from the shell.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/types.h"

namespace rsc {

// Length of the hex tag appended to the nonce.
inline constexpr size_t kLineageTagHexLength = 16;
// Nonce characters taken from the shell's fresh random token.
inline constexpr size_t kLineageNonceLength = 16;

std::string IssueLineageToken(std::string_view key, const GroupKey& group, int64_t version,
                              std::string_view fresh_random);
// Constant-time comparison of the tag; false for a token too short to hold one.
bool VerifyLineageToken(std::string_view key, const GroupKey& group, int64_t version,
                        std::string_view token);

// RFC 2104 HMAC over Boost's SHA-1 (exposed for the RFC 2202 known-answer test). Written
// here rather than taken from OpenSSL so the client package, which links the core, needs no
// crypto library; HMAC-SHA1 remains a sound MAC (RFC 6151) and the tag is checked online only.
std::array<uint8_t, 20> HmacSha1(std::string_view key, std::string_view message);

}  // namespace rsc
