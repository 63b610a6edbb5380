#include "sim/memory_store.h"

#include <fmt/format.h>

#include <charconv>

#include "core/codec.h"
#include "core/layout_codec.h"

namespace rsc::sim {

namespace {

std::optional<int64_t> ParseInt(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string MetaKeyName(const GroupKey& key) {
  return "redis-stream:coord:{" + key.Tag() + "}:metadata";
}

}  // namespace

Status MemoryStore::CheckUp() const {
  if (!available_) return MakeError(ErrorCode::kRedisUnavailable, "redis unavailable (simulated)");
  return OkStatus();
}

void MemoryStore::SetField(const GroupKey& key, const std::string& field,
                           const std::string& value) {
  data_.hashes[key.Tag()].fields[field] = value;
}

void MemoryStore::DeleteHash(const GroupKey& key) { data_.hashes.erase(key.Tag()); }

Result<std::shared_ptr<const GroupMetadata>> MemoryStore::Decoded(const std::string& tag,
                                                                  const std::string& text) const {
  auto& [last_text, last] = decoded_[tag];
  if (last && last_text == text) return last;
  auto meta = DecodeAggregate(text);
  if (!meta.ok()) return meta.error();
  last_text = text;
  last = std::make_shared<const GroupMetadata>(std::move(meta).value());
  return last;
}

Result<StoredGroup> MemoryStore::Load(const GroupKey& key, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(CheckUp());
  const std::string tag = key.Tag();
  auto it = data_.hashes.find(tag);
  if (it == data_.hashes.end()) {
    if (data_.index.count(tag)) {
      return MakeError(
          ErrorCode::kMetadataMissing,
          fmt::format("metadata key {} is missing but group {} is indexed", MetaKeyName(key), tag));
    }
    return MakeError(ErrorCode::kGroupNotFound, fmt::format("group {} does not exist", tag));
  }
  const auto& f = it->second.fields;
  auto field = [&](const char* name) -> std::optional<std::string> {
    auto fi = f.find(name);
    return fi == f.end() ? std::nullopt : std::optional<std::string>(fi->second);
  };
  auto unreadable = [&](const std::string& what) {
    return MakeError(ErrorCode::kMetadataUnreadable,
                     fmt::format("metadata of group {} is unreadable: {}", tag, what));
  };
  const auto schema = field("schemaVersion");
  const auto layout = field("layoutVersion");
  if (!schema || ParseInt(*schema) != kSchemaVersion) {
    return unreadable(fmt::format("schemaVersion {} is not supported", schema.value_or("missing")));
  }
  if (!layout || ParseInt(*layout) != kLayoutVersion) {
    return unreadable(fmt::format("layoutVersion {} is not supported", layout.value_or("missing")));
  }
  const auto rev_s = field("revision");
  if (!rev_s) return unreadable("field 'revision' is missing");
  const auto rev = ParseInt(*rev_s);
  if (!rev || *rev < 1 || *rev >= kMaxCounter) {
    return unreadable("field 'revision' is not an integer in [1, 2^53-1)");
  }
  const auto agg = field("aggregate");
  if (!agg) return unreadable("field 'aggregate' is missing");
  auto meta = Decoded(tag, *agg);
  if (!meta.ok()) return unreadable("aggregate: " + meta.error().message);
  if ((*meta)->key != key) return unreadable("aggregate names another group");
  StoredGroup g;
  g.revision = StoreRevision(*rev);
  g.stamp = AggregateStamp{g.revision, field("writeToken").value_or(""),
                           static_cast<int64_t>(agg->size())};
  g.meta = std::move(meta).value();
  const auto& live = data_.live[tag];
  if (live.size() != g.meta->members.size()) {
    g.liveness.deadline_ms = live;  // counts disagree: the whole set (liveness.h)
    g.liveness.complete = true;
  } else {
    for (const auto& [id, dl] : live) {
      if (dl <= now_ms) g.liveness.deadline_ms[id] = dl;
    }
    g.liveness.complete = false;
  }
  return g;
}

Result<CasOutcome> MemoryStore::CompareAndSet(const GroupKey& key, StoreRevision expected,
                                              const GroupMetadata* next,
                                              const LivenessUpdate& liveness, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(CheckUp());
  const std::string tag = key.Tag();
  auto it = data_.hashes.find(tag);
  if (it == data_.hashes.end()) return CasOutcome{false, StoreRevision(-1)};
  const auto rev = ParseInt(it->second.fields["revision"]);
  if (!rev) {
    return MakeError(ErrorCode::kMetadataUnreadable, "revision field is not an integer");
  }
  if (*rev != expected.value()) return CasOutcome{false, StoreRevision(*rev)};
  // compare_and_set.lua: a removal with a bound holds only while the member was not
  // renewed past it since the caller's load; otherwise nothing is written.
  if (auto lit = data_.live.find(tag); lit != data_.live.end()) {
    for (const auto& [id, bound] : liveness.remove_if_at_most) {
      auto cur = lit->second.find(id);
      if (cur != lit->second.end() && (bound < 0 || cur->second > bound)) {
        return CasOutcome{false, StoreRevision(*rev)};
      }
    }
  }
  int64_t new_rev = *rev;
  if (next != nullptr) {
    new_rev = *rev + 1;
    auto& f = it->second.fields;
    f["aggregate"] = EncodeAggregate(*next);
    f["revision"] = std::to_string(new_rev);
    f["schemaVersion"] = std::to_string(kSchemaVersion);
    f["layoutVersion"] = std::to_string(kLayoutVersion);
    f["updatedAt"] = std::to_string(now_ms);
    f["writeToken"] = tokens_.NewToken();
  }
  RaiseDeadlines(data_.live[tag], liveness.set);
  auto& live = data_.live[tag];
  for (const auto& id : liveness.remove) live.erase(id);
  CasOutcome out{true, StoreRevision(new_rev)};
  if (next != nullptr) {
    const auto& f = it->second.fields;
    out.stamp = AggregateStamp{out.revision, f.at("writeToken"),
                               static_cast<int64_t>(f.at("aggregate").size())};
  }
  return out;
}

void MemoryStore::RaiseDeadlines(std::map<std::string, TimeMs>& live,
                                 const std::vector<std::pair<std::string, TimeMs>>& set) {
  for (const auto& [id, dl] : set) {
    auto [it, inserted] = live.emplace(id, dl);
    if (!inserted) it->second = std::max(it->second, dl);  // never shortened (store.h)
  }
}

// As renew_if_steady.lua: the fields compared as the strings Redis holds.
Result<bool> MemoryStore::RenewIfSteady(const GroupKey& key, const AggregateStamp& basis,
                                        size_t member_count,
                                        const std::vector<std::pair<std::string, TimeMs>>& set,
                                        TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(CheckUp());
  if (basis.write_token.empty() || basis.aggregate_len < 0) return false;
  const std::string tag = key.Tag();
  auto lock = locks_.find(tag);
  if (lock != locks_.end() && lock->second.expires_ms > clock_.NowMs()) return false;
  auto it = data_.hashes.find(tag);
  if (it == data_.hashes.end()) return false;
  const auto& f = it->second.fields;
  auto is = [&](const char* name, const std::string& want) {
    auto fi = f.find(name);
    return fi != f.end() && fi->second == want;
  };
  auto agg = f.find("aggregate");
  const int64_t len = agg == f.end() ? 0 : static_cast<int64_t>(agg->second.size());
  if (!is("revision", std::to_string(basis.revision.value())) ||
      !is("writeToken", basis.write_token) ||
      !is("schemaVersion", std::to_string(kSchemaVersion)) ||
      !is("layoutVersion", std::to_string(kLayoutVersion)) || len != basis.aggregate_len) {
    return false;
  }
  auto live = data_.live.find(tag);
  // An empty sorted set does not exist in Redis (TYPE none): refused as there.
  if (live == data_.live.end() || live->second.empty() || live->second.size() != member_count) {
    return false;
  }
  for (const auto& [id, dl] : live->second) {
    if (dl <= now_ms) return false;
  }
  RaiseDeadlines(live->second, set);
  return true;
}

Result<StoreRevision> MemoryStore::Create(const GroupMetadata& meta, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(CheckUp());
  const std::string tag = meta.key.Tag();
  data_.index.insert(tag);  // index first, as the Redis store does
  if (data_.hashes.count(tag)) {
    return MakeError(ErrorCode::kGroupExists, fmt::format("group {} already exists", tag));
  }
  data_.live.erase(tag);
  auto& f = data_.hashes[tag].fields;
  f = {{"aggregate", EncodeAggregate(meta)},
       {"revision", "1"},
       {"schemaVersion", std::to_string(kSchemaVersion)},
       {"layoutVersion", std::to_string(kLayoutVersion)},
       {"updatedAt", std::to_string(now_ms)},
       {"writeToken", tokens_.NewToken()}};
  return StoreRevision(1);
}

Result<StoreRevision> MemoryStore::Restore(const GroupMetadata& meta, TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(CheckUp());
  const std::string tag = meta.key.Tag();
  data_.index.insert(tag);
  int64_t rev = 0;
  if (auto it = data_.hashes.find(tag); it != data_.hashes.end()) {
    // As restore.lua: a revision outside [1, 2^53-1) is corrupt and not continued.
    rev = ParseInt(it->second.fields["revision"]).value_or(0);
    if (rev < 1 || rev >= kMaxCounter) rev = 0;
  }
  ++rev;
  data_.live.erase(tag);
  auto& f = data_.hashes[tag].fields;
  f = {{"aggregate", EncodeAggregate(meta)},
       {"revision", std::to_string(rev)},
       {"schemaVersion", std::to_string(kSchemaVersion)},
       {"layoutVersion", std::to_string(kLayoutVersion)},
       {"updatedAt", std::to_string(now_ms)},
       {"writeToken", tokens_.NewToken()}};
  return StoreRevision(rev);
}

Status MemoryStore::Delete(const GroupKey& key, StoreRevision expected) {
  RSC_RETURN_IF_ERROR(CheckUp());
  const std::string tag = key.Tag();
  auto it = data_.hashes.find(tag);
  if (it == data_.hashes.end()) {
    if (data_.index.count(tag)) {
      return MakeError(
          ErrorCode::kMetadataMissing,
          fmt::format("metadata key {} is missing but group {} is indexed", MetaKeyName(key), tag));
    }
    return MakeError(ErrorCode::kGroupNotFound, fmt::format("group {} does not exist", tag));
  }
  const auto rev = ParseInt(it->second.fields["revision"]);
  if (!rev || *rev != expected.value()) {
    return MakeError(ErrorCode::kRevisionConflict,
                     fmt::format("group {} is at revision {}, not the expected {}", tag,
                                 rev.value_or(-1), expected.value()));
  }
  data_.hashes.erase(it);
  data_.live.erase(tag);
  data_.index.erase(tag);
  return OkStatus();
}

Result<std::vector<GroupKey>> MemoryStore::ListGroups() {
  RSC_RETURN_IF_ERROR(CheckUp());
  std::vector<GroupKey> out;
  for (const std::string& tag : data_.index) {
    const auto colon = tag.rfind(':');
    out.push_back(GroupKey{tag.substr(0, colon), tag.substr(colon + 1)});
  }
  return out;
}

Result<Liveness> MemoryStore::LoadAllLiveness(const GroupKey& key) {
  RSC_RETURN_IF_ERROR(CheckUp());
  Liveness l;
  l.deadline_ms = data_.live[key.Tag()];
  l.complete = true;
  return l;
}

Result<std::optional<std::string>> MemoryStore::Lock(const GroupKey& key,
                                                     std::chrono::milliseconds ttl,
                                                     std::chrono::milliseconds) {
  RSC_RETURN_IF_ERROR(CheckUp());
  const TimeMs now = clock_.NowMs();
  auto it = locks_.find(key.Tag());
  if (it != locks_.end() && it->second.expires_ms > now) return std::optional<std::string>();
  std::string token = tokens_.NewToken();
  locks_[key.Tag()] = LockState{token, now + std::max<int64_t>(1, ttl.count())};
  return std::optional<std::string>(token);
}

Status MemoryStore::Unlock(const GroupKey& key, const std::string& token) {
  RSC_RETURN_IF_ERROR(CheckUp());
  auto it = locks_.find(key.Tag());
  if (it != locks_.end() && it->second.token == token) locks_.erase(it);
  return OkStatus();
}

// As redis_store.cc: HMGET of the three fields, checked by DecodeLayoutHash.
Result<std::optional<StoredLayout>> MemoryStore::LoadLayout(const std::string& stream) {
  RSC_RETURN_IF_ERROR(CheckUp());
  auto it = data_.layouts.find(stream);
  if (it == data_.layouts.end()) return std::optional<StoredLayout>{};
  auto field = [&](const char* name) -> std::optional<std::string> {
    auto f = it->second.fields.find(name);
    if (f == it->second.fields.end()) return std::nullopt;
    return f->second;
  };
  RSC_ASSIGN_OR_RETURN(StoredLayout l, DecodeLayoutHash(stream, {field("layout"), field("revision"),
                                                                 field("schemaVersion")}));
  return std::optional<StoredLayout>{std::move(l)};
}

// As lua/layout_cas.lua.
Result<CasOutcome> MemoryStore::CompareAndSetLayout(const std::string& stream,
                                                    StoreRevision expected, const Layout& next,
                                                    TimeMs now_ms) {
  RSC_RETURN_IF_ERROR(CheckUp());
  RSC_CHECK(next.stream == stream);
  int64_t rev = 0;
  auto it = data_.layouts.find(stream);
  if (it != data_.layouts.end()) {
    auto f = it->second.fields.find("revision");
    if (f == it->second.fields.end()) {
      return MakeError(ErrorCode::kMetadataUnreadable,
                       fmt::format("layout compare-and-set of stream '{}': layout hash has no "
                                   "revision field",
                                   stream));
    }
    char* end = nullptr;
    rev = std::strtoll(f->second.c_str(), &end, 10);
    if (f->second.empty() || *end != '\0' || rev < 1) {
      return MakeError(ErrorCode::kMetadataUnreadable,
                       fmt::format("layout compare-and-set of stream '{}': layout revision field "
                                   "is not a positive integer",
                                   stream));
    }
  }
  if (rev != expected.value()) return CasOutcome{false, StoreRevision(rev)};
  Hash& h = data_.layouts[stream];
  h.fields["layout"] = EncodeLayout(next);
  h.fields["revision"] = std::to_string(rev + 1);
  h.fields["schemaVersion"] = std::to_string(kLayoutSchemaVersion);
  h.fields["updatedAt"] = std::to_string(now_ms);
  return CasOutcome{true, StoreRevision(rev + 1)};
}

}  // namespace rsc::sim
