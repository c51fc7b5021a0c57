#!/usr/bin/env bash
# test_cuda_link.sh — the CUDA sources compiled and linked against cudart,
# cuBLAS and NCCL (never libcuda, the driver), sm_90 code is in the binary,
# and with no GPU `dagatron cuda` fails with a clear one-line message.
set -u
BIN=${DG_BUILD:?}/dagatron
fail=0
for lib in libcudart libcublas libnccl; do
  ldd "$BIN" | grep -q "$lib" || { echo "FAIL: $BIN does not link $lib"; fail=1; }
done
if ldd "$BIN" | grep -q 'libcuda\.so'; then echo "FAIL: $BIN links libcuda (the driver) directly"; fail=1; fi
nm -C "$BIN" | grep -q 'dg_axpy_kernel' || { echo "FAIL: no device kernel symbol in $BIN"; fail=1; }
nm -C "$BIN" | grep -q 'attn_fwd_kernel' || { echo "FAIL: the attention kernel is not in $BIN"; fail=1; }
if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
  CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  "$CUOBJ" --list-elf "$BIN" 2>/dev/null | grep -q 'sm_90' || { echo "FAIL: no sm_90 code in $BIN"; fail=1; }
fi
out=$("$BIN" cuda 2>&1); rc=$?
echo "$out"
echo "$out" | grep -q 'CUDA backend compiled: yes' || { echo "FAIL: CUDA not reported compiled"; fail=1; }
if [ $rc -ne 0 ]; then
  [ $rc -eq 2 ] || { echo "FAIL: exit code $rc, expected 2 without a GPU"; fail=1; }
  echo "$out" | grep -q 'dagatron: CUDA backend: no' || { echo "FAIL: no clear one-line reason"; fail=1; }
else
  echo "$out" | grep -q 'compute capability' || { echo "FAIL: no device line"; fail=1; }
  echo "$out" | grep -q 'cuBLAS .*NCCL' || { echo "FAIL: no library versions"; fail=1; }
fi
exit $fail
