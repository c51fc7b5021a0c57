#!/usr/bin/env bash
# gpu_deps_fetch.sh — download (not install) the Debian packages dagatron
# builds against into .gpudeps/, for a GPU machine that can reach no package
# registry: carry .gpudeps with the device call and scripts/run_gpu_tests.sh
# unpacks them. Run where apt-get works (this build box). .gpudeps is
# git-ignored through .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/.."
ex="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.gpudeps/' "$ex" 2>/dev/null || echo '/.gpudeps/' >> "$ex"
mkdir -p .gpudeps
cd .gpudeps
PKGS=(libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
      libhwloc-dev libhwloc15 libjemalloc-dev libjemalloc2 libcjson-dev libcjson1
      libcmocka-dev libcmocka0 libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libpsm2-2 libibverbs1
      librdmacm1 libnl-3-200 libnl-route-3-200 libltdl7 libudev1 libnuma1 libpsm-infinipath1
      libmunge2 libhwloc-plugins ibverbs-providers pkg-config)
apt-get download "${PKGS[@]}"
du -sh .
