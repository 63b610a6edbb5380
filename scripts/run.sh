#!/usr/bin/env bash
# Sets up (packages), builds and starts the coordinator.
#   scripts/run.sh                      live demo: coordinator with its embedded local
#                                       redis-server in the background, `rsc demo` in front
#   scripts/run.sh redis://host:6379    only the coordinator, against that Redis
# Extra arguments after the URL go to rsc-coordinator (see rsc-coordinator --help).
# Ctrl-C stops the demo, then the coordinator (which stops its redis-server).
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

port="${RSC_PORT:-7400}"
state=.state
log="$state/coordinator.log"
mkdir -p "$state"
: >"$log"
coord_pid=""
demo_pid=""
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
    echo "run.sh: stopping the coordinator (pid $coord_pid) and its redis-server"
    kill -TERM "$coord_pid" 2>/dev/null || true
    wait "$coord_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'cleanup 100; exit 0' INT
trap 'cleanup; exit 0' TERM

# setsid: its own process group, so a terminal's Ctrl-C reaches only the demo; the
# coordinator is stopped afterwards by cleanup().
setsid ./build/src/server/rsc-coordinator --listen "127.0.0.1:$port" --state-dir "$state" \
  "$@" >>"$log" 2>&1 &
coord_pid=$!
echo "run.sh: coordinator pid $coord_pid on 127.0.0.1:$port, log $log"

redis_url=""
for _ in $(seq 1 150); do # 15 s
  redis_url=$(sed -n 's/.*event=embedded_redis_ready redis=\([^ ]*\).*/\1/p' "$log" | tail -n1)
  if [ -n "$redis_url" ] && curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port/healthz"; then
    break
  fi
  if ! kill -0 "$coord_pid" 2>/dev/null; then
    echo "run.sh: the coordinator exited; its log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  redis_url=""
  sleep 0.1
done
if [ -z "$redis_url" ]; then
  echo "run.sh: the coordinator was not healthy within 15 s; its log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
echo "run.sh: coordinator healthy, embedded Redis at $redis_url; starting the demo (Ctrl-C stops)"

./build/src/cli/rsc demo --coordinator "127.0.0.1:$port" --redis "$redis_url" &
demo_pid=$!
rc=0
wait "$demo_pid" || rc=$?
demo_pid=""
exit "$rc"
