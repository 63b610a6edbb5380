// Redis URL parsing (SPEC S4): accepted forms, AUTH in the URL, clear errors.

#include "redis/redis_url.h"

#include <gtest/gtest.h>

namespace rsc::redis {
namespace {

struct GoodCase {
  std::string url;
  std::string host;
  int port;
  std::string user;
  std::string password;
  int db;
};

TEST(RedisUrlTest, AcceptsDocumentedForms) {
  const GoodCase cases[] = {
      {"redis://localhost", "localhost", 6379, "", "", 0},
      {"redis://127.0.0.1:7000", "127.0.0.1", 7000, "", "", 0},
      {"redis://127.0.0.1:7000/3", "127.0.0.1", 7000, "", "", 3},
      {"redis://h:1/", "h", 1, "", "", 0},
      {"redis://:secret@h:6380", "h", 6380, "", "secret", 0},
      {"redis://alice:s3cret@h:6380/2", "h", 6380, "alice", "s3cret", 2},
      {"redis://alice@h", "h", 6379, "alice", "", 0},
      {"redis://[::1]:6390", "::1", 6390, "", "", 0},
      {"redis://[::1]", "::1", 6379, "", "", 0},
      {"redis://u:p%40ss%3Aword@h", "h", 6379, "u", "p@ss:word", 0},
      {"redis://u:p@ss@h:1", "h", 1, "u", "p@ss", 0},  // unescaped '@': last one splits
  };
  for (const GoodCase& c : cases) {
    SCOPED_TRACE(c.url);
    auto r = ParseRedisUrl(c.url);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->host, c.host);
    EXPECT_EQ(r->port, c.port);
    EXPECT_EQ(r->user, c.user);
    EXPECT_EQ(r->password, c.password);
    EXPECT_EQ(r->db, c.db);
  }
}

TEST(RedisUrlTest, RejectsWithMessageNamingTheProblem) {
  const std::pair<std::string, std::string> cases[] = {
      {"http://h:1", "expected redis://"},
      {"h:6379", "expected redis://"},
      {"rediss://h:1", "TLS"},
      {"unix:///tmp/redis.sock", "unix sockets"},
      {"redis://", "missing host"},
      {"redis://:6379", "missing host"},
      {"redis://h:", "empty port"},
      {"redis://h:0", "port '0'"},
      {"redis://h:70000", "port '70000'"},
      {"redis://h:12ab", "port '12ab'"},
      {"redis://h:1/x", "database 'x'"},
      {"redis://h:1/-1", "database '-1'"},
      {"redis://h:1/0?timeout=1", "query parameters"},
      {"redis://::1:6379", "brackets"},
      {"redis://[::1:6379", "unterminated"},
      {"redis://u:p%4@h", "%-escape in password"},
      {"redis://u:@h", "empty password"},
      {"redis://@h", "empty user"},
      {"redis://h1:1,", "missing host"},
      {"redis://h1:1,,h2:2", "missing host"},
      {"redis://h1:1,h2:0", "port '0'"},
      {"redis://h1:1,::1:2", "brackets"},
  };
  for (const auto& [url, needle] : cases) {
    SCOPED_TRACE(url);
    auto r = ParseRedisUrl(url);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidRequest);
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  }
}

TEST(RedisUrlTest, ErrorsAndRedactedFormNeverShowThePassword) {
  auto bad = ParseRedisUrl("redis://alice:hunter2@h:99999");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.find("hunter2"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("alice:***@"), std::string::npos) << bad.error().message;

  auto good = ParseRedisUrl("redis://alice:hunter2@h:7/1");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->Redacted(), "redis://alice:***@h:7/1");
  EXPECT_EQ(ParseRedisUrl("redis://:pw@h")->Redacted(), "redis://:***@h:6379/0");
  EXPECT_EQ(ParseRedisUrl("redis://[::1]:5")->Address(), "[::1]:5");
}

// A cluster's seed list: every node in order, one set of credentials and one database.
TEST(RedisUrlTest, ASeedListNamesEveryNodeInOrder) {
  auto r = ParseRedisUrl("redis://alice:pw@h1:7000,[::1]:7001,h3/0");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->host, "h1");
  EXPECT_EQ(r->port, 7000);
  ASSERT_EQ(r->more_nodes.size(), 2u);
  EXPECT_EQ(r->more_nodes[0].host, "::1");
  EXPECT_EQ(r->more_nodes[0].port, 7001);
  EXPECT_EQ(r->more_nodes[1].host, "h3");
  EXPECT_EQ(r->more_nodes[1].port, 6379);
  EXPECT_EQ(r->user, "alice");
  EXPECT_EQ(r->Redacted(), "redis://alice:***@h1:7000,[::1]:7001,h3:6379/0");
  EXPECT_EQ(r->Address(), "h1:7000") << "the first node";
  EXPECT_TRUE(ParseRedisUrl("redis://h:1")->more_nodes.empty());
}

}  // namespace
}  // namespace rsc::redis
