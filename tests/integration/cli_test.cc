// Level 2: the `rsc` admin CLI (SPEC §9, docs/cli.md) run as a process against a real
// rsc-coordinator and redis-server: every admin command end to end, the exit codes
// (1 server error, 2 usage, 3 unreachable, 4 revision conflict), the bearer token, endpoint
// failover, and `rsc produce` landing on the shard streams.
//
// The `rsc` binary is not a dependency of integration_tests (tests/CMakeLists.txt is not
// ours to change): build it with `cmake --build build --target rsc integration_tests`.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "integration/harness.h"
#include "support/fault_proxy.h"
#include "support/prometheus_text.h"
#include "support/subprocess.h"

namespace rsc::integration {
namespace {

constexpr const char* kP = "orders";
constexpr const char* kG = "billing";

std::string RscPath() { return std::string(RSC_BINARY_DIR) + "/src/cli/rsc"; }

using RscRun = rsc::testing::ProcessRun;

// Runs `rsc args...` with stdin from /dev/null (so never a terminal) and RSC_* variables
// removed from the environment unless given in `env`. Bounded by `deadline`: the process is
// killed and the test fails when it does not finish.
RscRun RunRsc(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
              std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
  if (::access(RscPath().c_str(), X_OK) != 0) {
    ADD_FAILURE() << RscPath() << " is missing: cmake --build build --target rsc";
    return RscRun{};
  }
  std::vector<std::string> argv_s = {RscPath()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s = rsc::testing::EnvironmentWithout(
      {"RSC_COORDINATOR", "RSC_ADMIN_TOKEN", "RSC_MONITOR_TOKEN", "RSC_MEMBER_TOKEN"});
  env_s.insert(env_s.end(), env.begin(), env.end());
  RscRun run = rsc::testing::RunProcess(argv_s, deadline, env_s);
  if (!run.error.empty()) ADD_FAILURE() << "rsc: " << run.error;
  if (run.timed_out) ADD_FAILURE() << "rsc did not finish within " << deadline.count() << " ms";
  return run;
}

json::value ParseJson(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  return ec ? json::value() : v;
}

// A loopback port nothing listens on: bound once by the kernel's choice, then released.
int DeadPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    coord_ = std::make_unique<CoordinatorProcess>(CoordOpts(redis_));
    ASSERT_TRUE(coord_->Start());
    dir_ = coord_->Dir();
  }
  void TearDown() override {
    if (HasFailure() && coord_) std::cerr << "coordinator log:" << coord_->LogTail(40) << "\n";
  }

  std::string Url(int port) const { return "http://127.0.0.1:" + std::to_string(port); }
  // rsc against this test's coordinator.
  RscRun Rsc(std::vector<std::string> args) {
    args.insert(args.begin(), {"--coordinator", Url(coord_->Port())});
    return RunRsc(args);
  }
  json::value DescribeJson() {
    RscRun r = Rsc({"--json", "describe", kP, kG});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return ParseJson(r.out);
  }

  RedisProcess redis_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::string dir_;
};

TEST_F(CliTest, AdminLifecycleCreateListDescribeStreamReshardConfigFenceExportDeleteRestore) {
  // A short routing lease: a reshard seals one routing lease (+ 1 s) after it begins.
  RscRun r = Rsc({"create", kP, kG, "--shards", "4", "--member-lease-ms", "12000",
                  "--routing-lease-ms", "500", "--routing-refresh-ms", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("created group orders/billing"), std::string::npos) << r.Describe();

  r = Rsc({"create", kP, kG, "--shards", "4"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("GROUP_EXISTS"), std::string::npos) << r.Describe();

  r = Rsc({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("STREAM"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("orders  billing"), std::string::npos) << r.Describe();

  // A member, so the members table has a row.
  HttpClient http(coord_->Port());
  Consumer a("a-1");
  ASSERT_EQ(Beat(http, a, kP, kG).status, 200);

  r = Rsc({"describe", kP, kG});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* needle :
       {"orders/billing", "revision:", "lineage:", "assignment epoch:", "correction round:  none",
        "MEMBER", "a-1", "SHARD  GEN  STREAM KEY  STATE     OWNER  TARGET  LAG  PENDING",
        "0      0    {orders:0}  ASSIGNED  a-1            0    0", "{orders:3}"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.Describe();
  }
  EXPECT_TRUE(r.err.empty()) << r.Describe();

  // --json: only the server's JSON on stdout.
  json::value view = DescribeJson();
  ASSERT_TRUE(view.is_object()) << "not JSON";
  EXPECT_GE(JsonInt(view, "revision"), 1);
  EXPECT_EQ(JsonInt(view, "shardCount"), 4);
  EXPECT_EQ(JsonInt(view.at("config"), "memberLeaseMs"), 12000);

  // A second group of the stream takes the stream's shard count (SPEC D3); `rsc stream`
  // shows the shared layout.
  r = Rsc({"create", kP, "audit", "--routing-lease-ms", "500", "--routing-refresh-ms", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("shard count:       4"), std::string::npos) << r.Describe();
  r = Rsc({"create", kP, "other", "--shards", "3"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("LAYOUT_MISMATCH"), std::string::npos) << r.Describe();
  r = Rsc({"stream", kP});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* needle : {"stream:", "groups:", "audit, billing", "GENERATION  STATE",
                             "0           ACTIVE  4       0-3  {orders:0} … {orders:3}"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.Describe();
  }
  r = Rsc({"--json", "stream", kP});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out).at("groups").as_array().size(), 2u) << r.Describe();
  r = Rsc({"stream", "nothing"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("STREAM_NOT_FOUND"), std::string::npos) << r.Describe();
  // The stream's routing lease (PATCH /v1/streams/{P}, D4): changed, refused, bad usage.
  r = Rsc({"stream", kP, "--routing-lease-ms", "60000", "--routing-refresh-ms", "6000"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("updated the routing of stream orders"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("routingLeaseMs=60000 routingRefreshMs=6000"), std::string::npos)
      << r.Describe();
  r = Rsc({"stream", kP, "--routing-refresh-ms", "60000"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("routingRefreshMs (60000) must be below"), std::string::npos)
      << r.Describe();
  r = Rsc({"stream", kP, "--routing-lease-ms", "70000", "--expected-revision", "999"});
  EXPECT_EQ(r.exit_code, 4) << r.Describe();
  EXPECT_NE(r.err.find("REVISION_CONFLICT"), std::string::npos) << r.Describe();
  EXPECT_EQ(Rsc({"stream", kP, "--expected-revision", "1"}).exit_code, 2)
      << "--expected-revision alone changes nothing: usage error";
  EXPECT_EQ(JsonInt(ParseJson(Rsc({"--json", "stream", kP}).out), "routingLeaseMs"), 60000);
  // Short again: a reshard seals its parents one routing lease (plus 1 s) after it begins.
  ASSERT_EQ(
      Rsc({"stream", kP, "--routing-lease-ms", "500", "--routing-refresh-ms", "200"}).exit_code, 0);

  // reshard is per stream (SPEC RS1). A live member without `layout-v2` (a-1 so far) holds
  // it back (D5); the old group form is a usage error.
  r = Rsc({"reshard", kP, "--shards", "8", "--no-wait"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("CLIENTS_TOO_OLD"), std::string::npos) << r.Describe();
  r = Rsc({"reshard", kP, kG, "--shards", "8"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  a.features = {"layout-v2", "shard-lease"};
  ASSERT_EQ(Beat(http, a, kP, kG).status, 200);
  // An explicit, stale revision: no retry, exit 4.
  r = Rsc({"reshard", kP, "--shards", "8", "--expected-layout-revision", "999999"});
  EXPECT_EQ(r.exit_code, 4) << r.Describe();
  EXPECT_NE(r.err.find("REVISION_CONFLICT"), std::string::npos) << r.Describe();
  // The revision read by rsc itself; --no-wait returns once the generation is recorded.
  r = Rsc({"reshard", kP, "--shards", "8", "--no-wait"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("resharding orders to 8 shards: generation 1"), std::string::npos)
      << r.Describe();
  // Run again (say after a lost reply): the stream already has 8 shards, nothing is sent.
  const int64_t layout_revision = JsonInt(ParseJson(Rsc({"--json", "stream", kP}).out), "revision");
  r = Rsc({"reshard", kP, "--shards", "8", "--no-wait"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("orders already has 8 shards in generation 1: nothing sent"),
            std::string::npos)
      << r.Describe();
  EXPECT_EQ(JsonInt(ParseJson(Rsc({"--json", "stream", kP}).out), "revision"), layout_revision);
  // The stream tick seals generation 0 and activates 1; the groups adopt it.
  EXPECT_TRUE(WaitFor([&] { return JsonInt(DescribeJson(), "shardCount") == 8; }, 15s,
                      "billing adopts generation 1 (8 shards)"));
  r = Rsc({"describe", kP, kG});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* needle : {"GENERATION  SHARDS  COMPLETED  STATE", "0           0-3     -",
                             "1           4-11    -          waiting for 0-3"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.Describe();
  }

  r = Rsc({"config", kP, kG, "--heartbeat-interval-ms", "900"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  view = DescribeJson();
  EXPECT_EQ(JsonInt(view.at("config"), "heartbeatIntervalMs"), 900);
  EXPECT_EQ(JsonInt(view.at("config"), "memberLeaseMs"), 12000) << "partial patch kept the rest";

  r = Rsc({"fence", kP, kG, "nobody"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("UNKNOWN_MEMBER_ID"), std::string::npos) << r.Describe();
  r = Rsc({"fence", kP, kG, "a-1"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("fenced"), std::string::npos) << r.Describe();

  const std::string file = dir_ + "/billing.export.json";
  r = Rsc({"export", kP, kG, "-o", file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::ifstream in(file);
  const std::string exported((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(JsonStr(ParseJson(exported), "kind"), "rsc-group-export") << exported;

  // In a script (stdin is /dev/null) delete needs --yes.
  r = Rsc({"delete", kP, kG});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("--yes"), std::string::npos) << r.Describe();
  r = Rsc({"delete", kP, kG, "--yes"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();

  r = Rsc({"describe", kP, kG});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("GROUP_NOT_FOUND: group orders:billing does not exist"), std::string::npos)
      << r.Describe();

  r = Rsc({"restore", file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("restored orders/billing"), std::string::npos) << r.Describe();
  view = DescribeJson();
  EXPECT_EQ(JsonInt(view, "shardCount"), 8);
  EXPECT_EQ(JsonInt(view.at("config"), "heartbeatIntervalMs"), 900);
}

TEST_F(CliTest, AdminTokenIsRequiredAndSentAsBearer) {
  CoordinatorOptions options = CoordOpts(redis_);
  options.admin_token = "s3cret-token";
  CoordinatorProcess secured(options);
  ASSERT_TRUE(secured.Start());
  const std::string url = Url(secured.Port());

  RscRun r = RunRsc({"--coordinator", url, "list"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("UNAUTHORIZED"), std::string::npos) << r.Describe();

  r = RunRsc({"--coordinator", url, "--admin-token", "wrong", "list"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("UNAUTHORIZED"), std::string::npos) << r.Describe();

  r = RunRsc(
      {"--coordinator", url, "--admin-token", "s3cret-token", "create", kP, kG, "--shards", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  // The environment variables work as the flags do.
  r = RunRsc({"--json", "list"}, {"RSC_COORDINATOR=" + url, "RSC_ADMIN_TOKEN=s3cret-token"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("\"billing\""), std::string::npos) << r.Describe();
  // Two requests on one keep-alive connection (read, then reshard) both carry the token.
  r = RunRsc({"--coordinator", url, "--admin-token", "s3cret-token", "reshard", kP, "--shards", "3",
              "--no-wait"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

// SPEC O4 through the CLI: a monitor token reads and gets a clear FORBIDDEN on changes; the
// clients of produce and consume send the member token (the Producer and Consumer
// runtimes' coordinator_token), or the admin token when no member token is given.
TEST_F(CliTest, MonitorTokenReadsMemberTokenProducesAndConsumes) {
  CoordinatorOptions options = CoordOpts(redis_);
  options.admin_token = "admin-token-0123456789";
  options.extra_args = {"--monitor-token", "monitor-token-0123456789", "--member-token",
                        "member-token-0123456789"};
  CoordinatorProcess secured(options);
  ASSERT_TRUE(secured.Start());
  const std::string url = Url(secured.Port());
  const std::vector<std::string> admin = {"--coordinator", url, "--admin-token",
                                          "admin-token-0123456789"};
  auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  ASSERT_EQ(RunRsc(with(admin, {"create", kP, kG, "--shards", "2"})).exit_code, 0);

  RscRun r = RunRsc({"--coordinator", url, "list"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("UNAUTHORIZED"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("rsc sent no token"), std::string::npos) << r.Describe();

  // The monitor token from the environment reads...
  const std::vector<std::string> monitor_env = {"RSC_COORDINATOR=" + url,
                                                "RSC_MONITOR_TOKEN=monitor-token-0123456789"};
  r = RunRsc({"--json", "describe", kP, kG}, monitor_env);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(JsonInt(ParseJson(r.out), "shardCount"), 2) << r.Describe();
  EXPECT_EQ(RunRsc({"list"}, monitor_env).exit_code, 0);
  EXPECT_EQ(RunRsc({"stream", kP}, monitor_env).exit_code, 0);
  // ... and is refused every change, with a hint, changing nothing.
  for (const std::vector<std::string>& change :
       std::vector<std::vector<std::string>>{{"create", kP, "other", "--shards", "2"},
                                             {"config", kP, kG, "--heartbeat-interval-ms", "900"},
                                             {"delete", kP, kG, "--yes"},
                                             {"reshard", kP, "--shards", "3", "--no-wait"},
                                             {"stream", kP, "--routing-lease-ms", "40000"},
                                             {"export", kP, kG}}) {
    r = RunRsc(change, monitor_env);
    EXPECT_EQ(r.exit_code, 1) << change[0] << ": " << r.Describe();
    EXPECT_NE(r.err.find("FORBIDDEN"), std::string::npos) << change[0] << ": " << r.Describe();
    EXPECT_NE(r.err.find("--monitor-token"), std::string::npos) << r.Describe();
    EXPECT_EQ(r.err.find("monitor-token-0123456789"), std::string::npos) << r.Describe();
  }
  r = RunRsc(with(admin, {"--json", "describe", kP, kG}));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(JsonInt(ParseJson(r.out), "revision"), 1) << "a refused change wrote";

  // produce: the member token; a wrong one fails (the routing refresh gets 401); without a
  // member token the admin token is sent.
  r = RunRsc({"--coordinator", url, "--member-token", "member-token-0123456789", "produce", kP, kG,
              "--redis", redis_.Url(), "--value", "m", "--count", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  r = RunRsc({"--coordinator", url, "--timeout-ms", "1500", "--member-token", "wrong-token-0000",
              "produce", kP, kG, "--redis", redis_.Url(), "--value", "x"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("UNAUTHORIZED"), std::string::npos) << r.Describe();
  r = RunRsc(with(admin, {"produce", kP, kG, "--redis", redis_.Url(), "--value", "a"}));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  // consume with the member token from the environment gets all four messages.
  r = RunRsc(
      {"--json", "consume", kP, kG, "--redis", redis_.Url(), "--max", "4", "--seconds", "30"},
      {"RSC_COORDINATOR=" + url, "RSC_MEMBER_TOKEN=member-token-0123456789"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.Describe();
}

// A reshard whose reply is lost (the proxy resets the connection once the coordinator
// answers) is judged from a fresh read of the stream: applied, so rsc reports success and
// sends nothing more — no second generation.
TEST_F(CliTest, AReshardWhoseReplyIsLostIsRecognisedAsApplied) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "2"}).exit_code, 0);
  const int64_t before = JsonInt(ParseJson(Rsc({"--json", "stream", kP}).out), "revision");
  rsc::testing::FaultProxy lossy(coord_->Port(), 1);
  rsc::testing::ProxyFaults faults;
  faults.reset_replies = true;
  faults.reset_replies_to = "POST ";  // the reads before and after it get through
  lossy.SetFaults(faults);
  RscRun r =
      RunRsc({"--coordinator", Url(lossy.port()) + "," + Url(coord_->Port()), "reshard", kP,
              "--shards", "3", "--expected-layout-revision", std::to_string(before), "--no-wait"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.err.find("reply was lost; the stream shows it applied"), std::string::npos)
      << r.Describe();
  EXPECT_GE(lossy.counters().resets, 1) << "the reply was not lost";
  const json::value stream = ParseJson(Rsc({"--json", "stream", kP}).out);
  ASSERT_EQ(stream.at("generations").as_array().size(), 2u) << JsonString(stream);
  EXPECT_EQ(stream.at("generations").as_array()[1].at("shards").as_array().size(), 3u)
      << JsonString(stream);
}

// A reshard to the count the stream already has, whose revision was overtaken: the
// coordinator refuses it (REVISION_CONFLICT) and that reply is lost. The stream then shows a
// later revision and the requested count — but no new generation: not applied, and rsc must
// not report it done.
TEST_F(CliTest, AReshardWhoseLostReplyWasARefusalIsNotTakenForApplied) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "2"}).exit_code, 0);
  const int64_t before = JsonInt(ParseJson(Rsc({"--json", "stream", kP}).out), "revision");
  ASSERT_EQ(Rsc({"stream", kP, "--routing-lease-ms", "40000"}).exit_code, 0);
  ASSERT_GT(JsonInt(ParseJson(Rsc({"--json", "stream", kP}).out), "revision"), before)
      << "the layout revision did not move";
  rsc::testing::FaultProxy lossy(coord_->Port(), 1);
  rsc::testing::ProxyFaults faults;
  faults.reset_replies = true;
  faults.reset_replies_to = "POST ";
  lossy.SetFaults(faults);
  RscRun r = RunRsc({"--coordinator", Url(lossy.port()), "reshard", kP, "--shards", "2",
                     "--expected-layout-revision", std::to_string(before), "--no-wait"});
  EXPECT_EQ(r.exit_code, 4) << r.Describe();
  EXPECT_NE(r.err.find("not applied"), std::string::npos) << r.Describe();
  EXPECT_EQ(r.err.find("shows it applied"), std::string::npos) << r.Describe();
  EXPECT_GE(lossy.counters().resets, 1) << "the reply was not lost";
  const json::value stream = ParseJson(Rsc({"--json", "stream", kP}).out);
  EXPECT_EQ(stream.at("generations").as_array().size(), 1u) << JsonString(stream);
}

TEST_F(CliTest, UnreachableCoordinatorExits3AndTheNextEndpointIsTried) {
  const std::string dead = Url(DeadPort());
  RscRun r = RunRsc({"--coordinator", dead, "--timeout-ms", "2000", "list"});
  EXPECT_EQ(r.exit_code, 3) << r.Describe();
  EXPECT_NE(r.err.find("unreachable"), std::string::npos) << r.Describe();
  EXPECT_TRUE(r.out.empty()) << r.Describe();

  r = RunRsc(
      {"--coordinator", dead + "," + Url(coord_->Port()), "create", kP, kG, "--shards", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

// A backup that did not all arrive is not a success: stdout on a full device exits 2.
TEST_F(CliTest, ExportToAStdoutThatCannotBeWrittenExits2) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "2"}).exit_code, 0);
  RscRun r = rsc::testing::RunProcess({"/bin/sh", "-c",
                                       RscPath() + " --coordinator " + Url(coord_->Port()) +
                                           " export " + kP + " " + kG + " > /dev/full"},
                                      std::chrono::seconds(30),
                                      rsc::testing::EnvironmentWithout({"RSC_COORDINATOR"}));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.Describe();
}

// restore refuses, locally with exit 2, what cannot be a document: nothing is sent.
TEST_F(CliTest, RestoreOfAnEmptyFileOrADirectoryExits2WithoutSending) {
  char tmpl[] = "/tmp/rsc-restore-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/empty.json").flush();
  for (const std::string& file : {dir + "/empty.json", dir, dir + "/missing.json"}) {
    RscRun r = Rsc({"restore", file});
    EXPECT_EQ(r.exit_code, 2) << file << "\n" << r.Describe();
  }
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(ParseJson(Rsc({"--json", "list"}).out).at("groups").as_array().empty())
      << "nothing was restored";
}

// A consume that could not leave (here: no coordinator ever answered) is not a clean leave:
// exit 3 with the reason, after the consumer's shutdown timeout (15 s).
TEST_F(CliTest, ConsumeWhoseLeaveIsNotConfirmedExits3) {
  RscRun r = RunRsc({"--coordinator", Url(DeadPort()), "--timeout-ms", "500", "consume", kP, kG,
                     "--redis", redis_.Url(), "--seconds", "1"});
  EXPECT_EQ(r.exit_code, 3) << r.Describe();
  EXPECT_NE(r.err.find("the leave was not confirmed"), std::string::npos) << r.Describe();
  EXPECT_EQ(r.err.find("cleanly"), std::string::npos) << r.Describe();
}

TEST_F(CliTest, RetryableRefusalOnEveryEndpointExits5) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "1"}).exit_code, 0);
  redis_.Kill();
  // Every endpoint either refuses with 503 REDIS_UNAVAILABLE or is unreachable.
  RscRun r = RunRsc({"--coordinator", Url(coord_->Port()) + "," + Url(DeadPort()), "--timeout-ms",
                     "5000", "describe", kP, kG});
  EXPECT_EQ(r.exit_code, 5) << r.Describe();
  EXPECT_NE(r.err.find("REDIS_UNAVAILABLE"), std::string::npos) << r.Describe();
}

TEST_F(CliTest, ProduceSpreadsMessagesOverTheShardStreams) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "4"}).exit_code, 0);
  RscRun r = Rsc(
      {"--json", "produce", kP, kG, "--redis", redis_.Url(), "--value", "hello", "--count", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  json::value summary = ParseJson(r.out);
  EXPECT_EQ(JsonInt(summary, "published"), 10) << r.Describe();
  EXPECT_EQ(JsonInt(summary, "failed"), 0) << r.Describe();

  std::unique_ptr<RedisCli> cli = redis_.Cli();
  ASSERT_NE(cli, nullptr);
  int64_t total = 0;
  int non_empty = 0;
  const json::value view = DescribeJson();  // kept alive: the loop borrows from it
  ASSERT_TRUE(view.is_object());
  for (const json::value& shard : view.at("shards").as_array()) {
    const int64_t n = cli->Run({"XLEN", JsonStr(shard, "stream")}).integer;
    total += n;
    non_empty += n > 0 ? 1 : 0;
  }
  EXPECT_EQ(total, 10);
  EXPECT_GE(non_empty, 2) << "keys 0..9 should not all hash to one shard";

  // Without a group: routed by the stream (D4), to the same shards.
  r = Rsc({"--json", "produce", kP, "--redis", redis_.Url(), "--value", "again", "--count", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(JsonInt(ParseJson(r.out), "published"), 6) << r.Describe();
  EXPECT_FALSE(ParseJson(r.out).as_object().contains("group")) << r.Describe();
  r = Rsc({"produce", kP, "--redis", redis_.Url(), "--value", "again"});
  EXPECT_NE(r.out.find("published 1 of 1 messages to orders\n"), std::string::npos) << r.Describe();
  int64_t after = 0;
  for (const json::value& shard : view.at("shards").as_array()) {
    after += cli->Run({"XLEN", JsonStr(shard, "stream")}).integer;
  }
  EXPECT_EQ(after, 17);

  // A group that does not exist: the coordinator answered, so exit 1.
  r = Rsc(
      {"--timeout-ms", "1500", "produce", kP, "missing", "--redis", redis_.Url(), "--value", "x"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("GROUP_NOT_FOUND"), std::string::npos) << r.Describe();
  r = Rsc({"--timeout-ms", "1500", "produce", "nostream", "--redis", redis_.Url(), "--value", "x"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("STREAM_NOT_FOUND"), std::string::npos) << r.Describe();
}

TEST_F(CliTest, ConsumeReceivesWhatProduceSentAndLeavesCleanly) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "4"}).exit_code, 0);
  RscRun p = Rsc({"produce", kP, kG, "--redis", redis_.Url(), "--value", "v", "--count", "10"});
  ASSERT_EQ(p.exit_code, 0) << p.Describe();
  RscRun c =
      Rsc({"--json", "consume", kP, kG, "--redis", redis_.Url(), "--max", "10", "--seconds", "30"});
  ASSERT_EQ(c.exit_code, 0) << c.Describe();
  int lines = 0;
  std::istringstream in(c.out);
  for (std::string line; std::getline(in, line);) {
    json::value m = ParseJson(line);
    ASSERT_TRUE(m.is_object()) << line;
    EXPECT_EQ(JsonStr(m.at("fields"), "value"), "v");
    ++lines;
  }
  EXPECT_EQ(lines, 10) << c.Describe();
  // The consumer left: the group has no members any more.
  const json::value view = DescribeJson();
  EXPECT_TRUE(view.at("members").as_array().empty()) << json::serialize(view);
}

// SPEC O2: `rsc consume --metrics-port` serves the consumer's metrics (Prometheus text) over
// HTTP while it runs, and the counts move with what it consumes.
TEST_F(CliTest, ConsumeServesItsMetricsOnMetricsPort) {
  ASSERT_EQ(Rsc({"create", kP, kG, "--shards", "4"}).exit_code, 0);
  const int port = DeadPort();  // free now: rsc binds it
  // Ends at the 6th message, after the scrapes below saw the first 5.
  auto consumer = std::async(std::launch::async, [&] {
    return Rsc({"consume", kP, kG, "--redis", redis_.Url(), "--max", "6", "--seconds", "60",
                "--metrics-port", std::to_string(port)});
  });
  HttpClient http(port, 2s);
  rsc::testing::PromExposition e;
  auto scrape = [&] {
    const HttpResult r = http.Get("/metrics");
    if (r.status != 200) return false;
    e = rsc::testing::ParsePrometheusText(r.body);
    for (const std::string& error : e.errors) ADD_FAILURE() << error << "\n" << r.body;
    return e.errors.empty();
  };
  const std::vector<std::pair<std::string, std::string>> labels = {{"stream", kP}, {"group", kG}};
  ASSERT_TRUE(
      WaitFor([&] { return scrape() && e.Value("rsc_consumer_reading_shards", labels) == 4; }, 20s,
              "rsc consume's /metrics shows its consumer reading the 4 shards"));
  EXPECT_GT(e.Value("rsc_consumer_assignment_lease_remaining_seconds", labels).value_or(0), 0);
  EXPECT_EQ(e.Value("rsc_consumer_messages_handled_total", labels), 0);
  RscRun p = Rsc({"produce", kP, kG, "--redis", redis_.Url(), "--value", "v", "--count", "5"});
  ASSERT_EQ(p.exit_code, 0) << p.Describe();
  ASSERT_TRUE(WaitFor(
      [&] {
        return scrape() && e.Value("rsc_consumer_messages_acked_total", labels) == 5 &&
               e.Value("rsc_consumer_messages_handled_total", labels) == 5;
      },
      20s, "rsc consume's /metrics counts the 5 messages handled and acknowledged"));
  p = Rsc({"produce", kP, kG, "--redis", redis_.Url(), "--value", "last", "--count", "1"});
  ASSERT_EQ(p.exit_code, 0) << p.Describe();
  ASSERT_EQ(consumer.wait_for(60s), std::future_status::ready) << "the consumer did not end";
  RscRun c = consumer.get();
  EXPECT_EQ(c.exit_code, 0) << c.Describe();
  EXPECT_NE(c.err.find("rsc: metrics on http://127.0.0.1:" + std::to_string(port) + "/metrics"),
            std::string::npos)
      << c.Describe();
}

// SPEC RS1: `rsc reshard` waits until every group with a live member reads every child
// shard and shows the progress; a group without live members is shown, never waited for; a
// live member that never reads its parents holds the wait until --wait-timeout (exit 6).
TEST_F(CliTest, ReshardWaitsForGroupsWithLiveMembersAndShowsProgress) {
  // Fast heartbeats, and a member lease long enough for a loaded machine (the consumer must
  // stay live through the wait).
  ASSERT_EQ(
      Rsc({"create", kP, kG, "--shards", "4", "--heartbeat-interval-ms", "200", "--member-lease-ms",
           "10000", "--assignment-lease-ms", "8000", "--rebalance-timeout-ms", "10000",
           "--routing-lease-ms", "1000", "--routing-refresh-ms", "300"})
          .exit_code,
      0);
  ASSERT_EQ(
      Rsc({"create", kP, "audit", "--routing-lease-ms", "1000", "--routing-refresh-ms", "300"})
          .exit_code,
      0);
  // A library consumer (it declares layout-v2) that ends after 40 messages.
  auto consumer = std::async(std::launch::async, [&] {
    return Rsc(
        {"--json", "consume", kP, kG, "--redis", redis_.Url(), "--max", "40", "--seconds", "60"});
  });
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value v = DescribeJson();
        return v.is_object() && !v.at("members").as_array().empty() &&
               v.at("members").as_array()[0].at("assignedShards").as_array().size() == 4;
      },
      15s, "the consumer reads the 4 shards"));
  RscRun p = Rsc({"produce", kP, kG, "--redis", redis_.Url(), "--value", "old", "--count", "20"});
  ASSERT_EQ(p.exit_code, 0) << p.Describe();

  RscRun r = RunRsc({"--coordinator", Url(coord_->Port()), "reshard", kP, "--shards", "6",
                     "--poll-ms", "100", "--wait-timeout", "60"},
                    {}, 70s);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* needle :
       {"resharding orders to 6 shards: generation 1", "generation 1 (6 shards): ACTIVE",
        "billing: parents completed 4/4, children read 6/6",
        "audit: parents completed 0/4, children read 0/6, waiting for 0-3 (no live member: "
        "not waited for)",
        "done: every group with a live member reads the 6 shards of generation 1"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.Describe();
  }
  // The children are read: what is published now reaches the consumer, which then ends.
  p = Rsc({"produce", kP, kG, "--redis", redis_.Url(), "--value", "new", "--count", "20"});
  ASSERT_EQ(p.exit_code, 0) << p.Describe();
  ASSERT_EQ(consumer.wait_for(60s), std::future_status::ready) << "the consumer did not end";
  RscRun c = consumer.get();
  EXPECT_EQ(c.exit_code, 0) << c.Describe();
  int old_seen = 0, new_seen = 0;
  std::istringstream in(c.out);
  for (std::string line; std::getline(in, line);) {
    const json::value m = ParseJson(line);
    ASSERT_TRUE(m.is_object()) << line;
    const std::string v = JsonStr(m.at("fields"), "value");
    ASSERT_TRUE(v == "old" || v == "new") << line << " (a seal entry reached the application?)";
    (v == "old" ? old_seen : new_seen)++;
  }
  EXPECT_EQ(old_seen, 20) << c.Describe();
  EXPECT_EQ(new_seen, 20) << c.Describe();

  // A live member of audit (it declares the features) that reads nothing: audit never
  // completes its parents, so the wait ends at --wait-timeout with exit 6.
  HttpClient http(coord_->Port());
  Consumer x("x-1");
  x.features = {"layout-v2", "shard-lease"};
  ASSERT_EQ(Beat(http, x, kP, "audit").status, 200);
  // (The wait first shows the routing-lease wait: 1 s + 1 s here.)
  r = Rsc({"reshard", kP, "--shards", "3", "--poll-ms", "100", "--wait-timeout", "6"});
  EXPECT_EQ(r.exit_code, 6) << r.Describe();
  EXPECT_NE(r.out.find("PREPARING (waiting out producers' routing lease: the shards of the "
                       "generation before it are sealed 2000 ms after it began)"),
            std::string::npos)
      << r.Describe();
  EXPECT_NE(r.out.find("audit: parents completed 0/10"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("still in progress after 6 s"), std::string::npos) << r.Describe();
}

TEST(CliUsageTest, UsageErrorsExit2WithoutContactingAnyone) {
  const std::string dead = "http://127.0.0.1:1";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"create", kP},                             // GROUP missing
           {"stream"},                                 // STREAM missing
           {"config", kP, kG},                         // no field to change
           {"reshard", kP, "--shards", "x"},           // not a number
           {"reshard", kP, "--shards", "0"},           // out of range
           {"reshard", kP, kG, "--shards", "2"},       // a stream is resharded, not a group
           {"--coordinator", "https://h:1", "list"},   // https is not supported
           {"--coordinator", dead, "delete", kP, kG},  // stdin is not a terminal: --yes needed
       }) {
    RscRun r = RunRsc(args);
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << "rsc " << joined << "\n" << r.Describe();
  }
  RscRun help = RunRsc({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.Describe();
  EXPECT_NE(help.out.find("Exit codes:"), std::string::npos) << help.Describe();
}

}  // namespace
}  // namespace rsc::integration
