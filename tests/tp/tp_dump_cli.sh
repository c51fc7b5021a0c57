#!/bin/bash
# The collectives the TP pass inserts (issue 12, acceptance 2, without SP),
# counted in `dagatron dump`: after the parallel passes, per layer, 2
# all-reduces over tp (behind the attention projection and fc2) and 2
# copy_to_group (before QKV and fc1, identities forward) and no all-gather
# (the logits are never gathered); in the step graph each copy_to_group's
# adjoint is one more all-reduce over tp in backward, and the forward's
# all-reduces have none. Also: a size that does not divide the heads or the
# query groups is one line naming both values, exit 2, before any work (TP
# with experts: tests/etp).
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
py=${DG_REF_PYTHON:-/usr/bin/python3}
args=(--mock-data --vocab-size 100 --num-layers 3 --hidden-size 64 --num-attention-heads 4 --seq-length 16
      --micro-batch-size 2 --global-batch-size 2 --num-experts 0)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$exe" dump "${args[@]}" --tensor-model-parallel-size 2 --graph forward --after ep -o "$TMP/fwd.json"
"$exe" dump "${args[@]}" --tensor-model-parallel-size 2 --graph step --after autodiff -o "$TMP/step.json"
"$exe" dump "${args[@]}" --graph forward --after ep -o "$TMP/tp1.json"
"$py" - "$TMP" 3 <<'PY' || fail "collective counts"
import collections, json, sys
d, layers = sys.argv[1], int(sys.argv[2])
def comm(name):
    g = json.load(open(f"{d}/{name}.json"))
    return [n for n in g["nodes"] if n["comm"] != "none"]
fwd = comm("fwd")
per = collections.Counter((n["layer"], n["op"], n["group"]) for n in fwd)
for l in range(layers):
    for op in ("all_reduce", "copy_to_group"):
        if per[(l, op, "tp")] != 2:
            sys.exit(f"layer {l}: {per[(l, op, 'tp')]} {op} over tp, expected 2")
if len(fwd) != 4 * layers:
    sys.exit(f"{len(fwd)} collectives in the forward, expected {4 * layers}: {sorted(per.items())}")
step = collections.Counter((n["op"], n["phase"]) for n in comm("step"))
if step[("all_reduce", "backward")] != 2 * layers or any(op == "all_gather" for op, _ in step):
    sys.exit(f"step: {dict(step)}; expected {2 * layers} backward all-reduces and no all-gather")
if comm("tp1"):
    sys.exit("tp 1: the pass inserted collectives")
print("collectives per layer: 2 all_reduce + 2 copy_to_group forward, 2 all_reduce backward")
PY
# refusals: one line, exit 2
refuse() {
    local want=$1
    shift
    set +e
    "$exe" train "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$TMP/err")"
    grep -qF -- "$want" "$TMP/err" || fail "$*: '$(cat "$TMP/err")' lacks '$want'"
}
base=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2
      --train-iters 1 --num-experts 0)
refuse "--tensor-model-parallel-size 3 does not divide --num-attention-heads 8" "${base[@]}" --num-attention-heads 8 \
    --tensor-model-parallel-size 3
refuse "--tensor-model-parallel-size 4 does not divide --num-query-groups 2" "${base[@]}" --num-attention-heads 8 \
    --group-query-attention --num-query-groups 2 --tensor-model-parallel-size 4
echo "OK"
