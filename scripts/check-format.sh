#!/usr/bin/env bash
# Fails when a tracked C++ file differs from .clang-format (Google base, 100 columns).
# Fix with: clang-format -i $(git ls-files '*.cc' '*.h')
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$cf" ]; then
  echo "check-format: clang-format not installed (scripts/bootstrap.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' 2>/dev/null || find src tests bench sim fuzz -name '*.cc' -o -name '*.h')
"$cf" --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
