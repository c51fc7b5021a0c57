#!/usr/bin/env bash
# generate_stdout.sh GEN_CLI DAGATRON — `generate` whose standard output
# cannot be written (a full device) stops with one line naming standard
# output and exit 2 (issue 25, item 12; it exited 0 with the text lost), for
# text and for token ids; run through gen_cli too, which calls the command
# without dagatron's main (so the command's own checks are what answer).
set -uo pipefail
GEN=$1
exe=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "generate_stdout: $*"; exit 1; }

"$GEN" make-ckpt "$TMP/ckpt" >/dev/null || fail "make-ckpt"
"$GEN" make-ckpt "$TMP/ids" NullTokenizer >/dev/null || fail "make-ckpt NullTokenizer"
want="standard output: write failed: No space left on device"
full() { # RUNNER... : generate with stdout on /dev/full: exit 2, one error line
  # (a NullTokenizer checkpoint's note on stderr aside)
  local rc=0
  "$@" >/dev/full 2>"$TMP/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$TMP/err"))"
  [ "$(grep -vc ': note: ' "$TMP/err")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$TMP/err")"
  grep -v ': note: ' "$TMP/err" | grep -q "^dagatron: $want\$" || fail "$*: '$(cat "$TMP/err")' lacks '$want'"
}
for run in "$GEN generate" "$exe generate"; do
  # shellcheck disable=SC2086
  full $run --load "$TMP/ckpt" --prompt "The quick brown fox" --max-new-tokens 20 --greedy
  # shellcheck disable=SC2086
  full $run --load "$TMP/ids" --prompt "1 2 3" --max-new-tokens 20 --greedy
done
echo "generate_stdout: ok"
