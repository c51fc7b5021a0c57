#!/usr/bin/env bash
# train_cpu_vs_cuda.sh — the main job's model (the trainer's defaults: 4
# layers, hidden 256, 8 experts top-2) trains 10 iterations on mock data
# with --device cpu and --device cuda; every iteration's lm loss must agree
# within 1e-4 (fp32). Needs a GPU.
set -u
BIN=${DG_BUILD:?}/dagatron
ARGS="$(cat "$DG_SRC/tests/common/moe_arch.flags") --train-iters 10 --log-interval 1 --eval-iters 0 --mock-data --vocab-size 1000 --seed 1234"
cpu=$("$BIN" train --device cpu $ARGS 2>&1) || { echo "$cpu"; echo "FAIL: cpu run"; exit 1; }
gpu=$("$BIN" train --device cuda $ARGS 2>&1) || { echo "$gpu"; echo "FAIL: cuda run"; exit 1; }
losses() { sed -n 's/.*| lm loss: \([0-9.E+-]*\) |.*/\1/p'; }
paste <(echo "$cpu" | losses) <(echo "$gpu" | losses) | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; printf "iteration %2d: cpu %s cuda %s |diff| %.2e\n", n, $1, $2, d;
    if (d > 1e-4 || $2 == "") bad = 1 }
  END { if (n != 10) { print "FAIL: expected 10 logged iterations, got " n; exit 1 }
        if (bad) { print "FAIL: lm loss differs by more than 1e-4"; exit 1 } }'
