#pragma once
// Member heartbeat deadlines, kept in Redis apart from the aggregate so a heartbeat that
// changes nothing does not rewrite the whole aggregate (SPEC I1, R3.5).

#include <map>
#include <string>
#include <vector>

#include "core/types.h"

namespace rsc {

// What the store loaded. Contract: `deadline_ms` holds at least every member whose
// deadline is <= the load's `now`. When `complete` is true it holds every recorded
// member, and an aggregate member missing from it has no deadline at all (liveness lost)
// and is treated as expired. When `complete` is false, a member missing from the map
// is known to have a deadline in the future.
struct Liveness {
  std::map<std::string, TimeMs> deadline_ms;
  bool complete = true;
};

// What a decision asks the store to write, atomically with the revision check.
// No id appears in both lists. The store applies a set as "raise to at least": a deadline
// is never shortened (see MetadataStore::CompareAndSet).
struct LivenessUpdate {
  std::vector<std::pair<std::string, TimeMs>> set;  // member -> new deadline
  std::vector<std::string> remove;
  // For a removed member: the deadline the decision saw (kNoDeadline: it had none). The
  // store removes it only while the stored deadline is still at most that, and otherwise
  // writes nothing and answers a conflict: another coordinator renewed the member after
  // this decision's load, without a revision bump (a liveness-only write, or a steady
  // renewal while this section's mutex had vanished; simulator seed 93000387), so the
  // decision to expire it is stale. A removed member not listed here is removed whatever
  // its deadline (a leave or a replaced static member, never decided on its deadline).
  // Filled by the shell from the liveness it loaded (GroupService::Mutate).
  std::map<std::string, TimeMs> remove_if_at_most;
  bool empty() const { return set.empty() && remove.empty(); }
};

// remove_if_at_most: the member had no deadline when the decision loaded.
inline constexpr TimeMs kNoDeadline = -1;

}  // namespace rsc
