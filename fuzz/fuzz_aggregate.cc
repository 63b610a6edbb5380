// Fuzzes the stored-state path: the aggregate codec and export documents (both outside
// input: an operator's restore body, or a hash someone edited in Redis), then the decisions
// a coordinator makes on what decoded. Input: a JSON document (an export, or a bare
// aggregate), optionally followed by a NUL byte and a script whose bytes pick a few
// requests (heartbeats of the stored members and strangers, joins, leaves, REVOKED reports,
// clock advances, ticks, fences, patches).
//
// Beyond "no crash, no sanitizer report" (an RSC_CHECK failure is a crash: issue 8 found a
// restore whose next decision aborted the process), every decoded state must re-encode to
// itself, every restore must produce a state that passes the invariants, and every decision
// must either write a state that passes them and round-trips, or fail closed without a write.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "core/codec.h"
#include "core/decide.h"

namespace {

using namespace rsc;

class Script {
 public:
  explicit Script(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  uint8_t Next() { return done() ? 0 : static_cast<uint8_t>(s_[i_++]); }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

void CheckWritten(const std::optional<GroupMetadata>& next) {
  if (!next) return;
  RSC_CHECK(CheckInvariants(*next).ok());
  auto back = DecodeAggregate(EncodeAggregate(*next));
  RSC_CHECK(back.ok() && *back == *next);
}

template <class R>
void CheckDecision(const Decision<R>& d) {
  CheckWritten(d.next);
  if (!d.response.ok()) RSC_CHECK(!d.response.error().message.empty());
}

HeartbeatRequest RequestFor(const GroupMetadata& m, Script& s) {
  HeartbeatRequest r;
  const uint8_t who = s.Next();
  if (!m.members.empty() && who % 4 != 3) {
    const Member& mem = m.members[who % m.members.size()];
    r.member_id = mem.id;
    r.member_epoch = mem.epoch.value() + (s.Next() % 3) - 1;  // stale, current or ahead
  } else {
    r.member_id = MemberId("stranger-" + std::to_string(who % 5));
    r.member_epoch = (s.Next() % 3);
  }
  switch (s.Next() % 5) {
    case 0:  // current
      r.metadata_version = m.version.value();
      r.lineage = m.lineage;
      break;
    case 1:  // ahead (as after a rollback), unproven token
      r.metadata_version = m.version.value() + 1 + s.Next();
      r.lineage = "forged";
      break;
    case 2:  // far ahead
      r.metadata_version = (int64_t{1} << 62);
      break;
    case 3:  // lagging or fresh
      r.metadata_version = 0;
      break;
    default:  // diverged
      r.metadata_version = m.version.value();
      r.lineage = "other";
      break;
  }
  const int32_t n = m.shard_count;
  const uint8_t owned = s.Next();
  const uint8_t revoking = s.Next();
  for (int32_t sh = 0; sh < std::min<int32_t>(n, 8); ++sh) {
    if (owned & (1u << sh)) {
      r.owned_shards.push_back(sh);
    } else if (revoking & (1u << sh)) {
      r.revoking_shards.push_back(
          {sh, (s.Next() & 1) ? RevokeState::kRevoked : RevokeState::kDraining});
    }
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view doc = in.substr(0, nul);
  Script script(nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1));

  std::optional<GroupMetadata> meta;
  if (auto e = DecodeExport(doc); e.ok()) {
    RSC_CHECK(e->revision.value() >= 0);
    meta = e->meta;
  } else {
    RSC_CHECK(e.error().code == ErrorCode::kInvalidRequest && !e.error().message.empty());
    auto a = DecodeAggregate(doc);
    if (!a.ok()) {
      RSC_CHECK(a.error().code == ErrorCode::kMetadataUnreadable && !a.error().message.empty());
      return 0;
    }
    meta = std::move(a).value();
  }
  // Whatever decodes passes the invariants and re-encodes to itself.
  RSC_CHECK(CheckInvariants(*meta).ok());
  CheckWritten(meta);

  TimeMs now = std::max<TimeMs>(meta->updated_ms, 1);
  int tokens = 0;
  auto env = [&] { return Env{now, "fz" + std::to_string(++tokens)}; };
  GroupMetadata state = *meta;
  if (auto restored = DecideRestore(*meta, env()); restored.ok()) {
    CheckWritten(*restored);
    RSC_CHECK(restored->round.has_value());
    if (script.Next() & 1) state = *restored;
  } else {
    RSC_CHECK(restored.error().code == ErrorCode::kInvalidRequest);
  }

  Liveness live;
  live.complete = true;
  for (const Member& m : state.members) live.deadline_ms[m.id.str()] = now + 1000;
  for (int step = 0; step < 16 && !script.done(); ++step) {
    const uint8_t op = script.Next();
    switch (op % 6) {
      case 0:
      case 1: {
        auto d = DecideHeartbeat(state, live, RequestFor(state, script), env());
        CheckDecision(d);
        if (d.next) state = *d.next;
        for (const auto& id : d.liveness.remove) live.deadline_ms.erase(id);
        for (const auto& [id, dl] : d.liveness.set) live.deadline_ms[id] = dl;
        break;
      }
      case 2:
        now += 1 + 997 * static_cast<TimeMs>(script.Next());
        break;
      case 3: {
        auto d = DecideTick(state, live, env());
        CheckDecision(d);
        if (d.next) state = *d.next;
        for (const auto& id : d.liveness.remove) live.deadline_ms.erase(id);
        break;
      }
      case 4: {
        const MemberId who = state.members.empty()
                                 ? MemberId("nobody")
                                 : state.members[script.Next() % state.members.size()].id;
        auto d = DecideFence(state, live, who, env());
        CheckDecision(d);
        if (d.next) state = *d.next;
        break;
      }
      default: {
        PatchGroupRequest p;
        p.shard_count = 1 + script.Next() % 24;
        auto d = DecidePatch(state, live, p, env());
        CheckDecision(d);
        if (d.next) state = *d.next;
        break;
      }
    }
    (void)DecideRouting(state, state.version.value() + (op & 1), "x", now);
  }
  return 0;
}
