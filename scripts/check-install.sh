#!/usr/bin/env bash
# Installs the project into a temporary prefix and builds examples/* against it with
# find_package(rsc) (and checks pkg-config), proving the library is usable installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs rsc >/dev/null
for ex in examples/*/; do
  name=$(basename "$ex")
  cmake -S "$ex" -B "$tmp/$name" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
  cmake --build "$tmp/$name" >/dev/null
  echo "check-install: examples/$name builds against the installed package"
done
