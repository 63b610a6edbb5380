#pragma once
// The Redis wire form of the readers' commands and how their replies read: shared by the
// production port (reader_node.h) and the simulator, which runs the same node logic
// (node_core.h) over its simulated Redis.

#include <optional>
#include <string>
#include <vector>

#include "client/reader_core.h"
#include "redis/reply.h"

namespace rsc::client {

// The Redis wire form of a single reader command (kReadLive: the one-stream blocking form;
// a node combines live reads itself).
std::vector<std::string> ReaderCommandArgs(const ReaderCoreConfig& config,
                                           const ReaderCommand& command);
// A reply to `command` as the core reads it: an error reply is kError with its text; a nil
// reply to a read is kNil; a reply of the wrong shape is kError ("... unexpected reply").
// Only command.kind is used. Strings are moved out of `reply`.
ReaderReply ParseReaderReply(const ReaderCommand& command, redis::Reply& reply);

namespace wire {

// A reply of the wrong shape to `cmd`, said as an error.
ReaderReply Unexpected(const ReaderCommand& cmd, const redis::Reply& r);
// [[id, [f, v, ...] | nil], ...]: a nil field list is an entry trimmed from the stream while
// it was pending. The strings are moved out of the reply.
std::vector<ReaderEntry> ParseEntries(redis::Reply& entries);
// [stream, [entries]]: one stream of an XREADGROUP reply.
bool IsStreamReply(const redis::Reply& s);
// MOVED or ASK.
bool IsRedirect(const redis::Reply& reply);
// A cluster's redirection where the port took the server for a single one, said plainly.
std::optional<std::string> ClusterRefusal(const redis::Reply& reply);
ReaderReply Nil();

}  // namespace wire
}  // namespace rsc::client
