// SPEC §14 O5: docs/openapi.yaml against the code, without a server. The route table is
// the router's (server/router.h), enumerated from the Route enum, so a route added to the
// router without being documented fails here, and so does a documented operation the router
// does not serve. The live half (every answer against its schema) is openapi_live_test.cc.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "server/router.h"
#include "support/openapi.h"

namespace rsc {
namespace {

namespace json = boost::json;
using testing::OpenApiOperation;
using testing::OpenApiSpec;

// Every Route value. Route is a scoped enum, so its underlying type is int and fixed: every
// int converts to a valid Route, and RouteName() (a switch over every enumerator, checked
// by -Wswitch) names the real ones and answers "unknown" past the last.
std::vector<Route> AllRoutes() {
  std::vector<Route> out;
  for (int i = 0; i < 1000; ++i) {
    const auto r = static_cast<Route>(i);
    if (RouteName(r) == "unknown") break;
    out.push_back(r);
  }
  return out;
}

std::vector<ErrorCode> AllErrorCodes() {
  // kUnknownResult is the last enumerator (result.h; protocol_json.cc relies on it too).
  std::vector<ErrorCode> out;
  for (int i = 0; i <= static_cast<int>(ErrorCode::kUnknownResult); ++i) {
    out.push_back(static_cast<ErrorCode>(i));
  }
  return out;
}

// Sample values for the path parameters, valid by R2.4.
const std::map<std::string, std::string>& Samples() {
  static const std::map<std::string, std::string> kSamples = {
      {"stream", "orders"}, {"group", "billing"}, {"memberId", "m-1"}, {"file", "app.js"}};
  return kSamples;
}

// The template with every {name} replaced by its sample; "" when a name has none.
std::string Instantiate(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '{') {
      out += path[i];
      continue;
    }
    const size_t close = path.find('}', i);
    auto it = Samples().find(path.substr(i + 1, close - i - 1));
    if (close == std::string::npos || it == Samples().end()) return "";
    out += it->second;
    i = close;
  }
  return out;
}

class OpenApiRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    spec_ = OpenApiSpec::Load(testing::DefaultOpenApiPath(), &error);
    ASSERT_NE(spec_, nullptr) << error;
  }
  const json::object& Root() const { return spec_->document().as_object(); }
  std::unique_ptr<OpenApiSpec> spec_;
};

TEST_F(OpenApiRoutesTest, IsOpenApi3WithUniqueOperationIds) {
  ASSERT_TRUE(Root().at("openapi").is_string());
  EXPECT_TRUE(std::string(Root().at("openapi").as_string()).starts_with("3."));
  std::set<std::string> ids;
  for (const OpenApiOperation& op : spec_->operations()) {
    EXPECT_TRUE(ids.insert(op.operation_id).second)
        << "operationId " << op.operation_id << " twice";
    const json::value* responses = op.object->if_contains("responses");
    EXPECT_TRUE(responses != nullptr && responses->is_object() && !responses->as_object().empty())
        << op.method << " " << op.path << " documents no responses";
  }
}

TEST_F(OpenApiRoutesTest, EveryRouteIsDocumentedUnderItsName) {
  const std::vector<Route> routes = AllRoutes();
  ASSERT_GE(routes.size(), 16u);
  for (Route r : routes) {
    EXPECT_NE(spec_->Find(std::string(RouteName(r))), nullptr)
        << "route '" << RouteName(r) << "' is served but not in docs/openapi.yaml";
  }
  EXPECT_EQ(spec_->operations().size(), routes.size())
      << "docs/openapi.yaml documents operations the router does not have";
}

TEST_F(OpenApiRoutesTest, EveryDocumentedOperationIsRoutedToThatRoute) {
  for (const OpenApiOperation& op : spec_->operations()) {
    const std::string path = Instantiate(op.path);
    ASSERT_FALSE(path.empty()) << op.path << ": a path parameter without a sample value";
    Result<RouteMatch> m = MatchRoute(op.method, path);
    ASSERT_TRUE(m.ok()) << op.method << " " << path << ": " << m.error().message;
    EXPECT_EQ(RouteName(m->route), op.operation_id) << op.method << " " << op.path;
    const auto has = [&](const char* p) { return op.path.find(p) != std::string::npos; };
    EXPECT_EQ(m->key.stream, has("{stream}") ? "orders" : "") << op.path;
    EXPECT_EQ(m->key.group, has("{group}") ? "billing" : "") << op.path;
    EXPECT_EQ(m->member, has("{memberId}") ? "m-1" : "") << op.path;
  }
}

// A path's other methods are 405 with an Allow header listing exactly the documented ones.
TEST_F(OpenApiRoutesTest, EveryPathDocumentsAllItsMethods) {
  std::map<std::string, std::set<std::string>> documented;
  for (const OpenApiOperation& op : spec_->operations()) documented[op.path].insert(op.method);
  for (const auto& [path, methods] : documented) {
    for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
      if (methods.count(method)) continue;
      std::string allow;
      Result<RouteMatch> m = MatchRoute(method, Instantiate(path), &allow);
      ASSERT_FALSE(m.ok()) << method << " " << path << " is routed but not documented";
      EXPECT_EQ(m.error().code, ErrorCode::kMethodNotAllowed) << method << " " << path;
      std::set<std::string> allowed;
      for (size_t start = 0; start < allow.size();) {
        size_t comma = allow.find(", ", start);
        allowed.insert(allow.substr(start, comma - start));
        start = comma == std::string::npos ? allow.size() : comma + 2;
      }
      EXPECT_EQ(allowed, methods) << "Allow header of " << path;
    }
  }
}

TEST_F(OpenApiRoutesTest, PathParametersAreDeclared) {
  for (const OpenApiOperation& op : spec_->operations()) {
    std::set<std::string> in_template;
    for (size_t i = op.path.find('{'); i != std::string::npos; i = op.path.find('{', i + 1)) {
      in_template.insert(op.path.substr(i + 1, op.path.find('}', i) - i - 1));
    }
    std::set<std::string> declared;
    auto collect = [&](const json::value* params) {
      if (params == nullptr || !params->is_array()) return;
      for (const json::value& p : params->as_array()) {
        const json::value* param = spec_->Deref(p);
        ASSERT_NE(param, nullptr) << op.path << ": a parameter does not resolve";
        const json::object& o = param->as_object();
        if (o.at("in").as_string() != "path") continue;
        declared.insert(std::string(o.at("name").as_string()));
        EXPECT_TRUE(o.contains("required") && o.at("required").as_bool()) << op.path;
      }
    };
    collect(Root().at("paths").as_object().at(op.path).as_object().if_contains("parameters"));
    collect(op.object->if_contains("parameters"));
    EXPECT_EQ(declared, in_template) << op.method << " " << op.path;
  }
}

// One bearer scheme; SPEC O4's roles decide which tokens it admits (docs/protocol.md 2.1).
// Every route a configured token can guard (RequiredAccess other than kPublic) states it
// and documents 401 (no or an unknown token) and 403 (a token of a role the route does not
// admit); the public ones state an empty `security` and neither status.
TEST_F(OpenApiRoutesTest, SecurityIsTheBearerTokenOnEveryGuardedRoute) {
  const json::object& schemes =
      Root().at("components").as_object().at("securitySchemes").as_object();
  ASSERT_EQ(schemes.size(), 1u);
  const json::object& bearer = schemes.at("bearerAuth").as_object();
  EXPECT_EQ(bearer.at("type").as_string(), "http");
  EXPECT_EQ(bearer.at("scheme").as_string(), "bearer");
  EXPECT_FALSE(Root().contains("security")) << "security is stated per operation";
  for (Route r : AllRoutes()) {
    const OpenApiOperation* op = spec_->Find(std::string(RouteName(r)));
    ASSERT_NE(op, nullptr);
    const json::value* security = op->object->if_contains("security");
    ASSERT_TRUE(security != nullptr && security->is_array())
        << op->operation_id << ": state `security` (empty for an open route)";
    const json::object& responses = op->object->at("responses").as_object();
    if (RequiredAccess(r) != Access::kPublic) {
      ASSERT_EQ(security->as_array().size(), 1u) << op->operation_id;
      EXPECT_TRUE(security->as_array()[0].as_object().contains("bearerAuth")) << op->operation_id;
      EXPECT_TRUE(responses.contains("401")) << op->operation_id;
      EXPECT_TRUE(responses.contains("403")) << op->operation_id;
    } else {
      EXPECT_TRUE(security->as_array().empty()) << op->operation_id << " is public in the code";
      EXPECT_FALSE(responses.contains("401")) << op->operation_id;
      EXPECT_FALSE(responses.contains("403")) << op->operation_id;
    }
  }
}

TEST_F(OpenApiRoutesTest, ErrorCodesAndTheirStatusesAreTheCodes) {
  const json::object& schema =
      Root().at("components").as_object().at("schemas").as_object().at("ErrorCode").as_object();
  std::set<std::string> documented;
  for (const json::value& v : schema.at("enum").as_array()) {
    documented.insert(std::string(v.as_string()));
  }
  std::set<std::string> code;
  const json::object& statuses = schema.at("x-http-status").as_object();
  for (ErrorCode c : AllErrorCodes()) {
    const std::string name(ErrorCodeName(c));
    code.insert(name);
    const json::value* status = statuses.if_contains(name);
    ASSERT_NE(status, nullptr) << name << " has no x-http-status";
    EXPECT_EQ(status->to_number<int>(), HttpStatus(c)) << name;
  }
  EXPECT_EQ(documented, code);
  EXPECT_EQ(statuses.size(), code.size());
}

// Every 4xx/5xx answer is the Error body; every 2xx of a JSON operation has a schema.
TEST_F(OpenApiRoutesTest, ErrorResponsesUseTheErrorSchema) {
  for (const OpenApiOperation& op : spec_->operations()) {
    for (const auto& kv : op.object->at("responses").as_object()) {
      const json::value* response = spec_->Deref(kv.value());
      ASSERT_NE(response, nullptr) << op.path << " " << kv.key();
      if (kv.key() == "304") continue;  // Not Modified has no body (RFC 9110 15.4.5)
      const json::value* content = response->as_object().if_contains("content");
      ASSERT_NE(content, nullptr) << op.operation_id << " " << kv.key() << " documents no body";
      if (std::stoi(std::string(kv.key())) < 400) continue;
      const json::value& schema =
          content->as_object().at("application/json").as_object().at("schema");
      EXPECT_EQ(json::serialize(schema), R"({"$ref":"#/components/schemas/Error"})")
          << op.operation_id << " " << kv.key();
    }
  }
}

// The validator refuses keywords it does not implement, so this proves that every schema
// of the file is checked in full, and that every $ref resolves.
TEST_F(OpenApiRoutesTest, EverySchemaUsesOnlyKeywordsTheValidatorChecks) {
  std::vector<std::string> problems;
  auto add = [&](const std::vector<std::string>& more) {
    problems.insert(problems.end(), more.begin(), more.end());
  };
  const json::object& components = Root().at("components").as_object();
  for (const auto& kv : components.at("schemas").as_object()) {
    add(spec_->validator().CheckSchema(kv.value(), "schemas." + std::string(kv.key())));
  }
  for (const auto& kv : components.at("parameters").as_object()) {
    add(spec_->validator().CheckSchema(kv.value().at("schema"),
                                       "parameters." + std::string(kv.key())));
  }
  for (const OpenApiOperation& op : spec_->operations()) {
    const std::string where = op.method + " " + op.path;
    if (const json::value* s = spec_->RequestSchema(op))
      add(spec_->validator().CheckSchema(*s, where));
    if (const json::value* params = op.object->if_contains("parameters")) {
      for (const json::value& p : params->as_array()) {
        add(spec_->validator().CheckSchema(spec_->Deref(p)->at("schema"), where));
      }
    }
    for (const auto& kv : op.object->at("responses").as_object()) {
      const json::value* response = spec_->Deref(kv.value());
      ASSERT_NE(response, nullptr) << where << " " << kv.key();
      if (kv.key() == "304") continue;  // no body
      for (const auto& media : response->as_object().at("content").as_object()) {
        add(spec_->validator().CheckSchema(media.value().at("schema"),
                                           where + " " + std::string(kv.key())));
      }
    }
  }
  for (const std::string& p : problems) ADD_FAILURE() << p;
}

}  // namespace
}  // namespace rsc
