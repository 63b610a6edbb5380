// Cost of one pure heartbeat decision (DecideHeartbeat) in steady state, by group size.
// This is the CPU the coordinator spends per heartbeat under the group's monitor, so it
// bounds one group's heartbeat rate per process. Google Benchmark; compare the sizes
// against each other (same run, same machine):
//   build/bench/decide_bench

#include <benchmark/benchmark.h>

#include <string>

#include "core/decide.h"

namespace {

struct Group {
  rsc::GroupMetadata meta;
  rsc::Liveness live;
  std::vector<rsc::HeartbeatRequest> steady;
};

Group Build(int members) {
  Group g;
  rsc::CreateGroupRequest req{"bench", "g", std::max(8, members), {}};
  rsc::TimeMs now = 1'000'000;
  int token = 0;
  g.meta = rsc::DecideCreate(req, {now, "t0"}).value();
  g.live.complete = false;
  for (int i = 0; i < members; ++i) {
    rsc::HeartbeatRequest hb;
    hb.member_id = rsc::MemberId("member-" + std::to_string(i));
    auto d = rsc::DecideHeartbeat(g.meta, g.live, hb, {now, "t" + std::to_string(++token)});
    if (d.next) g.meta = *d.next;
    for (auto& [id, dl] : d.liveness.set) g.live.deadline_ms[id] = dl;
  }
  // Settle: everyone reports REVOKED for what it must give up until no write happens.
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < members; ++i) {
      rsc::MemberId id("member-" + std::to_string(i));
      rsc::MemberShards sh = rsc::ShardsOf(g.meta, id);
      rsc::HeartbeatRequest hb;
      hb.member_id = id;
      hb.member_epoch = g.meta.FindMember(id)->epoch.value();
      hb.metadata_version = g.meta.version.value();
      hb.lineage = g.meta.lineage;
      for (int32_t s : sh.revoke) hb.revoking_shards.push_back({s, rsc::RevokeState::kRevoked});
      auto d = rsc::DecideHeartbeat(g.meta, g.live, hb, {now, "t" + std::to_string(++token)});
      if (d.next) g.meta = *d.next;
    }
  }
  for (int i = 0; i < members; ++i) {
    rsc::MemberId id("member-" + std::to_string(i));
    rsc::HeartbeatRequest hb;
    hb.member_id = id;
    hb.member_epoch = g.meta.FindMember(id)->epoch.value();
    hb.metadata_version = g.meta.version.value();
    hb.lineage = g.meta.lineage;
    hb.owned_shards = rsc::ShardsOf(g.meta, id).assigned;
    g.steady.push_back(hb);
  }
  g.live.deadline_ms.clear();  // as loaded: only due entries, none due
  return g;
}

void BM_SteadyHeartbeat(benchmark::State& state) {
  Group g = Build(static_cast<int>(state.range(0)));
  size_t i = 0;
  int64_t writes = 0;
  for (auto _ : state) {
    auto d = rsc::DecideHeartbeat(g.meta, g.live, g.steady[i], {1'000'500, "x"});
    writes += d.next ? 1 : 0;
    benchmark::DoNotOptimize(d);
    i = (i + 1) % g.steady.size();
  }
  state.counters["writes"] = static_cast<double>(writes);
}
BENCHMARK(BM_SteadyHeartbeat)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
