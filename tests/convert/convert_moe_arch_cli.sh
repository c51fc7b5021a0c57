#!/usr/bin/env bash
# convert_moe_arch_cli.sh — `dagatron convert` for the MoE architectures of
# issue 29 (acceptance 5):
#  1. gpt-oss (--quick-geglu --glu-linear-offset 1 --activation-func-clamp-value,
#     biases, --softmax-type learnable, --window-size with
#     --window-attn-skip-freq, --enable-gpt-oss's YaRN, heads of their own
#     size, GQA) saved under EP=2 exports as GptOssForCausalLM, and a PyTorch
#     model written with Transformers' gpt-oss names and math (hf_reference.py)
#     computes dagatron's loss on a batch within 1e-5; the same with plain RoPE
#     and every layer windowed.
#     DeepSeek-V3 (MLA with --q-lora-rank and YaRN, or without either; a
#     dense first layer, shared experts, the sigmoid router, group-limited and
#     scaled, with --moe-router-enable-expert-bias: e_score_correction_bias)
#     saved under EP=2 exports as DeepseekV3ForCausalLM against its
#     Transformers math in the same reference; with --mtp-num-layers 1 the
#     MTP module is layer num_hidden_layers, as DeepSeek's files hold it
#     (num_nextn_predict_layers; Transformers leaves it unread), and it
#     round-trips with the rest.
#  2. export -> import is bitwise (parameters and the expert bias, the
#     re-exported bytes), also from a config.json without the "dagatron"
#     block (Transformers' keys only: layer_types, rope_scaling,
#     first_k_dense_replace ...); one more iteration (--finetune: the bias
#     updates too) from the import is bitwise the one from the original
#     checkpoint, for gpt-oss, DeepSeek-V3 and Qwen3-MoE.
#  3. An HF router bias that is not zero is refused on import in one line,
#     exit 2, no checkpoint (dagatron's router has none), as is a DeepSeek-V3
#     e_score_correction_bias when the record has no expert bias; models HF
#     cannot express (gpt-oss without the clamp, DeepSeek-V3 without
#     --qk-layernorm) are refused on export in one line.
# Usage: convert_moe_arch_cli.sh DAGATRON CKPT_LOSS
set -u
BIN=$1 LOSS=$2
HERE=$(dirname "$0")
PY=${DG_REF_PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
SMALL=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --eval-iters 0 --log-interval 1 --hidden-dropout 0
       --attention-dropout 0 --normalization RMSNorm --untie-embeddings-and-output-weights --num-experts 4
       --moe-router-topk 2 --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 1e-2 --num-query-groups 2
       --group-query-attention)
OSS=("${SMALL[@]}" --kv-channels 24 --quick-geglu --glu-linear-offset 1 --activation-func-clamp-value 0.5
     --softmax-type learnable --window-size 7,0 --window-attn-skip-freq 2 --position-embedding-type rope --enable-gpt-oss)
DS=("${SMALL[@]:0:${#SMALL[@]}-3}" --num-layers 3 --swiglu --disable-bias-linear --position-embedding-type rope
    --moe-ffn-hidden-size 24 --moe-shared-expert-intermediate-size 48 --moe-layer-freq "[0]+[1]*2"
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-2
    --moe-router-num-groups 2 --moe-router-group-topk 1 --moe-router-topk-scaling-factor 2.5
    --multi-latent-attention --kv-lora-rank 16 --qk-head-dim 8 --qk-pos-emb-head-dim 8 --v-head-dim 12 --qk-layernorm)
DS_YARN=("${DS[@]}" --q-lora-rank 24 --rotary-scaling-factor 40 --mscale 1 --mscale-all-dim 0.707 --mtp-num-layers 1)
DS_ROPE=("${DS[@]}" --rope-type rope)
QWEN3=("${SMALL[@]}" --swiglu --disable-bias-linear --position-embedding-type rope --kv-channels 24 --qk-layernorm)
train() { local log=$1; shift; "$@" >"$log" 2>&1 || { echo "FAIL: $* exited $?"; tail -3 "$log"; fail=1; }; }
check_ref() { # CKPT HFDIR
  "$LOSS" "$1" "$TMP/batch.json" >/dev/null || { echo "FAIL: ckpt_loss $1"; fail=1; return; }
  "$PY" "$HERE/hf_reference.py" "$2" "$TMP/batch.json" || fail=1
}
strip_block() { "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["dagatron"]; json.dump(c, open(sys.argv[1], "w"))' "$1"; }
# one more iteration from each checkpoint: the same log fields and parameters, bit for bit
one_more() { # NAME ORIG IMPORTED FLAGS...
  local name=$1 a=$2 b=$3; shift 3
  train "$TMP/$name.1.log" "$BIN" train "$@" --train-iters 1 --load "$a" --finetune --save "$TMP/${name}_next_a"
  train "$TMP/$name.2.log" "$BIN" train "$@" --train-iters 1 --load "$b" --finetune --save "$TMP/${name}_next_b"
  local la lb
  la=$(grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" "$TMP/$name.1.log" | paste -sd' ')
  lb=$(grep -oE "lm loss: [0-9.E+-]+|grad norm: [0-9.]+" "$TMP/$name.2.log" | paste -sd' ')
  if [ -n "$la" ] && [ "$la" = "$lb" ] && "$PY" "$HERE/compare_params.py" "$TMP/${name}_next_a" "$TMP/${name}_next_b"; then
    echo "ok: $name: one more iteration from the import is the original's, bit for bit ($la)"
  else echo "FAIL: $name: one more iteration differs: '$la' / '$lb'"; fail=1; fi
}

# 1. gpt-oss exports and the HF-named reference
train "$TMP/oss.log" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${OSS[@]}" --expert-model-parallel-size 2 \
  --train-iters 3 --save "$TMP/oss"
"$BIN" convert --load "$TMP/oss" --to hf "$TMP/hf_oss" || { echo "FAIL: export gpt-oss"; fail=1; }
grep -q '"GptOssForCausalLM"' "$TMP/hf_oss/config.json" || { echo "FAIL: not GptOssForCausalLM"; fail=1; }
grep -q '"model.layers.1.mlp.experts.gate_up_proj"' "$TMP/hf_oss/model.safetensors.index.json" ||
  { echo "FAIL: no gate_up_proj in the index"; fail=1; }
check_ref "$TMP/oss" "$TMP/hf_oss"
OSS_ROPE=("${OSS[@]:0:${#OSS[@]}-7}" --window-size 5,0 --position-embedding-type rope)
train "$TMP/oss_rope.log" "$BIN" train "${OSS_ROPE[@]}" --train-iters 2 --save "$TMP/oss_rope"
"$BIN" convert --load "$TMP/oss_rope" --to hf "$TMP/hf_oss_rope" || { echo "FAIL: export gpt-oss rope"; fail=1; }
grep -qE '"rope_scaling":[[:space:]]*null' "$TMP/hf_oss_rope/config.json" || { echo "FAIL: rope_scaling not null"; fail=1; }
check_ref "$TMP/oss_rope" "$TMP/hf_oss_rope"

# 2. gpt-oss -> HF -> gpt-oss, bitwise; one more iteration
for m in oss oss_rope; do
  "$BIN" convert --from hf "$TMP/hf_$m" --save "$TMP/back_$m" 2>/dev/null || { echo "FAIL: import $m"; fail=1; continue; }
  "$PY" "$HERE/compare_params.py" "$TMP/$m" "$TMP/back_$m" || fail=1
  "$BIN" convert --load "$TMP/back_$m" --to hf "$TMP/hf2_$m" 2>/dev/null
  same=1
  for f in "$TMP/hf_$m"/*.safetensors; do cmp -s "$f" "$TMP/hf2_$m/$(basename "$f")" || same=0; done
  [ $same = 1 ] && echo "ok: $m: the re-imported checkpoint exports the same bytes" || { echo "FAIL: $m re-export differs"; fail=1; }
done
rm -rf "$TMP/plain"; cp -r "$TMP/hf_oss" "$TMP/plain"; strip_block "$TMP/plain/config.json"
"$BIN" convert --from hf "$TMP/plain" --save "$TMP/back_plain" 2>/dev/null && "$PY" "$HERE/compare_params.py" "$TMP/oss" "$TMP/back_plain" ||
  { echo "FAIL: gpt-oss import without the dagatron block"; fail=1; }
one_more gpt-oss "$TMP/oss" "$TMP/back_plain" "${OSS[@]}"
one_more gpt-oss-rope "$TMP/oss_rope" "$TMP/back_oss_rope" "${OSS_ROPE[@]}"

# DeepSeek-V3: export, reference, import bitwise (the expert bias too), one more iteration
for m in ds_yarn ds_rope; do
  if [ $m = ds_yarn ]; then flags=("${DS_YARN[@]}"); else flags=("${DS_ROPE[@]}"); fi
  train "$TMP/$m.log" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${flags[@]}" --expert-model-parallel-size 2 \
    --train-iters 3 --save "$TMP/$m"
  "$BIN" convert --load "$TMP/$m" --to hf "$TMP/hf_$m" 2>/dev/null || { echo "FAIL: export $m"; fail=1; continue; }
  grep -q '"DeepseekV3ForCausalLM"' "$TMP/hf_$m/config.json" || { echo "FAIL: $m not DeepseekV3ForCausalLM"; fail=1; }
  grep -q '"model.layers.2.mlp.gate.e_score_correction_bias"' "$TMP/hf_$m/model.safetensors.index.json" ||
    { echo "FAIL: $m: no e_score_correction_bias"; fail=1; }
  # the MTP module as DeepSeek's files hold it: layer num_hidden_layers, num_nextn_predict_layers 1
  [ $m = ds_yarn ] && { grep -q '"model.layers.3.eh_proj.weight"' "$TMP/hf_$m/model.safetensors.index.json" &&
    grep -q '"model.layers.3.shared_head.head.weight"' "$TMP/hf_$m/model.safetensors.index.json" &&
    grep -qE '"num_nextn_predict_layers":[[:space:]]*1' "$TMP/hf_$m/config.json" ||
    { echo "FAIL: $m: no MTP layer 3 or num_nextn_predict_layers"; fail=1; }; }
  check_ref "$TMP/$m" "$TMP/hf_$m"
  rm -rf "$TMP/plain_$m"; cp -r "$TMP/hf_$m" "$TMP/plain_$m"; strip_block "$TMP/plain_$m/config.json"
  # DeepSeek's own files: rope_scaling's older "type", no attention_factor or truncate (Transformers' defaults)
  [ $m = ds_yarn ] && "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); y=c["rope_scaling"]
y["type"]=y.pop("rope_type"); del y["attention_factor"], y["truncate"]; json.dump(c, open(sys.argv[1], "w"))' \
    "$TMP/plain_$m/config.json" && check_ref "$TMP/$m" "$TMP/plain_$m"
  for src in hf plain; do
    "$BIN" convert --from hf "$TMP/${src}_$m" --save "$TMP/back_${src}_$m" 2>/dev/null &&
      "$PY" "$HERE/compare_params.py" "$TMP/$m" "$TMP/back_${src}_$m" || { echo "FAIL: $m import from $src"; fail=1; }
  done
  "$BIN" convert --load "$TMP/back_plain_$m" --to hf "$TMP/hf2_$m" 2>/dev/null
  same=1
  for f in "$TMP/hf_$m"/*.safetensors; do cmp -s "$f" "$TMP/hf2_$m/$(basename "$f")" || same=0; done
  [ $same = 1 ] && echo "ok: $m: the re-imported checkpoint exports the same bytes" || { echo "FAIL: $m re-export differs"; fail=1; }
  one_more "$m" "$TMP/$m" "$TMP/back_plain_$m" "${flags[@]}"
done

# Qwen3-MoE: export -> import -> one more iteration
train "$TMP/qwen3.log" $DG_MPIRUN -np 2 --bind-to none "$BIN" train "${QWEN3[@]}" --expert-model-parallel-size 2 \
  --train-iters 2 --save "$TMP/qwen3"
"$BIN" convert --load "$TMP/qwen3" --to hf "$TMP/hf_qwen3" 2>/dev/null &&
  "$BIN" convert --from hf "$TMP/hf_qwen3" --save "$TMP/back_qwen3" 2>/dev/null || { echo "FAIL: qwen3 round trip"; fail=1; }
one_more qwen3-moe "$TMP/qwen3" "$TMP/back_qwen3" "${QWEN3[@]}"

# 3. refusals
rm -rf "$TMP/bias"; cp -r "$TMP/hf_oss" "$TMP/bias"
"$PY" - "$TMP/bias" <<'EOF'
import json, struct, sys, os
d = sys.argv[1]
wm = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
name = "model.layers.0.mlp.router.bias"
p = os.path.join(d, wm[name])
raw = bytearray(open(p, "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
e = json.loads(raw[8:8 + n])[name]
struct.pack_into("<f", raw, 8 + n + e["data_offsets"][0], 0.25)
open(p, "wb").write(raw)
EOF
"$BIN" convert --from hf "$TMP/bias" --save "$TMP/bad_bias" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "router.bias' must be zeros" "$TMP/err" && [ ! -e "$TMP/bad_bias" ] &&
  echo "ok: a router bias -> $(cat "$TMP/err")" || { echo "FAIL: router bias import rc=$rc:"; cat "$TMP/err"; fail=1; }
n_ref=0
refuse_export() { # WHAT FLAGS...: train one iteration, export: one line naming WHAT, exit 2
  local what=$1; shift
  n_ref=$((n_ref + 1))
  train "$TMP/r.log" "$BIN" train "$@" --train-iters 1 --save "$TMP/r$n_ref"
  "$BIN" convert --load "$TMP/r$n_ref" --to hf "$TMP/hf_r$n_ref" >/dev/null 2>"$TMP/err"; local rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "$what" "$TMP/err" && echo "ok: $what -> $(cat "$TMP/err")" ||
    { echo "FAIL: $what export rc=$rc:"; cat "$TMP/err"; fail=1; }
}
refuse_export "--activation-func-clamp-value" "${SMALL[@]}" --quick-geglu --glu-linear-offset 1 --softmax-type learnable \
  --position-embedding-type rope
refuse_export "--qk-layernorm" "${DS_ROPE[@]/--qk-layernorm/--use-mcore-models}"
rm -rf "$TMP/nobias"; cp -r "$TMP/hf_ds_rope" "$TMP/nobias"
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["dagatron"]["model"]["moe_expert_bias"]=0; json.dump(c, open(sys.argv[1], "w"))' \
  "$TMP/nobias/config.json"
"$BIN" convert --from hf "$TMP/nobias" --save "$TMP/bad_nobias" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "e_score_correction_bias' must be zeros" "$TMP/err" &&
  [ ! -e "$TMP/bad_nobias" ] && echo "ok: an expert bias without --moe-router-enable-expert-bias -> $(cat "$TMP/err")" ||
  { echo "FAIL: expert bias import rc=$rc:"; cat "$TMP/err"; fail=1; }

[ $fail = 0 ] && echo "PASS" || echo "FAILED"
exit $fail
