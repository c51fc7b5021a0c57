#!/bin/bash
# Unfused attention (--attention-backend local) under TP without SP splits
# its whole chain by heads (issue 30, item 1): in `dagatron dump`'s step
# graph at TP=2 with --attention-dropout, every op of the chain (scores,
# masked softmax, attention dropout, context, and their backward nodes) sees
# heads/2 heads on the rank, split over tp, and the layers gather nothing
# over tp but SP's [B, S, H] (the dropout once refused the heads split, so the
# probabilities, V and the projection's weight were gathered and the rest
# of the chain ran whole on every rank); the same with SP, and all heads at
# TP=1. And `dagatron simulate`'s graph FLOPs at TP=2 without SP equal the
# SP run's and the single rank's within 1% (they were 1.2x at TP2 and 1.7x
# at TP8 of them).
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
py=${DG_REF_PYTHON:-/usr/bin/python3}
HEADS=4
args=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads $HEADS
      --seq-length 32 --micro-batch-size 2 --global-batch-size 2 --num-experts 0
      --attention-backend local --attention-dropout 0.1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# heads NAME WANT_HEADS WANT_SPLIT DUMP_FLAGS...: the chain's heads in the step graph
heads() {
local name=$1 want=$2 split=$3
shift 3
"$exe" dump "${args[@]}" "$@" --graph step -o "$TMP/$name.json"
"$py" - "$TMP/$name.json" "$want" "$split" "$name" <<'PY' || fail "$name: the unfused chain's heads"
import json, sys
g = json.load(open(sys.argv[1]))
want, split, name = int(sys.argv[2]), sys.argv[3], sys.argv[4]
T = g["tensors"]
chain = ("attn_scores", "attn_softmax", "attn_softmax_bwd", "attn_context", "attn_context_t")
seen = {}
for n in g["nodes"]:
    if n["layer"] < 0:
        continue
    if n["op"] == "all_gather" and n["group"] == "tp":
        x = T[n["inputs"][0]]
        if len(x["shape"]) != 3:  # SP's gathers of [B, S, H] only, never heads or weights
            sys.exit(f"{name}: all-gather over tp of {x['name']} {x['shape']} in layer {n['layer']}")
    # the S x S tensors [B, H, S, S] the chain reads and writes, dropout's included
    for t in [T[i] for i in n["inputs"] + n["outputs"]]:
        if n["op"] not in chain + ("dropout",) or len(t["shape"]) != 4 or t["shape"][2] != t["shape"][3]:
            continue
        seen[n["op"]] = seen.get(n["op"], 0) + 1
        lay = t.get("sharding", {}).get("split", ["none"] * 4)
        if t["shape"][1] != want or lay[1] != split:
            sys.exit(f"{name}: {n['op']} '{n['name']}' reads/writes {t['name']} {t['shape']} split {lay}: "
                     f"expected {want} heads split over '{split}'")
missing = [op for op in chain + ("dropout",) if not seen.get(op)]
if missing:
    sys.exit(f"{name}: no {missing} over [B, H, S, S] in the step graph")
PY
}
heads tp1 $HEADS none
heads tp2 $((HEADS / 2)) tp --tensor-model-parallel-size 2
heads tp2_sp $((HEADS / 2)) tp --tensor-model-parallel-size 2 --sequence-parallel

# the FLOPs the graphs compute, as simulate prints them
sim=(--num-experts 0 --attention-backend local --attention-dropout 0.1 --num-layers 2 --hidden-size 256
     --num-attention-heads 8 --seq-length 256 --max-position-embeddings 256 --micro-batch-size 1
     --global-batch-size 1 --vocab-size 1000)
flops() {
"$exe" simulate "${sim[@]}" "$@" > "$TMP/sim.txt" 2>&1 || { cat "$TMP/sim.txt" >&2; fail "simulate $*"; }
sed -nE 's/.*the graphs compute ([0-9.e+]+).*/\1/p' "$TMP/sim.txt"
}
one=$(flops --world-size 1)
tp2=$(flops --world-size 2 --tensor-model-parallel-size 2)
tp2sp=$(flops --world-size 2 --tensor-model-parallel-size 2 --sequence-parallel)
echo "graph FLOPs: tp1 $one, tp2 $tp2, tp2 with SP $tp2sp"
[ -n "$one" ] && [ -n "$tp2" ] && [ -n "$tp2sp" ] || fail "simulate printed no graph FLOPs"
"$py" - "$one" "$tp2" "$tp2sp" <<'PY' || fail "graph FLOPs at TP=2 without SP"
import sys
one, tp2, sp = map(float, sys.argv[1:])
for what, ref in (("the SP run's", sp), ("the single rank's", one)):
    if abs(tp2 / ref - 1) > 0.01:
        sys.exit(f"TP=2 without SP computes {tp2:.4g} FLOPs, {what} {ref:.4g}: beyond 1%")
PY
echo "OK"
