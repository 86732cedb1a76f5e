#!/usr/bin/env bash
# deploy/docker/Dockerfile without a container builder (none runs here):
# - every package a stage installs is in scripts/debian-packages.txt, and the
#   final stage's are in its runtime section (no -dev package, no compiler);
# - the final stage holds every shared library the built binaries load: each
#   library's package is installed there, pulled in by one that is, or part of
#   the Debian base image (Essential / Priority required).
# Then shows the check fails when a library's package is dropped.
# Usage: dockerfile_test.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=${1:?usage: dockerfile_test.sh SOURCE_DIR BIN_DIR}
bin=${2:?usage: dockerfile_test.sh SOURCE_DIR BIN_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
list=$src/scripts/debian-packages.txt
grep -Ev '^\s*(#|$)' "$list" | awk '{print $1}' | sort -u >"$work/all"
sed -n '/^# --- runtime ---/,/^# --- end runtime ---/p' "$list" | grep -Ev '^\s*(#|$)' | awk '{print $1}' |
  sort -u >"$work/runtime"
[ -s "$work/runtime" ] || fail "$list has no '# --- runtime ---' section"

# Packages of each stage's `apt-get install`, one file per stage (0, 1, ...).
stages() {  # DOCKERFILE OUTDIR
  mkdir -p "$2"
  # Join continued lines, drop comments.
  sed -e 's/#.*//' "$1" | sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' | awk -v out="$2" '
    /^FROM / { n++; printf "" > (out "/" n) }
    /apt-get install/ {
      sub(/.*apt-get install/, "")
      for (i = 1; i <= NF; i++) {
        if ($i == "&&" || $i == ";") break
        if ($i !~ /^-/) print $i >> (out "/" n)
      }
    }'
}

check() {  # DOCKERFILE
  local df=$1 d=$work/stages.$RANDOM
  stages "$df" "$d"
  local last
  last=$(find "$d" -type f -printf '%f\n' | sort -n | tail -1)
  [ "${last:-0}" -ge 2 ] || { echo "$df: expected a multi-stage build, found ${last:-0} stage(s)"; return 1; }
  local bad=0 p
  for f in "$d"/*; do
    while read -r p; do
      grep -qxF -- "$p" "$work/all" || { echo "$df: stage $(basename "$f") installs '$p', which is not in scripts/debian-packages.txt"; bad=1; }
    done <"$f"
  done
  while read -r p; do
    grep -qxF -- "$p" "$work/runtime" || { echo "$df: the final stage installs '$p', outside the runtime section of scripts/debian-packages.txt"; bad=1; }
    case $p in *-dev | build-essential | g++* | gcc* | clang* | cmake) echo "$df: the final stage installs build tool '$p'"; bad=1 ;; esac
  done <"$d/$last"
  grep -q '^FROM debian:12' "$df" || { echo "$df: the base is not Debian 12"; bad=1; }
  grep -Eq '^USER +[1-9]' "$df" || { echo "$df: the final stage does not default to a non-root USER"; bad=1; }
  # What the final stage has: its packages, their dependencies, the base image.
  # shellcheck disable=SC2046
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances $(cat "$d/$last") 2>/dev/null | grep -v '^ ' | tr -d '<>' |
    sed 's/:.*//' | sort -u >"$d/have"
  dpkg-query -W -f '${Package} ${Essential} ${Priority}\n' | awk '$2 == "yes" || $3 == "required" {print $1}' |
    sed 's/:.*//' >>"$d/have"
  while read -r p; do
    grep -qxF -- "$p" "$d/have" || { echo "$df: the final stage lacks package $p (a library the binaries load)"; bad=1; }
  done <"$work/needed"
  return $bad
}

# The packages of the libraries the shipped binaries load (one dpkg -S for
# all: each call reads the whole package database).
for b in crest crest-controller crest-agent crest-bench mindie-sim; do
  [ -x "$bin/$b" ] || fail "$bin/$b is not built"
  ldd "$bin/$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u |
  # A sanitizer build (CREST_PRESET=asan|tsan) loads the sanitizer runtimes;
  # the image builds the release preset, which does not.
  grep -vE '/lib(asan|ubsan|tsan|lsan)\.so' >"$work/libs" || true
while read -r lib; do
  real=$(readlink -f "$lib")
  printf '%s\n' "$lib" "/usr$lib" "$real" "/usr$real"
done <"$work/libs" | sort -u >"$work/paths"
xargs dpkg -S <"$work/paths" 2>/dev/null >"$work/owners" || true
while read -r lib; do
  real=$(readlink -f "$lib")
  owner=$(awk -v a="$lib" -v b="/usr$lib" -v c="$real" -v d="/usr$real" \
    '{ p = $NF } p == a || p == b || p == c || p == d { sub(/:.*/, "", $1); print $1; exit }' "$work/owners")
  [ -n "$owner" ] || fail "no Debian package owns $lib"
  echo "$owner"
done <"$work/libs" | sort -u >"$work/needed"
[ -s "$work/needed" ] || fail "found no shared library of the binaries"

check "$src/deploy/docker/Dockerfile" || fail "deploy/docker/Dockerfile: see above"
echo "ok: $(wc -l <"$work/needed") library packages covered by the final stage"

# Without libyaml-cpp0.7 the agent could not start: the check must say so.
sed 's/ libyaml-cpp0.7 / /' "$src/deploy/docker/Dockerfile" >"$work/Dockerfile.broken"
cmp -s "$src/deploy/docker/Dockerfile" "$work/Dockerfile.broken" && fail "the test's edit changed nothing"
if check "$work/Dockerfile.broken" >"$work/broken.out"; then fail "a final stage without libyaml-cpp0.7 passed"; fi
grep -q "lacks package libyaml-cpp0.7" "$work/broken.out" || fail "unexpected: $(cat "$work/broken.out")"
sed 's/libsqlite3-0 /libsqlite3-dev /' "$src/deploy/docker/Dockerfile" >"$work/Dockerfile.dev"
if check "$work/Dockerfile.dev" >"$work/dev.out"; then fail "a final stage with libsqlite3-dev passed"; fi
grep -q "installs build tool 'libsqlite3-dev'" "$work/dev.out" || fail "unexpected: $(cat "$work/dev.out")"
echo "PASS: Dockerfile stages name only listed packages; the final stage runs the binaries"
