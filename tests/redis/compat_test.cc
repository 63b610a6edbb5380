// Start-up compatibility check (SPEC L4) against servers configured to be incompatible.

#include "redis/compat.h"

#include <gtest/gtest.h>

#include "redis/test_util.h"
#include "support/redis_process.h"

namespace rsc::redis::testing {
namespace {

using rsc::testing::RedisProcess;
using rsc::testing::RedisProcessOptions;

Result<CompatReport> Check(const RedisProcess& p, const std::string& user = "",
                           const std::string& password = "") {
  ConnectionOptions o;
  o.port = p.Port();
  o.user = user;
  o.password = password;
  Connection c(o);
  return CheckCompatibility(c);
}

bool Mentions(const std::vector<std::string>& list, const std::string& needle) {
  for (const auto& s : list) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(CompatTest, StockServerIsCompatibleButWarnsAboutMissingPersistence) {
  RedisProcess p;  // save "" and appendonly no
  ASSERT_TRUE(p.Start());
  auto r = Check(p);
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_TRUE(r->ok()) << FormatCompatReport(*r);
  EXPECT_EQ(r->server_version.substr(0, 2), "7.");
  EXPECT_EQ(r->redis_mode, "standalone");
  EXPECT_EQ(r->role, "master");
  EXPECT_FALSE(r->cluster_enabled);
  EXPECT_TRUE(r->has_xautoclaim);
  EXPECT_TRUE(r->fallbacks.empty());
  EXPECT_EQ(r->maxmemory_policy, "noeviction");
  EXPECT_FALSE(r->eviction_warning());
  EXPECT_TRUE(r->persistence_warning());
  EXPECT_EQ(r->rdb_save_configured, false);
  const std::string line = FormatCompatReport(*r);
  EXPECT_NE(line.find("is compatible"), std::string::npos) << line;
  EXPECT_NE(line.find("no persistence"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // The probe key is cleaned up.
  EXPECT_EQ(p.Cli()->Run({"DBSIZE"}).integer, 0);
}

TEST(CompatTest, EvictionPolicyIsWarnedAndPersistenceRecognised) {
  RedisProcessOptions opts;
  opts.save = "3600 1";
  opts.extra_args = {"--maxmemory-policy", "allkeys-lru"};
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto r = Check(p);
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_TRUE(r->ok());
  EXPECT_TRUE(r->eviction_warning());
  EXPECT_FALSE(r->persistence_warning());
  EXPECT_TRUE(Mentions(r->warnings, "allkeys-lru")) << FormatCompatReport(*r);

  RedisProcessOptions aof;
  aof.appendonly = true;
  RedisProcess q(aof);
  ASSERT_TRUE(q.Start());
  auto r2 = Check(q);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->aof_enabled);
  EXPECT_FALSE(r2->persistence_warning());
  EXPECT_TRUE(r2->warnings.empty()) << FormatCompatReport(*r2);
}

// First verify the harness really disables the command, then that the check sees it.
TEST(CompatTest, RenamedEvalshaIsDetectedAndNamed) {
  RedisProcessOptions opts;
  opts.extra_args = {"--rename-command", "EVALSHA", ""};
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto direct = p.Cli()->Run({"EVALSHA", "0000000000000000000000000000000000000000", "0"});
  ASSERT_EQ(direct.type, rsc::testing::CliReply::Type::kError);
  ASSERT_NE(direct.str.find("unknown command"), std::string::npos) << direct.ToString();

  auto r = Check(p);
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_FALSE(r->ok());
  ASSERT_EQ(r->missing_required.size(), 1u) << FormatCompatReport(*r);
  EXPECT_EQ(r->missing_required[0].rfind("EVALSHA ", 0), 0u) << r->missing_required[0];
  const std::string line = FormatCompatReport(*r);
  EXPECT_NE(line.find("NOT compatible: missing EVALSHA"), std::string::npos) << line;
  EXPECT_NE(line.find("no fallback"), std::string::npos) << line;

  // And the store, if started anyway, fails with a message naming the command.
  auto store = OpenStore(p.Url());
  auto created = store->Create(MakeMeta(GroupKey{"s", "g"}, 1), 1);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(created.error().message.find("EVALSHA"), std::string::npos) << created.error().message;
}

TEST(CompatTest, DisabledEvalAndStreamCommandsAreAllNamed) {
  RedisProcessOptions opts;
  opts.extra_args = {"--rename-command", "EVAL",       "",
                     "--rename-command", "XAUTOCLAIM", "",
                     "--rename-command", "XREADGROUP", "renamed-xreadgroup"};
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto r = Check(p);
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_FALSE(r->ok());
  EXPECT_TRUE(Mentions(r->missing_required, "EVAL (")) << FormatCompatReport(*r);
  EXPECT_TRUE(Mentions(r->missing_required, "XREADGROUP")) << FormatCompatReport(*r);
  EXPECT_FALSE(Mentions(r->missing_required, "EVALSHA"));
  EXPECT_FALSE(r->has_xautoclaim);
  EXPECT_TRUE(Mentions(r->fallbacks, "XPENDING+XCLAIM"));
}

TEST(CompatTest, AclDenialIsDetectedByTheProbe) {
  RedisProcessOptions opts;
  opts.extra_args = {"--user", "limited", "on", ">pw", "~*", "&*", "+@all", "-evalsha"};
  RedisProcess p(opts);
  ASSERT_TRUE(p.Start());
  auto r = Check(p, "limited", "pw");
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_FALSE(r->ok());
  EXPECT_TRUE(Mentions(r->missing_required, "EVALSHA (denied by ACL")) << FormatCompatReport(*r);
}

TEST(CompatTest, ReadOnlyReplicaIsNotWritable) {
  RedisProcess master;
  ASSERT_TRUE(master.Start());
  RedisProcessOptions opts;
  opts.replicaof_port = master.Port();
  RedisProcess replica(opts);
  ASSERT_TRUE(replica.Start());
  auto r = Check(replica);
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->role, "slave");
  EXPECT_TRUE(Mentions(r->missing_required, "write access")) << FormatCompatReport(*r);
}

TEST(CompatTest, UnreachableServerIsAnError) {
  RedisProcess p;
  ASSERT_TRUE(p.Start());
  const int port = p.Port();
  ASSERT_TRUE(p.Stop());
  ConnectionOptions o;
  o.port = port;
  Connection c(o);
  auto r = CheckCompatibility(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kRedisUnavailable);
}

}  // namespace
}  // namespace rsc::redis::testing
