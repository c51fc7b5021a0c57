#!/usr/bin/env bash
# run_ref_train.sh — 10 training iterations in dagatron, replayed in PyTorch.
set -eu
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$DG_BUILD/tests/reference/ref_train" "$TMP/t" >"$TMP/log" || { cat "$TMP/log"; exit 1; }
"${DG_REF_PYTHON:-/usr/bin/python3}" "$DG_SRC/tests/reference/ref_train.py" "$TMP/t"
