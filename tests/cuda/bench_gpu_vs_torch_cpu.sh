#!/usr/bin/env bash
# bench_gpu_vs_torch_cpu.sh — the CPU path of bench/bench_gpu_vs_torch.sh
# (the GPU benchmark of issue 26) as a smoke check: tiny shapes, --device
# cpu, Debian's torch. Both shapes must print a RESULT line with positive
# tokens/s on each side, and the bench itself checks that dagatron's and
# PyTorch's models have the same parameter count.
set -u
out=$(cd "$DG_SRC" && BUILD="$DG_BUILD" DEVICE=cpu TINY=1 ITERS=3 THREADS=1 PYTHON="${DG_REF_PYTHON:-/usr/bin/python3}" \
      bash bench/bench_gpu_vs_torch.sh 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: bench_gpu_vs_torch.sh exited $rc"; exit 1; }
fail=0
for shape in moe dense; do
  echo "$out" | awk -v s="$shape" '$1 == "RESULT" && $2 == s && $4 > 0 && $6 > 0 && $8 > 0 { ok = 1 } END { exit !ok }' \
    || { echo "FAIL: no RESULT line with positive tokens/s for $shape"; fail=1; }
done
exit $fail
