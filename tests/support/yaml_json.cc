#include "support/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

namespace rsc::testing {
namespace {

namespace json = boost::json;

std::string Where(const YAML::Mark& m) {
  // yaml-cpp counts from 0.
  return "line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1);
}

// Types a plain scalar by the YAML 1.2 core schema (see the header). Returns false with
// *error for an integer outside int64.
bool PlainScalar(const std::string& s, json::value* out, std::string* error) {
  static const std::regex kNull("null|Null|NULL|~|");
  static const std::regex kTrue("true|True|TRUE");
  static const std::regex kFalse("false|False|FALSE");
  static const std::regex kDecimal("[-+]?[0-9]+");
  static const std::regex kOctal("0o[0-7]+");
  static const std::regex kHex("0x[0-9a-fA-F]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex kInf("[-+]?(\\.inf|\\.Inf|\\.INF)");
  static const std::regex kNan("\\.nan|\\.NaN|\\.NAN");
  if (std::regex_match(s, kNull)) {
    *out = nullptr;
  } else if (std::regex_match(s, kTrue)) {
    *out = true;
  } else if (std::regex_match(s, kFalse)) {
    *out = false;
  } else if (std::regex_match(s, kDecimal) || std::regex_match(s, kOctal) ||
             std::regex_match(s, kHex)) {
    const bool octal = s.rfind("0o", 0) == 0;
    const bool hex = s.rfind("0x", 0) == 0;
    const std::string digits = octal || hex ? s.substr(2) : s;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, octal ? 8 : hex ? 16 : 10);
    if (errno == ERANGE) {
      *error = "integer " + s + " is out of the int64 range";
      return false;
    }
    *out = static_cast<int64_t>(v);
  } else if (std::regex_match(s, kFloat)) {
    *out = std::strtod(s.c_str(), nullptr);
  } else if (std::regex_match(s, kInf)) {
    *out = s[0] == '-' ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
  } else if (std::regex_match(s, kNan)) {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else {
    *out = json::string(s);
  }
  return true;
}

bool Convert(const YAML::Node& node, json::value* out, std::string* error) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      *out = nullptr;
      return true;
    case YAML::NodeType::Scalar: {
      // "?" = a plain scalar with no tag; "!" = quoted or block; anything else = an
      // explicit tag, of which only strings are expected in our files.
      const std::string& tag = node.Tag();
      if (tag == "?") {
        if (!PlainScalar(node.Scalar(), out, error)) {
          *error = Where(node.Mark()) + ": " + *error;
          return false;
        }
        return true;
      }
      if (tag == "!" || tag == "tag:yaml.org,2002:str") {
        *out = json::string(node.Scalar());
        return true;
      }
      *error = Where(node.Mark()) + ": unsupported tag " + tag;
      return false;
    }
    case YAML::NodeType::Sequence: {
      json::array a;
      for (const YAML::Node& item : node) {
        json::value v;
        if (!Convert(item, &v, error)) return false;
        a.push_back(std::move(v));
      }
      *out = std::move(a);
      return true;
    }
    case YAML::NodeType::Map: {
      json::object o;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          *error = Where(kv.first.Mark()) + ": a mapping key must be a scalar";
          return false;
        }
        const std::string key = kv.first.Scalar();
        if (o.contains(key)) {
          *error = Where(kv.first.Mark()) + ": key '" + key + "' is given twice";
          return false;
        }
        json::value v;
        if (!Convert(kv.second, &v, error)) return false;
        o.emplace(key, std::move(v));
      }
      *out = std::move(o);
      return true;
    }
  }
  *error = Where(node.Mark()) + ": unknown node type";
  return false;
}

}  // namespace

bool LoadYamlAsJson(std::string_view text, boost::json::value* out, std::string* error) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    *error = Where(e.mark) + ": " + e.msg;
    return false;
  }
  if (docs.size() != 1) {
    *error = "expected exactly one YAML document, found " + std::to_string(docs.size());
    return false;
  }
  return Convert(docs[0], out, error);
}

bool ReadTextFile(const std::string& path, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool LoadYamlFileAsJson(const std::string& path, boost::json::value* out, std::string* error) {
  std::string text;
  if (!ReadTextFile(path, &text, error)) return false;
  if (!LoadYamlAsJson(text, out, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace rsc::testing
