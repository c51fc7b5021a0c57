/* dg_hf_convert.h — `dagatron convert`: checkpoints to and from Hugging
 * Face Transformers' safetensors format (docs/hf_interop.md).
 *
 * Export reads a checkpoint's parameters as global tensors (whatever layout
 * saved them: the loader assembles the slices) and writes into DIR:
 *   model-0000i-of-0000N.safetensors   the tensors by HF names (dg_hf_map.h)
 *   model.safetensors.index.json       {"metadata": {"total_size"}, "weight_map"}
 *   config.json                        the HF class's config (dg_hf_config.h), with the
 *                                      generation ids of the checkpoint's tokenizer
 *   generation_config.json             those ids (bos_token_id, eos_token_id)
 *   the tokenizer's files, by the checkpoint's --tokenizer-type:
 *     GPT2BPETokenizer                 vocab.json, merges.txt (its --vocab-file, --merge-file)
 *     HuggingFaceTokenizer             tokenizer.json (its --tokenizer-model, the file or the
 *                                      one in that directory), and tokenizer_config.json when
 *                                      one sits beside it
 *     SentencePieceTokenizer, Llama2Tokenizer, GPTSentencePieceTokenizer
 *                                      tokenizer.model (its --tokenizer-model)
 *     ByteLevelTokenizer, NullTokenizer none: they need no files (config.json's "dagatron"
 *                                      block names the type, so import restores it)
 *   A file the checkpoint names that cannot be read is DG_EINPUT.
 * Optimizer state is not exported (HF checkpoints hold weights only).
 *
 * Import reads such a directory (fp32, bf16 or fp16 tensors; one
 * model.safetensors or shards named by an index) and saves a dagatron
 * checkpoint of iteration 0 holding the parameters (fp32) and the config
 * record, to continue training with --load (--no-load-optim or --finetune:
 * there are no optimizer moments). fp32 tensors round-trip bit for bit.
 * A NullTokenizer import (no tokenizer files) ends documents at the
 * eos_token_id of generation_config.json, else config.json, when there is
 * one. The checkpoint directory must hold no checkpoint yet: iteration 0
 * would move its tracker back, and the next save of a run resumed there
 * would replace its iterations. With add_to_existing the import is added
 * beside them (refused when iteration 0 is there already) and the tracker
 * is left on a newer iteration.
 * Every file is checked (header, dtypes, shapes, offsets, that the config's
 * model has each tensor and the files no unknown one) before the
 * checkpoint is written: a bad file is one DG_EINPUT line naming it.
 */
#ifndef DG_HF_CONVERT_H
#define DG_HF_CONVERT_H

#include <stdint.h>

#include "dg_base.h"
#include "dg_graph.h"

typedef struct dg_hf_export_opts {
    int64_t iteration;       /* DG_CKPT_LATEST or an iteration */
    int64_t max_shard_bytes; /* start a new shard beyond this (<= 0: 5 GB, Transformers' default) */
    dg_dtype dtype;          /* DG_F32 (exact) or DG_BF16 (rounded to nearest even) */
} dg_hf_export_opts;

/* What an export wrote besides the tensors, for the command's message. */
typedef struct dg_hf_export_info {
    char tokenizer_type[1024]; /* the checkpoint's --tokenizer-type (DG_CKPT_STR_LEN bytes) */
    char tokenizer_files[128]; /* the files written for it, ", "-separated; "" when none */
} dg_hf_export_info;

/* info may be NULL. */
int dg_hf_export(const char *ckpt_dir, const dg_hf_export_opts *o, const char *hf_dir, dg_hf_export_info *info,
                 dg_err *err);
typedef struct dg_hf_import_opts {
    int add_to_existing; /* --add-to-existing: ckpt_dir may hold a checkpoint (see above) */
} dg_hf_import_opts;

/* o may be NULL (no options). */
int dg_hf_import(const char *hf_dir, const char *ckpt_dir, const dg_hf_import_opts *o, dg_err *err);

/* Is --tokenizer-type `type` a HuggingFace (tokenizer.json) one, a
 * SentencePiece (tokenizer.model) one? Megatron's aliases included. */
int dg_hf_tokenizer_is_hf(const char *type);
int dg_hf_tokenizer_is_sp(const char *type);

#endif /* DG_HF_CONVERT_H */
