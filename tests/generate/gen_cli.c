/* gen_cli.c — drives `dagatron generate` for generate_cli.sh before the
 * command is in the dagatron binary's table:
 *
 *   gen_cli make-ckpt DIR [NullTokenizer [mock]]
 *                            save a tiny random MoE model (byte-level
 *                            tokenizer, padded vocabulary 320) as a
 *                            checkpoint of iteration 7 in DIR; or one
 *                            trained with NullTokenizer (300 ids), on
 *                            mock data or not, recorded as before "eod"
 *                            was (the older rule: EOD 299, none on mock
 *                            data; io/dg_tok_ckpt.h)
 *   gen_cli generate FLAGS   dg_cmd_generate(FLAGS)
 */
#include <stdio.h>
#include <string.h>

#include "dg_checkpoint.h"
#include "dg_gradcheck.h"
#include "dg_model.h"
#include "dg_model_record.h"
#include "dg_tokenizer.h"

int dg_cmd_generate(int argc, char **argv);

/* tokenizer: "" (byte-level), or "NullTokenizer" with mock = 0/1. */
static int make_ckpt(const char *dir, const char *tokenizer, int mock) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.vocab_size = 320;
    c.seq_length = 64;
    dg_graph *g = dg_graph_new("ckpt");
    dg_model_io io;
    dg_err err = {{0}};
    if (dg_model_build_forward(g, &c, &io, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    dg_ckpt_tensor *t = dg_calloc((size_t)g->n_tensors, sizeof *t);
    int n = 0;
    dg_test_rng rng = {77};
    for (int i = 0; i < g->n_tensors; i++) {
        const dg_tensor *x = &g->tensors[i];
        if (x->role != DG_ROLE_PARAMETER) continue;
        float *p = dg_aligned_alloc(dg_tensor_bytes(x));
        int64_t k = dg_tensor_numel(x);
        if (strstr(x->name, "norm"))
            for (int64_t j = 0; j < k; j++) p[j] = 1.0f;
        else
            dg_test_fill_normal(&rng, p, k, strstr(x->name, "router") ? 0.5 : 0.3);
        if (dg_ckpt_tensor_from(&t[n++], "", x, p, &err) != DG_OK) {
            dg_err_print(&err);
            return 1;
        }
    }
    dg_ckpt_meta m;
    dg_ckpt_meta_init(&m);
    m.iteration = 7;
    if (dg_model_to_record(&c, &m.config, &err) != DG_OK) {
        dg_err_print(&err);
        return 1;
    }
    snprintf(m.tokenizer.type, sizeof m.tokenizer.type, "%s", tokenizer[0] ? tokenizer : DG_TOK_BYTE_NAME);
    m.tokenizer.vocab_size = tokenizer[0] ? 300 : 257;
    m.data.mock = mock;
    int st = dg_ckpt_save(dir, &m, t, n, NULL, &err);
    if (st != DG_OK) dg_err_print(&err);
    for (int i = 0; i < n; i++) dg_free(t[i].data);
    dg_free(t);
    dg_graph_free(g);
    return st;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "make-ckpt"))
        return make_ckpt(argv[2], argc >= 4 ? argv[3] : "", argc >= 5 && !strcmp(argv[4], "mock"));
    if (argc >= 2 && !strcmp(argv[1], "generate")) return dg_cmd_generate(argc - 1, argv + 1);
    fprintf(stderr, "usage: gen_cli make-ckpt DIR [NullTokenizer [mock]] | gen_cli generate FLAGS\n");
    return 2;
}
