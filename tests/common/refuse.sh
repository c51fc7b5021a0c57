# refuse.sh — sourced by the CLI tests that check a refusal. The caller
# defines fail (message -> exit 1) and TMP (a scratch directory), and gets
#   dg_refuse WANT CMD...   runs CMD and checks what the project promises
#                           of bad input: exit 2; one line on stderr, which
#                           begins "dagatron" and contains WANT (under
#                           mpirun its own report of the exit aside); no
#                           training iteration logged before it
dg_refuse() {
    local want=$1
    shift
    local rc=0
    "$@" >"$TMP/refuse.out" 2>"$TMP/refuse.err" || rc=$?
    local err
    err=$(cat "$TMP/refuse.err")
    [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2 ($err)"
    [ "$(grep -c '^dagatron' "$TMP/refuse.err")" -eq 1 ] || fail "$*: expected one line, got: $err"
    case $(basename "$1") in
    mpirun | mpiexec | orterun) ;;
    *) [ "$(wc -l <"$TMP/refuse.err")" -eq 1 ] || fail "$*: expected one line, got: $err" ;;
    esac
    grep '^dagatron' "$TMP/refuse.err" | grep -qF -- "$want" || fail "$*: '$err' lacks '$want'"
    ! grep -q "iteration " "$TMP/refuse.out" || fail "$*: trained before refusing"
}
