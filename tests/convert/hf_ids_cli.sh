#!/usr/bin/env bash
# hf_ids_cli.sh — what Transformers reads from an export besides the tensors
# (issue 25, item 2).
#  1. Each family's config.json (MixtralForCausalLM with
#     --moe-aux-loss-coeff 0, as the issue's, LlamaForCausalLM,
#     GPT2LMHeadModel) has the field types of Transformers' configuration
#     class, its float fields written as floats (hf_config_types.py).
#  2. config.json and generation_config.json carry the generation ids of the
#     tokenizer the model was trained with, inside the vocabulary, each
#     computed here from the tokenizer's own files (tokenizer_ids.py):
#     byte-level, GPT2BPETokenizer, HuggingFaceTokenizer (with and without
#     tokenizer_config.json), SentencePieceTokenizer; and NullTokenizer,
#     whose end of document is read from the tokenizer itself: the last id
#     `preprocess --append-eod` writes after a document (the issue's
#     128-token vocabulary included, where GPT-2's default 50256 lay outside).
#  3. Import reads the ids back: a NullTokenizer export whose config.json
#     lost its "dagatron" block, or with a generation_config.json naming
#     another end of document, imports to a checkpoint that exports those
#     ids again.
#  4. (item 14) config.json's num_attention_heads 0 is one line naming the
#     file once, the field and what was expected, exit 2.
# Usage: hf_ids_cli.sh DAGATRON
set -u
BIN=$1
HERE=$(dirname "$0")
PY=${DG_REF_PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
TOKS="$HERE/../tokenizer"
TINY=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --micro-batch-size 1 --global-batch-size 1
      --train-iters 1 --eval-iters 0)
LLAMA=(--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear)
MIXTRAL=("${LLAMA[@]}" --num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 0)

# NAME FAMILY BOS EOS TRAIN-FLAGS...: train, export, check the types and the ids
case_() {
  local name=$1 family=$2 bos=$3 eos=$4; shift 4
  "$BIN" train "${TINY[@]}" "$@" --save "$TMP/$name" >"$TMP/$name.log" 2>&1 ||
    { echo "FAIL: $name: train exited $?"; tail -3 "$TMP/$name.log"; fail=1; return; }
  "$BIN" convert --load "$TMP/$name" --to hf "$TMP/hf_$name" 2>"$TMP/msg" ||
    { echo "FAIL: $name: export:"; cat "$TMP/msg"; fail=1; return; }
  "$PY" "$HERE/hf_config_types.py" "$TMP/hf_$name" "$family" "$bos" "$eos" || fail=1
}

# NullTokenizer's end of document for --vocab-size N, as the tokenizer puts it after a document
null_eod() {
  echo '{"text": "1"}' >"$TMP/one.jsonl"
  "$BIN" preprocess --input "$TMP/one.jsonl" --output-prefix "$TMP/null$1" --tokenizer-type NullTokenizer \
    --vocab-size "$1" --append-eod >/dev/null 2>&1 &&
  "$BIN" preprocess --inspect "$TMP/null$1_text_document" --dump-tokens "$TMP/null$1.bin" >/dev/null 2>&1 &&
  "$PY" -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); print(struct.unpack("<q", b[-8:])[0])' "$TMP/null$1.bin"
}
E100=$(null_eod 100) && E128=$(null_eod 128) || { echo "FAIL: preprocess with NullTokenizer"; exit 1; }

# 1 + 2: the families and the tokenizers
case_ moe mixtral "$E100" "$E100" "${MIXTRAL[@]}" --mock-data --vocab-size 100
case_ llama llama "$E100" "$E100" "${LLAMA[@]}" --num-query-groups 1 --group-query-attention --mock-data --vocab-size 100
case_ gpt gpt2 "$E100" "$E100" --mock-data --vocab-size 100
case_ gpt128 gpt2 "$E128" "$E128" --mock-data --vocab-size 128 --make-vocab-size-divisible-by 128
read -r b e < <("$PY" "$HERE/tokenizer_ids.py" byte)
case_ byte gpt2 "$b" "$e"
"$BIN" tokenizer train --vocab-size 300 --output-dir "$TMP/bpe" --input "$TOKS/corpus.jsonl" >/dev/null 2>&1
read -r BPE_B BPE_E < <("$PY" "$HERE/tokenizer_ids.py" bpe "$TMP/bpe/vocab.json")
case_ bpe gpt2 "$BPE_B" "$BPE_E" --tokenizer-type GPT2BPETokenizer --vocab-file "$TMP/bpe/vocab.json" \
  --merge-file "$TMP/bpe/merges.txt" --mock-data --vocab-size 300
read -r b e < <("$PY" "$HERE/tokenizer_ids.py" hf "$TOKS/qwen")
case_ qwen mixtral "$b" "$e" "${MIXTRAL[@]}" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$TOKS/qwen" \
  --mock-data --vocab-size 2100
read -r b e < <("$PY" "$HERE/tokenizer_ids.py" hf "$TOKS/gpt2/tokenizer.json")
case_ hf_gpt2 gpt2 "$b" "$e" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$TOKS/gpt2/tokenizer.json" \
  --mock-data --vocab-size 2100
read -r b e < <("$PY" "$HERE/tokenizer_ids.py" sp "$TOKS/sp/tokenizer.model")
case_ sp llama "$b" "$e" "${LLAMA[@]}" --tokenizer-type SentencePieceTokenizer \
  --tokenizer-model "$TOKS/sp/tokenizer.model" --mock-data --vocab-size 2100

# 3. import reads the ids back (NullTokenizer: the ids are all that says where documents end)
reimport() { # NAME SRC EDIT BOS EOS: copy hf_SRC, edit it, import, export again, check the ids
  local name=$1 src=$2 edit=$3 bos=$4 eos=$5
  rm -rf "$TMP/$name"; cp -r "$TMP/hf_$src" "$TMP/$name"
  "$PY" -c "import json,os,sys; d=sys.argv[1]; c=json.load(open(d+'/config.json')); g=d+'/generation_config.json'
$edit
json.dump(c, open(d+'/config.json','w'))" "$TMP/$name" || { echo "FAIL: $name: edit"; fail=1; return; }
  "$BIN" convert --from hf "$TMP/$name" --save "$TMP/ck_$name" 2>"$TMP/msg" &&
    "$BIN" convert --load "$TMP/ck_$name" --to hf "$TMP/hf2_$name" 2>>"$TMP/msg" ||
    { echo "FAIL: $name: import and export:"; cat "$TMP/msg"; fail=1; return; }
  "$PY" "$HERE/hf_config_types.py" "$TMP/hf2_$name" gpt2 "$bos" "$eos" >/dev/null &&
    echo "ok: $name: imported and exported again with bos $bos, eos $eos" ||
    { "$PY" "$HERE/hf_config_types.py" "$TMP/hf2_$name" gpt2 "$bos" "$eos"; fail=1; }
}
reimport plain gpt 'del c["dagatron"]; os.path.exists(g) and os.remove(g)' "$E100" "$E100"
reimport gen50 gpt 'del c["dagatron"]; json.dump({"bos_token_id": 50, "eos_token_id": 50}, open(g, "w"))' 50 50
reimport bpe_back bpe 'pass' "$BPE_B" "$BPE_E"

# issue 25, item 14, through the command (test_hf_config checks every field): the issue's
# num_attention_heads 0 is one line naming the file once, the field and what was expected
edit_config() { "$PY" -c "import json,sys; p=sys.argv[1]+'/config.json'; c=json.load(open(p)); $2; json.dump(c, open(p,'w'))" "$1"; }
rm -rf "$TMP/heads0"; cp -r "$TMP/hf_moe" "$TMP/heads0"; edit_config "$TMP/heads0" 'c["num_attention_heads"]=0'
"$BIN" convert --from hf "$TMP/heads0" --save "$TMP/ck_heads0" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && [ "$(grep -o "$TMP/heads0/config.json" "$TMP/err" | wc -l)" = 1 ] &&
  grep -qF '"num_attention_heads": expected a positive integer, got 0' "$TMP/err" && [ ! -e "$TMP/ck_heads0" ] &&
  echo "ok: num_attention_heads 0 -> $(cat "$TMP/err")" || { echo "FAIL: num_attention_heads 0: rc=$rc:"; cat "$TMP/err"; fail=1; }

[ $fail = 0 ] && echo "PASS" || echo "FAILED"
exit $fail
