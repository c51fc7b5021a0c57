#!/usr/bin/env bash
# cli_write_fail.sh DAGATRON — `preprocess` and `tokenizer` never lose a
# file (issue 25, items 8, 10 and 12). Over an existing dataset, a run that
# fails (a JSON error at line 11, the disk filling mid-write, a read-only
# directory) exits 2 with one line and leaves both old files byte-identical,
# for every --json-keys key; `--inspect --dump-tokens` onto a full device or
# with stdout on one exits 2 with one line; `tokenizer train` that cannot
# write keeps the old vocab.json and merges.txt; `tokenizer encode` with
# stdout on a full device exits 2. No temporary is left anywhere.
set -uo pipefail
exe=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "cli_write_fail: $*"; exit 1; }
. "$(dirname "$0")/../common/refuse.sh"
. "$(dirname "$0")/../common/write_fail.sh"

# a corpus of 20 documents, two keys; the same with a broken line 11
for i in $(seq 1 20); do
  printf '{"text": "document %d: %s", "title": "title %d"}\n' "$i" "$(printf 'words %.0s' $(seq 1 40))" "$i"
done >"$TMP/good.jsonl"
{ head -10 "$TMP/good.jsonl"; echo '{"text": broken'; tail -9 "$TMP/good.jsonl"; } >"$TMP/bad.jsonl"
P=$TMP/ds/out
mkdir "$TMP/ds"
"$exe" preprocess --input "$TMP/good.jsonl" --json-keys text title --output-prefix "$P" >/dev/null ||
  fail "preprocess of the good corpus failed"
for k in text title; do dg_snap "${P}_${k}_document.bin" "${P}_${k}_document.idx"; done

# item 10: a JSON error at line 11 leaves the old dataset
dg_refuse "bad.jsonl:11" "$exe" preprocess --input "$TMP/bad.jsonl" --json-keys text title --output-prefix "$P"
dg_intact "preprocess with a JSON error at line 11"
# the disk fills while the new .bin is written (it is > 4 KiB)
for i in $(seq 1 10); do cat "$TMP/good.jsonl"; done >"$TMP/big.jsonl"
dg_refuse "out_text_document.bin: write failed: File too large" \
  dg_fsize 4 "$exe" preprocess --input "$TMP/big.jsonl" --json-keys text title --output-prefix "$P"
dg_intact "preprocess that filled the disk"
if dg_have_ro; then
  dg_refuse "Read-only file system" dg_ro "$TMP/ds" "$exe" preprocess --input "$TMP/good.jsonl" --output-prefix "$P"
  dg_intact "preprocess into a read-only directory"
else
  echo "note: no mount namespace here: the read-only cases did not run"
fi
dg_refuse "good.jsonl/x_text_document.bin: cannot open for writing: Not a directory" \
  "$exe" preprocess --input "$TMP/good.jsonl" --output-prefix "$TMP/good.jsonl/x"
# a run that succeeds replaces the dataset
"$exe" preprocess --input "$TMP/big.jsonl" --output-prefix "$P" >/dev/null || fail "preprocess over a dataset failed"
cmp -s "${P}_text_document.bin" "$TMP/.snap/0" && fail "preprocess over a dataset left the old .bin"
dg_unsnap
dg_snap "${P}_text_document.bin" "${P}_text_document.idx"

# --inspect: --dump-tokens onto a full device, over an old file, stdout full
dev=$(dg_full_dev full)
dg_refuse "--dump-tokens $dev: write failed: No space left on device" \
  "$exe" preprocess --inspect "${P}_text_document" --dump-tokens "$dev"
dg_still_dev "$dev"
echo old >"$TMP/tokens.bin"
dg_snap "$TMP/tokens.bin"
dg_refuse "--dump-tokens $TMP/tokens.bin: write failed: File too large" \
  dg_fsize 4 "$exe" preprocess --inspect "${P}_text_document" --dump-tokens "$TMP/tokens.bin"
dg_intact "--dump-tokens that filled the disk"
dg_refuse "standard output: write failed: No space left on device" \
  bash -c '"$1" preprocess --inspect "$2" >/dev/full' _ "$exe" "${P}_text_document"

# tokenizer train: an old vocab.json + merges.txt stay when the new ones cannot be written
mkdir "$TMP/tok"
"$exe" tokenizer train --vocab-size 300 --input "$TMP/good.jsonl" --output-dir "$TMP/tok" >/dev/null ||
  fail "tokenizer train failed"
dg_unsnap
echo '{"old": 0}' >"$TMP/tok/vocab.json"
echo '#version: 0.2' >"$TMP/tok/merges.txt"
dg_snap "$TMP/tok/vocab.json" "$TMP/tok/merges.txt"
dg_refuse "vocab.json: write failed: File too large" \
  dg_fsize 1 "$exe" tokenizer train --vocab-size 300 --input "$TMP/good.jsonl" --output-dir "$TMP/tok"
dg_intact "tokenizer train that filled the disk"
if dg_have_ro; then
  dg_refuse "Read-only file system" \
    dg_ro "$TMP/tok" "$exe" tokenizer train --vocab-size 300 --input "$TMP/good.jsonl" --output-dir "$TMP/tok"
  dg_intact "tokenizer train into a read-only directory"
fi
dg_refuse "standard output: write failed: No space left on device" \
  bash -c '"$1" tokenizer encode --text "hello" >/dev/full' _ "$exe"
echo "cli_write_fail: ok"
