#pragma once
// RedisCli: a tiny blocking RESP client for tests and the process harness.
//
// Deliberately independent of src/redis: tests use it to inspect and tamper with what
// the adapter stored (HGET revision, TTL, DEL a key, SCRIPT FLUSH), so a bug in the
// adapter's connection code cannot hide itself behind the same bug in the checker.
//
// Thread safety: one thread at a time per RedisCli.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rsc::testing {

struct CliReply {
  enum class Type { kString, kArray, kInteger, kNil, kStatus, kError, kTransportError };
  Type type = Type::kNil;
  std::string str;
  int64_t integer = 0;
  std::vector<CliReply> elements;

  bool ok() const { return type != Type::kError && type != Type::kTransportError; }
  bool IsNil() const { return type == Type::kNil; }
  // "OK", "\"text\"", "(integer) 3", "(nil)", "(error) ...", "[a, b]"
  std::string ToString() const;
};

class RedisCli {
 public:
  // Connects to 127.0.0.1:port and authenticates (ACL user + password, or password only).
  // Returns nullptr and sets *error on failure.
  static std::unique_ptr<RedisCli> Connect(int port, const std::string& user,
                                           const std::string& password,
                                           std::chrono::milliseconds timeout, std::string* error);
  ~RedisCli();
  RedisCli(const RedisCli&) = delete;
  RedisCli& operator=(const RedisCli&) = delete;

  // Sends one command and reads one reply. Transport failures come back as
  // kTransportError (and close the socket: further calls fail the same way).
  CliReply Run(const std::vector<std::string>& args);
  // Sends a command after which the server closes the connection (SHUTDOWN); returns
  // true if the connection closed (or an error reply explains why not, in *reply).
  bool RunExpectClose(const std::vector<std::string>& args, CliReply* reply);

 private:
  explicit RedisCli(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}
  bool Send(const std::vector<std::string>& args, std::string* error);
  // Reads one complete reply; false on EOF/timeout/protocol error.
  bool ReadReply(CliReply* out, std::string* error);
  bool ReadLine(std::string* line, std::string* error);
  bool ReadExact(size_t n, std::string* out, std::string* error);
  bool Fill(std::string* error);

  int fd_;
  std::chrono::milliseconds timeout_;
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace rsc::testing
