#!/usr/bin/env bash
# Reproduces docs/console.png, the web console's screenshot (SPEC O3, docs/console.md).
# Usage: scripts/console-screenshot.sh [out.png]     (default: docs/console.png)
#
# The picture is taken by the console's browser test itself, so it shows exactly the page
# that test checks: ConsoleTest.ReshardProgressAndLiveRefresh starts a redis-server and a
# coordinator, creates orders/billing with 16 shards, has three members join and heartbeat,
# writes some backlog, reshards the stream to 24 shards (the children wait for their
# parents) and, with RSC_CONSOLE_SCREENSHOT set, saves headless Chromium's 1400x900 view of
# the group's page. Runs in a private network namespace, like the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/console.png}")
scripts/bootstrap.sh
nice -n 19 scripts/build.sh default rsc-coordinator integration_tests
rm -f "$out"
RSC_CONSOLE_SCREENSHOT="$out" scripts/netns.sh build/tests/integration_tests \
  --gtest_filter=ConsoleTest.ReshardProgressAndLiveRefresh
[ -s "$out" ] || { echo "console-screenshot: no image was written to $out" >&2; exit 1; }
echo "console-screenshot: wrote $out"
