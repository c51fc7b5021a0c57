#!/usr/bin/env bash
# run_ref.sh VARIANT... — dump the model from dagatron, compare in PyTorch.
set -eu
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$DG_BUILD/tests/reference/ref_dump" "$TMP/m" "$@"
"${DG_REF_PYTHON:-/usr/bin/python3}" "$DG_SRC/tests/reference/ref_moe_model.py" "$TMP/m"
