/* data_tool.c — a test helper (not a test): builds GPT dataset indices or
 * blending indices from the command line so the Python reference tests can
 * compare them with numpy.
 *
 *   data_tool gpt PREFIX SEQ_LENGTH NUM_SAMPLES(-1: one epoch) SEED BEGIN END CACHE_DIR
 *       builds (and caches) the indices; prints "<cache base> <num_epochs> <separate>"
 *   data_tool split PREFIX SPLIT SEQ_LENGTH SEED CACHE_DIR
 *       opens PREFIX as the training feed does (dg_data_open, one epoch per
 *       split) and prints "<split> <cache base>" for every split it built
 *   data_tool blend OUT_PREFIX SIZE W1 [W2 ...]
 *       writes OUT_PREFIX-dataset_index.npy and OUT_PREFIX-dataset_sample_index.npy
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_blend.h"
#include "dg_data_npy.h"
#include "dg_gpt_dataset.h"

int main(int argc, char **argv) {
    dg_err err = {{0}};
    if (argc == 9 && !strcmp(argv[1], "gpt")) {
        dg_indexed d;
        if (dg_indexed_open(&d, argv[2], &err) != DG_OK) {
            dg_err_print(&err);
            return 2;
        }
        dg_gpt_config c = {0};
        c.seq_length = atoll(argv[3]);
        c.seed = (uint32_t)strtoul(argv[5], NULL, 10);
        c.drop_last_partial = 1;
        c.cache_dir = argv[8];
        dg_gpt_dataset ds;
        if (dg_gpt_dataset_build(&ds, &d, atoll(argv[6]), atoll(argv[7]), atoll(argv[4]), &c, "train", &err) != DG_OK) {
            dg_err_print(&err);
            return 2;
        }
        printf("%s %lld %d\n", ds.cache_base, (long long)ds.num_epochs, ds.separate_final_epoch);
        dg_gpt_dataset_free(&ds);
        dg_indexed_close(&d);
        return 0;
    }
    if (argc == 7 && !strcmp(argv[1], "split")) {
        dg_data_config c = {0};
        c.n_words = 1;
        c.words = &argv[2];
        c.split = argv[3];
        for (int s = 0; s < DG_SPLIT_COUNT; s++) c.num_samples[s] = -1;
        c.gpt.seq_length = atoll(argv[4]);
        c.gpt.seed = (uint32_t)strtoul(argv[5], NULL, 10);
        c.gpt.drop_last_partial = 1;
        c.gpt.cache_dir = argv[6];
        dg_data d;
        if (dg_data_open(&d, &c, &err) != DG_OK) {
            dg_err_print(&err);
            return 2;
        }
        static const char *names[DG_SPLIT_COUNT] = {"train", "valid", "test"};
        for (int s = 0; s < DG_SPLIT_COUNT; s++)
            if (d.split[s].present) printf("%s %s\n", names[s], d.split[s].parts[0].cache_base);
        dg_data_close(&d);
        return 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "blend")) {
        int n = argc - 4;
        int64_t size = atoll(argv[3]);
        double *w = malloc(sizeof(double) * (size_t)n), sum = 0;
        for (int k = 0; k < n; k++) sum += (w[k] = atof(argv[4 + k]));
        for (int k = 0; k < n; k++) w[k] /= sum;
        int16_t *di = malloc(sizeof(int16_t) * (size_t)size);
        int64_t *dsi = malloc(sizeof(int64_t) * (size_t)size), *di64 = malloc(sizeof(int64_t) * (size_t)size);
        dg_blending_indices(w, n, size, di, dsi);
        for (int64_t i = 0; i < size; i++) di64[i] = di[i];
        char p[4096];
        snprintf(p, sizeof p, "%s-dataset_index.npy", argv[2]);
        int st = dg_npy_write(p, DG_NPY_I64, di64, size, 0, &err);
        snprintf(p, sizeof p, "%s-dataset_sample_index.npy", argv[2]);
        if (st == DG_OK) st = dg_npy_write(p, DG_NPY_I64, dsi, size, 0, &err);
        if (st != DG_OK) dg_err_print(&err);
        free(w);
        free(di);
        free(dsi);
        free(di64);
        return st;
    }
    fprintf(stderr, "usage: see data_tool.c\n");
    return 2;
}
