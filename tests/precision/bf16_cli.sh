#!/usr/bin/env bash
# bf16_cli.sh [ITERS] [main|small] [PRECISION FLAGS] — 16-bit training
# (issues 16 and 27): the logged lm loss stays within 2% of the fp32 run's
# at each of the first 20 iterations, and ends within 2% (the last
# iteration, and the mean of the last 10); the 16 bits are in effect (the
# runs differ); a 16-bit run is bitwise reproducible, on 2 compute threads
# and on 1. "main": the main job's
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
        --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0.0 --attention-dropout 0.0
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
"$BIN" train "${ARGS[@]}" "${PREC[@]}" --compute-threads 2 >"$TMP/bf16.log" 2>&1 ||
    { echo "FAIL: ${PREC[*]} run exited $?"; cat "$TMP/bf16.log"; exit 1; }
"$BIN" train "${ARGS[@]}" "${PREC[@]}" --compute-threads 1 >"$TMP/bf16b.log" 2>&1
loss() { grep -o 'lm loss: [0-9.E+-]*' "$1" | awk '{print $3}' | paste -sd' '; }
python3 - "$(loss "$TMP/fp32.log")" "$(loss "$TMP/bf16.log")" "$ITERS" <<'PY' || fail=1
import sys
a, b, n = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()], int(sys.argv[3])
if len(a) != n or len(b) != n:
    sys.exit(f"FAIL: expected {n} logged losses, got {len(a)} fp32 and {len(b)} bf16")
# The first 20 iterations, one by one: the runs start on the same weights
# and batches, so the curves agree early; later the trajectories drift
# apart by a batch's noise, so the end is judged on the last iteration and
# the mean of the last 10.
early = max(abs(x - y) / abs(x) for x, y in zip(a[:20], b[:20]))
end = abs(a[-1] - b[-1]) / abs(a[-1])
tail = abs(sum(a[-10:]) - sum(b[-10:])) / abs(sum(a[-10:]))
print(f"16-bit vs fp32 over {n} iterations: worst relative difference {early:.4%} in the first 20, "
      f"{end:.4%} at the end ({a[-1]:.5f} / {b[-1]:.5f}), {tail:.4%} over the last 10; first {a[0]:.5f} / {b[0]:.5f}")
if early > 0.02:
    sys.exit("FAIL: the 16-bit loss curve leaves 2% of the fp32 one in the first 20 iterations")
if end > 0.02 or tail > 0.02:
    sys.exit("FAIL: the 16-bit run ends more than 2% from the fp32 one")
if a == b:
    sys.exit("FAIL: 16-bit and fp32 losses are identical: no rounding took place")
PY
[ "$(loss "$TMP/bf16.log")" = "$(loss "$TMP/bf16b.log")" ] &&
    echo "ok: two ${PREC[*]} runs, on 2 compute threads and on 1, are bitwise identical" ||
    { echo "FAIL: two ${PREC[*]} runs (2 compute threads, 1) differ"; fail=1; }
exit $fail
