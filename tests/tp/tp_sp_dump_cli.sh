#!/bin/bash
# The collectives sequence parallelism inserts (issue 12, acceptance 2, SP
# half), counted in `dagatron dump` after the TP pass: per layer forward 2
# all-gathers (before QKV and fc1) and 2 reduce-scatters (behind the
# attention projection and fc2) over tp on the sequence, no all-reduce and
# no all-gather of the logits (the one before the output layer gathers the
# final norm's [B, S, H]); in the step graph their adjoints (2
# reduce-scatters and 2 all-gathers per layer backward) and the all-reduce
# over tp of each norm parameter's gradient (each rank summed it
# over its own tokens; weights and biases of LayerNorm), with SwiGLU, RMSNorm
# and RoPE and with LayerNorm, learned positions and dropout (which runs on
# the slice, with the tp coordinate). The verifier ran after each stage, so its
# grad-group rule (every parameter replicated over tp under a tp slice is
# all-reduced over tp, and only those) holds too.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
py=${DG_REF_PYTHON:-/usr/bin/python3}
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 3 --hidden-size 64 --num-attention-heads 4
      --seq-length 16 --micro-batch-size 2 --global-batch-size 2 --num-experts 0)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
sp=(--tensor-model-parallel-size 2 --sequence-parallel)
# at tp 1 Megatron turns SP off: the same graph as without the flag
"$exe" dump "${args[@]}" --sequence-parallel --graph forward --after ep -o "$TMP/tp1.json"
# counts ARCH FLAGS...: the same counts for another architecture
counts() {
local arch=$1
shift
"$exe" dump "$@" "${sp[@]}" --graph forward --after ep -o "$TMP/fwd.json"
"$exe" dump "$@" "${sp[@]}" --graph step --after autodiff -o "$TMP/step.json"
"$py" - "$TMP" 3 100 "$arch" <<'PY' || fail "$arch: collective counts"
import collections, json, sys
d, layers, vocab, arch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def load(name):
    g = json.load(open(f"{d}/{name}.json"))
    return g, [n for n in g["nodes"] if n["comm"] != "none"]
g, fwd = load("fwd")
per = collections.Counter((n["layer"], n["op"], n["group"]) for n in fwd)
for l in range(layers):
    for op in ("all_gather", "reduce_scatter"):
        if per[(l, op, "tp")] != 2:
            sys.exit(f"layer {l}: {per[(l, op, 'tp')]} {op} over tp in the forward, expected 2: {sorted(per.items())}")
# the one forward all-reduce allowed is the vocab-parallel lookup's with
# learned positions (added to the whole sequence before the scatter, as
# Megatron does); without them the lookup is reduce-scattered
if any(n["op"] == "all_reduce" and n["layer"] >= 0 for n in fwd) or per[(-1, "all_reduce", "tp")] > 1:
    sys.exit(f"an all-reduce in the layers' forward under SP: {sorted(per.items())}")
for n in fwd:
    if n["op"] == "all_gather":
        if g["tensors"][n["inputs"][0]]["name"].startswith("vocab_xent_stats"):
            continue  # the vocab-parallel cross entropy's 2 floats per token
        shape = g["tensors"][n["inputs"][0]]["shape"]
        if n["attrs"]["dim"] != 1 or shape[-1] == vocab:
            sys.exit(f"all_gather of {shape} on dim {n['attrs']['dim']}: expected the sequence of [B, S, H]")
# dropout runs on the slice, in its form with the tp coordinate
for n in g["nodes"]:
    if n["op"] == "dropout" and (len(n["inputs"]) != 3 or g["tensors"][n["inputs"][2]]["name"] != "tp_rank"):
        sys.exit(f"dropout {n['name']} without the tp coordinate")
sg, step = load("step")
bwd = collections.Counter((n["layer"], n["op"]) for n in step if n["phase"] == "backward")
pnames = [t["name"] for t in sg["tensors"] if t["role"] == "parameter"]
for l in range(layers):
    n_norm = sum(f"layers.{l}." in p and "layernorm" in p for p in pnames)
    want = {"reduce_scatter": 2, "all_gather": 2, "all_reduce": n_norm}
    got = {op: bwd[(l, op)] for op in want}
    if got != want:
        sys.exit(f"layer {l} backward: {got}, expected {want}")
# each all-reduce in backward reduces a parameter's gradient (a norm weight)
params = {t["grad"]: t["name"] for t in sg["tensors"] if t["role"] == "parameter" and t["grad"] >= 0}
ar = [n for n in step if n["phase"] == "backward" and n["op"] == "all_reduce"]
reduced = sorted(sg["tensors"][n["outputs"][0]]["name"] for n in ar)
norms = sorted(name for name in params.values() if "layernorm" in name)
def feeds_grad(n):
    t = n["outputs"][0]
    return t in params or any(t in sg["nodes"][c]["inputs"] and sg["nodes"][c]["outputs"][0] in params
                              for c in sg["tensors"][t]["consumers"])
if len(ar) != len(norms) or not all(feeds_grad(n) for n in ar):
    sys.exit(f"backward all-reduces {reduced}: expected one per norm weight {norms}")
print(f"{arch}: per layer 2 all_gather + 2 reduce_scatter forward, 2 reduce_scatter + 2 all_gather backward; "
      f"{len(norms)} norm parameters' gradients all-reduced over tp")
PY
}
counts "SwiGLU, RMSNorm, RoPE" "${args[@]}"
counts "LayerNorm, learned positions, dropout 0.1" "${args[@]}" --normalization LayerNorm \
    --position-embedding-type learned_absolute --hidden-dropout 0.1
# --tp-comm-overlap: the same linears in 2 chunks of the sequence: per layer
# 4 all-gathers and 4 reduce-scatters forward, and each chunk's GEMM has a
# collective of its layer that neither feeds it nor waits for it (another
# chunk's), so the scheduler can run the two side by side.
"$exe" dump "${args[@]}" "${sp[@]}" --tp-comm-overlap --graph forward --after ep -o "$TMP/ov.json"
"$py" - "$TMP/ov.json" 3 <<'PY' || fail "--tp-comm-overlap: chunked collectives"
import collections, json, sys
g, layers = json.load(open(sys.argv[1])), int(sys.argv[2])
nodes, T = g["nodes"], g["tensors"]
per = collections.Counter((n["layer"], n["op"]) for n in nodes if n["group"] == "tp")
for l in range(layers):
    if per[(l, "all_gather")] != 4 or per[(l, "reduce_scatter")] != 4 or per[(l, "all_reduce")]:
        sys.exit(f"layer {l}: {dict(per)}; expected 4 all_gather + 4 reduce_scatter, no all_reduce")
def reach(start, step):
    seen, todo = set(), [start]
    while todo:
        for m in step(todo.pop()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen
prod = lambda i: [T[t]["producer"] for t in nodes[i]["inputs"] if T[t]["producer"] >= 0]
cons = lambda i: [c for t in nodes[i]["outputs"] for c in T[t]["consumers"]]
coll = [n["id"] for n in nodes if n["group"] == "tp" and n["op"] in ("all_gather", "reduce_scatter")]
chunked = 0
for n in nodes:
    ins = [T[t]["producer"] for t in n["inputs"]]
    outs = [c for t in n["outputs"] for c in T[t]["consumers"]]
    if n["op"] != "matmul" or n["layer"] < 0:
        continue
    if not any(nodes[p]["op"] == "all_gather" for p in ins if p >= 0) and \
       not any(nodes[c]["op"] == "reduce_scatter" for c in outs):
        continue
    chunked += 1
    dep = reach(n["id"], prod) | reach(n["id"], cons)
    if not any(c not in dep and nodes[c]["layer"] == n["layer"] for c in coll):
        sys.exit(f"matmul {n['name']}: every collective of layer {n['layer']} feeds it or waits for it")
if chunked != layers * 12:  # 2 chunks each of q, k, v, fc1 (after the gathers), proj, fc2 (before the scatters)
    sys.exit(f"{chunked} chunked GEMMs, expected {layers * 12}")
print(f"--tp-comm-overlap: per layer 4 all_gather + 4 reduce_scatter; {chunked} chunked GEMMs, each beside a collective")
PY
"$py" - "$TMP/tp1.json" <<'PY' || fail "tp 1"
import json, sys
if any(n["comm"] != "none" for n in json.load(open(sys.argv[1]))["nodes"]):
    sys.exit("tp 1 with --sequence-parallel: the pass inserted collectives")
PY
echo "OK"
