/* dg_view_page.c — the template filled in (see dg_view_page.h). */
#include "dg_view_page.h"

#include <stdlib.h>
#include <string.h>

#include "dg_file_out.h"

/* cli/view/, compiled in by cmake/DgEmbed.cmake (NUL-terminated). */
extern const unsigned char dg_asset_dg_view_html[], dg_asset_dg_view_css[], dg_asset_dg_view_js[];

/* JSON text with every '<' escaped, so that it can sit in a <script>. */
static void put_json_text(FILE *f, const char *s) {
    for (; *s; s++)
        if (*s == '<') fputs("\\u003c", f);
        else fputc(*s, f);
}

static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<') fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static int named(const dg_trace_file *t, int pid) {
    for (int i = 0; i < t->n_label; i++)
        if (t->label[i].tid == -1 && t->label[i].pid == pid) return 1;
    return 0;
}

static int by_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Processes and streams: the named ones, then any only the events mention. */
static void put_procs_streams(FILE *f, const dg_trace_file *t) {
    char buf[96];
    int n = 0;
    fputs("\"procs\": [", f);
    for (int i = 0; i < t->n_label; i++)
        if (t->label[i].tid == -1) {
            fprintf(f, "%s{\"pid\": %d, \"name\": ", n++ ? ", " : "", t->label[i].pid);
            put_str(f, t->label[i].name);
            fputc('}', f);
        }
    int *pid = dg_malloc(sizeof(int) * (size_t)DG_MAX(t->n_ev, 1));
    for (int i = 0; i < t->n_ev; i++) pid[i] = t->ev[i].pid;
    qsort(pid, (size_t)t->n_ev, sizeof *pid, by_int);
    for (int i = 0; i < t->n_ev; i++)
        if ((i == 0 || pid[i] != pid[i - 1]) && !named(t, pid[i])) {
            fprintf(f, "%s{\"pid\": %d, \"name\": ", n++ ? ", " : "", pid[i]);
            put_str(f, dg_trace_proc_name(t, pid[i], buf, sizeof buf));
            fputc('}', f);
        }
    dg_free(pid);
    fputs("],\n\"streams\": [", f);
    n = 0;
    for (int i = 0; i < t->n_label; i++)
        if (t->label[i].tid >= 0) {
            fprintf(f, "%s{\"pid\": %d, \"tid\": %d, \"name\": ", n++ ? ", " : "", t->label[i].pid, t->label[i].tid);
            put_str(f, t->label[i].name);
            fputc('}', f);
        }
    fputs("],\n", f);
}

static void put_events(FILE *f, const dg_view_input *in) {
    const dg_trace_file *t = in->trace;
    fputs("\"fields\": [\"pid\", \"tid\", \"ts\", \"dur\", \"node\", \"layer\", \"mb\", \"step\", \"name\", \"op\", "
          "\"phase\", \"wgrad\", \"crit\", \"after\"],\n\"events\": [",
          f);
    for (int i = 0; i < t->n_ev; i++) {
        const dg_trace_event *e = &t->ev[i];
        fprintf(f, "%s[%d, %d, %.3f, %.3f, %d, %d, %d, %d, ", i ? ",\n" : "", e->pid, e->tid, e->ts, e->dur, e->node,
                e->layer, e->microbatch, e->step);
        put_str(f, e->name);
        fputs(", ", f);
        put_str(f, e->op);
        fputs(", ", f);
        put_str(f, e->phase);
        fprintf(f, ", %d, %d, [", e->wgrad, in->crit[i]);
        for (int k = 0; k < e->n_after; k++) fprintf(f, "%s%d", k ? ", " : "", t->after[e->after_at + k]);
        fputs("]]", f);
    }
    fputs("],\n", f);
}

static void put_data(FILE *f, const dg_view_input *in) {
    fputs("{\"trace\": ", f);
    put_str(f, in->trace_path);
    fputs(", \"graph_file\": ", f);
    if (in->graph_path) put_str(f, in->graph_path);
    else fputs("null", f);
    fputs(",\n", f);
    put_procs_streams(f, in->trace);
    put_events(f, in);
    fprintf(f, "\"critical\": {\"n\": %d, \"busy_us\": %.3f, \"span_us\": %.3f, \"deps\": ", in->path.n,
            in->path.busy, in->path.span);
    put_str(f, in->path_deps);
    fputs("},\n\"graph\": ", f);
    if (in->graph_text) put_json_text(f, in->graph_text);
    else fputs("null", f);
    fputs("}", f);
}

/* Copy the template, replacing each marker by what it stands for. */
static void fill(FILE *f, const dg_view_input *in) {
    static const char *markers[] = {"/*@DG_VIEW_CSS@*/", "@DG_VIEW_DATA@", "/*@DG_VIEW_JS@*/"};
    const char *s = (const char *)dg_asset_dg_view_html;
    for (;;) {
        const char *next = NULL;
        int which = -1;
        for (int m = 0; m < 3; m++) {
            const char *p = strstr(s, markers[m]);
            if (p && (!next || p < next)) next = p, which = m;
        }
        if (!next) break;
        fwrite(s, 1, (size_t)(next - s), f);
        if (which == 0) fputs((const char *)dg_asset_dg_view_css, f);
        else if (which == 1) put_data(f, in);
        else fputs((const char *)dg_asset_dg_view_js, f);
        s = next + strlen(markers[which]);
    }
    fputs(s, f);
}

int dg_view_page_write(const dg_view_input *in, const char *path, dg_err *err) {
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, "-o", err));
    fill(o.f, in);
    return dg_file_out_commit(&o, err);
}
