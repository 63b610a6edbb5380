// stream_tick_cost: what the coordinator's tick pass costs for one stream as its shard count
// grows (issue 12). Since RS6 every stream tick reads the end of each ACTIVE shard (`XINFO
// STREAM`, pipelined per node) and of the key the next shard id would get, to find a layout
// that went back past a reshard (docs/protocol.md 7.6). This measures that read against what
// the same pass already paid before it and against Redis's own floor, in the same run:
//
//   stream tick  GroupService::StreamTick of a stream with one generation whose group
//                adopted it: one layout read, the RS6 read, and one load of the group's
//                record (is it behind the layout?): all it does when idle
//   RS6 read     StreamAdmin::Tops of the ACTIVE keys and the probe key, alone
//   group tick   GroupService::Tick of the stream's one group (expiry, fencing, rounds: one
//                load of the group's record, which has one field per shard)
//   XINFO floor  the RS6 read's commands sent raw through the same executor (pipelined
//                XINFO STREAM, replies not interpreted): what Redis and the wire cost
//   XLEN floor   one pipelined XLEN per shard the same way: the least a per-shard read costs
//
//   scripts/netns.sh build/bench/stream_tick_cost [--shards 64,1024,4096] [--reps 30]
//       [--json FILE]
//
// It starts its own redis-server (no persistence) on 127.0.0.1 and drives the product's
// GroupService, RedisStore and RedisStreamAdmin in this process (no coordinator process, no
// HTTP): run it inside scripts/netns.sh, the host loopback is throttled. Every shard holds
// one entry. Medians of `reps` passes after one warm-up pass. Not a test: exit status 1 only
// when the setting broke.

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/shard_keys.h"
#include "redis/redis_store.h"
#include "redis/redis_stream_admin.h"
#include "redis/redis_url.h"
#include "server/group_service.h"
#include "server/system.h"
#include "support/processes.h"

namespace {

namespace json = boost::json;
using rsc::bench::BenchClock;
using rsc::bench::Child;
using rsc::bench::Die;

// Median wall time of `reps` calls of `fn`, in milliseconds.
double MedianMs(int reps, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = BenchClock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(BenchClock::now() - t0).count());
  }
  return rsc::bench::Percentile(ms, 0.5);
}

struct Row {
  int shards = 0;
  double stream_tick_ms = 0, tops_ms = 0, group_tick_ms = 0, xinfo_ms = 0, xlen_ms = 0;
};

Row Measure(rsc::GroupService& service, rsc::redis::RedisStore& store,
            rsc::redis::RedisStreamAdmin& admin, int shards, int reps) {
  const std::string stream = fmt::format("tick{}", shards);
  const rsc::GroupKey key{stream, "g"};
  auto created = service.CreateGroup({stream, "g", shards, {}}, nullptr);
  if (!created.ok()) Die("create " + stream + ": " + created.error().message);
  std::vector<int32_t> ids;
  for (int s = 0; s <= shards; ++s) ids.push_back(s);
  // One server: {P:id}. The last is the key the next shard id would get (the RS6 probe).
  const std::vector<std::string> keys = rsc::ChooseShardKeys(stream, ids, {});
  std::vector<rsc::redis::KeyedCommand> xadds, xinfos, xlens;
  for (int s = 0; s < shards; ++s) {
    const std::string& k = keys[static_cast<size_t>(s)];
    xadds.push_back({k, {"XADD", k, "*", "k", "v"}});
    xlens.push_back({k, {"XLEN", k}});
  }
  for (const std::string& k : keys) xinfos.push_back({k, {"XINFO", "STREAM", k}});
  for (auto& r : store.executor().RunBatch(xadds, rsc::redis::CommandKind::kWrite)) {
    if (!r.ok() || r->IsError()) Die("XADD failed");
  }
  auto tick = [&] {
    rsc::Status s = service.StreamTick(stream);
    if (!s.ok()) Die("stream tick: " + s.error().message);
  };
  tick();  // warm-up: adopts the layout, creates the consumer groups
  Row row;
  row.shards = shards;
  row.stream_tick_ms = MedianMs(reps, tick);
  row.tops_ms = MedianMs(reps, [&] {
    for (auto& t : admin.Tops(keys)) {
      if (!t.ok()) Die("XINFO STREAM: " + t.error().message);
    }
  });
  row.group_tick_ms = MedianMs(reps, [&] {
    auto r = service.Tick(key);
    if (!r.ok()) Die("group tick: " + r.error().message);
  });
  row.xinfo_ms = MedianMs(reps, [&] {
    for (auto& r : store.executor().RunBatch(xinfos, rsc::redis::CommandKind::kRead)) {
      if (!r.ok()) Die("XINFO STREAM failed");  // the probe key answers an error: no such key
    }
  });
  row.xlen_ms = MedianMs(reps, [&] {
    for (auto& r : store.executor().RunBatch(xlens, rsc::redis::CommandKind::kRead)) {
      if (!r.ok() || r->IsError()) Die("XLEN failed");
    }
  });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  rsc::bench::SetProgramName("stream_tick_cost");
  CLI::App app{"Cost of the coordinator's stream tick (with the RS6 read) by shard count"};
  std::string shard_list = "64,1024,4096";
  int reps = 30;
  std::string json_path;
  app.add_option("--shards", shard_list, "shard counts, comma-separated");
  app.add_option("--reps", reps, "measured passes per figure (median)")->check(CLI::Range(1, 1000));
  app.add_option("--json", json_path, "also write the rows here");
  CLI11_PARSE(app, argc, argv);

  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("stream_tick_cost.{}", getpid()))
          .string();
  std::filesystem::create_directories(dir);
  Child redis;
  const int port = rsc::bench::StartRedis(redis, dir);
  auto url = rsc::redis::ParseRedisUrl(fmt::format("redis://127.0.0.1:{}", port));
  if (!url.ok()) Die(url.error().message);
  auto store = rsc::redis::RedisStore::Open(*url, {});
  if (!store.ok()) Die("open: " + store.error().message);
  rsc::redis::RedisStreamAdmin admin(store.value()->executor());
  rsc::SystemClock clock;
  rsc::RandomTokens tokens;
  rsc::ServiceObserver observer;
  rsc::GroupServiceOptions options;
  options.streams = &admin;
  rsc::GroupService service(*store.value(), clock, tokens, observer, options, nullptr);

  std::vector<Row> rows;
  for (int n : rsc::bench::ParseList(shard_list)) {
    rows.push_back(Measure(service, *store.value(), admin, n, reps));
  }
  std::printf("%7s %12s %12s %13s %12s %11s %10s %11s %13s %11s\n", "shards", "stream tick",
              "RS6 read", "group tick", "XINFO floor", "XLEN floor", "RS6/XINFO", "XINFO/XLEN",
              "stream/group", "RS6/shard");
  json::array out;
  for (const Row& r : rows) {
    std::printf("%7d %9.2f ms %9.2f ms %10.2f ms %9.2f ms %8.2f ms %10.2f %11.2f %13.2f %8.2f us\n",
                r.shards, r.stream_tick_ms, r.tops_ms, r.group_tick_ms, r.xinfo_ms, r.xlen_ms,
                r.tops_ms / r.xinfo_ms, r.xinfo_ms / r.xlen_ms, r.stream_tick_ms / r.group_tick_ms,
                1000.0 * r.tops_ms / r.shards);
    out.push_back(json::object{{"shards", r.shards},
                               {"stream_tick_ms", r.stream_tick_ms},
                               {"rs6_read_ms", r.tops_ms},
                               {"group_tick_ms", r.group_tick_ms},
                               {"xinfo_floor_ms", r.xinfo_ms},
                               {"xlen_floor_ms", r.xlen_ms}});
  }
  if (!json_path.empty()) rsc::bench::WriteJson(json_path, out);
  redis.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
