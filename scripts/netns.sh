#!/usr/bin/env bash
# Runs a command inside a private network namespace with its own loopback (ENGINEERING §3:
# the machine's default loopback is throttled). Falls back to running it directly when
# namespaces are unavailable (not root, or unshare refused), and says so.
set -euo pipefail
if [ "${RSC_IN_NETNS:-}" = 1 ]; then exec "$@"; fi
if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
  export RSC_IN_NETNS=1
  exec unshare -n bash -c 'ip link set lo up && exec "$@"' netns "$@"
fi
echo "netns: private network namespace unavailable; running on the host loopback" >&2
exec "$@"
