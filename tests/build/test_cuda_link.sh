#!/usr/bin/env bash
# test_cuda_link.sh — the CUDA sources compiled and linked against cudart
# (not libcuda), and with no GPU `dagatron cuda` fails with a clear message.
set -u
BIN=${DG_BUILD:?}/dagatron
fail=0
ldd "$BIN" | grep -q 'libcudart' || { echo "FAIL: $BIN does not link libcudart"; fail=1; }
if ldd "$BIN" | grep -q 'libcuda\.so'; then echo "FAIL: $BIN links libcuda (the driver) directly"; fail=1; fi
nm -C "$BIN" | grep -q 'dg_axpy_kernel' || { echo "FAIL: no device kernel symbol in $BIN"; fail=1; }
out=$("$BIN" cuda 2>&1); rc=$?
echo "$out"
echo "$out" | grep -q 'CUDA backend compiled: yes' || { echo "FAIL: CUDA not reported compiled"; fail=1; }
if [ $rc -ne 0 ]; then
  [ $rc -eq 2 ] || { echo "FAIL: exit code $rc, expected 2 without a GPU"; fail=1; }
  echo "$out" | grep -q 'dagatron: CUDA backend: no' || { echo "FAIL: no clear one-line reason"; fail=1; }
fi
exit $fail
