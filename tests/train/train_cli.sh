#!/usr/bin/env bash
# train_cli.sh — `dagatron train` under mpirun: the loss falls on learnable
# mock data; two runs print identical losses; bad flags exit 2 with one line.
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -np 1"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --seq-length 32 --num-experts 4 --moe-router-topk 2
      --micro-batch-size 2 --global-batch-size 4 --train-iters 40 --log-interval 10 --lr 3e-3 --lr-warmup-iters 5)
$MPI "$BIN" train "${ARGS[@]}" >"$TMP/a.log" 2>&1 || { echo "FAIL: train exited $?"; cat "$TMP/a.log"; exit 1; }
cat "$TMP/a.log"
first=$(grep -o 'lm loss: [0-9.E+-]*' "$TMP/a.log" | head -1 | awk '{print $3}')
last=$(grep -o 'lm loss: [0-9.E+-]*' "$TMP/a.log" | tail -1 | awk '{print $3}')
python3 -c "import sys; f,l=float('$first'),float('$last'); print('lm loss %.4f -> %.4f' % (f,l)); sys.exit(0 if l < 0.8*f else 1)" \
  || { echo "FAIL: lm loss did not fall well below its first value"; fail=1; }
for field in 'iteration' 'consumed samples:' 'elapsed time per iteration (ms):' 'tokens per second:' \
             'MFU:' 'learning rate:' 'global batch size:' 'load_balancing_loss:' 'z_loss:' 'loss scale:' 'grad norm:' \
             'number of skipped iterations:' 'number of nan iterations:' 'peak memory (MB):'; do
  grep -q "$field" "$TMP/a.log" || { echo "FAIL: log line lacks '$field'"; fail=1; }
done
# Same graph + seed => identical losses (the log's loss fields).
$MPI "$BIN" train "${ARGS[@]}" --compute-threads 2 >"$TMP/b.log" 2>&1
diff <(grep -o 'lm loss: [^|]*| load_balancing_loss: [^|]*| z_loss: [^|]*| loss scale: [^|]*| grad norm: [^|]*' "$TMP/a.log") \
     <(grep -o 'lm loss: [^|]*| load_balancing_loss: [^|]*| z_loss: [^|]*| loss scale: [^|]*| grad norm: [^|]*' "$TMP/b.log") \
  || { echo "FAIL: losses differ between runs (1 vs 2 compute threads)"; fail=1; }
# A diverging run (absurd learning rate, no clipping): non-finite gradients
# skip the update and are counted, and the run goes on to the end.
$MPI "$BIN" train "${ARGS[@]}" --lr 900 --clip-grad 0 --train-iters 20 --eval-iters 0 >"$TMP/nan.log" 2>&1 \
  || { echo "FAIL: the diverging run exited $?"; cat "$TMP/nan.log"; fail=1; }
nan=$(grep -o 'number of nan iterations: *[0-9]*' "$TMP/nan.log" | tail -1 | awk '{print $5}')
skip=$(grep -o 'number of skipped iterations: *[0-9]*' "$TMP/nan.log" | tail -1 | awk '{print $5}')
# (test_train_nan checks each count against the iterations' own values.)
if [ -z "$nan" ] || [ -z "$skip" ] || [ "$skip" -lt 1 ] || [ "$skip" -lt "$nan" ]; then
  echo "FAIL: expected skipped iterations (NaN ones among them), got nan='$nan' skipped='$skip'"; fail=1
else echo "ok: diverging run counted $nan NaN iterations, $skip skipped"; fi
grep -q "done: 20 iterations" "$TMP/nan.log" || { echo "FAIL: the diverging run did not finish"; fail=1; }
# --exit-interval stops at 10 with a checkpoint; --load runs the other 10;
# the logged losses of 11..20 equal the straight run's, bitwise, but for
# iteration 12: as Megatron's, the first line of a run leaves its window
# open, so the resumed run's line 12 averages 11 and 12 (the straight run's
# is 12 alone).
$MPI "$BIN" train "${ARGS[@]}" --train-iters 20 --log-interval 1 --eval-iters 0 >"$TMP/straight.log" 2>&1
$MPI "$BIN" train "${ARGS[@]}" --train-iters 20 --log-interval 1 --eval-iters 0 --exit-interval 10 \
  --save "$TMP/ck" >"$TMP/first.log" 2>&1
grep -q "exiting program at iteration 10" "$TMP/first.log" || { echo "FAIL: --exit-interval did not stop at 10"; fail=1; }
[ "$(cat "$TMP/ck/latest_checkpointed_iteration.txt" 2>/dev/null)" = 10 ] || { echo "FAIL: no checkpoint at 10"; fail=1; }
$MPI "$BIN" train "${ARGS[@]}" --train-iters 20 --log-interval 1 --eval-iters 0 --load "$TMP/ck" >"$TMP/second.log" 2>&1
losses() { grep -oE "iteration +[0-9]+/ +20 .*lm loss: [^|]*" "$1" | sed -E 's/ \| consumed.*lm loss:/ lm loss:/'; }
diff <(losses "$TMP/straight.log" | tail -10 | sed 2d) <(losses "$TMP/second.log" | sed 2d) >/dev/null \
  || { echo "FAIL: 10 + resume + 10 differs from 20 straight"; diff <(losses "$TMP/straight.log" | tail -10) <(losses "$TMP/second.log") | head; fail=1; }
[ "$(losses "$TMP/second.log" | wc -l)" -eq 10 ] || { echo "FAIL: the resumed run did not run 10 iterations"; fail=1; }
echo "ok: --exit-interval 10, --load, 10 more: losses equal the straight run"
# Bad input: one line, exit 2.
check_bad() { # expected-substring args...
  local want=$1; shift
  "$BIN" train "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$want" "$TMP/bad.err" || [ "$(wc -l <"$TMP/bad.err")" -ne 1 ]; then
    echo "FAIL: '$*' gave rc=$rc, stderr:"; cat "$TMP/bad.err"; fail=1
  else echo "ok: $* -> $(cat "$TMP/bad.err")"; fi
}
check_bad "did you mean --num-layers" --num-layer 2
check_bad "--num-attention-heads 5 does not divide --hidden-size 64" --mock-data --vocab-size 10 --hidden-size 64 --num-attention-heads 5
check_bad "--global-batch-size 6 is not a multiple of --micro-batch-size 4" --mock-data --vocab-size 10 --micro-batch-size 4 --global-batch-size 6
check_bad "--seq-length: expected an integer" --seq-length abc
check_bad "--moe-layer-freq: the list has 3 entries, --num-layers is 4" --mock-data --vocab-size 10 --moe-layer-freq "[1]*3"
check_bad "--moe-router-num-groups 3 does not divide --num-experts 8" --mock-data --vocab-size 10 --num-experts 8 --moe-router-num-groups 3
check_bad "--position-embedding-type: expected one of learned_absolute|rope|yarn|none" --mock-data --vocab-size 10 --position-embedding-type relative
# the default corpus is byte-level tokens: another tokenizer would be recorded for tokens it did not make
check_bad "--tokenizer-type SentencePieceTokenizer: the default corpus (no --data-path) is byte-level tokens" \
  --tokenizer-type SentencePieceTokenizer --num-layers 1 --hidden-size 32 --num-attention-heads 2
# Megatron's router options and the flags that name what dagatron always does
$MPI "$BIN" train "${ARGS[@]}" --num-experts 8 --moe-router-num-groups 4 --moe-router-group-topk 2 \
  --moe-router-topk-scaling-factor 2.5 --moe-expert-capacity-factor 1.0 --moe-token-drop-policy position \
  --disable-bias-linear --use-flash-attn --moe-grouped-gemm --position-embedding-type rope --swiglu \
  --eval-iters 0 >"$TMP/router.log" 2>&1 || { echo "FAIL: router options run failed"; cat "$TMP/router.log"; fail=1; }
grep -q "done: 40 iterations" "$TMP/router.log" || { echo "FAIL: router options run did not finish"; fail=1; }
check_bad "--moe-layer-freq: entry 1 is 2" --mock-data --vocab-size 10 --moe-layer-freq "[1,2,1,1]"
# --moe-layer-freq as a list: layer 0 dense, layers 1-3 MoE (per-expert counts logged for those only)
$MPI "$BIN" train "${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
  --num-experts 4 --moe-layer-freq "([0]*1+[1]*3)" --moe-per-layer-logging --train-iters 2 --log-interval 1 --eval-iters 0 >"$TMP/freq.log" 2>&1 \
  || { echo "FAIL: --moe-layer-freq list run failed"; cat "$TMP/freq.log"; fail=1; }
layers=$(grep -o 'layer  *[0-9]* tokens per expert' "$TMP/freq.log" | awk '{print $2}' | sort -u | paste -sd,)
[ "$layers" = "1,2,3" ] || { echo "FAIL: MoE layers '$layers', expected 1,2,3"; fail=1; }
exit $fail
