#!/bin/bash
# Per-rank bytes at startup (issue 12, acceptance 3, first half): every
# tensor-parallel rank prints Megatron's "number of parameters on (tensor,
# pipeline) model parallel rank (t, p)" line and its parameter, gradient and
# optimizer-state bytes; at TP=2 each rank holds about half the TP=1 dense
# figure (the weights and the vocabulary split, only norms and row-parallel
# biases replicated): between 0.5 and 0.55 of it, and the two ranks alike.
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
args=(--mock-data --vocab-size 97 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --micro-batch-size 2 --global-batch-size 2 --num-experts 0 --train-iters 1 --make-vocab-size-divisible-by 32)
py=${DG_REF_PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
$DG_MPIRUN -np 1 "$exe" train "${args[@]}" >"$TMP/tp1.log" 2>&1 || fail "tp 1 run: $(tail -3 "$TMP/tp1.log")"
$DG_MPIRUN -np 2 "$exe" train "${args[@]}" --tensor-model-parallel-size 2 >"$TMP/tp2.log" 2>&1 ||
    fail "tp 2 run: $(tail -3 "$TMP/tp2.log")"
"$py" - "$TMP/tp1.log" "$TMP/tp2.log" <<'PY' || fail "TP=2 per-rank bytes are not about half of TP=1"
import re, sys
def ranks(path):
    """tp rank -> (parameters, parameter bytes, gradient bytes, optimizer bytes)"""
    text = open(path).read()
    n = {int(t): int(v) for t, v in
         re.findall(r"^ > number of parameters on \(tensor, pipeline\) model parallel rank \((\d+), 0\): (\d+)$", text, re.M)}
    b = {int(t): tuple(map(int, v)) for t, *v in
         re.findall(r"^dagatron train: rank \d+ \(tensor, pipeline\) \((\d+), 0\): parameters (\d+) bytes, "
                    r"gradients (\d+) bytes, optimizer state (\d+) bytes$", text, re.M)}
    if sorted(n) != sorted(b):
        sys.exit(f"{path}: parameter-count lines for tp ranks {sorted(n)}, byte lines for {sorted(b)}")
    return {t: (n[t],) + b[t] for t in n}
one, two = ranks(sys.argv[1]), ranks(sys.argv[2])
print("tp 1:", one, "\ntp 2:", two)
if sorted(one) != [0] or sorted(two) != [0, 1]:
    sys.exit(f"expected tp rank 0 at TP=1 and tp ranks 0, 1 at TP=2")
names = ("parameters", "parameter bytes", "gradient bytes", "optimizer state bytes")
for t, v in two.items():
    for name, x, ref in zip(names, v, one[0]):
        if not 0.5 <= x / ref <= 0.55:
            sys.exit(f"tp rank {t}: {name} {x} is {x / ref:.3f} of TP=1's {ref}, expected 0.5 .. 0.55")
if two[0] != two[1]:
    sys.exit(f"the tp ranks hold different amounts: {two}")
PY
echo "OK"
