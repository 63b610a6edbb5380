#!/usr/bin/env bash
# Installs the Debian packages the project needs, only when missing (ENGINEERING §2).
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config git iproute2 util-linux curl
      libboost1.81-dev libboost-json1.81-dev libboost-context1.81-dev libhiredis-dev
      redis-server redis-tools
      prometheus-cpp-dev libspdlog-dev libfmt-dev libcli11-dev librapidcheck-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev clang-format libxxhash-dev
      jq  # jq: bench/run.sh assembles its table and JSON
      libyaml-cpp-dev prometheus systemd  # docs/openapi.yaml, deploy/ checks (SPEC O5)
      chromium)  # chromium: the web console's test loads /ui/ in it, headless (SPEC O3)
# prometheus: only its promtool is used (the alert rules' checks); on a machine that runs
# systemd the package also enables a Prometheus server (`systemctl disable --now
# prometheus` if unwanted). systemd: systemd-analyze checks deploy/systemd/.
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian package may start a system redis-server on 6379; our tests and the embedded
# default use their own processes and ports, so it is left alone.
