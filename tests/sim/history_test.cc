// The JSONL form of histories (sim/history.h): what real processes write and the checkers
// read. Every field survives a round trip, defaults are omitted, a line cut short by a
// SIGKILLed writer costs only that line, and no input crashes the parser.

#include "sim/history.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace rsc::sim {
namespace {

const std::vector<HistKind> kAllKinds = {
    HistKind::kAcquire,   HistKind::kLease,    HistKind::kRead,
    HistKind::kDeliver,   HistKind::kAck,      HistKind::kRelease,
    HistKind::kHeartbeat, HistKind::kPublish,  HistKind::kPublishRefused,
    HistKind::kCommit,    HistKind::kDecision, HistKind::kMutexEnter,
    HistKind::kMutexExit, HistKind::kStart,    HistKind::kStop,
    HistKind::kCrash,     HistKind::kFault,    HistKind::kLost};

auto Fields(const HistEvent& e) {
  return std::tie(e.t_us, e.kind, e.proc, e.member, e.shard, e.stream, e.id, e.key, e.seq,
                  e.attempt, e.epoch, e.version, e.lineage, e.req_version, e.req_lineage,
                  e.stored_version, e.revision, e.lease_end_us, e.sent_us, e.status, e.detail,
                  e.req_digest, e.resp_digest);
}

HistEvent EveryFieldSet() {
  HistEvent e;
  e.t_us = 1'234'567;
  e.kind = HistKind::kDecision;
  e.proc = "coordinator-1#2";
  e.member = "4f1c-member";
  e.shard = 7;
  e.stream = "{orders:7}";
  e.id = "1700000000000-3";
  e.key = "customer \"42\"\n";  // needs escaping
  e.seq = 99;
  e.attempt = 2;
  e.epoch = 3;
  e.version = 41;
  e.lineage = "lin-41";
  e.req_version = 42;
  e.req_lineage = "lin-42";
  e.stored_version = 41;
  e.revision = 17;
  e.lease_end_us = 9'000'000;
  e.sent_us = 1'000'000;
  e.status = "SYNC_METADATA";
  e.detail = "retry";
  e.req_digest = "req-abc";
  e.resp_digest = "resp-def";
  return e;
}

TEST(HistoryKinds, EveryKindHasAUniqueNameThatParsesBack) {
  EXPECT_EQ(kAllKinds.size(), 18u);
  std::vector<std::string> names;
  for (HistKind k : kAllKinds) {
    const std::string name(HistKindName(k));
    ASSERT_NE(name, "unknown");
    EXPECT_EQ(ParseHistKind(name), k) << name;
    EXPECT_EQ(std::count(names.begin(), names.end(), name), 0) << name;
    names.push_back(name);
  }
  EXPECT_EQ(HistKindName(HistKind::kPublishRefused), "publish_refused");
  EXPECT_EQ(HistKindName(HistKind::kMutexEnter), "mutex_enter");
  EXPECT_FALSE(ParseHistKind("Acquire").has_value());
  EXPECT_FALSE(ParseHistKind("").has_value());
}

TEST(HistoryJson, EveryFieldRoundTrips) {
  const HistEvent e = EveryFieldSet();
  const std::string line = ToJsonLine(e);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  const ParseOutcome out = ParseJsonLines(line + "\n");
  ASSERT_TRUE(out.errors.empty()) << out.errors.front();
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(Fields(out.events[0]), Fields(e)) << line;
}

TEST(HistoryJson, MemberNamesAreTheKeysAndDefaultsAreOmitted) {
  HistEvent e;
  e.t_us = 5;
  e.kind = HistKind::kRead;
  e.proc = "c1";
  e.shard = 3;
  EXPECT_EQ(ToJsonLine(e), R"({"t_us":5,"kind":"read","proc":"c1","shard":3})");

  HistEvent d;  // all defaults: only the time and the kind are written
  EXPECT_EQ(ToJsonLine(d), R"({"t_us":0,"kind":"fault"})");

  const std::string all = ToJsonLine(EveryFieldSet());
  for (const char* key : {"\"t_us\"",        "\"kind\":\"decision\"",
                          "\"proc\"",        "\"member\"",
                          "\"shard\"",       "\"stream\"",
                          "\"id\"",          "\"key\"",
                          "\"seq\"",         "\"attempt\"",
                          "\"epoch\"",       "\"version\"",
                          "\"lineage\"",     "\"req_version\"",
                          "\"req_lineage\"", "\"stored_version\"",
                          "\"revision\"",    "\"lease_end_us\"",
                          "\"sent_us\"",     "\"status\"",
                          "\"detail\"",      "\"req_digest\"",
                          "\"resp_digest\""}) {
    EXPECT_NE(all.find(key), std::string::npos) << key << " missing in " << all;
  }
}

TEST(HistoryJson, AbsentFieldsTakeTheDefaults) {
  const ParseOutcome out = ParseJsonLines(R"({"kind":"publish","key":"k"})");
  ASSERT_TRUE(out.errors.empty());
  ASSERT_EQ(out.events.size(), 1u);
  HistEvent expected;
  expected.kind = HistKind::kPublish;
  expected.key = "k";
  EXPECT_EQ(Fields(out.events[0]), Fields(expected));
}

TEST(HistoryJson, TruncatedLastLineIsReportedAndTheRestKept) {
  HistEvent a = EveryFieldSet();
  HistEvent b = a;
  b.t_us += 1;
  b.kind = HistKind::kCrash;
  const std::string full = ToJsonLine(a) + "\n" + ToJsonLine(b) + "\n";
  // A writer killed mid-line: the third line stops halfway, with no newline.
  const std::string third = ToJsonLine(a);
  const std::string text = full + third.substr(0, third.size() / 2);
  const ParseOutcome out = ParseJsonLines(text);
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(Fields(out.events[0]), Fields(a));
  EXPECT_EQ(Fields(out.events[1]), Fields(b));
  ASSERT_EQ(out.errors.size(), 1u);
  EXPECT_EQ(out.errors[0].rfind("line 3: truncated last line", 0), 0u) << out.errors[0];

  // A complete last line without its newline is still a good line.
  const ParseOutcome whole = ParseJsonLines(full + third);
  EXPECT_TRUE(whole.errors.empty());
  EXPECT_EQ(whole.events.size(), 3u);
}

TEST(HistoryJson, BadLinesAreNamedAndSkipped) {
  const std::string text =
      "{\"t_us\":1,\"kind\":\"start\",\"proc\":\"c1\"}\n"      // 1 good
      "not json at all\n"                                      // 2
      "[1,2,3]\n"                                              // 3 not an object
      "{\"t_us\":2,\"kind\":\"teleport\"}\n"                   // 4 unknown kind
      "{\"t_us\":\"3\",\"kind\":\"read\"}\n"                   // 5 t_us a string
      "{\"t_us\":3,\"kind\":\"read\",\"shard\":1.5}\n"         // 6 shard a double
      "{\"t_us\":3,\"kind\":\"read\",\"shard\":4294967296}\n"  // 7 shard beyond int32
      "{\"t_us\":3,\"kind\":\"read\",\"proc\":7}\n"            // 8 proc a number
      "{\"t_us\":3,\"proc\":\"c1\"}\n"                         // 9 no kind
      "\n"                                                     // 10 blank: skipped silently
      "{\"t_us\":18446744073709551615,\"kind\":\"read\"}\n"    // 11 beyond int64
      "{\"t_us\":4,\"kind\":\"read\",\"proc\":\"c1\",\"shard\":2,\"novel\":[1]}\r\n"  // 12 ok
      "{\"t_us\":5,\"kind\":\"stop\",\"proc\":\"c1\",\"seq\":null}\n";                // 13 ok
  const ParseOutcome out = ParseJsonLines(text);
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.events[0].kind, HistKind::kStart);
  EXPECT_EQ(out.events[1].kind, HistKind::kRead);
  EXPECT_EQ(out.events[1].shard, 2);
  EXPECT_EQ(out.events[2].kind, HistKind::kStop);
  EXPECT_EQ(out.events[2].seq, -1);
  const std::vector<std::string> prefixes = {
      "line 2: malformed JSON",          "line 3: not a JSON object",
      "line 4: unknown kind 'teleport'", "line 5: field 't_us' must be",
      "line 6: field 'shard' must be",   "line 7: field 'shard' must be",
      "line 8: field 'proc' must be",    "line 9: field 'kind' is missing",
      "line 11: field 't_us' must be"};
  ASSERT_EQ(out.errors.size(), prefixes.size());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    EXPECT_EQ(out.errors[i].rfind(prefixes[i], 0), 0u) << out.errors[i];
  }
}

RC_GTEST_PROP(HistoryJsonProperty, ParseNeverCrashesOnArbitraryBytes, (const std::string& text)) {
  const ParseOutcome out = ParseJsonLines(text);
  // Every non-blank line is either an event or an error, never both.
  size_t lines = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(start, nl - start);
    if (line.find_first_not_of(" \t\r") != std::string::npos) ++lines;
    start = nl + 1;
  }
  RC_ASSERT(out.events.size() + out.errors.size() == lines);
}

RC_GTEST_PROP(HistoryJsonProperty, AWriterKilledAnywhereLosesAtMostItsLastLine, ()) {
  const auto n = *rc::gen::inRange<size_t>(1, 6);
  std::vector<HistEvent> events;
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    HistEvent e = EveryFieldSet();
    e.t_us = static_cast<int64_t>(i);
    e.kind = *rc::gen::elementOf(kAllKinds);
    e.key = *rc::gen::arbitrary<std::string>();
    events.push_back(e);
    text += ToJsonLine(e) + "\n";
  }
  const auto cut = *rc::gen::inRange<size_t>(0, text.size() + 1);
  const ParseOutcome out = ParseJsonLines(std::string_view(text).substr(0, cut));
  const size_t complete = static_cast<size_t>(std::count(text.begin(), text.begin() + cut, '\n'));
  RC_ASSERT(out.events.size() >= complete);
  RC_ASSERT(out.events.size() <= complete + 1);
  RC_ASSERT(out.errors.size() <= 1u);
  for (size_t i = 0; i < out.events.size(); ++i)
    RC_ASSERT(Fields(out.events[i]) == Fields(events[i]));
}

RC_GTEST_PROP(HistoryJsonProperty, ArbitraryEventsRoundTrip, ()) {
  HistEvent e;
  e.t_us = *rc::gen::arbitrary<int64_t>();
  e.kind = *rc::gen::elementOf(kAllKinds);
  e.proc = *rc::gen::arbitrary<std::string>();
  e.member = *rc::gen::arbitrary<std::string>();
  e.shard = *rc::gen::arbitrary<int32_t>();
  e.stream = *rc::gen::arbitrary<std::string>();
  e.id = *rc::gen::arbitrary<std::string>();
  e.key = *rc::gen::arbitrary<std::string>();
  e.seq = *rc::gen::arbitrary<int64_t>();
  e.attempt = *rc::gen::arbitrary<int64_t>();
  e.epoch = *rc::gen::arbitrary<int64_t>();
  e.version = *rc::gen::arbitrary<int64_t>();
  e.lineage = *rc::gen::arbitrary<std::string>();
  e.req_version = *rc::gen::arbitrary<int64_t>();
  e.req_lineage = *rc::gen::arbitrary<std::string>();
  e.stored_version = *rc::gen::arbitrary<int64_t>();
  e.revision = *rc::gen::arbitrary<int64_t>();
  e.lease_end_us = *rc::gen::arbitrary<int64_t>();
  e.sent_us = *rc::gen::arbitrary<int64_t>();
  e.status = *rc::gen::arbitrary<std::string>();
  e.detail = *rc::gen::arbitrary<std::string>();
  e.req_digest = *rc::gen::arbitrary<std::string>();
  e.resp_digest = *rc::gen::arbitrary<std::string>();
  const std::string line = ToJsonLine(e);
  RC_ASSERT(line.find('\n') == std::string::npos);
  // Two copies: the line is self-delimiting inside a file.
  const ParseOutcome out = ParseJsonLines(line + "\n" + line);
  RC_ASSERT(out.errors.empty());
  RC_ASSERT(out.events.size() == 2u);
  RC_ASSERT(Fields(out.events[0]) == Fields(e));
  RC_ASSERT(Fields(out.events[1]) == Fields(e));
}

}  // namespace
}  // namespace rsc::sim
