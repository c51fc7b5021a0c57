/* dg_preprocess.c — parallel tokenization into .bin/.idx (see dg_preprocess.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_preprocess.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dg_data_map.h"
#include "dg_indexed.h"
#include "dg_memlimit.h"

/* Records per batch handed to the workers, and a byte budget per batch. */
#define BATCH_RECORDS 2048
#define BATCH_BYTES (2u << 20)

void dg_preprocess_output_name(char *out, size_t cap, const char *prefix, const char *key) {
    snprintf(out, cap, "%s_%s_document", prefix, key);
}

double dg_preprocess_worker_bytes(void) {
    /* Two sets of jobs: record arrays, each job's text (its share of a batch's
     * bytes) and its tokens (at most one int32 per byte); and a thread stack. */
    double stack = 8 << 20;
    return 2.0 * ((double)BATCH_RECORDS * sizeof(dg_record) + (double)BATCH_BYTES * (1 + sizeof(int32_t))) + stack;
}

/* One worker's share of a batch: records [begin, end). Its output, per
 * record and key: nseq[r * n_keys + k] sequences whose lengths follow in
 * seqlen, whose tokens follow in toks. */
typedef struct job {
    const dg_preprocess_opts *o;
    const char *path;
    dg_input_format fmt;
    const dg_record *recs;
    int64_t begin, end;
    dg_tok_state *state;
    dg_i32buf toks, seqlen, nseq;
    dg_bytebuf text;
    dg_i32buf seg;
    int st;
    dg_err err;
} job;

static void *work(void *arg) {
    job *j = arg;
    const dg_preprocess_opts *o = j->o;
    int nk = o->n_keys;
    j->toks.n = j->seqlen.n = j->nseq.n = 0;
    j->st = DG_OK;
    for (int64_t r = j->begin; r < j->end && j->st == DG_OK; r++) {
        for (int k = 0; k < nk; k++) {
            j->text.n = 0;
            j->seg.n = 0;
            if (j->fmt == DG_INPUT_JSONL) {
                j->st = dg_corpus_json_text(&j->recs[r], j->path, o->json_keys[k], &j->text, &j->seg, &j->err);
                if (j->st != DG_OK) break;
            } else {
                dg_bytebuf_append(&j->text, j->recs[r].p, (int64_t)j->recs[r].n);
                dg_i32buf_push(&j->seg, (int32_t)j->recs[r].n);
            }
            int32_t nseq = 0;
            int64_t off = 0;
            for (int64_t s = 0; s < j->seg.n; s++) {
                int64_t before = j->toks.n;
                dg_tokenizer_encode(o->tok, j->state, j->text.v + off, (size_t)j->seg.v[s], &j->toks);
                off += j->seg.v[s];
                if (j->toks.n > before) {
                    dg_i32buf_push(&j->seqlen, (int32_t)(j->toks.n - before));
                    nseq++;
                }
            }
            if (nseq > 0 && o->append_eod && o->tok->eod >= 0) {
                dg_i32buf_push(&j->toks, o->tok->eod);
                j->seqlen.v[j->seqlen.n - 1]++;
            }
            dg_i32buf_push(&j->nseq, nseq);
        }
    }
    return NULL;
}

static void job_free(job *j) {
    dg_i32buf_free(&j->toks);
    dg_i32buf_free(&j->seqlen);
    dg_i32buf_free(&j->nseq);
    dg_bytebuf_free(&j->text);
    dg_i32buf_free(&j->seg);
}

/* Append a finished batch (the outputs of jobs[0, nw), in order) to the writers. */
static int write_batch(const dg_preprocess_opts *o, job *jobs, int nw, dg_indexed_writer *w,
                       dg_preprocess_stats *stats, dg_err *err) {
    int nk = o->n_keys;
    for (int t = 0; t < nw; t++) {
        job *j = &jobs[t];
        if (j->st != DG_OK) {
            *err = j->err;
            return j->st;
        }
        int64_t ti = 0, si = 0;
        for (int64_t q = 0; q < j->nseq.n; q++) {
            int k = (int)(q % nk);
            for (int32_t s = 0; s < j->nseq.v[q]; s++) {
                int32_t len = j->seqlen.v[si++];
                DG_TRY(dg_indexed_writer_add(&w[k], j->toks.v + ti, len, err));
                ti += len;
                stats->sequences++;
                stats->tokens += len;
            }
            dg_indexed_writer_end_document(&w[k]);
            if (k == nk - 1) {
                stats->documents++;
                if (o->log_interval > 0 && stats->documents % o->log_interval == 0)
                    fprintf(stderr, "dagatron: processed %lld documents\n", (long long)stats->documents);
            }
        }
    }
    return DG_OK;
}

/* Tokenize the records of one file and append them to the writers. Two
 * sets of jobs (and record batches) alternate: while the workers tokenize
 * batch k+1, this thread writes batch k. */
static int run_file(const dg_preprocess_opts *o, const char *path, dg_input_format fmt, dg_record_cursor *cursor,
                    job *jobs[2], dg_indexed_writer *w, dg_preprocess_stats *stats, dg_err *err) {
    int nw = o->workers;
    int64_t cap = (int64_t)BATCH_RECORDS * nw;
    dg_record *recs[2] = {dg_malloc(sizeof(dg_record) * (size_t)cap), dg_malloc(sizeof(dg_record) * (size_t)cap)};
    pthread_t *th = dg_malloc(sizeof(pthread_t) * (size_t)nw);
    int st = DG_OK, cur = 0, pending = 0;
    while (st == DG_OK) {
        int64_t count = dg_record_cursor_next(cursor, recs[cur], cap, (size_t)BATCH_BYTES * (size_t)nw);
        if (count == 0) break;
        size_t bytes = 0;
        for (int64_t r = 0; r < count; r++) bytes += recs[cur][r].n;
        /* Split the batch over workers by bytes so they finish together. */
        size_t per = bytes / (size_t)nw + 1, acc = 0;
        int64_t r = 0;
        for (int t = 0; t < nw; t++) {
            job *j = &jobs[cur][t];
            j->path = path;
            j->fmt = fmt;
            j->recs = recs[cur];
            j->begin = r;
            size_t goal = per * (size_t)(t + 1);
            while (r < count && (acc < goal || t == nw - 1)) acc += recs[cur][r++].n;
            j->end = r;
        }
        for (int t = 0; t < nw; t++) DG_CHECK0(pthread_create(&th[t], NULL, work, &jobs[cur][t]));
        if (pending) st = write_batch(o, jobs[cur ^ 1], nw, w, stats, err);
        for (int t = 0; t < nw; t++) DG_CHECK0(pthread_join(th[t], NULL));
        pending = 1;
        cur ^= 1;
    }
    if (pending && st == DG_OK) st = write_batch(o, jobs[cur ^ 1], nw, w, stats, err);
    dg_free(th);
    dg_free(recs[0]);
    dg_free(recs[1]);
    return st;
}

int dg_preprocess_run(const dg_preprocess_opts *o_in, dg_preprocess_stats *stats, dg_err *err) {
    dg_preprocess_opts o = *o_in;
    static const char *const default_keys[] = {"text"};
    memset(stats, 0, sizeof *stats);
    double t0 = dg_now();
    if (!o.json_keys || o.n_keys <= 0) {
        o.json_keys = default_keys;
        o.n_keys = 1;
    }
    if (o.n_keys > DG_PREPROCESS_MAX_KEYS)
        return dg_err_set(err, DG_EINPUT, "--json-keys: at most %d keys", DG_PREPROCESS_MAX_KEYS);
    if (o.workers < 1) return dg_err_set(err, DG_EINPUT, "--workers: expected >= 1, got %d", o.workers);
    char what[64];
    snprintf(what, sizeof what, "--workers %d", o.workers);
    DG_TRY(dg_mem_check(dg_preprocess_worker_bytes() * o.workers, what, err));
    if (!o.output_prefix) return dg_err_set(err, DG_EINPUT, "--output-prefix is required");
    if (o.n_inputs <= 0) return dg_err_set(err, DG_EINPUT, "--input: no input files");
    int dtype = dg_idx_dtype_for_vocab(o.tok->vocab_size);
    /* Text inputs produce one key: the first. */
    int text_only = 1;
    for (int i = 0; i < o.n_inputs; i++) {
        dg_input_format f = o.format ? o.format : dg_corpus_guess_format(o.inputs[i]);
        if (f == DG_INPUT_JSONL) text_only = 0;
    }
    if (text_only) o.n_keys = 1;
    dg_indexed_writer w[DG_PREPROCESS_MAX_KEYS];
    int st = DG_OK, opened = 0;
    for (int k = 0; k < o.n_keys && st == DG_OK; k++) {
        char name[4096];
        dg_preprocess_output_name(name, sizeof name, o.output_prefix, o.json_keys[k]);
        st = dg_indexed_writer_open(&w[k], name, dtype, err);
        if (st == DG_OK) opened++;
    }
    /* Two sets of jobs (see run_file); worker t of either set uses states[t],
     * and the two sets never run at the same time. */
    job *jobs[2] = {dg_calloc((size_t)o.workers, sizeof(job)), dg_calloc((size_t)o.workers, sizeof(job))};
    dg_tok_state *states = dg_calloc((size_t)o.workers, sizeof(dg_tok_state));
    for (int t = 0; t < o.workers; t++) {
        dg_tok_state_init(&states[t]);
        for (int k = 0; k < 2; k++) {
            jobs[k][t].o = &o;
            jobs[k][t].state = &states[t];
        }
    }
    for (int i = 0; i < o.n_inputs && st == DG_OK; i++) {
        dg_input_format f = o.format ? o.format : dg_corpus_guess_format(o.inputs[i]);
        if (f == DG_INPUT_TEXT && !text_only) {
            st = dg_err_set(err, DG_EINPUT, "%s: text input mixed with JSONL inputs (give them separately)",
                            o.inputs[i]);
            break;
        }
        dg_map m;
        st = dg_map_file(&m, o.inputs[i], err);
        if (st != DG_OK) break;
        dg_record_cursor cursor;
        dg_record_cursor_init(&cursor, m.p, m.n, f, o.doc_separator);
        st = run_file(&o, o.inputs[i], f, &cursor, jobs, w, stats, err);
        stats->bytes_in += (int64_t)m.n;
        dg_unmap(&m);
    }
    for (int t = 0; t < o.workers; t++) {
        job_free(&jobs[0][t]);
        job_free(&jobs[1][t]);
        dg_tok_state_free(&states[t]);
    }
    dg_free(jobs[0]);
    dg_free(jobs[1]);
    dg_free(states);
    /* Every key's files complete before any replaces an old dataset: a
     * failure anywhere leaves all of them as they were. */
    for (int k = 0; k < opened && st == DG_OK; k++) st = dg_indexed_writer_close(&w[k], err);
    for (int k = 0; k < opened && st == DG_OK; k++) st = dg_indexed_writer_commit(&w[k], err);
    for (int k = 0; k < opened; k++) dg_indexed_writer_abort(&w[k]); /* a no-op on a committed writer */
    stats->seconds = dg_now() - t0;
    return st;
}
