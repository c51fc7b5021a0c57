#!/bin/bash
# --moe-use-upcycling and --moe-upcycling-granularity in `dagatron train`
# (issue 29, Megatron-LM's upcycling_utils.py):
#  - a dense run trains 2 iterations and saves; the MoE run upcycled from it
#    (4 experts, top-2, softmax after top-k, no aux loss: every chosen
#    expert a copy of the dense MLP, their probabilities summing to 1)
#    logs, at its first iteration (2: the upcycled model is saved at 1), the
#    dense model's loss on the same batch (the dense checkpoint run with
#    --finetune from iteration 1), within 1e-5;
#  - the saved checkpoint (iteration 1) holds the dense model's tensors and
#    its MLPs upcycled as upcycling_utils does (upcycle_check.py, an
#    independent numpy oracle): granularity 1 and 2, SwiGLU without biases
#    (with a shared expert) and GeLU with biases under
#    --moe-router-pre-softmax (Megatron's other scale);
#  - without --load, the dense model's random init is upcycled (a warning
#    says so): it equals upcycling a dense run's init (--lr 0);
#  - EP=2, TP=2 and PP=2 give one rank's upcycled parameters, bit for bit;
#  - refusals, one line, exit 2 (under mpirun too), nothing left in --save.
set -uo pipefail
exe=$1
here=$(cd "$(dirname "$0")" && pwd)
PY=${DG_REF_PYTHON:-/usr/bin/python3}
MPI=${DG_MPIRUN:-mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
source "$here/../common/refuse.sh"

base=(--mock-data --vocab-size 100 --make-vocab-size-divisible-by 64 --num-layers 2 --hidden-size 32
      --num-attention-heads 4 --seq-length 16 --micro-batch-size 2 --global-batch-size 4 --log-interval 1
      --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --lr 1e-2 --lr-decay-style constant)
swiglu=(--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear)
moe=(--num-experts 4 --moe-router-topk 2)
train() { # LOG FLAGS...: one rank
    local log=$1
    shift
    "$exe" train "${base[@]}" "$@" >"$log" 2>&1 || { fail "train $* exited $?: $(tail -2 "$log")"; return 1; }
}
mpitrain() { # LOG NP FLAGS...
    local log=$1 np=$2
    shift 2
    $MPI -np "$np" --bind-to none "$exe" train "${base[@]}" "$@" >"$log" 2>&1 ||
        { fail "np $np train $* exited $?: $(tail -2 "$log")"; return 1; }
}
loss_at() { grep -oE "iteration +$2/.*lm loss: [0-9.E+-]+" "$1" | grep -oE "lm loss: [0-9.E+-]+" | awk '{print $3}'; }
check() { # DENSE MOE G TOPK PRE_SOFTMAX
    "$PY" "$here/upcycle_check.py" "$@" >"$TMP/check.out" 2>&1 && echo "ok: $(tail -1 "$TMP/check.out")" ||
        { fail "upcycle_check $*:"; cat "$TMP/check.out"; }
}

# 1. the same loss: dense 2 iterations, then the dense checkpoint's loss on batch 0 and the upcycled MoE's
train "$TMP/d.log" "${swiglu[@]}" --ffn-hidden-size 48 --train-iters 2 --save "$TMP/dense"
train "$TMP/dref.log" "${swiglu[@]}" --ffn-hidden-size 48 --train-iters 1 --load "$TMP/dense" --finetune
train "$TMP/u.log" "${swiglu[@]}" "${moe[@]}" --ffn-hidden-size 48 --train-iters 2 --moe-use-upcycling \
    --load "$TMP/dense" --save "$TMP/u"
want=$(loss_at "$TMP/dref.log" 1) got=$(loss_at "$TMP/u.log" 2)
grep -q "upcycled checkpoint saved to $TMP/u" "$TMP/u.log" || fail "no 'upcycled checkpoint saved' line"
[ -d "$TMP/u/iter_0000001" ] && [ "$(cat "$TMP/u/latest_checkpointed_iteration.txt" 2>/dev/null)" = 2 ] ||
    fail "the upcycled run did not save iterations 1 and 2"
if [ -n "$want" ] && [ -n "$got" ] && awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * b) }'; then
    echo "ok: the upcycled MoE's first loss $got = the dense model's $want"
else
    fail "upcycled MoE's first loss '$got', the dense model's '$want'"
fi

# 2. the upcycled tensors: granularity 1 and 2 (SwiGLU, a shared expert), GeLU with biases under pre-softmax
train "$TMP/g1.log" "${swiglu[@]}" "${moe[@]}" --ffn-hidden-size 48 --train-iters 1 --moe-use-upcycling \
    --load "$TMP/dense" --save "$TMP/g1" --moe-shared-expert-intermediate-size 16 && check "$TMP/dense" "$TMP/g1" 1 2 0
train "$TMP/g2.log" "${swiglu[@]}" "${moe[@]}" --ffn-hidden-size 24 --train-iters 1 --moe-use-upcycling \
    --moe-upcycling-granularity 2 --load "$TMP/dense" --save "$TMP/g2" && check "$TMP/dense" "$TMP/g2" 2 2 0
train "$TMP/dg.log" --ffn-hidden-size 48 --train-iters 2 --save "$TMP/dgelu"
train "$TMP/gg.log" "${moe[@]}" --ffn-hidden-size 24 --train-iters 1 --moe-use-upcycling --moe-upcycling-granularity 2 \
    --moe-router-pre-softmax --load "$TMP/dgelu" --save "$TMP/gg" && check "$TMP/dgelu" "$TMP/gg" 2 2 1

# 3. no --load: the dense model's random init (a dense run at --lr 0 keeps its init)
train "$TMP/d0.log" "${swiglu[@]}" --ffn-hidden-size 48 --train-iters 1 --lr 0 --save "$TMP/d0"
train "$TMP/r.log" "${swiglu[@]}" "${moe[@]}" --ffn-hidden-size 48 --train-iters 1 --moe-use-upcycling --save "$TMP/r" &&
    check "$TMP/d0" "$TMP/r" 1 2 0
grep -q "WARNING: --moe-use-upcycling without a dense checkpoint" "$TMP/r.log" || fail "no warning without --load"

# 4. EP=2, TP=2 and PP=2 upcycle the same parameters as one rank
for lay in "--expert-model-parallel-size 2" "--tensor-model-parallel-size 2" "--pipeline-model-parallel-size 2"; do
    dir="$TMP/lay$(echo "$lay" | tr -dc 0-9a-z)"
    mpitrain "$TMP/lay.log" 2 "${swiglu[@]}" "${moe[@]}" --ffn-hidden-size 24 --train-iters 1 --moe-use-upcycling \
        --moe-upcycling-granularity 2 --load "$TMP/dense" --save "$dir" $lay &&
        { "$PY" "$here/../ep/ckpt_params_close.py" "$dir" "$TMP/g2" 0 >"$TMP/close.out" 2>&1 &&
            echo "ok: $lay: $(tail -1 "$TMP/close.out")" || { fail "$lay:"; cat "$TMP/close.out"; }; }
done

# 5. refusals
up=("${swiglu[@]}" "${moe[@]}" --ffn-hidden-size 48 --train-iters 1 --moe-use-upcycling --load "$TMP/dense")
dg_refuse "already holds a checkpoint" "$exe" train "${base[@]}" "${up[@]}" --save "$TMP/g1"
dg_refuse "already holds a checkpoint" $MPI -np 2 "$exe" train "${base[@]}" "${up[@]}" --save "$TMP/g1" \
    --expert-model-parallel-size 2
dg_refuse "--moe-use-upcycling needs --save" "$exe" train "${base[@]}" "${up[@]}"
dg_refuse "--moe-upcycling-granularity 3 does not divide --num-experts 4" "$exe" train "${base[@]}" "${up[@]}" \
    --moe-upcycling-granularity 3 --save "$TMP/bad"
dg_refuse "--moe-ffn-hidden-size 16 must be --ffn-hidden-size 48" "$exe" train "${base[@]}" "${up[@]}" \
    --moe-ffn-hidden-size 16 --save "$TMP/bad"
dg_refuse "--moe-use-upcycling needs --num-experts" "$exe" train "${base[@]}" "${swiglu[@]}" --train-iters 1 \
    --moe-use-upcycling --save "$TMP/bad"
dg_refuse "with a dense layer (1, --moe-layer-freq)" "$exe" train "${base[@]}" "${up[@]}" --moe-layer-freq 2 \
    --moe-upcycling-granularity 2 --ffn-hidden-size 24 --save "$TMP/bad"
dg_refuse "--moe-use-upcycling with --quick-geglu" "$exe" train "${base[@]}" "${moe[@]}" --quick-geglu \
    --train-iters 1 --moe-use-upcycling --save "$TMP/bad"
dg_refuse "expected --ffn-hidden-size 48 x --moe-upcycling-granularity 2 = 96" "$exe" train "${base[@]}" "${up[@]}" \
    --moe-upcycling-granularity 2 --save "$TMP/bad"
dg_refuse "not a dense checkpoint (--num-experts 4)" "$exe" train "${base[@]}" "${swiglu[@]}" "${moe[@]}" \
    --ffn-hidden-size 48 --train-iters 1 --moe-use-upcycling --load "$TMP/g1" --save "$TMP/bad"
dg_refuse "the checkpoint's model has num_attention_heads = 4, this run has 2" "$exe" train "${base[@]}" "${up[@]}" \
    --num-attention-heads 2 --save "$TMP/bad"
dg_refuse "the checkpoint's model has num_attention_heads = 4, this run has 2" $MPI -np 2 "$exe" train "${base[@]}" \
    "${up[@]}" --num-attention-heads 2 --expert-model-parallel-size 2 --save "$TMP/bad"
dg_refuse "the checkpoint's model has normalization_layernorm = 0, this run has 1" "$exe" train "${base[@]}" \
    "${up[@]}" --normalization LayerNorm --save "$TMP/bad"
[ ! -e "$TMP/bad" ] || fail "a refused run left $TMP/bad behind"
[ "$failed" = 0 ] && echo "upcycling: all checks passed"
exit $failed
