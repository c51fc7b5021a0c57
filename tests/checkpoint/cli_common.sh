# cli_common.sh — sourced by the `dagatron train` checkpoint scripts
# (reshard_cli.sh, pp_cli.sh) with the dagatron executable as $1. Sets BIN,
# PY (the reference python), HERE (tests/checkpoint), TMP (removed on exit),
# fail=0 and ARCH (the MoE architecture flags); the caller sets BASE (the
# flags every run shares) and gets
#   run NP LOG FLAGS...   dagatron train under NP ranks into LOG; on failure
#                         says so, sets fail=1 and returns 1
BIN=$1
PY=${DG_REF_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$HERE/../common/moe_arch.flags"))
run() {
  local np=$1 log=$2; shift 2
  $DG_MPIRUN -np "$np" --bind-to none "$BIN" train "${BASE[@]}" "$@" >"$log" 2>&1 ||
    { echo "FAIL: np $np $*: exited $?"; tail -5 "$log"; fail=1; return 1; }
}
