#!/usr/bin/env bash
# overlap_bench.sh — bench_overlap (issue 19) on a tiny model under mpirun
# -np 2, checking what does not depend on this shared machine's timing:
#  1. dp, ep and mb (--overlap-moe-expert-parallel-comm): exit 0, both
#     settings end with bitwise the same loss (ep: within 1e-5, chunking
#     sums the expert gradients chunk by chunk), the measured and
#     predicted rows are printed;
#  2. the simulator's predicted on/off ratio is < 1 for dp (virtual time:
#     the same graph, so no flake) and its h rises with the overlap;
#  3. --overlap with an unknown kind exits 2 with one line.
set -u
MPI="$DG_MPIRUN -q --bind-to none -np 2"
B=$DG_BUILD/bench_overlap
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
BASE=(--hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2
      --global-batch-size 8 --train-iters 2 --log-interval 2 --compute-threads 1)
TINY=("${BASE[@]}" --num-layers 2 --emulate-link 0.05,10)
# DP: 4 layers and a link under which the buckets' reductions are about
# backward's length, so there is something to hide (buckets reduced in the
# order backward finishes them: with the topological order alone the
# simulator saw layer 0's bucket first and predicted no win)
DP=("${BASE[@]}" --num-layers 4 --emulate-link 0.5,10 --ddp-bucket-size 20000)
MOE=(--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0 --attention-dropout 0
     --num-experts 4 --moe-router-topk 2 --expert-model-parallel-size 2)
run() { # name args...
  local name=$1; shift
  # shellcheck disable=SC2086
  if ! $MPI "$B" "$@" >"$TMP/$name.log" 2>&1; then echo "FAIL: $name exited nonzero:"; cat "$TMP/$name.log"; fail=1; return 1; fi
  local same="losses on vs off: bitwise equal"
  [ "$name" = ep ] && same="losses on vs off: (bitwise equal|equal within 1e-5)"
  for want in "measured  off" "measured  on" "$same" "predicted off" "predicted on" "predicted: step time on/off"; do
    grep -qE "$want" "$TMP/$name.log" || { echo "FAIL: $name: no '$want' line:"; cat "$TMP/$name.log"; fail=1; return 1; }
  done
  echo "ok: $name: $(grep -o 'losses on vs off: [a-z ]*' "$TMP/$name.log"); $(grep -o 'predicted: step time.*' "$TMP/$name.log")"
}
run dp --overlap dp "${DP[@]}" && {
  line=$(grep -o 'predicted: step time on/off = [0-9.]*; h: off [-0-9.]*, on [-0-9.]*' "$TMP/dp.log")
  if python3 - "$line" <<'PY'
import re, sys
r, hoff, hon = (float(v) for v in re.findall(r'-?[0-9]+\.[0-9]+', sys.argv[1]))
sys.exit(0 if r < 1 and hon > hoff else 1)
PY
  then echo "ok: dp: the simulator predicts a win: $line"
  else echo "FAIL: dp: predicted ratio not < 1 or h not higher with overlap: $line"; fail=1; fi
}
run ep --overlap ep "${TINY[@]}" "${MOE[@]}" --moe-a2a-overlap-chunks 2
run mb --overlap mb "${TINY[@]}" "${MOE[@]}" --micro-batch-size 1
# shellcheck disable=SC2086
$MPI "$B" --overlap xx "${TINY[@]}" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/bad.err")" -eq 1 ] && grep -q -- "--overlap: expected" "$TMP/bad.err"; then
  echo "ok: --overlap xx -> $(cat "$TMP/bad.err")"
else echo "FAIL: --overlap xx gave rc=$rc:"; cat "$TMP/bad.err"; fail=1; fi
exit $fail
