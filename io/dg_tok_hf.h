/* dg_tok_hf.h — internal to the tokenizers: a Hugging Face `tokenizer.json`
 * byte-level BPE (GPT-2, Llama-3, Qwen2.5), for --tokenizer-type
 * HuggingFaceTokenizer. Written from the tokenizers library's documented
 * pipeline; encoding a document is:
 *
 *  1. added tokens (special or not) are cut out first, leftmost-longest,
 *     and become their ids, never split;
 *  2. each other segment is normalized (none, or NFC through utf8proc);
 *  3. the pre-tokenizer steps split it in turn, each step splitting every
 *     piece of the previous one: Split with a Regex (PCRE2, UTF + UCP, JIT)
 *     or String pattern, Digits, and ByteLevel (GPT-2's regex when
 *     use_regex, a leading space when add_prefix_space), possibly in a
 *     Sequence;
 *  4. each piece is BPE-merged over its bytes (dg_bpe.h); with
 *     ignore_merges a piece that is a whole vocabulary token is that token;
 *  5. the post-processor's TemplateProcessing "single" template adds its
 *     special tokens around the ids (Llama-3's <|begin_of_text|>).
 *
 * The end-of-document id is Megatron's for this tokenizer, the tokenizer's
 * eos token: "eos_token" of tokenizer_config.json beside tokenizer.json;
 * without that file, <|endoftext|> when it is a token (GPT-2's default eos);
 * else none (-1). The beginning-of-sequence id is tokenizer_config.json's
 * "bos_token", none (-1) without that file or when it is null (Qwen's); it
 * is not added to documents (the post-processor's template is what adds
 * tokens), only reported for the generation ids of an export.
 *
 * Anything else in the file (another model type, normalizer, pre-tokenizer
 * or post-processor, an added token with lstrip/rstrip/single_word) is
 * refused when loading, with one line naming it.
 */
#ifndef DG_TOK_HF_H
#define DG_TOK_HF_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"
#include "dg_bpe.h"
#include "dg_data_buf.h"

#define DG_HF_MAX_STEPS 8
#define DG_HF_MAX_TEMPLATE 8

typedef enum dg_hf_behavior {
    DG_HF_ISOLATED = 0,   /* matches and the text between them are pieces */
    DG_HF_REMOVED,        /* the matches are dropped */
    DG_HF_MERGED_PREV,    /* a match ends the piece before it */
    DG_HF_MERGED_NEXT     /* a match starts the piece after it */
} dg_hf_behavior;

typedef struct dg_hf_step {
    void *re;             /* pcre2_code; NULL: this step does not split */
    dg_hf_behavior behavior;
    int add_prefix_space; /* ByteLevel: a piece not starting with ' ' gets one */
} dg_hf_step;

typedef struct dg_hf_added {
    uint8_t *text;
    int32_t len, id;
} dg_hf_added;

typedef struct dg_tok_hf {
    dg_bpe bpe;            /* vocabulary (added tokens included, as their text) and merges */
    int nfc;               /* normalizer NFC */
    int n_steps;
    dg_hf_step steps[DG_HF_MAX_STEPS];
    int n_added;
    dg_hf_added *added;    /* longest first */
    uint8_t added_first[256]; /* bytes an added token can start with */
    int ignore_merges;
    int n_prefix, n_suffix;
    int32_t prefix[DG_HF_MAX_TEMPLATE], suffix[DG_HF_MAX_TEMPLATE];
    uint64_t *vhash;       /* token bytes -> id (open addressing, 0 = empty) */
    int32_t *vid;
    size_t vcap;
    int64_t vocab_size;
    int32_t eod;
    int32_t bos;           /* tokenizer_config.json's bos_token, -1: none */
} dg_tok_hf;

/* Per-thread scratch (lives in dg_tok_state). */
typedef struct dg_hf_scratch {
    void *md;             /* pcre2_match_data */
    dg_bytebuf buf[2], tmp; /* a step's pieces, concatenated: input and output by turns */
    dg_i32buf ends[2];    /* where each piece of buf[i] ends */
} dg_hf_scratch;

/* path: a tokenizer.json, or a directory holding one. */
int dg_tok_hf_open(dg_tok_hf **hf, const char *path, dg_err *err);
void dg_tok_hf_close(dg_tok_hf *hf);

/* Token bytes -> id, or -1 (dg_tok_hf.c). */
int32_t dg_tok_hf_lookup(const dg_tok_hf *hf, const uint8_t *p, size_t n);

/* Pre-tokenizer steps and normalizer from the JSON (dg_tok_hf_pretok.c).
 * `json` is a cJSON node; errors name `path`. */
int dg_tok_hf_parse_pretok(dg_tok_hf *hf, const void *json, const char *path, dg_err *err);
int dg_tok_hf_parse_normalizer(dg_tok_hf *hf, const void *json, const char *path, dg_err *err);
void dg_tok_hf_free_steps(dg_tok_hf *hf);

/* Append the ids of text[0, n). sc and cache may not be shared between threads. */
void dg_tok_hf_encode(const dg_tok_hf *hf, dg_hf_scratch *sc, dg_bpe_cache *cache, const uint8_t *text, size_t n,
                      dg_i32buf *out);
void dg_hf_scratch_free(dg_hf_scratch *sc);

#endif /* DG_TOK_HF_H */
