#pragma once
// An owned copy of a RESP2 reply. hiredis replies are converted at once so no hiredis type
// leaks past connection.cc and replies can outlive the connection that produced them.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rsc::redis {

// One command: its arguments, binary-safe.
using Command = std::vector<std::string>;

struct Reply {
  enum class Type { kString, kArray, kInteger, kNil, kStatus, kError };

  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<Reply> elements;  // kArray

  bool IsError() const { return type == Type::kError; }
  bool IsNil() const { return type == Type::kNil; }
  bool IsString() const { return type == Type::kString; }
  bool IsArray() const { return type == Type::kArray; }
  bool IsInteger() const { return type == Type::kInteger; }
  bool IsStatus() const { return type == Type::kStatus; }
  // True for an error reply whose first word is `prefix` (e.g. "NOSCRIPT", "MOVED").
  bool ErrorIs(std::string_view prefix) const {
    return IsError() && str.size() >= prefix.size() && str.compare(0, prefix.size(), prefix) == 0 &&
           (str.size() == prefix.size() || str[prefix.size()] == ' ');
  }
  // Short human form for messages and test failures ("(error) ...", "[1, "x", nil]").
  std::string DebugString() const;

  // Replies built by hand: the simulator's Redis (sim/wire_redis.cc) and tests.
  static Reply Nil() { return Reply{}; }
  static Reply Bulk(std::string s) { return Reply{Type::kString, std::move(s), 0, {}}; }
  static Reply Status(std::string s) { return Reply{Type::kStatus, std::move(s), 0, {}}; }
  static Reply Error(std::string s) { return Reply{Type::kError, std::move(s), 0, {}}; }
  static Reply Integer(int64_t n) { return Reply{Type::kInteger, {}, n, {}}; }
  static Reply Array(std::vector<Reply> elements = {}) {
    return Reply{Type::kArray, {}, 0, std::move(elements)};
  }
};

}  // namespace rsc::redis
