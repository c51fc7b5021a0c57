#!/usr/bin/env bash
# resume_cli.sh — checkpoints through `dagatron train` (issue 6 acceptance):
#  1. 20 iterations straight vs 10, save, resume with --load, 10 more: the log
#     lines of iterations 11..20 but 12 (losses, grad norm, learning rate, counters)
#     are identical, and the iteration-20 model_optim_rng.bin files (every
#     parameter and AdamW moment) are byte-identical.
#  2. A run killed with SIGKILL while saving iteration 20 (TRAIN_KILL, the
#     trainer with a save-stage hook: killed after the 5th tensor, and again
#     after the new directory is in place but before the tracker moves)
#     leaves the tracker naming iteration 10; resuming reproduces the
#     straight run's iteration-20 tensors byte for byte.
#  3. Bad --load input exits 2 with one line naming the file and the problem.
# Usage: resume_cli.sh TRAIN_KILL
set -u
BIN=${DG_DAGATRON:-$DG_BUILD/dagatron}
KILL=$1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
# --lr-decay-iters pins the schedule, which otherwise follows --train-iters,
# so a 10-iteration run takes the first 10 steps of the 20-iteration one.
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --seq-length 32 --num-experts 4 --moe-router-topk 2
      --micro-batch-size 2 --global-batch-size 4 --log-interval 1 --lr 3e-3 --lr-warmup-iters 5
      --lr-decay-iters 20 --save-interval 10)
run() { # log args...
  local log=$1; shift
  "$BIN" train "${ARGS[@]}" "$@" >"$log" 2>&1 || { echo "FAIL: train $* exited $?"; cat "$log"; exit 1; }
}
# The deterministic fields of each iteration's log line, for iterations in
# [first, last]: timings and the "/ train-iters" total dropped.
iters() { # log first last
  grep -o 'iteration *[0-9]*/.*' "$1" \
    | sed 's#^iteration *\([0-9]*\)/ *[0-9]*#iteration \1#; s/elapsed[^|]*|//; s/tokens per second[^|]*|//;
           s/throughput[^|]*|//; s/MFU[^|]*|//; s/peak memory[^|]*|//' \
    | awk -v a="$2" -v b="$3" '$2 + 0 >= a && $2 + 0 <= b'
}
same_bin() { # what a b
  if cmp -s "$2" "$3"; then echo "ok: $1: byte-identical"; else echo "FAIL: $1: $2 and $3 differ"; fail=1; fi
}

# ---- 1. straight vs save + resume ---------------------------------------------
run "$TMP/a.log" --train-iters 20 --save "$TMP/a"
if [ ! -f "$TMP/a/latest_checkpointed_iteration.txt" ]; then
  echo "FAIL: dagatron train --save wrote no checkpoint"; ls -la "$TMP/a"; exit 1
fi
run "$TMP/b1.log" --train-iters 10 --save "$TMP/b"
run "$TMP/b2.log" --train-iters 20 --load "$TMP/b" --save "$TMP/b"
grep -q "loaded checkpoint" "$TMP/b2.log" || { echo "FAIL: the resumed run did not say it loaded"; fail=1; }
[ "$(iters "$TMP/b2.log" 1 10 | wc -l)" -eq 0 ] || { echo "FAIL: the resumed run repeated iterations 1..10"; fail=1; }
[ "$(iters "$TMP/a.log" 11 20 | wc -l)" -eq 10 ] || { echo "FAIL: expected 10 log lines for iterations 11..20"; fail=1; }
diff <(iters "$TMP/a.log" 1 10) <(iters "$TMP/b1.log" 1 10) >"$TMP/d1"; d1=$?
# As Megatron's training_log, a run's first line leaves its window open: the
# resumed run's line 12 covers 11 and 12, the straight run's 12 alone.
diff <(iters "$TMP/a.log" 11 20 | grep -v '^iteration 12 ') <(iters "$TMP/b2.log" 11 20 | grep -v '^iteration 12 ') \
  >"$TMP/d2"; d2=$?
if [ $d1 -eq 0 ] && [ $d2 -eq 0 ]; then
  echo "ok: iterations 1..20 log identical losses straight and resumed"
else
  echo "FAIL: losses differ between the straight and the resumed run:"; cat "$TMP/d1" "$TMP/d2"; fail=1
fi
same_bin "iteration 10 checkpoint" "$TMP/a/iter_0000010/model_optim_rng.bin" "$TMP/b/iter_0000010/model_optim_rng.bin"
same_bin "iteration 20 parameters and optimizer state" "$TMP/a/iter_0000020/model_optim_rng.bin" \
  "$TMP/b/iter_0000020/model_optim_rng.bin"
[ "$(cat "$TMP/b/latest_checkpointed_iteration.txt")" = 20 ] || { echo "FAIL: tracker is not 20 after the resumed run"; fail=1; }

# ---- 2. SIGKILL during the iteration-20 save ---------------------------------------
killed() { # dir stage index: train 20 iterations, die at that stage of the iteration-20 save
  "$KILL" 20 "$2" "$3" "${ARGS[@]}" --train-iters 20 --save "$1" >"$1.log" 2>&1; local rc=$?
  [ $rc -eq 137 ] || { echo "FAIL: train_kill $2 $3 exited $rc, expected SIGKILL (137)"; cat "$1.log"; fail=1; }
}
killed "$TMP/c" tensor 5
if [ ! -e "$TMP/c/iter_0000020" ] && compgen -G "$TMP/c/iter_0000020.tmp-*" >/dev/null &&
   [ "$(cat "$TMP/c/latest_checkpointed_iteration.txt")" = 10 ]; then
  echo "ok: killed mid-save: iter_0000020 absent, its temporary directory ignored, tracker still 10"
else
  echo "FAIL: after SIGKILL during the save:"; ls -la "$TMP/c"; cat "$TMP/c/latest_checkpointed_iteration.txt"; fail=1
fi
run "$TMP/c2.log" --train-iters 20 --load "$TMP/c" --save "$TMP/c"
same_bin "resumed after SIGKILL, iteration 20" "$TMP/a/iter_0000020/model_optim_rng.bin" \
  "$TMP/c/iter_0000020/model_optim_rng.bin"
! compgen -G "$TMP/c/*.tmp-*" >/dev/null || { echo "FAIL: the next save left the dead run's temporaries"; fail=1; }
killed "$TMP/e" installed -1
if [ -d "$TMP/e/iter_0000020" ] && [ "$(cat "$TMP/e/latest_checkpointed_iteration.txt")" = 10 ]; then
  echo "ok: killed between the directory and the tracker: iter_0000020 in place, tracker still 10"
else
  echo "FAIL: after SIGKILL before the tracker moved:"; ls -la "$TMP/e"; fail=1
fi
run "$TMP/e2.log" --train-iters 20 --load "$TMP/e" --save "$TMP/e"
grep -q "loaded checkpoint from $TMP/e at iteration 10" "$TMP/e2.log" || { echo "FAIL: did not resume from 10"; fail=1; }
same_bin "resumed over a complete but untracked iteration 20" "$TMP/a/iter_0000020/model_optim_rng.bin" \
  "$TMP/e/iter_0000020/model_optim_rng.bin"

# ---- 3. bad --load input ------------------------------------------------------------
check_bad() { # expected-substring args...
  local want=$1; shift
  "$BIN" train "${ARGS[@]}" --train-iters 20 "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$want" "$TMP/bad.err" || [ "$(wc -l <"$TMP/bad.err")" -ne 1 ]; then
    echo "FAIL: '$*' gave rc=$rc, stderr:"; cat "$TMP/bad.err"; fail=1
  else echo "ok: $* -> $(cat "$TMP/bad.err")"; fi
}
mkdir -p "$TMP/g"
printf 'abc\n' >"$TMP/g/latest_checkpointed_iteration.txt"
check_bad "g/latest_checkpointed_iteration.txt: expected an iteration number, got 'abc'" --load "$TMP/g"
printf '30' >"$TMP/g/latest_checkpointed_iteration.txt"
check_bad "iter_0000030 does not exist" --load "$TMP/g"
check_bad "a/iter_0000020/metadata.json: the checkpoint's model has num_layers = 2, this run has 3 (--num-layers)" \
  --load "$TMP/a" --num-layers 3
cp -r "$TMP/a" "$TMP/t"
truncate -s 1000 "$TMP/t/iter_0000020/model_optim_rng.bin"
check_bad "t/iter_0000020/model_optim_rng.bin: truncated" --load "$TMP/t"
cp "$TMP/a/iter_0000020/model_optim_rng.bin" "$TMP/t/iter_0000020/"
printf '\x5a' | dd of="$TMP/t/iter_0000020/model_optim_rng.bin" bs=1 seek=100 conv=notrunc status=none
check_bad "t/iter_0000020/model_optim_rng.bin: checksum mismatch in tensor" --load "$TMP/t"
exit $fail
