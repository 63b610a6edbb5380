// Level 2: the audit trail of admin mutations (SPEC O4) against a real coordinator and
// redis-server. Every mutation answered with success appends one entry to
// redis-stream:coord:audit — actor, action, names, and exactly the revisions its write was
// checked against and produced — and logs `event=audit`; refused ones append nothing. An
// entry that cannot be written (the key made a string) neither fails nor undoes the
// mutation and is counted. The stream is capped.

#include <gtest/gtest.h>

#include <chrono>

#include "integration/harness.h"

namespace rsc::integration {
namespace {

constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kAuditKey = "redis-stream:coord:audit";
constexpr const char* kP = "orders";
constexpr const char* kG = "billing";

HttpClient::Headers Admin() { return {{"Authorization", std::string("Bearer ") + kAdmin}}; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct AuditEntry {
  std::string id;
  std::vector<std::string> names;  // field names in stream order
  std::map<std::string, std::string> f;
};

// The whole stream, oldest first.
std::vector<AuditEntry> ReadAudit(RedisCli& cli) {
  std::vector<AuditEntry> out;
  const CliReply r = cli.Run({"XRANGE", kAuditKey, "-", "+"});
  EXPECT_EQ(r.type, CliReply::Type::kArray) << r.ToString();
  for (const CliReply& e : r.elements) {
    AuditEntry a;
    a.id = e.elements.at(0).str;
    const auto& kv = e.elements.at(1).elements;
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      a.names.push_back(kv[i].str);
      a.f[kv[i].str] = kv[i + 1].str;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string Describe(const std::vector<AuditEntry>& entries) {
  std::string s;
  for (const AuditEntry& e : entries) {
    s += "\n  " + e.id;
    for (const std::string& n : e.names) s += " " + n + "=" + e.f.at(n);
  }
  return s;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

class AuditTest : public RedisFixtureTest {
 protected:
  // No ticks during the test (one per minute): every revision change is the test's own, so
  // the stored revision can be compared with the audit entries.
  void Start(const std::string& admin_token, std::vector<std::string> extra = {}) {
    CoordinatorOptions o = CoordOpts(redis_, 60000);
    o.admin_token = admin_token;
    o.extra_args = std::move(extra);
    coord_ = std::make_unique<CoordinatorProcess>(o);
    ASSERT_TRUE(coord_->Start());
    http_ = std::make_unique<HttpClient>(coord_->Port());
  }
  int64_t StoredRevision() { return std::stoll(HGet(*cli_, MetadataKey(kP, kG), "revision")); }
};

TEST_F(AuditTest, EveryAdminMutationAppendsOneEntryWithTheRevisionsItsWriteMoved) {
  Start(kAdmin);
  const int64_t t0 = NowMs();
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2, Config{}, Admin()));
  Consumer m1("m-1");
  ASSERT_EQ(Beat(*http_, m1, kP, kG).status, 200);  // a member to fence; revision moves
  const int64_t before_patch = StoredRevision();
  ASSERT_GT(before_patch, 1);

  HttpResult patched = http_->Patch(
      GroupPath(kP, kG),
      json::value(json::object{{"expectedRevision", before_patch},
                               {"config", json::object{{"heartbeatIntervalMs", 400}}}}),
      Admin());
  ASSERT_EQ(patched.status, 200) << patched.Describe();
  // The same value again: answered 200, nothing written, recorded with before == after.
  HttpResult unchanged = http_->Patch(
      GroupPath(kP, kG),
      json::value(json::object{{"expectedRevision", before_patch + 1},
                               {"config", json::object{{"heartbeatIntervalMs", 400}}}}),
      Admin());
  ASSERT_EQ(unchanged.status, 200) << unchanged.Describe();
  const int64_t before_fence = StoredRevision();
  ASSERT_EQ(before_fence, before_patch + 1) << "the unchanged patch wrote";
  HttpResult fenced = http_->Post(GroupPath(kP, kG) + "/members/m-1/fence", "", Admin());
  ASSERT_EQ(fenced.status, 200) << fenced.Describe();
  const int64_t after_fence = StoredRevision();

  // Export, delete and restore before the reshard: the export then matches the stream's
  // layout again.
  const std::string doc = http_->Get(GroupPath(kP, kG) + "/export", Admin()).body;
  const int64_t before_delete = StoredRevision();
  HttpResult deleted = http_->Delete(
      GroupPath(kP, kG) + "?expectedRevision=" + std::to_string(before_delete), Admin());
  ASSERT_EQ(deleted.status, 200) << deleted.Describe();
  HttpResult restored = http_->Post("/v1/groups/restore", doc, Admin());
  ASSERT_EQ(restored.status, 200) << restored.Describe();

  const int64_t layout_before = JsonInt(http_->Get("/v1/streams/orders", Admin()).json, "revision");
  HttpResult resharded = http_->Post(
      "/v1/streams/orders/reshard",
      json::value(json::object{{"expectedLayoutRevision", layout_before}, {"shardCount", 3}}),
      Admin());
  ASSERT_EQ(resharded.status, 200) << resharded.Describe();

  // Refused mutations append nothing: a conflict, a create refused, no token.
  EXPECT_EQ(http_
                ->Patch(GroupPath(kP, kG),
                        R"({"expectedRevision":999,"config":{"heartbeatIntervalMs":450}})", Admin())
                .status,
            409);
  // (GROUP_EXISTS, or LAYOUT_MISMATCH: the stream is being resharded to 3 shards)
  EXPECT_EQ(http_->Post("/v1/groups", json::value(CreateBody(kP, kG, 2)), Admin()).status, 409);
  EXPECT_EQ(http_->Post("/v1/groups", json::value(CreateBody(kP, "other", 2))).status, 401);
  const int64_t t1 = NowMs();

  const std::vector<AuditEntry> a = ReadAudit(*cli_);
  ASSERT_EQ(a.size(), 7u) << Describe(a);
  const std::vector<std::string> seven = {"at",    "actor",          "action",       "stream",
                                          "group", "revisionBefore", "revisionAfter"};
  struct Want {
    std::string action, group, before, after, member;
  };
  const std::vector<Want> want = {
      {"create_group", kG, "", "1", ""},
      {"patch_group", kG, std::to_string(before_patch), std::to_string(before_patch + 1), ""},
      {"patch_group", kG, std::to_string(before_patch + 1), std::to_string(before_patch + 1), ""},
      {"fence_member", kG, std::to_string(before_fence), std::to_string(after_fence), "m-1"},
      {"delete_group", kG, std::to_string(before_delete), "", ""},
      // Restored over nothing (the delete removed the hash): the revision starts again at 1.
      {"restore_group", kG, "", "1", ""},
      // The reshard's own layout write, not the revision of the view it answered with (the
      // stream tick it runs at once may have moved the layout further).
      {"reshard", "", std::to_string(layout_before), std::to_string(layout_before + 1), ""},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].action + Describe({a[i]}));
    std::vector<std::string> names = seven;
    if (!want[i].member.empty()) names.push_back("member");
    EXPECT_EQ(a[i].names, names);
    EXPECT_EQ(a[i].f.at("action"), want[i].action);
    EXPECT_EQ(a[i].f.at("actor"), "admin");
    EXPECT_EQ(a[i].f.at("stream"), kP);
    EXPECT_EQ(a[i].f.at("group"), want[i].group);
    EXPECT_EQ(a[i].f.at("revisionBefore"), want[i].before);
    EXPECT_EQ(a[i].f.at("revisionAfter"), want[i].after);
    if (!want[i].member.empty()) {
      EXPECT_EQ(a[i].f.at("member"), want[i].member);
    }
    const int64_t at = std::stoll(a[i].f.at("at"));
    EXPECT_GE(at, t0);
    EXPECT_LE(at, t1);
  }
  EXPECT_EQ(after_fence, before_fence + 1);
  EXPECT_EQ(JsonInt(restored.json, "revision"), 1);

  const std::string log = coord_->Log();
  EXPECT_EQ(Count(log, "event=audit "), 7u) << coord_->LogTail(20);
  EXPECT_EQ(Count(log, "written=true"), 7u) << coord_->LogTail(20);
  EXPECT_NE(log.find("event=audit actor=admin action=fence_member stream=orders group=billing "
                     "revision_before=" +
                     std::to_string(before_fence)),
            std::string::npos)
      << coord_->LogTail(20);
  EXPECT_EQ(Metric(*http_, "rsc_audit_write_failures_total"), 0);
}

TEST_F(AuditTest, AnAuditWriteFailureNeitherFailsNorUndoesTheMutation) {
  Start("");  // no token: every route open, the actor is "anonymous"
  ASSERT_EQ(cli_->Run({"SET", kAuditKey, "not a stream"}).str, "OK");
  ASSERT_TRUE(CreateGroup(*http_, kP, kG, 2));
  EXPECT_EQ(StoredRevision(), 1) << "the create was undone";
  EXPECT_EQ(http_->Get(GroupPath(kP, kG)).status, 200);
  EXPECT_EQ(Metric(*http_, "rsc_audit_write_failures_total"), 1);
  ASSERT_TRUE(coord_->WaitForLog("written=false", 5s));
  const std::string log = coord_->Log();
  EXPECT_NE(log.find("event=audit actor=anonymous action=create_group stream=orders "
                     "group=billing revision_before=- revision_after=1"),
            std::string::npos)
      << coord_->LogTail(10);
  EXPECT_NE(log.find("WRONGTYPE"), std::string::npos) << coord_->LogTail(10);
  EXPECT_EQ(cli_->Run({"GET", kAuditKey}).str, "not a stream") << "the key was overwritten";

  // Once the key is out of the way the next mutation is recorded again.
  ASSERT_EQ(cli_->Run({"DEL", kAuditKey}).integer, 1);
  HttpResult patched = http_->Patch(
      GroupPath(kP, kG), R"({"expectedRevision":1,"config":{"heartbeatIntervalMs":400}})");
  ASSERT_EQ(patched.status, 200) << patched.Describe();
  const std::vector<AuditEntry> a = ReadAudit(*cli_);
  ASSERT_EQ(a.size(), 1u) << Describe(a);
  EXPECT_EQ(a[0].f.at("action"), "patch_group");
  EXPECT_EQ(a[0].f.at("actor"), "anonymous");
  EXPECT_EQ(a[0].f.at("revisionBefore"), "1");
  EXPECT_EQ(a[0].f.at("revisionAfter"), "2");
  EXPECT_EQ(Metric(*http_, "rsc_audit_write_failures_total"), 1);
}

TEST_F(AuditTest, TheStreamIsCappedAtAboutAuditMaxLen) {
  Start("", {"--audit-max-len", "100"});
  constexpr int kCreates = 260;
  for (int i = 0; i < kCreates; ++i) {
    ASSERT_TRUE(CreateGroup(*http_, "s" + std::to_string(i), kG, 1));
  }
  // MAXLEN ~ trims whole macro nodes (100 entries each by default): at least 100 stay, and
  // far fewer than were written.
  const int64_t len = cli_->Run({"XLEN", kAuditKey}).integer;
  EXPECT_GE(len, 100);
  EXPECT_LE(len, 200);
  const CliReply last = cli_->Run({"XREVRANGE", kAuditKey, "+", "-", "COUNT", "1"});
  ASSERT_EQ(last.elements.size(), 1u) << last.ToString();
  EXPECT_NE(last.ToString().find("s" + std::to_string(kCreates - 1)), std::string::npos)
      << last.ToString();
}

TEST_F(AuditTest, AnAuditMaxLenBelowOneIsABadCommandLine) {
  CoordinatorOptions o = CoordOpts(redis_);
  o.extra_args = {"--audit-max-len", "0"};
  CoordinatorProcess coord(o);
  ASSERT_TRUE(coord.Spawn());
  const std::optional<int> code = coord.WaitExit(20s);
  ASSERT_TRUE(code.has_value()) << coord.LogTail();
  EXPECT_EQ(*code, 2) << coord.LogTail();
  EXPECT_NE(coord.Log().find("--audit-max-len"), std::string::npos) << coord.LogTail();
}

}  // namespace
}  // namespace rsc::integration
