#!/usr/bin/env bash
# bench/run.sh: every benchmark of issue 14 in one private network namespace, and ONE table:
# figure, ours, the baseline measured in the same run, ratio, goal, met. The same rows (and
# every benchmark's own JSON) go to a JSON file whose path is printed at the end.
#
#   bench/run.sh [--quick] [--build DIR] [--out FILE] [--kills N] [--scaleouts N]
#                [--rss-connections N] [--rss-groups N] [--rss-members N]
#                [--hb-seconds S] [--messages K] [--repeat R] [--growth-pairs N]
#                [--reshard-backlogs LIST]
#
# --quick: smaller sizes everywhere (under 2 minutes instead of about 6): 5 kills, 1 scale-out,
#          1,000 connections and 10 groups × 1,000 members for the RSS, 2 s per heartbeat
#          row, 20,000 messages once per e2e cell, 50,000 redis-benchmark requests, 2
#          growth pairs, reshards with backlogs 0 and 10,000 (0, 10,000, 100,000 otherwise);
#          the stream tick keeps its 64 and 4,096 shards (a few seconds).
# --growth-pairs N: each cost-growth row is the median over N runs of its pair (5 by
#          default): one pair of 4-second rows moved by 2-3x from run to run here.
# The other flags override one size each (after --quick, whatever the order).
#
# Needs the benchmarks built: cmake --build build --target rsc-coordinator heartbeat_bench
# e2e_throughput rebalance_timing coordinator_rss reshard_timing stream_tick_cost. Machines are
# noisy: read the ratios (ours against a baseline measured in the same run), not the absolute
# figures.
# Run it under `nice -n 19` on a shared machine. See docs/performance.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
out=""
quick=0
kills="" scaleouts="" rss_connections="" rss_groups="" rss_members=""
hb_seconds="" messages="" repeat="" growth_pairs="" reshard_backlogs=""
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --kills) kills=$2; shift ;;
    --scaleouts) scaleouts=$2; shift ;;
    --rss-connections) rss_connections=$2; shift ;;
    --rss-groups) rss_groups=$2; shift ;;
    --rss-members) rss_members=$2; shift ;;
    --hb-seconds) hb_seconds=$2; shift ;;
    --messages) messages=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --growth-pairs) growth_pairs=$2; shift ;;
    --reshard-backlogs) reshard_backlogs=$2; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# Everything below runs inside one private network namespace (ENGINEERING §3: the host
# loopback is throttled). netns.sh runs us directly when it cannot make one, and says so.
if [ "${RSC_BENCH_INNER:-}" != 1 ]; then
  export RSC_BENCH_INNER=1
  exec "$root/scripts/netns.sh" "$0" "${args[@]}"
fi
network="private network namespace"
[ "${RSC_IN_NETNS:-}" = 1 ] || network="HOST LOOPBACK (throttled: figures are not meaningful)"

if [ "$quick" = 1 ]; then
  : "${kills:=5}" "${scaleouts:=1}" "${rss_connections:=1000}" "${rss_groups:=10}"
  : "${rss_members:=1000}" "${hb_seconds:=2}" "${messages:=20000}" "${repeat:=1}"
  : "${growth_pairs:=2}" "${reshard_backlogs:=0,10000}"
  eval_requests=50000
else
  : "${kills:=20}" "${scaleouts:=3}" "${rss_connections:=10000}" "${rss_groups:=100}"
  : "${rss_members:=1000}" "${hb_seconds:=4}" "${messages:=50000}" "${repeat:=3}"
  : "${growth_pairs:=5}" "${reshard_backlogs:=0,10000,100000}"
  eval_requests=150000
fi

for tool in jq redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is not installed" >&2; exit 1; }
done
for b in heartbeat_bench e2e_throughput rebalance_timing coordinator_rss reshard_timing \
  stream_tick_cost; do
  [ -x "$build/bench/$b" ] || {
    echo "run.sh: $build/bench/$b is missing; build it: cmake --build $build --target $b" >&2
    exit 1
  }
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
[ -n "$out" ] || out="$build/bench-results/bench-$stamp.json"
mkdir -p "$(dirname "$out")"
logs="${out%.json}.logs"
mkdir -p "$logs"
started=$(date +%s)
load_before=$(cut -d' ' -f1 /proc/loadavg)

# Runs one benchmark: its table and progress go to $logs/<name>.txt, its JSON to
# $logs/<name>.json.
run() {
  local name=$1
  shift
  echo "== $name: $*" >&2
  if ! "$@" >"$logs/$name.txt" 2>&1; then
    echo "run.sh: $name failed; its output ($logs/$name.txt):" >&2
    tail -20 "$logs/$name.txt" >&2
    exit 1
  fi
}

# ── Baseline: the raw Redis work of one heartbeat (issue 14's exact command) ──
# A redis-server of its own on a port of its own; the namespace is private, so a fixed port
# is free (on the host fallback, a random high one).
port=16379
[ "${RSC_IN_NETNS:-}" = 1 ] || port=$((20000 + RANDOM % 20000))
redis_dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$redis_dir" \
  --daemonize no >"$logs/redis-baseline.log" 2>&1 &
redis_pid=$!
cleanup() {
  kill "$redis_pid" 2>/dev/null || true
  rm -rf "$redis_dir"
}
trap cleanup EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p "$port" HSET g revision 7 >/dev/null
script="local r=redis.call('HGET',KEYS[1],'revision') if r==ARGV[1] then redis.call('ZADD',KEYS[2],ARGV[2],ARGV[3]) return 1 end return 0"
echo "== redis-benchmark EVAL baseline (-c 8 -n $eval_requests)" >&2
redis-benchmark -p "$port" -c 8 -n "$eval_requests" --csv EVAL "$script" 2 g live 7 12345 member-1 \
  >"$logs/redis-benchmark.csv"
kill "$redis_pid"
wait "$redis_pid" 2>/dev/null || true
# CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
# "p99_latency_ms","max_latency_ms"
tail -1 "$logs/redis-benchmark.csv" | tr -d '"' | awk -F, '{
  printf "{\"rps\":%s,\"p50_ms\":%s,\"p99_ms\":%s}\n", $(NF-6), $(NF-3), $(NF-1) }' \
  >"$logs/redis-benchmark.json"

# ── Ours ──
bin="$build/bench"
run heartbeat "$bin/heartbeat_bench" --members 1000 --seconds "$hb_seconds" --connections 8 \
  --json "$logs/heartbeat.json"
# The growth rows alternate: pair i of members, pair i of shards, ... ; each file holds
# every run's JSON, and the table takes the median of the per-pair ratios.
for i in $(seq 1 "$growth_pairs"); do
  run "growth-members-$i" "$bin/heartbeat_bench" --members 10,1000 --shards 64 \
    --seconds "$hb_seconds" --connections 8 --json "$logs/growth-members-$i.json"
  run "growth-shards-$i" "$bin/heartbeat_bench" --members 100 --shards 64,4096 \
    --seconds "$hb_seconds" --connections 8 --json "$logs/growth-shards-$i.json"
done
for g in members shards; do
  jq -s . $(seq -f "$logs/growth-$g-%g.json" 1 "$growth_pairs") >"$logs/growth-$g.json"
done
run e2e "$bin/e2e_throughput" --consumers 1,4 --shards 16 --messages "$messages" \
  --repeat "$repeat" --json "$logs/e2e.json"
run rebalance "$bin/rebalance_timing" --kills "$kills" --scaleouts "$scaleouts" \
  --json "$logs/rebalance.json"
run rss "$bin/coordinator_rss" --connections "$rss_connections" --groups "$rss_groups" \
  --members "$rss_members" --json "$logs/rss.json"
run reshard "$bin/reshard_timing" --backlogs "$reshard_backlogs" --json "$logs/reshard.json"
run stream-tick "$bin/stream_tick_cost" --shards 64,4096 --json "$logs/stream-tick.json"

# ── One table ──
jq -n \
  --slurpfile eval "$logs/redis-benchmark.json" \
  --slurpfile hb "$logs/heartbeat.json" \
  --slurpfile gm "$logs/growth-members.json" \
  --slurpfile gs "$logs/growth-shards.json" \
  --slurpfile e2e "$logs/e2e.json" \
  --slurpfile rb "$logs/rebalance.json" \
  --slurpfile rss "$logs/rss.json" \
  --slurpfile rs "$logs/reshard.json" \
  --slurpfile st "$logs/stream-tick.json" '
  def ratio(a; b): if b == 0 then null else a / b end;
  def row(figure; unit; ours; base; r; goal; met):
    {figure: figure, unit: unit, ours: ours, baseline: base, ratio: r, goal: goal, met: met};
  def cost(rows; m; s): (rows[] | select(.members == m and .shards == s) | .us_per_heartbeat);
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
              else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  # runs: every run of one growth pair; the medians of ours, the baseline and the ratios.
  def growth(runs; m1; s1; m0; s0):
    [runs[] | {a: cost(.rows; m1; s1), b: cost(.rows; m0; s0)} | .r = ratio(.a; .b)] |
    {a: (map(.a) | median), b: (map(.b) | median), r: (map(.r) | median), n: length};
  ($eval[0]) as $ev | ($hb[0].rows[0]) as $h | ($rb[0]) as $r | ($rss[0]) as $m |
  [
    (ratio($h.heartbeats_per_s; $ev.rps)) as $x |
    row("heartbeats/s, \($h.members) members, 8 connections (baseline: raw EVAL, redis-benchmark -c 8)";
        "1/s"; $h.heartbeats_per_s; $ev.rps; $x; ">= 0.5"; $x >= 0.5),
    (ratio($h.p99_us; $ev.p99_ms * 1000)) as $x |
    row("heartbeat p99, \($h.members) members (baseline: raw EVAL p99)";
        "us"; $h.p99_us; ($ev.p99_ms * 1000); $x; "<= 3"; $x <= 3),
    row("Redis round trips per steady heartbeat (baseline: the one EVAL)";
        "calls"; $h.redis_round_trips_per_hb; 1; $h.redis_round_trips_per_hb; "<= 1";
        $h.redis_round_trips_per_hb <= 1),
    ($e2e[0].rows[] |
      row("end to end, \(.consumers) consumer(s) x \(.shards) shards (baseline: raw XADD + XREADGROUP/XACK bound)";
          "msg/s"; .live_e2e; .raw_bound; .live_ratio; ">= 0.9"; .live_ratio >= 0.9)),
    growth($gm[0]; 1000; 64; 10; 64) as $g |
    row("cost per heartbeat, 1,000 members (baseline: 10 members), 64 shards, median of \($g.n) pairs";
        "us/hb"; $g.a; $g.b; $g.r; "<= 2"; $g.r <= 2),
    growth($gs[0]; 100; 4096; 100; 64) as $g |
    row("cost per heartbeat, 4,096 shards (baseline: 64 shards), 100 members, median of \($g.n) pairs";
        "us/hb"; $g.a; $g.b; $g.r; "<= 2"; $g.r <= 2),
    (if $r.failover then
      ($r.failover) as $f |
      (row("kill -9 -> shards read elsewhere, median of \($f.n) (baseline: memberLeaseMs \($f.member_lease_ms) + heartbeatIntervalMs \($f.heartbeat_interval_ms))";
           "ms"; $f.median_ms; $f.bound_ms; ratio($f.median_ms; $f.bound_ms); "<= 1";
           ratio($f.median_ms; $f.bound_ms) <= 1),
       row("kill -9 -> shards read elsewhere, max of \($f.n) (min \($f.min_ms | round), p90 \($f.p90_ms | round))";
           "ms"; $f.max_ms; $f.bound_ms; ratio($f.max_ms; $f.bound_ms); "<= 1";
           ratio($f.max_ms; $f.bound_ms) <= 1))
     else empty end),
    (if $r.scaleout then
      ($r.scaleout) as $s |
      row("scale-out \($s.from) -> \($s.to) consumers, \($s.shards) shards -> balanced, median of \($s.n) (baseline: heartbeatIntervalMs)";
          "ms"; $s.median_ms; $s.heartbeat_interval_ms; ratio($s.median_ms; $s.heartbeat_interval_ms);
          "none set"; null)
     else empty end),
    (([$r.failover.overlap_pairs, $r.scaleout.overlap_pairs] | map(. // 0) | add) as $o |
     row("overlap: pairs of consumers reading one shard at once (kills and scale-outs)";
         "pairs"; $o; 0; null; "= 0"; $o == 0)),
    row("coordinator peak RSS, \($m.connections) idle connections + \($m.groups) groups x \($m.members) members (baseline: RSS after start)";
        "MB"; $m.hwm_mb; $m.rss_start_mb; ratio($m.hwm_mb; $m.rss_start_mb); "<= 200 MB";
        $m.hwm_mb <= 200),
    ($rs[0]) as $x |
    ($x.runs[] |
      ([(.unread_at_request / (if .steady_delivered_per_s > 0 then .steady_delivered_per_s else 1 end) * 1000), (.routing_wait_ms // 0)] | max) as $drain |
      row("reshard \($x.from) -> \($x.to) shards, \(.unread_at_request) unread: request -> every child read (baseline: the routing-lease wait, \(.routing_wait_ms // 0) ms, or draining them at the steady rate, the longer)";
          "ms"; .children_read_ms; $drain; ratio(.children_read_ms; $drain); "none set"; null),
      row("reshard with \(.unread_at_request) unread: publish rate during it (baseline: steady, one producer)";
          "msg/s"; .during_publish_per_s; .steady_publish_per_s;
          ratio(.during_publish_per_s; .steady_publish_per_s); "none set"; null)),
    ([$x.runs[].publish_failures] | add) as $f |
    row("publish failures seen by the producer during \($x.runs | length) reshards (RS2: seals retried inside the library)";
        "publishes"; $f; 0; null; "= 0"; $f == 0),
    ($st[0][] |
      row("stream tick of one stream, \(.shards) shards, with the RS6 read of every shard (baseline: the tick of its group)";
          "ms"; .stream_tick_ms; .group_tick_ms; ratio(.stream_tick_ms; .group_tick_ms); "<= 2";
          ratio(.stream_tick_ms; .group_tick_ms) <= 2)),
    # Judged at the largest count only: at 64 shards the whole read is a fraction of a ms.
    ($st[0] | max_by(.shards) |
      row("RS6 read, \(.shards) shards (baseline: the same XINFO STREAM commands sent raw)";
          "ms"; .rs6_read_ms; .xinfo_floor_ms; ratio(.rs6_read_ms; .xinfo_floor_ms); "<= 1.5";
          ratio(.rs6_read_ms; .xinfo_floor_ms) <= 1.5))
  ]' >"$logs/rows.json"

elapsed=$(($(date +%s) - started))
jq -n --slurpfile rows "$logs/rows.json" \
  --arg stamp "$stamp" --arg network "$network" --arg load "$load_before" \
  --arg load_after "$(cut -d' ' -f1 /proc/loadavg)" --arg cpus "$(nproc)" \
  --arg quick "$quick" --arg elapsed "$elapsed" --arg logs "$logs" \
  --slurpfile eval "$logs/redis-benchmark.json" --slurpfile hb "$logs/heartbeat.json" \
  --slurpfile gm "$logs/growth-members.json" --slurpfile gs "$logs/growth-shards.json" \
  --slurpfile e2e "$logs/e2e.json" --slurpfile rb "$logs/rebalance.json" \
  --slurpfile rss "$logs/rss.json" --slurpfile rs "$logs/reshard.json" \
  --slurpfile st "$logs/stream-tick.json" \
  '{when: $stamp, network: $network, cpus: ($cpus | tonumber), quick: ($quick == "1"),
    load_average_before: $load, load_average_after: $load_after,
    seconds: ($elapsed | tonumber), logs: $logs, rows: $rows[0],
    raw: {redis_benchmark_eval: $eval[0], heartbeat: $hb[0], growth_members: $gm[0],
          growth_shards: $gs[0], e2e: $e2e[0], rebalance: $rb[0], rss: $rss[0],
          reshard: $rs[0], stream_tick: $st[0]}}' >"$out"

echo
echo "issue 14 benchmarks: $(nproc) CPUs, $network, load average $load_before before," \
  "$(cut -d' ' -f1 /proc/loadavg) after, ${elapsed} s$([ "$quick" = 1 ] && echo ", --quick")"
echo
echo "| figure | unit | ours | baseline | ratio | goal | met? |"
echo "|---|---|---|---|---|---|---|"
jq -r '.rows[] |
  def num: if . == null then "-" elif (. | fabs) >= 100 then (. | round | tostring)
           else ((. * 100 | round) / 100 | tostring) end;
  "| \(.figure) | \(.unit) | \(.ours | num) | \(.baseline | num) | \(.ratio | num) | \(.goal) | \(
     if .met == null then "-" elif .met then "yes" else "NO" end) |"' "$out"
# What would make a row mean less than it says: failed heartbeats, unfinished e2e phases,
# members the RSS run could not keep alive within their lease.
jq -r '.raw as $r |
  (([$r.heartbeat] + $r.growth_members + $r.growth_shards)[] | .rows[] | select(.errors > 0) |
    "note: heartbeat_bench \(.members) members x \(.shards) shards: \(.errors) failed heartbeats"),
  ($r.e2e.rows[] | select(.note != "") | "note: e2e \(.consumers) x \(.shards):\(.note)"),
  ($r.rss.rounds | to_entries[] | select(.value.failed > 0) |
    "note: coordinator_rss round \(.key + 1): \(.value.failed) heartbeats refused (members expired or rejoining; round took \(.value.seconds | round) s)"),
  ($r.rss | select(.descriptors < .connections) |
    "note: coordinator_rss: the coordinator held \(.descriptors) descriptors, fewer than the \(.connections) idle connections")' "$out"
echo
echo "JSON: $out"
echo "each benchmark's own output: $logs/"
