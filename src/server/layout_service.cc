#include "server/layout_service.h"

#include <fmt/format.h>

namespace rsc {

namespace {

// Writers of one layout are rare (admin requests); a conflict streak this long means
// something rewrites the layout in a loop.
constexpr int kMaxAttempts = 8;

Error Exhausted(const std::string& stream) {
  return MakeError(ErrorCode::kLockTimeout,
                   fmt::format("layout of stream '{}' kept changing under {} attempts (revision "
                               "conflicts); retry with backoff",
                               stream, kMaxAttempts));
}

Error WriteUnconfirmed(const Error& e) {
  if (e.code != ErrorCode::kUnknownResult) return e;
  return MakeError(ErrorCode::kRedisUnavailable,
                   "Redis did not confirm the layout write; retry: " + e.message);
}

}  // namespace

Result<std::vector<ExistingGroup>> LayoutService::FindV1Groups(const std::string& stream) {
  RSC_ASSIGN_OR_RETURN(std::vector<GroupKey> all, store_.ListGroups());
  std::vector<ExistingGroup> out;
  for (const GroupKey& k : all) {
    if (k.stream != stream) continue;
    auto loaded = store_.Load(k, clock_.NowMs());
    if (!loaded.ok()) {
      // An index entry without a hash (a lost or deleted group) has no shard count to
      // contribute; anything else unreadable would make the derived layout a guess.
      const ErrorCode c = loaded.error().code;
      if (c == ErrorCode::kMetadataMissing || c == ErrorCode::kGroupNotFound) continue;
      return loaded.error();
    }
    out.push_back(DescribeExistingGroup(*loaded->meta));
  }
  return out;
}

Result<std::optional<StoredLayout>> LayoutService::Load(const std::string& stream) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, store_.LoadLayout(stream));
    if (stored) return stored;
    RSC_ASSIGN_OR_RETURN(std::vector<ExistingGroup> groups, FindV1Groups(stream));
    if (groups.empty()) return std::optional<StoredLayout>{};
    RSC_ASSIGN_OR_RETURN(Layout derived, DeriveGeneration0(stream, 0, GroupConfig{}, groups, {},
                                                           tokens_.NewToken()));
    auto cas = store_.CompareAndSetLayout(stream, StoreRevision(0), derived, clock_.NowMs());
    if (!cas.ok()) return WriteUnconfirmed(cas.error());
    if (cas->applied) return std::optional<StoredLayout>{StoredLayout{cas->revision, derived}};
    // Another coordinator derived it first: read theirs.
  }
  return Exhausted(stream);
}

Result<SlotPlacement> LayoutService::Placement() {
  if (streams_ == nullptr) return SlotPlacement{};
  return streams_->Placement();
}

Result<int32_t> LayoutService::AddGroup(const std::string& stream, const std::string& group,
                                        int32_t shard_count, const GroupConfig& config,
                                        StoredLayout* written, const GroupMetadata* restored) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, Load(stream));
    StoreRevision expected(0);
    Layout base;
    if (stored) {
      expected = stored->revision;
      base = std::move(stored->layout);
    } else {
      if (restored != nullptr) {
        // The restored group's own keys, not new ones: its shards hold its messages.
        RSC_ASSIGN_OR_RETURN(
            base, DeriveGeneration0(stream, 0, config, {DescribeExistingGroup(*restored)}, {},
                                    tokens_.NewToken()));
      } else {
        RSC_ASSIGN_OR_RETURN(SlotPlacement placement, Placement());
        RSC_ASSIGN_OR_RETURN(base, DeriveGeneration0(stream, shard_count, config, {}, placement,
                                                     tokens_.NewToken()));
      }
    }
    int32_t count = 0;
    if (stored && restored != nullptr) {
      // A restored group takes the layout into its own write (GroupService::RestoreGroup),
      // so its count may be an older generation's; its shards must be this stream's history.
      RSC_RETURN_IF_ERROR(CheckRestoreFitsLayout(base, *restored));
      shard_count = 0;
    }
    RSC_ASSIGN_OR_RETURN(std::optional<Layout> next,
                         DecideAddGroup(base, group, shard_count, &count, tokens_.NewToken()));
    if (!next && stored) {  // already registered
      if (written != nullptr) *written = StoredLayout{expected, base};
      return count;
    }
    const Layout& write = next ? *next : base;
    auto cas = store_.CompareAndSetLayout(stream, expected, write, clock_.NowMs());
    if (!cas.ok()) return WriteUnconfirmed(cas.error());
    if (cas->applied) {
      if (written != nullptr) *written = StoredLayout{cas->revision, write};
      return count;
    }
  }
  return Exhausted(stream);
}

Status LayoutService::RemoveGroup(const std::string& stream, const std::string& group) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    RSC_ASSIGN_OR_RETURN(std::optional<StoredLayout> stored, store_.LoadLayout(stream));
    if (!stored) return OkStatus();
    std::optional<Layout> next = DecideRemoveGroup(stored->layout, group, tokens_.NewToken());
    if (!next) return OkStatus();
    auto cas = store_.CompareAndSetLayout(stream, stored->revision, *next, clock_.NowMs());
    if (!cas.ok()) return WriteUnconfirmed(cas.error());
    if (cas->applied) return OkStatus();
  }
  return Exhausted(stream);
}

}  // namespace rsc
