#!/usr/bin/env bash
# Sets up (packages), builds and starts the coordinator.
#   scripts/run.sh                      embedded local redis-server + coordinator (+ demo)
#   scripts/run.sh redis://host:6379    only the coordinator, against that Redis
# Extra arguments after the URL go to rsc-coordinator (see rsc-coordinator --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh default >/dev/null
args=()
if [ $# -gt 0 ] && [[ "$1" == redis://* || "$1" == rediss://* ]]; then
  args+=(--redis "$1")
  shift
fi
exec ./build/src/server/rsc-coordinator --listen "${RSC_LISTEN:-127.0.0.1:7400}" "${args[@]}" "$@"
