#!/usr/bin/env bash
# bf16_memory.sh — 16-bit tensors take half the memory (issue 27,
# acceptance 1): the main job's model and layout (scripts/run_main.sh: 2
# ranks, EP 2) plans its activation peak (the recompute planner's figure:
# the micro-batches' forward and backward in the arena, as the log's
# "activation memory (MB): N planned" reports it) with --bf16 at most 0.55x
# of fp32's, and with --fp16 too. The 16-bit working copies of the
# parameters are the step's weights, kept beside the parameters as
# Megatron keeps its bf16 weights, not activations: the persistent figures
# grow by half the parameters' bytes.
set -euo pipefail
exe=$DG_BUILD/dagatron
ARGS=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --group-query-attention --num-query-groups 4
      --seq-length 128 --max-position-embeddings 128 --swiglu --untie-embeddings-and-output-weights
      --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0.0 --attention-dropout 0.0
      --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --expert-model-parallel-size 2
      --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --micro-batch-size 4 --global-batch-size 8
      --lr 1e-3 --lr-warmup-iters 0 --seed 1234 --train-iters 1 --log-interval 1 --eval-iters 0
      --recompute-memory-budget 100000)
peak() { # FLAGS... -> the planned activation peak in MiB (no recompute)
    $DG_MPIRUN -np 2 "$exe" train "${ARGS[@]}" "$@" 2>&1 |
        sed -n 's/.*planned activation peak \([0-9.]*\) MiB -> .*/\1/p' | head -1
}
fp32=$(peak)
[ -n "$fp32" ] || { echo "FAIL: the fp32 run printed no planned activation peak"; exit 1; }
fail=0
for p in --bf16 "--fp16 --loss-scale 1024"; do
    got=$(peak $p)
    [ -n "$got" ] || { echo "FAIL: the $p run printed no planned activation peak"; fail=1; continue; }
    python3 - "$got" "$fp32" "$p" <<'PY' || fail=1
import sys
got, ref, what = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print(f"planned activation peak: {what} {got:.3f} MiB, fp32 {ref:.3f} MiB: {got / ref:.3f}x")
if got > 0.55 * ref:
    sys.exit(f"FAIL: {what}'s activation peak is more than 0.55x of fp32's")
PY
done
exit $fail
