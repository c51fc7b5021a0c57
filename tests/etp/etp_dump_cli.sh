#!/bin/bash
# MoE under tensor parallelism in `dagatron dump` and the startup line
# (issue 12): at TP=2 x EP=2 on 4 ranks,
#  - ETP=2: each expert weight is split over ep (dim 0) and tp (fc1 dim 1,
#    gate and up each: "tp/2"; fc2 dim 2), the expert MLP of every chunk has
#    a copy_to_group and an all-reduce over tp, and the expert gradient
#    buckets reduce over edp of 1 rank (cp x dp);
#  - ETP=1: expert weights are split over ep only, the MoE layer ends in one
#    all-reduce over tp (the tp ranks' token slices), and the expert
#    buckets reduce over edp of 2 ranks (tp x cp x dp);
#  - the rank grid line shows both foldings;
#  - a bad --expert-tensor-parallel-size exits 2 with one line.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
py=${DG_REF_PYTHON:-/usr/bin/python3}
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags")) # the MoE architecture these tests were written for
model=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --num-experts 4)
par=(--tensor-model-parallel-size 2 --expert-model-parallel-size 2)
args=("${model[@]}" --moe-ffn-hidden-size 32 "${par[@]}" --world-size 4)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for etp in 1 2; do
    "$exe" dump "${args[@]}" --expert-tensor-parallel-size $etp --graph step -o "$TMP/step$etp.json"
done
"$py" - "$TMP" <<'PY' || fail "dump"
import collections, json, sys
d = sys.argv[1]
def load(etp):
    return json.load(open(f"{d}/step{etp}.json"))
def split(g, suffix):
    ts = [t for t in g["tensors"] if t["role"] == "parameter" and t["name"].endswith(suffix)]
    if not ts: sys.exit(f"no parameter *{suffix}")
    return {tuple(t["sharding"]["split"]) for t in ts}
def comm(g):
    return collections.Counter((n["op"], n["group"], n["phase"]) for n in g["nodes"] if n["comm"] != "none")
def bucket_groups(g):
    out = set()
    for n in g["nodes"]:
        if n["comm"] != "none" and n["name"].startswith("dp_bucket"):
            out.add((n["group"], n["attrs"]["group_size"]))
    return out
g2, g1 = load(2), load(1)
want = {2: ({("ep", "tp/2", "none")}, {("ep", "none", "tp")}), 1: ({("ep", "none", "none")}, {("ep", "none", "none")})}
for etp, g in ((2, g2), (1, g1)):
    got = (split(g, "experts.linear_fc1.weight"), split(g, "experts.linear_fc2.weight"))
    if got != want[etp]: sys.exit(f"ETP {etp}: expert weights laid out {got}, expected {want[etp]}")
def fwd_etp(g):
    return [n for n in g["nodes"] if n["name"].startswith("etp_") and n["phase"] == "forward"]
names2 = collections.Counter(n["name"].split(".")[0] for n in fwd_etp(g2))
per = 2 * len({n["microbatch"] for n in fwd_etp(g2)})  # 2 MoE layers per micro-batch
if names2["etp_copy"] != per or names2["etp_reduce"] != per:
    sys.exit(f"ETP 2: {dict(names2)}; expected an etp_copy and an etp_reduce per MoE layer")
names1 = collections.Counter(n["name"] for n in fwd_etp(g1))
per = 2 * len({n["microbatch"] for n in fwd_etp(g1)})
if names1["etp_all_reduce"] != per or names1["etp_mask_rows"] != per:
    sys.exit(f"ETP 1: {dict(names1)}; expected one etp_all_reduce and etp_mask_rows per MoE layer")
for etp, g, size in ((2, g2, 1), (1, g1, 2)):
    edp = {s for grp, s in bucket_groups(g) if grp == "edp"}
    if edp != {size}: sys.exit(f"ETP {etp}: expert buckets reduce over edp of {edp} ranks, expected {size}")
print("ETP 2: experts split over ep x tp, edp 1; ETP 1: experts split over ep, edp 2 (tp x dp)")
PY
# refusals: one line, exit 2
source "$(dirname "$0")/../common/refuse.sh"
refuse() { dg_refuse "$1" "$exe" "${@:2}"; }
refuse "--expert-tensor-parallel-size 4: expected 1 or --tensor-model-parallel-size 2" \
    dump "${args[@]}" --expert-tensor-parallel-size 4 -o "$TMP/bad.json"
refuse "--expert-tensor-parallel-size 2: expected 1 or --tensor-model-parallel-size 1" \
    train "${model[@]}" --train-iters 1 --expert-tensor-parallel-size 2
refuse "--expert-tensor-parallel-size 2 does not divide --moe-ffn-hidden-size 33" \
    train "${model[@]}" --moe-ffn-hidden-size 33 --train-iters 1 --tensor-model-parallel-size 2
# the startup line names both foldings
$DG_MPIRUN -np 4 "$exe" train "${model[@]}" "${par[@]}" --expert-tensor-parallel-size 1 --train-iters 1 >"$TMP/log" 2>&1 || fail "train: $(tail -3 "$TMP/log")"
grep -qF "rank grid: world 4 = tp 2 x cp 1 x ep 2 x dp 1 x pp 1; data-parallel size 2; experts: etp 1 x ep 2 x edp 2 (edp = tp x cp x dp)" \
    "$TMP/log" || fail "rank grid line: $(grep "rank grid" "$TMP/log")"
echo "OK"
