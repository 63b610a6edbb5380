#pragma once
// OpenApiSpec: docs/openapi.yaml loaded for the tests that hold the coordinator to it
// (tests/ops/). It lists the operations (path template, method, operationId) and checks an
// HTTP exchange against the operation's documented request body and responses with
// JsonSchemaValidator.
//
// Thread safety: none; one spec per test.

#include <boost/json.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/json_schema.h"

namespace rsc::testing {

struct OpenApiOperation {
  std::string path;          // template, e.g. "/v1/groups/{stream}/{group}"
  std::string method;        // upper case, e.g. "PATCH"
  std::string operation_id;  // = the route's RouteName() (checked by openapi_routes_test)
  const boost::json::object* object = nullptr;  // the Operation Object
};

class OpenApiSpec {
 public:
  // Loads and parses `path` (docs/openapi.yaml). On failure returns nullptr with *error.
  static std::unique_ptr<OpenApiSpec> Load(const std::string& path, std::string* error);

  const boost::json::value& document() const { return doc_; }
  const std::vector<OpenApiOperation>& operations() const { return operations_; }
  const OpenApiOperation* Find(const std::string& operation_id) const;
  JsonSchemaValidator& validator() { return *validator_; }

  // Follows a Reference Object's $ref (components/responses etc.); the object itself if it
  // has none; nullptr if the reference does not resolve.
  const boost::json::value* Deref(const boost::json::value& v) const;

  // The schema of the operation's JSON request body; nullptr if it documents none.
  const boost::json::value* RequestSchema(const OpenApiOperation& op) const;

  // Problems of one answer of `op`: a status the operation does not document, a media type
  // it does not document for that status (parameters after ';' are ignored), or a body the
  // documented schema refuses (only for application/json; the body must then parse).
  std::vector<std::string> CheckResponse(const OpenApiOperation& op, int status,
                                         const std::string& content_type, const std::string& body);
  // Problems of a JSON request body against the operation's request schema.
  std::vector<std::string> CheckRequest(const OpenApiOperation& op, const std::string& body);

 private:
  OpenApiSpec() = default;

  boost::json::value doc_;
  std::vector<OpenApiOperation> operations_;
  std::unique_ptr<JsonSchemaValidator> validator_;
};

// The default location: <source dir>/docs/openapi.yaml.
std::string DefaultOpenApiPath();

}  // namespace rsc::testing
