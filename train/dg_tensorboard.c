/* dg_tensorboard.c — see dg_tensorboard.h. */
#include "dg_tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dg_ckpt_fs.h"

struct dg_tb {
    FILE *f;
    char path[4096];
};

/* ---- CRC32C ------------------------------------------------------------------
 * Reflected polynomial 0x82F63B78, bit by bit: records are a few dozen bytes,
 * so a table would buy nothing. */
uint32_t dg_crc32c(const void *data, size_t n) {
    const uint8_t *p = data;
    uint32_t r = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        r ^= p[i];
        for (int k = 0; k < 8; k++) r = (r >> 1) ^ (0x82F63B78u & (0u - (r & 1u)));
    }
    return ~r;
}

uint32_t dg_tb_masked_crc(const void *data, size_t n) {
    uint32_t c = dg_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- protobuf, the few wire forms an Event needs ------------------------------ */

typedef struct pb {
    uint8_t b[1024];
    size_t n;
} pb;

static void pb_varint(pb *p, uint64_t v) {
    while (v >= 0x80 && p->n < sizeof p->b) {
        p->b[p->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    if (p->n < sizeof p->b) p->b[p->n++] = (uint8_t)v;
}

static void pb_key(pb *p, int field, int wire) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_fixed(pb *p, const void *le, size_t k) { /* x86/ARM little-endian host */
    if (p->n + k > sizeof p->b) return;
    memcpy(p->b + p->n, le, k);
    p->n += k;
}

static void pb_bytes(pb *p, int field, const void *s, size_t k) {
    pb_key(p, field, 2);
    pb_varint(p, k);
    pb_fixed(p, s, k);
}

/* Event { wall_time = 1; step = 2; file_version = 3 | summary = 5 }. */
static void pb_event_head(pb *p, int64_t step) {
    double wall = (double)time(NULL);
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0) wall = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    pb_key(p, 1, 1);
    pb_fixed(p, &wall, 8);
    pb_key(p, 2, 0);
    pb_varint(p, (uint64_t)step);
}

/* ---- records ----------------------------------------------------------------- */

static int write_record(dg_tb *tb, const pb *p, dg_err *err) {
    if (p->n >= sizeof p->b) return dg_err_set(err, DG_EINTERNAL, "%s: event record too long", tb->path);
    uint64_t len = p->n;
    uint32_t lcrc = dg_tb_masked_crc(&len, 8), dcrc = dg_tb_masked_crc(p->b, p->n);
    int ok = fwrite(&len, 8, 1, tb->f) == 1 && fwrite(&lcrc, 4, 1, tb->f) == 1 &&
             fwrite(p->b, 1, p->n, tb->f) == p->n && fwrite(&dcrc, 4, 1, tb->f) == 1;
    if (!ok) return dg_err_set(err, DG_EINPUT, "%s: cannot write: %s", tb->path, strerror(errno));
    return DG_OK;
}

int dg_tb_open(dg_tb **out, const char *dir, dg_err *err) {
    *out = NULL;
    DG_TRY(dg_ckpt_mkdirs(dir, err));
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    dg_tb *tb = dg_calloc(1, sizeof *tb);
    int n = snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s.%ld.0", dir, (long long)time(NULL),
                     host, (long)getpid());
    if (n < 0 || n >= (int)sizeof tb->path) {
        dg_free(tb);
        return dg_err_set(err, DG_EINPUT, "--tensorboard-dir: path too long: '%s'", dir);
    }
    tb->f = fopen(tb->path, "wbx");
    if (!tb->f) {
        int st = dg_err_set(err, DG_EINPUT, "%s: cannot create: %s", tb->path, strerror(errno));
        dg_free(tb);
        return st;
    }
    pb p = {.n = 0};
    pb_event_head(&p, 0);
    pb_bytes(&p, 3, "brain.Event:2", 13);
    int st = write_record(tb, &p, err);
    if (st == DG_OK) st = dg_tb_flush(tb, err);
    if (st != DG_OK) {
        dg_tb_close(tb);
        return st;
    }
    *out = tb;
    return DG_OK;
}

int dg_tb_scalar(dg_tb *tb, const char *tag, int64_t step, double value, dg_err *err) {
    size_t tl = strlen(tag);
    if (tl > 256) return dg_err_set(err, DG_EINTERNAL, "tensorboard tag too long: '%.40s...'", tag);
    pb v = {.n = 0}; /* Summary.Value { tag = 1; simple_value = 2 } */
    pb_bytes(&v, 1, tag, tl);
    float f = (float)value;
    pb_key(&v, 2, 5);
    pb_fixed(&v, &f, 4);
    pb s = {.n = 0}; /* Summary { repeated Value value = 1 } */
    pb_bytes(&s, 1, v.b, v.n);
    pb e = {.n = 0};
    pb_event_head(&e, step);
    pb_bytes(&e, 5, s.b, s.n);
    return write_record(tb, &e, err);
}

int dg_tb_flush(dg_tb *tb, dg_err *err) {
    if (fflush(tb->f) != 0) return dg_err_set(err, DG_EINPUT, "%s: cannot write: %s", tb->path, strerror(errno));
    return DG_OK;
}

void dg_tb_close(dg_tb *tb) {
    if (!tb) return;
    if (tb->f) fclose(tb->f);
    dg_free(tb);
}

const char *dg_tb_path(const dg_tb *tb) { return tb->path; }

/* Megatron writes each training scalar twice: by iteration, and as
 * "<tag> vs samples" by consumed samples. */
static int scalar2(dg_tb *tb, const char *tag, const dg_tb_iteration *it, double v, dg_err *err) {
    char vs[300];
    snprintf(vs, sizeof vs, "%s vs samples", tag);
    DG_TRY(dg_tb_scalar(tb, tag, it->iteration, v, err));
    return dg_tb_scalar(tb, vs, it->consumed_samples, v, err);
}

int dg_tb_log_iteration(dg_tb *tb, const dg_tb_iteration *it, dg_err *err) {
    DG_TRY(scalar2(tb, "learning-rate", it, it->learning_rate, err));
    DG_TRY(scalar2(tb, "batch-size", it, (double)it->batch_size, err));
    DG_TRY(scalar2(tb, "lm loss", it, it->lm_loss, err));
    DG_TRY(scalar2(tb, "loss-scale", it, it->loss_scale, err));
    DG_TRY(scalar2(tb, "grad-norm", it, it->grad_norm, err));
    if (it->load_balancing_loss >= 0)
        DG_TRY(dg_tb_scalar(tb, "load_balancing_loss", it->iteration, it->load_balancing_loss, err));
    if (it->z_loss >= 0) DG_TRY(dg_tb_scalar(tb, "z_loss", it->iteration, it->z_loss, err));
    return dg_tb_flush(tb, err);
}
