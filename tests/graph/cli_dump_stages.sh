#!/usr/bin/env bash
# cli_dump_stages.sh DAGATRON — `dagatron dump --graph logical|step --after`:
# the logical graph of a model is byte-identical whatever the layout (one
# rank, EP=2, EP=2 x DP=2: the builder knows no parallel size), while the
# graph after the EP pass differs with the EP size; each stage of the step
# pipeline can be dumped and adds what it should (the optimizer's nodes too:
# dump builds from train's own step options); a bad stage exits 2.
set -euo pipefail
exe=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cli_dump_stages: $*"; exit 1; }

"$exe" dump -o "$tmp/one.json" --graph logical
"$exe" dump -o "$tmp/ep2.json" --graph logical --expert-model-parallel-size 2
"$exe" dump -o "$tmp/ep2dp2.json" --graph logical --expert-model-parallel-size 2 --world-size 4 --rank 3
cmp -s "$tmp/one.json" "$tmp/ep2.json" || fail "logical graph differs between one rank and EP=2"
cmp -s "$tmp/one.json" "$tmp/ep2dp2.json" || fail "logical graph differs between one rank and EP=2 x DP=2"
"$exe" dump -o "$tmp/one.dot" --graph logical
"$exe" dump -o "$tmp/ep2.dot" --graph logical --expert-model-parallel-size 2
cmp -s "$tmp/one.dot" "$tmp/ep2.dot" || fail "logical DOT differs between one rank and EP=2"

"$exe" dump -o "$tmp/ep_one.json" --graph logical --after ep
"$exe" dump -o "$tmp/ep_two.json" --graph logical --after ep --expert-model-parallel-size 2
cmp -s "$tmp/ep_one.json" "$tmp/ep_two.json" && fail "the EP pass gave the same graph for EP=1 and EP=2"

py=$(command -v python3 || true)
if [ -n "$py" ]; then
  for s in logical ep autodiff recompute microbatches schedule dp optimizer; do
    "$exe" dump -o "$tmp/s_$s.json" --graph step --after "$s" --expert-model-parallel-size 2 --world-size 4
  done
  "$py" - "$tmp" <<'PY' || fail "a stage's graph lacks what the stage adds"
import json, sys, os
d = lambda s: json.load(open(os.path.join(sys.argv[1], "s_%s.json" % s)))
ops = lambda g: [n["op"] for n in g["nodes"]]
lg = d("logical")
assert "moe_experts" in ops(lg), "logical graph has no moe_experts node"
assert not any(n["stream"] == "comm" for n in lg["nodes"]), "logical graph has collectives"
ex = [t for t in lg["tensors"] if t["name"].endswith("experts.linear_fc1.weight")][0]
assert ex["shape"][0] == 4 and ex["sharding"]["split"][0] == "none", ex
ep = d("ep")
assert "moe_experts" not in ops(ep) and "all_to_all_v" in ops(ep), "EP pass did not lower the experts"
ex = [t for t in ep["tensors"] if t["name"].endswith("experts.linear_fc1.weight")][0]
assert ex["shape"][0] == 2 and ex["sharding"]["split"][0] == "ep", ex
ad = d("autodiff")
assert any(n["phase"] == "backward" for n in ad["nodes"]), "autodiff added no backward"
dp = d("dp")
names = [n["name"] for n in dp["nodes"]]
assert any(x.startswith("dp_bucket") for x in names), "DP stage added no bucket"
# the optimizer as graph nodes, as `dagatron train` runs it (train/dg_step_opts.h)
op = ops(d("optimizer"))
assert len(op) > len(dp["nodes"]) and "optim_adamw" in op and "optim_clip" in op, "no optimizer stage"
PY
fi

set +e
"$exe" dump -o "$tmp/x.json" --graph step --after nowhere 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--after nowhere exited $rc, expected 2"
grep -q -- "--after" "$tmp/err" || fail "the message does not name --after"
# Megatron's flags beside train's, as train takes them: --bf16 puts the
# dtype pass's casts and bf16 tensors in the step, --grad-reduce-in-bf16 a
# bf16 bucket before DP's collective; a refused one is one line, exit 2
"$exe" dump -o "$tmp/bf16.json" --graph step --bf16 2>"$tmp/err" || fail "dump --bf16: $(cat "$tmp/err")"
n16=$(grep -o '"op": *"cast"' "$tmp/bf16.json" | wc -l)
[ "$n16" -gt 0 ] || fail "dump --graph step --bf16 has no cast node"
grep -q '"dtype": *"bf16"' "$tmp/bf16.json" || fail "dump --graph step --bf16 has no bf16 tensor"
"$exe" dump -o "$tmp/gr16.json" --graph step --world-size 2 --bf16 --grad-reduce-in-bf16 2>"$tmp/err" ||
    fail "dump --grad-reduce-in-bf16: $(cat "$tmp/err")"
grep -q '"name": *"dp_bucket0/to_bf16"' "$tmp/gr16.json" || fail "--grad-reduce-in-bf16: no bf16 bucket before the reduction"
TMP=$tmp
source "$(dirname "$0")/../common/refuse.sh"
dg_refuse "--fp8-format" "$exe" dump -o "$tmp/x.json" --graph step --fp8-format hybrid
echo "cli_dump_stages: ok"
