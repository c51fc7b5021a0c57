#!/usr/bin/env bash
# run_gpu_tests.sh — validate the CUDA backend on a machine with a GPU, in one
# call of at most 6 minutes: build with CUDA (cuda tests forced on), run every
# test labelled `cuda`, compute-sanitizer memcheck on a tiny training step,
# then the GPU benchmark (bench/bench_gpu_vs_torch.sh: dagatron --device cuda
# beside PyTorch eager fp32). Exits non-zero if anything fails, and fails
# loudly (never skips) when no GPU is usable.
#
# Made for the lent GPU machines as ../shared/gpu/README.md measured them
# (Ubuntu 24.04, nvcc 13.0, no package registry, cmake and ninja from a
# Python venv): the repository is a copy and nothing can be downloaded there.
#  - Missing Debian packages (jemalloc, cJSON, cmocka, utf8proc, the PCRE2
#    headers there) come from the .deb files carried in .gpudeps/ (made here
#    by scripts/gpu_deps_fetch.sh), unpacked with dpkg-deb -x into
#    /tmp/dgdeps (scripts/gpu_deps_unpack.sh); our binaries find them through
#    their build RPATH.
#  - The system's OpenBLAS keeps its .pc under openblas-pthread/.
#  - NCCL: nccl.h in /usr/include but the library only as libnccl.so.2 in the
#    venv's nvidia/nccl/lib (no libnccl.so beside the toolkit, so CMake's
#    find_library fails): its full path goes to -DDG_NCCL_LIB.
# Typical device call (carry .gpudeps):
#   run(command="bash scripts/run_gpu_tests.sh 2>&1 | tee $OUT/gpu_tests.log", carry=[".gpudeps"])
#
#   --dry-run       print what would run (dependency setup, the configure
#                   line, every command) and run nothing; needs no GPU
#   DG_BUILD_DIR    build folder (default: build-gpu)
#   DG_GPU_BUDGET_S seconds for the whole run (default 340); each step is
#                   also limited on its own
#   DG_NCCL_LIB, DG_NCCL_INCLUDE   NCCL's library and header folder (default: searched)
#   DG_NCCL_SEARCH  globs for libnccl.so.2 when none is beside the toolkit
#                   (default: the Python venvs' nvidia/nccl/lib)
#   CUDA_HOME       the toolkit (default /usr/local/cuda)
#   DG_TORCH_PYTHON the Python whose torch sees the GPU (default python3)
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
BUILD=${DG_BUILD_DIR:-build-gpu}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ML=x86_64-linux-gnu

BUDGET=${DG_GPU_BUDGET_S:-340} # the whole call: at most 6 minutes, with room for the transfers

# Print a command, run it unless --dry-run.
run() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  [ $DRY = 1 ] || "$@"
}
# T secs cmd...: run under a time limit of secs, or of what is left of the
# budget if less; a step with no time left fails without running.
T() {
  local s=$1 left=$((BUDGET - SECONDS)); shift
  [ $left -lt $s ] && s=$left
  if [ $s -le 5 ]; then echo "run_gpu_tests: FAIL: out of time (budget ${BUDGET}s) before: $*"; return 1; fi
  run timeout --kill-after=5 "$s" "$@"
}
step() { echo "== $* ($((SECONDS))s)"; }

# ---- the GPU ------------------------------------------------------------------------------
if [ $DRY = 0 ]; then
  if ! nvidia-smi -L; then
    echo "run_gpu_tests: FAIL: no usable GPU (nvidia-smi -L failed); these tests need one" >&2
    exit 1
  fi
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
fi

# ---- dependencies -------------------------------------------------------------------------
# Ubuntu's and Debian's OpenBLAS .pc lives under openblas-pthread/ (the alternatives' layout)
[ -d /usr/lib/$ML/openblas-pthread/pkgconfig ] &&
  export PKG_CONFIG_PATH="/usr/lib/$ML/openblas-pthread/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
need_pc=(openblas hwloc jemalloc libcjson cmocka libpcre2-8 libutf8proc sentencepiece zlib)
missing() {
  for m in "${need_pc[@]}"; do pkg-config --exists "$m" 2>/dev/null || echo "$m"; done
  command -v mpicc >/dev/null || echo mpi
}
rpath_args=()
if [ -n "$(missing)" ]; then
  echo "run_gpu_tests: missing: $(missing | tr '\n' ' ')"
  if ls .gpudeps/*.deb >/dev/null 2>&1; then
    echo "run_gpu_tests: unpacking the carried packages (.gpudeps, $(ls .gpudeps/*.deb | wc -l) files) into /tmp/dgdeps"
    . scripts/gpu_deps_unpack.sh
    if [ $DRY = 0 ]; then
      dg_deps_unpack
      # the unpacked libraries and their own dependencies, for our binaries
      # only: an RPATH (not RUNPATH) also serves the indirect ones
      rpath_args=("-DCMAKE_BUILD_RPATH=$DG_DEPS_LD" "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags")
      # the packages' own OpenMPI runs without an RPATH: then everything needs the path
      [ -n "${OPAL_PREFIX:-}" ] && export LD_LIBRARY_PATH="$DG_DEPS_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
      rpath_args=("-DCMAKE_BUILD_RPATH=/tmp/dgdeps/usr/lib/$ML:..." "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags")
    fi
  fi
  if [ $DRY = 0 ] && [ -n "$(missing)" ]; then
    echo "run_gpu_tests: FAIL: missing build dependencies: $(missing | tr '\n' ' ')" >&2
    echo "run_gpu_tests: run scripts/gpu_deps_fetch.sh where a package registry is reachable and carry .gpudeps" >&2
    exit 1
  fi
fi

# ---- NCCL: beside the toolkit, or libnccl.so.2 from a Python venv --------------------------
nccl_args=()
nccl_lib=${DG_NCCL_LIB:-}
if [ -z "$nccl_lib" ]; then
  beside=""
  for f in "$CUDA_HOME"/lib64/libnccl.so "$CUDA_HOME"/lib/libnccl.so "$CUDA_HOME"/targets/x86_64-linux/lib/libnccl.so \
           /usr/lib/$ML/libnccl.so; do
    [ -e "$f" ] && { beside=$f; break; }
  done
  if [ -z "$beside" ]; then
    search=${DG_NCCL_SEARCH:-/opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2 /usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2}
    for g in $search; do
      [ -e "$g" ] && { nccl_lib=$g; break; }
    done
  fi
fi
if [ -n "$nccl_lib" ]; then
  inc=${DG_NCCL_INCLUDE:-}
  if [ -z "$inc" ]; then
    for d in "$CUDA_HOME/include" /usr/include "$(dirname "$nccl_lib")/../include"; do
      [ -e "$d/nccl.h" ] && { inc=$d; break; }
    done
  fi
  nccl_args=("-DDG_NCCL_LIB=$nccl_lib")
  [ -n "$inc" ] && nccl_args+=("-DDG_NCCL_INCLUDE=$inc")
  echo "run_gpu_tests: NCCL: $nccl_lib (header in ${inc:-?})"
fi

# ---- build (nvcc for sm_90) -----------------------------------------------------------------
rc=0
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
step "configure and build"
T 40 cmake -S . -B "$BUILD" "${GEN[@]}" -DDG_CUDA=ON -DDG_GPU_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${nccl_args[@]}" "${rpath_args[@]}" || exit 1
T 150 cmake --build "$BUILD" -j "$(nproc)" || exit 1
run "$BUILD/dagatron" cuda || exit 1

# ---- every cuda test --------------------------------------------------------------------------
step "ctest -L cuda"
T 100 ctest --test-dir "$BUILD" -L cuda --output-on-failure --timeout 90 || rc=1

# ---- compute-sanitizer memcheck on a tiny training step ---------------------------------------
step "memcheck"
SAN=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
TINY=($(cat tests/common/moe_arch.flags) --num-layers 1 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --micro-batch-size 2 --num-experts 4 --train-iters 2 --log-interval 1 --mock-data --vocab-size 64
      --eval-iters 0 --compute-threads 4)
T 90 "$SAN" --tool memcheck --error-exitcode 1 --target-processes all "$BUILD/dagatron" train --device cuda "${TINY[@]}" \
  || { echo "run_gpu_tests: memcheck found errors (or the step failed)"; rc=1; }

# ---- the GPU benchmark: dagatron --device cuda beside PyTorch eager fp32 ----------------------
step "bench_gpu_vs_torch"
T 150 env BUILD="$BUILD" PYTHON="${DG_TORCH_PYTHON:-python3}" ITERS=4 bash bench/bench_gpu_vs_torch.sh || rc=1

step "done"
if [ $DRY = 1 ]; then echo "run_gpu_tests: dry run: nothing ran"; exit 0; fi
[ $rc -eq 0 ] && echo "run_gpu_tests: PASS" || echo "run_gpu_tests: FAIL"
exit $rc
