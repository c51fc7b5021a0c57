#!/bin/bash
# The pipeline schedule, drawn (issue 13, acceptance 5): under mpirun,
# `dagatron train --trace FILE` writes ONE Chrome trace with every rank's
# events (one pid per rank, named "rank r (pp s, tp t)"), and
# `dagatron trace-svg` draws it as the papers do: ranks x time, each
# micro-batch's F and B blocks. Checked with xml.etree for PP=2 under each
# schedule (m=4) and PP=4 under 1F1B (m=8): every rank has a row and every
# micro-batch an F and a B block on it (and a W under zero-bubble-h1, which
# defers the weight gradients); all-forward-all-backward ends every
# forward before the first backward on each rank; 1F1B starts the first
# backward on stage 0 before the last forward; the bubble line is printed.
# Interleaved 1F1B (PP=2, 2 virtual stages, m=4): every micro-batch's F and
# B block of each of the rank's 2 chunks (data-chunk), rank 0 running
# chunk 1 of micro-batch 0 before chunk 0 of micro-batch 2 (Megatron's
# groups of p), and the interleaved theory (p-1)/(v m+p-1) printed.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
common=("${ARCH[@]}" --mock-data --vocab-size 100 --hidden-size 64 --seq-length 32 --micro-batch-size 2
        --num-experts 0 --train-iters 2 --lr 1e-3 --log-interval 1 --num-attention-heads 4 --eval-iters 0
        --compute-threads 1)
# draw NP M SCHEDULE FLAGS...: a traced run, its picture and the checks
# (V: virtual stages a rank, default 1)
draw() {
    local np=$1 m=$2 sched=$3 v=${V:-1}
    shift 3
    local tag="pp$np-$sched-v$v" vflags=()
    [ "$v" -gt 1 ] && vflags=(--num-virtual-stages-per-pipeline-rank "$v")
    $DG_MPIRUN -np "$np" "$exe" train "${common[@]}" --pipeline-model-parallel-size "$np" "${vflags[@]}" \
        --global-batch-size $((2 * m)) --pipeline-schedule "$sched" --trace "$TMP/$tag.json" "$@" \
        >"$TMP/$tag.log" 2>&1 || fail "$tag: the run failed: $(tail -3 "$TMP/$tag.log")"
    "$exe" trace-svg --trace "$TMP/$tag.json" -o "$TMP/$tag.svg" >"$TMP/$tag.out" ||
        fail "$tag: trace-svg failed"
    cat "$TMP/$tag.out"
    local theory="theory (p-1)/(m+p-1) = $((np - 1))/$((m + np - 1))"
    [ "$v" -gt 1 ] && theory="theory interleaved (p-1)/(v m+p-1) = $((np - 1))/$((v * m + np - 1))"
    grep -qF "$theory" "$TMP/$tag.out" && grep -q "^bubble fraction: measured [0-9.]* " "$TMP/$tag.out" ||
        fail "$tag: no bubble line beside the theory '$theory'"
    "${DG_REF_PYTHON:-/usr/bin/python3}" - "$TMP/$tag.json" "$TMP/$tag.svg" "$np" "$m" "$sched" "$v" <<'PY' ||
import json, sys, xml.etree.ElementTree as ET
trace, svg, np_, m, sched = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
v = int(sys.argv[6])
ev = json.load(open(trace))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
if sorted(names) != list(range(np_)):
    sys.exit("the merged trace has processes %s, expected ranks 0..%d" % (sorted(names), np_ - 1))
for r in range(np_):
    if not names[r].startswith("rank %d (pp %d, tp 0" % (r, r)):
        sys.exit("process %d is named %r" % (r, names[r]))
    if not any(e["ph"] == "X" and e["pid"] == r for e in ev):
        sys.exit("rank %d recorded no task" % r)
blocks = {}
for el in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}rect"):
    if el.get("data-rank") is None:
        continue
    x, w = float(el.get("x")), float(el.get("width"))
    key = (int(el.get("data-rank")), int(el.get("data-mb")), el.get("data-phase"))
    blocks.setdefault(key, []).append((x, x + w))
    blocks.setdefault(key + (int(el.get("data-chunk")),), []).append((x, x + w))
for r in range(np_):
    for mb in range(m):
        for ph in ("forward", "backward"):
            for c in range(v):
                if (r, mb, ph, c) not in blocks:
                    sys.exit("%s: rank %d has no %s block of micro-batch %d, chunk %d" % (sched, r, ph, mb, c))
if v > 1 and min(a for a, b in blocks[(0, 0, "forward", 1)]) >= min(a for a, b in blocks[(0, 2, "forward", 0)]):
    sys.exit("interleaved: rank 0 runs micro-batch 2's chunk 0 before micro-batch 0's chunk 1")
for r in range(np_):
    for mb in range(m):
        for ph in ("forward", "backward"):
            if (r, mb, ph) not in blocks:
                sys.exit("%s: rank %d has no %s block of micro-batch %d" % (sched, r, ph, mb))
    if sched == "zero-bubble-h1" and any((r, mb, "weight-grad") not in blocks for mb in range(m)):
        sys.exit("zero-bubble-h1: rank %d lacks a W block of some micro-batch" % r)
    f_end = max(b for mb in range(m) for a, b in blocks[(r, mb, "forward")])
    b_start = min(a for mb in range(m) for a, b in blocks[(r, mb, "backward")])
    if sched == "all-forward-all-backward" and b_start < f_end - 1e-6:
        sys.exit("rank %d: a backward starts before the last forward ends" % r)
if sched == "1f1b" and min(a for a, b in blocks[(0, 0, "backward")]) >= min(a for a, b in blocks[(0, m - 1, "forward")]):
    sys.exit("1f1b: stage 0 runs its last forward before its first backward")
print("%s, pp %d, m %d: %d ranks x %d micro-batches drawn" % (sched, np_, m, np_, m))
PY
        fail "$tag: the picture is wrong"
}
draw 2 4 1f1b --num-layers 4
draw 2 4 all-forward-all-backward --num-layers 4
draw 2 4 zero-bubble-h1 --num-layers 4
draw 4 8 1f1b --num-layers 4
V=2 draw 2 4 1f1b --num-layers 4
# bad input: exit 2, one line naming the file
rc=0
out=$("$exe" trace-svg --trace "$TMP/none.json" -o "$TMP/x.svg" 2>&1) || rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$out" | grep -q -- "--trace $TMP/none.json: cannot read" ||
    fail "a missing trace: rc $rc, '$out'"
echo '{"traceEvents": []}' >"$TMP/empty.json"
rc=0
out=$("$exe" trace-svg --trace "$TMP/empty.json" -o "$TMP/x.svg" 2>&1) || rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$out" | grep -q "no micro-batch tasks" || fail "an empty trace: rc $rc, '$out'"
echo OK
