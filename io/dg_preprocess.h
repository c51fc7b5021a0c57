/* dg_preprocess.h — tokenize documents into Megatron indexed datasets, like
 * Megatron-LM's tools/preprocess_data.py (document level).
 *
 * For each JSON key K the output is <output_prefix>_K_document.{bin,idx}
 * (text inputs use the first key, "text" by default). Each document becomes
 * one document of the dataset; each of its sentences with at least one token
 * one sequence (a string value is one sentence). With append_eod, the
 * end-of-document token is appended to the last sentence of every non-empty
 * document. A document without tokens is still recorded (a document holding
 * no sequence), as Megatron's builder does.
 *
 * Documents are tokenized by `workers` threads over batches of records while
 * the calling thread writes the previous batch; the output is written in
 * input order and does not depend on the worker count.
 */
#ifndef DG_PREPROCESS_H
#define DG_PREPROCESS_H

#include <stdint.h>

#include "dg_base.h"
#include "dg_corpus.h"
#include "dg_tokenizer.h"

#define DG_PREPROCESS_MAX_KEYS 16

typedef struct dg_preprocess_opts {
    const char *const *inputs;   /* [n_inputs] input files, read in order */
    int n_inputs;
    dg_input_format format;      /* DG_INPUT_AUTO: by each file's extension */
    const char *const *json_keys; /* [n_keys]; NULL/0 means {"text"} */
    int n_keys;
    const char *doc_separator;   /* TEXT: a line equal to this ends a document; NULL: file = document */
    int append_eod;
    const char *output_prefix;
    int workers;                 /* >= 1 */
    const dg_tokenizer *tok;
    int log_interval;            /* print progress every this many documents to stderr; 0: quiet */
} dg_preprocess_opts;

typedef struct dg_preprocess_stats {
    int64_t documents; /* documents written (per key) */
    int64_t sequences;
    int64_t tokens;    /* over all keys */
    int64_t bytes_in;  /* bytes of the input files */
    double seconds;
} dg_preprocess_stats;

/* The memory one worker needs (its buffers for two batches and its thread
 * stack): dg_preprocess_run refuses --workers that would not fit. */
double dg_preprocess_worker_bytes(void);

/* "<prefix>_<key>_document" into out. */
void dg_preprocess_output_name(char *out, size_t cap, const char *prefix, const char *key);

int dg_preprocess_run(const dg_preprocess_opts *o, dg_preprocess_stats *stats, dg_err *err);

#endif /* DG_PREPROCESS_H */
