#!/usr/bin/env bash
# Checks deploy/Dockerfile without Docker (there is none on the project's machines), against
# this machine's build, which uses the same Debian 12 packages as the image:
#   1. every shared library the built binaries load (ldd) belongs to a Debian package
#      (dpkg -S) that the runtime stage installs — a library missing from the runtime stage
#      would make the container fail at start;
#   2. every package either stage installs exists in Debian (installed here, or known to
#      apt), and the build stage installs only packages scripts/bootstrap.sh installs too
#      (the image builds with the dependencies CI builds with);
#   3. the files the runtime stage copies from the build stage are the CMake output paths of
#      the binaries given;
#   4. the runtime stage runs as a non-root user, exposes the port, has a HEALTHCHECK and an
#      ENTRYPOINT, and the image is multi-stage.
# Usage: scripts/check-dockerfile.sh BUILD_DIR BINARY... (ctest passes build/ and the built
# rsc-coordinator and rsc). Exit 0 when every check passes, 1 otherwise (each failure named).
set -euo pipefail
cd "$(dirname "$0")/.."
dockerfile=deploy/Dockerfile
build_dir=${1:?usage: $0 BUILD_DIR BINARY...}
shift
[ $# -gt 0 ] || { echo "usage: $0 BUILD_DIR BINARY..." >&2; exit 2; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The Dockerfile with continuation lines joined and comments dropped, one instruction a line.
instructions=$(sed -e '/^[[:space:]]*#/d' "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
stage_count=$(grep -c '^FROM ' <<<"$instructions" || true)
[ "$stage_count" -ge 2 ] || fail "$dockerfile: expected a multi-stage build, found $stage_count FROM"
build_stage=$(awk '/^FROM /{n++} n==1' <<<"$instructions")
runtime_stage=$(awk -v last="$stage_count" '/^FROM /{n++} n==last' <<<"$instructions")

# The package names of every `apt-get install` in a stage (options and shell operators
# dropped).
packages_of() {
  grep -o 'apt-get install[^&;|]*' <<<"$1" | sed 's/apt-get install//' | tr ' ' '\n' |
    grep -v -e '^-' -e '^$' | sort -u
}
runtime_pkgs=$(packages_of "$runtime_stage")
build_pkgs=$(packages_of "$build_stage")
[ -n "$runtime_pkgs" ] || fail "no apt-get install in the runtime stage"
[ -n "$build_pkgs" ] || fail "no apt-get install in the build stage"

# 1. Shared libraries -> packages.
owner_of() {
  local path=$1 candidate real
  real=$(readlink -f "$path")
  # /lib is /usr/lib on Debian 12 (merged /usr); dpkg knows each file under one of them.
  for candidate in "$path" "$real" "/usr$path" "/usr$real" "${path#/usr}" "${real#/usr}"; do
    if out=$(dpkg -S "$candidate" 2>/dev/null); then
      out=${out%%$'\n'*}
      echo "${out%%:*}"
      return 0
    fi
  done
  return 1
}
for binary in "$@"; do
  [ -x "$binary" ] || { fail "$binary: not an executable (build it first)"; continue; }
  libs=$(ldd "$binary" | awk '/=>/ {print $3} /^\t\/lib/ {print $1}' | grep '^/' || true)
  [ -n "$libs" ] || fail "$binary: ldd found no shared libraries"
  while read -r lib; do
    if ! pkg=$(owner_of "$lib"); then
      fail "$binary: $lib belongs to no Debian package (dpkg -S)"
      continue
    fi
    pkg=${pkg%%,*}
    if grep -qx "$pkg" <<<"$runtime_pkgs"; then
      echo "ok: $(basename "$binary") needs $(basename "$lib") from $pkg"
    else
      fail "$(basename "$binary") needs $lib from package $pkg, which the runtime stage of $dockerfile does not install"
    fi
  done <<<"$libs"
done

# 2. Packages exist; the build stage's are bootstrap's.
bootstrap_pkgs=$(sed -n '/^PKGS=(/,/)/p' scripts/bootstrap.sh | sed 's/#.*//; s/PKGS=(//; s/)//' |
  tr ' ' '\n' | grep -v '^$' | sort -u)
for pkg in $runtime_pkgs $build_pkgs; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" &&
     ! apt-cache show "$pkg" >/dev/null 2>&1; then
    fail "$dockerfile installs '$pkg', which is neither installed here nor known to apt"
  fi
done
for pkg in $build_pkgs; do
  grep -qx "$pkg" <<<"$bootstrap_pkgs" ||
    fail "the build stage installs '$pkg', which scripts/bootstrap.sh does not (build with CI's dependencies)"
done

# 3. What the runtime stage copies out of the build stage: /build/<path> must be <path> of
# one of the binaries given, relative to BUILD_DIR.
build_root=$(grep -o -- '-B [^ ]*' <<<"$build_stage" | head -n1 | cut -d' ' -f2)
copied=$(grep '^COPY --from=build' <<<"$runtime_stage" | tr ' ' '\n' | grep "^$build_root/" || true)
[ -n "$copied" ] || fail "the runtime stage copies nothing from the build stage's $build_root"
abs_build_dir=$(readlink -f "$build_dir")
for path in $copied; do
  rel=${path#"$build_root"/}
  found=0
  for binary in "$@"; do
    [ "$(readlink -f "$binary")" = "$abs_build_dir/$rel" ] && found=1
  done
  [ $found = 1 ] || fail "COPY --from=build $path: no binary given is at $build_dir/$rel"
done

# 4. Runtime stage basics.
user=$(grep '^USER ' <<<"$runtime_stage" | tail -n1 | awk '{print $2}')
case "${user%%:*}" in
  "" | root | 0) fail "the runtime stage runs as root (USER '${user}')" ;;
esac
grep -q '^EXPOSE ' <<<"$runtime_stage" || fail "the runtime stage exposes no port"
grep -q '^HEALTHCHECK ' <<<"$runtime_stage" || fail "the runtime stage has no HEALTHCHECK"
grep -q '^ENTRYPOINT ' <<<"$runtime_stage" || fail "the runtime stage has no ENTRYPOINT"
port=$(grep '^ENV RSC_LISTEN=' <<<"$runtime_stage" | sed 's/.*://')
grep -q "^EXPOSE $port\$" <<<"$runtime_stage" ||
  fail "RSC_LISTEN's port ($port) is not the EXPOSEd one"

if [ "$failures" -gt 0 ]; then
  echo "$dockerfile: $failures check(s) failed"
  exit 1
fi
echo "$dockerfile: every check passed"
