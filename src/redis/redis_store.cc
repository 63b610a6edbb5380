#include "redis/redis_store.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <random>
#include <thread>

#include "core/codec.h"
#include "core/layout_codec.h"
#include "redis/cluster.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/random.h"
#include "redis/sha1.h"

namespace rsc::redis {
namespace {

const LuaScript& LoadScript() {
  static const LuaScript s("load", lua::kLoad);
  return s;
}
const LuaScript& CasScript() {
  static const LuaScript s("compare_and_set", lua::kCompareAndSet);
  return s;
}
const LuaScript& RenewScript() {
  static const LuaScript s("renew_if_steady", lua::kRenewIfSteady);
  return s;
}
const LuaScript& CreateScript() {
  static const LuaScript s("create", lua::kCreate);
  return s;
}
const LuaScript& RestoreScript() {
  static const LuaScript s("restore", lua::kRestore);
  return s;
}
const LuaScript& DeleteScript() {
  static const LuaScript s("delete", lua::kDelete);
  return s;
}
const LuaScript& LayoutTouchScript() {
  static const LuaScript s("layout_touch", lua::kLayoutTouch);
  return s;
}

const LuaScript& LayoutCasScript() {
  static const LuaScript s("layout_cas", lua::kLayoutCas);
  return s;
}
const LuaScript& UnlockScript() {
  static const LuaScript s("unlock", lua::kUnlock);
  return s;
}

template <class Int>
bool ParseInteger(std::string_view s, Int* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Sorted-set scores come back as strings ("1700000000123", or "1.7e+12" for odd writers).
// A deadline outside [0, kMaxTimeMs] is as unreadable as a non-numeric one (and converting
// such a double to an integer would be undefined).
bool ParseScore(const std::string& s, TimeMs* out) {
  if (ParseInteger(s, out)) return *out >= 0 && *out <= kMaxTimeMs;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(d)) return false;
  if (d < 0 || d > static_cast<double>(kMaxTimeMs)) return false;
  *out = static_cast<TimeMs>(std::llround(d));
  return true;
}

// Flat [member, score, member, score...] as returned by WITHSCORES.
bool ParseScores(const Reply& r, std::map<std::string, TimeMs>* out) {
  if (!r.IsArray() || r.elements.size() % 2 != 0) return false;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    TimeMs score = 0;
    if (!r.elements[i].IsString() || !r.elements[i + 1].IsString() ||
        !ParseScore(r.elements[i + 1].str, &score)) {
      return false;
    }
    (*out)[r.elements[i].str] = score;
  }
  return true;
}

std::string Quoted(const Reply& r) {
  std::string s = r.str.substr(0, 40);
  return r.str.size() > 40 ? "'" + s + "...'" : "'" + s + "'";
}

Error Unexpected(std::string_view what, const Reply& r) {
  return MakeError(ErrorCode::kInternal,
                   fmt::format("redis: unexpected reply to {}: {}", what, r.DebugString()));
}

}  // namespace

Result<std::unique_ptr<RedisStore>> RedisStore::Open(const RedisUrl& url,
                                                     const RedisStoreOptions& options) {
  ConnectionOptions co = ConnectionOptions::FromUrl(url);
  co.connect_timeout = options.connect_timeout;
  co.command_timeout = options.command_timeout;

  auto opened = OpenExecutor(co, options.cluster, options.pool_size, options.checkout_wait);
  if (!opened.ok()) {
    Error e = opened.error();
    // Name the URL the operator gave (password redacted), not only the address.
    if (e.code == ErrorCode::kInvalidRequest) e.message += fmt::format(" ({})", url.Redacted());
    return e;
  }
  std::unique_ptr<Executor> executor = std::move(opened).value();
  spdlog::info("redis store: {}", executor->Describe());
  return std::make_unique<RedisStore>(std::move(executor), options);
}

RedisStore::RedisStore(std::unique_ptr<Executor> executor, const RedisStoreOptions& options)
    : executor_(std::move(executor)), options_(options) {}

RedisStore::~RedisStore() = default;

Error RedisStore::CountError(Error e) {
  stats_.command_errors.fetch_add(1, std::memory_order_relaxed);
  if (e.code == ErrorCode::kUnknownResult) {
    stats_.unknown_results.fetch_add(1, std::memory_order_relaxed);
  }
  return e;
}

Error RedisStore::ReplyError(const Reply& reply, std::string_view what) {
  if (reply.str.find("RSC_UNREADABLE") != std::string::npos ||
      reply.str.find("WRONGTYPE") != std::string::npos) {
    stats_.metadata_unreadable.fetch_add(1, std::memory_order_relaxed);
    std::string msg = reply.str;
    if (size_t p = msg.find("RSC_UNREADABLE "); p != std::string::npos) msg = msg.substr(p + 15);
    return MakeError(ErrorCode::kMetadataUnreadable, fmt::format("{}: {}", what, msg));
  }
  return CountError(MakeError(ErrorCode::kRedisUnavailable,
                              fmt::format("redis error in {}: {}", what, reply.str)));
}

Result<Reply> RedisStore::Eval(const LuaScript& script, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args, CommandKind kind) {
  auto reply = script.Eval(*executor_, keys, args, kind, &stats_.script_reloads);
  if (!reply.ok()) return CountError(reply.error());
  return reply;
}

Result<Reply> RedisStore::RunChecked(std::string_view key, const Command& cmd, CommandKind kind,
                                     std::string_view what) {
  auto reply = executor_->Run(key, cmd, kind);
  if (!reply.ok()) return CountError(reply.error());
  if (reply->IsError()) return ReplyError(*reply, what);
  return reply;
}

std::optional<RedisStore::CacheEntry> RedisStore::CacheGet(const std::string& tag) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto it = cache_.find(tag);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

void RedisStore::CachePut(const std::string& tag, CacheEntry entry) {
  if (options_.cache_capacity == 0) return;
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= options_.cache_capacity && cache_.find(tag) == cache_.end()) {
    // Any victim will do: a miss costs one aggregate transfer and parse, nothing more.
    cache_.erase(cache_.begin());
  }
  cache_[tag] = std::move(entry);
}

void RedisStore::CacheErase(const std::string& tag) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  cache_.erase(tag);
}

Result<StoredGroup> RedisStore::Load(const GroupKey& key, TimeMs now_ms) {
  const std::string tag = key.Tag();
  const std::vector<std::string> keys = {MetadataKey(key), LivenessKey(key)};
  auto unreadable = [&](std::string_view what) {
    stats_.metadata_unreadable.fetch_add(1, std::memory_order_relaxed);
    return MakeError(
        ErrorCode::kMetadataUnreadable,
        fmt::format("metadata of group {} ({}) is unreadable: {}", tag, keys[0], what));
  };

  std::optional<CacheEntry> cached = CacheGet(tag);
  // Whether `cached` came from the cache (a hit) rather than from an earlier round.
  bool from_cache = cached.has_value();
  // A second round is needed only when the liveness set's size disagrees with the
  // aggregate just fetched; the last round asks for the whole set unconditionally.
  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds; ++round) {
    std::string member_hint = "-1";
    if (round == kRounds - 1) {
      member_hint = "all";
    } else if (cached) {
      member_hint = std::to_string(cached->meta->members.size());
    }
    auto reply =
        Eval(LoadScript(), keys,
             {cached ? cached->token : "", cached ? std::to_string(cached->aggregate_len) : "-1",
              std::to_string(now_ms), member_hint},
             CommandKind::kRead);
    if (!reply.ok()) return reply.error();
    if (reply->IsError()) return ReplyError(*reply, fmt::format("load of group {}", tag));
    const std::vector<Reply>& r = reply->elements;
    if (!reply->IsArray() || r.empty() || !r[0].IsInteger()) return Unexpected("load", *reply);

    if (r[0].integer == 0) {
      CacheErase(tag);
      auto indexed = RunChecked(kIndexKey, {"SISMEMBER", std::string(kIndexKey), tag},
                                CommandKind::kRead, "index lookup");
      if (!indexed.ok()) return indexed.error();
      if (indexed->integer == 1) {
        stats_.metadata_missing.fetch_add(1, std::memory_order_relaxed);
        return MakeError(ErrorCode::kMetadataMissing,
                         fmt::format("metadata key {} is missing but group {} is listed in {}; "
                                     "failing closed (restore it explicitly, SPEC L1/L2)",
                                     keys[0], tag, kIndexKey));
      }
      return MakeError(ErrorCode::kGroupNotFound, fmt::format("group {} does not exist", tag));
    }
    if (r.size() != 10 || !r[6].IsArray() || !r[7].IsInteger() || !r[8].IsInteger() ||
        !r[9].IsInteger()) {
      return Unexpected("load", *reply);
    }

    // Versions first: a hash written by a newer coordinator must not be half-understood.
    int schema = 0;
    int layout = 0;
    int64_t revision = 0;
    if (r[3].IsNil()) return unreadable("field 'schemaVersion' is missing");
    if (!ParseInteger(r[3].str, &schema)) {
      return unreadable(fmt::format("field 'schemaVersion' is not an integer: {}", Quoted(r[3])));
    }
    if (schema != kSchemaVersion) {
      return unreadable(fmt::format("unknown schemaVersion {} (this coordinator reads {})", schema,
                                    kSchemaVersion));
    }
    if (r[4].IsNil()) return unreadable("field 'layoutVersion' is missing");
    if (!ParseInteger(r[4].str, &layout)) {
      return unreadable(fmt::format("field 'layoutVersion' is not an integer: {}", Quoted(r[4])));
    }
    if (layout != kLayoutVersion) {
      return unreadable(fmt::format("unknown layoutVersion {} (this coordinator reads {})", layout,
                                    kLayoutVersion));
    }
    if (r[1].IsNil()) return unreadable("field 'revision' is missing");
    if (!ParseInteger(r[1].str, &revision) || revision < 1 || revision >= kMaxCounter) {
      return unreadable(fmt::format("field 'revision' is not an integer in [1, {}): {}",
                                    kMaxCounter, Quoted(r[1])));
    }
    const std::string token = r[2].IsNil() ? std::string() : r[2].str;
    const int64_t aggregate_len = r[8].integer;

    std::shared_ptr<const GroupMetadata> meta;
    if (r[5].IsString()) {
      stats_.cache_misses.fetch_add(1, std::memory_order_relaxed);
      auto decoded = DecodeAggregate(r[5].str);
      if (!decoded.ok()) return unreadable(fmt::format("aggregate: {}", decoded.error().message));
      if (decoded->key != key) {
        return unreadable(fmt::format("aggregate names group {} instead", decoded->key.Tag()));
      }
      meta = std::make_shared<const GroupMetadata>(std::move(decoded.value()));
      // A hash without a token (written by hand or another tool) is never cached.
      if (!token.empty())
        CachePut(tag, CacheEntry{token, aggregate_len, meta, Sha1Hex(r[5].str), revision});
    } else if (cached && !token.empty() && token == cached->token &&
               aggregate_len == cached->aggregate_len) {
      if (from_cache) stats_.cache_hits.fetch_add(1, std::memory_order_relaxed);
      meta = cached->meta;
    } else {
      return unreadable("field 'aggregate' is missing");
    }

    Liveness liveness;
    if (!ParseScores(r[6], &liveness.deadline_ms)) {
      return unreadable(
          fmt::format("liveness set {} holds a non-numeric or out-of-range deadline", keys[1]));
    }
    const bool full = r[9].integer == 1;
    const auto zcard = static_cast<size_t>(r[7].integer);
    if (!full && zcard != meta->members.size()) {
      // The due-only view is not enough (liveness.h): fetch again, against this aggregate.
      cached =
          CacheEntry{token, aggregate_len, meta, cached ? cached->sha1 : std::string(), revision};
      from_cache = false;
      continue;
    }
    liveness.complete = full;
    return StoredGroup{StoreRevision(revision), std::move(meta), std::move(liveness),
                       AggregateStamp{StoreRevision(revision), token, aggregate_len}};
  }
  return MakeError(ErrorCode::kInternal, "load: liveness round limit reached");  // unreachable
}

Result<CasOutcome> RedisStore::CompareAndSet(const GroupKey& key, StoreRevision expected,
                                             const GroupMetadata* next,
                                             const LivenessUpdate& liveness, TimeMs now_ms) {
  const std::string tag = key.Tag();
  std::string json;
  std::string token;
  if (next != nullptr) {
    RSC_CHECK(next->key == key);
    json = EncodeAggregate(*next);
    token = RandomHex128();
  }
  std::vector<std::string> args;
  args.reserve(10 + 2 * liveness.set.size() + 2 * liveness.remove.size());
  args.push_back(std::to_string(expected.value()));
  args.push_back(next != nullptr ? "1" : "0");
  args.push_back(json);
  args.push_back(std::to_string(kSchemaVersion));
  args.push_back(std::to_string(kLayoutVersion));
  args.push_back(std::to_string(now_ms));
  args.push_back(token);
  std::string loaded_sha;
  if (next != nullptr) {
    // Only an entry of exactly the expected revision describes the bytes the decision
    // was made on (another thread may have cached an older or newer write meanwhile).
    std::optional<CacheEntry> c = CacheGet(tag);
    if (c && c->revision == expected.value()) loaded_sha = c->sha1;
  }
  args.push_back(loaded_sha);
  args.push_back(std::to_string(liveness.set.size()));
  for (const auto& [member, deadline] : liveness.set) {
    args.push_back(member);
    args.push_back(std::to_string(deadline));
  }
  for (const std::string& member : liveness.remove) {
    args.push_back(member);
    auto bound = liveness.remove_if_at_most.find(member);
    args.push_back(bound == liveness.remove_if_at_most.end() ? std::string()
                                                             : std::to_string(bound->second));
  }

  auto reply = Eval(CasScript(), {MetadataKey(key), LivenessKey(key)}, args, CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) {
    CacheErase(tag);  // the next load parses what is really stored
    return ReplyError(*reply, fmt::format("compare-and-set of group {}", tag));
  }
  if (!reply->IsArray() || reply->elements.size() != 2 || !reply->elements[0].IsInteger() ||
      !reply->elements[1].IsInteger()) {
    return Unexpected("compare_and_set", *reply);
  }
  const bool applied = reply->elements[0].integer == 1;
  const StoreRevision revision(reply->elements[1].integer);
  if (!applied) {
    stats_.revision_conflicts.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("redis store: CAS conflict on {}: expected revision {}, stored {}", tag,
                  expected.value(), revision.value());
    return CasOutcome{false, revision};
  }
  if (next != nullptr) {
    // What we wrote is what the next Load would parse; keep it under the new token.
    CachePut(tag, CacheEntry{token, static_cast<int64_t>(json.size()),
                             std::make_shared<const GroupMetadata>(*next), Sha1Hex(json),
                             revision.value()});
    return CasOutcome{true, revision,
                      AggregateStamp{revision, token, static_cast<int64_t>(json.size())}};
  }
  return CasOutcome{true, revision};
}

Result<bool> RedisStore::RenewIfSteady(const GroupKey& key, const AggregateStamp& basis,
                                       size_t member_count,
                                       const std::vector<std::pair<std::string, TimeMs>>& set,
                                       TimeMs now_ms) {
  if (basis.write_token.empty() || basis.aggregate_len < 0) return false;
  std::vector<std::string> args;
  args.reserve(7 + 2 * set.size());
  args.push_back(std::to_string(basis.revision.value()));
  args.push_back(basis.write_token);
  args.push_back(std::to_string(basis.aggregate_len));
  args.push_back(std::to_string(kSchemaVersion));
  args.push_back(std::to_string(kLayoutVersion));
  args.push_back(std::to_string(member_count));
  args.push_back(std::to_string(now_ms));
  for (const auto& [member, deadline] : set) {
    args.push_back(member);
    args.push_back(std::to_string(deadline));
  }
  auto reply = Eval(RenewScript(), {MetadataKey(key), LivenessKey(key), LockKey(key)}, args,
                    CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  // An error reply (a key of the wrong type…) is left to the locked path, whose Load
  // reports it as it always has.
  if (!reply->IsInteger()) return false;
  return reply->integer == 1;
}

Status RedisStore::IndexAdd(const GroupKey& key) {
  Result<Reply> last = MakeError(ErrorCode::kInternal, "not run");
  for (int attempt = 0; attempt < 2; ++attempt) {
    last = RunChecked(kIndexKey, {"SADD", std::string(kIndexKey), key.Tag()}, CommandKind::kWrite,
                      "index add");
    if (last.ok()) return OkStatus();
  }
  return last.error();
}

Result<StoreRevision> RedisStore::Create(const GroupMetadata& meta, TimeMs now_ms) {
  const std::string tag = meta.key.Tag();
  // Index first (see the header): an extra entry fails closed, a missing one would not.
  if (Status s = IndexAdd(meta.key); !s.ok()) return s.error();
  const std::string json = EncodeAggregate(meta);
  const std::string token = RandomHex128();
  auto reply = Eval(CreateScript(), {MetadataKey(meta.key), LivenessKey(meta.key)},
                    {json, std::to_string(kSchemaVersion), std::to_string(kLayoutVersion),
                     std::to_string(now_ms), token},
                    CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) return ReplyError(*reply, fmt::format("create of group {}", tag));
  if (!reply->IsInteger()) return Unexpected("create", *reply);
  if (reply->integer == 0) {
    return MakeError(ErrorCode::kGroupExists, fmt::format("group {} already exists", tag));
  }
  CachePut(tag, CacheEntry{token, static_cast<int64_t>(json.size()),
                           std::make_shared<const GroupMetadata>(meta)});
  return StoreRevision(1);
}

Result<StoreRevision> RedisStore::Restore(const GroupMetadata& meta, TimeMs now_ms) {
  const std::string tag = meta.key.Tag();
  if (Status s = IndexAdd(meta.key); !s.ok()) return s.error();
  const std::string json = EncodeAggregate(meta);
  const std::string token = RandomHex128();
  auto reply = Eval(RestoreScript(), {MetadataKey(meta.key), LivenessKey(meta.key)},
                    {json, std::to_string(kSchemaVersion), std::to_string(kLayoutVersion),
                     std::to_string(now_ms), token},
                    CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) return ReplyError(*reply, fmt::format("restore of group {}", tag));
  if (!reply->IsInteger()) return Unexpected("restore", *reply);
  CachePut(tag, CacheEntry{token, static_cast<int64_t>(json.size()),
                           std::make_shared<const GroupMetadata>(meta)});
  return StoreRevision(reply->integer);
}

Status RedisStore::Delete(const GroupKey& key, StoreRevision expected) {
  const std::string tag = key.Tag();
  auto reply = Eval(DeleteScript(), {MetadataKey(key), LivenessKey(key)},
                    {std::to_string(expected.value())}, CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) return ReplyError(*reply, fmt::format("delete of group {}", tag));
  if (!reply->IsArray() || reply->elements.empty() || !reply->elements[0].IsInteger()) {
    return Unexpected("delete", *reply);
  }
  const int64_t outcome = reply->elements[0].integer;
  if (outcome == 0) {
    stats_.revision_conflicts.fetch_add(1, std::memory_order_relaxed);
    int64_t stored = reply->elements.size() > 1 ? reply->elements[1].integer : -1;
    return MakeError(ErrorCode::kRevisionConflict,
                     fmt::format("group {} is at revision {}, not the expected {}", tag, stored,
                                 expected.value()));
  }
  CacheErase(tag);
  if (outcome < 0) {
    auto indexed = RunChecked(kIndexKey, {"SISMEMBER", std::string(kIndexKey), tag},
                              CommandKind::kRead, "index lookup");
    if (!indexed.ok()) return indexed.error();
    if (indexed->integer == 1) {
      stats_.metadata_missing.fetch_add(1, std::memory_order_relaxed);
      return MakeError(ErrorCode::kMetadataMissing,
                       fmt::format("metadata key {} is missing but group {} is listed in {}",
                                   MetadataKey(key), tag, kIndexKey));
    }
    return MakeError(ErrorCode::kGroupNotFound, fmt::format("group {} does not exist", tag));
  }
  // The hash is gone; now the index entry. Failing here leaves an extra entry (fail
  // closed: the group reads as METADATA_MISSING until RebuildIndex), so report it loudly.
  for (int attempt = 0;; ++attempt) {
    auto removed = RunChecked(kIndexKey, {"SREM", std::string(kIndexKey), tag}, CommandKind::kWrite,
                              "index remove");
    if (removed.ok()) break;
    if (attempt == 2) {
      spdlog::error(
          "redis store: group {} deleted but its index entry could not be removed: {} "
          "(it will read as METADATA_MISSING until the index is rebuilt)",
          tag, removed.error().message);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
  }
  return OkStatus();
}

Result<std::vector<GroupKey>> RedisStore::ListGroups() {
  auto reply = RunChecked(kIndexKey, {"SMEMBERS", std::string(kIndexKey)}, CommandKind::kRead,
                          "list groups");
  if (!reply.ok()) return reply.error();
  if (!reply->IsArray()) return Unexpected("SMEMBERS", *reply);
  std::vector<GroupKey> out;
  for (const Reply& m : reply->elements) {
    auto key = ParseIndexMember(m.str);
    if (!key) {
      spdlog::warn("redis store: ignoring malformed index entry '{}' in {}", m.str, kIndexKey);
      continue;
    }
    out.push_back(std::move(*key));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Liveness> RedisStore::LoadAllLiveness(const GroupKey& key) {
  const std::string lkey = LivenessKey(key);
  auto reply = RunChecked(lkey, {"ZRANGE", lkey, "0", "-1", "WITHSCORES"}, CommandKind::kRead,
                          fmt::format("liveness of group {}", key.Tag()));
  if (!reply.ok()) return reply.error();
  Liveness out;
  out.complete = true;
  if (!ParseScores(*reply, &out.deadline_ms)) {
    stats_.metadata_unreadable.fetch_add(1, std::memory_order_relaxed);
    return MakeError(
        ErrorCode::kMetadataUnreadable,
        fmt::format("liveness set {} holds a non-numeric or out-of-range deadline", lkey));
  }
  return out;
}

Result<std::optional<std::string>> RedisStore::Lock(const GroupKey& key,
                                                    std::chrono::milliseconds ttl,
                                                    std::chrono::milliseconds wait) {
  using Clock = std::chrono::steady_clock;
  const std::string lkey = LockKey(key);
  const std::string token = RandomHex128();
  const auto start = Clock::now();
  const auto deadline = start + wait;
  auto account = [&] {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    stats_.lock_wait_us_total.fetch_add(us.count(), std::memory_order_relaxed);
  };
  auto backoff = std::chrono::microseconds(500);
  const Command cmd = {"SET", lkey, token,
                       "NX",  "PX", std::to_string(std::max<int64_t>(1, ttl.count()))};
  for (;;) {
    auto reply = executor_->Run(lkey, cmd, CommandKind::kWrite);
    if (!reply.ok()) {
      account();
      Error e = CountError(reply.error());
      // An unknown SET outcome needs no special handling: if it did apply, the mutex
      // simply expires after `ttl` (the CAS, not the mutex, guards the data).
      if (e.code == ErrorCode::kUnknownResult) e.code = ErrorCode::kRedisUnavailable;
      return e;
    }
    if (reply->IsError()) {
      account();
      return ReplyError(*reply, fmt::format("lock of group {}", key.Tag()));
    }
    if (reply->IsStatus()) {  // +OK
      account();
      stats_.lock_acquired.fetch_add(1, std::memory_order_relaxed);
      return std::optional<std::string>(token);
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      account();
      stats_.lock_timeouts.fetch_add(1, std::memory_order_relaxed);
      return std::optional<std::string>();
    }
    // Jittered exponential backoff, capped, never past the deadline: waiters do not
    // retry in lock-step, and a released lock is noticed within a few ms.
    auto sleep = std::chrono::microseconds(
        static_cast<int64_t>(static_cast<double>(backoff.count()) * (0.5 + 0.5 * RandomUnit())));
    sleep = std::min(sleep, std::chrono::duration_cast<std::chrono::microseconds>(deadline - now));
    std::this_thread::sleep_for(sleep);
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

Status RedisStore::Unlock(const GroupKey& key, const std::string& token) {
  auto reply = Eval(UnlockScript(), {LockKey(key)}, {token}, CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) return ReplyError(*reply, fmt::format("unlock of group {}", key.Tag()));
  if (reply->IsInteger() && reply->integer == 0) {
    spdlog::debug("redis store: mutex of {} was no longer ours at unlock (expired)", key.Tag());
  }
  return OkStatus();
}

Result<std::optional<StoredLayout>> RedisStore::LoadLayout(const std::string& stream) {
  const std::string key = LayoutKey(stream);
  auto reply = RunChecked(key, {"HMGET", key, "layout", "revision", "schemaVersion"},
                          CommandKind::kRead, fmt::format("layout load of stream '{}'", stream));
  if (!reply.ok()) return reply.error();
  const std::vector<Reply>& f = reply->elements;
  if (!reply->IsArray() || f.size() != 3) return Unexpected("HMGET", *reply);
  if (f[0].IsNil() && f[1].IsNil() && f[2].IsNil()) {
    // HMGET cannot tell an absent key from a hash without these fields.
    auto exists = RunChecked(key, {"EXISTS", key}, CommandKind::kRead, "layout check");
    if (!exists.ok()) return exists.error();
    if (exists->integer == 0) return std::optional<StoredLayout>{};
  }
  auto field = [](const Reply& r) {
    return r.IsNil() ? std::nullopt : std::optional<std::string>(r.str);
  };
  Result<StoredLayout> l = DecodeLayoutHash(stream, {field(f[0]), field(f[1]), field(f[2])});
  if (!l.ok()) {
    stats_.metadata_unreadable.fetch_add(1, std::memory_order_relaxed);
    return l.error();
  }
  return std::optional<StoredLayout>{std::move(*l)};
}

Result<CasOutcome> RedisStore::CompareAndSetLayout(const std::string& stream,
                                                   StoreRevision expected, const Layout& next,
                                                   TimeMs now_ms) {
  RSC_CHECK(next.stream == stream);
  auto reply = Eval(LayoutCasScript(), {LayoutKey(stream)},
                    {std::to_string(expected.value()), EncodeLayout(next),
                     std::to_string(kLayoutSchemaVersion), std::to_string(now_ms)},
                    CommandKind::kWrite);
  if (!reply.ok()) return reply.error();
  if (reply->IsError()) {
    return ReplyError(*reply, fmt::format("layout compare-and-set of stream '{}'", stream));
  }
  if (!reply->IsArray() || reply->elements.size() != 2 || !reply->elements[0].IsInteger() ||
      !reply->elements[1].IsInteger()) {
    return Unexpected("layout_cas", *reply);
  }
  const bool applied = reply->elements[0].integer == 1;
  if (!applied) stats_.revision_conflicts.fetch_add(1, std::memory_order_relaxed);
  return CasOutcome{applied, StoreRevision(reply->elements[1].integer)};
}

Result<bool> RedisStore::ConfirmLayout(const std::string& stream, StoreRevision revision,
                                       TimeMs now_ms) {
  const std::string key = LayoutKey(stream);
  // The barrier's write and its WAIT go down one connection (RunAcknowledged); EVAL with the
  // body, since a NOSCRIPT could not be retried inside the pipeline.
  auto w = RunAcknowledged(*executor_, key,
                           LayoutTouchScript().EvalCommand(
                               {key}, {std::to_string(revision.value()), std::to_string(now_ms)}),
                           options_.replica_wait);
  if (!w.ok()) return CountError(w.error());
  if (w->reply.IsError()) {
    return ReplyError(w->reply, fmt::format("layout barrier of stream '{}'", stream));
  }
  if (!w->reply.IsInteger()) return Unexpected("layout_touch", w->reply);
  if (w->reply.integer == 0) return false;
  if (!w->acknowledged) {
    return MakeError(
        ErrorCode::kRedisUnavailable,
        fmt::format("layout of stream '{}' (revision {}): none of its master's {} "
                    "replicas acknowledged it within {} ms (WAIT); nothing is "
                    "sealed until one does (RS2)",
                    stream, revision.value(), w->replicas, options_.replica_wait.count()));
  }
  return true;
}

Result<std::vector<GroupKey>> RedisStore::RebuildIndex() {
  auto masters = executor_->Masters();
  if (!masters.ok()) return CountError(masters.error());
  std::vector<GroupKey> found;
  for (const std::string& node : *masters) {
    std::string cursor = "0";
    do {
      auto reply = executor_->RunOn(
          node, {"SCAN", cursor, "MATCH", std::string(kMetadataKeyPattern), "COUNT", "1000"},
          CommandKind::kRead);
      if (!reply.ok()) return CountError(reply.error());
      if (reply->IsError()) return ReplyError(*reply, "index rebuild scan");
      if (!reply->IsArray() || reply->elements.size() != 2 || !reply->elements[1].IsArray()) {
        return Unexpected("SCAN", *reply);
      }
      cursor = reply->elements[0].str;
      for (const Reply& k : reply->elements[1].elements) {
        if (auto key = ParseMetadataKey(k.str)) found.push_back(std::move(*key));
      }
    } while (cursor != "0");
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());

  if (!found.empty()) {
    Command sadd = {"SADD", std::string(kIndexKey)};
    for (const GroupKey& k : found) sadd.push_back(k.Tag());
    auto added = RunChecked(kIndexKey, sadd, CommandKind::kWrite, "index rebuild add");
    if (!added.ok()) return added.error();
  }
  auto listed = ListGroups();
  if (!listed.ok()) return listed.error();
  for (const GroupKey& k : *listed) {
    if (std::binary_search(found.begin(), found.end(), k)) continue;
    // Re-check: a group created after the SCAN passed its slot must keep its entry.
    const std::string mkey = MetadataKey(k);
    auto exists = RunChecked(mkey, {"EXISTS", mkey}, CommandKind::kRead, "index rebuild check");
    if (!exists.ok()) return exists.error();
    if (exists->integer == 1) continue;
    auto removed = RunChecked(kIndexKey, {"SREM", std::string(kIndexKey), k.Tag()},
                              CommandKind::kWrite, "index rebuild remove");
    if (!removed.ok()) return removed.error();
    spdlog::warn("redis store: removed stale index entry {} (no metadata hash)", k.Tag());
  }
  return found;
}

}  // namespace rsc::redis
