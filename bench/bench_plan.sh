#!/usr/bin/env bash
# bench_plan.sh — issue 30, acceptance 4: `dagatron plan` for GPT-3 175B on
# 1024 A100 80GB (global batch 1536, the configuration of Narayanan et al.
# 2021's 1024-GPU run) and for Mixtral 8x7B on 64 H100s (global batch 256,
# the Megatron-Core MoE README's), each timed. Prints each plan and its wall
# seconds.
#   bash bench/bench_plan.sh [--check] [--simulate-top K] [--simulate-budget S]
# --check (the slow test test_plan_published): exit 1 unless each returns in
# under 120 s, its best row fits (memory <= capacity) and the published
# MFU is printed beside the plan's.
set -uo pipefail
D="${DG_BUILD:-build}/dagatron"
check=0
extra=(--simulate-top 2 --simulate-budget 75)
if [ "${1:-}" = --check ]; then
    check=1
    shift
fi
[ $# -gt 0 ] && extra=("$@")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rc=0
GPT=(--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048
     --normalization LayerNorm --position-embedding-type learned_absolute --mock-data --vocab-size 50256 --bf16
     --attention-backend local --attention-dropout 0.1 --global-batch-size 1536)
MIX=(--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention
     --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 --position-embedding-type rope --swiglu
     --normalization RMSNorm --disable-bias-linear --untie-embeddings-and-output-weights --num-experts 8
     --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-grouped-gemm --moe-token-dispatcher-type alltoall
     --mock-data --vocab-size 31999 --bf16 --global-batch-size 256)
run() {
    local name=$1
    shift
    local t0 t1
    t0=$(date +%s.%N)
    "$D" plan "$@" "${extra[@]}" >"$TMP/out" 2>"$TMP/err"
    local st=$?
    t1=$(date +%s.%N)
    local s
    s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    cat "$TMP/out" "$TMP/err"
    echo "== $name: exit $st, $s s"
    [ $check -eq 1 ] || return 0
    [ $st -eq 0 ] || { echo "FAIL: $name: exit $st"; rc=1; }
    awk -v s="$s" 'BEGIN { exit !(s < 120) }' || { echo "FAIL: $name: $s s, over 2 minutes"; rc=1; }
    grep -E '^ +1 +[0-9]+ ' "$TMP/out" | awk '{ split($13, m, "/"); exit !(m[1] + 0 <= m[2] + 0) }' ||
        { echo "FAIL: $name: the best row does not fit"; rc=1; }
    grep -q "beside the published" "$TMP/out" || { echo "FAIL: $name: no published MFU beside"; rc=1; }
}
run "GPT-3 175B, 1024 x A100 80GB" "${GPT[@]}" --world-size 1024 --device-profile a100-80gb
run "Mixtral 8x7B, 64 x H100" "${MIX[@]}" --world-size 64 --device-profile h100
exit $rc
