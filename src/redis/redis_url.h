#pragma once
// Parsing of Redis connection URLs (SPEC S4):
//   redis://[user[:password]@]host[:port][/db]
//   redis://:password@host[:port][/db]        (password only: legacy AUTH <password>)
//   redis://[user[:password]@]host[:port],host[:port],...[/db]
//                                             (seed nodes of a Redis Cluster: the first that
//                                              answers is asked; same credentials for all)
// Host may be a name, an IPv4 address or a bracketed IPv6 address ("[::1]").
// User and password may be percent-encoded (e.g. a '@' or ':' in a password as %40/%3A).
// `rediss://` (TLS) and unix sockets are refused with a message saying so: hiredis 0.14 is
// built without TLS here, and refusing is clearer than silently connecting in plain text.
//
// Thread safety: pure functions.

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rsc::redis {

struct RedisUrl {
  struct Node {
    std::string host;
    int port = 6379;
  };
  std::string host;  // the first node
  int port = 6379;
  std::vector<Node> more_nodes;  // the other seed nodes, in order
  std::string user;              // empty: no ACL user (AUTH <password> or no AUTH at all)
  std::string password;          // empty: no AUTH
  int db = 0;

  // The URL back, with the password replaced by "***" (safe for logs).
  std::string Redacted() const;
  // "host:port" of the first node (IPv6 hosts bracketed).
  std::string Address() const;
};

// Errors: INVALID_REQUEST with a message naming what is wrong and quoting the URL with
// any password redacted.
Result<RedisUrl> ParseRedisUrl(std::string_view url);

}  // namespace rsc::redis
