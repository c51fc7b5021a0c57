#!/usr/bin/env bash
# flags_cli.sh — Megatron's checkpoint flags (issue 17): --ckpt-format
# torch_dist is accepted with a note and any other value refused in one line
# (exit 2); --ckpt-fully-parallel-save/load and --no-load-rng are accepted;
# --no-load-optim resumes the parameters and counters but not AdamW's moments
# (so the next update differs from a full resume, which matches the straight
# run); --finetune loads the parameters only and counts from iteration 1
# (its first loss is not a fresh model's).
# Usage: flags_cli.sh DAGATRON
set -u
BIN=$1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --num-experts 4 --moe-router-topk 2 --micro-batch-size 2 --global-batch-size 4
      --log-interval 1 --lr 3e-3 --lr-decay-style constant --eval-iters 0)
run() { local log=$1; shift; "$BIN" train "${ARGS[@]}" "$@" >"$log" 2>&1 || { echo "FAIL: train $* exited $?"; tail -3 "$log"; fail=1; }; }
loss_at() { grep -oE "iteration +$2/.*lm loss: [0-9.E+-]+" "$1" | grep -oE "lm loss: [0-9.E+-]+" | awk '{print $3}'; }
# A run resumed at 3 logs 4, 5 and 6; as Megatron's training_log, its first
# line leaves the window open, so its line 5 averages 4 and 5: iterations 4
# and 6 are the ones a resumed run and the straight run log alike.
run "$TMP/s.log" --train-iters 6
run "$TMP/a.log" --train-iters 3 --save "$TMP/a"
"$BIN" train "${ARGS[@]}" --train-iters 6 --ckpt-format torch --load "$TMP/a" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/bad.err")" -eq 1 ] && grep -q -- "--ckpt-format" "$TMP/bad.err"; then
  echo "ok: --ckpt-format torch -> $(cat "$TMP/bad.err")"
else echo "FAIL: --ckpt-format torch gave rc=$rc:"; cat "$TMP/bad.err"; fail=1; fi

run "$TMP/r.log" --train-iters 6 --load "$TMP/a" --ckpt-format torch_dist --ckpt-fully-parallel-save \
  --ckpt-fully-parallel-load --no-load-rng
grep -q "ckpt-format torch_dist: dagatron's sharded format" "$TMP/r.log" || { echo "FAIL: no --ckpt-format note"; fail=1; }
[ -n "$(loss_at "$TMP/r.log" 6)" ] && [ "$(loss_at "$TMP/r.log" 4)" = "$(loss_at "$TMP/s.log" 4)" ] &&
  [ "$(loss_at "$TMP/r.log" 6)" = "$(loss_at "$TMP/s.log" 6)" ] && echo "ok: a full resume logs the straight run's iterations 4 and 6" ||
  { echo "FAIL: full resume: iterations 4, 6 $(loss_at "$TMP/r.log" 4) $(loss_at "$TMP/r.log" 6), straight $(loss_at "$TMP/s.log" 4) $(loss_at "$TMP/s.log" 6)"; fail=1; }

run "$TMP/n.log" --train-iters 6 --load "$TMP/a" --no-load-optim
grep -q "loaded checkpoint from $TMP/a at iteration 3" "$TMP/n.log" || { echo "FAIL: --no-load-optim did not resume at 3"; fail=1; }
[ "$(loss_at "$TMP/n.log" 4)" = "$(loss_at "$TMP/s.log" 4)" ] && [ -n "$(loss_at "$TMP/n.log" 6)" ] &&
  [ "$(loss_at "$TMP/n.log" 6)" != "$(loss_at "$TMP/s.log" 6)" ] &&
  echo "ok: --no-load-optim: iteration 4 (the loaded parameters) as straight, iteration 6 (fresh moments) differs" ||
  { echo "FAIL: --no-load-optim: iterations 4/6 $(loss_at "$TMP/n.log" 4) $(loss_at "$TMP/n.log" 6)"; fail=1; }

run "$TMP/f.log" --train-iters 2 --load "$TMP/a" --finetune --save "$TMP/f"
grep -q "loaded the parameters of $TMP/a (--finetune" "$TMP/f.log" && [ -n "$(loss_at "$TMP/f.log" 1)" ] &&
  [ "$(loss_at "$TMP/f.log" 1)" != "$(loss_at "$TMP/s.log" 1)" ] && [ "$(cat "$TMP/f/latest_checkpointed_iteration.txt")" = 2 ] &&
  echo "ok: --finetune: iteration 1 runs on the loaded (trained) parameters, not fresh ones; saves iteration 2" ||
  { echo "FAIL: --finetune:"; grep -E "loaded|iteration +1/" "$TMP/f.log"; fail=1; }
exit $fail
