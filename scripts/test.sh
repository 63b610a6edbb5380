#!/usr/bin/env bash
# Sets up (packages), builds and runs every test, inside a private network namespace.
# Usage: scripts/test.sh [ctest args...]   e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh default
jobs=$(nproc)
exec scripts/netns.sh ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 "$@"
