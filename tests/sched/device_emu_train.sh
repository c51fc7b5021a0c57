#!/usr/bin/env bash
# device_emu_train.sh — the device runtime (sched/dg_device_exec.h) on the
# emulated device against the CPU runtime: `dagatron train --device emulated`
# with random stream delays must print the same losses and grad norms, bit
# for bit, and save byte-identical checkpoints (parameters, optimizer state)
# as `--device cpu`, for each layout of issue 26's first acceptance item:
#   the default dense model (biases, learned positions, dropout 0.1,
#   clipping), the MoE model, and under mpirun TP=2 with SP, EP=2, DP=2 with
#   the distributed optimizer (overlapped), PP=2 (1F1B), CP=2, and PP=2 x
#   DP=2 (two comm groups, so two comm streams, busy at once); and 16-bit
#   tensors: EP=2 in bf16, CP=2 in fp16.
# Delays reorder the two streams' work; a cross-stream edge the executor
# failed to turn into an event shows as a different number.
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
COMMON=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
        --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --lr 3e-3
        --eval-iters 0 --compute-threads 1 --train-iters 2 --seed 7)
MOE=($(cat "$DG_SRC/tests/common/moe_arch.flags") --num-experts 4 --moe-router-topk 2 --group-query-attention
     --num-query-groups 2 --log-interval 1 --eval-iters 0)
DELAY=${DG_EMU_DELAY_US:-300}

# case NAME NP FLAGS...: cpu and emulated runs of the same layout must agree
# bit for bit. With REF=OTHER the cpu side is case OTHER's (flags that only
# the emulated device reads).
case_() {
  local name=$1 np=$2; shift 2
  local run=() devs="cpu emulated"
  [ "$np" -gt 1 ] && run=($MPI -np "$np")
  if [ -n "${REF:-}" ]; then
    cp "$TMP/$REF.cpu.log" "$TMP/$name.cpu.log" && cp -r "$TMP/$REF.cpu" "$TMP/$name.cpu" && devs=emulated
  fi
  for dev in $devs; do
    "${run[@]}" "$BIN" train "${COMMON[@]}" "$@" --device $dev --emulated-delay-us "$DELAY" \
      --save "$TMP/$name.$dev" >"$TMP/$name.$dev.log" 2>&1 ||
      { echo "FAIL: $name --device $dev exited non-zero:"; tail -5 "$TMP/$name.$dev.log"; fail=1; return; }
  done
  local a b
  a=$(grep -oE "lm loss: [^|]*|grad norm: [^|]*|load_balancing_loss: [^|]*" "$TMP/$name.cpu.log")
  b=$(grep -oE "lm loss: [^|]*|grad norm: [^|]*|load_balancing_loss: [^|]*" "$TMP/$name.emulated.log")
  if [ -z "$a" ] || [ "$(echo "$a" | grep -c "lm loss")" -ne 2 ]; then
    echo "FAIL: $name: expected 2 logged iterations"; cat "$TMP/$name.cpu.log"; fail=1; return
  fi
  if [ "$a" != "$b" ]; then
    echo "FAIL: $name: the emulated device's log differs from the CPU runtime's:"
    diff <(echo "$a") <(echo "$b"); fail=1; return
  fi
  if ! diff -r "$TMP/$name.cpu" "$TMP/$name.emulated" >/dev/null; then
    echo "FAIL: $name: the checkpoints differ:"; diff -r "$TMP/$name.cpu" "$TMP/$name.emulated" | head -5; fail=1; return
  fi
  # What crossed the bus: every node on the device, and per step only the
  # inputs up (far less than the parameters) and the logged values down.
  local line up down params
  line=$(grep -m1 "device emulated:" "$TMP/$name.emulated.log")
  up=$(echo "$line" | sed -n 's/.*per step \([0-9]*\) bytes up.*/\1/p')
  down=$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes down.*/\1/p')
  params=$(du -sb "$TMP/$name.cpu" | cut -f1)
  if { [[ "$name" != *fallback* ]] && [[ "$line" != *" 0 host-fallback nodes"* ]]; } || [ -z "$up" ] || [ -z "$down" ] || [ "$up" -le 0 ] ||
     [ "$down" -le 0 ] || [ "$up" -ge $((params / 20)) ] || [ "$down" -ge 65536 ]; then
    echo "FAIL: $name: the device line is wrong (checkpoint $params bytes): '$line'"; fail=1; return
  fi
  echo "ok: $name (np $np): $(echo "$a" | grep "lm loss" | paste -sd' ') — bitwise equal, checkpoints identical; $up B up, $down B down per step"
}

case_ dense 1
case_ moe 1 "${MOE[@]}"
case_ tp2_sp 2 --tensor-model-parallel-size 2 --sequence-parallel
case_ ep2 2 "${MOE[@]}" --expert-model-parallel-size 2
case_ dp2_zero 2 "${MOE[@]}" --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
case_ pp2 2 --pipeline-model-parallel-size 2
case_ cp2 2 --context-parallel-size 2 --position-embedding-type rope
# 16-bit tensors on the device (issue 27): the MoE model in bf16 under EP=2,
# and fp16 with its loss scale on CP=2's ring (16-bit K/V between ranks)
case_ ep2_bf16 2 "${MOE[@]}" --expert-model-parallel-size 2 --bf16
case_ cp2_fp16 2 --context-parallel-size 2 --position-embedding-type rope --fp16 --loss-scale 1024
# two comm groups with traffic (pp peers, dp), each on a device stream of its own
case_ pp2_dp2 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather

# A device without a kernel for an op (the emulated device told it lacks
# dropout and bias_grad) refuses the graph in one line naming the op, exit
# 2, stdout empty; with --device-host-fallback those nodes run on the host,
# and the results are still the CPU runtime's, bit for bit.
"$BIN" train "${COMMON[@]}" --device emulated --emulated-missing-ops dropout,bias_grad \
  >"$TMP/lacks.out" 2>"$TMP/lacks.err"; rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/lacks.err")" -eq 1 ] && [ ! -s "$TMP/lacks.out" ] &&
   grep -q "op 'dropout' has no kernel on the emulated device" "$TMP/lacks.err"; then
  echo "ok: a graph with an op the device lacks is refused: $(cat "$TMP/lacks.err")"
else
  echo "FAIL: missing kernels gave rc=$rc:"; cat "$TMP/lacks.out" "$TMP/lacks.err"; fail=1
fi
REF=dense case_ dense_fallback 1 --emulated-missing-ops dropout,bias_grad --device-host-fallback
if ! grep -qE "device emulated: [0-9]+ nodes on the device, [1-9][0-9]* host-fallback nodes" \
     "$TMP/dense_fallback.emulated.log"; then
  echo "FAIL: the fallback run does not say it ran nodes on the host"; fail=1
fi

# The trace of an emulated step comes from the device's per-node times.
"$BIN" train "${COMMON[@]}" --device emulated --trace "$TMP/trace.json" >"$TMP/trace.log" 2>&1 ||
  { echo "FAIL: --device emulated --trace"; tail -3 "$TMP/trace.log"; fail=1; }
if [ -s "$TMP/trace.json" ] && grep -q '"ph"' "$TMP/trace.json"; then echo "ok: --device emulated --trace writes events"
else echo "FAIL: no trace events from the emulated device"; fail=1; fi
exit $fail
