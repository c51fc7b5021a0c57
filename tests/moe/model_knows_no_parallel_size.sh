#!/usr/bin/env bash
# model_knows_no_parallel_size.sh SRC — the model-building code reads no
# parallel size: the model builders (moe/dg_model*.c), the router, the
# losses, permutation, grouped GEMM (all of moe/) and the ops (ops/*.c but
# the sharding rules, dg_op_shard.c, whose job is the mesh) must not name a
# parallel size, the mesh, or the EP lowering's options. Parallelism is the
# passes' business (parallel/, graph/passes; tests/parallel/
# passes_own_rewrites.sh checks the rest of the tree). The scanner is
# checked on a planted violation first, so a scanner that matches nothing
# fails too.
set -euo pipefail
src=${1:-${DG_SRC:?}}
fail() { echo "model_knows_no_parallel_size: $*"; exit 1; }
pattern='parallel_size|(tp|cp|ep|dp|pp|edp)_size|->mesh|\bmesh\[|dg_mesh_size|dg_ep_opts|moe_token_dispatcher_type|moe_a2a_overlap_chunks|DG_AXIS_(TP|CP|EP|DP|PP|EDP)\b.*(size|coord)'
scan() { grep -nE "$pattern" "$@" | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)' || true; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'int f(const cfg *c) {\n    return c->expert_model_parallel_size;\n}\n' >"$tmp/planted.c"
[ -n "$(scan "$tmp/planted.c")" ] || fail "the scanner misses a planted read of expert_model_parallel_size"

files=()
for f in "$src"/moe/*.c "$src"/ops/*.c; do
  case "$(basename "$f")" in dg_op_shard.c) continue ;; esac
  files+=("$f")
done
[ "${#files[@]}" -gt 10 ] || fail "found only ${#files[@]} model-building files under $src"
hits=$(scan "${files[@]}")
[ -z "$hits" ] || { echo "$hits"; fail "the model-building code reads a parallel size (above)"; }
echo "model_knows_no_parallel_size: ok (${#files[@]} files)"
