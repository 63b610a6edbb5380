// SPEC RS6 in the pure core: a layout found behind its streams. Every seal names the
// generation after it (`rsc-next`, EncodeSuccessor); from one of them DecideLayoutBehind
// writes that generation back as PREPARING, or says why it cannot (the caller fails the
// stream's routing closed).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/key_slot.h"
#include "core/layout.h"
#include "core/layout_codec.h"

namespace rsc {
namespace {

const SlotPlacement kOneServer{};

SlotPlacement Masters(int n) {
  SlotPlacement m(static_cast<size_t>(n));
  for (int s = 0; s < kClusterSlots; ++s)
    m[static_cast<size_t>(s * n / kClusterSlots)].push_back(s);
  return m;
}

Layout Stream(int32_t n, const SlotPlacement& placement = kOneServer) {
  Layout l = DeriveGeneration0("orders", n, GroupConfig{}, {}, placement, "t0").value();
  l.groups = {"billing"};
  return l;
}

// The layout after a reshard to `n` shards was prepared (the seals are written from it).
Layout Prepared(const Layout& l, int32_t n, const SlotPlacement& placement = kOneServer) {
  return DecideReshard(l, n, placement, "t-prep").value();
}

// The ends of the ACTIVE generation's keys, each sealed (or not) with `successor`.
std::vector<StreamTop> Tops(const Layout& l, const std::vector<bool>& sealed,
                            const std::string& successor) {
  std::vector<StreamTop> out;
  const Generation* active = l.Active();
  for (size_t i = 0; i < active->shards.size(); ++i) {
    StreamTop t{true, 3, false, -1, ""};
    if (i < sealed.size() && sealed[i]) {
      t = StreamTop{true, 4, true, active->generation, successor};
    }
    out.push_back(t);
  }
  return out;
}

TEST(Successor, RoundTripsOnOneServerAndOnAClusterAndRefusesOtherForms) {
  for (const SlotPlacement& placement : {kOneServer, Masters(3), Masters(5)}) {
    const Layout prepared = Prepared(Stream(4, placement), 16, placement);
    const Generation& next = prepared.generations.back();
    std::optional<std::string> text = EncodeSuccessor("orders", next);
    ASSERT_TRUE(text.has_value()) << placement.size() << " masters";
    Result<Generation> back = DecodeSuccessor("orders", *text);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, next) << *text;
    EXPECT_LT(text->size(), 64u) << "one line, whatever the shard count: " << *text;
  }
  EXPECT_EQ(*EncodeSuccessor("orders", Prepared(Stream(4), 2).generations.back()),
            "1 jump-xxh64 4 2 -");
  // Keys that do not follow the layout's own form are not described (nothing to roll to).
  Generation odd = Prepared(Stream(4), 2).generations.back();
  odd.shards[1].stream = "{orders:5.x}";  // a tag on one shard only
  EXPECT_FALSE(EncodeSuccessor("orders", odd).has_value());
  odd = Prepared(Stream(4), 2).generations.back();
  odd.shards[1].id = 7;  // not consecutive
  odd.shards[1].stream = "{orders:7}";
  EXPECT_FALSE(EncodeSuccessor("orders", odd).has_value());

  // Decoding is strict: anything else is METADATA_UNREADABLE naming the fault.
  for (const char* bad :
       {"", "1 jump-xxh64 4 2", "1 jump-xxh64 4 2 - extra", "0 jump-xxh64 4 2 -",
        "1 jump-xxh64 4 0 -", "1 jump-xxh64 4 4097 -", "1  4 2 -", "1 jump-xxh64 -4 2 -",
        "1 jump-xxh64 2147483647 2 -", "1 jump-xxh64 4 2 A", "1 jump-xxh64 4 2 1,,2",
        "1 jump-xxh64 4 2 16384", "1 jump-xxh64 4 2 -1", "1 jump-xxh64 4 2 1,",
        "x jump-xxh64 4 2 -", "1 jump-xxh64 4 2 -\n"}) {
    Result<Generation> g = DecodeSuccessor("orders", bad);
    ASSERT_FALSE(g.ok()) << "'" << bad << "' decoded";
    EXPECT_EQ(g.error().code, ErrorCode::kMetadataUnreadable);
  }
}

RC_GTEST_PROP(Successor, EveryPreparedGenerationRoundTrips, ()) {
  const int masters = *rc::gen::inRange(0, 7);
  const SlotPlacement placement = masters == 0 ? kOneServer : Masters(masters);
  // Small counts: decoding a cluster key searches its tag (about 16,384 CRC16s per shard).
  const int32_t from = *rc::gen::inRange(1, 16);
  const int32_t to = *rc::gen::inRange(1, 48);
  const Generation next = Prepared(Stream(from, placement), to, placement).generations.back();
  std::optional<std::string> text = EncodeSuccessor("orders", next);
  RC_ASSERT(text.has_value());
  Result<Generation> back = DecodeSuccessor("orders", *text);
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == next);
}

TEST(LayoutBehind, InStepNothingHappens) {
  const Layout l = Stream(4);
  const StreamTop missing{};
  BehindDecision d = DecideLayoutBehind(l, Tops(l, {}, ""), missing, "t");
  EXPECT_FALSE(d.roll_forward.has_value());
  EXPECT_FALSE(d.behind.has_value());
  // The key after the highest id exists but is empty (a prepared reshard whose layout write
  // was lost on a cluster: its consumer groups were created, nothing was written): in step.
  d = DecideLayoutBehind(l, Tops(l, {}, ""), StreamTop{true, 0, false, -1, ""}, "t");
  EXPECT_FALSE(d.roll_forward.has_value());
  EXPECT_FALSE(d.behind.has_value());
  // A PREPARING generation: the reshard is under way (its seals are expected), not behind.
  const Layout prepared = Prepared(l, 8);
  const std::string next = *EncodeSuccessor("orders", prepared.generations.back());
  d = DecideLayoutBehind(prepared, Tops(prepared, {true, true, true, true}, next), missing, "t");
  EXPECT_FALSE(d.roll_forward.has_value());
  EXPECT_FALSE(d.behind.has_value());
}

TEST(LayoutBehind, ASealNamingTheNextGenerationRollsTheLayoutForwardToPreparing) {
  const Layout l = Stream(4);
  const Layout prepared = Prepared(l, 8);
  const std::string next = *EncodeSuccessor("orders", prepared.generations.back());
  // All sealed, or only some (the rollback came while the seals were being written): either
  // way the generation comes back PREPARING, and seal-and-activate finishes it (RS2).
  for (const std::vector<bool>& sealed :
       {std::vector<bool>{true, true, true, true}, std::vector<bool>{false, true, false, false}}) {
    BehindDecision d = DecideLayoutBehind(l, Tops(l, sealed, next), StreamTop{}, "t-fwd");
    ASSERT_TRUE(d.roll_forward.has_value()) << (d.behind ? *d.behind : "");
    EXPECT_FALSE(d.behind.has_value());
    EXPECT_EQ(d.roll_forward->generations, prepared.generations);
    EXPECT_EQ(d.roll_forward->version, l.version + 1);
    EXPECT_EQ(d.roll_forward->lineage, "t-fwd");
    EXPECT_TRUE(CheckLayoutInvariants(*d.roll_forward).ok());
  }
  // Seals written before `rsc-next` existed name nothing; one that does is enough.
  std::vector<StreamTop> mixed = Tops(l, {true, true, true, true}, "");
  mixed[2].successor = next;
  BehindDecision d = DecideLayoutBehind(l, mixed, StreamTop{}, "t-fwd");
  ASSERT_TRUE(d.roll_forward.has_value());
  EXPECT_EQ(d.roll_forward->generations, prepared.generations);
}

TEST(LayoutBehind, TwoReshardsLostAreRolledForwardOneAtATime) {
  const Layout l0 = Stream(4);
  const Layout p1 = Prepared(l0, 8);
  const Layout a1 = *DecideActivate(p1, "t-a1");
  const Layout p2 = Prepared(a1, 3);
  // The layout went back to l0; generation 0's seals name generation 1, generation 1's name 2.
  const std::string s1 = *EncodeSuccessor("orders", p1.generations.back());
  const std::string s2 = *EncodeSuccessor("orders", p2.generations.back());
  BehindDecision d = DecideLayoutBehind(l0, Tops(l0, {true, true, true, true}, s1), {}, "t");
  ASSERT_TRUE(d.roll_forward.has_value());
  const Layout activated = *DecideActivate(*d.roll_forward, "t");
  d = DecideLayoutBehind(activated, Tops(activated, std::vector<bool>(8, true), s2),
                         StreamTop{true, 0, false, -1, ""}, "t");
  ASSERT_TRUE(d.roll_forward.has_value()) << (d.behind ? *d.behind : "");
  EXPECT_EQ(d.roll_forward->generations, p2.generations);
}

TEST(LayoutBehind, WhatCannotBeRolledForwardFailsClosedWithTheReason) {
  const Layout l = Stream(4);
  const Layout prepared = Prepared(l, 8);
  const std::string next = *EncodeSuccessor("orders", prepared.generations.back());
  std::vector<StreamTop> other_generation = Tops(l, {true, false, false, false}, next);
  other_generation[0].seal_generation = 3;
  std::vector<StreamTop> two_successors = Tops(l, {true, true, false, false}, next);
  two_successors[1].successor = "1 jump-xxh64 4 2 -";
  std::vector<StreamTop> tombstone = Tops(l, {false, false, false, false}, "");
  tombstone[3] = StreamTop{true, 0, true, -1, ""};  // sealed, emptied: no entry, no successor
  struct Row {
    const char* name;
    std::vector<StreamTop> tops;
    StreamTop above;
    const char* says;
  } rows[] = {
      {"a seal naming nothing", Tops(l, {true, false, false, false}, ""), {}, "no seal names one"},
      {"a tombstone", tombstone, {}, "no seal names one"},
      {"entries above the highest id, nothing sealed",
       Tops(l, {}, ""),
       {true, 5, false, -1, ""},
       "holds 5 entries"},
      {"a seal of another generation", other_generation, {}, "sealed as generation 3"},
      {"two successors", two_successors, {}, "two different successors"},
      {"a successor two generations on",
       Tops(l, {true}, "2 jump-xxh64 4 8 -"),
       {},
       "does not follow"},
      {"a successor reusing ids", Tops(l, {true}, "1 jump-xxh64 3 8 -"), {}, "does not follow"},
      {"a corrupt successor", Tops(l, {true}, "1 jump-xxh64 four 8 -"), {}, "rsc-next"},
  };
  for (const Row& r : rows) {
    BehindDecision d = DecideLayoutBehind(l, r.tops, r.above, "t");
    EXPECT_FALSE(d.roll_forward.has_value()) << r.name;
    ASSERT_TRUE(d.behind.has_value()) << r.name;
    EXPECT_NE(d.behind->find(r.says), std::string::npos) << r.name << ": " << *d.behind;
    EXPECT_NE(d.behind->find("runbook 7e"), std::string::npos) << r.name << ": " << *d.behind;
  }
}

}  // namespace
}  // namespace rsc
