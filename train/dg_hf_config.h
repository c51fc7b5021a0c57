/* dg_hf_config.h — a model config as Hugging Face's config.json, and back.
 *
 * Export writes the HF class's own keys (hidden_size, num_key_value_heads,
 * rope_theta, num_local_experts ... or GPT-2's n_embd, n_layer ...) and,
 * under "dagatron", the whole config record and the tokenizer's type, so
 * dagatron -> HF -> dagatron restores training settings HF has no key for
 * (sequence length, loss coefficients, ...). Import reads the HF keys, which
 * win over the "dagatron" block, so a config.json edited by hand or written
 * by Transformers imports as what it says.
 */
#ifndef DG_HF_CONFIG_H
#define DG_HF_CONFIG_H

#include "dg_checkpoint.h"
#include "dg_hf_map.h"
#include "dg_model.h"

/* The generation ids written into config.json and generation_config.json:
 * those of the tokenizer the model was trained with (the end of document as
 * eos; bos its beginning-of-sequence token, else the end of document, as
 * GPT-2's <|endoftext|> is both: a document of Megatron's data starts right
 * after the previous one's end). -1: none, written as null so Transformers
 * does not fall back to its class's defaults (Mixtral's 1 and 2, GPT-2's
 * 50256). */
typedef struct dg_hf_ids {
    int32_t bos, eos;
} dg_hf_ids;

/* config.json's text (dg_malloc'd) for model c of HF architecture a whose
 * tensors are stored as dtype (torch_dtype), with the tokenizer tok (may be
 * NULL) and its ids. Every field Transformers types as a float is written as
 * a JSON float (0.0, 1e-05), which its strict config classes require. */
char *dg_hf_config_write(const dg_model_config *c, dg_hf_arch a, dg_dtype dtype, const dg_ckpt_tokenizer *tok,
                         const dg_hf_ids *ids, dg_err *err);

/* generation_config.json's text (dg_malloc'd): the ids. */
char *dg_hf_generation_config_write(const dg_hf_ids *ids);

/* Parse config.json's text (path for messages) into *c and *a; *tok gets the
 * "dagatron" block's tokenizer type and vocabulary size when present (else
 * zeroed), *ids its bos_token_id / eos_token_id (-1 when absent, null or a
 * list of several). DG_EINPUT, one line `PATH: "key": expected WHAT, got
 * VALUE`, for anything dagatron cannot build (an unknown model_type, a
 * count that is not a positive integer, heads that do not divide the
 * hidden size, an activation other than silu/gelu_new, RoPE scaling,
 * biases a Llama has not ...). */
int dg_hf_config_read(const char *text, const char *path, dg_model_config *c, dg_hf_arch *a, dg_ckpt_tokenizer *tok,
                      dg_hf_ids *ids, dg_err *err);

/* generation_config.json's text (path for messages): its bos_token_id and
 * eos_token_id replace those in *ids when it has them. */
int dg_hf_generation_config_read(const char *text, const char *path, dg_hf_ids *ids, dg_err *err);

#endif /* DG_HF_CONFIG_H */
