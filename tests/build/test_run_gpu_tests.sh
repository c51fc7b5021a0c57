#!/usr/bin/env bash
# test_run_gpu_tests.sh — what scripts/run_gpu_tests.sh can be checked for
# without a GPU (it is the GPU machine's one command, run there rarely):
#  1. it parses (bash -n), and so do the scripts it sources and runs;
#  2. gpu_deps_unpack.sh on a fake .gpudeps (packages built here with
#     dpkg-deb -b in the shapes of Debian's): pkg-config prefixes rewritten,
#     absolute .so links pointed into the prefix, OpenBLAS's generic names and
#     .pc linked out of openblas-pthread/, the paths exported;
#  3. the configure line --dry-run chooses: with no libnccl.so beside a fake
#     toolkit, the full path of a fake venv's libnccl.so.2 in -DDG_NCCL_LIB
#     and a header folder in -DDG_NCCL_INCLUDE; with one beside, neither; and
#     every step (cuda tests, memcheck, the benchmark) under a time limit.
set -u
unset DG_BUILD_DIR # the script's own default (build-gpu) is what is checked, whatever build ran this test
SRC=${DG_SRC:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- 1. syntax ----
for f in scripts/run_gpu_tests.sh scripts/gpu_deps_unpack.sh scripts/gpu_deps_fetch.sh bench/bench_gpu_vs_torch.sh; do
  bash -n "$SRC/$f" || bad "$f does not parse"
done

# ---- 2. unpacking a fake .gpudeps ----
ML=x86_64-linux-gnu
mkdeb() { # name, then files made under its root by the caller
  local root=$TMP/pkg/$1
  mkdir -p "$root/DEBIAN"
  printf 'Package: %s\nVersion: 1.0\nArchitecture: amd64\nMaintainer: test <t@t>\nDescription: fake\n' "$1" \
    > "$root/DEBIAN/control"
  dpkg-deb -b --root-owner-group "$root" "$TMP/gpudeps/$1_1.0_amd64.deb" >/dev/null || bad "dpkg-deb -b $1"
}
mkdir -p "$TMP/gpudeps" "$TMP/pkg"
# jemalloc's shape: .pc in pkgconfig/, the dev link absolute
r=$TMP/pkg/libfakejemalloc-dev
mkdir -p "$r/usr/lib/$ML/pkgconfig" "$r/usr/include/jemalloc"
printf 'prefix=/usr\nlibdir=${prefix}/lib/%s\nincludedir=${prefix}/include\nName: jemalloc\nDescription: x\nVersion: 5.3.0\nLibs: -L${libdir} -ljemalloc\nCflags: -I${includedir}\n' \
  "$ML" > "$r/usr/lib/$ML/pkgconfig/fakejemalloc.pc"
echo 'int je;' > "$r/usr/include/jemalloc/jemalloc.h"
echo so > "$r/usr/lib/$ML/libfakejemalloc.so.2"
ln -s "/usr/lib/$ML/libfakejemalloc.so.2" "$r/usr/lib/$ML/libfakejemalloc.so"
mkdeb libfakejemalloc-dev
# cmocka's shape: a literal -I/usr/include
r=$TMP/pkg/libfakecmocka-dev
mkdir -p "$r/usr/lib/$ML/pkgconfig"
printf 'Name: cmocka\nDescription: x\nVersion: 1.1.5\nLibs: -L/usr/lib/%s -lcmocka\nCflags: -I/usr/include\n' "$ML" \
  > "$r/usr/lib/$ML/pkgconfig/fakecmocka.pc"
mkdeb libfakecmocka-dev
# OpenBLAS's shape: everything under openblas-pthread/, reached through alternatives
r=$TMP/pkg/libfakeopenblas-pthread-dev
mkdir -p "$r/usr/lib/$ML/openblas-pthread/pkgconfig"
printf 'prefix=/usr\nlibdir=/usr/lib/%s/openblas-pthread/\nName: openblas\nDescription: x\nVersion: 0.3.21\nLibs: -L${libdir} -lopenblas\nCflags: -I/usr/include/%s/openblas-pthread/\n' \
  "$ML" "$ML" > "$r/usr/lib/$ML/openblas-pthread/pkgconfig/openblas.pc"
echo so > "$r/usr/lib/$ML/openblas-pthread/libopenblasp-r0.3.21.so"
ln -s libopenblasp-r0.3.21.so "$r/usr/lib/$ML/openblas-pthread/libopenblas.so"
mkdeb libfakeopenblas-pthread-dev

P=$TMP/dgdeps
got=$(cd "$SRC" && env -u PKG_CONFIG_PATH DG_DEPS_DIR="$TMP/gpudeps" DG_DEPS_PREFIX="$P" PKG_CONFIG_LIBDIR=/nonexistent bash -c '
  . scripts/gpu_deps_unpack.sh && dg_deps_unpack &&
  echo "je $(pkg-config --cflags --libs fakejemalloc)" &&
  echo "cm $(pkg-config --cflags fakecmocka)" &&
  echo "ob $(pkg-config --libs openblas)" &&
  echo "pcp $PKG_CONFIG_PATH" && echo "ld $DG_DEPS_LD" && echo "cpath $CPATH" && echo "cmake $CMAKE_PREFIX_PATH" &&
  echo "opal ${OPAL_PREFIX:-unset}"' 2>&1) || bad "unpacking the fake .gpudeps failed: $got"
echo "$got"
line() { echo "$got" | sed -n "s/^$1 //p" | sed 's/ *$//'; }
[ "$(line je)" = "-I$P/usr/include -L$P/usr/lib/$ML -ljemalloc" ] || bad "jemalloc's .pc not rewritten: $(line je)"
[ "$(line cm)" = "-I$P/usr/include" ] || bad "cmocka's literal -I/usr/include not rewritten: $(line cm)"
[ "$(line ob)" = "-L$P/usr/lib/$ML/openblas-pthread/ -lopenblas" ] || bad "openblas not found under openblas-pthread/: $(line ob)"
[ "$(readlink "$P/usr/lib/$ML/libfakejemalloc.so")" = "$P/usr/lib/$ML/libfakejemalloc.so.2" ] ||
  bad "the absolute .so link still points outside the prefix: $(readlink "$P/usr/lib/$ML/libfakejemalloc.so")"
[ -e "$P/usr/lib/$ML/libopenblas.so" ] || bad "no generic libopenblas.so beside the others"
[ -e "$P/usr/lib/$ML/pkgconfig/openblas.pc" ] || bad "no openblas.pc in the generic pkgconfig/"
case ":$(line pcp):" in *":$P/usr/lib/$ML/openblas-pthread/pkgconfig:"*) ;; *) bad "PKG_CONFIG_PATH lacks openblas-pthread/";; esac
case "$(line ld)" in "$P/usr/lib/$ML:"*) ;; *) bad "DG_DEPS_LD does not start with the prefix's libraries";; esac
case "$(line cpath)" in "$P/usr/include:"*) ;; *) bad "CPATH lacks the prefix's headers";; esac
[ "$(line cmake)" = "$P/usr" ] || [ "${got#*cmake $P/usr:}" != "$got" ] || bad "CMAKE_PREFIX_PATH lacks $P/usr"
# a machine with its own mpicc (this one, and the GPU machine) keeps its OpenMPI unrelocated
if command -v mpicc >/dev/null; then [ "$(line opal)" = unset ] || bad "OPAL_PREFIX set though the system has mpicc"; fi

# ---- 3. the configure line ----
VENV=$TMP/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl
mkdir -p "$VENV/lib" "$VENV/include" "$TMP/cuda/lib64" "$TMP/cuda/include"
touch "$VENV/lib/libnccl.so.2" "$VENV/include/nccl.h"
dry() { (cd "$SRC" && env CUDA_HOME="$TMP/cuda" DG_NCCL_SEARCH="$TMP/opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2" \
  bash scripts/run_gpu_tests.sh --dry-run 2>&1); }
out=$(dry) || bad "--dry-run exited non-zero: $out"
echo "$out"
conf=$(echo "$out" | grep -- ' -DDG_CUDA=ON')
[ -n "$conf" ] || bad "--dry-run printed no configure line"
echo "$conf" | grep -q -- "-DDG_GPU_TESTS=ON" || bad "the cuda tests are not forced on"
echo "$conf" | grep -q -- "-DDG_NCCL_LIB=$VENV/lib/libnccl.so.2" || bad "the venv's libnccl.so.2 is not passed: $conf"
want_inc=$VENV/lib/../include
[ -e /usr/include/nccl.h ] && want_inc=/usr/include
echo "$conf" | grep -q -- "-DDG_NCCL_INCLUDE=$want_inc" || bad "NCCL's header folder ($want_inc) is not passed: $conf"
for s in "ctest --test-dir build-gpu -L cuda" "memcheck" "dagatron train --device cuda" "bench/bench_gpu_vs_torch.sh"; do
  echo "$out" | grep -F -- "$s" | grep -q '^+ timeout' || bad "no time-limited step running '$s'"
done
echo "$out" | grep -q 'dry run: nothing ran' || bad "--dry-run does not say that nothing ran"
# with a libnccl.so beside the toolkit, CMake finds it: no path passed
touch "$TMP/cuda/lib64/libnccl.so"
out=$(dry)
echo "$out" | grep -q -- '-DDG_NCCL_LIB' && bad "-DDG_NCCL_LIB passed though libnccl.so is beside the toolkit"
exit $fail
