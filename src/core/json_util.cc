#include "core/json_util.h"

#include <fmt/format.h>

namespace rsc::json {

Result<boost::json::value> Parse(std::string_view text, ErrorCode on_error) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) return MakeError(on_error, fmt::format("malformed JSON: {}", ec.message()));
  return v;
}

std::string Reader::Path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

Error Reader::Bad(std::string_view key, std::string_view what) const {
  return MakeError(code_, fmt::format("{}: {}", Path(key), what));
}

const boost::json::value* Reader::Find(std::string_view key) const {
  auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &it->value();
}

Result<int64_t> AsInt(const boost::json::value& v, const std::string& path, int64_t min,
                      int64_t max, ErrorCode code) {
  int64_t x = 0;
  if (v.is_int64()) {
    x = v.get_int64();
  } else if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<uint64_t>(INT64_MAX)) {
      return MakeError(code, fmt::format("{}: number out of range", path));
    }
    x = static_cast<int64_t>(v.get_uint64());
  } else {
    return MakeError(code, fmt::format("{}: must be an integer", path));
  }
  if (x < min || x > max) {
    return MakeError(code, fmt::format("{}: {} is out of range [{}, {}]", path, x, min, max));
  }
  return x;
}

Result<int64_t> Reader::Int(std::string_view key, int64_t min, int64_t max) const {
  const boost::json::value* v = Find(key);
  if (!v) return Bad(key, "is required");
  return AsInt(*v, Path(key), min, max, code_);
}

Result<int64_t> Reader::IntOr(std::string_view key, int64_t min, int64_t max, int64_t dflt) const {
  const boost::json::value* v = Find(key);
  if (!v || v->is_null()) return dflt;
  return AsInt(*v, Path(key), min, max, code_);
}

Result<std::string> Reader::Str(std::string_view key, size_t max_len) const {
  const boost::json::value* v = Find(key);
  if (!v) return Bad(key, "is required");
  if (!v->is_string()) return Bad(key, "must be a string");
  const auto& s = v->get_string();
  if (s.size() > max_len) return Bad(key, fmt::format("longer than {} characters", max_len));
  return std::string(s.data(), s.size());
}

Result<std::string> Reader::StrOr(std::string_view key, size_t max_len, std::string dflt) const {
  const boost::json::value* v = Find(key);
  if (!v || v->is_null()) return dflt;
  return Str(key, max_len);
}

Result<bool> Reader::BoolOr(std::string_view key, bool dflt) const {
  const boost::json::value* v = Find(key);
  if (!v || v->is_null()) return dflt;
  if (!v->is_bool()) return Bad(key, "must be a boolean");
  return v->get_bool();
}

Result<const boost::json::object*> Reader::Obj(std::string_view key) const {
  const boost::json::value* v = Find(key);
  if (!v) return Bad(key, "is required");
  if (!v->is_object()) return Bad(key, "must be an object");
  return &v->get_object();
}

Result<const boost::json::array*> Reader::Arr(std::string_view key) const {
  const boost::json::value* v = Find(key);
  if (!v) return Bad(key, "is required");
  if (!v->is_array()) return Bad(key, "must be an array");
  return &v->get_array();
}

}  // namespace rsc::json
