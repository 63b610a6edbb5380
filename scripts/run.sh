#!/usr/bin/env bash
# Sets up (packages), builds and starts the coordinator.
#   scripts/run.sh                      live demo: coordinator with its embedded local
#                                       redis-server in the background, `rsc demo` in front
#   scripts/run.sh --cluster            the same demo on a local 3-master Redis Cluster
#                                       (ports RSC_CLUSTER_PORT.. +2, default 7411), so the
#                                       shards live on different nodes
#   scripts/run.sh redis://host:6379    only the coordinator, against that Redis
# Extra arguments after the URL go to rsc-coordinator (see rsc-coordinator --help).
# Ctrl-C stops the demo, then the coordinator (which stops its redis-server) and the
# cluster's nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh default >/dev/null
if [ $# -gt 0 ] && [[ "$1" == redis://* || "$1" == rediss://* ]]; then
  url="$1"
  shift
  exec ./build/src/server/rsc-coordinator --listen "${RSC_LISTEN:-127.0.0.1:7400}" \
    --redis "$url" "$@"
fi

cluster=""
if [ "${1:-}" = "--cluster" ]; then
  cluster=1
  shift
fi
port="${RSC_PORT:-7400}"
state=.state
log="$state/coordinator.log"
mkdir -p "$state"
: >"$log"
coord_pid=""
demo_pid=""
node_pids=()
# $1: tenths of a second the demo gets to finish on its own (a Ctrl-C reached it too).
cleanup() {
  trap - INT TERM EXIT
  if [ -n "$demo_pid" ]; then
    for _ in $(seq 1 "${1:-0}"); do
      kill -0 "$demo_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -TERM "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  if [ -n "$coord_pid" ] && kill -0 "$coord_pid" 2>/dev/null; then
    if [ -n "$cluster" ]; then
      echo "run.sh: stopping the coordinator (pid $coord_pid)"
    else
      echo "run.sh: stopping the coordinator (pid $coord_pid) and its redis-server"
    fi
    kill -TERM "$coord_pid" 2>/dev/null || true
    wait "$coord_pid" 2>/dev/null || true
  fi
  if [ "${#node_pids[@]}" -gt 0 ]; then
    echo "run.sh: stopping the cluster's nodes"
    kill -TERM "${node_pids[@]}" 2>/dev/null || true
    wait "${node_pids[@]}" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'cleanup 100; exit 0' INT
trap 'cleanup; exit 0' TERM

wait_healthy() {
  for _ in $(seq 1 150); do # 15 s
    if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port/healthz"; then return 0; fi
    if ! kill -0 "$coord_pid" 2>/dev/null; then
      echo "run.sh: the coordinator exited; its log:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "run.sh: the coordinator was not healthy within 15 s; its log:" >&2
  tail -n 20 "$log" >&2
  exit 1
}

if [ -n "$cluster" ]; then
  # Three fresh masters (no replicas), created the way an operator would, then the
  # coordinator and the demo named by a seed list of all three (docs/cluster.md).
  base="${RSC_CLUSTER_PORT:-7411}"
  nodes=()
  rm -rf "$state/cluster"
  for i in 0 1 2; do
    p=$((base + i))
    dir="$PWD/$state/cluster/$p"
    mkdir -p "$dir"
    setsid redis-server --port "$p" --bind 127.0.0.1 --dir "$dir" --cluster-enabled yes \
      --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 2000 --save "" \
      --appendonly no --logfile "$dir/redis.log" &
    node_pids+=($!)
    nodes+=("127.0.0.1:$p")
  done
  for n in "${nodes[@]}"; do
    for _ in $(seq 1 100); do
      redis-cli -p "${n##*:}" ping >/dev/null 2>&1 && break
      sleep 0.1
    done
    redis-cli -p "${n##*:}" ping >/dev/null 2>&1 ||
      { echo "run.sh: redis-server on $n did not start (port in use? see $state/cluster)" >&2; exit 1; }
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$state/cluster/create.log" 2>&1 ||
    { echo "run.sh: redis-cli --cluster create failed:" >&2; tail -n 20 "$state/cluster/create.log" >&2; exit 1; }
  for _ in $(seq 1 200); do
    ok=1
    for n in "${nodes[@]}"; do
      redis-cli -p "${n##*:}" cluster info | grep -q cluster_state:ok || ok=""
    done
    [ -n "$ok" ] && break
    sleep 0.1
  done
  redis_url="redis://$(IFS=,; echo "${nodes[*]}")"
  setsid ./build/src/server/rsc-coordinator --listen "127.0.0.1:$port" --redis "$redis_url" \
    "$@" >>"$log" 2>&1 &
  coord_pid=$!
  echo "run.sh: 3-master Redis Cluster at $redis_url; coordinator pid $coord_pid on 127.0.0.1:$port, log $log"
  wait_healthy
  echo "run.sh: coordinator healthy; starting the demo (Ctrl-C stops)"
  # Once the demo's shards exist: where they live.
  (
    sleep 6
    echo "run.sh: keys per master (the demo's shard streams and the group's metadata):"
    redis-cli --cluster info "${nodes[0]}" 2>/dev/null | grep -- '->' | sed 's/^/run.sh:   /'
  ) &
else
  # setsid: its own process group, so a terminal's Ctrl-C reaches only the demo; the
  # coordinator is stopped afterwards by cleanup().
  setsid ./build/src/server/rsc-coordinator --listen "127.0.0.1:$port" --state-dir "$state" \
    "$@" >>"$log" 2>&1 &
  coord_pid=$!
  echo "run.sh: coordinator pid $coord_pid on 127.0.0.1:$port, log $log"
  wait_healthy
  redis_url=""
  for _ in $(seq 1 150); do # 15 s
    redis_url=$(sed -n 's/.*event=embedded_redis_ready redis=\([^ ]*\).*/\1/p' "$log" | tail -n1)
    [ -n "$redis_url" ] && break
    sleep 0.1
  done
  if [ -z "$redis_url" ]; then
    echo "run.sh: no embedded Redis in the coordinator's log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  echo "run.sh: coordinator healthy, embedded Redis at $redis_url; starting the demo (Ctrl-C stops)"
fi

./build/src/cli/rsc demo --coordinator "127.0.0.1:$port" --redis "$redis_url" &
demo_pid=$!
rc=0
wait "$demo_pid" || rc=$?
demo_pid=""
exit "$rc"
