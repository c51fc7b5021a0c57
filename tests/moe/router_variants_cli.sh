#!/bin/bash
# The router's variants in `dagatron train` (issue 29):
#  - aux-loss-free balancing (--moe-router-enable-expert-bias,
#    --moe-router-bias-update-rate), the router's input jitter
#    (--moe-input-jitter-eps) and random logits
#    (--moe-router-force-load-balancing) each change the run, and TP=2,
#    TP=2 with SP, CP=2, EP=2, PP=2 and DP=2 with the distributed optimizer
#    match the single-rank run over 5 iterations (losses, grad norms, final
#    parameters and expert biases within 1e-5);
#  - the bias balances: on a skewed corpus (Zipf-distributed token ids) the
#    max/mean of the tokens per expert falls over 100 iterations, and ends
#    below the same run's without the bias;
#  - it resumes bit for bit: 3 + 3 iterations through a checkpoint log the
#    losses of 6 uninterrupted ones and end with the same parameters and
#    biases (bitwise);
#  - under capacity dropping the update counts the kept slots: EP=2 matches;
#  - group-limited routing under CP=2 matches one rank (the aux loss's own
#    top-k counts, summed over cp);
#  - refusals: the bias without sigmoid scores, a jitter outside [0, 1).
set -euo pipefail
exe=$1
here=$(dirname "$0")
ARCH=($(cat "$here/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --num-experts 4 --moe-router-topk 2 --seq-length 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --log-interval 1 --eval-iters 0
      --make-vocab-size-divisible-by 32 --moe-router-score-function sigmoid)
FIELDS="lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
source "$here/../common/train_equiv.sh"
py=${DG_REF_PYTHON:-/usr/bin/python3}

layouts() {
    local name=$1
    shift
    local want
    want=$(run "$TMP/$name" 1 "$@")
    echo "np 1 $*: $want"
    [ -n "$want" ] || fail "$name: the single-rank run logged nothing"
    [ "$want" != "$plain" ] || fail "$name: $* changed nothing"
    check 2 "$want" "$TMP/$name" "$@" --tensor-model-parallel-size 2
    check 2 "$want" "$TMP/$name" "$@" --tensor-model-parallel-size 2 --sequence-parallel
    check 2 "$want" "$TMP/$name" "$@" --context-parallel-size 2
    check 2 "$want" "$TMP/$name" "$@" --expert-model-parallel-size 2
    check 2 "$want" "$TMP/$name" "$@" --pipeline-model-parallel-size 2
    check 2 "$want" "$TMP/$name" "$@" --use-distributed-optimizer
}
plain=$(run "$TMP/plain" 1)
bias=(--moe-router-enable-expert-bias --moe-router-bias-update-rate 0.05)
layouts bias "${bias[@]}"
# the biases are in the checkpoint, and moved
"$py" -c '
import json, os, sys
d = sys.argv[1]
it = int(open(os.path.join(d, "latest_checkpointed_iteration.txt")).read())
man = json.load(open(os.path.join(d, "iter_%07d" % it, "metadata.json")))
names = sorted(t["name"] for t in man["tensors"] if t["name"].endswith("router.expert_bias"))
assert names == ["decoder.layers.0.mlp.router.expert_bias", "decoder.layers.1.mlp.router.expert_bias"], names
' "$TMP/bias" || fail "the checkpoint lacks the expert biases"
# with capacity dropping the update counts the kept slots (Megatron's routing_map)
want=$(run "$TMP/capacity" 1 "${bias[@]}" --moe-expert-capacity-factor 1.0)
[ "$want" != "$(run "$TMP/capacity_plain" 1 --moe-expert-capacity-factor 1.0)" ] || fail "the bias changed nothing under capacity"
check 2 "$want" "$TMP/capacity" "${bias[@]}" --moe-expert-capacity-factor 1.0 --expert-model-parallel-size 2
# group-limited routing under CP: the aux loss counts its own plain top-k
groups=(--moe-router-num-groups 2 --moe-router-group-topk 1)
want=$(run "$TMP/groups" 1 "${groups[@]}")
check 2 "$want" "$TMP/groups" "${groups[@]}" --context-parallel-size 2
layouts jitter --moe-input-jitter-eps 0.1
# random logits without the MoE losses: their straight-through gradients of
# random scores reach the embedding as rounding noise that Adam's first
# steps magnify (1.5e-6 after one step under CP=2, 1.4e-5 after five; 6.6e-7
# after five without them)
layouts force --moe-router-force-load-balancing "${bias[@]}" --moe-aux-loss-coeff 0 --moe-z-loss-coeff 0

# --- balancing on a skewed corpus -----------------------------------------------------------
"$py" -c '
import json, random
r = random.Random(7)
w = [1.0 / (k + 1) ** 1.2 for k in range(99)]
with open("'"$TMP"'/zipf.jsonl", "w") as f:
    for d in range(200):
        f.write(json.dumps({"text": " ".join(str(t) for t in r.choices(range(99), weights=w, k=64))}) + "\n")
'
"$exe" preprocess --input "$TMP/zipf.jsonl" --output-prefix "$TMP/zipf" --tokenizer-type NullTokenizer \
    --vocab-size 99 >/dev/null
skew=("${ARCH[@]}" --data-path "$TMP/zipf_text_document" --tokenizer-type NullTokenizer --vocab-size 99
      --num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention --num-query-groups 2
      --num-experts 8 --moe-router-topk 2 --seq-length 32 --micro-batch-size 4 --global-batch-size 8
      --train-iters 100 --lr 1e-3 --log-interval 10 --eval-iters 0 --moe-router-score-function sigmoid
      --moe-aux-loss-coeff 0 --moe-per-layer-logging --split 100,0,0)
# max/mean of each logged window's tokens per expert, averaged over the layers
imbalance() {
    "$exe" train "${skew[@]}" "$@" 2>&1 | awk '/tokens per expert:/ {
        s = 0; m = 0; n = 0
        for (i = 6; i <= NF; i++) { s += $i; n++; if ($i > m) m = $i }
        w[int(k / 2)] += m / (s / n) / 2; k++ }
        END { printf "%.4f %.4f\n", w[0], w[int(k / 2) - 1] }'
}
read -r b0 b1 <<<"$(imbalance "${bias[@]}")"
read -r p0 p1 <<<"$(imbalance)"
echo "max/mean tokens per expert, first and last window: with the bias $b0 -> $b1, without $p0 -> $p1"
awk -v a="$b0" -v b="$b1" 'BEGIN { exit !(b < a) }' || fail "the bias did not lower max/mean ($b0 -> $b1)"
awk -v a="$p1" -v b="$b1" 'BEGIN { exit !(b < a) }' || fail "the bias run is not better balanced than without ($b1 vs $p1)"

# --- resume bit for bit ---------------------------------------------------------------------
FIELDS="iteration +[0-9]+/|lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
whole=$(run "$TMP/whole" 1 "${bias[@]}" --train-iters 6)
run "$TMP/half" 1 "${bias[@]}" --train-iters 6 --exit-interval 3 >/dev/null
rest=$(run "$TMP/half" 1 "${bias[@]}" --train-iters 6 --load "$TMP/half")
# iteration 5's line of the resumed run averages 4 and 5 (the run's first
# log line leaves its window open, as Megatron's): iterations 4 and 6
pick() { echo "$1" | grep -oE "iteration +$2/ [^i]*"; }
for i in 4 6; do
    [ "$(pick "$rest" $i)" = "$(pick "$whole" $i)" ] ||
        fail "iteration $i resumed: '$(pick "$rest" $i)', uninterrupted: '$(pick "$whole" $i)'"
done
"$py" "$here/../ep/ckpt_params_close.py" "$TMP/half" "$TMP/whole" 0 || fail "resumed parameters or biases differ"

source "$here/../common/refuse.sh"
refuse() { dg_refuse "$1" "$exe" train "${args[@]}" "${@:2}"; }
refuse "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid" \
    --moe-router-enable-expert-bias --moe-router-score-function softmax
refuse "--moe-input-jitter-eps: expected" --moe-input-jitter-eps 1.5
echo "OK"
