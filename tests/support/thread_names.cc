#include "support/thread_names.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace rsc::testing {

std::map<std::string, int> ThreadNames() {
  std::map<std::string, int> names;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    // A thread that ended since the listing has no file left: not counted.
    if (comm && std::getline(comm, name)) ++names[name];
  }
  return names;
}

std::string DescribeThreadNames(const std::map<std::string, int>& names) {
  std::string out;
  for (const auto& [name, count] : names) {
    if (!out.empty()) out += ", ";
    out += name + "x" + std::to_string(count);
  }
  return out;
}

}  // namespace rsc::testing
