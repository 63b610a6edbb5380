#!/usr/bin/env bash
# Configures and builds. Usage: scripts/build.sh [preset] [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
shift || true
dir=build
[ "$preset" != default ] && dir="build-$preset"
if [ ! -f "$dir/build.ninja" ]; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build "$dir" -- "$@"
