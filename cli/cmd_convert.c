/* cmd_convert.c — `dagatron convert`: checkpoints to and from Hugging Face
 * Transformers (train/dg_hf_convert.h, docs/hf_interop.md).
 *
 *   dagatron convert --load CKPT --to hf DIR [--ckpt-step N] [--hf-dtype fp32|bf16] [--max-shard-size BYTES]
 *   dagatron convert --from hf DIR --save CKPT [--add-to-existing]
 *
 * `--to hf DIR` and `--from hf DIR` take two words, as the issue spells
 * them, so the flags are read here rather than by dg_args.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_checkpoint.h"
#include "dg_cli.h"
#include "dg_hf_convert.h"

typedef struct convert_flags {
    const char *load, *save, *to_dir, *from_dir;
    int64_t ckpt_step, max_shard;
    dg_dtype dtype;
    int add_to_existing;
} convert_flags;

static void usage(FILE *f) {
    fprintf(f,
            "usage: dagatron convert --load CKPT --to hf DIR [--ckpt-step N] [--hf-dtype fp32|bf16]\n"
            "                        [--max-shard-size BYTES]\n"
            "       dagatron convert --from hf DIR --save CKPT [--add-to-existing]\n\n"
            "  --load CKPT --to hf DIR   write CKPT's parameters as Hugging Face safetensors shards,\n"
            "                            model.safetensors.index.json, config.json, generation_config.json\n"
            "                            (the tokenizer's bos/eos ids) and tokenizer files\n"
            "                            (MixtralForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM,\n"
            "                            DeepseekV3ForCausalLM, LlamaForCausalLM or GPT2LMHeadModel)\n"
            "  --from hf DIR --save CKPT import such a directory (fp32, bf16 or fp16) as a checkpoint of\n"
            "                            iteration 0; continue with `train --load CKPT --no-load-optim`.\n"
            "                            CKPT must hold no checkpoint yet (its tracker would move back)\n"
            "  --add-to-existing         with --from: add iteration 0 to a CKPT that holds a checkpoint;\n"
            "                            its tracker stays on its newest iteration (generate and convert\n"
            "                            --to read the import with --ckpt-step 0); refused when CKPT\n"
            "                            holds an iteration 0 already\n"
            "  --ckpt-step N             export iteration N instead of the latest\n"
            "  --hf-dtype fp32|bf16      tensors' dtype in DIR (default fp32: exact)\n"
            "  --max-shard-size BYTES    start a new shard beyond this size (default 5000000000)\n");
}

static int parse_count(const char *flag, const char *v, int64_t *out, dg_err *err) {
    char *end;
    errno = 0;
    long long n = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || n < 0)
        return dg_err_set(err, DG_EINPUT, "%s: expected a non-negative integer, got '%s'", flag, v ? v : "");
    *out = n;
    return DG_OK;
}

/* "--to hf DIR" / "--from hf DIR": the format word, then the directory. */
static int parse_hf(const char *flag, int argc, char **argv, int *i, const char **dir, dg_err *err) {
    if (*i + 2 >= argc || strcmp(argv[*i + 1], "hf"))
        return dg_err_set(err, DG_EINPUT, "%s: expected `%s hf DIR` (hf is the only format)", flag, flag);
    *dir = argv[*i + 2];
    *i += 2;
    return DG_OK;
}

static int parse(int argc, char **argv, convert_flags *f, dg_err *err) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return dg_err_set(err, DG_EINPUT, "help");
        if (!strcmp(a, "--to")) DG_TRY(parse_hf(a, argc, argv, &i, &f->to_dir, err));
        else if (!strcmp(a, "--from")) DG_TRY(parse_hf(a, argc, argv, &i, &f->from_dir, err));
        else if (!strcmp(a, "--load") || !strcmp(a, "--save")) {
            if (!v) return dg_err_set(err, DG_EINPUT, "%s: expected a checkpoint directory", a);
            *(!strcmp(a, "--load") ? &f->load : &f->save) = v;
            i++;
        } else if (!strcmp(a, "--ckpt-step") || !strcmp(a, "--max-shard-size")) {
            DG_TRY(parse_count(a, v, !strcmp(a, "--ckpt-step") ? &f->ckpt_step : &f->max_shard, err));
            i++;
        } else if (!strcmp(a, "--add-to-existing")) {
            f->add_to_existing = 1;
        } else if (!strcmp(a, "--hf-dtype")) {
            if (!v || (strcmp(v, "fp32") && strcmp(v, "bf16")))
                return dg_err_set(err, DG_EINPUT, "--hf-dtype: expected fp32 or bf16, got '%s'", v ? v : "");
            f->dtype = strcmp(v, "fp32") ? DG_BF16 : DG_F32;
            i++;
        } else
            return dg_err_set(err, DG_EINPUT, "convert: unknown flag '%s' (run `dagatron convert --help`)", a);
    }
    int to = f->to_dir != NULL, from = f->from_dir != NULL;
    if (to == from) return dg_err_set(err, DG_EINPUT, "convert: give exactly one of --to hf DIR or --from hf DIR");
    if (to && (!f->load || f->save))
        return dg_err_set(err, DG_EINPUT, "convert: --to hf DIR needs --load CKPT (and no --save)");
    if (from && (!f->save || f->load))
        return dg_err_set(err, DG_EINPUT, "convert: --from hf DIR needs --save CKPT (and no --load)");
    if (to && f->add_to_existing)
        return dg_err_set(err, DG_EINPUT, "convert: --add-to-existing applies to --from hf DIR --save CKPT only");
    return DG_OK;
}

int dg_cmd_convert(int argc, char **argv) {
    convert_flags f = {.ckpt_step = -1, .dtype = DG_F32};
    dg_err err = {{0}};
    int st = parse(argc, argv, &f, &err);
    if (st != DG_OK && !strcmp(err.msg, "help")) {
        usage(stdout);
        return 0;
    }
    if (st == DG_OK && f.to_dir) {
        dg_hf_export_opts o = {f.ckpt_step >= 0 ? f.ckpt_step : DG_CKPT_LATEST, f.max_shard, f.dtype};
        dg_hf_export_info info;
        st = dg_hf_export(f.load, &o, f.to_dir, &info, &err);
        if (st == DG_OK)
            fprintf(stderr, "dagatron: convert: wrote %s from %s; tokenizer %s: %s\n", f.to_dir, f.load,
                    info.tokenizer_type, info.tokenizer_files[0] ? info.tokenizer_files : "no files (it needs none)");
    } else if (st == DG_OK) {
        dg_hf_import_opts o = {f.add_to_existing};
        st = dg_hf_import(f.from_dir, f.save, &o, &err);
        if (st == DG_OK) fprintf(stderr, "dagatron: convert: wrote %s (iteration 0) from %s\n", f.save, f.from_dir);
    }
    if (st != DG_OK) dg_err_print(&err);
    return st;
}
