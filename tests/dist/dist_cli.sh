#!/usr/bin/env bash
# dist_cli.sh — `dagatron train` under mpirun with several ranks:
#  1. a world size the parallel sizes do not divide ends at once: exit 2 and
#     one line on stderr (mpirun -q keeps mpirun's own banner out);
#  2. DP = 2 runs print bitwise identical losses run to run, and the startup
#     line's optimizer-state bytes per rank with the distributed optimizer are
#     ~1/DP of the one-rank figure;
#  3. a rank killed with SIGKILL mid-run: the other ranks are gone and mpirun
#     has exited non-zero within 60 s (no hang in a collective).
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
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

# ---- 2. determinism and optimizer state --------------------------------------------
losses() { grep -o 'lm loss: [^|]*| load balancing loss: [^|]*| z loss: [^|]*| grad norm: [^|]*' "$1"; }
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

# ---- 3. a rank dies ------------------------------------------------------------------
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
