#!/usr/bin/env bash
# async_kill.sh — issue 17, acceptance 4: `kill -9` at random moments of a
# 4-rank run that saves every iteration with --async-save (20 trials) always
# leaves a checkpoint the tracker names that is complete (every slice's CRC
# checked by ckpt_verify.py); and the last trial's checkpoint resumes.
# Usage: async_kill.sh DAGATRON [TRIALS]
set -u
BIN=$1
TRIALS=${2:-20}
PY=${DG_REF_PYTHON:-/usr/bin/python3}
HERE=$(dirname "$0")
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ARCH=($(cat "$HERE/../common/moe_arch.flags"))
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --num-experts 4 --moe-router-topk 2 --micro-batch-size 2 --global-batch-size 8
      --log-interval 1 --lr 3e-3 --eval-iters 0 --compute-threads 1 --train-iters 100000
      --save-interval 1 --async-save --ckpt-keep-last 2)
fail=0
RANDOM=17 # the same moments every run
for i in $(seq 1 "$TRIALS"); do
  # each trial continues the previous one's checkpoints (--load = --save)
  setsid $DG_MPIRUN -np 4 --bind-to none "$BIN" train "${ARGS[@]}" --expert-model-parallel-size 2 \
    --load "$TMP/ck" --save "$TMP/ck" >"$TMP/run$i.log" 2>&1 &
  pid=$!
  # wait until the run has saved at least once, then kill at a random moment
  for _ in $(seq 1 600); do grep -q "checkpoint at iteration" "$TMP/run$i.log" && break; sleep 0.05; done
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
  # the whole job: mpirun and its ranks. OpenMPI puts each rank in its own
  # process group, so killing mpirun's group left the ranks running (and
  # saving, and pruning under the check below) until they noticed; they
  # all stay in setsid's session, so kill the session and wait until it is
  # empty.
  pkill -9 -s "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for _ in $(seq 1 200); do pgrep -s "$pid" >/dev/null || break; sleep 0.05; done
  if it=$("$PY" "$HERE/ckpt_verify.py" "$TMP/ck" 2>&1); then
    echo "ok: trial $i: killed; the tracker names iteration $it, complete"
  else
    echo "FAIL: trial $i: $it"; tail -3 "$TMP/run$i.log"; fail=1
  fi
done
$DG_MPIRUN -np 2 --bind-to none "$BIN" train "${ARGS[@]}" --train-iters 100000 --exit-interval 1 \
  --load "$TMP/ck" --save "$TMP/ck2" >"$TMP/resume.log" 2>&1 &&
  grep -q "loaded checkpoint from $TMP/ck" "$TMP/resume.log" ||
  { echo "FAIL: the last checkpoint does not resume under DP=2:"; tail -3 "$TMP/resume.log"; fail=1; }
exit $fail
