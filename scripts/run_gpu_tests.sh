#!/usr/bin/env bash
# run_gpu_tests.sh — validate the CUDA backend on a machine with a GPU, in one
# command: build with CUDA (cuda tests forced on), run every test labelled
# `cuda`, then bench_train on the GPU. Exits non-zero if anything fails, and
# fails loudly (never skips) when no GPU is usable.
#
# Made for the lent GPU machines (the `device` tool): the repository is a
# copy, nothing can be downloaded there, and the Debian packages dagatron
# builds against may be missing. This script installs what is missing with
# apt-get when it can; otherwise it unpacks the .deb files carried in
# .gpudeps/ (made here by scripts/gpu_deps_fetch.sh) into /tmp/dgdeps and
# points the build at them. Typical device call (carry .gpudeps):
#   bash scripts/run_gpu_tests.sh 2>&1 | tee $OUT/gpu_tests.log
#
#   DG_BUILD_DIR  build folder (default: build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."

if ! nvidia-smi -L; then
  echo "run_gpu_tests: FAIL: no usable GPU (nvidia-smi -L failed); these tests need one" >&2
  exit 1
fi
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv

# ---- dependencies ----------------------------------------------------------------------
need_pc=(openblas hwloc jemalloc libcjson cmocka)
missing() {
  for m in "${need_pc[@]}"; do pkg-config --exists "$m" 2>/dev/null || echo "$m"; done
  command -v mpicc >/dev/null || echo mpi
}
if [ -n "$(missing)" ] && [ -d .gpudeps ] && ls .gpudeps/*.deb >/dev/null 2>&1; then
  echo "run_gpu_tests: unpacking carried packages (.gpudeps) into /tmp/dgdeps"
  for f in .gpudeps/*.deb; do dpkg -x "$f" /tmp/dgdeps; done
  P=/tmp/dgdeps
  ML=x86_64-linux-gnu
  export PATH="$P/usr/bin:$PATH"
  export PKG_CONFIG_PATH="$P/usr/lib/$ML/pkgconfig:$P/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
  export PKG_CONFIG_SYSROOT_DIR=""
  export CPATH="$P/usr/include:$P/usr/include/$ML:${CPATH:-}"
  export LIBRARY_PATH="$P/usr/lib/$ML:$P/usr/lib/$ML/openblas-pthread:${LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH="$P/usr/lib/$ML:$P/usr/lib/$ML/openblas-pthread:$P/usr/lib/$ML/openmpi/lib:${LD_LIBRARY_PATH:-}"
  export OPAL_PREFIX="$P/usr"   # OpenMPI relocated under the unpacked prefix
  # pkg-config files name /usr: rewrite them to the unpacked prefix
  find "$P" -name '*.pc' -exec sed -i "s|^prefix=/usr|prefix=$P/usr|; s|=/usr/|=$P/usr/|g" {} +
  # the unpacked libraries' .so links are absolute: point them into the prefix
  find "$P" -type l -lname '/usr/*' | while read -r l; do ln -sf "$P$(readlink "$l")" "$l"; done
fi
if [ -n "$(missing)" ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y -qq --no-install-recommends libopenblas-dev libhwloc-dev libjemalloc-dev \
    libcjson-dev libcmocka-dev libopenmpi-dev openmpi-bin pkg-config >/dev/null 2>&1 || true
fi
if [ -n "$(missing)" ]; then
  echo "run_gpu_tests: FAIL: missing build dependencies: $(missing | tr '\n' ' ')" >&2
  echo "run_gpu_tests: on a machine with no package registry, run scripts/gpu_deps_fetch.sh where" \
       "one is reachable and carry .gpudeps" >&2
  exit 1
fi

# ---- build (nvcc for sm_90) and the cuda tests ------------------------------------------
BUILD=${DG_BUILD_DIR:-build-gpu}
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B "$BUILD" "${GEN[@]}" -DDG_CUDA=ON -DDG_GPU_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo || exit 1
cmake --build "$BUILD" -j "$(nproc)" || exit 1
"$BUILD/dagatron" cuda || exit 1

rc=0
(cd "$BUILD" && ctest -L cuda --output-on-failure --timeout 900) || rc=1

# ---- bench_train on the GPU: tokens/s and MFU against the GPU's peaks ----------------------
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
bench=$("$BUILD/bench_train" --device cuda --train-iters 6 2>&1) || { echo "$bench"; rc=1; }
echo "$bench"
tflops=$(echo "$bench" | sed -n 's/.*model TFLOP\/s \([0-9.]*\).*/\1/p')
case "$gpu" in
  *H100*|*H200*) bf16=989.4; fp32=66.9 ;;  # dense peaks of the SXM parts, TFLOP/s
  *) bf16=""; fp32="" ;;
esac
if [ -n "$tflops" ] && [ -n "$bf16" ]; then
  awk -v t="$tflops" -v b="$bf16" -v f="$fp32" -v g="$gpu" 'BEGIN {
    printf "bench_train on %s: %.4f TFLOP/s = MFU %.3f%% of the bf16 peak (%.1f), %.3f%% of the fp32 peak (%.1f)\n",
           g, t, 100 * t / b, b, 100 * t / f, f }'
fi
[ $rc -eq 0 ] && echo "run_gpu_tests: PASS" || echo "run_gpu_tests: FAIL"
exit $rc
