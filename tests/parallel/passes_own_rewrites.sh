#!/usr/bin/env bash
# passes_own_rewrites.sh SRC — the shape of the parallel passes, from the
# source (issue 28):
#
#   1. every parallel pass's rewrites are reachable only through its own
#      table: in parallel/<pass>/, each function a table entry names
#      ({&dg_op_x, fn, ...}) is static in the table's file and named in no
#      other file; the table itself is read only inside its folder; and no
#      op definition carries a rewrite (dg_op_def has no `lower`);
#   2. no file of graph/passes, parallel/, ops/ or moe/ looks an op up by
#      its name (an op is chosen by its traits or its definition);
#   3. no file outside the passes (parallel/, graph/passes/), the rank grid
#      (sched/dg_grid.c; on the graph's side the layouts, graph/dg_layout.c,
#      and their check, dg_verify_sharding.c), the sharding rules
#      (ops/dg_op_shard.c) and the
#      files that turn flags into those options reads a parallel size:
#      the trainer, the step builder, the data feed, the model, the ops, the
#      runtime and the checkpoints know none.
#
# Each scanner first catches a planted violation, so a scanner that matches
# nothing fails too.
set -euo pipefail
src=${1:-${DG_SRC:?}}
fail() { echo "passes_own_rewrites: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- 1. rewrites only through their pass's table ------------------------------------------
# table_fns FILE: the functions the tables in FILE name.
table_fns() {
  awk '/_rewrites\[\] = \{/ {t = 1; next} t && /^\};/ {t = 0} t' "$1" |
    grep -oE '\{&dg_op_[a-z0-9_]+, *[a-z_][a-z0-9_]*' | sed -E 's/.*, *//' | sort -u
}
# check_tables ROOT DIR...: every table function of DIR is static in its
# table's file and appears in no other file under ROOT; prints violations.
check_tables() {
  local root=$1; shift
  for dir in "$@"; do
    local files
    files=$(grep -lE '_rewrites\[\] = \{' "$dir"/*.c 2>/dev/null || true)
    [ -n "$files" ] || { echo "$dir: no rewrite table"; continue; }
    for f in $files; do
      local fns
      fns=$(table_fns "$f")
      [ -n "$fns" ] || echo "$f: a table with no entry"
      for fn in $fns; do
        grep -qE "^static [a-z].* \*?$fn\(" "$f" || echo "$f: rewrite $fn is not static in the table's file"
        local others
        others=$(grep -rlw --include='*.c' --include='*.h' --include='*.cu' "$fn" "$root" | grep -v "^$f\$" || true)
        [ -z "$others" ] || echo "$f: rewrite $fn is named outside its table's file: $others"
      done
      local table
      table=$(grep -oE '[a-z_]+_rewrites\[\] = \{' "$f" | head -1 | sed 's/\[.*//')
      local readers
      readers=$(grep -rnw --include='*.c' --include='*.h' --include='*.cu' "$table" "$root" |
                grep -vE '^[^:]+:[0-9]+:\s*(/\*|\*|//)' | cut -d: -f1 | sort -u | grep -v "^$dir/" || true)
      [ -z "$readers" ] || echo "$f: table $table is read outside $dir: $readers"
    done
  done
}

mkdir -p "$tmp/planted/parallel/xp" "$tmp/planted/ops"
cat >"$tmp/planted/parallel/xp/dg_xp_rewrites.c" <<'EOF'
static int rewrite_rope(int x) { return x; }
const dg_xp_rewrite dg_xp_rewrites[] = {
    {&dg_op_rope, rewrite_rope},
    {NULL, NULL},
};
EOF
printf 'int f(int x) { return rewrite_rope(x); }\n' >"$tmp/planted/ops/dg_op_rope.c"
[ -n "$(check_tables "$tmp/planted" "$tmp/planted/parallel/xp")" ] ||
  fail "the table scanner misses a rewrite called from an op's file"

dirs=()
for d in "$src"/parallel/*/; do dirs+=("${d%/}"); done
[ "${#dirs[@]}" -ge 3 ] || fail "found only ${#dirs[@]} parallel passes under $src/parallel"
hits=$(check_tables "$src" "${dirs[@]}")
[ -z "$hits" ] || { echo "$hits"; fail "a rewrite is reachable outside its pass's table (above)"; }
n_fns=$(for d in "${dirs[@]}"; do for f in $(grep -lE '_rewrites\[\] = \{' "$d"/*.c); do table_fns "$f"; done; done | wc -l)
[ "$n_fns" -ge 10 ] || fail "the tables name only $n_fns rewrites"
lower=$(grep -rnE '\.lower *=|\(\*lower\)' --include='*.c' --include='*.h' "$src"/graph "$src"/ops "$src"/moe "$src"/parallel || true)
[ -z "$lower" ] || { echo "$lower"; fail "an op definition carries a rewrite (dg_op_def.lower)"; }

# ---- 2. no op looked up by name -------------------------------------------------------------
by_name='strn?cmp\([^;]*op->name|op->name, *"|"[a-z_0-9]+", *[a-z_>.-]*op->name'
scan_names() { grep -nE "$by_name" "$@" || true; }
printf 'static int is_op(const dg_node *n) { return !strcmp(n->op->name, "attention"); }\n' >"$tmp/by_name.c"
[ -n "$(scan_names "$tmp/by_name.c")" ] || fail "the name scanner misses a planted strcmp on op->name"
mapfile -t files < <(ls "$src"/graph/passes/*.[ch] "$src"/parallel/*.[ch] "$src"/parallel/*/*.[ch] \
                        "$src"/ops/*.[ch] "$src"/moe/*.[ch])
[ "${#files[@]}" -gt 60 ] || fail "found only ${#files[@]} pass and op files"
hits=$(scan_names "${files[@]}")
[ -z "$hits" ] || { echo "$hits"; fail "a pass or op file picks an op by its name (above)"; }

# ---- 3. parallel sizes: the passes and the grid only ------------------------------------------
size='(tensor|context|expert|pipeline|expert_tensor)_model_parallel_size|context_parallel_size|expert_tensor_parallel_size|\b(tp|cp|ep|dp|pp|edp|etp)_size\b|\b(coord|sizes)\.(tp|cp|ep|dp|pp|etp)\b|mesh\[DG_AXIS_(TP|CP|EP|DP|PP|EDP)\]|dg_mesh_size\([^)]*DG_AXIS_(TP|CP|EP|DP|PP|EDP)'
scan_sizes() { grep -nE "$size" "$@" | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)' || true; }
printf 'void f(trainer *t) {\n    int r = t->grid->coord.cp;\n}\n' >"$tmp/trainer.c"
[ -n "$(scan_sizes "$tmp/trainer.c")" ] || fail "the size scanner misses a planted read of coord.cp"
# Allowed: the passes, the grid, the sharding rules (they rewrite attrs for
# local shapes), and the files whose job is turning flags into the passes'
# and the grid's options or reporting them (config, step options, grid
# options, PP's stage options, CP's checks, the model record), besides the
# simulator and the CLI, which plan layouts.
allowed='^(parallel/|graph/passes/|sched/dg_grid\.c|graph/dg_layout\.c|graph/dg_verify_sharding\.c|ops/dg_op_shard\.c|train/(dg_train_config|dg_train_compat|dg_step_opts|dg_grid_opts|dg_train_pp|dg_cp|dg_model_record|dg_mem_estimate)\.c|sim/|cli/)'
files=()
for f in "$src"/{graph,ops,moe,sched,io,train,kernels/cpu}/*.c "$src"/kernels/cuda/*.[ch]* ; do
  rel=${f#"$src"/}
  [[ $rel =~ $allowed ]] && continue
  files+=("$f")
done
[ "${#files[@]}" -gt 150 ] || fail "found only ${#files[@]} files to scan for parallel sizes"
case " ${files[*]} " in *"/train/dg_trainer.c "*) ;; *) fail "the size scan skips the trainer" ;; esac
hits=$(scan_sizes "${files[@]}")
[ -z "$hits" ] || { echo "$hits"; fail "a file outside the passes and the grid reads a parallel size (above)"; }
echo "passes_own_rewrites: ok (${#dirs[@]} passes, $n_fns rewrites in their tables, ${#files[@]} files know no parallel size)"
