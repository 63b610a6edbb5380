#include "core/group_index.h"

#include <algorithm>
#include <functional>

namespace rsc {

const GroupIndex::PerMember* GroupIndex::For(const GroupMetadata& m, const Member& mem) const {
  if (source != &m || m.members.empty()) return nullptr;
  const Member* first = m.members.data();
  const std::less<const Member*> before;  // total order even for unrelated objects
  if (before(&mem, first) || !before(&mem, first + m.members.size())) return nullptr;
  const auto pos = static_cast<size_t>(&mem - first);
  return pos < members.size() ? &members[pos] : nullptr;
}

GroupIndex BuildGroupIndex(const GroupMetadata& m) {
  GroupIndex ix;
  ix.source = &m;
  ix.members.resize(m.members.size());
  const auto slot = [&](const std::string& id) -> GroupIndex::PerMember* {
    if (id.empty()) return nullptr;
    const Member* mem = m.FindMember(MemberId(id));
    return mem == nullptr ? nullptr : &ix.members[static_cast<size_t>(mem - m.members.data())];
  };
  for (const ShardState& sh : m.shards) {
    GroupIndex::PerMember* owner = slot(sh.owner);
    if (sh.owner == sh.target) {
      if (owner != nullptr) owner->shards.assigned.push_back(sh.id);
    } else {
      if (owner != nullptr) owner->shards.revoke.push_back(sh.id);
      if (GroupIndex::PerMember* target = slot(sh.target)) target->shards.pending.push_back(sh.id);
    }
    if (sh.taken_ms != 0 && owner != nullptr) owner->taken.push_back(sh.id);
    if (sh.revoke_since_ms != 0) {
      // The scan's sum (decide.cc); CheckInvariants bounds both terms, so it cannot wrap.
      ix.next_due_ms = std::min(ix.next_due_ms, sh.revoke_since_ms + m.config.rebalance_timeout_ms);
    }
    if (sh.taken_ms != 0) ix.next_due_ms = std::min(ix.next_due_ms, sh.release_at_ms);
    if (sh.generation != 0) ix.resharded = true;
  }
  return ix;
}

}  // namespace rsc
