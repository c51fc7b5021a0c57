/* dg_trace_svg.c — a merged trace drawn as a pipeline schedule (see
 * dg_trace_svg.h). */
#include "dg_trace_svg.h"

#include <stdlib.h>
#include <string.h>

#include "dg_file_out.h"
#include "dg_trace_read.h"

typedef struct block {
    double t0, t1; /* microseconds */
    int mb;
    char phase; /* 'F', 'B', 'W', 'R' (recompute); 'w' while loading: a weight-gradient task */
    int vstage; /* the task's (virtual) pipeline stage; its chunk is vstage / n_stages */
} block;

typedef struct row {
    int pid, pp;
    char name[96];
    block *b;
    int n, cap;
    double busy;     /* union of the compute tasks' intervals */
    double phase[4]; /* task time by phase: F, B, W, R (recompute) */
    double *comm_end; /* the comm stream's task ends */
    int n_comm, cap_comm;
    double dispatch, handoff; /* idle: gaps under DISPATCH_GAP_US; after the last comm end in a longer gap */
} row;

/* A gap between two compute tasks shorter than this is the executor's own
 * dispatch (picking the next task, waking its thread), not a wait. */
#define DISPATCH_GAP_US 100.0

struct dg_sched_picture {
    row *rows;
    int n_rows, n_mb, n_stages;
    double t0, t1; /* the window */
    int max_vstage; /* > n_stages - 1: interleaved 1F1B, max_vstage / n_stages + 1 chunks a rank */
};

/* Model chunks a rank (virtual stages; 1 without interleaving), and block b's. */
static int n_chunks(const dg_sched_picture *p) { return p->max_vstage / DG_MAX(p->n_stages, 1) + 1; }
static int chunk_of(const dg_sched_picture *p, const block *b) { return b->vstage / DG_MAX(p->n_stages, 1); }

static row *row_of(dg_sched_picture *p, int pid) {
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].pid == pid) return &p->rows[i];
    p->rows = dg_realloc(p->rows, sizeof *p->rows * (size_t)(p->n_rows + 1));
    row *r = &p->rows[p->n_rows++];
    memset(r, 0, sizeof *r);
    r->pid = pid;
    snprintf(r->name, sizeof r->name, "rank %d", pid);
    return r;
}

static int by_pid(const void *a, const void *b) { return ((const row *)a)->pid - ((const row *)b)->pid; }
static int by_t0(const void *a, const void *b) {
    double d = ((const block *)a)->t0 - ((const block *)b)->t0;
    return d < 0 ? -1 : d > 0;
}

/* A compute task of one micro-batch: appended to its row as a block. */
static void take_task(dg_sched_picture *p, const dg_trace_event *e) {
    int mb = e->microbatch;
    if (e->tid == 1) { /* comm: when its operations ended */
        row *r = row_of(p, e->pid);
        if (r->n_comm == r->cap_comm)
            r->comm_end = dg_realloc(r->comm_end, sizeof(double) * (size_t)(r->cap_comm = 2 * r->cap_comm + 16));
        r->comm_end[r->n_comm++] = e->ts + e->dur;
        return;
    }
    if (e->tid != 0 || mb < 0) return;
    char c = !strcmp(e->phase, "forward") ? 'F' : !strcmp(e->phase, "backward") ? 'B'
             : !strcmp(e->phase, "recompute")                                  ? 'R'
                                                                               : 0;
    if (!c) return;
    if (c == 'B' && e->wgrad == 1) c = 'w';
    row *r = row_of(p, e->pid);
    if (r->n == r->cap) r->b = dg_realloc(r->b, sizeof *r->b * (size_t)(r->cap = 2 * r->cap + 64));
    int vs = e->stage;
    r->b[r->n++] = (block){e->ts, e->ts + e->dur, mb, c, vs};
    p->n_mb = DG_MAX(p->n_mb, mb + 1);
    p->max_vstage = DG_MAX(p->max_vstage, vs);
}

/* A micro-batch's W: its weight-gradient tasks that ran after its last
 * input-gradient task (zero-bubble-h1 defers them there); the earlier ones
 * stay in B. */
static void name_w(const dg_sched_picture *p, row *r) {
    double *b_end = dg_malloc(sizeof(double) * (size_t)p->n_mb);
    for (int mb = 0; mb < p->n_mb; mb++) b_end[mb] = -1e300;
    for (int i = 0; i < r->n; i++)
        if (r->b[i].phase == 'B') b_end[r->b[i].mb] = DG_MAX(b_end[r->b[i].mb], r->b[i].t1);
    for (int i = 0; i < r->n; i++)
        if (r->b[i].phase == 'w') r->b[i].phase = r->b[i].t0 >= b_end[r->b[i].mb] ? 'W' : 'B';
    dg_free(b_end);
}

static int phase_index(char c) { return c == 'F' ? 0 : c == 'B' ? 1 : c == 'W' ? 2 : 3; }

/* The idle time from `from` to `to` between two compute tasks: dispatch
 * when short; else the part after the last comm operation that ended in
 * it (the data had come, the compute stream had not resumed). */
static void take_gap(row *r, double from, double to) {
    if (to <= from) return;
    if (to - from < DISPATCH_GAP_US) {
        r->dispatch += to - from;
        return;
    }
    double last = -1;
    for (int k = 0; k < r->n_comm; k++)
        if (r->comm_end[k] >= from && r->comm_end[k] <= to) last = DG_MAX(last, r->comm_end[k]);
    if (last >= 0) r->handoff += to - last;
}

/* Sort a row's tasks, total their union and merge runs of one micro-batch
 * and phase into blocks. */
static void close_row(dg_sched_picture *p, row *r) {
    qsort(r->b, (size_t)r->n, sizeof *r->b, by_t0);
    name_w(p, r);
    double end = -1e300;
    int k = 0;
    for (int i = 0; i < r->n; i++) {
        block b = r->b[i];
        r->phase[phase_index(b.phase)] += b.t1 - b.t0;
        if (i) take_gap(r, end, b.t0);
        r->busy += DG_MAX(0.0, b.t1 - DG_MAX(b.t0, end));
        end = DG_MAX(end, b.t1);
        p->t0 = DG_MIN(p->t0, b.t0);
        p->t1 = DG_MAX(p->t1, b.t1);
        if (k && r->b[k - 1].mb == b.mb && r->b[k - 1].phase == b.phase && r->b[k - 1].vstage == b.vstage)
            r->b[k - 1].t1 = DG_MAX(r->b[k - 1].t1, b.t1);
        else
            r->b[k++] = b;
    }
    r->n = k;
}

int dg_sched_picture_load(const char *path, dg_sched_picture **out, dg_err *err) {
    dg_trace_file tf;
    DG_TRY(dg_trace_read(path, &tf, err));
    dg_sched_picture *p = dg_calloc(1, sizeof *p);
    p->t0 = 1e300;
    p->t1 = -1e300;
    /* Rows in the order the processes are named, then their tasks. */
    for (int i = 0; i < tf.n_label; i++) {
        if (tf.label[i].tid != -1) continue;
        row *r = row_of(p, tf.label[i].pid);
        snprintf(r->name, sizeof r->name, "%s", tf.label[i].name);
        const char *s = strstr(r->name, "(pp ");
        r->pp = s ? atoi(s + 4) : r->pid;
    }
    for (int i = 0; i < tf.n_ev; i++) take_task(p, &tf.ev[i]);
    dg_trace_file_free(&tf);
    qsort(p->rows, (size_t)p->n_rows, sizeof *p->rows, by_pid);
    int stages_seen[4096] = {0};
    for (int i = 0; i < p->n_rows; i++) {
        close_row(p, &p->rows[i]);
        int s = p->rows[i].pp;
        if (s >= 0 && s < 4096 && !stages_seen[s]++) p->n_stages++;
    }
    if (p->n_mb == 0) {
        dg_sched_picture_free(p);
        return dg_err_set(err, DG_EINPUT, "--trace %s: no micro-batch tasks on a compute stream", path);
    }
    *out = p;
    return DG_OK;
}

void dg_sched_picture_free(dg_sched_picture *p) {
    if (!p) return;
    for (int i = 0; i < p->n_rows; i++) dg_free(p->rows[i].b), dg_free(p->rows[i].comm_end);
    dg_free(p->rows);
    dg_free(p);
}

enum { LABEL_W = 190, PLOT_W = 1000, ROW_H = 36, TOP = 40, PAD = 4 };

/* Micro-batch mb's hue; forward light, backward dark, W darkest, recompute
 * grey-ish; a later model chunk (interleaved 1F1B) a shade darker. */
static void put_fill(FILE *f, const block *b, int n_mb, int chunk) {
    int hue = (int)(360.0 * b->mb / (n_mb > 0 ? n_mb : 1));
    int light = (b->phase == 'F' ? 72 : b->phase == 'B' ? 42 : b->phase == 'W' ? 25 : 60) - 8 * (chunk % 2);
    int sat = b->phase == 'R' ? 25 : 70;
    fprintf(f, "hsl(%d,%d%%,%d%%)", hue, sat, light);
}

static void put_row(FILE *f, const dg_sched_picture *p, int i, double scale) {
    const row *r = &p->rows[i];
    int y = TOP + i * ROW_H;
    fprintf(f, "<text x=\"4\" y=\"%d\" font-size=\"12\">%s</text>\n", y + ROW_H / 2 + 4, r->name);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LABEL_W, y + PAD / 2,
            PLOT_W, ROW_H - PAD);
    for (int k = 0; k < r->n; k++) {
        const block *b = &r->b[k];
        double x = LABEL_W + (b->t0 - p->t0) * scale, w = DG_MAX((b->t1 - b->t0) * scale, 0.5);
        const char *phase = b->phase == 'F'   ? "forward"
                            : b->phase == 'B' ? "backward"
                            : b->phase == 'W' ? "weight-grad"
                                              : "recompute";
        /* interleaved: F3.1 is micro-batch 3's forward of the rank's chunk 1 */
        int ch = chunk_of(p, b);
        char label[32];
        if (n_chunks(p) > 1) snprintf(label, sizeof label, "%c%d.%d", b->phase, b->mb, ch);
        else snprintf(label, sizeof label, "%c%d", b->phase, b->mb);
        fprintf(f,
                "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" stroke=\"#333\" stroke-width=\"0.5\" "
                "data-rank=\"%d\" data-mb=\"%d\" data-phase=\"%s\" data-chunk=\"%d\" fill=\"",
                x, y + PAD / 2, w, ROW_H - PAD, r->pid, b->mb, phase, ch);
        put_fill(f, b, p->n_mb, ch);
        fprintf(f, "\"><title>%s: %s, %.1f us</title></rect>\n", r->name, label, b->t1 - b->t0);
        if (w >= 18)
            fprintf(f, "<text x=\"%.2f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", x + w / 2,
                    y + ROW_H / 2 + 4, label);
    }
}

int dg_sched_picture_svg(const dg_sched_picture *p, const char *path, dg_err *err) {
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, "-o", err));
    FILE *f = o.f;
    double span = p->t1 > p->t0 ? p->t1 - p->t0 : 1.0, scale = PLOT_W / span;
    int h = TOP + p->n_rows * ROW_H + 30;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\">\n",
            LABEL_W + PLOT_W + 10, h);
    fprintf(f, "<text x=\"4\" y=\"20\" font-size=\"14\">pipeline schedule: %d ranks, %d stages, %d micro-batches; "
               "F forward (light), B backward (dark), W weight gradients (darkest), colour = micro-batch</text>\n",
            p->n_rows, p->n_stages, p->n_mb);
    for (int i = 0; i < p->n_rows; i++) put_row(f, p, i, scale);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0 us</text>\n", LABEL_W, h - 10);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.0f us</text>\n", LABEL_W + PLOT_W,
            h - 10, span);
    fprintf(f, "</svg>\n");
    return dg_file_out_commit(&o, err);
}

void dg_sched_picture_bubble(const dg_sched_picture *p, FILE *f) {
    double span = p->t1 - p->t0, sum = 0;
    for (int i = 0; i < p->n_rows; i++) {
        double b = span > 0 ? 1.0 - p->rows[i].busy / span : 0;
        sum += b;
        fprintf(f, "  %s: bubble %.3f (compute busy %.0f of %.0f us; idle: %.0f us waiting on a peer, %.0f us after the "
                   "data came, %.0f us dispatch gaps)\n",
                p->rows[i].name, b, p->rows[i].busy, span, DG_MAX(0.0, span - p->rows[i].busy - p->rows[i].dispatch -
                                                                   p->rows[i].handoff),
                p->rows[i].handoff, p->rows[i].dispatch);
    }
    int ps = p->n_stages, m = p->n_mb, v = n_chunks(p);
    if (v > 1) { /* Narayanan et al. 2021: the bubble is (1/v)(p-1)/m of the ideal time */
        fprintf(f, "bubble fraction: measured %.3f (mean over %d ranks); theory interleaved (p-1)/(v m+p-1) = %d/%d "
                   "= %.3f (p %d, v %d, m %d; 1f1b's (p-1)/(m+p-1) = %.3f)\n",
                sum / p->n_rows, p->n_rows, ps - 1, v * m + ps - 1, (double)(ps - 1) / (v * m + ps - 1), ps, v, m,
                (double)(ps - 1) / (m + ps - 1));
        return;
    }
    int n_w = 0; /* W blocks: a zero-bubble schedule ran */
    for (int i = 0; i < p->n_rows; i++)
        for (int k = 0; k < p->rows[i].n; k++) n_w += p->rows[i].b[k].phase == 'W';
    fprintf(f, "bubble fraction: measured %.3f (mean over %d ranks); theory (p-1)/(m+p-1) = %d/%d = %.3f "
               "(p %d, m %d)",
            sum / p->n_rows, p->n_rows, ps - 1, m + ps - 1, (double)(ps - 1) / (m + ps - 1), ps, m);
    if (n_w >= p->n_rows * m)
        fprintf(f, "; zero-bubble-h1 with F = B = W: (p-1)/(3m+p-1) = %d/%d = %.3f", ps - 1, 3 * m + ps - 1,
                (double)(ps - 1) / (3 * m + ps - 1));
    fprintf(f, "\n");
}

int dg_sched_picture_rows(const dg_sched_picture *p) { return p->n_rows; }
int dg_sched_picture_microbatches(const dg_sched_picture *p) { return p->n_mb; }
int dg_sched_picture_stages(const dg_sched_picture *p) { return p->n_stages; }

void dg_sched_picture_row(const dg_sched_picture *p, int i, dg_sched_row_stats *s) {
    const row *r = &p->rows[i];
    double span = p->t1 - p->t0;
    *s = (dg_sched_row_stats){.name = r->name, .span_us = span, .busy_us = r->busy,
                              .bubble = span > 0 ? 1.0 - r->busy / span : 0,
                              .f_us = r->phase[0], .b_us = r->phase[1], .w_us = r->phase[2], .r_us = r->phase[3],
                              .dispatch_us = r->dispatch, .handoff_us = r->handoff,
                              .wait_us = DG_MAX(0.0, span - r->busy - r->dispatch - r->handoff)};
}
