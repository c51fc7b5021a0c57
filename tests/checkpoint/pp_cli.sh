#!/usr/bin/env bash
# pp_cli.sh — checkpoints under pipeline parallelism: a stage holds only its
# layers' parameters, the tied word embedding is held by the first and the
# last stage (written once, loaded by both). Each case trains 3 iterations,
# saves, and a second run loads and trains iterations 4..5; its logged
# losses and grad norms (resumed_fields) must match a straight 5-iteration run:
#  1. PP=2 saves, one rank resumes: within 1e-6 relative of one rank's
#     straight run (PP's tied-embedding gradient sum rounds differently from
#     one rank's, so the runs need not be bitwise alike), and the final
#     parameters within 1e-5 of its.
#  2. one rank saves, PP=2 resumes: the same against PP=2's straight run.
#  3. PP=2 saves, PP=2 resumes: the straight PP=2 run's log fields, and its
#     iteration-5 checkpoint files (every parameter and moment) byte for byte.
#  4. PP=2 x DP=2 with the distributed optimizer saves, PP=2 resumes: within
#     1e-6 relative of PP=2's straight run (without the tied embedding's
#     later copy left out, the two stages' optimizer shards overlap).
#  5. PP=2 with 2 virtual stages (interleaved 1F1B: rank 0 holds layers 0
#     and 2) saves, one rank resumes: as 1.
# And each PP save's stored boxes tile every tensor once (ckpt_tiles.py).
#  6. a damaged PP=2 checkpoint (both ranks' shard files cut short: the
#     first to half its size, past the tied embedding both stages read, so
#     each stage fails on a tensor of its own, with its own message) is refused in one line on every
#     rank's behalf (exit 2), naming a damaged file.
# PP x EP and PP x TP saves load under other layouts in reshard_cli.sh.
# Usage: pp_cli.sh DAGATRON
set -u
source "$(dirname "$0")/cli_common.sh" "$1"
# --lr-decay-iters pins the schedule (it otherwise follows --train-iters), so
# a 3-iteration run takes the first 3 steps of the 5-iteration one
BASE=("${ARCH[@]}" --mock-data --vocab-size 100 --make-vocab-size-divisible-by 32 --num-layers 4 --hidden-size 64
      --num-attention-heads 4 --num-experts 0 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
      --log-interval 1 --lr 1e-3 --lr-decay-style cosine --lr-decay-iters 5 --eval-iters 0 --compute-threads 1)
PP2=(--pipeline-model-parallel-size 2)
# the lm loss and grad norm of iterations FIRST..LAST, one line
fields() { # log first last
  grep -oE "iteration +[0-9]+/.*" "$1" | awk -v a="$2" -v b="$3" '{ split($0, f, /[ \/]+/); i = f[2] + 0 }
    i >= a && i <= b' | grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" | paste -sd' '
}
# What a run resumed at 3 logs as the straight run does: iteration 4's lm
# loss and grad norm, iteration 5's grad norm. (As Megatron's training_log,
# a run's first line leaves its window open: the resumed run's line 5
# averages the lm loss of 4 and 5; the grad norm is the iteration's own.)
resumed_fields() { # log
  echo "$(fields "$1" 4 4) $(fields "$1" 5 5 | grep -oE "grad norm: [0-9.]+")"
}
close_() { # got want tol: same fields, each within tol relative
  awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { n = split(a, x, " "); m = split(b, y, " "); if (n != m || n == 0) exit 1;
    for (i = 1; i <= n; i++) if (x[i] ~ /^[0-9.E+-]+$/) { d = x[i] - y[i]; if (d < 0) d = -d;
      r = y[i] < 0 ? -y[i] : y[i]; if (d > tol * r) exit 1 } else if (x[i] != y[i]) exit 1 }'
}
run 1 "$TMP/one.log" --train-iters 5 --save "$TMP/one" || exit 1
run 2 "$TMP/pp.log" --train-iters 5 --save "$TMP/pp" "${PP2[@]}" || exit 1
# case NAME NP_A "FLAGS_A" NP_B "FLAGS_B" STRAIGHT_LOG TOL (0: bitwise)
n=0
case_() {
  local name=$1 npa=$2 fa=$3 npb=$4 fb=$5 ref=$6 tol=$7
  n=$((n + 1))
  local a="$TMP/a$n"
  run "$npa" "$a.log" $fa --train-iters 3 --save "$a" || return
  if [ "$npa" -gt 1 ]; then
    "$PY" "$HERE/ckpt_tiles.py" "$a" "$npa" || { echo "FAIL: $name: the saved checkpoint"; fail=1; }
  fi
  run "$npb" "$a.resume.log" $fb --train-iters 5 --load "$a" --save "$a.r" || return
  grep -q "loaded checkpoint from $a at iteration 3" "$a.resume.log" ||
    { echo "FAIL: $name: did not resume at iteration 3"; fail=1; }
  local want got
  want=$(resumed_fields "$ref"); got=$(resumed_fields "$a.resume.log")
  local straight=${ref%.log}
  if [ "$tol" = 0 ]; then
    for f in "$straight"/iter_0000005/*.bin; do
      cmp -s "$f" "$a.r/iter_0000005/$(basename "$f")" ||
        { echo "FAIL: $name: iteration 5's $(basename "$f") differs from the straight run's"; fail=1; }
    done
  else
    "$PY" "$HERE/../ep/ckpt_params_close.py" "$a.r" "$straight" 1e-5 ||
      { echo "FAIL: $name: final parameters differ from the straight run's"; fail=1; }
  fi
  if [ "$tol" = 0 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then
    echo "ok: $name: iterations 4..5 (and the iteration-5 checkpoint) bitwise the straight run's: $got"
  elif [ "$tol" != 0 ] && close_ "$got" "$want" "$tol"; then
    echo "ok: $name: iterations 4..5 '$got' within $tol of the straight run's '$want'"
  else
    echo "FAIL: $name: iterations 4..5 logged '$got', the straight run '$want'"; fail=1
  fi
}
case_ "PP=2 -> one rank" 2 "${PP2[*]}" 1 "" "$TMP/one.log" 1e-6
case_ "one rank -> PP=2" 1 "" 2 "${PP2[*]}" "$TMP/pp.log" 1e-6
case_ "PP=2 -> PP=2" 2 "${PP2[*]}" 2 "${PP2[*]}" "$TMP/pp.log" 0
case_ "PP=2 x DP=2 distributed optimizer -> PP=2" 4 "${PP2[*]} --use-distributed-optimizer" 2 "${PP2[*]}" \
  "$TMP/pp.log" 1e-6
case_ "PP=2 with 2 virtual stages -> one rank" 2 "${PP2[*]} --num-virtual-stages-per-pipeline-rank 2" 1 "" \
  "$TMP/one.log" 1e-6
# 6: the straight PP=2 run's checkpoint, both shard files truncated
source "$HERE/../common/refuse.sh"
fail() { echo "FAIL: $*"; exit 1; } # dg_refuse's; the variable fail is another name
cp -r "$TMP/pp" "$TMP/damaged"
f0="$TMP/damaged/iter_0000005/model_optim_rng.bin"
truncate -s $(($(stat -c %s "$f0") / 2)) "$f0"
truncate -s 1000 "$TMP/damaged/iter_0000005/model_optim_rng_rank00001.bin"
dg_refuse "truncated" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${BASE[@]}" "${PP2[@]}" --train-iters 6 \
  --load "$TMP/damaged" && echo "ok: a damaged PP=2 checkpoint: one line, exit 2"
exit $fail
