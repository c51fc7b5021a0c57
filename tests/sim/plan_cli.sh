#!/usr/bin/env bash
# plan_cli.sh — issue 30, `dagatron plan`:
#  1. a small GPT on 8 A100s: a ranked table whose first row fits its
#     memory and was simulated; its printed `mpirun ... dagatron train` line,
#     given to `dagatron simulate`, runs (exit 0) and the memory simulate
#     prints is the plan's; every printed row's memory is within capacity;
#  2. a tiny model on 2 and 4 ranks of this machine: the first printed line
#     trains one iteration under mpirun, with the user's own flags
#     (--train-iters) kept and the plan's layout flags replacing theirs;
#  3. GPT-3 175B on 8 A100 40GB: nothing fits, one line naming the need and
#     the capacity, exit 2;
#  4. bad flags: one line, exit 2.
set -uo pipefail
D="$DG_BUILD/dagatron"
here=$(dirname "$0")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rc_all=0
fail() { echo "FAIL: $*" >&2; rc_all=1; }
source "$here/../common/refuse.sh"

# the flags after "dagatron train" of printed command n
flags_of() { grep "^$1: mpirun" "$2" | sed 's/^.*dagatron train //'; }

# ---- 1. a small GPT on 8 A100s ---------------------------------------------------------------
SMALL=(--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024
       --mock-data --vocab-size 50256 --bf16 --global-batch-size 32 --tensor-model-parallel-size 2)
if timeout 300 "$D" plan "${SMALL[@]}" --world-size 8 --device-profile a100 --top 4 --simulate-top 2 \
    >"$TMP/p1" 2>"$TMP/e1"; then
    cat "$TMP/p1"
    grep -q "^plan: 8 x a100" "$TMP/p1" || fail "no summary line"
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$TMP/p1")
    [ "$rows" -eq 4 ] || fail "--top 4 printed $rows rows"
    # every row: memory (mem/cap column) within the capacity
    grep -E '^ +[0-9]+ +[0-9]+ ' "$TMP/p1" | awk '{ split($13, m, "/"); if (m[1] + 0 > m[2] + 0 || m[2] + 0 != 80) exit 1 }' ||
        fail "a row over the 80 GB capacity"
    # the first row was simulated: a step time and an MFU in (0, 100)
    first=$(grep -E '^ +1 +[0-9]+ ' "$TMP/p1")
    echo "$first" | awk '{ s = $(NF-1); f = $NF; sub("%", "", f); f += 0; exit !(s + 0 > 0 && f > 0 && f < 100) }' ||
        fail "the best row was not simulated: $first"
    # simulated rows are ranked by their simulated step
    grep -E '^ +[0-9]+ +[0-9]+ ' "$TMP/p1" | awk '$NF ~ /%$/ { if ($(NF-1) + 0 < last) bad = 1; last = $(NF-1) + 0 }
        END { exit bad }' || fail "simulated rows not in order of their step"
    n=$(grep -c "^[0-9]: mpirun -np 8 dagatron train " "$TMP/p1")
    [ "$n" -eq 4 ] || fail "$n command lines, expected 4"
    read -r -a F <<<"$(flags_of 1 "$TMP/p1")"
    [ "$(printf '%s\n' "${F[@]}" | grep -c -- '--tensor-model-parallel-size')" -eq 1 ] ||
        fail "the user's --tensor-model-parallel-size was not replaced: ${F[*]}"
    if timeout 300 "$D" simulate "${F[@]}" --world-size 8 --device-profile a100 >"$TMP/s1" 2>"$TMP/se1"; then
        gb=$(grep "memory per GPU" "$TMP/s1" | awk '{print $4}')
        pm=$(echo "$first" | awk '{ split($13, m, "/"); print m[1] }')
        awk -v a="$gb" -v b="$pm" 'BEGIN { d = a - b; exit !(d < 0.15 && d > -0.15) }' ||
            fail "simulate's memory $gb GB is not the plan's $pm GB"
    else
        fail "the plan's first line does not simulate: $(cat "$TMP/se1")"
    fi
else
    fail "plan of the small GPT: $(cat "$TMP/e1")"
fi

# ---- 1b. GPT-3 175B on 64 A100s: many layouts pass train's checks but do not fit; the best fits ------
G175=(--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048
      --mock-data --vocab-size 50256 --bf16 --global-batch-size 64)
if timeout 120 "$D" plan "${G175[@]}" --world-size 64 --device-profile a100 --simulate-top 0 >"$TMP/p3" 2>"$TMP/e3"; then
    head -3 "$TMP/p3"
    head -1 "$TMP/p3" | sed 's/.*layouts, \([0-9]*\) pass.*checks, \([0-9]*\) fit.*/\1 \2/' |
        awk '{ exit !($2 + 0 > 0 && $2 + 0 < $1 + 0) }' || fail "175B on 64: not some but not all fit: $(head -1 "$TMP/p3")"
    grep -E '^ +1 +[0-9]+ ' "$TMP/p3" | awk '{ split($13, m, "/"); exit !(m[1] + 0 <= m[2] + 0) }' ||
        fail "175B on 64: the best row does not fit"
    grep -q "beside the published 51.4%" "$TMP/p3" || fail "175B: no published MFU beside the plan's"
else
    fail "plan of 175B on 64 A100s: $(cat "$TMP/e3")"
fi

# ---- 2. a tiny model, trained as planned under mpirun ------------------------------------------
TINY=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16
      --mock-data --vocab-size 255 --global-batch-size 8 --micro-batch-size 2 --train-iters 1)
for np in 2 4; do
    if "$D" plan "${TINY[@]}" --world-size $np --device-profile local --simulate-top 0 --top 1 >"$TMP/p2" 2>"$TMP/e2"; then
        read -r -a F <<<"$(flags_of 1 "$TMP/p2")"
        printf '%s\n' "${F[@]}" | grep -qx -- '--train-iters' || fail "np $np: --train-iters dropped: ${F[*]}"
        grep "^1: mpirun -np $np dagatron train" "$TMP/p2" >/dev/null || fail "np $np: no mpirun -np $np line"
        # shellcheck disable=SC2086
        if timeout 300 $DG_MPIRUN -np $np "$D" train "${F[@]}" >"$TMP/t2" 2>&1; then
            grep -q "done: 1 iterations" "$TMP/t2" || fail "np $np: no iteration trained: $(tail -3 "$TMP/t2")"
        else
            fail "np $np: the planned line does not train: $(tail -3 "$TMP/t2")"
        fi
    else
        fail "plan of the tiny model on $np: $(cat "$TMP/e2")"
    fi
done

# ---- 2b. the same on 4 ranks of devices too small for DP alone: the plan splits the model (TP
# or PP), and that line trains too. A100-like profiles of 400 kB and 300 kB (the tiny model's
# fp32 weights and Adam state alone are about 600 kB a replica).
for cap in 400000 300000; do
    "${DG_REF_PYTHON:-/usr/bin/python3}" - "$TMP/cap.json" "$cap" <<'PY'
import json, sys
k = ("gemm", "attention", "elemwise", "embed", "optim")
json.dump({"name": "tiny", "peak_fp32": 19.5e12, "peak_16": 312e12, "mem_bytes_per_s": 2.039e12, "task_s": 2e-6,
           "comm_task_s": 8.4e-6, "eff": {x: 0.5 for x in k}, "mem_eff": {x: 0.8 for x in k},
           "intra": {"gbps": 240, "usec": 3.4}, "inter": {"gbps": 22.5, "usec": 9.6}, "devices_per_node": 8,
           "native16": 1, "mem_capacity_bytes": float(sys.argv[2])}, open(sys.argv[1], "w"))
PY
    if "$D" plan "${TINY[@]}" --world-size 4 --device-profile "$TMP/cap.json" --simulate-top 0 --top 1 >"$TMP/p4" 2>"$TMP/e4"; then
        grep -E '^ +1 +[0-9]+ ' "$TMP/p4" | awk '{ exit !($2 > 1 || $3 > 1) }' ||
            fail "$cap bytes: the best layout splits nothing: $(grep -E '^ +1 ' "$TMP/p4")"
        read -r -a F <<<"$(flags_of 1 "$TMP/p4")"
        # shellcheck disable=SC2086
        timeout 300 $DG_MPIRUN -np 4 "$D" train "${F[@]}" >"$TMP/t4" 2>&1 && grep -q "done: 1 iterations" "$TMP/t4" ||
            fail "$cap bytes: the planned line does not train: ${F[*]}: $(tail -3 "$TMP/t4")"
    else
        fail "plan of the tiny model on $cap-byte devices: $(cat "$TMP/e4")"
    fi
done

# ---- 3. nothing fits --------------------------------------------------------------------------
BIG=(--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048
     --mock-data --vocab-size 50256 --bf16 --global-batch-size 8)
dg_refuse "nothing fits: the smallest of" timeout 120 "$D" plan "${BIG[@]}" --world-size 8 --device-profile a100-40gb
grep -q "GB of 40.0 GB per GPU" "$TMP/refuse.err" || fail "no need beside the capacity: $(cat "$TMP/refuse.err")"

# ---- 4. bad flags -----------------------------------------------------------------------------
dg_refuse "--world-size" "$D" plan "${TINY[@]}"
dg_refuse "--world-size" "$D" plan "${TINY[@]}" --world-size 0
dg_refuse "--global-batch-size" "$D" plan --num-layers 2 --hidden-size 32 --num-attention-heads 4 --world-size 2
dg_refuse "--bogus" "$D" plan "${TINY[@]}" --world-size 2 --bogus 3
dg_refuse "--device-profile" "$D" plan "${TINY[@]}" --world-size 2 --device-profile "$TMP/nope.json"
dg_refuse "--simulate-budget" "$D" plan "${TINY[@]}" --world-size 2 --simulate-budget -1
exit $rc_all
