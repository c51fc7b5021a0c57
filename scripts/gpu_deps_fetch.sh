#!/usr/bin/env bash
# gpu_deps_fetch.sh — download (not install) the Debian packages dagatron
# builds against into .gpudeps/, for a GPU machine that can reach no package
# registry: carry .gpudeps with the device call and scripts/run_gpu_tests.sh
# unpacks them (scripts/gpu_deps_unpack.sh) when something is missing there.
# Run where apt-get works (this build box, Debian bookworm). The list is the
# one the GPU validation machine was served with (../shared/gpu/README.md,
# about 25 MB): OpenBLAS, hwloc, jemalloc, cJSON, cmocka, PCRE2, utf8proc,
# SentencePiece, zlib, OpenMPI and what they load, and pkg-config.
# .gpudeps is git-ignored through .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/.."
ex="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.gpudeps/' "$ex" 2>/dev/null || echo '/.gpudeps/' >> "$ex"
mkdir -p .gpudeps
cd .gpudeps
PKGS=(libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
      libhwloc-dev libhwloc15 libhwloc-plugins libnuma1 libnuma-dev libjemalloc-dev libjemalloc2
      libcjson-dev libcjson1 libcmocka-dev libcmocka0 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0
      libpcre2-posix3 libutf8proc-dev libutf8proc2 libsentencepiece-dev libsentencepiece0 zlib1g-dev
      libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libevent-core-2.1-7
      libevent-pthreads-2.1-7 libevent-2.1-7 libfabric1 libucx0 libpsm2-2 libibverbs1 librdmacm1
      libnl-3-200 libnl-route-3-200 libltdl7 libpsm-infinipath1 libmunge2 ibverbs-providers libatomic1
      libxnvctrl0 libpciaccess0 pkgconf pkgconf-bin libpkgconf3 pkg-config)
apt-get download "${PKGS[@]}"
du -sh .
