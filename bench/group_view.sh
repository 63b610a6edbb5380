#!/usr/bin/env bash
# O1's cost (issue 13): GET /v1/groups/{P}/{G} — the view with every shard's lag, pending and
# oldest pending entry read from Redis — for groups of 16, 256 and 1,024 shards, against the
# raw Redis work it needs (XINFO GROUPS + XPENDING per shard, pipelined by redis-cli --pipe
# over one connection) measured in the same run. The tick reads the same for the gauges.
#
#   bench/group_view.sh [BUILD_DIR]     (re-runs itself in a private network namespace)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${RSC_GROUP_VIEW_INNER:-}" != 1 ]]; then
  export RSC_GROUP_VIEW_INNER=1
  exec scripts/netns.sh "$0" "$@"  # netns.sh says so when it cannot make a namespace
fi
build=${1:-build}
dir=$(mktemp -d)
trap 'kill "$coord" 2>/dev/null || true; redis-cli -p 6390 shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
redis-server --port 6390 --save '' --appendonly no --dir "$dir" --daemonize yes \
  --logfile "$dir/redis.log"
for _ in $(seq 50); do redis-cli -p 6390 ping >/dev/null 2>&1 && break; sleep 0.1; done
"$build/src/server/rsc-coordinator" --redis redis://127.0.0.1:6390 --listen 127.0.0.1:7490 \
  --state-dir "$dir" >"$dir/coordinator.log" 2>&1 &
coord=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:7490/readyz >/dev/null && break; sleep 0.1; done
runs=20
ms_per_run() { # command... → milliseconds per run, over $runs runs
  local start end
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do "$@" >/dev/null; done
  end=$(date +%s%N)
  echo "scale=2; ($end - $start) / 1000000 / $runs" | bc
}
printf '%-8s %-8s %-8s %-14s %-16s %s\n' shards lag pending "view (ms)" "raw Redis (ms)" ratio
for n in 16 256 1024; do
  curl -sf -X POST http://127.0.0.1:7490/v1/groups -H 'content-type: application/json' \
    -d "{\"stream\":\"s$n\",\"group\":\"g\",\"shardCount\":$n}" >/dev/null
  # 10 entries per shard, 2 of them delivered and left pending.
  for s in $(seq 0 $((n - 1))); do
    for _ in $(seq 10); do echo "XADD {s$n:$s} * k v"; done
    echo "XREADGROUP GROUP g x COUNT 2 STREAMS {s$n:$s} >"
  done | redis-cli -p 6390 >/dev/null
  # The same commands in the Redis protocol, for redis-cli --pipe (one pipelined connection,
  # as the coordinator sends them).
  for s in $(seq 0 $((n - 1))); do
    key="{s$n:$s}"
    # shellcheck disable=SC2016 # the $ signs are the protocol's, not expansions
    printf '*3\r\n$5\r\nXINFO\r\n$6\r\nGROUPS\r\n$%d\r\n%s\r\n' "${#key}" "$key"
    # shellcheck disable=SC2016
    printf '*6\r\n$8\r\nXPENDING\r\n$%d\r\n%s\r\n$1\r\ng\r\n$1\r\n-\r\n$1\r\n+\r\n$1\r\n1\r\n' \
      "${#key}" "$key"
  done >"$dir/raw$n.resp"
  view=$(curl -sf "http://127.0.0.1:7490/v1/groups/s$n/g")
  lag=$(jq '[.shards[].lag] | add' <<<"$view")
  pending=$(jq '[.shards[].pending] | add' <<<"$view")
  ours=$(ms_per_run curl -sf "http://127.0.0.1:7490/v1/groups/s$n/g")
  raw=$(ms_per_run sh -c "redis-cli -p 6390 --pipe < $dir/raw$n.resp")
  printf '%-8s %-8s %-8s %-14s %-16s %s\n' "$n" "$lag" "$pending" "$ours" "$raw" \
    "$(echo "scale=2; $ours / $raw" | bc)"
done
