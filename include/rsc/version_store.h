#pragma once
// VersionStore: an optional SPI that keeps a client's highest observed metadata version
// (and its lineage token) across process restarts (SPEC C5, M8; producers use it the same
// way). Without one, a restarted process starts from version 0 / lineage "" (a fresh
// client, which the coordinator treats as ordinary lag); with one, a restart after Redis
// lost writes is still detected (the coordinator answers SYNC_METADATA / `sync: true`).
//
// Keyed by group (stream prefix P, consumer group G), so one store can serve the consumer
// and the producer of several groups in one process.
//
// Save stores exactly what it is given: after a SYNC_METADATA / `sync: true` answer the
// observed version legitimately goes *down* to the stored truth, and the store must follow,
// or every restart would report a false regression.
//
// Thread safety: implementations must be safe to call from several threads (a consumer's
// and a producer's background threads may share one).

#include <cstdint>
#include <mutex>
#include <string>

namespace rsc {

// The highest metadata version observed, with the lineage token that came with it.
struct ObservedVersion {
  int64_t metadata_version = 0;
  std::string lineage;
  bool operator==(const ObservedVersion&) const = default;
};

// The group name under which a producer that routes by the stream (ProducerOptions::group
// empty) keeps its observed layout version: not a valid group name, so it never collides.
inline constexpr const char* kStreamRoutingGroup = "*";

class VersionStore {
 public:
  virtual ~VersionStore() = default;
  // The stored version of group (stream, group): {0, ""} when none was stored. False (and
  // *error set) when the store cannot be read or is corrupt; callers fail closed on that
  // rather than silently starting from 0.
  virtual bool Load(const std::string& stream, const std::string& group, ObservedVersion* out,
                    std::string* error) = 0;
  // Replaces the stored version of (stream, group). False (and *error set) on failure; the
  // previously stored value is then still intact.
  virtual bool Save(const std::string& stream, const std::string& group,
                    const ObservedVersion& version, std::string* error) = 0;
};

// A VersionStore in one small text file, rewritten atomically (write a temporary file,
// fsync, rename) on every Save, so a crash leaves either the old or the new content.
// Format (UTF-8 text, one group per line, tab-separated; names never contain tabs, R2.4):
//   rsc-version-store 1
//   <stream>\t<group>\t<metadataVersion>\t<lineage>
// Safe across threads (an internal mutex) and across processes and stores sharing one path:
// each Save holds an exclusive flock(2) on `<path>.lock` (created beside it, never deleted)
// while it reads, changes and replaces the file, writes a temporary file of its own
// (`<path>.tmp.XXXXXX`), and syncs the directory after the rename. An empty file is corrupt
// (Save never leaves one), not an empty store.
class FileVersionStore : public VersionStore {
 public:
  explicit FileVersionStore(std::string path);
  bool Load(const std::string& stream, const std::string& group, ObservedVersion* out,
            std::string* error) override;
  bool Save(const std::string& stream, const std::string& group, const ObservedVersion& version,
            std::string* error) override;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::mutex mu_;  // serializes read-modify-write of the file
};

}  // namespace rsc
