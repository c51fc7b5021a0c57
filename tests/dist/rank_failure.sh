#!/usr/bin/env bash
# rank_failure.sh — a failure on one rank ends the whole job (issue 10):
#  1. a token outside the vocabulary in the data shard one rank reads, with
#     DP = 2 and with EP = 2: exit 2 within 10 s, the error printed once,
#     naming the rank that found it (before the fix: the other rank waited in
#     the step's all-reduce forever);
#  2. an unwritable --trace path (checked by rank 0 alone, at start-up): the same;
#  3. a flag error under mpirun is printed once, not once per rank.
# `timeout 10` turns a hang into a failure instead of a stuck CI job
# (times DG_TEST_SLOWDOWN under sanitizers, scripts/run_sanitizers.sh).
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none -np 2"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
LIMIT=$((10 * ${DG_TEST_SLOWDOWN:-1}))

# One document of 129 int32 tokens (16 samples of 8 + 1), so every sample is
# read once over 8 iterations of 2 samples, one per data shard. With a bad
# token in the middle of a sample, exactly one sample holds it: one rank
# reads it, at one iteration.
mkds() { # prefix bad_position bad_token
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
prefix, bad_at, bad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 129
toks = [(7 * i) % 90 + 1 for i in range(n)]
if bad_at >= 0: toks[bad_at] = bad
with open(prefix + ".bin", "wb") as f: f.write(struct.pack("<%di" % n, *toks))
with open(prefix + ".idx", "wb") as f:  # Megatron's MMIDIDX: int32 tokens, 1 sequence, 1 document
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QB", 1, 4) + struct.pack("<QQ", 1, 2))
    f.write(struct.pack("<iqqq", n, 0, 0, 1))
PY
}
mkds "$TMP/oov" 61 1000
mkds "$TMP/ok" -1 0
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
ARGS=("${ARCH[@]}" --split 100,0,0 --tokenizer-type NullTokenizer --vocab-size 100 --num-layers 1 --hidden-size 32
      --num-attention-heads 4 --seq-length 8 --num-experts 4 --moe-router-topk 2 --micro-batch-size 1
      --global-batch-size 2 --train-iters 8 --eval-iters 0 --log-interval 1 --compute-threads 1)

# expect_once NAME REGEX mpirun-args... : exit 2 within $LIMIT s, REGEX on exactly
# one stderr line, and that the only line.
expect_once() {
  local name=$1 want=$2; shift 2
  local start rc secs
  start=$(date +%s.%N)
  timeout $LIMIT $MPI "$BIN" train "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
  secs=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $start))")
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "FAIL: $name: still running after $LIMIT s (a rank is left waiting)"; cat "$TMP/err"; fail=1
  elif [ $rc -ne 2 ] || [ "$(grep -cE -- "$want" "$TMP/err")" -ne 1 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ]; then
    echo "FAIL: $name: rc=$rc (want 2), stderr (want one line matching '$want'):"; cat "$TMP/err"; fail=1
  elif grep -q "done:" "$TMP/out"; then
    echo "FAIL: $name: the run finished"; fail=1
  else
    echo "ok: $name: exit 2 in ${secs}s: $(cat "$TMP/err")"
  fi
}

OOV='^dagatron: rank [01]: data: token id 1000 is outside the vocabulary \[0, 128\)'
expect_once "DP=2, a bad token on one shard" "$OOV" --data-path "$TMP/oov" "${ARGS[@]}"
expect_once "EP=2, a bad token on one shard" "$OOV" --data-path "$TMP/oov" "${ARGS[@]}" \
  --expert-model-parallel-size 2
TRACE='^dagatron: rank 0: --trace /nonexistent-dir/t.json: directory /nonexistent-dir: No such file'
expect_once "DP=2, unwritable --trace" "$TRACE" --data-path "$TMP/ok" "${ARGS[@]}" --trace /nonexistent-dir/t.json
expect_once "EP=2, unwritable --trace" "$TRACE" --data-path "$TMP/ok" "${ARGS[@]}" --trace /nonexistent-dir/t.json \
  --expert-model-parallel-size 2
expect_once "a mistyped flag" "^dagatron: unknown flag '--num-layerz' \(did you mean --num-layers\?\)$" \
  --data-path "$TMP/ok" "${ARGS[@]}" --num-layerz 2
expect_once "a bad flag value" "^dagatron: --hidden-size: " --data-path "$TMP/ok" "${ARGS[@]}" --hidden-size abc
# The clean dataset trains to the end on both layouts (the failures above are the bad token's).
for ep in 1 2; do
  timeout 60 $MPI "$BIN" train --data-path "$TMP/ok" "${ARGS[@]}" --expert-model-parallel-size $ep >"$TMP/out" 2>&1 \
    && grep -q "done: 8 iterations" "$TMP/out" || { echo "FAIL: the clean run (EP=$ep) did not finish"; cat "$TMP/out"; fail=1; }
done
exit $fail
