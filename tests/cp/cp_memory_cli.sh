#!/bin/bash
# Context parallelism's memory (issue 14, acceptance 2): at the same
# sequence length, the attention activations a rank holds for the backward
# (printed by `dagatron train` at startup) are about half at CP=2 of the
# single rank's (ring attention keeps only the rank's own chunks and the
# final output, nothing it received), and a quarter at CP=4; the all-to-all
# variant holds what the ring does (the sequence of half the heads).
set -euo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
common=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --seq-length 64 --micro-batch-size 2
        --global-batch-size 4 --num-experts 0 --num-attention-heads 4 --train-iters 1 --eval-iters 0)
# bytes NP [FLAGS]: the attention activations per rank at CP=NP
bytes() {
    local np=$1
    shift
    # `sed -n 1p` reads to the end, so no pipe is closed on a writer still
    # writing (under pipefail its SIGPIPE would end the script silently)
    $DG_MPIRUN -np "$np" "$exe" train "${common[@]}" --context-parallel-size "$np" "$@" 2>&1 |
        sed -n 's/^attention activations saved for the backward: \([0-9]*\) bytes per rank.*/\1/p' | sed -n 1p
}
b1=$(bytes 1)
b2=$(bytes 2)
b4=$(bytes 4)
a2=$(bytes 2 --cp-comm-type a2a)
echo "attention activations per rank: CP=1 $b1 bytes, CP=2 $b2 bytes, CP=4 $b4 bytes, CP=2 a2a $a2 bytes"
[ -n "$b1" ] && [ -n "$b2" ] && [ -n "$b4" ] && [ -n "$a2" ] || fail "a run did not print its attention activations"
[ "$a2" -eq "$b2" ] || fail "a2a holds $a2 bytes, the ring $b2"
[ "$b1" -gt 0 ] || fail "CP=1 holds no attention activations"
awk -v a="$b1" -v b="$b2" -v c="$b4" 'BEGIN {
    r2 = b / a; r4 = c / a;
    printf "CP=2 / CP=1 = %.3f, CP=4 / CP=1 = %.3f\n", r2, r4;
    exit !(r2 > 0.45 && r2 < 0.55 && r4 > 0.2 && r4 < 0.3) }' || fail "not about 1/2 and 1/4 of one rank's"
echo "OK"
