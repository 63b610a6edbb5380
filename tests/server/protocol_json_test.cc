// Table tests for the JSON forms of the coordinator API (core/protocol_json.h): every
// field's type and range errors, hostile inputs, and round trips.

#include "core/protocol_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rsc {
namespace {

struct BadCase {
  std::string name;
  std::string body;
  std::string expect_in_message;  // substring of the error message
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

// ── Heartbeat ──────────────────────────────────────────────────────────────────────

TEST(ParseHeartbeatRequest, FullRequestFromSpec) {
  auto r = ParseHeartbeatRequest(R"({
    "memberId": "4f1c-aa", "memberEpoch": 0, "instanceId": "host-1",
    "assignmentEpoch": 12, "metadataVersion": 41, "lineage": "abc",
    "ownedShards": [3, 0],
    "revokingShards": [{"shard": 6, "state": "REVOKED"}, {"shard": 5, "state": "DRAINING"}],
    "someFutureField": {"ignored": true}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->member_id.str(), "4f1c-aa");
  EXPECT_EQ(r->member_epoch, 0);
  EXPECT_EQ(r->instance_id, "host-1");
  EXPECT_EQ(r->assignment_epoch, 12);
  EXPECT_EQ(r->metadata_version, 41);
  EXPECT_EQ(r->lineage, "abc");
  EXPECT_EQ(r->owned_shards, (std::vector<int32_t>{0, 3}));  // sorted
  ASSERT_EQ(r->revoking_shards.size(), 2u);
  EXPECT_EQ(r->revoking_shards[0], (RevokingReport{5, RevokeState::kDraining}));
  EXPECT_EQ(r->revoking_shards[1], (RevokingReport{6, RevokeState::kRevoked}));
}

TEST(ParseHeartbeatRequest, MinimalRequestGetsDefaults) {
  auto r = ParseHeartbeatRequest(R"({"memberId":"m","memberEpoch":-1})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->member_epoch, -1);
  EXPECT_EQ(r->assignment_epoch, 0);
  EXPECT_EQ(r->metadata_version, 0);
  EXPECT_EQ(r->lineage, "");
  EXPECT_EQ(r->instance_id, "");
  EXPECT_TRUE(r->owned_shards.empty());
  EXPECT_TRUE(r->revoking_shards.empty());
}

TEST(ParseHeartbeatRequest, NullMeansAbsentForOptionalFields) {
  auto r = ParseHeartbeatRequest(
      R"({"memberId":"m","memberEpoch":2,"instanceId":null,"lineage":null,"ownedShards":null})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->instance_id, "");
}

TEST(ParseHeartbeatRequest, AcceptsLimitsExactly) {
  std::string id(128, 'a');
  std::string lineage(64, 'x');
  auto r = ParseHeartbeatRequest(R"({"memberId":")" + id +
                                 R"(","memberEpoch":9223372036854775807,)"
                                 R"("metadataVersion":9223372036854775807,"lineage":")" +
                                 lineage + R"(","ownedShards":[2147483647,4096,0]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->member_epoch, INT64_MAX);
  // SPEC D2: ids of later generations go above every id used before, past any shard count.
  EXPECT_EQ(r->owned_shards, (std::vector<int32_t>{0, 4096, INT32_MAX}));
}

class HeartbeatBad : public testing::TestWithParam<BadCase> {};

TEST_P(HeartbeatBad, RejectedWithFieldInMessage) {
  const BadCase& c = GetParam();
  auto r = ParseHeartbeatRequest(c.body);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest);
  EXPECT_NE(r.error().message.find(c.expect_in_message), std::string::npos)
      << "message: " << r.error().message;
}

const std::string kHb = R"("memberId":"m","memberEpoch":1)";

INSTANTIATE_TEST_SUITE_P(
    Table, HeartbeatBad,
    testing::Values(
        BadCase{"EmptyBody", "", "body is empty"}, BadCase{"Whitespace", " \n\t", "body is empty"},
        BadCase{"NotJson", "hello", "not valid JSON"},
        BadCase{"TrailingGarbage", "{" + kHb + "} x", "not valid JSON"},
        BadCase{"Truncated", R"({"memberId":"m")", "not valid JSON"},
        BadCase{"Array", "[1,2]", "must be a JSON object, got an array"},
        BadCase{"String", R"("x")", "must be a JSON object"},
        BadCase{"Number", "42", "must be a JSON object"},
        BadCase{"Null", "null", "must be a JSON object"},
        BadCase{"MissingMemberId", R"({"memberEpoch":1})", "memberId: is required"},
        BadCase{"NullMemberId", R"({"memberId":null,"memberEpoch":1})", "memberId: is required"},
        BadCase{"EmptyMemberId", R"({"memberId":"","memberEpoch":1})", "memberId: must match"},
        BadCase{"LongMemberId",
                R"({"memberId":")" + std::string(129, 'a') + R"(","memberEpoch":1})",
                "memberId: must match"},
        BadCase{"MemberIdSpace", R"({"memberId":"a b","memberEpoch":1})", "memberId: must match"},
        BadCase{"MemberIdBrace", R"({"memberId":"a{b}","memberEpoch":1})", "memberId: must match"},
        BadCase{"MemberIdUnicode", R"({"memberId":"caf\u00e9","memberEpoch":1})",
                "memberId: must match"},
        BadCase{"MemberIdNul", R"({"memberId":"a\u0000b","memberEpoch":1})",
                "memberId: must match"},
        BadCase{"MemberIdNumber", R"({"memberId":7,"memberEpoch":1})",
                "memberId: must be a string, got an integer"},
        BadCase{"MissingEpoch", R"({"memberId":"m"})", "memberEpoch: is required"},
        BadCase{"EpochString", R"({"memberId":"m","memberEpoch":"1"})",
                "memberEpoch: must be an integer, got a string"},
        BadCase{"EpochBool", R"({"memberId":"m","memberEpoch":true})",
                "memberEpoch: must be an integer, got a boolean"},
        BadCase{"EpochFraction", R"({"memberId":"m","memberEpoch":1.5})",
                "memberEpoch: must be an integer"},
        BadCase{"EpochExponent", R"({"memberId":"m","memberEpoch":1e3})",
                "memberEpoch: must be an integer"},
        BadCase{"EpochTooLow", R"({"memberId":"m","memberEpoch":-2})",
                "memberEpoch: must be >= -1, got -2"},
        BadCase{"EpochUint64", R"({"memberId":"m","memberEpoch":9223372036854775808})",
                "memberEpoch: is out of range"},
        BadCase{"EpochHuge", R"({"memberId":"m","memberEpoch":123456789012345678901234567890})",
                "memberEpoch: is out of range"},
        BadCase{"EpochHugeNegative", R"({"memberId":"m","memberEpoch":-9223372036854775809})",
                "memberEpoch: is out of range"},
        BadCase{"EpochArray", R"({"memberId":"m","memberEpoch":[1]})",
                "memberEpoch: must be an integer, got an array"},
        BadCase{"InstanceIdBad", "{" + kHb + R"(,"instanceId":"a/b"})", "instanceId: must match"},
        BadCase{"InstanceIdObject", "{" + kHb + R"(,"instanceId":{}})",
                "instanceId: must be a string, got an object"},
        BadCase{"AssignmentEpochNegative", "{" + kHb + R"(,"assignmentEpoch":-1})",
                "assignmentEpoch: must be >= 0"},
        BadCase{"AssignmentEpochString", "{" + kHb + R"(,"assignmentEpoch":"0"})",
                "assignmentEpoch: must be an integer"},
        BadCase{"VersionNegative", "{" + kHb + R"(,"metadataVersion":-5})",
                "metadataVersion: must be >= 0, got -5"},
        BadCase{"VersionOverflow", "{" + kHb + R"(,"metadataVersion":18446744073709551615})",
                "metadataVersion: is out of range"},
        BadCase{"LineageLong", "{" + kHb + R"(,"lineage":")" + std::string(65, 'x') + R"("})",
                "lineage: must match a string of at most 64 bytes"},
        BadCase{"LineageNumber", "{" + kHb + R"(,"lineage":5})", "lineage: must be a string"},
        BadCase{"OwnedNotArray", "{" + kHb + R"(,"ownedShards":3})",
                "ownedShards: must be an array, got an integer"},
        BadCase{"OwnedNegative", "{" + kHb + R"(,"ownedShards":[1,-1]})",
                "ownedShards[1]: must be between 0 and 2147483647, got -1"},
        BadCase{"OwnedInt32Overflow", "{" + kHb + R"(,"ownedShards":[2147483648]})",
                "ownedShards[0]: must be between 0 and 2147483647"},
        BadCase{"CompletedNegative", "{" + kHb + R"(,"completedShards":[-1]})",
                "completedShards[0]: must be between 0 and 2147483647"},
        BadCase{"CompletedNotArray", "{" + kHb + R"(,"completedShards":7})",
                "completedShards: must be an array"},
        BadCase{"OwnedString", "{" + kHb + R"(,"ownedShards":["1"]})",
                "ownedShards[0]: must be an integer, got a string"},
        BadCase{"OwnedFloat", "{" + kHb + R"(,"ownedShards":[1.0]})",
                "ownedShards[0]: must be an integer"},
        BadCase{"OwnedNested", "{" + kHb + R"(,"ownedShards":[[1]]})",
                "ownedShards[0]: must be an integer, got an array"},
        BadCase{"OwnedDuplicate", "{" + kHb + R"(,"ownedShards":[1,2,1]})",
                "ownedShards: duplicate shard 1"},
        BadCase{"RevokingNotArray", "{" + kHb + R"(,"revokingShards":{}})",
                "revokingShards: must be an array, got an object"},
        BadCase{"RevokingEntryNotObject", "{" + kHb + R"(,"revokingShards":[5]})",
                "revokingShards[0]: must be an object, got an integer"},
        BadCase{"RevokingNoShard", "{" + kHb + R"(,"revokingShards":[{"state":"REVOKED"}]})",
                "revokingShards[0].shard: is required"},
        BadCase{"RevokingNoState", "{" + kHb + R"(,"revokingShards":[{"shard":1}]})",
                "revokingShards[0].state: is required"},
        BadCase{"RevokingBadState",
                "{" + kHb + R"(,"revokingShards":[{"shard":1,"state":"draining"}]})",
                "revokingShards[0].state: must be \"DRAINING\" or \"REVOKED\""},
        BadCase{"RevokingStateNumber", "{" + kHb + R"(,"revokingShards":[{"shard":1,"state":1}]})",
                "revokingShards[0].state: must be a string"},
        BadCase{"RevokingShardNegative",
                "{" + kHb + R"(,"revokingShards":[{"shard":-3,"state":"REVOKED"}]})",
                "revokingShards[0].shard: must be between 0 and 2147483647"},
        BadCase{
            "RevokingDuplicate",
            "{" + kHb +
                R"(,"revokingShards":[{"shard":1,"state":"REVOKED"},{"shard":1,"state":"DRAINING"}]})",
            "revokingShards[1].shard: shard 1 is listed twice"},
        BadCase{
            "OwnedAndRevoking",
            "{" + kHb + R"(,"ownedShards":[2],"revokingShards":[{"shard":2,"state":"DRAINING"}]})",
            "revokingShards[0].shard: shard 2 is listed twice"},
        BadCase{"InvalidUtf8", "{\"memberId\":\"\xff\xfe\",\"memberEpoch\":1}", "not valid JSON"},
        BadCase{"LoneSurrogate", R"({"memberId":"\ud800","memberEpoch":1})", "not valid JSON"},
        BadCase{"DeeplyNested", std::string(100000, '[') + std::string(100000, ']'),
                "not valid JSON"},
        BadCase{"DeeplyNestedField",
                "{" + kHb + R"(,"x":)" + std::string(200, '[') + std::string(200, ']') + "}",
                "not valid JSON"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(ParseHeartbeatRequest, TooManyOwnedShards) {
  std::string body = "{" + kHb + R"(,"ownedShards":[)";
  for (size_t i = 0; i <= kMaxReportedShards; ++i) body += (i ? ",0" : "0");
  body += "]}";
  auto r = ParseHeartbeatRequest(body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ownedShards: has 65537 entries, at most 65536"),
            std::string::npos)
      << r.error().message;
}

TEST(ParseHeartbeatRequest, FirstErrorWins) {
  auto r = ParseHeartbeatRequest(R"({"memberId":"","memberEpoch":"x"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("memberId:", 0), 0u) << r.error().message;
}

TEST(ParseHeartbeatRequest, RoundTrip) {
  HeartbeatRequest req;
  req.member_id = MemberId("a.b:c-d_e");
  req.member_epoch = 7;
  req.instance_id = "inst-1";
  req.assignment_epoch = 3;
  req.metadata_version = 1LL << 60;
  req.lineage = "tok";
  req.owned_shards = {0, 2, 4095};
  req.revoking_shards = {{1, RevokeState::kDraining}, {3, RevokeState::kRevoked}};
  req.features = {kFeatureLayoutV2, kFeatureShardLease};
  req.completed_shards = {5, 9000};
  auto back = ParseHeartbeatRequest(SerializeHeartbeatRequest(req));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, req);
}

TEST(ParseLeaveRequest, BecomesHeartbeatWithEpochMinusOne) {
  auto r = ParseLeaveRequest(R"({"memberId":"m1","memberEpoch":4})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->member_epoch, 4);
  EXPECT_EQ(r->heartbeat.member_id.str(), "m1");
  EXPECT_EQ(r->heartbeat.member_epoch, -1);
  auto back = ParseLeaveRequest(SerializeLeaveRequest(*r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->member_epoch, 4);
  EXPECT_EQ(back->heartbeat, r->heartbeat);
}

TEST(ParseLeaveRequest, ValidatesLikeHeartbeat) {
  EXPECT_FALSE(ParseLeaveRequest(R"({"memberId":"m1"})").ok());
  EXPECT_FALSE(ParseLeaveRequest(R"({"memberId":"m1","memberEpoch":-2})").ok());
  EXPECT_FALSE(ParseLeaveRequest(R"({"memberEpoch":1})").ok());
}

// ── Create / patch ─────────────────────────────────────────────────────────────────

TEST(ParseCreateGroupRequest, DefaultsAndFullConfig) {
  auto r = ParseCreateGroupRequest(R"({"stream":"orders:eu","group":"billing","shardCount":16})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->stream, "orders:eu");
  EXPECT_EQ(r->group, "billing");
  EXPECT_EQ(r->shard_count, 16);
  EXPECT_EQ(r->config, GroupConfig{});

  auto c = ParseCreateGroupRequest(R"({"stream":"s","group":"g","shardCount":1,"config":{
      "heartbeatIntervalMs":500,"memberLeaseMs":20000,"assignmentLeaseMs":15000,
      "rebalanceTimeoutMs":60000,"routingLeaseMs":40000,"routingRefreshMs":4000}})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->config.heartbeat_interval_ms, 500);
  EXPECT_EQ(c->config.member_lease_ms, 20000);
  EXPECT_EQ(c->config.assignment_lease_ms, 15000);
  EXPECT_EQ(c->config.rebalance_timeout_ms, 60000);
  EXPECT_EQ(c->config.routing_lease_ms, 40000);
  EXPECT_EQ(c->config.routing_refresh_ms, 4000);
}

TEST(ParseCreateGroupRequest, PartialConfigKeepsOtherDefaults) {
  auto r = ParseCreateGroupRequest(
      R"({"stream":"s","group":"g","shardCount":4,"config":{"rebalanceTimeoutMs":45000}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  GroupConfig want;
  want.rebalance_timeout_ms = 45000;
  EXPECT_EQ(r->config, want);
}

TEST(ParseCreateGroupRequest, RoundTrip) {
  CreateGroupRequest req;
  req.stream = "a.b:c";
  req.group = "g_1-x";
  req.shard_count = 4096;
  req.config.member_lease_ms = 12000;
  auto back = ParseCreateGroupRequest(SerializeCreateGroupRequest(req));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->stream, req.stream);
  EXPECT_EQ(back->group, req.group);
  EXPECT_EQ(back->shard_count, req.shard_count);
  EXPECT_EQ(back->config, req.config);
}

// SPEC D3: without shardCount the group adopts its stream's layout (0 = not given).
TEST(CreateGroupJson, ShardCountIsOptionalAndZeroMeansAdoptTheStreams) {
  auto r = ParseCreateGroupRequest(R"({"stream":"s","group":"g"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->shard_count, 0);
  EXPECT_EQ(SerializeCreateGroupRequest(*r).find("shardCount"), std::string::npos);
}

class CreateBad : public testing::TestWithParam<BadCase> {};

TEST_P(CreateBad, RejectedWithFieldInMessage) {
  const BadCase& c = GetParam();
  auto r = ParseCreateGroupRequest(c.body);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest);
  EXPECT_NE(r.error().message.find(c.expect_in_message), std::string::npos)
      << "message: " << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CreateBad,
    testing::Values(
        BadCase{"NotObject", "[]", "must be a JSON object"},
        BadCase{"MissingStream", R"({"group":"g","shardCount":1})", "stream: is required"},
        BadCase{"MissingGroup", R"({"stream":"s","shardCount":1})", "group: is required"},
        BadCase{"ZeroShardCount", R"({"stream":"s","group":"g","shardCount":0})", "shardCount"},
        BadCase{"StreamBadChar", R"({"stream":"s{x}","group":"g","shardCount":1})",
                "stream: must match [A-Za-z0-9._:-]{1,200}"},
        BadCase{"StreamTooLong",
                R"({"stream":")" + std::string(201, 's') + R"(","group":"g","shardCount":1})",
                "stream: must match"},
        BadCase{"GroupColon", R"({"stream":"s","group":"g:1","shardCount":1})",
                "group: must match [A-Za-z0-9._-]{1,128}"},
        BadCase{"GroupTooLong",
                R"({"stream":"s","group":")" + std::string(129, 'g') + R"(","shardCount":1})",
                "group: must match"},
        BadCase{"GroupEmpty", R"({"stream":"s","group":"","shardCount":1})", "group: must match"},
        BadCase{"ShardCountZero", R"({"stream":"s","group":"g","shardCount":0})",
                "shardCount: must be between 1 and 4096, got 0"},
        BadCase{"ShardCountTooBig", R"({"stream":"s","group":"g","shardCount":4097})",
                "shardCount: must be between 1 and 4096, got 4097"},
        BadCase{"ShardCountString", R"({"stream":"s","group":"g","shardCount":"4"})",
                "shardCount: must be an integer"},
        BadCase{"ConfigNotObject", R"({"stream":"s","group":"g","shardCount":1,"config":[]})",
                "config: must be an object, got an array"},
        BadCase{"ConfigNegative",
                R"({"stream":"s","group":"g","shardCount":1,"config":{"memberLeaseMs":-1}})",
                "config.memberLeaseMs: must be between 1 and 2147483647, got -1"},
        BadCase{"ConfigZero",
                R"({"stream":"s","group":"g","shardCount":1,"config":{"heartbeatIntervalMs":0}})",
                "config.heartbeatIntervalMs: must be between 1"},
        BadCase{
            "ConfigInt32Overflow",
            R"({"stream":"s","group":"g","shardCount":1,"config":{"routingLeaseMs":2147483648}})",
            "config.routingLeaseMs: must be between 1 and 2147483647"},
        BadCase{"ConfigString",
                R"({"stream":"s","group":"g","shardCount":1,"config":{"routingRefreshMs":"5"}})",
                "config.routingRefreshMs: must be an integer"},
        // ValidateConfig (metadata.h) rejects the combination: assignment lease must stay
        // below the member lease (K2).
        BadCase{"LeaseCombination",
                R"({"stream":"s","group":"g","shardCount":1,"config":{"assignmentLeaseMs":10000}})",
                "assignmentLeaseMs"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(ParsePatchGroupBody, Forms) {
  auto a = ParsePatchGroupBody(R"({"expectedRevision":7,"shardCount":32})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->expected_revision, 7);
  EXPECT_EQ(a->shard_count, 32);
  EXPECT_FALSE(a->config.has_value());

  auto b = ParsePatchGroupBody(R"({"expectedRevision":0,"config":{"memberLeaseMs":20000}})");
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_TRUE(b->config.has_value());
  EXPECT_EQ(b->config->member_lease_ms, 20000);
  EXPECT_FALSE(b->config->heartbeat_interval_ms.has_value());
  EXPECT_FALSE(b->config->Complete());

  auto back = ParsePatchGroupBody(SerializePatchGroupBody(*b));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *b);
}

TEST(ParsePatchGroupBody, Errors) {
  struct Case {
    std::string body, msg;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"shardCount":2})", "expectedRevision: is required"},
           {R"({"expectedRevision":-1,"shardCount":2})", "expectedRevision: must be >= 0"},
           {R"({"expectedRevision":"1","shardCount":2})", "expectedRevision: must be an integer"},
           {R"({"expectedRevision":1})", "patch changes nothing"},
           {R"({"expectedRevision":1,"config":{}})", "patch changes nothing"},
           {R"({"expectedRevision":1,"shardCount":0})", "shardCount: must be between 1 and 4096"},
           {R"({"expectedRevision":1,"config":{"memberLeaseMs":1.5}})",
            "config.memberLeaseMs: must be an integer"},
       }) {
    auto r = ParsePatchGroupBody(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest);
    EXPECT_NE(r.error().message.find(c.msg), std::string::npos) << r.error().message;
  }
}

TEST(ParsePatchStreamRequest, FormsAndRoundTrip) {
  auto a = ParsePatchStreamRequest(R"({"expectedLayoutRevision":4,"routingLeaseMs":60000})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->expected_layout_revision, 4);
  EXPECT_EQ(a->routing_lease_ms, 60000);
  EXPECT_FALSE(a->routing_refresh_ms.has_value());
  auto b = ParsePatchStreamRequest(
      R"({"expectedLayoutRevision":4,"routingRefreshMs":900,"routingLeaseMs":null,"x":1})");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->routing_refresh_ms, 900);
  EXPECT_FALSE(b->routing_lease_ms.has_value()) << "null counts as absent";
  for (const PatchStreamRequest& r : {*a, *b}) {
    auto back = ParsePatchStreamRequest(SerializePatchStreamRequest(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
}

TEST(ParsePatchStreamRequest, Errors) {
  struct Case {
    std::string body, msg;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"routingLeaseMs":60000})", "expectedLayoutRevision: is required"},
           {R"({"expectedLayoutRevision":0,"routingLeaseMs":60000})",
            "expectedLayoutRevision: must be >= 1"},
           {R"({"expectedLayoutRevision":2})", "patch changes nothing"},
           {R"({"expectedLayoutRevision":2,"routingLeaseMs":"60000"})",
            "routingLeaseMs: must be an integer"},
           {R"({"expectedLayoutRevision":2,"routingRefreshMs":-5})", "routingRefreshMs: must be"},
           {R"([1,2])", "must be a JSON object"},
           {"", "body is empty"},
       }) {
    auto r = ParsePatchStreamRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest);
    EXPECT_NE(r.error().message.find(c.msg), std::string::npos)
        << c.body << ": " << r.error().message;
  }
}

TEST(ResolvePatch, MergesOntoCurrentAndValidates) {
  GroupConfig current;
  current.member_lease_ms = 30000;
  current.assignment_lease_ms = 20000;
  PatchGroupBody body;
  body.expected_revision = 3;
  body.config = GroupConfigPatch{};
  body.config->rebalance_timeout_ms = 90000;
  auto r = ResolvePatch(body, current);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->config.has_value());
  EXPECT_EQ(r->config->member_lease_ms, 30000);  // kept from current, not the default
  EXPECT_EQ(r->config->rebalance_timeout_ms, 90000);
  EXPECT_EQ(r->expected_revision, 3);

  body.config->assignment_lease_ms = 40000;  // >= memberLeaseMs: K2 violation
  auto bad = ResolvePatch(body, current);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidRequest);
}

TEST(GroupConfigPatch, FullAndApply) {
  GroupConfig c;
  c.routing_refresh_ms = 1234;
  GroupConfigPatch p = GroupConfigPatch::Full(c);
  EXPECT_TRUE(p.Complete());
  EXPECT_FALSE(p.Empty());
  EXPECT_EQ(p.ApplyTo(GroupConfig{}), c);
  EXPECT_TRUE(GroupConfigPatch{}.Empty());
}

// ── Responses ─────────────────────────────────────────────────────────────────────

TEST(HeartbeatResponseJson, ExactFieldNamesAndRoundTrip) {
  HeartbeatResponse resp;
  resp.status = HeartbeatStatus::kDrain;
  resp.member_id = MemberId("4f1c");
  resp.member_epoch = 3;
  resp.assignment_epoch = 12;
  resp.metadata_version = 41;
  resp.lineage = "L";
  resp.assigned_shards = {0, 3};
  resp.pending_shards = {7};
  resp.revoke_shards = {5};
  resp.heartbeat_interval_ms = 1000;
  resp.assignment_lease_ms = 8000;
  std::string json = SerializeHeartbeatResponse(resp);
  EXPECT_EQ(json,
            R"({"status":"DRAIN","memberId":"4f1c","memberEpoch":3,"assignmentEpoch":12,)"
            R"("metadataVersion":41,"lineage":"L","assignedShards":[0,3],"pendingShards":[7],)"
            R"("revokeShards":[5],"heartbeatIntervalMs":1000,"assignmentLeaseMs":8000})");
  auto back = ParseHeartbeatResponse(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, resp);
}

TEST(HeartbeatResponseJson, EveryStatusRoundTrips) {
  for (HeartbeatStatus s : {HeartbeatStatus::kOk, HeartbeatStatus::kRevokePending,
                            HeartbeatStatus::kDrain, HeartbeatStatus::kSyncMetadata}) {
    HeartbeatResponse resp;
    resp.status = s;
    resp.member_id = MemberId("m");
    auto back = ParseHeartbeatResponse(SerializeHeartbeatResponse(resp));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->status, s);
  }
  EXPECT_EQ(HeartbeatStatusName(HeartbeatStatus::kRevokePending), "REVOKE_PENDING");
  EXPECT_EQ(HeartbeatStatusName(HeartbeatStatus::kSyncMetadata), "SYNC_METADATA");
}

TEST(HeartbeatResponseJson, MalformedResponseIsInternal) {
  auto r = ParseHeartbeatResponse(R"({"status":"MAYBE"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_NE(r.error().message.find("malformed response"), std::string::npos);
}

TEST(RoutingResponseJson, ExactFieldNamesAndRoundTrip) {
  RoutingResponse resp;
  resp.metadata_version = 41;
  resp.lineage = "L";
  resp.shard_count = 2;
  resp.shards = {{0, "{orders:0}"}, {1, "{orders:1}"}};
  resp.routing_lease_ms = 30000;
  resp.refresh_interval_ms = 5000;
  resp.sync = true;
  resp.generation = 2;
  resp.layout_revision = 9;
  std::string json = SerializeRoutingResponse(resp);
  EXPECT_EQ(json, R"({"metadataVersion":41,"lineage":"L","shardCount":2,"shards":[{"id":0,)"
                  R"("stream":"{orders:0}"},{"id":1,"stream":"{orders:1}"}],"hash":"jump-xxh64",)"
                  R"("routingLeaseMs":30000,"refreshIntervalMs":5000,"sync":true,)"
                  R"("generation":2,"layoutRevision":9})");
  auto back = ParseRoutingResponse(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, resp);
  // A coordinator from before layouts sends neither: generation 0, revision 0.
  auto old = ParseRoutingResponse(
      R"({"metadataVersion":1,"lineage":"L","shardCount":1,"shards":[{"id":0,"stream":"{o:0}"}],)"
      R"("hash":"jump-xxh64","routingLeaseMs":30000,"refreshIntervalMs":5000,"sync":false})");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->generation, 0);
}

// SPEC D2: heartbeat answers name the keys of resharded shards; absent when there are none.
TEST(HeartbeatResponseJson, StreamsMapRoundTripsAndIsStrict) {
  HeartbeatResponse r;
  r.member_id = MemberId("a");
  r.assigned_shards = {4, 5};
  r.streams = {{4, "{orders:4}"}, {5, "{orders:5}"}};
  const std::string json = SerializeHeartbeatResponse(r);
  EXPECT_NE(json.find(R"("streams":{"4":"{orders:4}","5":"{orders:5}"})"), std::string::npos)
      << json;
  auto back = ParseHeartbeatResponse(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, r);
  r.streams.clear();
  EXPECT_EQ(SerializeHeartbeatResponse(r).find("streams"), std::string::npos);
  for (const char* bad : {R"("streams":[])", R"("streams":{"x":"k"})", R"("streams":{"-1":"k"})",
                          R"("streams":{"4":""})", R"("streams":{"4":7})"}) {
    std::string text = json;
    const size_t at = text.find(R"("streams")");
    const size_t end = text.find('}', text.find('{', at)) + 1;
    text.replace(at, end - at, bad);
    EXPECT_FALSE(ParseHeartbeatResponse(text).ok()) << text;
  }
}

GroupView SampleView() {
  GroupView v;
  v.stream = "orders";
  v.group = "billing";
  v.revision = 17;
  v.metadata_version = 41;
  v.lineage = "L";
  v.assignment_epoch = 12;
  v.shard_count = 2;
  v.config.member_lease_ms = 11000;
  MemberView m;
  m.member_id = "m1";
  m.member_epoch = 2;
  m.instance_id = "i1";
  m.assigned_shards = {0};
  m.pending_shards = {1};
  m.revoking_shards = {};
  m.lease_remaining_ms = 9000;
  m.leaving = true;
  m.fenced = false;
  v.members = {m};
  v.shards = {{0, "{orders:0}"}, {1, "{orders:1}"}};
  return v;
}

TEST(GroupViewJson, RoundTripWithoutRound) {
  GroupView v = SampleView();
  std::string json = SerializeGroupView(v);
  EXPECT_NE(json.find(R"("correctionRound":null)"), std::string::npos);
  EXPECT_NE(json.find(R"("config":{"heartbeatIntervalMs":1000,"memberLeaseMs":11000,)"
                      R"("assignmentLeaseMs":8000,"rebalanceTimeoutMs":30000,)"
                      R"("routingLeaseMs":30000,"routingRefreshMs":5000})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("leaseRemainingMs":9000,"leaving":true,"fenced":false)"),
            std::string::npos)
      << json;
  auto back = ParseGroupView(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(SerializeGroupView(*back), json);
}

// The generations a group holds after a reshard (SPEC RS3; docs/protocol.md 7.2).
TEST(GroupViewJson, GenerationsRoundTripAndAreOptional) {
  GroupView v = SampleView();
  EXPECT_EQ(SerializeGroupView(v).find("generations"), std::string::npos);
  v.generations = {{0, {0, 1}, {0}, {}}, {1, {2, 3, 4}, {}, {1}}};
  const std::string json = SerializeGroupView(v);
  EXPECT_NE(json.find(R"("generations":[{"generation":0,"shards":[0,1],"completed":[0],)"
                      R"("waitingFor":[]},{"generation":1,"shards":[2,3,4],"completed":[],)"
                      R"("waitingFor":[1]}])"),
            std::string::npos)
      << json;
  auto back = ParseGroupView(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->generations, v.generations);
  auto bad =
      ParseGroupView(json.substr(0, json.find("\"waitingFor\":[1]")) + R"("waitingFor":[-1]}]})");
  EXPECT_FALSE(bad.ok());
}

TEST(GroupViewJson, RoundTripWithRound) {
  GroupView v = SampleView();
  CorrectionRound round;
  round.id = 3;
  round.started_ms = 1700000000000;
  round.started_version = MetadataVersion(40);
  round.synced = {MemberId("m1")};
  round.blockers = {Blocker{ShardId(1), MemberId("ghost"), 1700000009000, 39}};
  v.correction_round = round;
  std::string json = SerializeGroupView(v);
  EXPECT_NE(json.find(R"("correctionRound":{"id":3,"startedMs":1700000000000,)"
                      R"("startedVersion":40,"synced":["m1"],)"
                      R"("blockers":[{"shard":1,"member":"ghost","untilMs":1700000009000,)"
                      R"("sinceVersion":39}]})"),
            std::string::npos)
      << json;
  auto back = ParseGroupView(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_TRUE(back->correction_round.has_value());
  EXPECT_EQ(*back->correction_round, round);
}

TEST(GroupListJson, RoundTrip) {
  std::vector<GroupKey> groups = {{"a:b", "g1"}, {"c", "g2"}};
  std::string json = SerializeGroupList(groups);
  EXPECT_EQ(json, R"({"groups":[{"stream":"a:b","group":"g1"},{"stream":"c","group":"g2"}]})");
  auto back = ParseGroupList(json);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, groups);
  EXPECT_EQ(SerializeGroupList({}), R"({"groups":[]})");
}

TEST(ErrorJson, RoundTripAndEscaping) {
  Error e{ErrorCode::kFencedMemberEpoch, "stale \"epoch\"\n\x01"};
  std::string json = SerializeError(e);
  auto back = ParseErrorBody(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->error, "FENCED_MEMBER_EPOCH");
  EXPECT_EQ(back->message, e.message);
  EXPECT_EQ(back->code, ErrorCode::kFencedMemberEpoch);
  EXPECT_EQ(ErrorCodeFromName("NOPE"), std::nullopt);
  for (int i = 0; i <= static_cast<int>(ErrorCode::kUnknownResult); ++i) {
    auto code = static_cast<ErrorCode>(i);
    EXPECT_EQ(ErrorCodeFromName(ErrorCodeName(code)), code);
  }
}

TEST(Names, ValidationRules) {
  EXPECT_TRUE(IsValidGroupName("a"));
  EXPECT_TRUE(IsValidGroupName(std::string(128, 'g')));
  EXPECT_FALSE(IsValidGroupName(std::string(129, 'g')));
  EXPECT_FALSE(IsValidGroupName(""));
  EXPECT_FALSE(IsValidGroupName("a:b"));
  EXPECT_TRUE(IsValidGroupName("A-z_0.9"));
  EXPECT_TRUE(IsValidStreamName("a:b"));
  EXPECT_TRUE(IsValidStreamName(std::string(200, 's')));
  EXPECT_FALSE(IsValidStreamName(std::string(201, 's')));
  EXPECT_FALSE(IsValidStreamName("a}b"));
  EXPECT_FALSE(IsValidStreamName("a b"));
  EXPECT_FALSE(IsValidStreamName(std::string("a\0b", 3)));
  EXPECT_FALSE(IsValidStreamName("caf\xc3\xa9"));
  EXPECT_TRUE(IsValidMemberId("4f1c-aa:1.x_y"));
  EXPECT_FALSE(IsValidMemberId("a/b"));
  // Issue 8: names made only of dots are path segments that proxies and curl rewrite
  // (`.` and `..`): such a group would be created but never reachable.
  for (const char* dots : {".", "..", "...", "...."}) {
    EXPECT_FALSE(IsValidGroupName(dots)) << dots;
    EXPECT_FALSE(IsValidStreamName(dots)) << dots;
    EXPECT_FALSE(IsValidMemberId(dots)) << dots;
  }
  EXPECT_TRUE(IsValidGroupName(".a"));
  EXPECT_TRUE(IsValidStreamName("..:"));
  EXPECT_TRUE(IsValidMemberId("a.."));
}

// Hostile bytes must never crash a parser; each returns an error or a value.
TEST(ProtocolJson, NeverCrashesOnJunk) {
  std::vector<std::string> junk = {std::string("\0\0\0", 3),
                                   "{",
                                   "}",
                                   "{\"memberId\":",
                                   "\xef\xbb\xbf{}",
                                   "{\"a\":1,}",
                                   "[" + std::string(5000, '{'),
                                   "{\"memberId\":\"m\",\"memberEpoch\":1e99999}",
                                   "{\"memberId\":\"m\",\"memberEpoch\":-0}",
                                   "{\"ownedShards\":[" + std::string(1000, '9') + "]}",
                                   "\"\\u0000\"",
                                   "{\"memberId\":\"\\ud83d\\ude00\",\"memberEpoch\":1}",
                                   "NaN",
                                   "Infinity"};
  for (const std::string& j : junk) {
    (void)ParseHeartbeatRequest(j);
    (void)ParseLeaveRequest(j);
    (void)ParseCreateGroupRequest(j);
    (void)ParsePatchGroupBody(j);
    (void)ParsePatchStreamRequest(j);
    (void)ParseHeartbeatResponse(j);
    (void)ParseRoutingResponse(j);
    (void)ParseGroupView(j);
    (void)ParseGroupList(j);
    (void)ParseErrorBody(j);
  }
  auto neg_zero = ParseHeartbeatRequest("{\"memberId\":\"m\",\"memberEpoch\":-0}");
  ASSERT_TRUE(neg_zero.ok());
  EXPECT_EQ(neg_zero->member_epoch, 0);
}

}  // namespace
}  // namespace rsc
