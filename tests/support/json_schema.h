#pragma once
// JsonSchemaValidator: validates JSON values against the subset of JSON Schema (2020-12, as
// OpenAPI 3.1 uses it) that docs/openapi.yaml is written in, for the tests that check the
// running coordinator against that file (tests/ops/). Debian ships no JSON Schema validator
// for Boost.JSON (the packaged ones are built on other JSON libraries), and the subset is
// small, so it is written here.
//
// Assertion keywords implemented:
//   type (a name or a list of names; "integer" means a JSON integer: 1.0 is refused, which
//   is stricter than the standard and right for this API, whose integers are never floats),
//   enum, const, properties, required, additionalProperties (false or a schema),
//   propertyNames, items (one schema for every element), minItems, maxItems, minimum,
//   maximum, minLength, maxLength (in code points), pattern (ECMAScript, unanchored as the
//   standard says: anchor with ^...$), allOf, anyOf, oneOf, and $ref to a JSON pointer inside
//   the root document ("#/components/schemas/X"), with sibling keywords applied too.
// Annotations, ignored: description, title, summary, example, examples, default, format,
// deprecated, readOnly, writeOnly, and every "x-..." extension.
// Any other keyword is an ERROR (CheckSchema and Validate both report it): a schema can
// never use a keyword that the validator silently skips, so a check never passes vacuously.
//
// Thread safety: none (compiled patterns are cached); one validator per thread.

#include <boost/json.hpp>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

namespace rsc::testing {

class JsonSchemaValidator {
 public:
  // `root` is the document $refs point into; it must outlive the validator.
  explicit JsonSchemaValidator(const boost::json::value& root);

  // Every violation, as "<instance path>: <what>" (path "$" is the instance itself, then
  // ".field" and "[index]"). Empty: valid.
  std::vector<std::string> Validate(const boost::json::value& schema,
                                    const boost::json::value& instance);

  // Problems of a schema itself, walked through its subschemas and $refs (each $ref target
  // once): unknown keywords, $refs that do not resolve, keywords with values of the wrong
  // type, patterns that do not compile. `where` prefixes the messages.
  std::vector<std::string> CheckSchema(const boost::json::value& schema, const std::string& where);

  // Resolves "#/a/b~1c" inside the root; nullptr if it does not exist.
  const boost::json::value* Resolve(const std::string& ref) const;

 private:
  void Check(const boost::json::value& schema, const boost::json::value& instance,
             const std::string& path, int depth, std::vector<std::string>* errors);
  void Walk(const boost::json::value& schema, const std::string& where,
            std::vector<std::string>* problems, std::vector<const boost::json::value*>* seen);
  const std::regex* Pattern(const std::string& pattern, std::string* error);

  const boost::json::value& root_;
  std::map<std::string, std::unique_ptr<std::regex>> patterns_;
};

// "object", "array", "string", "integer", "number" (non-integer), "boolean" or "null".
std::string JsonTypeName(const boost::json::value& v);

}  // namespace rsc::testing
