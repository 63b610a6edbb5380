#include "support/json_schema.h"

#include <algorithm>
#include <set>

namespace rsc::testing {
namespace {

namespace json = boost::json;

const std::set<std::string>& Annotations() {
  static const std::set<std::string> kAnnotations = {
      "description", "title",      "summary",  "example",   "examples",
      "default",     "deprecated", "readOnly", "writeOnly", "format"};
  return kAnnotations;
}

const std::set<std::string>& Assertions() {
  static const std::set<std::string> kAssertions = {
      "type",          "enum",      "const",    "properties", "required", "additionalProperties",
      "propertyNames", "items",     "minItems", "maxItems",   "minimum",  "maximum",
      "minLength",     "maxLength", "pattern",  "allOf",      "anyOf",    "oneOf",
      "$ref"};
  return kAssertions;
}

bool IsIgnored(std::string_view key) {
  return key.starts_with("x-") || Annotations().count(std::string(key)) != 0;
}

const std::set<std::string>& TypeNames() {
  static const std::set<std::string> kTypes = {"object", "array",   "string", "integer",
                                               "number", "boolean", "null"};
  return kTypes;
}

bool IsInteger(const json::value& v) { return v.is_int64() || v.is_uint64(); }
bool IsNumber(const json::value& v) { return IsInteger(v) || v.is_double(); }

double AsDouble(const json::value& v) {
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return v.get_double();
}

bool HasType(const json::value& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return IsInteger(v);
  if (type == "number") return IsNumber(v);
  if (type == "boolean") return v.is_bool();
  if (type == "null") return v.is_null();
  return false;
}

// JSON equality with 1 == 1.0 (JSON Schema compares numbers by value).
bool JsonEqual(const json::value& a, const json::value& b) {
  if (IsNumber(a) && IsNumber(b)) return AsDouble(a) == AsDouble(b);
  return a == b;
}

size_t CodePoints(std::string_view s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string Short(const json::value& v) {
  std::string s = json::serialize(v);
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

std::string Child(const std::string& path, std::string_view key) {
  return path + "." + std::string(key);
}
std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

}  // namespace

std::string JsonTypeName(const json::value& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (IsInteger(v)) return "integer";
  if (v.is_double()) return "number";
  if (v.is_bool()) return "boolean";
  return "null";
}

JsonSchemaValidator::JsonSchemaValidator(const json::value& root) : root_(root) {}

const json::value* JsonSchemaValidator::Resolve(const std::string& ref) const {
  if (ref.rfind("#", 0) != 0) return nullptr;  // only refs inside this document
  const json::value* at = &root_;
  std::string_view rest = std::string_view(ref).substr(1);
  while (!rest.empty()) {
    if (rest[0] != '/') return nullptr;
    rest.remove_prefix(1);
    const size_t slash = rest.find('/');
    std::string token(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    // RFC 6901: ~1 is '/', ~0 is '~' (in that order).
    for (size_t p; (p = token.find("~1")) != std::string::npos;) token.replace(p, 2, "/");
    for (size_t p; (p = token.find("~0")) != std::string::npos;) token.replace(p, 2, "~");
    if (at->is_object()) {
      at = at->as_object().if_contains(token);
    } else if (at->is_array()) {
      const std::string& t = token;
      if (t.empty() || !std::all_of(t.begin(), t.end(), ::isdigit)) return nullptr;
      const size_t i = std::stoul(t);
      at = i < at->as_array().size() ? &at->as_array()[i] : nullptr;
    } else {
      return nullptr;
    }
    if (at == nullptr) return nullptr;
  }
  return at;
}

const std::regex* JsonSchemaValidator::Pattern(const std::string& pattern, std::string* error) {
  auto it = patterns_.find(pattern);
  if (it != patterns_.end()) return it->second.get();
  try {
    auto re = std::make_unique<std::regex>(pattern, std::regex::ECMAScript);
    return patterns_.emplace(pattern, std::move(re)).first->second.get();
  } catch (const std::regex_error& e) {
    *error = "pattern '" + pattern + "' does not compile: " + e.what();
    return nullptr;
  }
}

std::vector<std::string> JsonSchemaValidator::Validate(const json::value& schema,
                                                       const json::value& instance) {
  std::vector<std::string> errors;
  Check(schema, instance, "$", 0, &errors);
  return errors;
}

void JsonSchemaValidator::Check(const json::value& schema, const json::value& instance,
                                const std::string& path, int depth,
                                std::vector<std::string>* errors) {
  auto fail = [&](const std::string& what) { errors->push_back(path + ": " + what); };
  if (depth > 64) {
    fail("schema nesting deeper than 64 (a $ref cycle?)");
    return;
  }
  if (schema.is_bool()) {  // true accepts everything, false nothing
    if (!schema.get_bool()) fail("no value is allowed here");
    return;
  }
  if (!schema.is_object()) {
    fail("schema is not an object: " + Short(schema));
    return;
  }
  const json::object& s = schema.as_object();
  for (const auto& kv : s) {
    if (!IsIgnored(kv.key()) && Assertions().count(std::string(kv.key())) == 0) {
      fail("schema uses unsupported keyword '" + std::string(kv.key()) + "'");
    }
  }

  if (const json::value* ref = s.if_contains("$ref")) {
    const json::value* target = ref->is_string() ? Resolve(std::string(ref->as_string())) : nullptr;
    if (target == nullptr) {
      fail("unresolvable $ref " + Short(*ref));
    } else {
      Check(*target, instance, path, depth + 1, errors);
    }
  }

  if (const json::value* type = s.if_contains("type")) {
    bool ok = false;
    std::string names;
    auto consider = [&](const json::value& t) {
      if (!t.is_string()) return;
      names += (names.empty() ? "" : "|") + std::string(t.as_string());
      ok = ok || HasType(instance, t.as_string());
    };
    if (type->is_array()) {
      for (const json::value& t : type->as_array()) consider(t);
    } else {
      consider(*type);
    }
    if (!ok) {
      fail("expected type " + names + ", got " + JsonTypeName(instance) + " " + Short(instance));
      return;  // the type-specific keywords below would only repeat it
    }
  }

  if (const json::value* e = s.if_contains("enum"); e != nullptr && e->is_array()) {
    const json::array& options = e->as_array();
    if (std::none_of(options.begin(), options.end(),
                     [&](const json::value& o) { return JsonEqual(o, instance); })) {
      fail(Short(instance) + " is not one of " + Short(*e));
    }
  }
  if (const json::value* c = s.if_contains("const")) {
    if (!JsonEqual(*c, instance)) fail(Short(instance) + " is not " + Short(*c));
  }

  if (instance.is_object()) {
    const json::object& o = instance.as_object();
    const json::object* props = nullptr;
    if (const json::value* p = s.if_contains("properties"); p != nullptr && p->is_object()) {
      props = &p->as_object();
      for (const auto& kv : *props) {
        if (const json::value* v = o.if_contains(kv.key())) {
          Check(kv.value(), *v, Child(path, kv.key()), depth + 1, errors);
        }
      }
    }
    if (const json::value* r = s.if_contains("required"); r != nullptr && r->is_array()) {
      for (const json::value& name : r->as_array()) {
        if (name.is_string() && !o.contains(name.as_string())) {
          fail("required property '" + std::string(name.as_string()) + "' is missing");
        }
      }
    }
    if (const json::value* names = s.if_contains("propertyNames")) {
      for (const auto& kv : o) {
        Check(*names, json::value(kv.key()),
              path + " property name '" + std::string(kv.key()) + "'", depth + 1, errors);
      }
    }
    if (const json::value* extra = s.if_contains("additionalProperties")) {
      for (const auto& kv : o) {
        if (props != nullptr && props->contains(kv.key())) continue;
        if (extra->is_bool() && !extra->get_bool()) {
          fail("property '" + std::string(kv.key()) + "' is not allowed (not in the schema)");
        } else {
          Check(*extra, kv.value(), Child(path, kv.key()), depth + 1, errors);
        }
      }
    }
  }

  if (instance.is_array()) {
    const json::array& a = instance.as_array();
    if (const json::value* items = s.if_contains("items")) {
      for (size_t i = 0; i < a.size(); ++i) Check(*items, a[i], Index(path, i), depth + 1, errors);
    }
    if (const json::value* n = s.if_contains("minItems"); n != nullptr && IsInteger(*n)) {
      if (static_cast<double>(a.size()) < AsDouble(*n)) {
        fail(std::to_string(a.size()) + " items, fewer than " + Short(*n));
      }
    }
    if (const json::value* n = s.if_contains("maxItems"); n != nullptr && IsInteger(*n)) {
      if (static_cast<double>(a.size()) > AsDouble(*n)) {
        fail(std::to_string(a.size()) + " items, more than " + Short(*n));
      }
    }
  }

  if (IsNumber(instance)) {
    if (const json::value* m = s.if_contains("minimum"); m != nullptr && IsNumber(*m)) {
      if (AsDouble(instance) < AsDouble(*m)) fail(Short(instance) + " is below " + Short(*m));
    }
    if (const json::value* m = s.if_contains("maximum"); m != nullptr && IsNumber(*m)) {
      if (AsDouble(instance) > AsDouble(*m)) fail(Short(instance) + " is above " + Short(*m));
    }
  }

  if (instance.is_string()) {
    const std::string_view str = instance.as_string();
    if (const json::value* n = s.if_contains("minLength"); n != nullptr && IsInteger(*n)) {
      if (static_cast<double>(CodePoints(str)) < AsDouble(*n)) {
        fail(Short(instance) + " is shorter than " + Short(*n));
      }
    }
    if (const json::value* n = s.if_contains("maxLength"); n != nullptr && IsInteger(*n)) {
      if (static_cast<double>(CodePoints(str)) > AsDouble(*n)) {
        fail(Short(instance) + " is longer than " + Short(*n));
      }
    }
    if (const json::value* p = s.if_contains("pattern"); p != nullptr && p->is_string()) {
      std::string error;
      const std::regex* re = Pattern(std::string(p->as_string()), &error);
      if (re == nullptr) {
        fail(error);
      } else if (!std::regex_search(str.begin(), str.end(), *re)) {
        fail(Short(instance) + " does not match " + Short(*p));
      }
    }
  }

  if (const json::value* all = s.if_contains("allOf"); all != nullptr && all->is_array()) {
    for (const json::value& sub : all->as_array()) Check(sub, instance, path, depth + 1, errors);
  }
  auto matches = [&](const json::value& sub) {
    std::vector<std::string> sub_errors;
    Check(sub, instance, path, depth + 1, &sub_errors);
    return sub_errors.empty();
  };
  if (const json::value* any = s.if_contains("anyOf"); any != nullptr && any->is_array()) {
    const json::array& subs = any->as_array();
    if (std::none_of(subs.begin(), subs.end(), matches)) {
      fail(Short(instance) + " matches none of anyOf");
    }
  }
  if (const json::value* one = s.if_contains("oneOf"); one != nullptr && one->is_array()) {
    const json::array& subs = one->as_array();
    const auto n = std::count_if(subs.begin(), subs.end(), matches);
    if (n != 1) {
      fail(Short(instance) + " matches " + std::to_string(n) + " of oneOf (exactly 1 needed)");
    }
  }
}

std::vector<std::string> JsonSchemaValidator::CheckSchema(const json::value& schema,
                                                          const std::string& where) {
  std::vector<std::string> problems;
  std::vector<const json::value*> seen;
  Walk(schema, where, &problems, &seen);
  return problems;
}

void JsonSchemaValidator::Walk(const json::value& schema, const std::string& where,
                               std::vector<std::string>* problems,
                               std::vector<const json::value*>* seen) {
  auto bad = [&](const std::string& what) { problems->push_back(where + ": " + what); };
  if (schema.is_bool()) return;
  if (!schema.is_object()) {
    bad("a schema must be an object or a boolean");
    return;
  }
  const json::object& s = schema.as_object();
  for (const auto& kv : s) {
    const std::string key(kv.key());
    const json::value& v = kv.value();
    if (IsIgnored(key)) continue;
    if (Assertions().count(key) == 0) {
      bad("unsupported keyword '" + key + "'");
    } else if (key == "$ref") {
      const json::value* target = v.is_string() ? Resolve(std::string(v.as_string())) : nullptr;
      if (target == nullptr) {
        bad("$ref " + Short(v) + " does not resolve");
      } else if (std::find(seen->begin(), seen->end(), target) == seen->end()) {
        seen->push_back(target);
        Walk(*target, std::string(v.as_string()), problems, seen);
      }
    } else if (key == "type") {
      std::vector<json::value> names;
      if (v.is_array()) {
        names.assign(v.as_array().begin(), v.as_array().end());
      } else {
        names.push_back(v);
      }
      for (const json::value& n : names) {
        if (!n.is_string() || TypeNames().count(std::string(n.as_string())) == 0) {
          bad("type " + Short(n) + " is not a JSON Schema type");
        }
      }
    } else if (key == "properties") {
      if (!v.is_object()) {
        bad("properties must be an object");
        continue;
      }
      for (const auto& p : v.as_object()) {
        Walk(p.value(), where + ".properties." + std::string(p.key()), problems, seen);
      }
    } else if (key == "required" || key == "enum") {
      if (!v.is_array()) bad(key + " must be an array");
      if (key == "required" && v.is_array()) {
        for (const json::value& n : v.as_array()) {
          if (!n.is_string()) bad("required lists a non-string " + Short(n));
          const json::value* props = s.if_contains("properties");
          if (n.is_string() && (props == nullptr || !props->is_object() ||
                                !props->as_object().contains(n.as_string()))) {
            bad("required property '" + std::string(n.as_string()) +
                "' is not described in properties");
          }
        }
      }
    } else if (key == "additionalProperties" || key == "items" || key == "propertyNames") {
      Walk(v, where + "." + key, problems, seen);
    } else if (key == "allOf" || key == "anyOf" || key == "oneOf") {
      if (!v.is_array() || v.as_array().empty()) {
        bad(key + " must be a non-empty array");
        continue;
      }
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        Walk(v.as_array()[i], where + "." + key + "[" + std::to_string(i) + "]", problems, seen);
      }
    } else if (key == "minItems" || key == "maxItems" || key == "minLength" || key == "maxLength") {
      if (!IsInteger(v)) bad(key + " must be an integer");
    } else if (key == "minimum" || key == "maximum") {
      if (!IsNumber(v)) bad(key + " must be a number");
    } else if (key == "pattern") {
      std::string error;
      if (!v.is_string()) {
        bad("pattern must be a string");
      } else if (Pattern(std::string(v.as_string()), &error) == nullptr) {
        bad(error);
      }
    }
  }
}

}  // namespace rsc::testing
