#pragma once
// Strict readers over boost::json values: each returns an Error naming the JSON path on
// a missing field, wrong type or out-of-range number. Shared by the aggregate codec and
// the protocol parsers so every parser rejects bad input the same way.

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rsc::json {

// Parses text into a value; never throws. Depth is limited by Boost.JSON's default (32).
Result<boost::json::value> Parse(std::string_view text, ErrorCode on_error);

class Reader {
 public:
  Reader(const boost::json::object& obj, std::string path, ErrorCode code)
      : obj_(obj), path_(std::move(path)), code_(code) {}

  const boost::json::value* Find(std::string_view key) const;
  Result<int64_t> Int(std::string_view key, int64_t min, int64_t max) const;
  Result<int64_t> IntOr(std::string_view key, int64_t min, int64_t max, int64_t dflt) const;
  Result<std::string> Str(std::string_view key, size_t max_len) const;
  Result<std::string> StrOr(std::string_view key, size_t max_len, std::string dflt) const;
  Result<bool> BoolOr(std::string_view key, bool dflt) const;
  Result<const boost::json::object*> Obj(std::string_view key) const;
  Result<const boost::json::array*> Arr(std::string_view key) const;
  Error Bad(std::string_view key, std::string_view what) const;
  std::string Path(std::string_view key) const;
  ErrorCode code() const { return code_; }

 private:
  const boost::json::object& obj_;
  std::string path_;
  ErrorCode code_;
};

// Integer value check (accepts int64/uint64 within range; rejects doubles and bools).
Result<int64_t> AsInt(const boost::json::value& v, const std::string& path, int64_t min,
                      int64_t max, ErrorCode code);

}  // namespace rsc::json
