#!/usr/bin/env bash
# dump_stages.sh DAGATRON — `dagatron dump --after STAGE` for each
# parallelism's stage of the pipeline (parallel/dg_pipeline.h), on one rank
# of a layout with all of them (TP=2 with SP, CP=2, EP=2, PP=2, DP, bf16):
# each stage's graph holds what that stage adds and nothing a later one
# does, `--after sp` is the tp stage (SP is TP's form), and the logical
# graph is byte-identical to one rank's (the model builder knows no
# parallel size).
set -euo pipefail
exe=$1
py=${DG_REF_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "dump_stages: $*"; exit 1; }

layout=(--tensor-model-parallel-size 2 --sequence-parallel --context-parallel-size 2
        --expert-model-parallel-size 2 --pipeline-model-parallel-size 2 --world-size 16
        --make-vocab-size-divisible-by 32 --bf16)
stages=(logical tp sp cp ep dtype pp autodiff recompute microbatches schedule dp optimizer)
for s in "${stages[@]}"; do
  "$exe" dump -o "$tmp/$s.json" --graph step --after "$s" "${layout[@]}" 2>"$tmp/err" ||
    fail "dump --after $s: $(cat "$tmp/err")"
done
cmp -s "$tmp/tp.json" "$tmp/sp.json" || fail "--after sp is not the tp stage"
"$exe" dump -o "$tmp/one.json" --graph step --after logical --make-vocab-size-divisible-by 32
# the logical graph's name is the same in both; byte-identical across layouts
cmp -s "$tmp/one.json" "$tmp/logical.json" || fail "the logical graph differs between one rank and the layout"

"$py" - "$tmp" <<'PY' || fail "a stage's graph lacks what the stage adds (above)"
import json, os, sys
d = lambda s: json.load(open(os.path.join(sys.argv[1], s + ".json")))
def comms(g):
    return {(n["op"], n["group"]) for n in g["nodes"] if n["stream"] == "comm"}
def groups(g):
    return {grp for (_, grp) in comms(g)}
def ops(g):
    return [n["op"] for n in g["nodes"]]
def split_over(g, axis):
    return any(axis in t["sharding"]["split"] for t in g["tensors"])
lg, tp, cp, ep, dt, pp, dp = (d(s) for s in ("logical", "tp", "cp", "ep", "dtype", "pp", "dp"))
assert not comms(lg) and "moe_experts" in ops(lg), "logical: collectives, or no moe_experts"
# tp: weights split over tp, SP's reduce-scatter, nothing of cp, ep or pp yet
assert split_over(tp, "tp") and ("reduce_scatter", "tp") in comms(tp), "tp: no tp split or SP reduce-scatter"
assert groups(tp) == {"tp"}, "tp: collectives of other axes %s" % groups(tp)
assert "vocab_embedding" in ops(tp) and "vocab_xent" in ops(tp), "tp: the vocabulary ops were not rewritten"
# cp: the inputs split over cp, the ring's send/recv, the loss's sums over cp
tok = [t for t in cp["tensors"] if t["name"] == "tokens"][0]
assert tok["sharding"]["split"][1] == "cp", "cp: tokens not split over cp: %s" % tok
assert ("send", "cp") in comms(cp) and ("all_reduce", "cp") in comms(cp), "cp: no ring or loss reduction"
assert "cp_positions" in ops(cp) and "attention" not in ops(cp), "cp: positions or attention not rewritten"
assert "ep" not in groups(cp) and "moe_experts" in ops(cp), "cp: the experts were lowered too early"
# ep: the experts lowered into all-to-alls over ep
assert "moe_experts" not in ops(ep) and ("all_to_all_v", "ep") in comms(ep), "ep: experts not lowered"
# dtype: the 16-bit working copies
assert "cast" in ops(dt) and any(t["dtype"] == "bf16" for t in dt["tensors"]), "dtype: no casts or bf16"
assert "cast" not in ops(ep), "ep: casts before the dtype stage"
# pp: this rank's stage and its boundary
assert ("send", "pp") in comms(pp) and len(pp["nodes"]) < len(dt["nodes"]), "pp: no stage boundary"
assert "pp" not in groups(dt), "dtype: pp send/recv before the pp stage"
# dp: the gradient reduction over the data-parallel groups
assert groups(dp) & {"dp", "edp"}, "dp: no data-parallel reduction"
assert not (groups(d("schedule")) & {"dp", "edp"}), "schedule: dp collectives before the dp stage"
PY

set +e
"$exe" dump -o "$tmp/x.json" --graph step --after nowhere 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--after nowhere exited $rc, expected 2"
for s in tp cp ep pp dp; do grep -qw "$s" "$tmp/err" || fail "--after's message does not list $s: $(cat "$tmp/err")"; done
echo "dump_stages: ok (${#stages[@]} stages)"
