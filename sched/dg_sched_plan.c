/* dg_sched_plan.c — from a graph to a plan: edges, priorities, order, memory
 * plan, memory edges, streams (the numbered passes of dg_sched.h). */
#include <math.h>
#include <string.h>

#include "dg_op.h"
#include "dg_prio.h"
#include "dg_sched.h"

/* Edges are (from, to) packed into one int64 so sorting dedups them. */
static int64_t edge(int from, int to) { return ((int64_t)from << 32) | (uint32_t)to; }
static int edge_from(int64_t e) { return (int)(e >> 32); }
static int edge_to(int64_t e) { return (int)(uint32_t)e; }

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct edge_list {
    int64_t *e;
    int n, cap;
} edge_list;

static void edges_push(edge_list *l, int from, int to) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->e = dg_realloc(l->e, sizeof(int64_t) * (size_t)l->cap);
    }
    l->e[l->n++] = edge(from, to);
}

/* Sort and drop duplicates. */
static void edges_unique(edge_list *l) {
    if (l->n == 0) return;
    qsort(l->e, (size_t)l->n, sizeof(int64_t), i64_cmp);
    int k = 1;
    for (int i = 1; i < l->n; i++)
        if (l->e[i] != l->e[k - 1]) l->e[k++] = l->e[i];
    l->n = k;
}

/* CSR successors from a sorted, unique edge list. */
static void edges_csr(const edge_list *l, int nn, int **off, int **succ) {
    *off = dg_calloc((size_t)nn + 1, sizeof(int));
    *succ = dg_malloc(sizeof(int) * (size_t)DG_MAX(l->n, 1));
    for (int i = 0; i < l->n; i++) (*off)[edge_from(l->e[i]) + 1]++;
    for (int v = 0; v < nn; v++) (*off)[v + 1] += (*off)[v];
    for (int i = 0; i < l->n; i++) (*succ)[i] = edge_to(l->e[i]); /* sorted by from */
}

/* 6. memory edges: see dg_sched.h. Visit the planned tensors by birth
 * (plan position of their producer) while tracking, for each byte range of
 * the arena, the tensor that occupied it last. A newborn B only needs edges
 * from the last occupants of its bytes: each of them died before B was born
 * (the validator guarantees it), and older occupants are ordered before the
 * last ones by the edges added when those were born, so one edge per
 * (occupant, B) keeps the whole history ordered. The arena has few distinct
 * boundaries, so the segment list stays short. */
typedef struct seg {
    int64_t lo, hi;
    int owner; /* tensor that occupied [lo, hi) last, -1 if none yet */
} seg;

typedef struct born {
    double first;
    int id;
} born;

static int born_cmp(const void *a, const void *b) {
    const born *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* 4. Discrete-event simulation: at most one task per lane (the compute
 * stream, each group kind's comm lane) at a time; an idle lane starts its most urgent ready task (by rank); time advances to
 * the earliest end. Durations are the cost model's times (sim_durations below),
 * so a producer ends strictly before its consumers start, and
 * sorting by start time gives a topological order. Ties in start time keep
 * dispatch order. */
typedef struct sim_key {
    double t;
    int seq, v;
} sim_key;

static int sim_cmp(const void *pa, const void *pb) {
    const sim_key *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Durations for the simulation: the modelled times, each raised to at least
 * total x 2^-50, so the clock (below about twice the total) moves by every
 * duration: doubles are exact to 2^-52 relative. A node must end strictly
 * after it starts, or a producer and its reader get the same time, the
 * memory planner lets their tensors share bytes, and the plan breaks its own
 * order (the assertion on memory edges). The per-task cost makes this rare;
 * a step of 2^50 tasks' worth of modelled time would need it. */
static double *sim_durations(const dg_sched_plan *p) {
    int nn = p->n_nodes;
    double *d = dg_malloc(sizeof(double) * (size_t)DG_MAX(nn, 1)), total = 0;
    for (int v = 0; v < nn; v++) total += p->time[v];
    double floor_s = total * 0x1p-50;
    for (int v = 0; v < nn; v++) d[v] = DG_MAX(p->time[v], floor_s);
    return d;
}

static void simulate(dg_sched_plan *p, const edge_list *el, const int *doff, const int *dsucc) {
    int nn = p->n_nodes;
    size_t sz = (size_t)DG_MAX(nn, 1);
    double *dur = sim_durations(p);
    int *indeg = dg_calloc(sz, sizeof(int));
    for (int i = 0; i < el->n; i++) indeg[edge_to(el->e[i])]++;
    dg_heap h[DG_SCHED_LANES];
    for (int s = 0; s < DG_SCHED_LANES; s++)
        h[s] = (dg_heap){dg_malloc(sizeof(int) * (size_t)DG_MAX(p->n_lane[s], 1)), 0, p->rank};
    for (int v = 0; v < nn; v++)
        if (indeg[v] == 0) dg_heap_push(&h[p->lane[v]], v);
    sim_key *keys = dg_malloc(sizeof *keys * sz);
    int running[DG_SCHED_LANES], dispatched = 0, finished = 0;
    double now = 0;
    for (int s = 0; s < DG_SCHED_LANES; s++) running[s] = -1;
    while (finished < nn) {
        for (int s = 0; s < DG_SCHED_LANES; s++)
            if (running[s] < 0 && h[s].n > 0) {
                int v = dg_heap_pop(&h[s]);
                running[s] = v;
                p->sim_start[v] = now;
                p->sim_end[v] = now + dur[v];
                keys[dispatched] = (sim_key){now, dispatched, v};
                dispatched++;
            }
        int s_min = -1;
        for (int s = 0; s < DG_SCHED_LANES; s++)
            if (running[s] >= 0 && (s_min < 0 || p->sim_end[running[s]] < p->sim_end[running[s_min]]))
                s_min = s;
        DG_ASSERT(s_min >= 0); /* acyclic: something is always running or ready */
        int v = running[s_min];
        running[s_min] = -1;
        now = p->sim_end[v];
        finished++;
        for (int e = doff[v]; e < doff[v + 1]; e++)
            if (--indeg[dsucc[e]] == 0) dg_heap_push(&h[p->lane[dsucc[e]]], dsucc[e]);
    }
    qsort(keys, (size_t)nn, sizeof *keys, sim_cmp);
    for (int k = 0; k < nn; k++) {
        p->order[k] = keys[k].v;
        p->pos[keys[k].v] = k;
    }
    for (int s = 0; s < DG_SCHED_LANES; s++) dg_free(h[s].a);
    dg_free(keys);
    dg_free(indeg);
    dg_free(dur);
}

static void memory_edges(const dg_graph *g, const dg_memplan *mp, edge_list *l) {
    dg_uses u;
    dg_uses_build(g, &u);
    int nt = g->n_tensors, n = 0;
    born *bs = dg_malloc(sizeof *bs * (size_t)DG_MAX(nt, 1));
    for (int t = 0; t < nt; t++)
        if (mp->offset[t] >= 0) bs[n++] = (born){mp->first[t], t};
    qsort(bs, (size_t)n, sizeof *bs, born_cmp);
    int ns = 1, cap = 64;
    seg *sg = dg_malloc(sizeof *sg * (size_t)cap);
    sg[0] = (seg){0, (int64_t)mp->arena_bytes + 1, -1};
    for (int i = 0; i < n; i++) {
        int b = bs[i].id, pb = g->tensors[b].producer;
        int64_t lo = mp->offset[b], hi = lo + (int64_t)mp->size[b];
        /* split the segments at lo and hi so B's range is whole segments */
        for (int cut = 0; cut < 2; cut++) {
            int64_t at = cut ? hi : lo;
            for (int k = 0; k < ns; k++) {
                if (sg[k].lo < at && at < sg[k].hi) {
                    if (ns == cap) sg = dg_realloc(sg, sizeof *sg * (size_t)(cap *= 2));
                    memmove(&sg[k + 1], &sg[k], sizeof *sg * (size_t)(ns - k));
                    ns++;
                    sg[k].hi = at;
                    sg[k + 1].lo = at;
                    break;
                }
            }
        }
        /* order the last occupants' readers (and producers) before B's producer */
        int last_owner = -2;
        for (int k = 0; k < ns; k++) {
            if (sg[k].hi <= lo || sg[k].lo >= hi) continue;
            int a = sg[k].owner;
            sg[k].owner = b;
            if (a < 0 || a == last_owner) continue;
            last_owner = a;
            edges_push(l, g->tensors[a].producer, pb);
            for (int r = u.offsets[a]; r < u.offsets[a + 1]; r++)
                if (u.nodes[r] != pb) edges_push(l, u.nodes[r], pb);
        }
        /* merge neighbours with the same owner to keep the list short */
        int w = 0;
        for (int k = 1; k < ns; k++) {
            if (sg[k].owner == sg[w].owner) sg[w].hi = sg[k].hi;
            else sg[++w] = sg[k];
        }
        ns = w + 1;
    }
    dg_free(sg);
    dg_free(bs);
    dg_uses_free(&u);
}

dg_sched_plan *dg_sched_plan_new(const dg_graph *g, const dg_sched_opts *o, dg_err *err) {
    dg_sched_opts dflt = {0};
    if (!o) o = &dflt;
    int nn = g->n_nodes;
    for (int v = 0; v < nn; v++)
        if (!g->nodes[v].op) {
            dg_err_set(err, DG_EINPUT, "scheduler: node %d '%s' has no op", v, g->nodes[v].name);
            return NULL;
        }
    if (o->cost) {
        const dg_cost_model *m = o->cost;
        if (!(m->flops_per_s > 0 && m->mem_bytes_per_s > 0 && m->comm_bytes_per_s > 0 &&
              m->comm_latency_s >= 0 && m->task_s > 0) ||
            !isfinite(m->flops_per_s + m->mem_bytes_per_s + m->comm_bytes_per_s + m->comm_latency_s + m->task_s)) {
            dg_err_set(err, DG_EINPUT, "scheduler: cost model needs finite rates > 0, latency >= 0 and task time > 0");
            return NULL;
        }
    }
    dg_sched_plan *p = dg_calloc(1, sizeof *p);
    p->g = g;
    p->n_nodes = nn;
    size_t sz = (size_t)DG_MAX(nn, 1);
    p->order = dg_malloc(sizeof(int) * sz);
    p->pos = dg_malloc(sizeof(int) * sz);
    p->bottom = dg_malloc(sizeof(double) * sz);
    p->time = dg_malloc(sizeof(double) * sz);
    p->feeds = dg_malloc(sizeof(int) * sz);
    p->rank = dg_malloc(sizeof(int) * sz);
    p->stream = dg_malloc(sizeof(int) * sz);
    p->npred = dg_calloc(sz, sizeof(int));

    /* 1. data edges, ordering edges, and a plain topological order (also
     * the cycle check) */
    edge_list el = {0};
    for (int v = 0; v < nn; v++)
        for (int i = 0; i < g->nodes[v].n_in; i++) {
            int t = g->nodes[v].in[i];
            if (t < 0 || t >= g->n_tensors) continue;
            int u = g->tensors[t].producer;
            if (u >= 0 && u != v) edges_push(&el, u, v);
        }
    edges_unique(&el);
    p->n_data_edges = el.n;
    /* ... and the ordering edges (a schedule a pass wrote into the graph);
     * one parallel to a data edge adds nothing */
    for (int i = 0; i < g->n_order; i++) {
        const dg_order_edge *e = &g->order[i];
        if (e->before >= 0 && e->before < nn && e->after >= 0 && e->after < nn)
            edges_push(&el, e->before, e->after);
    }
    edges_unique(&el);
    p->n_order_edges = el.n - p->n_data_edges;
    if (dg_graph_topo_order(g, p->order, err) != DG_OK) {
        dg_free(el.e);
        dg_sched_plan_free(p);
        return NULL;
    }
    int *doff, *dsucc;
    edges_csr(&el, nn, &doff, &dsucc);

    /* 2. streams: collectives and comm-class nodes on comm, the rest
     * compute; the comm nodes in the lane of their group kind */
    int *is_comm = dg_malloc(sizeof(int) * sz);
    p->lane = dg_malloc(sizeof(int) * sz);
    for (int v = 0; v < nn; v++) {
        const dg_node *n = &g->nodes[v];
        p->stream[v] = (n->op->comm != DG_COMM_NONE || n->stream == DG_STREAM_COMM) ? DG_STREAM_COMM
                                                                                   : DG_STREAM_COMPUTE;
        is_comm[v] = p->stream[v] == DG_STREAM_COMM;
        p->n_stream[p->stream[v]]++;
        p->lane[v] = is_comm[v] ? 1 + ((unsigned)n->group < DG_AXIS_COUNT ? (int)n->group : DG_AXIS_NONE) : 0;
        p->n_lane[p->lane[v]]++;
    }

    /* 3. the policy (dg_prio.h): modelled times, bottom levels, compute
     * feeding comm, the rank order */
    dg_cost_model cm = o->cost ? *o->cost : dg_cost_model_default();
    for (int v = 0; v < nn; v++) p->time[v] = dg_prio_node_time(&cm, g, &g->nodes[v]);
    dg_prio_bottom_levels(g, p->order, doff, dsucc, p->time, p->bottom);
    dg_prio_feeds_comm(g, is_comm, p->feeds);
    dg_prio_rank(g, p->feeds, p->bottom, p->rank);
    dg_free(is_comm);

    /* 4. the plan order: a simulated run of the compute stream and the comm
     * lanes, each taking its most urgent ready task, with the modelled time
     * as duration */
    p->sim_start = dg_malloc(sizeof(double) * sz);
    p->sim_end = dg_malloc(sizeof(double) * sz);
    simulate(p, &el, doff, dsucc);
    dg_free(doff);
    dg_free(dsucc);

    /* 5. the memory plan on the simulated timeline, checked */
    p->planned = !o->no_memory_plan;
    p->n_keep = o->n_keep;
    p->keep = dg_malloc(sizeof(int) * (size_t)DG_MAX(o->n_keep, 1));
    if (o->n_keep) memcpy(p->keep, o->keep, sizeof(int) * (size_t)o->n_keep);
    if (p->planned) {
        if (dg_memplan_build_timed(g, p->sim_start, p->sim_end, o->keep, o->n_keep, &p->mem, err) != DG_OK ||
            dg_memplan_validate(g, &p->mem, err) != DG_OK) {
            dg_free(el.e);
            dg_sched_plan_free(p);
            return NULL;
        }
        /* 6. memory edges */
        int before = el.n;
        memory_edges(g, &p->mem, &el);
        edges_unique(&el);
        p->n_mem_edges = el.n - before;
    }
    edges_csr(&el, nn, &p->succ_off, &p->succ);
    for (int i = 0; i < el.n; i++) {
        DG_ASSERT(p->pos[edge_from(el.e[i])] < p->pos[edge_to(el.e[i])]);
        p->npred[edge_to(el.e[i])]++;
    }
    dg_free(el.e);

    /* 7. each stream's and each lane's sequence, in plan order (the comm
     * lanes run theirs as is) */
    for (int s = 0; s < DG_STREAM_COUNT; s++) {
        p->seq[s] = dg_malloc(sizeof(int) * (size_t)DG_MAX(p->n_stream[s], 1));
        int k = 0;
        for (int i = 0; i < nn; i++)
            if (p->stream[p->order[i]] == s) p->seq[s][k++] = p->order[i];
    }
    for (int l = 0; l < DG_SCHED_LANES; l++) {
        p->lane_seq[l] = dg_malloc(sizeof(int) * (size_t)DG_MAX(p->n_lane[l], 1));
        int k = 0;
        for (int i = 0; i < nn; i++)
            if (p->lane[p->order[i]] == l) p->lane_seq[l][k++] = p->order[i];
    }
    return p;
}

void dg_sched_plan_free(dg_sched_plan *p) {
    if (!p) return;
    dg_free(p->order);
    dg_free(p->pos);
    dg_free(p->bottom);
    dg_free(p->time);
    dg_free(p->feeds);
    dg_free(p->rank);
    dg_free(p->stream);
    dg_free(p->sim_start);
    dg_free(p->sim_end);
    dg_free(p->succ_off);
    dg_free(p->succ);
    dg_free(p->npred);
    dg_free(p->keep);
    for (int s = 0; s < DG_STREAM_COUNT; s++) dg_free(p->seq[s]);
    dg_free(p->lane);
    for (int l = 0; l < DG_SCHED_LANES; l++) dg_free(p->lane_seq[l]);
    if (p->mem.offset) dg_memplan_free(&p->mem);
    dg_free(p);
}

void dg_sched_plan_print(const dg_sched_plan *p, FILE *f) {
    double crit = 0;
    for (int v = 0; v < p->n_nodes; v++) crit = DG_MAX(crit, p->bottom[v]);
    double span = p->n_nodes ? p->sim_end[p->order[p->n_nodes - 1]] : 0;
    for (int v = 0; v < p->n_nodes; v++) span = DG_MAX(span, p->sim_end[v]);
    fprintf(f, "plan: %d tasks (compute %d, comm %d", p->n_nodes, p->n_stream[DG_STREAM_COMPUTE],
            p->n_stream[DG_STREAM_COMM]);
    const char *sep = ": ";
    for (int l = 1; l < DG_SCHED_LANES; l++)
        if (p->n_lane[l]) {
            fprintf(f, "%s%s %d", sep, dg_axis_name((dg_axis)dg_sched_lane_axis(l)), p->n_lane[l]);
            sep = ", ";
        }
    fprintf(f,
            "), %d data + %d ordering + %d memory edges, modelled critical path %.3f ms, simulated "
            "step %.3f ms\n",
            p->n_data_edges, p->n_order_edges, p->n_mem_edges, 1e3 * crit, 1e3 * span);
    if (p->planned) dg_memplan_print(&p->mem, f);
}
