#include "client/reader_wire.h"

#include <fmt/format.h>

#include <utility>

namespace rsc::client {

using redis::Reply;

namespace {

// Dead-letter and XACK in one step, so a message is never both lost (XACK without the
// dead letter) nor dead-lettered twice by a retry after a partial failure. An error in
// XADD aborts the script before the XACK. Both keys share the shard's hash tag.
constexpr const char* kDeadLetterScript =
    "local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))\n"
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
    "return id\n";

}  // namespace

namespace wire {

ReaderReply Unexpected(const ReaderCommand& cmd, const Reply& r) {
  return ReaderReply::Error(
      ReaderReply::Kind::kError,
      fmt::format("{}: unexpected reply {}", ReaderCommandName(cmd.kind), r.DebugString()));
}

// [[id, [f, v, ...] | nil], ...]: a nil field list is an entry trimmed from the stream while
// it was pending. The strings are moved out of the reply (entries carry the payloads).
std::vector<ReaderEntry> ParseEntries(Reply& entries) {
  std::vector<ReaderEntry> out;
  out.reserve(entries.elements.size());
  for (Reply& e : entries.elements) {
    if (!e.IsArray() || e.elements.size() < 2) continue;
    ReaderEntry entry;
    entry.id = std::move(e.elements[0].str);
    Reply& f = e.elements[1];
    if (!f.IsArray()) {
      entry.deleted = true;
    } else {
      entry.fields.reserve(f.elements.size() / 2);
      for (size_t j = 0; j + 1 < f.elements.size(); j += 2) {
        entry.fields.emplace_back(std::move(f.elements[j].str), std::move(f.elements[j + 1].str));
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// [stream, [entries]]: one stream of an XREADGROUP reply.
bool IsStreamReply(const Reply& s) {
  return s.IsArray() && s.elements.size() >= 2 && s.elements[0].IsString() &&
         s.elements[1].IsArray();
}

bool IsRedirect(const Reply& reply) { return reply.ErrorIs("MOVED") || reply.ErrorIs("ASK"); }

// A cluster's redirection where the port took the server for a single one: said plainly, since
// "MOVED 1234 10.0.0.2:6379" alone reads like a bug. The cluster detection (INFO cluster) was
// refused or answered by a proxy.
std::optional<std::string> ClusterRefusal(const Reply& reply) {
  if (!IsRedirect(reply) && !reply.ErrorIs("CROSSSLOT")) return std::nullopt;
  return fmt::format(
      "the server answered as a Redis Cluster node ({}) but was taken for a single server: "
      "the cluster detection (INFO) was refused; grant the user +info",
      reply.str);
}

ReaderReply Nil() {
  ReaderReply r;
  r.kind = ReaderReply::Kind::kNil;
  return r;
}

}  // namespace wire

using wire::ClusterRefusal;
using wire::IsStreamReply;
using wire::ParseEntries;
using wire::Unexpected;

namespace {

// [[stream, [[id, [f, v, ...] | nil], ...]]] (RESP2; a map under RESP3, never used here).
ReaderReply ParseRead(const ReaderCommand& cmd, Reply& r) {
  ReaderReply out;
  if (r.IsNil()) {  // BLOCK timed out
    out.kind = ReaderReply::Kind::kNil;
    return out;
  }
  if (!r.IsArray() || r.elements.empty() || !IsStreamReply(r.elements[0])) {
    return Unexpected(cmd, r);
  }
  out.entries = ParseEntries(r.elements[0].elements[1]);
  return out;
}

// A reply to `cmd` that is not an error reply, as the core reads it.
ReaderReply Parse(const ReaderCommand& cmd, Reply& r) {
  ReaderReply out;
  switch (cmd.kind) {
    case ReaderCommandKind::kCreateGroup:
    case ReaderCommandKind::kDeadLetter:
      return out;
    case ReaderCommandKind::kAutoClaim:
      if (!r.IsArray() || r.elements.size() < 2 || !r.elements[0].IsString() ||
          !r.elements[1].IsArray()) {
        return Unexpected(cmd, r);
      }
      out.cursor = std::move(r.elements[0].str);
      out.count = static_cast<int64_t>(r.elements[1].elements.size());
      return out;
    case ReaderCommandKind::kPendingPage:
    case ReaderCommandKind::kCheckForeign:
      if (!r.IsArray()) return Unexpected(cmd, r);
      for (Reply& e : r.elements) {
        if (!e.IsArray() || e.elements.size() < 2) continue;
        out.ids.push_back(std::move(e.elements[0].str));
        if (!out.lowest_owner) {
          out.lowest_owner = e.elements[1].str;
          out.lowest_id = out.ids.back();
        }
      }
      return out;
    case ReaderCommandKind::kClaim:
      if (!r.IsArray()) return Unexpected(cmd, r);
      out.count = static_cast<int64_t>(r.elements.size());
      return out;
    case ReaderCommandKind::kReadPending:
    case ReaderCommandKind::kReadLive:
      return ParseRead(cmd, r);
    case ReaderCommandKind::kAck:
      if (!r.IsInteger()) return Unexpected(cmd, r);
      out.count = r.integer;
      return out;
  }
  return out;
}

}  // namespace

std::vector<std::string> ReaderCommandArgs(const ReaderCoreConfig& c, const ReaderCommand& cmd) {
  const std::string count = std::to_string(cmd.count);
  switch (cmd.kind) {
    case ReaderCommandKind::kCreateGroup:
      if (!c.create_key) return {"XGROUP", "CREATE", c.stream, c.group, "0"};
      return {"XGROUP", "CREATE", c.stream, c.group, "0", "MKSTREAM"};
    case ReaderCommandKind::kAutoClaim:
      return {"XAUTOCLAIM", c.stream, c.group, c.consumer_name, "0",
              cmd.cursor,   "COUNT",  count,   "JUSTID"};
    case ReaderCommandKind::kPendingPage:
      return {"XPENDING", c.stream, c.group, cmd.cursor, "+", count};
    case ReaderCommandKind::kClaim: {
      std::vector<std::string> args{"XCLAIM", c.stream, c.group, c.consumer_name, "0"};
      args.insert(args.end(), cmd.ids.begin(), cmd.ids.end());
      args.emplace_back("JUSTID");
      return args;
    }
    case ReaderCommandKind::kReadPending:
      return {"XREADGROUP", "GROUP",   c.group,  c.consumer_name, "COUNT",
              count,        "STREAMS", c.stream, cmd.cursor};
    case ReaderCommandKind::kReadLive:
      return {"XREADGROUP", "GROUP",  c.group, c.consumer_name,
              "COUNT",      count,    "BLOCK", std::to_string(cmd.block_ms),
              "STREAMS",    c.stream, ">"};
    case ReaderCommandKind::kCheckForeign:
      return {"XPENDING", c.stream, c.group, "-", "+", "1"};
    case ReaderCommandKind::kAck: {
      std::vector<std::string> args{"XACK", c.stream, c.group};
      args.insert(args.end(), cmd.ids.begin(), cmd.ids.end());
      return args;
    }
    case ReaderCommandKind::kDeadLetter: {
      std::vector<std::string> args{"EVAL",  kDeadLetterScript, "2", c.stream, c.dead_letter_stream,
                                    c.group, cmd.entry->id};
      for (const auto& [f, v] : cmd.entry->fields) args.insert(args.end(), {f, v});
      args.insert(args.end(),
                  {"rsc-source-stream", c.stream, "rsc-source-id", cmd.entry->id, "rsc-group",
                   c.group, "rsc-error", cmd.error, "rsc-attempts", std::to_string(cmd.attempts)});
      return args;
    }
  }
  return {};
}

ReaderReply ParseReaderReply(const ReaderCommand& command, Reply& reply) {
  if (std::optional<std::string> hint = ClusterRefusal(reply)) {
    return ReaderReply::Error(ReaderReply::Kind::kError,
                              fmt::format("{}: {}", ReaderCommandName(command.kind), *hint));
  }
  if (reply.IsError()) return ReaderReply::Error(ReaderReply::Kind::kError, std::move(reply.str));
  return Parse(command, reply);
}

}  // namespace rsc::client
