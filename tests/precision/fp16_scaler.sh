#!/usr/bin/env bash
# fp16_scaler.sh — --fp16's dynamic loss scale (issue 16, acceptance 3). A
# scale far too large overflows the fp16 gradients: those steps are skipped
# (Megatron's "number of skipped iterations" and no grad norm) and the scale
# halves; a short --loss-scale-window then doubles it until it overflows
# again mid-run. The logged scales must be exactly those of Megatron's
# DynamicGradScaler given which iterations were skipped, a skipped step must
# print no grad norm, and the loss of the clean steps must fall (the skip
# itself is the optimizer's, checked by test_train_nan).
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --swiglu --disable-bias-linear --normalization RMSNorm --position-embedding-type rope --num-experts 4
      --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --micro-batch-size 4 --global-batch-size 8 --lr 3e-3
      --lr-warmup-iters 5 --train-iters 40 --log-interval 1 --eval-iters 0
      --fp16 --initial-loss-scale 4294967296 --loss-scale-window 4 --hysteresis 2 --min-loss-scale 1)
"$BIN" train "${ARGS[@]}" >"$TMP/a.log" 2>&1 || { echo "FAIL: fp16 run exited $?"; cat "$TMP/a.log"; exit 1; }
python3 - "$TMP/a.log" <<'PY'
import math, re, sys
lines = [l for l in open(sys.argv[1]) if '] iteration ' in l]
if len(lines) != 40:
    sys.exit("FAIL: expected 40 iteration lines, got %d" % len(lines))
# Megatron's DynamicGradScaler (initial 2^32, window 4, hysteresis 2, min 1)
scale, growth, hyst = 2.0 ** 32, 0, 2
skips, after_clean, fail = 0, 0, 0
counts = []
for i, l in enumerate(lines, 1):
    counts.append(int(re.search(r"number of skipped iterations: +(\d+)", l).group(1)))
    # as Megatron's training_log, the first line leaves its window open:
    # line 2 counts iterations 1 and 2
    skipped = counts[-1] - (counts[0] if i == 2 else 0)
    logged = float(re.search(r"loss scale: ([0-9.]+)", l).group(1))
    has_norm = " grad norm: " in l
    if skipped:
        skips += 1
        after_clean += i > 1 and not prev_skipped
        growth = 0; hyst -= 1
        if hyst <= 0:
            scale = max(scale * 0.5, 1.0)
    else:
        growth += 1
        if growth == 4:
            growth = 0; hyst = 2; scale *= 2
    if logged != scale:
        print("FAIL: iteration %d: loss scale %s, Megatron's scaler gives %s" % (i, logged, scale)); fail = 1
    if has_norm == bool(skipped):
        print("FAIL: iteration %d: a grad norm %s on a %s step" % (i, "printed" if has_norm else "missing",
              "skipped" if skipped else "clean")); fail = 1
    prev_skipped = skipped
clean = [l for l in lines if re.search(r"number of skipped iterations: +0 ", l)]
last = float(re.search(r"lm loss: ([0-9.E+-]+)", clean[-1]).group(1)) if clean else float("nan")
first = float(re.search(r"lm loss: ([0-9.E+-]+)", clean[0]).group(1)) if clean else float("nan")
if not math.isfinite(last) or not last < first:
    print("FAIL: the clean steps' lm loss went %s -> %s" % (first, last)); fail = 1
if skips < 3 or after_clean < 1:
    print("FAIL: expected overflows at the start and again after clean steps (skips %d, after clean %d)" % (skips, after_clean)); fail = 1
if fail:
    sys.exit(1)
print("ok: %d skipped fp16 steps (%d after clean ones), every logged scale equals the DynamicGradScaler's; "
      "final scale %g, last lm loss %g" % (skips, after_clean, scale, last))
PY
