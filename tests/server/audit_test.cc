// The audit trail's HTTP side (server/audit.h, SPEC O4): the Api records every admin
// mutation the service reports committed — with the actor its token's role gave and the
// names and revisions the service reported, also when the request then failed — and
// nothing else; the Auditor stamps, appends, and counts a failed append without failing the
// request. Api::Handle is called directly (no sockets) against the scripted FakeApi.

#include "server/audit.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "http_test_util.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/shutdown_gate.h"

namespace rsc {
namespace {

using testing_http::FakeApi;

constexpr TimeMs kNow = 1'700'000'000'123;
constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kMonitor[] = "monitor-token-0123456789";

class RecordingSink : public AuditSink {
 public:
  Status Append(const AuditRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    records.push_back(r);
    if (fail)
      return MakeError(ErrorCode::kRedisUnavailable,
                       "XADD redis-stream:coord:audit: "
                       "WRONGTYPE Operation against a key "
                       "holding the wrong kind of value");
    return OkStatus();
  }
  std::vector<AuditRecord> records;
  bool fail = false;

 private:
  std::mutex mu_;
};

class FixedClock : public Clock {
 public:
  TimeMs NowMs() override { return kNow; }
};

TEST(AuditFields, SevenFieldsInOrderEmptyWhereNotMeaningfulMemberOnlyForAFence) {
  AuditRecord r{.at = 5,
                .actor = "admin",
                .action = "delete_group",
                .stream = "orders",
                .group = "billing",
                .revision_before = 7,
                .revision_after = std::nullopt};
  const std::vector<std::pair<std::string, std::string>> want = {
      {"at", "5"},          {"actor", "admin"},   {"action", "delete_group"},
      {"stream", "orders"}, {"group", "billing"}, {"revisionBefore", "7"},
      {"revisionAfter", ""}};
  EXPECT_EQ(AuditFields(r), want);
  r.action = "fence_member";
  r.revision_after = 8;
  r.member = "m-1";
  const auto fence = AuditFields(r);
  ASSERT_EQ(fence.size(), 8u);
  EXPECT_EQ(fence[6], (std::pair<std::string, std::string>{"revisionAfter", "8"}));
  EXPECT_EQ(fence[7], (std::pair<std::string, std::string>{"member", "m-1"}));
}

class ApiAuditTest : public ::testing::Test {
 protected:
  void Make(TokenConfig tokens) {
    ApiOptions o;
    o.tokens = std::move(tokens);
    o.auditor = &auditor_;
    api_ = std::make_unique<Api>(fake_, gate_, metrics_, o);
  }
  HttpResponse Call(std::string method, std::string target, std::string body = "",
                    std::string token = kAdmin) {
    HttpRequest req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.body = std::move(body);
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    return api_->Handle(req);
  }
  TokenConfig AdminAndMonitor() {
    TokenConfig t;
    t.admin.token = kAdmin;
    t.monitor.token = kMonitor;
    return t;
  }

  FakeApi fake_;
  ShutdownGate gate_;
  Metrics metrics_;
  RecordingSink sink_;
  FixedClock clock_;
  Auditor auditor_{sink_, clock_, metrics_};
  std::unique_ptr<Api> api_;
};

TEST_F(ApiAuditTest, EveryMutationIsRecordedWithItsActorNamesAndRevisions) {
  Make(AdminAndMonitor());
  struct Case {
    std::string method, target, body;
    RevisionChange change;
    int status;
    std::string action, stream, group, member;
  };
  const GroupKey billing{"orders", "billing"};
  const std::vector<Case> cases = {
      {"POST",
       "/v1/groups",
       R"({"stream":"orders","group":"billing","shardCount":2})",
       {true, std::nullopt, 1, billing},
       201,
       "create_group",
       "orders",
       "billing",
       ""},
      {"PATCH",
       "/v1/groups/orders/billing",
       R"({"expectedRevision":4,"config":{"heartbeatIntervalMs":500,"memberLeaseMs":10000,)"
       R"("assignmentLeaseMs":8000,"rebalanceTimeoutMs":30000,"routingLeaseMs":30000,)"
       R"("routingRefreshMs":5000}})",
       {true, 4, 5, billing},
       200,
       "patch_group",
       "orders",
       "billing",
       ""},
      {"DELETE",
       "/v1/groups/orders/billing?expectedRevision=9",
       "",
       {true, 9, std::nullopt, billing},
       200,
       "delete_group",
       "orders",
       "billing",
       ""},
      {"POST",
       "/v1/groups/orders/billing/members/m-7/fence",
       "",
       {true, 11, 12, billing},
       200,
       "fence_member",
       "orders",
       "billing",
       "m-7"},
      // The restored group's name comes from the service (its document names it).
      {"POST",
       "/v1/groups/restore",
       R"({"kind":"rsc-group-export"})",
       {true, 20, 21, GroupKey{"orders", "restored"}},
       200,
       "restore_group",
       "orders",
       "restored",
       ""},
      {"POST",
       "/v1/streams/orders/reshard",
       R"({"expectedLayoutRevision":3,"shardCount":4})",
       {true, 3, 4, GroupKey{"orders", ""}},
       200,
       "reshard",
       "orders",
       "",
       ""},
  };

  for (const Case& c : cases) {
    SCOPED_TRACE(c.action);
    fake_.Locked([&] { fake_.next_change = c.change; });
    const size_t before = sink_.records.size();
    HttpResponse r = Call(c.method, c.target, c.body);
    ASSERT_EQ(r.status, c.status) << r.body;
    ASSERT_EQ(sink_.records.size(), before + 1);
    const AuditRecord& a = sink_.records.back();
    EXPECT_EQ(a.at, kNow);
    EXPECT_EQ(a.actor, "admin");
    EXPECT_EQ(a.action, c.action);
    EXPECT_EQ(a.stream, c.stream);
    EXPECT_EQ(a.group, c.group);
    EXPECT_EQ(a.revision_before, c.change.before);
    EXPECT_EQ(a.revision_after, c.change.after);
    EXPECT_EQ(a.member, c.member);
  }
  EXPECT_NE(metrics_.Serialize().find("rsc_audit_write_failures_total 0"), std::string::npos);
}

TEST_F(ApiAuditTest, ReadsRefusalsAndFailedMutationsAreNotRecorded) {
  Make(AdminAndMonitor());
  // The service would report a committed change to any mutation that reached it.
  fake_.Locked([&] {
    fake_.next_change = RevisionChange{true, 1, 2, GroupKey{"orders", "billing"}};
  });
  EXPECT_EQ(Call("GET", "/v1/groups/orders/billing").status, 200);
  EXPECT_EQ(Call("GET", "/v1/groups").status, 200);
  EXPECT_EQ(Call("GET", "/v1/groups/orders/billing/export").status, 200);
  EXPECT_EQ(
      Call("POST", "/v1/groups/orders/billing/heartbeat", R"({"memberId":"m1","memberEpoch":0})")
          .status,
      200);
  // 401, 403, 400, and an error from the service.
  EXPECT_EQ(Call("DELETE", "/v1/groups/orders/billing?expectedRevision=1", "", "").status, 401);
  EXPECT_EQ(Call("DELETE", "/v1/groups/orders/billing?expectedRevision=1", "", kMonitor).status,
            403);
  EXPECT_EQ(Call("DELETE", "/v1/groups/orders/billing").status, 400);
  // The service says nothing was committed (with an error, or without): nothing recorded.
  fake_.Locked([&] {
    fake_.next_change = RevisionChange{false, 1, 2, GroupKey{"orders", "billing"}};
    fake_.mutation_error = Error{ErrorCode::kRevisionConflict, "expectedRevision 1 but 2"};
  });
  EXPECT_EQ(Call("DELETE", "/v1/groups/orders/billing?expectedRevision=1").status, 409);
  EXPECT_EQ(Call("POST", "/v1/groups/orders/billing/members/m-1/fence").status, 409);
  fake_.Locked([&] { fake_.mutation_error.reset(); });
  EXPECT_EQ(Call("POST", "/v1/groups/orders/billing/members/m-1/fence").status, 200);
  EXPECT_TRUE(sink_.records.empty());
}

// A patch whose write committed but whose re-read of the view failed is answered with the
// error, and recorded: the change happened.
TEST_F(ApiAuditTest, AMutationCommittedBeforeALaterStepFailedIsRecorded) {
  Make(AdminAndMonitor());
  fake_.Locked([&] {
    fake_.next_change = RevisionChange{true, 6, 7, GroupKey{"orders", "billing"}};
    fake_.mutation_error = Error{ErrorCode::kRedisUnavailable, "re-read failed"};
  });
  HttpResponse r = Call("POST", "/v1/groups/orders/billing/members/m-2/fence");
  EXPECT_EQ(r.status, 503) << r.body;
  ASSERT_EQ(sink_.records.size(), 1u);
  EXPECT_EQ(sink_.records[0].action, "fence_member");
  EXPECT_EQ(sink_.records[0].revision_before, 6);
  EXPECT_EQ(sink_.records[0].revision_after, 7);
  EXPECT_EQ(sink_.records[0].member, "m-2");
}

TEST_F(ApiAuditTest, WithoutAnAdminTokenTheActorIsAnonymous) {
  Make(TokenConfig{});
  fake_.Locked([&] { fake_.next_change = RevisionChange{true, std::nullopt, 1, {"o", "g"}}; });
  EXPECT_EQ(Call("POST", "/v1/groups", R"({"stream":"o","group":"g","shardCount":1})", "").status,
            201);
  ASSERT_EQ(sink_.records.size(), 1u);
  EXPECT_EQ(sink_.records[0].actor, "anonymous");
}

TEST_F(ApiAuditTest, AFailedAppendIsCountedAndTheMutationStillSucceeds) {
  Make(AdminAndMonitor());
  sink_.fail = true;
  fake_.Locked([&] { fake_.next_change = RevisionChange{true, std::nullopt, 1, {"o", "g"}}; });
  HttpResponse r = Call("POST", "/v1/groups", R"({"stream":"o","group":"g","shardCount":1})");
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(sink_.records.size(), 1u);
  r = Call("POST", "/v1/groups/o/g/members/m-1/fence");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(metrics_.Serialize().find("rsc_audit_write_failures_total 2"), std::string::npos)
      << metrics_.Serialize();
}

}  // namespace
}  // namespace rsc
