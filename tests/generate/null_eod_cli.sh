#!/usr/bin/env bash
# null_eod_cli.sh — issue 25, item 1: NullTokenizer's end of document is
# Megatron's, --vocab-size N itself, and older checkpoints keep theirs.
#
#   - a model trained on documents of the id 9 alone (--vocab-size 10)
#     continues "9 9 9" with 9s up to --max-new-tokens: 9 = N - 1 is an
#     ordinary id (generate stopped at it before);
#   - a model trained on documents "5" (each ended by the EOD, 10) stops
#     after "5": 10 = N ends the document and is not printed;
#   - the first checkpoint's record rewritten as the older rule wrote it (no
#     "eod", vocab_size N) generates as it did then: it stops at 9 at once;
#   - an older mock-data checkpoint whose padded vocabulary the new rule
#     changes (--vocab-size 128 at 128: 128 ids then, 129 padded to 256 now)
#     is refused in one line naming --vocab-size 127, which loads it.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$DG_SRC/tests/common/refuse.sh"

/usr/bin/python3 - "$TMP" <<'EOF'
import json, sys
with open(sys.argv[1] + "/nines.jsonl", "w") as f:
    for _ in range(40):
        f.write(json.dumps({"text": " ".join(["9"] * 60)}) + "\n")
with open(sys.argv[1] + "/fives.jsonl", "w") as f:
    for _ in range(400):
        f.write(json.dumps({"text": "5"}) + "\n")
EOF
for d in nines fives; do
    "$BIN" preprocess --input "$TMP/$d.jsonl" --output-prefix "$TMP/$d" --tokenizer-type NullTokenizer \
        --vocab-size 10 --append-eod >/dev/null || fail "preprocess $d"
done
TRAIN=(--tokenizer-type NullTokenizer --vocab-size 10 --split 100,0,0 --num-layers 1 --hidden-size 32
       --num-attention-heads 2 --seq-length 16 --micro-batch-size 4 --global-batch-size 4 --train-iters 60
       --eval-iters 0 --lr 1e-2 --lr-warmup-iters 0 --log-interval 60)
for d in nines fives; do
    "$BIN" train --data-path "$TMP/${d}_text_document" "${TRAIN[@]}" --save "$TMP/ck_$d" >"$TMP/$d.log" 2>&1 ||
        fail "train on $d: $(tail -3 "$TMP/$d.log")"
done
grep -q '"eod":	10' "$TMP/ck_nines/iter_0000060/metadata.json" || fail "the checkpoint does not record eod 10"

gen() { # gen CKPT PROMPT: greedy, 12 new ids at most
    "$BIN" generate --load "$1" --prompt "$2" --max-new-tokens 12 --greedy 2>"$TMP/gen.err" ||
        fail "generate $1: $(cat "$TMP/gen.err")"
}
out=$(gen "$TMP/ck_nines" "9 9 9")
[ "$out" = "9 9 9$(printf ' 9%.0s' $(seq 12))" ] ||
    fail "--vocab-size 10: 9 is an ordinary id, expected 12 more 9s after '9 9 9', got '$out'"
echo "ok: --vocab-size 10: generate goes on past 9 (N - 1): $out"
out=$(gen "$TMP/ck_fives" "5")
[ "$out" = "5" ] && grep -q " 0 new tokens" "$TMP/gen.err" ||
    fail "--vocab-size 10: expected generate to stop at the end of document 10 right after '5', got '$out'"
echo "ok: --vocab-size 10: generate stops at 10 (N), the end of document"

# the same checkpoint as the older rule recorded it: no "eod", N ids
cp -r "$TMP/ck_nines" "$TMP/ck_old"
/usr/bin/python3 - "$TMP/ck_old/iter_0000060/metadata.json" 10 <<'EOF'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
m = json.load(open(path))
del m["tokenizer"]["eod"]
m["tokenizer"]["vocab_size"] = n
json.dump(m, open(path, "w"), indent="\t")
EOF
out=$(gen "$TMP/ck_old" "9 9 9")
[ "$out" = "9 9 9" ] || fail "an older checkpoint (EOD 9 = N - 1 then) should stop at 9 at once, got '$out'"
echo "ok: an older checkpoint keeps its end of document 9: '$out'"

# an older mock-data checkpoint of --vocab-size 128 at 128: 128 ids, padded 128
MOCK=(--mock-data --make-vocab-size-divisible-by 128 --num-layers 1 --hidden-size 32 --num-attention-heads 2
      --seq-length 16 --micro-batch-size 1 --global-batch-size 1 --eval-iters 0)
"$BIN" train "${MOCK[@]}" --vocab-size 127 --train-iters 1 --save "$TMP/mock_old" >"$TMP/m.log" 2>&1 ||
    fail "mock training: $(tail -3 "$TMP/m.log")"
/usr/bin/python3 - "$TMP/mock_old/iter_0000001/metadata.json" 128 <<'EOF'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
m = json.load(open(path))
del m["tokenizer"]["eod"]
m["tokenizer"]["vocab_size"] = n
json.dump(m, open(path, "w"), indent="\t")
EOF
dg_refuse "--vocab-size 127 gives its 128 ids" \
    "$BIN" train "${MOCK[@]}" --vocab-size 128 --train-iters 2 --load "$TMP/mock_old" --save "$TMP/mock_new"
echo "ok: an older checkpoint of another padding: $(cat "$TMP/refuse.err")"
"$BIN" train "${MOCK[@]}" --vocab-size 127 --train-iters 2 --load "$TMP/mock_old" --save "$TMP/mock_new" \
    >"$TMP/m2.log" 2>&1 || fail "--vocab-size 127 does not load the older checkpoint: $(tail -3 "$TMP/m2.log")"
grep -q "loaded checkpoint from .* at iteration 1" "$TMP/m2.log" && grep -q "iteration        2/       2" "$TMP/m2.log" ||
    fail "the older checkpoint did not resume: $(tail -5 "$TMP/m2.log")"
echo "ok: --vocab-size 127 loads it and trains on"
echo "null_eod_cli: ok"
