#include "rsc/version_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
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
  Entries entries;
  if (!ReadEntries(path_, &entries, error)) return false;
  entries[{stream, group}] = version;
  std::ostringstream text;
  text << kHeader << "\n";
  for (const auto& [k, v] : entries) {
    text << k.first << '\t' << k.second << '\t' << v.metadata_version << '\t' << v.lineage << "\n";
  }
  // Atomic replace: a crash leaves the old file or the new one, never half of one.
  const std::string tmp = path_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "version store " + tmp + ": cannot create: " + std::strerror(errno);
    return false;
  }
  const bool ok = WriteAll(fd, text.str()) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    *error =
        "version store " + path_ + ": cannot write: " + std::strerror(ok ? errno : saved_errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace rsc
