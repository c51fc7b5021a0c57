#!/usr/bin/env bash
# dropout_cli.sh — issue 16, acceptance 2: Megatron's default dense GPT with
# --hidden-dropout 0.1 (the default) trains to bitwise-identical checkpoints
# for the same seed, with 1 or 2 compute threads; another seed and
# --hidden-dropout 0 give other weights; the checkpoint records the rate.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --micro-batch-size 2 --global-batch-size 4 --train-iters 4 --log-interval 1 --eval-iters 0 --lr 3e-3)
run() { local dir=$1; shift; "$BIN" train "${ARGS[@]}" --save "$TMP/$dir" "$@" >"$TMP/$dir.log" 2>&1 \
          || { echo "FAIL: run $dir exited $?"; cat "$TMP/$dir.log"; fail=1; }; }
run a --compute-threads 1
run b --compute-threads 2
run d --compute-threads 1 --seed 99
run e --compute-threads 1 --hidden-dropout 0
ck() { echo "$TMP/$1/iter_0000004/model_optim_rng.bin"; }
cmp -s "$(ck a)" "$(ck b)" && echo "ok: 1 and 2 threads: bitwise identical" || { echo "FAIL: 1 vs 2 threads differ"; fail=1; }
cmp -s "$(ck a)" "$(ck d)" && { echo "FAIL: another seed gave the same weights"; fail=1; }
cmp -s "$(ck a)" "$(ck e)" && { echo "FAIL: --hidden-dropout 0 gave the same weights: dropout did nothing"; fail=1; }
grep -q "hidden_dropout" "$TMP/a/iter_0000004/metadata.json" || { echo "FAIL: the checkpoint does not record hidden_dropout"; fail=1; }
exit $fail
