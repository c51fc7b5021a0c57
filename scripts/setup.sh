#!/usr/bin/env bash
# setup.sh — make this machine able to build and run dagatron, then build it.
# Idempotent: installs only the Debian packages that are missing (quick when
# all are there), then configures and builds into build/ (incremental).
#
#   DG_BUILD_DIR   build folder (default: build)
#   DG_CMAKE_ARGS  extra arguments for cmake's configure step
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhwloc-dev
      libjemalloc-dev libopenblas-dev libcmocka-dev libcjson-dev libpcre2-dev
      libutf8proc-dev libsentencepiece-dev graphviz
      python3-torch python3-numpy python3-regex fortunes
      chromium) # chromium: tests/view opens `dagatron view`'s page headless

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing missing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD=${DG_BUILD_DIR:-build}
# CI (CI=true) builds with warnings as errors.
WERROR=OFF
if [ "${CI:-}" = "true" ]; then WERROR=ON; fi
cmake -S . -B "$BUILD" -DDG_WERROR=$WERROR ${DG_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j "$(nproc)" 2>&1 | grep -vE '^\[ *[0-9]+%\]' || true
# grep above hides progress lines; fail if the build itself failed.
cmake --build "$BUILD" -j "$(nproc)" >/dev/null
