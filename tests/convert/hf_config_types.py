#!/usr/bin/env python3
"""hf_config_types.py — an export's config.json and generation_config.json
read with the field types of the Hugging Face Transformers configuration
class of its family (issue 25, item 2).

Transformers 5.x declares its configs as strict dataclasses
(huggingface_hub.dataclasses.strict): a field annotated `float` refuses a
JSON integer (`router_aux_loss_coef: 0` -> "expected float, got int"). Debian
has no transformers, so the annotations are written out below, from
  src/transformers/configuration_utils.py            PreTrainedConfig
  src/transformers/models/mixtral/configuration_mixtral.py  MixtralConfig
  src/transformers/models/llama/configuration_llama.py      LlamaConfig
  src/transformers/models/gpt2/configuration_gpt2.py        GPT2Config (its
      documented argument types)
  src/transformers/modeling_rope_utils.py            RopeParameters (rope_theta)
  src/transformers/generation/configuration_utils.py GenerationConfig
json.load gives int for `0` and float for `0.0`, as Transformers sees them.

Every key of config.json must have a type here (or be one of the keys
Transformers passes through untyped, listed in UNTYPED), so a key the export
starts writing cannot escape the check.

Usage: hf_config_types.py DIR FAMILY BOS EOS
  FAMILY mixtral|llama|gpt2; BOS, EOS the expected generation ids.
"""
import json
import os
import sys

INT, FLOAT, BOOL, STR, NONE, LIST, DICT = int, float, bool, str, type(None), "list[int]", dict
LIST_STR = "list[str]"

# PreTrainedConfig's fields, and the legacy keys its __post_init__ takes:
# torch_dtype (becomes dtype), rope_theta / rope_scaling (become
# rope_parameters; RopeParameters types rope_theta as float).
COMMON = {
    "transformers_version": (STR, NONE),
    "architectures": (LIST_STR, NONE),
    "output_hidden_states": (BOOL, NONE),
    "return_dict": (BOOL, NONE),
    "dtype": (STR, NONE),
    "torch_dtype": (STR, NONE),
    "chunk_size_feed_forward": (INT,),
    "is_encoder_decoder": (BOOL,),
    "id2label": (DICT, NONE),
    "label2id": (DICT, NONE),
    "problem_type": (STR, NONE),
    "model_type": (STR,),
}
ROPE_LEGACY = {"rope_theta": (FLOAT,), "rope_scaling": (DICT, NONE)}

MIXTRAL = {
    "vocab_size": (INT,), "hidden_size": (INT,), "intermediate_size": (INT,), "num_hidden_layers": (INT,),
    "num_attention_heads": (INT,), "num_key_value_heads": (INT,), "head_dim": (INT, NONE), "hidden_act": (STR,),
    "max_position_embeddings": (INT,), "initializer_range": (FLOAT,), "rms_norm_eps": (FLOAT,), "use_cache": (BOOL,),
    "pad_token_id": (INT, NONE), "bos_token_id": (INT, NONE), "eos_token_id": (INT, LIST, NONE),
    "tie_word_embeddings": (BOOL,), "sliding_window": (INT, NONE), "attention_dropout": (FLOAT, INT),
    "num_experts_per_tok": (INT,), "num_local_experts": (INT,), "output_router_logits": (BOOL,),
    "router_aux_loss_coef": (FLOAT,), "router_jitter_noise": (FLOAT,), "rope_parameters": (DICT, NONE),
    **ROPE_LEGACY,
}
LLAMA = {
    "vocab_size": (INT,), "hidden_size": (INT,), "intermediate_size": (INT,), "num_hidden_layers": (INT,),
    "num_attention_heads": (INT,), "num_key_value_heads": (INT, NONE), "hidden_act": (STR,),
    "max_position_embeddings": (INT,), "initializer_range": (FLOAT,), "rms_norm_eps": (FLOAT,), "use_cache": (BOOL,),
    "pad_token_id": (INT, NONE), "bos_token_id": (INT, NONE), "eos_token_id": (INT, LIST, NONE),
    "pretraining_tp": (INT, NONE), "tie_word_embeddings": (BOOL,), "rope_parameters": (DICT, NONE),
    "attention_bias": (BOOL,), "attention_dropout": (INT, FLOAT, NONE), "mlp_bias": (BOOL,), "head_dim": (INT, NONE),
    **ROPE_LEGACY,
}
GPT2 = {
    "vocab_size": (INT,), "n_positions": (INT,), "n_embd": (INT,), "n_layer": (INT,), "n_head": (INT,),
    "n_inner": (INT, NONE), "activation_function": (STR,), "resid_pdrop": (FLOAT,), "embd_pdrop": (FLOAT,),
    "attn_pdrop": (FLOAT,), "layer_norm_epsilon": (FLOAT,), "initializer_range": (FLOAT,), "summary_type": (STR,),
    "summary_use_proj": (BOOL,), "summary_activation": (STR, NONE), "summary_proj_to_labels": (BOOL,),
    "summary_first_dropout": (FLOAT,), "scale_attn_weights": (BOOL,), "use_cache": (BOOL,), "bos_token_id": (INT,),
    "eos_token_id": (INT,), "scale_attn_by_inverse_layer_idx": (BOOL,), "reorder_and_upcast_attn": (BOOL,),
    "tie_word_embeddings": (BOOL,),
}
FAMILIES = {"mixtral": MIXTRAL, "llama": LLAMA, "gpt2": GPT2}
# Keys Transformers passes through without a type: dagatron's own block, and
# GPT-2's n_ctx (an argument of GPT2Config before 4.x, kept as an attribute).
UNTYPED = {"dagatron", "n_ctx"}

GENERATION = {"bos_token_id": (INT, NONE), "eos_token_id": (INT, LIST, NONE), "pad_token_id": (INT, NONE),
              "_from_model_config": (BOOL,), "transformers_version": (STR,)}


def is_type(v, t):
    if t == LIST:
        return type(v) is list and all(type(e) is int for e in v)
    if t == LIST_STR:
        return type(v) is list and all(type(e) is str for e in v)
    return type(v) is t  # not isinstance: a bool is not an int here, nor an int a float


def name(t):
    return t if isinstance(t, str) else "None" if t is NONE else t.__name__


def check(obj, table, what, errors):
    for k, v in obj.items():
        if k in UNTYPED and what == "config.json":
            continue
        if k not in table:
            errors.append(f"{what}: key {k!r} has no type in the table (a field of this family?)")
        elif not any(is_type(v, t) for t in table[k]):
            errors.append(f"{what}: {k} = {json.dumps(v)} is {type(v).__name__}, "
                          f"expected {' | '.join(name(t) for t in table[k])}")


def main():
    d, family, bos, eos = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    errors = []
    cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg.get("model_type") != family:
        errors.append(f"config.json: model_type {cfg.get('model_type')!r}, expected {family!r}")
    check(cfg, {**COMMON, **FAMILIES[family]}, "config.json", errors)
    gen_path = os.path.join(d, "generation_config.json")
    gen = json.load(open(gen_path)) if os.path.exists(gen_path) else None
    if gen is None:
        errors.append("no generation_config.json")
    else:
        check(gen, GENERATION, "generation_config.json", errors)
    vocab = cfg.get("vocab_size")
    for what, obj in (("config.json", cfg), ("generation_config.json", gen or {})):
        for k, want in (("bos_token_id", bos), ("eos_token_id", eos)):
            if k not in obj:
                errors.append(f"{what}: no {k}")
            elif obj[k] != want:
                errors.append(f"{what}: {k} = {obj[k]}, expected {want} (the tokenizer's)")
            elif not (type(vocab) is int and 0 <= obj[k] < vocab):
                errors.append(f"{what}: {k} = {obj[k]} lies outside the vocabulary [0, {vocab})")
    if errors:
        for e in errors:
            print(f"FAIL: {d}: {e}")
        sys.exit(1)
    print(f"ok: {os.path.basename(d)}: config.json has {family}'s field types, bos {bos} and eos {eos} in "
          f"config.json and generation_config.json")


if __name__ == "__main__":
    main()
