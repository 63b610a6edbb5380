#include "rsc/version_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

namespace rsc {
namespace {

constexpr const char* kHeader = "rsc-version-store 1";

using Entries = std::map<std::pair<std::string, std::string>, ObservedVersion>;

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

// Reads the whole file. A missing file is an empty store.
bool ReadEntries(const std::string& path, Entries* out, std::string* error) {
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return true;
  std::ifstream in(path);
  if (!in) {
    *error = "version store " + path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::string line;
  int line_no = 0;
  if (in.peek() == std::ifstream::traits_type::eof() && !in.bad()) {
    // Save never leaves an empty file (it writes the header first and replaces the file
    // whole): an empty one was truncated by someone else. Starting from version 0 on it
    // would fail open, so it is as corrupt as any other unreadable content.
    *error = "version store " + path + ": the file is empty (no '" + kHeader + "' line)";
    return false;
  }
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      if (line != kHeader) {
        *error = "version store " + path + ": line 1 is not '" + kHeader + "'";
        return false;
      }
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> f = SplitTabs(line);
    int64_t version = 0;
    const char* b = f.size() == 4 ? f[2].data() : nullptr;
    auto [ptr, ec] = b ? std::from_chars(b, b + f[2].size(), version)
                       : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (f.size() != 4 || f[0].empty() || f[1].empty() || ec != std::errc() ||
        ptr != b + f[2].size() || version < 0) {
      *error = "version store " + path + ": line " + std::to_string(line_no) + " is corrupt";
      return false;
    }
    (*out)[{f[0], f[1]}] = ObservedVersion{version, f[3]};
  }
  if (in.bad()) {
    *error = "version store " + path + ": read error";
    return false;
  }
  return true;
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// An exclusive flock(2) on a lock file, released when this goes out of scope. The lock file
// is never deleted (deleting it would let two writers lock two different files).
class FileLock {
 public:
  static std::optional<FileLock> Take(const std::string& path, std::string* error) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      *error = "version store " + path + ": cannot open: " + std::strerror(errno);
      return std::nullopt;
    }
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      *error = "version store " + path + ": cannot lock: " + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

bool SyncDirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

FileVersionStore::FileVersionStore(std::string path) : path_(std::move(path)) {}

bool FileVersionStore::Load(const std::string& stream, const std::string& group,
                            ObservedVersion* out, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Entries entries;
  if (!ReadEntries(path_, &entries, error)) return false;
  auto it = entries.find({stream, group});
  *out = it == entries.end() ? ObservedVersion{} : it->second;
  return true;
}

bool FileVersionStore::Save(const std::string& stream, const std::string& group,
                            const ObservedVersion& version, std::string* error) {
  if (stream.find_first_of("\t\n") != std::string::npos ||
      group.find_first_of("\t\n") != std::string::npos ||
      version.lineage.find_first_of("\t\n") != std::string::npos) {
    *error = "version store: names and lineage must not contain tabs or newlines";
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Across processes, and across stores of one path in one process: an exclusive lock on a
  // file beside it for the whole read-modify-write, so no writer's update is lost.
  std::optional<FileLock> held = FileLock::Take(path_ + ".lock", error);
  if (!held) return false;
  Entries entries;
  if (!ReadEntries(path_, &entries, error)) return false;
  entries[{stream, group}] = version;
  std::ostringstream text;
  text << kHeader << "\n";
  for (const auto& [k, v] : entries) {
    text << k.first << '\t' << k.second << '\t' << v.metadata_version << '\t' << v.lineage << "\n";
  }
  // Atomic replace: a crash leaves the old file or the new one, never half of one. The
  // temporary file has a name of its own (mkstemp), so a writer that ignores the lock still
  // cannot truncate this one's; the directory is synced after the rename, so after a power
  // loss the file is the new one (a lowered version after SYNC_METADATA must not come back
  // as the old, higher one: C5).
  std::string tmp = path_ + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = "version store " + path_ + ".tmp: cannot create: " + std::strerror(errno);
    return false;
  }
  const bool ok = ::fchmod(fd, 0644) == 0 && WriteAll(fd, text.str()) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    *error =
        "version store " + path_ + ": cannot write: " + std::strerror(ok ? errno : saved_errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (!SyncDirectoryOf(path_)) {
    *error = "version store " + path_ + ": cannot sync its directory: " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace rsc
