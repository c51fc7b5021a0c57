#!/usr/bin/env bash
# emulate_train.sh — `dagatron train --emulate-link` under mpirun -np 2:
#  1. EP = 2 with --overlap-grad-reduce, with and without emulated links
#     (every axis, then per axis): bitwise the same losses and grad norms,
#     and every emulated iteration lasts at least the latencies alone of the
#     busiest group kind's collectives (its comm lane's tasks in the plan x
#     the smallest alpha: each ep or dp collective here is over 2 ranks, so
#     it costs >= alpha, and a lane runs them one after another; the lanes
#     of different kinds run side by side). A lower bound, not a comparison
#     with the plain run, whose time depends on the load of this shared box;
#  2. malformed specs: exit 2 and one line on stderr naming the flag.
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags")) # the MoE architecture (SwiGLU experts)
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --num-experts 4 --moe-router-topk 2 --micro-batch-size 2 --global-batch-size 8
      --log-interval 1 --lr 3e-3 --eval-iters 0 --compute-threads 1 --train-iters 3
      --expert-model-parallel-size 2 --overlap-grad-reduce --moe-a2a-overlap-chunks 2)
losses() { grep -o 'lm loss: [^|]*| load_balancing_loss: [^|]*| z_loss: [^|]*| loss scale: [^|]*| grad norm: [^|]*' "$1"; }
# mean elapsed ms of iterations 2.. (the first includes warm-up)
ms() { grep -o 'elapsed time per iteration (ms): [0-9.]*' "$1" | tail -n +2 | awk '{s+=$NF; n++} END {print s/n}'; }

$MPI -np 2 "$BIN" train "${ARGS[@]}" >"$TMP/off.log" 2>&1 || { echo "FAIL: run without emulation exited $?"; cat "$TMP/off.log"; fail=1; }
for case in "2 0.05,2000" "0.5 ep=0.05,2000 dp=0.02,500"; do
  alpha_ms=${case%% *}; spec=${case#* }
  # shellcheck disable=SC2086
  $MPI -np 2 "$BIN" train "${ARGS[@]}" --emulate-link $spec >"$TMP/on.log" 2>&1 \
    || { echo "FAIL: --emulate-link $spec exited $?"; cat "$TMP/on.log"; fail=1; }
  if [ "$(losses "$TMP/off.log" | wc -l)" -eq 3 ] && diff <(losses "$TMP/off.log") <(losses "$TMP/on.log") >/dev/null; then
    echo "ok: --emulate-link $spec: losses bitwise identical to the run without"
  else
    echo "FAIL: --emulate-link $spec: losses differ (or are missing)"; diff <(losses "$TMP/off.log") <(losses "$TMP/on.log"); fail=1
  fi
  # the plan line: "comm N: ep a, dp b, ..." (tasks per group kind's lane)
  ncomm=$(grep -o 'plan: [0-9]* tasks (compute [0-9]*, comm [0-9]*: [^)]*' "$TMP/on.log" | head -1 | sed 's/.*comm [0-9]*: //' |
          tr ',' '\n' | awk '($1 == "ep" || $1 == "dp") && $2 > m {m = $2} END {print m + 0}')
  least=$(python3 -c "print(${ncomm:-0} * $alpha_ms)")
  slowest_ok=$(grep -o 'elapsed time per iteration (ms): [0-9.]*' "$TMP/on.log" |
               awk -v b="$least" '$NF < b {bad=1} END {print bad ? 0 : 1}')
  if [ "${ncomm:-0}" -gt 10 ] && [ "$slowest_ok" = 1 ]; then
    echo "ok: --emulate-link $spec: every iteration >= $least ms ($ncomm collectives of one kind x $alpha_ms ms): $(ms "$TMP/on.log") ms after the first"
  else
    echo "FAIL: --emulate-link $spec: an iteration under $least ms ($ncomm collectives of one kind x $alpha_ms ms):"
    grep -o 'elapsed time per iteration (ms): [0-9.]*' "$TMP/on.log"; fail=1
  fi
done

check_bad() { # expected-substring spec words...
  local want=$1; shift
  $MPI -np 2 "$BIN" train "${ARGS[@]}" --emulate-link "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$want" "$TMP/bad.err" || [ "$(wc -l <"$TMP/bad.err")" -ne 1 ]; then
    echo "FAIL: --emulate-link $* gave rc=$rc, stderr:"; cat "$TMP/bad.err"; fail=1
  else echo "ok: --emulate-link $* -> $(cat "$TMP/bad.err")"; fi
}
check_bad "--emulate-link: 'xx=10,10' is not GBPS,USEC" xx=10,10
check_bad "--emulate-link: '10' is not GBPS,USEC" 10
check_bad "--emulate-link: 'ep=0,10' is not GBPS,USEC" tp=400,2 ep=0,10
check_bad "--emulate-link: '10,-5' is not GBPS,USEC" 10,-5
exit $fail
