#pragma once
// LoadYamlAsJson: reads a YAML document (docs/openapi.yaml, deploy/prometheus/*.yml) into a
// Boost.JSON value, so the tests that check those files work on one data model, the one the
// coordinator's answers are parsed into.
//
// Why a YAML library and not JSON-compatible YAML: the OpenAPI file and the alert rules are
// read and edited by people (comments, block strings, no brace noise), so they stay real YAML.
// Parsing is yaml-cpp's (Debian libyaml-cpp-dev, a maintained parser); this file only maps
// its nodes to JSON. yaml-cpp leaves scalars untyped, so plain (unquoted) scalars are typed
// here by the YAML 1.2 core schema, the one OpenAPI 3.1 and Prometheus (go-yaml v3) use:
//   null, Null, NULL, ~, (empty)      -> null
//   true/True/TRUE, false/False/FALSE -> bool    (not yes/no/on/off: those are YAML 1.1)
//   [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+ -> integer (int64; out of range -> error)
//   [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)?, .inf, .nan -> double
//   anything else                     -> string
// Quoted scalars, block scalars (| and >) and scalars tagged !!str are strings.
// Mapping keys become strings (JSON object keys); a key given twice is an error, as are
// non-scalar keys and documents with more than one YAML document.
//
// Pure, no shared state: thread-safe.

#include <boost/json.hpp>
#include <string>
#include <string_view>

namespace rsc::testing {

// Parses `text`. On failure returns false and sets *error to "line L, column C: what".
bool LoadYamlAsJson(std::string_view text, boost::json::value* out, std::string* error);

// Reads the file at `path` and parses it; *error names the path on failure.
bool LoadYamlFileAsJson(const std::string& path, boost::json::value* out, std::string* error);

// The whole file as a string; false (and *error) when it cannot be read.
bool ReadTextFile(const std::string& path, std::string* out, std::string* error);

}  // namespace rsc::testing
