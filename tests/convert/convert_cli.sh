#!/usr/bin/env bash
# convert_cli.sh — `dagatron convert` (issue 17, acceptance 3).
#  1. MoE (tests/common/moe_arch.flags, GQA) saved by 2 ranks under EP=2
#     (a sharded checkpoint) -> HF: a PyTorch model written with HF's names
#     and formulas (hf_reference.py, no `transformers`) computes dagatron's
#     loss on a batch within 1e-5; the same for Megatron's default dense GPT
#     (GPT2LMHeadModel), a dense SwiGLU/RoPE model saved under TP=2
#     (LlamaForCausalLM) and the MoE with --kv-channels and --qk-layernorm
#     under EP=2 (Qwen3MoeForCausalLM).
#  2. dagatron -> HF -> dagatron is bitwise: the re-imported checkpoint's
#     parameters equal the original's (compare_params.py), its loss on the
#     batch is the original's to the bit, and its export the first export
#     byte for byte; `train --load` continues from it.
#  3. bf16 export imports, and re-exports to the same bytes; a config.json
#     without the "dagatron" block (as Transformers writes it) and GPT-2 names
#     without "transformer." import to the same parameters; a GPT2BPETokenizer
#     checkpoint exports vocab.json + merges.txt, a SentencePieceTokenizer one
#     tokenizer.model, a HuggingFaceTokenizer one tokenizer.json (and the
#     tokenizer_config.json beside it), and their imports generate; a
#     NullTokenizer one no files, which the command says; a tokenizer file
#     gone is one line, exit 2.
#  4. A corrupted shard (bad header length, truncated data, a wrong shape, a
#     missing shard, a tensor in two shards) is one line naming the file,
#     exit 2, and no checkpoint.
#  5. A model HF cannot express (sigmoid router) is refused: one line, exit 2.
# Usage: convert_cli.sh DAGATRON CKPT_LOSS
set -u
BIN=$1 LOSS=$2
HERE=$(dirname "$0")
PY=${DG_REF_PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$HERE/../common/moe_arch.flags"))
SMALL=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --eval-iters 0 --log-interval 1)
MOE=("${ARCH[@]}" "${SMALL[@]}" --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --num-query-groups 2
     --group-query-attention --untie-embeddings-and-output-weights)
train() { local log=$1; shift; "$@" >"$log" 2>&1 || { echo "FAIL: $* exited $?"; tail -3 "$log"; fail=1; }; }
check_ref() { # CKPT HFDIR
  "$LOSS" "$1" "$TMP/batch.json" >/dev/null || { echo "FAIL: ckpt_loss $1"; fail=1; return; }
  "$PY" "$HERE/hf_reference.py" "$2" "$TMP/batch.json" || fail=1
}

# 1. exports and the HF-named reference
train "$TMP/moe.log" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${MOE[@]}" --expert-model-parallel-size 2 \
  --train-iters 3 --save "$TMP/moe"
grep -q "model_optim_rng_rank00001.bin" <(ls "$TMP/moe/iter_0000003") || { echo "FAIL: the EP=2 save is not sharded"; fail=1; }
"$BIN" convert --load "$TMP/moe" --to hf "$TMP/hf_moe" --max-shard-size 100000 || { echo "FAIL: export moe"; fail=1; }
n_shards=$(ls "$TMP/hf_moe"/model-*-of-*.safetensors | wc -l)
[ "$n_shards" -gt 1 ] && echo "ok: MoE export in $n_shards shards with an index" || { echo "FAIL: one shard"; fail=1; }
grep -q '"MixtralForCausalLM"' "$TMP/hf_moe/config.json" || { echo "FAIL: not MixtralForCausalLM"; fail=1; }
grep -q '"model.layers.1.block_sparse_moe.experts.3.w3.weight"' "$TMP/hf_moe/model.safetensors.index.json" ||
  { echo "FAIL: no expert w3 in the index"; fail=1; }
check_ref "$TMP/moe" "$TMP/hf_moe"

train "$TMP/gpt.log" "$BIN" train "${SMALL[@]}" --train-iters 2 --save "$TMP/gpt"
"$BIN" convert --load "$TMP/gpt" --to hf "$TMP/hf_gpt" || { echo "FAIL: export gpt"; fail=1; }
grep -q '"GPT2LMHeadModel"' "$TMP/hf_gpt/config.json" || { echo "FAIL: not GPT2LMHeadModel"; fail=1; }
check_ref "$TMP/gpt" "$TMP/hf_gpt"

train "$TMP/llama.log" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${SMALL[@]}" --tensor-model-parallel-size 2 --swiglu --normalization RMSNorm --position-embedding-type rope \
  --disable-bias-linear --num-query-groups 2 --group-query-attention --train-iters 2 --save "$TMP/llama"
"$BIN" convert --load "$TMP/llama" --to hf "$TMP/hf_llama" || { echo "FAIL: export llama"; fail=1; }
grep -q '"LlamaForCausalLM"' "$TMP/hf_llama/config.json" || { echo "FAIL: not LlamaForCausalLM"; fail=1; }
check_ref "$TMP/llama" "$TMP/hf_llama"

# Qwen3-MoE (issue 29): q/k norms and heads of their own size, saved under EP=2
train "$TMP/qwen3.log" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${MOE[@]}" --kv-channels 24 --qk-layernorm \
  --expert-model-parallel-size 2 --train-iters 2 --save "$TMP/qwen3"
"$BIN" convert --load "$TMP/qwen3" --to hf "$TMP/hf_qwen3" || { echo "FAIL: export qwen3"; fail=1; }
grep -q '"Qwen3MoeForCausalLM"' "$TMP/hf_qwen3/config.json" || { echo "FAIL: not Qwen3MoeForCausalLM"; fail=1; }
grep -qE '"head_dim":[[:space:]]*24' "$TMP/hf_qwen3/config.json" || { echo "FAIL: Qwen3's head_dim is not 24"; fail=1; }
check_ref "$TMP/qwen3" "$TMP/hf_qwen3"

# 2. dagatron -> HF -> dagatron, bitwise
for m in moe gpt llama qwen3; do
  "$BIN" convert --from hf "$TMP/hf_$m" --save "$TMP/back_$m" 2>/dev/null || { echo "FAIL: import $m"; fail=1; continue; }
  "$PY" "$HERE/compare_params.py" "$TMP/$m" "$TMP/back_$m" || fail=1
  "$BIN" convert --load "$TMP/back_$m" --to hf "$TMP/hf2_$m" --max-shard-size 100000 2>/dev/null
  [ "$m" = moe ] || "$BIN" convert --load "$TMP/back_$m" --to hf "$TMP/hf2_$m" 2>/dev/null
  same=1
  for f in "$TMP/hf_$m"/*.safetensors; do cmp -s "$f" "$TMP/hf2_$m/$(basename "$f")" || same=0; done
  [ $same = 1 ] && echo "ok: $m: the re-imported checkpoint exports the same bytes" || { echo "FAIL: $m re-export differs"; fail=1; }
done
"$LOSS" "$TMP/moe" "$TMP/a.json" >/dev/null && "$LOSS" "$TMP/back_moe" "$TMP/b.json" >/dev/null &&
  cmp -s "$TMP/a.json" "$TMP/b.json" && echo "ok: the re-imported MoE checkpoint's loss is the original's, bit for bit" ||
  { echo "FAIL: re-imported loss differs"; fail=1; }
train "$TMP/cont.log" "$BIN" train "${MOE[@]}" --train-iters 2 --load "$TMP/back_moe" --no-load-optim
grep -q "loaded checkpoint from $TMP/back_moe at iteration 0" "$TMP/cont.log" &&
  echo "ok: train --load continues from the import" || { echo "FAIL: train did not load the import"; fail=1; }

# 3. bf16
"$BIN" convert --load "$TMP/moe" --to hf "$TMP/hf_bf" --hf-dtype bf16 2>/dev/null &&
"$BIN" convert --from hf "$TMP/hf_bf" --save "$TMP/back_bf" 2>/dev/null &&
"$BIN" convert --load "$TMP/back_bf" --to hf "$TMP/hf_bf2" --hf-dtype bf16 2>/dev/null &&
  cmp -s "$TMP/hf_bf/model-00001-of-00001.safetensors" "$TMP/hf_bf2/model-00001-of-00001.safetensors" &&
  grep -q '"dtype":"BF16"' "$TMP/hf_bf/model-00001-of-00001.safetensors" &&
  grep -q '"torch_dtype":.*"bfloat16"' "$TMP/hf_bf/config.json" &&
  echo "ok: bf16 export imports and re-exports the same bytes" || { echo "FAIL: bf16 round trip"; fail=1; }

# plain Transformers files: no "dagatron" block, GPT-2 names without the prefix
rm -rf "$TMP/plain"; cp -r "$TMP/hf_moe" "$TMP/plain"
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["dagatron"]; json.dump(c, open(sys.argv[1], "w"))' \
  "$TMP/plain/config.json"
"$BIN" convert --from hf "$TMP/plain" --save "$TMP/back_plain" 2>/dev/null && "$PY" "$HERE/compare_params.py" "$TMP/moe" "$TMP/back_plain" ||
  { echo "FAIL: import without the dagatron block"; fail=1; }
# Qwen3-MoE as Transformers writes it (head_dim and the q/k norms from its
# own keys): the same parameters; the re-import with the block the same
# loss to the bit
rm -rf "$TMP/plain_q"; cp -r "$TMP/hf_qwen3" "$TMP/plain_q"
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["dagatron"]; json.dump(c, open(sys.argv[1], "w"))' \
  "$TMP/plain_q/config.json"
"$BIN" convert --from hf "$TMP/plain_q" --save "$TMP/back_plain_q" 2>/dev/null &&
  "$PY" "$HERE/compare_params.py" "$TMP/qwen3" "$TMP/back_plain_q" || { echo "FAIL: Qwen3 import without the dagatron block"; fail=1; }
"$LOSS" "$TMP/qwen3" "$TMP/qa.json" >/dev/null && "$LOSS" "$TMP/back_qwen3" "$TMP/qb.json" >/dev/null &&
  cmp -s "$TMP/qa.json" "$TMP/qb.json" && echo "ok: the Qwen3-MoE import's loss is the original's, bit for bit" ||
  { echo "FAIL: the Qwen3-MoE import's loss differs"; fail=1; }
rm -rf "$TMP/noprefix"; cp -r "$TMP/hf_gpt" "$TMP/noprefix"
"$PY" "$HERE/corrupt_shard.py" strip_prefix "$TMP/noprefix/model-00001-of-00001.safetensors"
"$BIN" convert --from hf "$TMP/noprefix" --save "$TMP/back_noprefix" 2>/dev/null &&
  "$PY" "$HERE/compare_params.py" "$TMP/gpt" "$TMP/back_noprefix" || { echo "FAIL: GPT-2 names without prefix"; fail=1; }

# tokenizer files
"$BIN" tokenizer train --vocab-size 300 --output-dir "$TMP/tok" --input "$HERE/../tokenizer/corpus.jsonl" >/dev/null 2>&1
train "$TMP/tck.log" "$BIN" train --tokenizer-type GPT2BPETokenizer --vocab-file "$TMP/tok/vocab.json" \
  --merge-file "$TMP/tok/merges.txt" --mock-data --vocab-size 300 --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 \
  --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --eval-iters 0 --save "$TMP/tck"
"$BIN" convert --load "$TMP/tck" --to hf "$TMP/hf_tck" 2>/dev/null && cmp -s "$TMP/tok/vocab.json" "$TMP/hf_tck/vocab.json" &&
  cmp -s "$TMP/tok/merges.txt" "$TMP/hf_tck/merges.txt" && echo "ok: vocab.json and merges.txt exported" ||
  { echo "FAIL: tokenizer files not exported"; fail=1; }
"$BIN" convert --from hf "$TMP/hf_tck" --save "$TMP/back_tck" 2>/dev/null &&
  grep -q '"GPT2BPETokenizer"' "$TMP/back_tck/iter_0000000/metadata.json" &&
  "$BIN" generate --load "$TMP/back_tck" --prompt "the" --max-new-tokens 3 --greedy >/dev/null 2>&1 &&
  echo "ok: the imported GPT2BPETokenizer checkpoint generates" || { echo "FAIL: tokenizer import"; fail=1; }

# the tokenizer files of each --tokenizer-type: SentencePiece -> tokenizer.model, HuggingFace -> tokenizer.json
# (+ tokenizer_config.json beside it), each the same bytes, named on the command's line, imported and
# generating; NullTokenizer (mock data) -> no files, said so; a tokenizer file gone -> one line, exit 2
TOKS="$HERE/../tokenizer"
cp "$TOKS/sp/tokenizer.model" "$TMP/sp.model"
tok_export() { # NAME TYPE MODEL FILE...: train with it, export, compare FILEs, import, generate
  local name=$1 type=$2 model=$3; shift 3
  train "$TMP/t_$name.log" "$BIN" train --tokenizer-type "$type" --tokenizer-model "$model" --mock-data --vocab-size 2100 \
    --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --micro-batch-size 1 --global-batch-size 1 \
    --train-iters 1 --eval-iters 0 --save "$TMP/t_$name"
  "$BIN" convert --load "$TMP/t_$name" --to hf "$TMP/hf_t_$name" 2>"$TMP/msg" || { echo "FAIL: export $name"; cat "$TMP/msg"; fail=1; return; }
  local f src ok=1
  for f in "$@"; do
    src=$model; [ -d "$model" ] && src=$model/$f
    cmp -s "$src" "$TMP/hf_t_$name/$f" || { echo "FAIL: $name: $f is not $src"; ok=0; fail=1; }
  done
  grep -q "tokenizer $type: $(echo "$@" | sed 's/ tokenizer_config.json//; s/ /, /g')" "$TMP/msg" ||
    { echo "FAIL: $name: the message does not name the files:"; cat "$TMP/msg"; ok=0; fail=1; }
  "$BIN" convert --from hf "$TMP/hf_t_$name" --save "$TMP/back_t_$name" 2>/dev/null &&
    grep -q "\"$type\"" "$TMP/back_t_$name/iter_0000000/metadata.json" &&
    "$BIN" generate --load "$TMP/back_t_$name" --prompt "the" --max-new-tokens 3 --greedy >/dev/null 2>&1 ||
    { echo "FAIL: $name: the import does not name $type or does not generate"; ok=0; fail=1; }
  [ $ok = 1 ] && echo "ok: $type exports $*, imports and generates"
}
tok_export sp SentencePieceTokenizer "$TMP/sp.model" tokenizer.model
tok_export hf HuggingFaceTokenizer "$TOKS/qwen" tokenizer.json tokenizer_config.json
tok_export hf_file HuggingFaceTokenizer "$TOKS/gpt2/tokenizer.json" tokenizer.json
"$BIN" convert --load "$TMP/gpt" --to hf "$TMP/hf_null" 2>"$TMP/msg"
grep -q "tokenizer NullTokenizer: no files" "$TMP/msg" && [ -z "$(ls "$TMP/hf_null" | grep -v -e safetensors -e config.json)" ] &&
  echo "ok: NullTokenizer: no tokenizer files, said so: $(cat "$TMP/msg")" || { echo "FAIL: NullTokenizer export:"; cat "$TMP/msg"; fail=1; }
rm "$TMP/sp.model"
"$BIN" convert --load "$TMP/t_sp" --to hf "$TMP/hf_gone" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "sp.model" "$TMP/err" &&
  echo "ok: a tokenizer file gone -> $(cat "$TMP/err")" || { echo "FAIL: tokenizer file gone rc=$rc:"; cat "$TMP/err"; fail=1; }

# 4. corrupted shards
corrupt() { # NAME HOW: copy hf_gpt, break it, import: one line naming the file, exit 2, no checkpoint
  local d="$TMP/bad_$1" f; rm -rf "$d"; cp -r "$TMP/hf_gpt" "$d"; f="$d/model-00001-of-00001.safetensors"
  "$PY" "$HERE/corrupt_shard.py" "$2" "$f"
  "$BIN" convert --from hf "$d" --save "$TMP/bad_ck_$1" >/dev/null 2>"$TMP/err"; local rc=$?
  local want=$f; [ "$2" = missing ] && want=$f
  if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -qF "$want" "$TMP/err" && [ ! -e "$TMP/bad_ck_$1" ]; then
    echo "ok: $1 -> $(cat "$TMP/err")"
  else echo "FAIL: $1: rc=$rc, checkpoint $(ls "$TMP/bad_ck_$1" 2>/dev/null | head -1):"; cat "$TMP/err"; fail=1; fi
}
corrupt header header
corrupt truncated truncate
corrupt shape shape
corrupt missing missing
rm -rf "$TMP/bad_dup"; cp -r "$TMP/hf_moe" "$TMP/bad_dup"; cp "$TMP/bad_dup/model-00001-of-00005.safetensors" "$TMP/bad_dup/extra.safetensors"
"$PY" -c 'import json,sys; p=sys.argv[1]; i=json.load(open(p)); i["weight_map"]["extra"]="extra.safetensors"; json.dump(i, open(p, "w"))' \
  "$TMP/bad_dup/model.safetensors.index.json"
"$BIN" convert --from hf "$TMP/bad_dup" --save "$TMP/bad_ck_dup" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "stored twice" "$TMP/err" && [ ! -e "$TMP/bad_ck_dup" ] &&
  echo "ok: a tensor in two shards -> $(cat "$TMP/err")" || { echo "FAIL: duplicate tensor rc=$rc:"; cat "$TMP/err"; fail=1; }

# 5. no HF equivalent
train "$TMP/sig.log" "$BIN" train "${MOE[@]}" --moe-router-score-function sigmoid --train-iters 1 --save "$TMP/sig"
"$BIN" convert --load "$TMP/sig" --to hf "$TMP/hf_sig" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "softmax" "$TMP/err" && echo "ok: sigmoid router -> $(cat "$TMP/err")" ||
  { echo "FAIL: sigmoid router export rc=$rc:"; cat "$TMP/err"; fail=1; }
"$BIN" convert --load "$TMP/moe" --to gguf "$TMP/x" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && echo "ok: --to gguf -> $(cat "$TMP/err")" || { echo "FAIL: --to gguf rc=$rc"; fail=1; }

[ $fail = 0 ] && echo "PASS" || echo "FAILED"
exit $fail
