#pragma once
// PublishCall: one Producer::PublishBatch as a single-threaded, sans-IO state machine (issue
// 10). It decides which entries are routed and written in each attempt, the XADD each one
// gets, what each reply means for its caller, which entries go again at once (the server
// turned NOMKSTREAM down) and which wait for a newer routing (RS2, D3: a sealed shard or a
// missing key refused them), when the call gives up, and what each caller gets.
//
// Driver: producer.cc (routes under its mutex, writes over its platform's executor with the
// routing-lease check right before each pipeline, waits on a condition variable) — in
// production and in the simulator alike (client/platform.h). The loop:
//
//   PublishCall call(keys, fields);
//   while (!call.done()) {
//     if (call.waiting()) {                     // entries wait for a newer routing
//       Wait w = call.OnWait(now, routing version);
//       kRefresh: runtime.OnStaleTarget(), sleep w.sleep_ms; kRouteAgain: go on; kGiveUp: done
//       continue;
//     }
//     routes = runtime.Route(call.RouteKeys());  // one instant
//     cmds = call.Write(routes, redis_open_status, nomkstream);
//     replies = send cmds unless now >= call.write_lease_end_ms() ("lease ended": not sent)
//     outcome = call.OnReplies(replies, lease_ended, &nomkstream);   // report outcome.written
//   }
//   results = call.TakeResults();
//
// Rules it keeps (docs/protocol.md PR5, RS2, D3): an entry with no fields is refused; entries
// of one key keep their order (the commands of one attempt are in input order, and the
// entries sent again go in input order); an entry refused by a stale target goes again only
// on a routing whose version differs from the one it was refused under, and only until the
// lease of the routing the first refusal came under ends; an XADD whose reply was lost may have
// been written (kUnknownResult), one never sent was not (kRedisUnavailable, or kStaleRouting when
// the lease ended before the write).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/producer_core.h"
#include "client/producer_runtime.h"
#include "core/result.h"
#include "redis/executor.h"
#include "redis/reply.h"
#include "rsc/producer.h"

namespace rsc::client {

// XADD key [NOMKSTREAM] * f v …: a missing key is stale routing, never a stream created anew
// (SPEC D3). Without NOMKSTREAM (Redis < 6.2) a missing key is created.
std::vector<std::string> XaddArgs(const std::string& stream, const StreamFields& fields,
                                  bool nomkstream);

class PublishCall {
 public:
  // Between two refreshes asked for while entries wait for a newer routing.
  static constexpr TimeMs kSealRetryMs = 100;

  struct Outcome {
    // The entries written (indices into the call): route(i) went by, result(i) holds the id.
    std::vector<size_t> written;
    int sealed = 0;   // refused: the shard is sealed (RS2)
    int missing = 0;  // refused: the key does not exist (D3)
  };
  struct Wait {
    enum class What { kRefresh, kRouteAgain, kGiveUp };
    What what = What::kGiveUp;
    TimeMs sleep_ms = 0;  // kRefresh: ask for a refresh now, then wait this long (≥ 1)
  };

  // `fields[i]` must stay valid until the call is done.
  PublishCall(std::vector<std::string_view> keys, std::vector<const StreamFields*> fields);

  bool done() const { return stage_ == Stage::kDone; }
  bool waiting() const { return stage_ == Stage::kWait; }

  // The keys to route now, in input order (one Route() at one instant for all of them).
  std::vector<std::string_view> RouteKeys() const;
  // Their routes (one per key of RouteKeys) and whether the Redis connection is up (!ok: no
  // entry is written, kRedisUnavailable). Entries whose route failed get that failure now.
  // Returns the XADDs to write, in input order; empty: the attempt is over (done() or
  // waiting() tells what next).
  std::vector<redis::KeyedCommand> Write(std::vector<ProducerResult<RouteTarget>> routes,
                                         const Status& opened, bool nomkstream);
  // The earliest routing lease end of the commands Write returned: they are not written at or
  // after it (PR5), by the driver's clock rounded up.
  TimeMs write_lease_end_ms() const { return lease_end_ms_; }
  // One reply per command of Write: a value, a kUnknownResult error (sent, reply lost) or any
  // other error (not sent). `lease_ended`: the driver did not write some of them because the
  // lease ended first. `*nomkstream` is cleared when the server took NOMKSTREAM for an ID
  // (Redis < 6.2): those entries go again at once without it.
  Outcome OnReplies(std::vector<Result<redis::Reply>> replies, bool lease_ended, bool* nomkstream);
  // While waiting(): at local time `now` the routing is `routing_version` (nullopt: none).
  Wait OnWait(TimeMs now, std::optional<int64_t> routing_version);
  // Ends the call where it is (the producer is closing): what was not written stays failed.
  void GiveUp() { stage_ = Stage::kDone; }

  // The route entry `i` was last written by (valid once an Outcome named it).
  const RouteTarget& route(size_t i) const { return *routes_[i]; }
  // Entry `i`'s result so far (its id once written).
  const ProducerResult<std::string>& result(size_t i) const { return results_[i]; }

  // Once done(): one result per entry, in input order.
  std::vector<ProducerResult<std::string>> TakeResults() { return std::move(results_); }

 private:
  enum class Stage { kRoute, kWait, kDone };

  std::vector<std::string_view> keys_;
  std::vector<const StreamFields*> fields_;
  std::vector<ProducerResult<std::string>> results_;
  Stage stage_ = Stage::kRoute;
  std::vector<size_t> todo_;                        // to route now
  std::vector<size_t> sent_;                        // the entry of each command Write returned
  std::vector<std::optional<RouteTarget>> routes_;  // by entry, of the last Write
  TimeMs lease_end_ms_ = 0;
  std::vector<size_t> refused_;        // waiting for a newer routing
  int64_t refused_version_ = 0;        // the routing version they were refused under
  TimeMs refused_lease_end_ms_ = 0;    // and its lease end
  std::optional<TimeMs> retry_until_;  // the first wait's lease end: no retry from then on
};

}  // namespace rsc::client
