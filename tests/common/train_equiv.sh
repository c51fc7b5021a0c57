# train_equiv.sh — sourced by the `dagatron train` equivalence tests
# (tests/ep, tests/tp, tests/etp, tests/cp): a parallel layout against the single-rank
# run on the same global batch. Before sourcing, the caller sets
#   exe      the dagatron executable
#   args     (array) the flags every run shares
#   FIELDS   the log fields compared, an extended regex for grep -o, e.g.
#            "lm loss: [0-9.E+-]+|grad norm: [0-9.]+"
# and gets fail, TMP (removed on exit), run and check:
#   run CKPT_DIR NP FLAGS...       the FIELDS of every logged iteration, on
#                                  one line; the final checkpoint goes to
#                                  CKPT_DIR
#   check NP WANT REF_CKPT FLAGS...  run under NP ranks: the same fields in
#                                  the same order as WANT, each within 1e-5
#                                  relative, and the final parameters
#                                  within 1e-5 relative of REF_CKPT's (the
#                                  checkpoints hold whole tensors);
#                                  PARAMS_ATOL, when set, is the norm below
#                                  which a tensor is compared absolutely
#                                  (ckpt_params_close.py's atol: a key bias)
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
_equiv_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run() {
    local ck=$1 np=$2
    shift 2
    $DG_MPIRUN -np "$np" "$exe" train "${args[@]}" --save "$ck" "$@" 2>&1 | grep -oE "$FIELDS" | paste -sd' '
}
n_check=0
check() {
    local np=$1 want=$2 ref=$3
    shift 3
    local got
    n_check=$((n_check + 1))
    got=$(run "$TMP/ck$n_check" "$np" "$@")
    echo "np $np $*: $got"
    [ -n "$got" ] || fail "np $np $*: no log lines"
    awk -v a="$got" -v b="$want" -f "$_equiv_dir/logs_close.awk" || fail "np $np $*: differs from the single-rank run"
    "${DG_REF_PYTHON:-/usr/bin/python3}" "$_equiv_dir/../ep/ckpt_params_close.py" "$TMP/ck$n_check" "$ref" 1e-5 \
        ${PARAMS_ATOL:-} ||
        fail "np $np $*: final parameters differ from the single-rank run"
}
