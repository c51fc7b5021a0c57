#!/usr/bin/env bash
# dist_cli.sh — `dagatron train` under mpirun with several ranks:
#  1. a world size the parallel sizes do not divide ends at once: exit 2 and
#     one line on stderr (mpirun -q keeps mpirun's own banner out);
#  2. DP = 2 runs print bitwise identical losses run to run, and the startup
#     line's optimizer-state bytes per rank with the distributed optimizer are
#     ~1/DP of the one-rank figure;
#  3. DP = 2 with the distributed optimizer resumes from a checkpoint bit for
#     bit, and its checkpoint loads on one rank;
#  4. a rank killed with SIGKILL mid-run: the other ranks are gone and mpirun
#     has exited non-zero within 60 s (no hang in a collective).
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --seq-length 32 --num-experts 4 --moe-router-topk 2
      --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --lr 3e-3 --eval-iters 0 --compute-threads 1)

# ---- 1. bad world size -------------------------------------------------------------
start=$(date +%s.%N)
$MPI -np 3 "$BIN" train "${ARGS[@]}" --train-iters 5 --expert-model-parallel-size 2 >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
secs=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $start))")
if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/bad.err")" -eq 1 ] &&
   grep -q "world size 3 is not divisible by .*--expert-model-parallel-size 2" "$TMP/bad.err" &&
   ! grep -q "iteration" "$TMP/bad.out"; then
  echo "ok: -np 3 --expert-model-parallel-size 2 -> exit 2 in ${secs}s: $(cat "$TMP/bad.err")"
else
  echo "FAIL: -np 3 --expert-model-parallel-size 2 gave rc=$rc, stdout/stderr:"; cat "$TMP/bad.out" "$TMP/bad.err"; fail=1
fi

check_bad() { # np expected-substring args...
  local np=$1 want=$2; shift 2
  $MPI -np $np "$BIN" train "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$want" "$TMP/bad.err" || [ "$(wc -l <"$TMP/bad.err")" -ne 1 ]; then
    echo "FAIL: -np $np $* gave rc=$rc, stderr:"; cat "$TMP/bad.err"; fail=1
  else echo "ok: -np $np $* -> $(cat "$TMP/bad.err")"; fi
}
check_bad 2 "--global-batch-size 6 is not a multiple of --micro-batch-size 2 x data-parallel size 2" \
  --mock-data --vocab-size 100 --micro-batch-size 2 --global-batch-size 6
check_bad 2 "--overlap-param-gather needs --use-distributed-optimizer" --mock-data --vocab-size 100 --overlap-param-gather

# ---- 2. determinism and optimizer state --------------------------------------------
losses() { grep -o 'lm loss: [^|]*| load_balancing_loss: [^|]*| z_loss: [^|]*| loss scale: [^|]*| grad norm: [^|]*' "$1"; }
state() { grep -o 'optimizer state: [0-9]* bytes per rank' "$1" | awk '{print $3}'; }
$MPI -np 2 "$BIN" train "${ARGS[@]}" --train-iters 4 --overlap-grad-reduce >"$TMP/d1.log" 2>&1 || { echo "FAIL: DP=2 run exited $?"; cat "$TMP/d1.log"; fail=1; }
$MPI -np 2 "$BIN" train "${ARGS[@]}" --train-iters 4 --overlap-grad-reduce >"$TMP/d2.log" 2>&1
if [ "$(losses "$TMP/d1.log" | wc -l)" -eq 4 ] && diff <(losses "$TMP/d1.log") <(losses "$TMP/d2.log") >/dev/null; then
  echo "ok: DP=2 losses bitwise identical run to run"
else
  echo "FAIL: DP=2 losses differ run to run (or are missing)"; diff <(losses "$TMP/d1.log") <(losses "$TMP/d2.log"); fail=1
fi
for np in 1 2 4; do
  $MPI -np $np "$BIN" train "${ARGS[@]}" --train-iters 1 --use-distributed-optimizer >"$TMP/s$np.log" 2>&1 \
    || { echo "FAIL: -np $np --use-distributed-optimizer exited $?"; cat "$TMP/s$np.log"; fail=1; }
done
s1=$(state "$TMP/s1.log"); s2=$(state "$TMP/s2.log"); s4=$(state "$TMP/s4.log")
if python3 -c "
import sys; s1, s2, s4 = $s1, $s2, $s4
print('optimizer state per rank: DP=1 %d, DP=2 %d (%.4f), DP=4 %d (%.4f)' % (s1, s2, s2 / s1, s4, s4 / s1))
sys.exit(0 if abs(s2 / s1 - 0.5) < 0.01 and abs(s4 / s1 - 0.25) < 0.01 else 1)"; then
  echo "ok: the distributed optimizer holds ~1/DP of the state per rank"
else
  echo "FAIL: optimizer state per rank is not ~1/DP ($s1, $s2, $s4)"; fail=1
fi

# ---- 3. checkpoints with the distributed optimizer ---------------------------------
# DP = 2 with sharded moments: 8 iterations straight vs 4, save, resume, 4
# more: identical log lines (but for iteration 6: as Megatron's, a run's
# first line leaves its window open, so the resumed run's line 6 averages 5
# and 6) and byte-identical iteration-8 checkpoints (the
# moments are gathered into whole tensors on save); the DP = 2 checkpoint
# also loads into a one-rank run (the format does not depend on DP).
iters() { grep -o 'iteration *[0-9]*/.*' "$1" | sed 's#^iteration *\([0-9]*\)/ *[0-9]*#iteration \1#; s/elapsed[^|]*|//;
  s/tokens per second[^|]*|//; s/throughput[^|]*|//; s/MFU[^|]*|//; s/peak memory[^|]*|//' | awk -v a="$2" '$2 + 0 >= a'; }
CK=(--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --lr-decay-iters 8 --save-interval 4)
$MPI -np 2 "$BIN" train "${ARGS[@]}" "${CK[@]}" --train-iters 8 --save "$TMP/ca" >"$TMP/ca.log" 2>&1 || { echo "FAIL: save run exited $?"; cat "$TMP/ca.log"; fail=1; }
$MPI -np 2 "$BIN" train "${ARGS[@]}" "${CK[@]}" --train-iters 4 --save "$TMP/cb" >"$TMP/cb1.log" 2>&1
$MPI -np 2 "$BIN" train "${ARGS[@]}" "${CK[@]}" --train-iters 8 --load "$TMP/cb" --save "$TMP/cb" >"$TMP/cb2.log" 2>&1 \
  || { echo "FAIL: resumed run exited $?"; cat "$TMP/cb2.log"; fail=1; }
if grep -q "loaded checkpoint" "$TMP/cb2.log" && [ "$(iters "$TMP/cb2.log" 1 | wc -l)" -eq 4 ] &&
   diff <(iters "$TMP/ca.log" 5 | grep -v '^iteration 6 ') <(iters "$TMP/cb2.log" 5 | grep -v '^iteration 6 ') >/dev/null &&
   cmp -s "$TMP/ca/iter_0000008/model_optim_rng.bin" "$TMP/cb/iter_0000008/model_optim_rng.bin"; then
  echo "ok: DP=2 distributed optimizer: 8 straight = 4 + resume + 4 (log lines, iteration-8 checkpoint bytes)"
else
  echo "FAIL: DP=2 distributed-optimizer resume differs:"; diff <(iters "$TMP/ca.log" 5) <(iters "$TMP/cb2.log" 5); fail=1
fi
$MPI -np 1 "$BIN" train "${ARGS[@]}" --lr-decay-iters 8 --train-iters 6 --load "$TMP/cb" --save "$TMP/cc" >"$TMP/cc.log" 2>&1 || true
# (the tracker names 8, so this run has nothing left to do and loads only)
if grep -q "loaded checkpoint .* at iteration 8" "$TMP/cc.log"; then echo "ok: a DP=2 checkpoint loads on one rank"
else echo "FAIL: a DP=2 checkpoint did not load on one rank"; cat "$TMP/cc.log"; fail=1; fi

mkdir -p "$TMP/g"; printf 'abc' >"$TMP/g/latest_checkpointed_iteration.txt"
check_bad 2 "g/latest_checkpointed_iteration.txt: expected an iteration number, got 'abc'" \
  "${ARGS[@]}" --train-iters 2 --load "$TMP/g"

# ---- 4. a rank dies ------------------------------------------------------------------
$DG_MPIRUN --bind-to none -np 2 "$BIN" train "${ARGS[@]}" --train-iters 100000 >"$TMP/k.log" 2>&1 &
mpid=$!
for _ in $(seq 1 300); do grep -q "iteration *3/" "$TMP/k.log" 2>/dev/null && break; sleep 0.1; done
victim=""; other=""
for p in $(pgrep -P $mpid); do
  r=$(tr '\0' '\n' </proc/$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  if [ "$r" = 1 ]; then victim=$p; elif [ "$r" = 0 ]; then other=$p; fi
done
if [ -z "$victim" ]; then
  echo "FAIL: could not find rank 1 among mpirun's children"; kill -9 $mpid; fail=1
else
  start=$(date +%s.%N)
  kill -9 "$victim"
  for _ in $(seq 1 600); do kill -0 $mpid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $mpid 2>/dev/null; then
    echo "FAIL: mpirun still running 60 s after rank 1 was killed"; pkill -9 -P $mpid; kill -9 $mpid; fail=1
  else
    wait $mpid; rc=$?
    secs=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $start))")
    st0=$( [ -n "$other" ] && ps -o stat= -p "$other" 2>/dev/null | tr -d ' ')
    if [ -n "$st0" ] && [ "${st0#Z}" = "$st0" ]; then echo "FAIL: rank 0 survived (state $st0)"; fail=1
    elif [ $rc -ne 0 ]; then echo "ok: rank 1 killed: every rank gone, mpirun exited $rc after ${secs}s"
    else echo "FAIL: mpirun exited 0 after a rank was killed"; fail=1; fi
  fi
fi
exit $fail
