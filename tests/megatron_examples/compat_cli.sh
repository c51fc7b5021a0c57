#!/usr/bin/env bash
# compat_cli.sh — Megatron flags built by train/dg_train_compat.c and
# train/dg_train_exit.c: schedules by samples, refusals as "not supported"
# (one line, exit 2), the start-up note of flags accepted without effect,
# and --exit-signal-handler (SIGTERM: save, exit 0).
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16
      --micro-batch-size 2 --global-batch-size 4 --log-interval 1 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0)

# --train-samples 16 / --global-batch-size 4 = 4 iterations; warmup over 6
# samples from --lr-warmup-init: iteration 1 is at sample 4 (lr 2e-4 +
# 8e-4 * 4/6), iteration 2 at sample 8, past the warmup (constant: 1e-3).
"$BIN" train "${ARGS[@]}" --train-samples 16 --lr 1e-3 --lr-warmup-samples 6 --lr-warmup-init 2e-4 \
  --lr-decay-style constant --use-mcore-models --no-rope-fusion >"$TMP/s.log" 2>&1 || { echo "FAIL: samples run exited $?"; cat "$TMP/s.log"; exit 1; }
lrs=$(grep -o 'learning rate: [0-9.E+-]*' "$TMP/s.log" | awk '{print $3}' | paste -sd' ')
[ "$lrs" = "7.333333E-04 1.000000E-03 1.000000E-03 1.000000E-03" ] \
  && echo "ok: --train-samples 16: 4 iterations, learning rates $lrs" \
  || { echo "FAIL: learning rates by samples: '$lrs'"; fail=1; }
grep -q "iteration        4/       4" "$TMP/s.log" || { echo "FAIL: --train-samples 16 did not make 4 iterations"; fail=1; }
grep -q "note: accepted without effect here (docs/megatron_compat.md): --use-mcore-models --no-rope-fusion" "$TMP/s.log" \
  && echo "ok: the start-up note names the flags accepted without effect" \
  || { echo "FAIL: no start-up note naming --use-mcore-models --no-rope-fusion"; fail=1; }

# Refusals: one line on stderr, exit 2, naming the flag.
check_bad() { # expected-substring args...
  local want=$1; shift
  "$BIN" train "${ARGS[@]}" "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"; rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" "$TMP/bad.err" || [ "$(wc -l <"$TMP/bad.err")" -ne 1 ]; then
    echo "FAIL: '$*' gave rc=$rc, stderr:"; cat "$TMP/bad.err"; fail=1
  else echo "ok: $* -> $(cat "$TMP/bad.err")"; fi
}
check_bad "--bf16 and --fp16 exclude each other" --bf16 --fp16
check_bad "--fp8-format: not supported: fp8 training" --fp8-format hybrid
check_bad "--rope-type yarn: not supported: ordinary attention takes --rope-type rope" --rope-type yarn
check_bad "--optimizer sgd: not supported" --optimizer sgd
check_bad "--expert-tensor-parallel-size 2: expected 1 or --tensor-model-parallel-size" --expert-tensor-parallel-size 2
check_bad "is odd; RoPE needs it even" --position-embedding-type rope --kv-channels 15
check_bad "--train-samples and --train-iters exclude each other" --train-samples 8 --train-iters 2
check_bad "--moe-router-load-balancing-type sinkhorn: not supported" --num-experts 4 --swiglu --disable-bias-linear \
  --moe-router-load-balancing-type sinkhorn
check_bad "the shared expert takes no biases" --num-experts 4 --moe-shared-expert-intermediate-size 16
check_bad "--activation-func-clamp-value 7: with --swiglu only in MoE models" --swiglu --activation-func-clamp-value 7
check_bad "unknown flag '--moe-router-topkk' (did you mean --moe-router-topk?)" --moe-router-topkk 2
# --no-load-optim on a first launch (nothing to load) runs; resuming with it
# is tests/checkpoint's (test_checkpoint_flags_cli).
"$BIN" train "${ARGS[@]}" --train-iters 2 --load "$TMP/fresh" --save "$TMP/fresh" --no-load-optim >/dev/null 2>&1 \
  && echo "ok: --no-load-optim with nothing to load runs" || { echo "FAIL: --no-load-optim on a first launch"; fail=1; }

# --ffn-hidden-size's default (the checkpoint records it): 4 x hidden, and
# with --swiglu Megatron's int(4 x hidden x 2/3 / 64) x 64.
ffn() { rm -rf "$TMP/ffn"; "$BIN" train "${ARGS[@]}" --hidden-size 128 --train-iters 1 --save "$TMP/ffn" "$@" >/dev/null 2>&1
        grep -o '"ffn_hidden_size":[^,]*' "$TMP/ffn/iter_0000001/metadata.json" | awk '{print $NF}'; }
f1=$(ffn); f2=$(ffn --swiglu)
[ "$f1" = 512 ] && [ "$f2" = 320 ] && echo "ok: --ffn-hidden-size defaults: $f1, with --swiglu $f2" \
  || { echo "FAIL: --ffn-hidden-size defaults '$f1' (want 512), with --swiglu '$f2' (want 320)"; fail=1; }

# seq_aux_loss: the load-balancing loss per sequence. With one sequence per
# micro-batch it is the batch's loss; with two it differs.
MOE=(--num-experts 4 --moe-router-topk 2 --swiglu --disable-bias-linear --moe-aux-loss-coeff 1e-2 --train-iters 2)
# (Megatron's field: load_balancing_loss for aux_loss, seq_load_balancing_loss
# for seq_aux_loss; tests/log checks which fields each type prints.)
lb() { # field flags...
  local key=$1; shift
  "$BIN" train "${ARGS[@]}" "${MOE[@]}" "$@" 2>&1 | grep -oE " $key: [0-9.E+-]*" | awk '{print $2}' | paste -sd' '
}
a1=$(lb load_balancing_loss --micro-batch-size 1 --moe-router-load-balancing-type aux_loss)
s1=$(lb seq_load_balancing_loss --micro-batch-size 1 --moe-router-load-balancing-type seq_aux_loss)
a2=$(lb load_balancing_loss --moe-router-load-balancing-type aux_loss)
s2=$(lb seq_load_balancing_loss --moe-router-load-balancing-type seq_aux_loss)
if python3 -c "
import sys
a1, s1, a2, s2 = [list(map(float, x.split())) for x in ('$a1', '$s1', '$a2', '$s2')]
ok = len(a1) == len(s1) == len(a2) == len(s2) == 2
ok = ok and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(a1, s1)) and any(abs(x - y) > 1e-4 * abs(x) for x, y in zip(a2, s2))
sys.exit(0 if ok else 1)"; then
  echo "ok: seq_aux_loss equals aux_loss for one sequence ($a1 / $s1), differs for two ($a2 / $s2)"
else
  echo "FAIL: seq_aux_loss: mbs 1: '$a1' vs '$s1'; mbs 2: '$a2' vs '$s2'"; fail=1
fi

# --exit-signal-handler: SIGTERM mid-run saves a checkpoint at the iteration
# it stopped after, prints Megatron's line and exits 0.
"$BIN" train "${ARGS[@]}" --train-iters 100000 --exit-signal-handler --save "$TMP/sig" >"$TMP/sig.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "] iteration        3/" "$TMP/sig.log" 2>/dev/null && break; sleep 0.1; done
kill -TERM $pid
wait $pid; rc=$?
it=$(grep -o 'exiting program after receiving SIGTERM at iteration [0-9]*' "$TMP/sig.log" | awk '{print $NF}')
saved=$(cat "$TMP/sig/latest_checkpointed_iteration.txt" 2>/dev/null)
if [ $rc -eq 0 ] && [ -n "$it" ] && [ "$saved" = "$it" ]; then
  echo "ok: SIGTERM: exited 0 after iteration $it with a checkpoint of it"
else
  echo "FAIL: SIGTERM: rc=$rc, exit line iteration '$it', checkpoint '$saved'"; tail -5 "$TMP/sig.log"; fail=1
fi
exit $fail
