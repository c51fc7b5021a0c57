#!/usr/bin/env bash
# sim_profile_cli.sh — what `dagatron simulate --device-profile FILE` reads
# (issue 25, item 15; the format in docs/simulate.md): a trace or `{}` was
# taken as a profile, every figure the simulator costs with left at the
# uncalibrated local defaults under the file's name. Every figure is
# required, of its type and range, and no key is unknown; the profile
# `--calibrate --profile-out` writes, and the example in docs/simulate.md,
# load. Not a regular file (/dev/zero, a directory) is refused unread, for
# --device-profile and --calibrate-from. Each refusal: exit 2, one line.
set -euo pipefail
D="$DG_BUILD/dagatron"
here=$(dirname "$0")
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$here/../common/refuse.sh"
source "$here/../common/memcap.sh" # dg_memcap
PY=${DG_REF_PYTHON:-/usr/bin/python3}
ARGS=(--num-layers 2 --swiglu --disable-bias-linear --mock-data --vocab-size 64 --expert-model-parallel-size 2
      --num-experts 4 --train-iters 10 --world-size 4 --pipeline-model-parallel-size 2)

# the writer's own profile: a simulated trace, calibrated from, saved, loaded
"$D" simulate "${ARGS[@]}" --trace "$TMP/t.json" >"$TMP/o" 2>&1 || fail "simulate --trace failed: $(cat "$TMP/o")"
"$D" simulate "${ARGS[@]}" --calibrate --calibrate-from "$TMP/t.json" --profile-out "$TMP/saved.json" >"$TMP/o" 2>&1 ||
    fail "calibration failed: $(cat "$TMP/o")"
"$D" simulate "${ARGS[@]}" --device-profile "$TMP/saved.json" >"$TMP/o" 2>&1 ||
    fail "the saved profile was refused: $(cat "$TMP/o")"
# the documented example (its JSON block in docs/simulate.md), and it
# without the optional keys
"$PY" - "$DG_SRC/docs/simulate.md" "$TMP" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
block = re.search(r"## Profiles.*?```json\n(.*?)```", text, re.S).group(1)
p = json.loads(block)
json.dump(p, open(sys.argv[2] + "/doc.json", "w"))
for k in ("name", "source", "devices_per_node", "native16"):
    del p[k]
json.dump(p, open(sys.argv[2] + "/minimal.json", "w"))
cases = {  # case: (edit, the words of the refusal)
    "wrong_type": (lambda q: q.update(peak_fp32="fast"), 'peak_fp32: expected a finite number > 0, got the string "fast"'),
    "negative": (lambda q: q.update(mem_bytes_per_s=-1), "mem_bytes_per_s: expected a finite number > 0, got -1"),
    "no_kind": (lambda q: q["eff"].pop("optim"), "eff.optim: expected a number in (0, 1], it is missing"),
    "eff_range": (lambda q: q["mem_eff"].update(gemm=1.5), "mem_eff.gemm: expected a number in (0, 1], got 1.5"),
    "no_link": (lambda q: q.pop("inter"), "inter: expected an object with the keys gbps, usec, it is missing"),
    "link_key": (lambda q: q["intra"].update(gbs=5), "intra: unknown key 'gbs'"),
    "misspelt": (lambda q: q.update(peak_fp23=1e10), "unknown key 'peak_fp23'"),
    "native16": (lambda q: q.update(native16=2), "native16: expected an integer in [0, 1], got 2"),
    "dpn": (lambda q: q.update(devices_per_node=0.5), "devices_per_node: expected an integer in [1, 1000000000], got 0.5"),
    "capacity": (lambda q: q.update(mem_capacity_bytes=-1), "mem_capacity_bytes: expected a finite number >= 0, got -1"),
    "per_node": (lambda q: q.update(mem_per_node=3), "mem_per_node: expected an integer in [0, 1], got 3"),
}
with open(sys.argv[2] + "/cases", "w") as f:
    for case, (edit, want) in cases.items():
        q = json.loads(block)
        edit(q)
        json.dump(q, open("%s/%s.json" % (sys.argv[2], case), "w"))
        f.write("%s\t%s\n" % (case, want))
PY
for p in doc minimal; do
    "$D" simulate "${ARGS[@]}" --device-profile "$TMP/$p.json" >"$TMP/o" 2>&1 || fail "$p.json was refused: $(cat "$TMP/o")"
done

echo '{}' >"$TMP/empty.json"
dg_refuse "--device-profile $TMP/empty.json: peak_fp32: expected a finite number > 0, it is missing" \
    "$D" simulate "${ARGS[@]}" --device-profile "$TMP/empty.json"
dg_refuse "--device-profile $TMP/t.json: unknown key 'displayTimeUnit'" \
    "$D" simulate "${ARGS[@]}" --device-profile "$TMP/t.json"
echo '[1, 2]' >"$TMP/array.json"
dg_refuse "--device-profile $TMP/array.json: not a JSON object" "$D" simulate "${ARGS[@]}" --device-profile "$TMP/array.json"
[ "$(wc -l <"$TMP/cases")" = 11 ] || fail "expected 11 damaged profiles"
while IFS=$'\t' read -r case want; do
    dg_refuse "--device-profile $TMP/$case.json: $want" "$D" simulate "${ARGS[@]}" --device-profile "$TMP/$case.json"
    echo "refused ($case): $(cat "$TMP/refuse.err")"
done <"$TMP/cases"
dg_memcap "$D" dg_refuse "--device-profile /dev/zero: not a regular file (a character device)" \
    timeout 60 "$D" simulate "${ARGS[@]}" --device-profile /dev/zero
dg_refuse "--device-profile $TMP: not a regular file (a directory)" "$D" simulate "${ARGS[@]}" --device-profile "$TMP"
dg_refuse "--calibrate-from $TMP: not a regular file (a directory)" \
    "$D" simulate "${ARGS[@]}" --calibrate --calibrate-from "$TMP" --profile-out "$TMP/p.json"
[ ! -e "$TMP/p.json" ] || fail "a refused calibration wrote its profile"
echo "OK"
