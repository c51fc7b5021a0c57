#!/usr/bin/env bash
# bf16_cli.sh [ITERS] [main|small] [PRECISION FLAGS] — 16-bit training
# (issue 16, acceptance 3): the logged lm loss of every logged iteration
# stays within 2% of the fp32 run's; the rounding is in effect (the runs
# differ); a 16-bit run is bitwise reproducible. "main": the main job's
# model (scripts/run_main.sh, one rank); default: a small one. PRECISION
# FLAGS: --bf16 (default), or e.g. --fp16 --loss-scale 1024.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ITERS=${1:-20}
PREC=(${3:---bf16})
if [ "${2:-}" = main ]; then
  ARGS=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --group-query-attention --num-query-groups 4
        --seq-length 128 --max-position-embeddings 128 --swiglu --untie-embeddings-and-output-weights
        --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0.0
        --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3
        --micro-batch-size 4 --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 --lr-warmup-iters 20 --lr-decay-style cosine
        --seed 1234)
else
  ARGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --swiglu --disable-bias-linear
        --normalization RMSNorm --position-embedding-type rope --num-experts 4 --moe-router-topk 2
        --moe-aux-loss-coeff 1e-2 --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --lr-warmup-iters 5)
fi
ARGS+=(--train-iters "$ITERS" --log-interval 1 --eval-iters 0)
fail=0
"$BIN" train "${ARGS[@]}" >"$TMP/fp32.log" 2>&1 || { echo "FAIL: fp32 run exited $?"; cat "$TMP/fp32.log"; exit 1; }
"$BIN" train "${ARGS[@]}" "${PREC[@]}" >"$TMP/bf16.log" 2>&1 || { echo "FAIL: ${PREC[*]} run exited $?"; cat "$TMP/bf16.log"; exit 1; }
"$BIN" train "${ARGS[@]}" "${PREC[@]}" >"$TMP/bf16b.log" 2>&1
loss() { grep -o 'lm loss: [0-9.E+-]*' "$1" | awk '{print $3}' | paste -sd' '; }
python3 - "$(loss "$TMP/fp32.log")" "$(loss "$TMP/bf16.log")" "$ITERS" <<'PY' || fail=1
import sys
a, b, n = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()], int(sys.argv[3])
if len(a) != n or len(b) != n:
    sys.exit(f"FAIL: expected {n} logged losses, got {len(a)} fp32 and {len(b)} bf16")
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"16-bit vs fp32 over {n} iterations: worst relative difference {worst:.4%}; "
      f"first {a[0]:.5f} / {b[0]:.5f}, last {a[-1]:.5f} / {b[-1]:.5f}")
if worst > 0.02:
    sys.exit("FAIL: the 16-bit loss curve leaves 2% of the fp32 one")
if a == b:
    sys.exit("FAIL: 16-bit and fp32 losses are identical: no rounding took place")
PY
[ "$(loss "$TMP/bf16.log")" = "$(loss "$TMP/bf16b.log")" ] && echo "ok: two ${PREC[*]} runs are bitwise identical" \
  || { echo "FAIL: two ${PREC[*]} runs differ"; fail=1; }
exit $fail
