#!/usr/bin/env bash
# sim_memory_cli.sh — issue 30 item 3: `dagatron simulate` prints the memory
# model's bytes per GPU beside the device's capacity, and refuses a
# configuration that does not fit in one line (exit 2, before building it).
#  - GPT 1.7B (hidden 2304, 24 layers, seq 2048), full recompute, TP 1 PP 1
#    on an A100 80GB: fits; 18 bytes a parameter (~30 GB) and a few GB of
#    activations, not the 165 GB the planner's figure used to print;
#  - GPT-3 175B at TP 1 PP 1 on one A100 80GB: "does not fit: needs X GB of
#    80.0 GB per GPU", naming the optimizer state;
#  - a JSON profile's mem_capacity_bytes is the capacity checked.
set -uo pipefail
D="$DG_BUILD/dagatron"
here=$(dirname "$0")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rc_all=0
fail() { echo "FAIL: $*" >&2; rc_all=1; }
source "$here/../common/refuse.sh"
GPT=(--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --mock-data --vocab-size 50256 --bf16
     --normalization LayerNorm --position-embedding-type learned_absolute --global-batch-size 1)
SMALL=("${GPT[@]}" --num-layers 24 --hidden-size 2304 --num-attention-heads 24 --recompute-granularity full
       --recompute-method uniform --recompute-num-layers 1)
if "$D" simulate "${SMALL[@]}" --device-profile a100 >"$TMP/o" 2>"$TMP/e"; then
    line=$(grep "memory per GPU" "$TMP/o")
    gb=$(echo "$line" | awk '{print $4}')
    echo "$line"
    echo "$line" | grep -q "GB of 80.0 GB" || fail "no capacity beside the memory: $line"
    # 1.65e9 parameters x 18 bytes = 29.7 GB, activations under 2 GB
    awk -v g="$gb" 'BEGIN { exit !(g > 28 && g < 34) }' || fail "1.7B with full recompute: $gb GB per GPU"
    grep -q "activations" "$TMP/o" || fail "no breakdown: $(cat "$TMP/o")"
else
    fail "the 1.7B model on an A100 was refused: $(cat "$TMP/e")"
fi
BIG=("${GPT[@]}" --num-layers 96 --hidden-size 12288 --num-attention-heads 96)
dg_refuse "does not fit: needs" timeout 30 "$D" simulate "${BIG[@]}" --device-profile a100
grep -q "of 80.0 GB per GPU" "$TMP/refuse.err" && grep -q "the biggest: optimizer state" "$TMP/refuse.err" ||
    fail "the refusal names neither the capacity nor the biggest part: $(cat "$TMP/refuse.err")"
# on the 40 GB part the 1.7B model with an fp32 run (16 B a parameter) still
# fits, and a 2.7B one (32 layers, hidden 2560) at 18 B a parameter does not
dg_refuse "of 40.0 GB per GPU" "$D" simulate "${GPT[@]}" --num-layers 32 --hidden-size 2560 --num-attention-heads 32 \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --device-profile a100-40gb
# a profile file's capacity: the a100's figures with 20 GB
"${DG_REF_PYTHON:-/usr/bin/python3}" - "$TMP" <<'PY'
import json, sys
p = {"name": "small", "peak_fp32": 19.5e12, "peak_16": 312e12, "mem_bytes_per_s": 2.039e12, "task_s": 2e-6,
     "comm_task_s": 8.4e-6, "eff": {k: 0.5 for k in ("gemm", "attention", "elemwise", "embed", "optim")},
     "mem_eff": {k: 0.8 for k in ("gemm", "attention", "elemwise", "embed", "optim")},
     "intra": {"gbps": 240, "usec": 3.4}, "inter": {"gbps": 22.5, "usec": 9.6}, "devices_per_node": 8,
     "native16": 1, "mem_capacity_bytes": 20e9}
json.dump(p, open(sys.argv[1] + "/small.json", "w"))
PY
dg_refuse "of 20.0 GB per GPU" "$D" simulate "${SMALL[@]}" --device-profile "$TMP/small.json"
exit $rc_all
