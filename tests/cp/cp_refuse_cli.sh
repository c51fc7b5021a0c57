#!/bin/bash
# Context parallelism's refusals (issue 14, acceptance 4): a sequence length
# not divisible by 2 x cp, an unbuilt --cp-comm-type, CP with TP's chunked
# linears (--tp-comm-overlap), SP whose tp does not divide a CP rank's
# tokens, and CP with the per-sequence aux loss or
# token dropping each exit 2 with one line naming the flags, before any
# work; under mpirun every rank ends with exit 2 and the line is printed
# once; a2a needs cp to divide the heads and query groups of each tp rank.
# And the
# pass's shape in `dagatron dump`: a layer's ring at CP=2 and CP=4 has the
# send/recv pairs, blocks and merges ring attention needs, one positions
# node feeds RoPE, and the loss's sum and count are all-reduced over cp.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
base=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --micro-batch-size 2 --train-iters 1
      --num-experts 0 --num-attention-heads 4)
# refuse WANT COMMAND...: tests/common/refuse.sh
source "$(dirname "$0")/../common/refuse.sh"
refuse() { dg_refuse "$@"; }
refuse "--seq-length 30: must be divisible by 2 x --context-parallel-size = 4" \
    "$exe" train "${base[@]}" --seq-length 30 --context-parallel-size 2
refuse "--seq-length 30: must be divisible by 2 x --context-parallel-size = 4" \
    $DG_MPIRUN -np 2 "$exe" train "${base[@]}" --seq-length 30 --context-parallel-size 2
refuse "--seq-length 36: must be divisible by 2 x --context-parallel-size = 8" \
    $DG_MPIRUN -np 4 "$exe" train "${base[@]}" --seq-length 36 --context-parallel-size 4
# SP's scatter of a CP rank's 26 tokens over tp 4 (issue 30: exit 1 in the CP pass)
refuse "--sequence-parallel with --context-parallel-size 2: --tensor-model-parallel-size 4 does not divide a CP rank's 26 tokens" \
    "$exe" train "${base[@]}" --seq-length 52 --context-parallel-size 2 --tensor-model-parallel-size 4 \
    --sequence-parallel
refuse "--sequence-parallel with --context-parallel-size 2: --tensor-model-parallel-size 4 does not divide a CP rank's 26 tokens" \
    "$exe" simulate "${base[@]}" --seq-length 52 --context-parallel-size 2 --tensor-model-parallel-size 4 \
    --sequence-parallel --world-size 8 --device-profile h100
refuse "--cp-comm-type allgather: not built yet" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --cp-comm-type allgather
refuse "--cp-comm-type a2a: --context-parallel-size 4 must divide --num-attention-heads 4 and the query groups (2)" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 4 --cp-comm-type a2a \
    --group-query-attention --num-query-groups 2
refuse "--tp-comm-overlap with --context-parallel-size 2: not supported yet" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --tensor-model-parallel-size 2 \
    --sequence-parallel --tp-comm-overlap
refuse "--cp-comm-type a2a: --context-parallel-size 2 must divide --num-attention-heads 4 and the query groups (2) per tp rank (--tensor-model-parallel-size 2)" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --tensor-model-parallel-size 2 \
    --cp-comm-type a2a --group-query-attention --num-query-groups 2
refuse "--context-parallel-size 2 with --moe-expert-capacity-factor: not built yet" \
    "$exe" train "${base[@]}" --seq-length 32 --context-parallel-size 2 --num-experts 4 \
    --moe-expert-capacity-factor 1.0
# a bad choice is the flag parser's one line
refuse "--cp-comm-type" "$exe" train "${base[@]}" --seq-length 32 --cp-comm-type ring
# dump: the step graph of one layer at CP=2 and CP=4
for cp in 2 4; do
    "$exe" dump --graph step --format json -o "$TMP/step$cp.json" "${base[@]}" --num-layers 1 --seq-length 32 \
        --position-embedding-type rope --context-parallel-size $cp || fail "dump at CP=$cp failed"
    "${DG_REF_PYTHON:-/usr/bin/python3}" - "$TMP/step$cp.json" $cp <<'PY' || fail "dump at CP=$cp"
import collections, json, sys
d = json.load(open(sys.argv[1]))
cp = int(sys.argv[2])
ops = collections.Counter(n["op"] for n in d["nodes"])
# forward: K and V shifted cp-1 times; backward: K, V, dK, dV cp-1 times,
# then dK and dV home
want = {"send": 2 * (cp - 1) + 4 * (cp - 1) + 2, "recv": 2 * (cp - 1) + 4 * (cp - 1) + 2,
        "cp_attn_block": cp, "cp_attn_block_bwd": cp, "lse_merge": cp - 1, "cp_ring_attn_out": 1,
        "cp_positions": 1, "rope_pos": 4, "cp_xent_sum": 1, "attention": 0, "rope": 0, "softmax_xent": 0}
bad = {k: (ops.get(k, 0), v) for k, v in want.items() if ops.get(k, 0) != v}
if bad:
    sys.exit("op counts (got, want): %s" % bad)
print("CP=%d: %d send/recv pairs, %d blocks, %d merges in one layer's step" % (cp, want["send"], cp, cp - 1))
PY
done
echo "OK"
