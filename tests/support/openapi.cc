#include "support/openapi.h"

#include <algorithm>
#include <cctype>

#include "support/yaml_json.h"

namespace rsc::testing {
namespace {

namespace json = boost::json;

constexpr const char* kMethods[] = {"get",     "put",  "post",  "delete",
                                    "options", "head", "patch", "trace"};

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string MediaType(const std::string& content_type) {
  std::string base = content_type.substr(0, content_type.find(';'));
  while (!base.empty() && base.back() == ' ') base.pop_back();
  std::transform(base.begin(), base.end(), base.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return base;
}

}  // namespace

std::string DefaultOpenApiPath() { return std::string(RSC_SOURCE_DIR) + "/docs/openapi.yaml"; }

std::unique_ptr<OpenApiSpec> OpenApiSpec::Load(const std::string& path, std::string* error) {
  std::unique_ptr<OpenApiSpec> spec(new OpenApiSpec());
  if (!LoadYamlFileAsJson(path, &spec->doc_, error)) return nullptr;
  if (!spec->doc_.is_object()) {
    *error = path + ": the document is not a mapping";
    return nullptr;
  }
  const json::value* paths = spec->doc_.as_object().if_contains("paths");
  if (paths == nullptr || !paths->is_object()) {
    *error = path + ": no 'paths' mapping";
    return nullptr;
  }
  for (const auto& p : paths->as_object()) {
    if (!p.value().is_object()) {
      *error = path + ": path " + std::string(p.key()) + " is not a mapping";
      return nullptr;
    }
    for (const char* m : kMethods) {
      const json::value* op = p.value().as_object().if_contains(m);
      if (op == nullptr) continue;
      const json::value* id =
          op->is_object() ? op->as_object().if_contains("operationId") : nullptr;
      if (id == nullptr || !id->is_string()) {
        *error = path + ": " + Upper(m) + " " + std::string(p.key()) + " has no operationId";
        return nullptr;
      }
      spec->operations_.push_back(
          {std::string(p.key()), Upper(m), std::string(id->as_string()), &op->as_object()});
    }
  }
  spec->validator_ = std::make_unique<JsonSchemaValidator>(spec->doc_);
  return spec;
}

const OpenApiOperation* OpenApiSpec::Find(const std::string& operation_id) const {
  for (const OpenApiOperation& op : operations_) {
    if (op.operation_id == operation_id) return &op;
  }
  return nullptr;
}

const json::value* OpenApiSpec::Deref(const json::value& v) const {
  const json::value* at = &v;
  for (int hops = 0; hops < 8; ++hops) {
    const json::value* ref = at->is_object() ? at->as_object().if_contains("$ref") : nullptr;
    if (ref == nullptr) return at;
    if (!ref->is_string()) return nullptr;
    at = validator_->Resolve(std::string(ref->as_string()));
    if (at == nullptr) return nullptr;
  }
  return nullptr;
}

const json::value* OpenApiSpec::RequestSchema(const OpenApiOperation& op) const {
  const json::value* body = op.object->if_contains("requestBody");
  if (body == nullptr) return nullptr;
  body = Deref(*body);
  if (body == nullptr || !body->is_object()) return nullptr;
  const json::value* content = body->as_object().if_contains("content");
  if (content == nullptr || !content->is_object()) return nullptr;
  const json::value* media = content->as_object().if_contains("application/json");
  if (media == nullptr || !media->is_object()) return nullptr;
  return media->as_object().if_contains("schema");
}

std::vector<std::string> OpenApiSpec::CheckRequest(const OpenApiOperation& op,
                                                   const std::string& body) {
  const std::string who = op.method + " " + op.path + " request: ";
  const json::value* schema = RequestSchema(op);
  if (schema == nullptr) return {who + "the operation documents no JSON request body"};
  boost::system::error_code ec;
  json::value parsed = json::parse(body, ec);
  if (ec) return {who + "body is not JSON: " + ec.message()};
  std::vector<std::string> errors = validator_->Validate(*schema, parsed);
  for (std::string& e : errors) e = who + e;
  return errors;
}

std::vector<std::string> OpenApiSpec::CheckResponse(const OpenApiOperation& op, int status,
                                                    const std::string& content_type,
                                                    const std::string& body) {
  const std::string who = op.method + " " + op.path + " " + std::to_string(status) + ": ";
  const json::value* responses = op.object->if_contains("responses");
  const json::value* response = nullptr;
  if (responses != nullptr && responses->is_object()) {
    response = responses->as_object().if_contains(std::to_string(status));
  }
  if (response == nullptr) return {who + "status not documented for this operation"};
  response = Deref(*response);
  if (response == nullptr || !response->is_object()) return {who + "response does not resolve"};
  const json::value* content = response->as_object().if_contains("content");
  if (content == nullptr || !content->is_object()) {
    return body.empty() ? std::vector<std::string>{}
                        : std::vector<std::string>{who + "documents no body, got one"};
  }
  const std::string media = MediaType(content_type);
  const json::value* entry = content->as_object().if_contains(media);
  if (entry == nullptr || !entry->is_object()) {
    return {who + "media type '" + media + "' is not documented"};
  }
  const json::value* schema = entry->as_object().if_contains("schema");
  if (schema == nullptr) return {who + "no schema for " + media};
  json::value instance;
  if (media == "application/json") {
    boost::system::error_code ec;
    instance = json::parse(body, ec);
    if (ec) return {who + "body is not JSON: " + ec.message()};
  } else {
    instance = json::string(body);
  }
  std::vector<std::string> errors = validator_->Validate(*schema, instance);
  for (std::string& e : errors) e = who + e;
  return errors;
}

}  // namespace rsc::testing
