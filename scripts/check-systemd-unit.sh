#!/usr/bin/env bash
# Checks deploy/systemd/rsc-coordinator.service and its environment file:
#   1. `systemd-analyze verify` says nothing about the unit (it exits 0 on unknown keys and
#      other warnings, so any output fails the check). The unit's ExecStart names the
#      installed path, which does not exist here: a copy pointing at the built binary is
#      verified instead (verify checks that the command exists and is executable);
#   2. `systemd-analyze security --offline=yes` rates the sandbox's exposure at most 1.5;
#   3. consistency with the code: RestartPreventExitStatus is the bad-command-line exit code
#      of src/server/main.cc, TimeoutStopSec exceeds the shutdown grace (+0.5 s), every
#      variable of the env file is one the coordinator reads (or RSC_ARGS, which ExecStart
#      expands), every flag in RSC_ARGS is one `rsc-coordinator --help` lists.
# A missing systemd-analyze is a failure, not a skip (scripts/bootstrap.sh installs systemd).
# Usage: scripts/check-systemd-unit.sh PATH_TO_BUILT_RSC_COORDINATOR
set -euo pipefail
cd "$(dirname "$0")/.."
unit=deploy/systemd/rsc-coordinator.service
env_file=deploy/systemd/rsc-coordinator.env
binary=$(readlink -f "${1:?usage: $0 PATH_TO_BUILT_RSC_COORDINATOR}")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
command -v systemd-analyze >/dev/null ||
  { echo "FAIL: systemd-analyze is missing (Debian package systemd; scripts/bootstrap.sh)"; exit 1; }
[ -x "$binary" ] || { echo "FAIL: $binary is not an executable (build rsc-coordinator first)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/rsc-coordinator.service"
sed "s|^ExecStart=/usr/local/bin/rsc-coordinator |ExecStart=$binary |" "$unit" >"$copy"
grep -q "^ExecStart=$binary " "$copy" || fail "$unit: ExecStart does not start /usr/local/bin/rsc-coordinator"

# 1. verify
if ! out=$(systemd-analyze verify "$copy" 2>&1) || [ -n "$out" ]; then
  fail "systemd-analyze verify: ${out:-exit status $?}"
fi

# 2. security exposure (0-100 scale for --threshold: 15 = 1.5)
if ! out=$(systemd-analyze security --offline=yes --threshold=15 "$copy" 2>&1); then
  fail "systemd-analyze security: $(grep 'Overall exposure' <<<"$out")"
else
  echo "ok: $(grep 'Overall exposure' <<<"$out")"
fi

# 3. consistency with the code
value() { sed -n "s/^$1=//p" "$2" | tail -n1; }
prevent=$(value RestartPreventExitStatus "$unit")
grep -q "Exit codes: .* 2 bad command line" src/server/main.cc ||
  fail "src/server/main.cc no longer documents exit code 2 as 'bad command line'"
[ "$prevent" = 2 ] || fail "RestartPreventExitStatus=$prevent, expected 2 (bad command line)"
grace_ms=$(sed -n 's/.*int64_t shutdown_grace_ms = \([0-9]*\);.*/\1/p' src/server/main.cc)
args=$(value RSC_ARGS "$env_file")
if [[ $args =~ --shutdown-grace-ms[=\ ]([0-9]+) ]]; then grace_ms=${BASH_REMATCH[1]}; fi
stop=$(value TimeoutStopSec "$unit")
stop_s=${stop%s}
[[ $stop_s =~ ^[0-9]+$ ]] || fail "TimeoutStopSec=$stop: write it in whole seconds"
if [ -n "$grace_ms" ] && [[ $stop_s =~ ^[0-9]+$ ]] && [ $((stop_s * 1000)) -le $((grace_ms + 500)) ]; then
  fail "TimeoutStopSec=$stop does not exceed the shutdown grace of ${grace_ms} ms + 500 ms"
fi
[ -n "$grace_ms" ] || fail "cannot find the default shutdown_grace_ms in src/server/main.cc"
known_vars=$(grep -o 'envname("[A-Z_]*")' src/server/main.cc | sed 's/envname("\(.*\)")/\1/')
while IFS='=' read -r key _; do
  [[ $key =~ ^[A-Z_]+$ ]] || continue
  if [ "$key" = RSC_ARGS ]; then
    # shellcheck disable=SC2016 # a literal $RSC_ARGS, expanded by systemd
    grep -q '^ExecStart=.*\$RSC_ARGS' "$unit" || fail "$env_file sets RSC_ARGS but ExecStart does not use it"
  elif ! grep -qx "$key" <<<"$known_vars"; then
    fail "$env_file sets $key, which rsc-coordinator does not read (main.cc envname)"
  fi
done < <(grep -v '^[[:space:]]*#' "$env_file")
help=$("$binary" --help)
for flag in $(grep -o -- '--[a-z-]*' <<<"$args" || true); do
  grep -q -- "$flag" <<<"$help" || fail "RSC_ARGS passes $flag, which rsc-coordinator --help does not list"
done

if [ "$failures" -gt 0 ]; then
  echo "$unit: $failures check(s) failed"
  exit 1
fi
echo "$unit: every check passed"
