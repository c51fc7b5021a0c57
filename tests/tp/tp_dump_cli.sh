#!/bin/bash
# The collectives the TP pass inserts (issue 12, acceptance 2, without SP),
# counted in `dagatron dump` against a table per layout: after the parallel
# passes, per layer, 2 all-reduces over tp (behind the attention projection
# and fc2) and 2 copy_to_group (before QKV and fc1, identities forward); in
# the step graph each copy_to_group's adjoint is one more all-reduce over
# tp in backward, and the forward's all-reduces have none. Outside the
# layers the vocab-parallel embedding's all-reduce, the output layer's
# copy_to_group and one all-gather of the loss statistics: no tensor of
# the whole vocabulary's width exists and the logits are never gathered.
# Also: a size that does not divide the heads or the query groups is one
# line naming both values, exit 2, before any work (TP with experts:
# tests/etp).
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
py=${DG_REF_PYTHON:-/usr/bin/python3}
args=(--mock-data --vocab-size 200 --num-layers 3 --hidden-size 64 --num-attention-heads 4 --seq-length 16
      --micro-batch-size 2 --global-batch-size 2 --num-experts 0)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# One row per layout: name, then its flags. The expected counts are the
# table in the Python below, keyed by the same name: a layout (SP: 2
# all-gathers + 2 reduce-scatters a layer) is one row here and one there.
layouts=(
    "tp1|"
    "tp2|--tensor-model-parallel-size 2"
)
for row in "${layouts[@]}"; do
    name=${row%%|*}
    read -ra flags <<<"${row#*|}"
    "$exe" dump "${args[@]}" "${flags[@]}" --graph forward --after ep -o "$TMP/$name.fwd.json"
    "$exe" dump "${args[@]}" "${flags[@]}" --graph step --after autodiff -o "$TMP/$name.step.json"
done
# the model's vocabulary: --vocab-size 200 is NullTokenizer's 201 ids (200 and
# the end of document, as Megatron), padded to a multiple of tp 2 (dump's
# --make-vocab-size-divisible-by is 1)
vocab=$(((200 + 1 + 1) / 2 * 2))
"$py" - "$TMP" 3 "$vocab" <<'PY' || fail "collective counts"
import collections, json, sys
d, layers, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# name: (per layer forward, per layer backward, outside the layers forward, outside backward),
# each {op: count} over tp; ops not named must not appear. Outside the layers:
# the vocab-parallel embedding's all-reduce, the output layer's copy_to_group
# (backward: the all-reduce of its input's gradient) and the loss statistics'
# all-gather (2 floats a row: the logits are never gathered).
EXPECT = {
    "tp1": ({}, {}, {}, {}),
    "tp2": ({"all_reduce": 2, "copy_to_group": 2}, {"all_reduce": 2},
            {"all_reduce": 1, "copy_to_group": 1, "all_gather": 1}, {"all_reduce": 1}),
}
def load(name, kind):
    return json.load(open(f"{d}/{name}.{kind}.json"))
def counts(g, phase, layer):
    return dict(collections.Counter(n["op"] for n in g["nodes"]
                                    if n["comm"] != "none" and n["phase"] == phase and n["layer"] == layer))
for name, (fl, bl, fo, bo) in EXPECT.items():
    fwd, step = load(name, "fwd"), load(name, "step")
    for g, what in ((fwd, "forward graph"), (step, "step graph")):
        for l in range(layers):
            if counts(g, "forward", l) != fl:
                sys.exit(f"{name} {what}: layer {l} forward {counts(g, 'forward', l)}, expected {fl}")
        if counts(g, "forward", -1) != fo:
            sys.exit(f"{name} {what}: outside the layers forward {counts(g, 'forward', -1)}, expected {fo}")
    for l in range(layers):
        if counts(step, "backward", l) != bl:
            sys.exit(f"{name}: layer {l} backward {counts(step, 'backward', l)}, expected {bl}")
    if counts(step, "backward", -1) != bo:
        sys.exit(f"{name}: outside the layers backward {counts(step, 'backward', -1)}, expected {bo}")
    if name == "tp1":
        continue
    # the logits [.., V] never exist whole on a rank, and no collective moves a vocab-wide slice
    T = step["tensors"]
    whole = [t["name"] for t in T if t["shape"] and t["shape"][-1] == vocab and t["role"] != "parameter"]
    if whole:
        sys.exit(f"{name}: tensors with the whole vocabulary {vocab} as last dim: {whole}")
    for n in step["nodes"]:
        if n["op"] == "all_gather" and T[n["inputs"][0]]["shape"][-1] != 2:
            sys.exit(f"{name}: all_gather of {T[n['inputs'][0]]['name']} {T[n['inputs'][0]]['shape']}")
    emb = [t for t in T if t["name"] == "embedding.word_embeddings.weight"][0]
    if emb["shape"][0] != vocab // 2:
        sys.exit(f"{name}: word embedding {emb['shape']}, expected the vocab split over tp")
print("collective counts as in the table: per layer 2 all_reduce + 2 copy_to_group forward, "
      "2 all_reduce backward; the logits never gathered")
PY
# refusals: one line, exit 2
source "$(dirname "$0")/../common/refuse.sh"
refuse() { dg_refuse "$1" "$exe" train "${@:2}"; }
base=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2
      --train-iters 1 --num-experts 0)
refuse "--tensor-model-parallel-size 3 does not divide --num-attention-heads 8" "${base[@]}" --num-attention-heads 8 \
    --tensor-model-parallel-size 3
# the same under mpirun with 3 ranks (acceptance 4): exit 2 at once, the line printed once
set +e
timeout 60 $DG_MPIRUN -np 3 "$exe" train "${base[@]}" --num-attention-heads 8 --tensor-model-parallel-size 3 \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "np 3 --tensor-model-parallel-size 3 with 8 heads: exit $rc, expected 2"
[ "$(grep -c -- "--tensor-model-parallel-size 3 does not divide --num-attention-heads 8" "$TMP/err")" -eq 1 ] ||
    fail "np 3: expected the line once, got: $(cat "$TMP/err")"
refuse "--tensor-model-parallel-size 4 does not divide --num-query-groups 2" "${base[@]}" --num-attention-heads 8 \
    --group-query-attention --num-query-groups 2 --tensor-model-parallel-size 4
echo "OK"
