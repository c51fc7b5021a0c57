/* dg_generate.h — decoding a model with a KV cache, and generating text.
 *
 * These run graphs, so they need moe/ (the decode graph), sched/ (the serial
 * executor) and io/ (the sampler, dg_sample.h): train/ is the room that links
 * above all three.
 *
 * A dg_decoder owns the decode-step graphs of one model (moe/dg_model_decode.h)
 * and the KV caches of `batch` sequences of up to max_len tokens.
 * dg_decoder_step() appends L tokens per sequence and returns the logits;
 * the caches are updated in place, so step t costs O(t), not O(t^2).
 * Graphs are built once per L: the L = 1 graph serves every generated
 * token, a prefill graph the prompt. Kernels run on the serial executor
 * (sched/dg_exec_serial.h), which runs nodes one at a time in topological
 * order: the kv_append before every reader of its output, by a data edge.
 */

#ifndef DG_GENERATE_H
#define DG_GENERATE_H

#include "dg_model.h"
#include "dg_sample.h"
#include "dg_team.h"

/* Where parameters come from: get() returns the f32 values of parameter
 * `name` (Megatron's state-dict name, as in dg_model.h) with the given
 * shape, valid for the decoder's lifetime, or NULL with err set. The
 * decoder never writes them. */
typedef struct dg_param_source {
    const float *(*get)(void *ctx, const char *name, int ndim, const int64_t *shape, dg_err *err);
    void *ctx;
} dg_param_source;

typedef struct dg_decoder dg_decoder;

/* team: the threads kernels split rows over (NULL: the calling thread). */
dg_decoder *dg_decoder_new(const dg_model_config *c, int batch, int max_len,
                           const dg_param_source *ps, const dg_team *team, dg_err *err);
void dg_decoder_free(dg_decoder *d);

/* Feed tokens [batch, L] (L >= 1) at positions pos .. pos + L - 1, where
 * pos = dg_decoder_pos(d), then pos += L. *logits (valid until the next
 * call) gets f32 [batch, L, V] when all_logits, else [batch, V] for the
 * last token. DG_EINPUT when the cache would overflow max_len or a token is
 * outside [0, V). */
int dg_decoder_step(dg_decoder *d, const int32_t *tokens, int L, int all_logits,
                    const float **logits, dg_err *err);
int dg_decoder_pos(const dg_decoder *d);
int64_t dg_decoder_vocab(const dg_decoder *d);
/* Forget the cached tokens (pos = 0). */
void dg_decoder_reset(dg_decoder *d);

/* Generate up to max_new tokens after prompt[0, n_prompt) (n_prompt >= 1)
 * for one sequence: prefill, then one cached step per token, sampling with
 * o. out gets the tokens; *n_out (may be NULL) how many (fewer than max_new
 * when o->stop_token was emitted; it is included). Single-threaded. */
int dg_generate(const dg_model_config *c, const dg_param_source *ps, const int32_t *prompt,
                int n_prompt, const dg_sample_opts *o, int32_t *out, int max_new, int *n_out,
                dg_err *err);

#endif /* DG_GENERATE_H */
