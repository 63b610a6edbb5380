// The checking tools of SPEC §14 O5's OpenAPI tests, tested themselves: the JSON Schema
// validator must fail on a wrong type, a missing required field, an undocumented field (it
// would otherwise prove nothing about the server), and the YAML loader must type scalars as
// YAML 1.2 does. Then the documented schemas against the code's own serializers with every
// optional field filled (fields a short live scenario may never produce: taken shards, round
// blockers, streams).

#include "support/json_schema.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "core/protocol_json.h"
#include "support/openapi.h"
#include "support/yaml_json.h"

namespace rsc {
namespace {

namespace json = boost::json;
using testing::JsonSchemaValidator;
using testing::LoadYamlAsJson;

json::value Yaml(const std::string& text) {
  json::value v;
  std::string error;
  EXPECT_TRUE(LoadYamlAsJson(text, &v, &error)) << error;
  return v;
}

// ── the validator ──────────────────────────────────────────────────────────────────

const char* kDoc = R"(
components:
  schemas:
    Shard:
      type: integer
      minimum: 0
      maximum: 10
    Thing:
      type: object
      required: [id, name, shards]
      additionalProperties: false
      properties:
        id: {type: integer}
        name: {type: string, pattern: '^[a-z]+$', maxLength: 5}
        state: {type: string, enum: [A, B]}
        kind: {const: thing}
        shards: {type: array, maxItems: 3, items: {$ref: '#/components/schemas/Shard'}}
        round:
          oneOf:
            - type: 'null'
            - type: object
              required: [n]
              properties: {n: {type: integer}}
        keys:
          type: object
          propertyNames: {pattern: '^[0-9]+$'}
          additionalProperties: {type: string, minLength: 1}
)";

class ValidatorTest : public ::testing::Test {
 protected:
  ValidatorTest() : doc_(Yaml(kDoc)), v_(doc_) {}
  std::vector<std::string> Check(const std::string& instance) {
    return v_.Validate(json::value{{"$ref", "#/components/schemas/Thing"}}, json::parse(instance));
  }
  json::value doc_;
  JsonSchemaValidator v_;
};

TEST_F(ValidatorTest, AcceptsAValidInstance) {
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","state":"A","kind":"thing","shards":[0,10],
                      "round":null,"keys":{"1":"x"}})"),
            std::vector<std::string>{});
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[],"round":{"n":3}})"),
            std::vector<std::string>{});
}

TEST_F(ValidatorTest, FailsOnAFieldOfTheWrongType) {
  auto e = Check(R"({"id":"1","name":"ab","shards":[]})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], R"($.id: expected type integer, got string "1")");
  EXPECT_EQ(Check(R"({"id":1.5,"name":"ab","shards":[]})").size(), 1u);
  // Stricter than the standard on purpose: this API never sends integers as floats.
  EXPECT_EQ(Check(R"({"id":1.0,"name":"ab","shards":[]})").size(), 1u);
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[true]})").size(), 1u);
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":{}})").size(), 1u);
  EXPECT_EQ(Check(R"([])").size(), 1u);
}

TEST_F(ValidatorTest, FailsOnAMissingRequiredField) {
  auto e = Check(R"({"id":1,"shards":[]})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "$: required property 'name' is missing");
}

TEST_F(ValidatorTest, FailsOnAnUndocumentedField) {
  auto e = Check(R"({"id":1,"name":"ab","shards":[],"extra":0})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "$: property 'extra' is not allowed (not in the schema)");
}

TEST_F(ValidatorTest, FailsOnValuesOutsideTheirRules) {
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[11]})").size(), 1u);            // maximum
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[-1]})").size(), 1u);            // minimum
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[1,2,3,4]})").size(), 1u);       // maxItems
  EXPECT_EQ(Check(R"({"id":1,"name":"aB","shards":[]})").size(), 1u);              // pattern
  EXPECT_EQ(Check(R"({"id":1,"name":"abcdef","shards":[]})").size(), 1u);          // maxLength
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[],"state":"C"})").size(), 1u);  // enum
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[],"kind":"x"})").size(), 1u);   // const
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[],"round":{}})").size(), 1u);   // oneOf
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[],"keys":{"a":"x"}})").size(), 1u);
  EXPECT_EQ(Check(R"({"id":1,"name":"ab","shards":[],"keys":{"1":""}})").size(), 1u);
  auto e = Check(R"({"id":1,"name":"ab","shards":[0,99]})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "$.shards[1]: 99 is above 10");
}

TEST_F(ValidatorTest, RefusesKeywordsItDoesNotImplementAndBrokenRefs) {
  json::value schema = Yaml("type: object\nproperties:\n  a: {type: string, uniqueItems: true}\n");
  EXPECT_EQ(v_.CheckSchema(schema, "s"),
            std::vector<std::string>{"s.properties.a: unsupported keyword 'uniqueItems'"});
  EXPECT_EQ(v_.Validate(schema, json::parse(R"({"a":"x"})")).size(), 1u);
  json::value broken = Yaml("$ref: '#/components/schemas/Nope'\n");
  EXPECT_EQ(v_.CheckSchema(broken, "s").size(), 1u);
  EXPECT_EQ(v_.Validate(broken, json::value(1)).size(), 1u);
  // Annotations and x- extensions are allowed and change nothing.
  json::value annotated = Yaml("type: integer\ndescription: d\nexample: 3\nx-note: n\n");
  EXPECT_TRUE(v_.CheckSchema(annotated, "s").empty());
  EXPECT_TRUE(v_.Validate(annotated, json::value(3)).empty());
  json::value required_undescribed = Yaml("type: object\nrequired: [a]\n");
  EXPECT_EQ(v_.CheckSchema(required_undescribed, "s").size(), 1u);
}

// ── the YAML loader ────────────────────────────────────────────────────────────────

TEST(YamlJson, TypesPlainScalarsByTheYaml12CoreSchema) {
  json::value v = Yaml(R"(
int: 42
neg: -7
hex: 0x1f
float: 2.5
t: true
f: False
n: null
tilde: ~
empty:
yes11: yes
on11: on
'200': quoted key
quoted: '200'
dq: "true"
block: |
  two
  lines
folded: >
  one
  line
list: [1, a, 'b']
)");
  EXPECT_EQ(json::serialize(v),
            R"({"int":42,"neg":-7,"hex":31,"float":2.5E0,"t":true,"f":false,"n":null,)"
            R"("tilde":null,"empty":null,"yes11":"yes","on11":"on","200":"quoted key",)"
            R"("quoted":"200","dq":"true","block":"two\nlines\n","folded":"one line\n",)"
            R"("list":[1,"a","b"]})");
}

TEST(YamlJson, RefusesDuplicateKeysAndSeveralDocuments) {
  json::value v;
  std::string error;
  EXPECT_FALSE(LoadYamlAsJson("a: 1\nb: 2\na: 3\n", &v, &error));
  EXPECT_EQ(error, "line 3, column 1: key 'a' is given twice");
  EXPECT_FALSE(LoadYamlAsJson("a: 1\n---\nb: 2\n", &v, &error));
  EXPECT_FALSE(LoadYamlAsJson("a: [1, 2\n", &v, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(LoadYamlAsJson("a: 99999999999999999999\n", &v, &error));
}

// ── the documented schemas against the code's serializers ─────────────────────────

class SchemasVsSerializersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    spec_ = testing::OpenApiSpec::Load(testing::DefaultOpenApiPath(), &error);
    ASSERT_NE(spec_, nullptr) << error;
  }
  std::vector<std::string> Check(const std::string& schema_name, const std::string& body) {
    return spec_->validator().Validate(json::value{{"$ref", "#/components/schemas/" + schema_name}},
                                       json::parse(body));
  }
  std::unique_ptr<testing::OpenApiSpec> spec_;
};

TEST_F(SchemasVsSerializersTest, HeartbeatResponseWithEveryField) {
  HeartbeatResponse r;
  r.status = HeartbeatStatus::kDrain;
  r.member_id = MemberId("m-1");
  r.member_epoch = 3;
  r.assignment_epoch = 7;
  r.metadata_version = 41;
  r.lineage = "5d46739ed9b4555c90f7e3f7a6eb5551";
  r.assigned_shards = {0, 3};
  r.pending_shards = {7};
  r.revoke_shards = {5};
  r.taken_shards = {5};
  r.streams = {{0, "{orders:0}"}, {3, "{orders:3}"}, {5, "{orders:5}"}, {7, "{orders:7}"}};
  r.heartbeat_interval_ms = 1000;
  r.assignment_lease_ms = 8000;
  const std::string body = SerializeHeartbeatResponse(r);
  EXPECT_EQ(Check("HeartbeatResponse", body), std::vector<std::string>{}) << body;

  // The same answer broken in the two ways the issue names: a field of the wrong type, a
  // required field missing.
  json::value wrong = json::parse(body);
  wrong.as_object()["memberEpoch"] = "3";
  EXPECT_EQ(Check("HeartbeatResponse", json::serialize(wrong)).size(), 1u);
  json::value missing = json::parse(body);
  missing.as_object().erase("assignedShards");
  EXPECT_EQ(Check("HeartbeatResponse", json::serialize(missing)).size(), 1u);
}

TEST_F(SchemasVsSerializersTest, GroupViewWithEveryField) {
  GroupView v;
  v.stream = "orders";
  v.group = "billing";
  v.revision = 4;
  v.metadata_version = 4;
  v.lineage = "76b5a3cc165fd4b029758b22bafc2765";
  v.assignment_epoch = 3;
  v.shard_count = 4;
  v.members.push_back(MemberView{"a-1", 1, "inst", {0, 1}, {4}, {2, 3}, 9985, false, true});
  CorrectionRound round;
  round.id = 2;
  round.started_ms = 1700000000000;
  round.started_version = MetadataVersion(3);
  round.synced = {MemberId("a-1")};
  round.blockers = {Blocker{ShardId(2), MemberId("ghost"), 0, 3}};
  v.correction_round = round;
  v.shards.push_back(ShardView{0, "{orders:0}", 0, "a-1", "a-1", "COMPLETED", {}, 0, 0, 0});
  v.shards.push_back(ShardView{
      4, "{orders:4}", 1, "", "a-1", "WAITING_PARENTS", {2, 3}, 17, std::nullopt, std::nullopt});
  v.taken_shards.push_back(TakenShardView{3, "a-1", 1700000000000, 1700000010000});
  v.generations.push_back(GroupGenerationView{0, {0, 1, 2, 3}, {0, 1}, {}});
  v.generations.push_back(GroupGenerationView{1, {4, 5}, {}, {2, 3}});
  const std::string body = SerializeGroupView(v);
  EXPECT_EQ(Check("GroupView", body), std::vector<std::string>{}) << body;
  v.correction_round.reset();
  EXPECT_EQ(Check("GroupView", SerializeGroupView(v)), std::vector<std::string>{});
}

TEST_F(SchemasVsSerializersTest, RoutingStreamListDeletedAndErrorBodies) {
  RoutingResponse r;
  r.metadata_version = 4;
  r.lineage = "x";
  r.shard_count = 2;
  r.shards = {{4, "{orders:4}"}, {5, "{orders:5}"}};
  r.routing_lease_ms = 30000;
  r.refresh_interval_ms = 5000;
  r.sync = true;
  r.generation = 1;
  r.layout_revision = 6;
  EXPECT_EQ(Check("RoutingResponse", SerializeRoutingResponse(r)), std::vector<std::string>{});

  StreamView s;
  s.revision = 3;
  s.layout.stream = "orders";
  s.layout.version = 42;
  s.layout.lineage = "9f0c";
  s.layout.groups = {"audit", "billing"};
  Generation g0;
  g0.generation = 0;
  g0.state = GenerationState::kRetired;
  g0.retired_ms = 1700000000000;
  g0.shards = {{0, "{orders:0}"}};
  Generation g1;
  g1.generation = 1;
  g1.state = GenerationState::kActive;
  g1.shards = {{1, "{orders:1}"}, {2, "{orders:2}"}};
  s.layout.generations = {g0, g1};
  EXPECT_EQ(Check("StreamView", SerializeStreamView(s)), std::vector<std::string>{});

  EXPECT_EQ(Check("GroupList", SerializeGroupList({GroupKey{"orders", "billing"}})),
            std::vector<std::string>{});
  EXPECT_EQ(Check("Deleted", SerializeDeleted(GroupKey{"orders", "billing"})),
            std::vector<std::string>{});
  for (int i = 0; i <= static_cast<int>(ErrorCode::kUnknownResult); ++i) {
    const std::string body = SerializeError(MakeError(static_cast<ErrorCode>(i), "m"));
    EXPECT_EQ(Check("Error", body), std::vector<std::string>{}) << body;
  }
  EXPECT_EQ(Check("Error", R"({"error":"SOMETHING_ELSE","message":"m"})").size(), 1u);
}

// The request schemas accept what the code's own clients send.
TEST_F(SchemasVsSerializersTest, RequestsTheClientsSend) {
  HeartbeatRequest hb;
  hb.member_id = MemberId("m-1");
  hb.member_epoch = 2;
  hb.instance_id = "i-1";
  hb.metadata_version = 9;
  hb.lineage = "t";
  hb.owned_shards = {1};
  hb.revoking_shards = {RevokingReport{2, RevokeState::kRevoked}};
  hb.features = {"layout-v2", "shard-lease"};
  hb.completed_shards = {0};
  EXPECT_EQ(Check("HeartbeatRequest", SerializeHeartbeatRequest(hb)), std::vector<std::string>{});
  CreateGroupRequest c;
  c.stream = "orders";
  c.group = "billing";
  c.shard_count = 4;
  EXPECT_EQ(Check("CreateGroupRequest", SerializeCreateGroupRequest(c)),
            std::vector<std::string>{});
  PatchGroupBody p;
  p.expected_revision = 3;
  p.config = GroupConfigPatch{};
  p.config->heartbeat_interval_ms = 500;
  EXPECT_EQ(Check("PatchGroupRequest", SerializePatchGroupBody(p)), std::vector<std::string>{});
  EXPECT_EQ(Check("ReshardRequest", SerializeReshardRequest(ReshardRequest{2, 8})),
            std::vector<std::string>{});
}

}  // namespace
}  // namespace rsc
