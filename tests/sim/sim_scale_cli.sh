#!/usr/bin/env bash
# sim_scale_cli.sh — issue 30 item 5: a 1T-parameter model on 3072 GPUs
# (Megatron's README row: TP 8 x PP 64 x DP 6, global batch 3072, so 512
# micro-batches on 64 stages) simulates: exit 0, its 64 stages' rows, the
# step extrapolated from runs of 64 and 128 micro-batches (sim/dg_sim_run.c),
# and an MFU within ±25% of the published 56.3%; `--table published --row
# 'GPT 1T'` prints its row. Not timed (bench/bench_simulate.sh scale is).
set -uo pipefail
D="$DG_BUILD/dagatron"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rc_all=0
fail() { echo "FAIL: $*" >&2; rc_all=1; }
T1=(--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --normalization LayerNorm
    --position-embedding-type learned_absolute --mock-data --vocab-size 50256 --bf16 --sequence-parallel
    --recompute-activations --attention-backend local --attention-dropout 0.1
    --num-layers 128 --hidden-size 25600 --num-attention-heads 160
    --tensor-model-parallel-size 8 --pipeline-model-parallel-size 64 --global-batch-size 3072)
if "$D" simulate "${T1[@]}" --world-size 3072 --device-profile a100 >"$TMP/o" 2>"$TMP/e"; then
    head -9 "$TMP/o"
    grep -q "^simulated step on 3072 x a100: tp 8, cp 1, ep 1, pp 64, data-parallel 6, 512 micro-batches" "$TMP/o" ||
        fail "not the 3072-GPU layout: $(head -1 "$TMP/o")"
    grep -q "512 micro-batches on 64 stages: extrapolated from runs of 64 and 128" "$TMP/e" ||
        fail "not extrapolated: $(grep -v 'stage [0-9]* of' "$TMP/e")"
    rows=$(awk '/^  stage /{on=1; next} on && /^  [0-9]+ /{n++} END{print n+0}' "$TMP/o")
    [ "$rows" = 64 ] || fail "$rows stage rows, not 64"
    mfu=$(awk '/^  MFU/{print $2}' "$TMP/o")
    awk -v m="$mfu" 'BEGIN { exit !(m >= 0.75 * 56.3 && m <= 1.25 * 56.3) }' || fail "MFU $mfu% vs published 56.3%"
else
    fail "simulate 1T on 3072 GPUs: exit $?: $(tail -2 "$TMP/e")"
fi
if "$D" simulate --table published --row "GPT 1T" >"$TMP/t" 2>&1; then
    cat "$TMP/t"
    grep -qE "^GPT 1T +a100 +TP8 PP64 DP1 +512 .* yes " "$TMP/t" || fail "no GPT 1T row within ±25%"
else
    fail "--table published --row 'GPT 1T': $(cat "$TMP/t")"
fi
exit $rc_all
