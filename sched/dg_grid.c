/* dg_grid.c — see dg_grid.h. */
#include "dg_grid.h"

#include <string.h>

#include "dg_comm_mpi.h"

int dg_grid_sizes_check(int world, dg_grid_sizes *s, dg_err *err) {
    const char *flag[4] = {"--tensor-model-parallel-size", "--context-parallel-size",
                           "--expert-model-parallel-size", "--pipeline-model-parallel-size"};
    int v[4] = {s->tp, s->cp, s->ep, s->pp};
    for (int i = 0; i < 4; i++)
        if (v[i] < 1) return dg_err_set(err, DG_EINPUT, "%s: expected >= 1, got %d", flag[i], v[i]);
    long long mp = (long long)s->tp * s->cp * s->ep * s->pp;
    if (world < 1 || world % mp != 0)
        return dg_err_set(err, DG_EINPUT,
                          "world size %d is not divisible by %s %d x %s %d x %s %d x %s %d (= %lld)",
                          world, flag[0], s->tp, flag[1], s->cp, flag[2], s->ep, flag[3], s->pp, mp);
    s->dp = (int)(world / mp);
    if (s->etp == 0) s->etp = s->tp; /* Megatron's default */
    if (s->etp != 1 && s->etp != s->tp)
        return dg_err_set(err, DG_EINPUT,
                          "--expert-tensor-parallel-size %d: expected 1 or --tensor-model-parallel-size %d "
                          "(other expert foldings are not built)",
                          s->etp, s->tp);
    return DG_OK;
}

int dg_grid_edp_size(const dg_grid_sizes *s) { return (s->etp == 1 ? s->tp : 1) * s->cp * s->dp; }

dg_grid_coord dg_grid_coord_of(const dg_grid_sizes *s, int rank) {
    dg_grid_coord c;
    c.tp = rank % s->tp;
    rank /= s->tp;
    c.cp = rank % s->cp;
    rank /= s->cp;
    c.ep = rank % s->ep;
    rank /= s->ep;
    c.dp = rank % s->dp;
    c.pp = rank / s->dp;
    return c;
}

int dg_grid_rank_of(const dg_grid_sizes *s, dg_grid_coord c) {
    return c.tp + s->tp * (c.cp + s->cp * (c.ep + s->ep * (c.dp + s->dp * c.pp)));
}

/* Split `world` into the groups whose members differ only in the
 * coordinates marked in `vary` (tp, cp, ep, dp, pp): the color is the rank
 * with those coordinates zeroed, so it is the same for exactly the group's
 * members; the key is the world rank, so group ranks follow world order. */
static int split_by(dg_comm *world, const dg_grid_sizes *s, dg_grid_coord me, const int vary[5],
                    dg_comm **out, dg_err *err) {
    dg_grid_coord base = me;
    if (vary[0]) base.tp = 0;
    if (vary[1]) base.cp = 0;
    if (vary[2]) base.ep = 0;
    if (vary[3]) base.dp = 0;
    if (vary[4]) base.pp = 0;
    return world->ops->split(world, dg_grid_rank_of(s, base), world->rank, out, err);
}

dg_grid *dg_grid_new(MPI_Comm comm, const dg_grid_sizes *sz, int *status, dg_err *err) {
    int st_local = DG_OK;
    if (!status) status = &st_local;
    int world = 0, rank = 0;
    MPI_Comm_size(comm, &world);
    MPI_Comm_rank(comm, &rank);
    dg_grid_sizes s = *sz;
    *status = dg_grid_sizes_check(world, &s, err);
    if (*status != DG_OK) return NULL;
    /* The comm streams' threads call MPI during a step, the owner's thread
     * between steps; the MPI backend makes each call under one lock
     * (dg_comm_mpi.c), so SERIALIZED is the least we need. */
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_SERIALIZED) {
        *status = dg_err_set(err, DG_EINTERNAL, "MPI was initialised with thread level %d; the rank grid needs "
                             "MPI_THREAD_SERIALIZED or more (MPI_Init_thread)", level);
        return NULL;
    }
    /* MPI's default, made explicit: an MPI error aborts the job (mpirun then
     * ends every rank) instead of returning into code that would wait for a
     * peer forever. The groups below are dups of comm and inherit it. */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    dg_comm *wc = dg_comm_mpi_new(comm, err);
    if (!wc) {
        *status = DG_EINTERNAL;
        return NULL;
    }
    dg_grid *g = dg_calloc(1, sizeof *g);
    g->world = world;
    g->rank = rank;
    g->sizes = s;
    g->coord = dg_grid_coord_of(&s, rank);
    g->data_rank = g->coord.ep + s.ep * g->coord.dp;
    g->data_size = s.ep * s.dp;
    g->world_comm = wc;
    /* Every rank makes every split in the same order (MPI_Comm_split is
     * collective over the world). */
    static const struct {
        int axis;
        int vary[5]; /* tp cp ep dp pp */
    } table[] = {
        {DG_AXIS_TP, {1, 0, 0, 0, 0}}, {DG_AXIS_CP, {0, 1, 0, 0, 0}}, {DG_AXIS_EP, {0, 0, 1, 0, 0}},
        {DG_AXIS_DP, {0, 0, 1, 1, 0}}, {DG_AXIS_PP, {0, 0, 0, 0, 1}}, {DG_AXIS_EDP, {0, 1, 0, 1, 0}},
        {-1, {0, 1, 1, 1, 0}}, /* dp_cp */
    };
    for (size_t i = 0; i < DG_ARRAY_LEN(table); i++) {
        dg_comm **out = table[i].axis >= 0 ? &g->group[table[i].axis] : &g->dp_cp;
        int vary[5];
        memcpy(vary, table[i].vary, sizeof vary);
        /* ETP 1: the tp ranks hold the same (whole) experts, so EDP spans tp */
        if (table[i].axis == DG_AXIS_EDP && s.etp == 1) vary[0] = 1;
        int st = split_by(wc, &s, g->coord, vary, out, err);
        if (st != DG_OK) {
            *status = st;
            dg_grid_free(g);
            return NULL;
        }
    }
    return g;
}

void dg_grid_free(dg_grid *g) {
    if (!g) return;
    for (int a = 0; a < DG_AXIS_COUNT; a++) dg_comm_free(g->group[a]);
    dg_comm_free(g->dp_cp);
    dg_comm_free(g->world_comm);
    dg_free(g);
}

void dg_grid_runtime_groups(const dg_grid *g, dg_comm *groups[DG_AXIS_COUNT]) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) groups[a] = g->group[a];
    groups[DG_AXIS_NONE] = NULL;
    groups[DG_AXIS_DP] = g->dp_cp;
}

int dg_grid_axis_coord(const dg_grid *g, dg_axis a) {
    if (!g || a <= DG_AXIS_NONE || a >= DG_AXIS_COUNT) return 0;
    dg_comm *groups[DG_AXIS_COUNT];
    dg_grid_runtime_groups(g, groups);
    return groups[a] ? groups[a]->rank : 0; /* the group's own rank: no second copy of its order */
}

void dg_grid_coords(const dg_grid *g, int coord[DG_AXIS_COUNT]) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) coord[a] = dg_grid_axis_coord(g, (dg_axis)a);
}

bool dg_grid_first_replica(const dg_grid *g) { return dg_grid_axis_coord(g, DG_AXIS_DP) == 0; }

void dg_grid_describe(const dg_grid_sizes *s, int world, char *buf, size_t len) {
    int etp = s->etp > 0 ? s->etp : s->tp;
    snprintf(buf, len,
             "rank grid: world %d = tp %d x cp %d x ep %d x dp %d x pp %d; data-parallel size %d; "
             "experts: etp %d x ep %d x edp %d (edp = %scp x dp)",
             world, s->tp, s->cp, s->ep, s->dp, s->pp, s->ep * s->dp, etp, s->ep,
             (etp == 1 ? s->tp : 1) * s->cp * s->dp, etp == 1 && s->tp > 1 ? "tp x " : "");
}
