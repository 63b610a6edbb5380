#pragma once
// A small model of Redis Streams with one consumer group per stream: what the simulated
// consumers and producers read and write (the coordinator never touches streams, C7).
//
// Semantics follow Redis 7 for the commands the client library uses (contract-tested
// against a real redis-server in tests/sim/streams_contract_test.cc):
//   XADD key * f v …            id = max(now-0, last id + 1): strictly increasing
//   XGROUP CREATE key g 0 MKSTREAM   BUSYGROUP if it exists
//   XAUTOCLAIM key g me 0 cursor COUNT n JUSTID   moves pending entries (any owner, min-idle
//                               0) to `me`, returns the next cursor (0-0 when done); JUSTID
//                               does not count a delivery. A pending entry whose stream
//                               entry was deleted leaves the pending list and is returned
//                               apart (`deleted`); it counts towards n all the same
//   XREADGROUP … STREAMS key <id>  our pending entries with id > <id>, delivery count + 1
//                               (a deleted entry comes back with its id only, uncounted)
//   XREADGROUP … STREAMS key >     new entries after last-delivered: into our pending list
//   XACK key g id …             removes from the pending list, returns how many were there
//                               (0 when the stream or the group does not exist)
//   XPENDING key g - + n        the n lowest pending entries: id, owner, delivery count
// NOGROUP when the stream or the group does not exist (e.g. after a rollback), except for
// XACK. Not modelled (no client reads them): consumer names as such (XINFO CONSUMERS), idle
// times, entries-read/lag. Deletions (XDEL, MAXLEN) are no commands here (the simulated
// clients never delete), but the reads handle a pending entry whose stream entry is gone as
// Redis does: the contract test deletes entries from the state directly to pin that.
//
// Every mutating operation also returns its *effect*, a closure that applies exactly the
// same change to another copy (the replica): that is how Redis replicates streams
// (XREADGROUP is propagated as XCLAIM + XGROUP SETID), and it keeps the replica exact even
// though its clock and ids would differ.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/types.h"

namespace rsc::sim {

struct StreamId {
  int64_t ms = 0;
  int64_t seq = 0;
  auto operator<=>(const StreamId&) const = default;
  // The last possible ID (a seal, SPEC RS2). Redis's is 2^64-1 in both parts; the model
  // keeps int64 parts and spells this one sentinel as Redis does (str and Parse).
  static StreamId Max() { return StreamId{INT64_MAX, INT64_MAX}; }
  bool is_max() const { return *this == Max(); }
  std::string str() const;
  static std::optional<StreamId> Parse(const std::string& s);
};

struct StreamEntry {
  StreamId id;
  std::string key;
  int64_t seq = -1;
  std::string producer;
  int32_t seal = -1;      // ≥ 0: the seal entry of this generation (fields `rsc-seal <g>`)
  std::string successor;  // a seal's `rsc-next` (RS6, core/layout_codec.h)
};

struct PendingInfo {
  std::string consumer;
  int64_t deliveries = 0;
};

struct GroupState {
  StreamId last_delivered;
  std::map<StreamId, PendingInfo> pel;
};

struct StreamState {
  std::map<StreamId, StreamEntry> entries;
  StreamId last_id;
  std::map<std::string, GroupState> groups;
};

using Streams = std::map<std::string, StreamState>;
using StreamEffect = std::function<void(Streams&)>;

// One row of XPENDING key g - + n.
struct PendingRow {
  StreamId id;
  std::string consumer;
  int64_t deliveries = 0;
};

struct StreamReply {
  std::string error;  // "" = ok; "NOGROUP …", "BUSYGROUP …"
  std::vector<StreamEntry> entries;
  std::vector<StreamId> ids;
  std::vector<StreamId> deleted;    // XAUTOCLAIM: pending ids with no entry, now unpending
  std::vector<PendingRow> pending;  // XPENDING
  StreamId cursor;                  // XAUTOCLAIM: next cursor (0-0 = done)
  StreamId added;                   // XADD
  int64_t count = 0;                // XACK
  bool nil = false;                 // XADD NOMKSTREAM to a missing key
  bool ok() const { return error.empty(); }
};

struct StreamOp {
  StreamReply reply;
  StreamEffect effect;  // null when nothing changed
};

// `XADD key * …`: refused once the stream's last id is the maximum (a seal, RS2) with
// Redis's words, kExhausted.
// With `nomkstream` (XADD key NOMKSTREAM * …, what producers send, SPEC D3) a missing key is
// not created: the reply is nil (reply.nil), nothing changes.
StreamOp XAdd(Streams& s, const std::string& stream, TimeMs now, const StreamEntry& fields,
              bool nomkstream = false);
inline constexpr const char* kExhausted =
    "ERR The stream has exhausted the last possible ID, unable to add more items";
// The coordinator's seal (redis_stream_admin.cc): `XADD key <max id> rsc-seal <g>` unless the
// stream already ends with it (reply.count 1 when it wrote one, 0 otherwise).
StreamOp XAddSeal(Streams& s, const std::string& stream, int32_t generation,
                  const std::string& successor = "");
// XINFO STREAM as the coordinator reads it (RS6): length, whether the last id is the
// maximum, the seal's generation and `rsc-next` when the last entry is the seal.
StreamTop TopOf(const Streams& s, const std::string& stream);
// The coordinator's emptying of a retired key (redis_stream_admin.cc, RS5): when its top entry
// is the seal, XTRIM MAXLEN 0; when it has none (missing or empty), the seal written and
// trimmed at once. Either way a tombstone: no entries, last id the maximum. reply.count 1:
// a tombstone now; 0: kept (an entry follows where the seal was).
StreamOp TrimSealed(Streams& s, const std::string& stream);
// XINFO GROUPS, for one group: whether it exists, its last-delivered id, its pending count
// (in reply.cursor and reply.count; NOGROUP when the stream or the group is missing).
StreamOp XInfoGroup(Streams& s, const std::string& stream, const std::string& group);
// XGROUP CREATE stream group 0 [MKSTREAM]: without `mkstream` a missing key is an error.
StreamOp XGroupCreate(Streams& s, const std::string& stream, const std::string& group,
                      bool mkstream = true);
StreamOp XAutoClaim(Streams& s, const std::string& stream, const std::string& group,
                    const std::string& consumer, StreamId cursor, int count);
StreamOp XReadGroupPending(Streams& s, const std::string& stream, const std::string& group,
                           const std::string& consumer, StreamId after, int count);
StreamOp XReadGroupNew(Streams& s, const std::string& stream, const std::string& group,
                       const std::string& consumer, int count);
StreamOp XAck(Streams& s, const std::string& stream, const std::string& group,
              const std::vector<StreamId>& ids);
// XPENDING stream group - + count (changes nothing). With count 1: the lowest pending entry
// of the group and its owner, if any (reader_core.cc, the late-read check).
StreamOp XPending(Streams& s, const std::string& stream, const std::string& group, int count);

}  // namespace rsc::sim
