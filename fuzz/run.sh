#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60).
# Usage: fuzz/run.sh [SECONDS] [target...]
# The seeds in fuzz/seeds/ are copied into build-fuzz/corpus/, which is where libFuzzer
# adds what it finds (the repository's seeds stay untouched). Crashes are written to
# build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_request_json fuzz_response_json fuzz_router fuzz_aggregate fuzz_layout fuzz_tokens_file)
cxx="${CXX_FUZZ:-$(command -v clang++-14 || command -v clang++)}"
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
fi
cmake --build build-fuzz --target "${targets[@]}"
mkdir -p build-fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  seeds="fuzz/seeds/${t#fuzz_}"
  corpus="build-fuzz/corpus/${t#fuzz_}"
  mkdir -p "$corpus"
  cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
  echo "== $t for ${seconds}s"
  if ! "build-fuzz/$t" -max_total_time="$seconds" -dict=fuzz/protocol.dict -max_len=4096 \
      -artifact_prefix=build-fuzz/artifacts/"$t"- -print_final_stats=1 "$corpus" \
      2> "build-fuzz/$t.log"; then
    echo "!! $t FAILED; see build-fuzz/$t.log and build-fuzz/artifacts/"
    status=1
  fi
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)|cov:" \
    "build-fuzz/$t.log" | tail -3 || true
done
exit $status
