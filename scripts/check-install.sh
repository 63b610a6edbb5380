#!/usr/bin/env bash
# Installs the project into a temporary prefix and builds examples/* against it with
# find_package(rsc) (and checks pkg-config), proving the library is usable installed.
# The examples are compiled with the build's own CMAKE_CXX_FLAGS: an installed library
# built with sanitizers (presets asan, tsan) links only into programs built with them.
# A failing step prints its output.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
  if ! "$@" >"$tmp/step.log" 2>&1; then
    echo "check-install: failed: $*" >&2
    cat "$tmp/step.log" >&2
    exit 1
  fi
}
flags=$(sed -n 's/^CMAKE_CXX_FLAGS:[A-Z]*=//p' "$build/CMakeCache.txt")
run cmake --install "$build" --prefix "$tmp/prefix"
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" run pkg-config --cflags --libs rsc
for ex in examples/*/; do
  name=$(basename "$ex")
  run cmake -S "$ex" -B "$tmp/$name" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_CXX_FLAGS="$flags"
  run cmake --build "$tmp/$name"
  echo "check-install: examples/$name builds against the installed package"
done
