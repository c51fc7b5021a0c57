/* dg_topo.c — hwloc discovery, the rank's cpuset and thread pinning (see dg_topo.h). */
#include "dg_topo.h"

#include "dg_team.h"

#include <hwloc.h>
#include <pthread.h>
#include <string.h>

#define DG_TOPO_MAX_PLACES 256

struct dg_topo {
    hwloc_topology_t topo;
    hwloc_bitmap_t rank_set;     /* the cpuset this rank may use */
    hwloc_bitmap_t *core_sets;   /* per rank core: its PUs inside rank_set */
    int *core_index;             /* per rank core: hwloc logical core index */
    dg_topo_info info;
    pthread_mutex_t mu;          /* guards the placement log */
    dg_topo_place places[DG_TOPO_MAX_PLACES];
    int n_places;
};

/* Local rank and size from the launchers we know; (0, 1) otherwise. */
static void local_rank_size(int *rank, int *size) {
    static const char *pairs[][2] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
        {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    };
    *rank = 0;
    *size = 1;
    for (size_t i = 0; i < DG_ARRAY_LEN(pairs); i++) {
        const char *r = getenv(pairs[i][0]), *s = getenv(pairs[i][1]);
        if (r && s && atoi(s) > 0) {
            *rank = atoi(r);
            *size = atoi(s);
            return;
        }
    }
}

static void set_str(hwloc_const_bitmap_t s, char *buf, size_t n) {
    if (hwloc_bitmap_list_snprintf(buf, n, s) < 0) snprintf(buf, n, "?");
}

dg_topo *dg_topo_new(dg_err *err) {
    dg_topo *t = dg_calloc(1, sizeof *t);
    if (hwloc_topology_init(&t->topo) != 0 || hwloc_topology_load(t->topo) != 0) {
        dg_free(t);
        dg_err_set(err, DG_EINTERNAL, "hwloc: cannot load the machine topology");
        return NULL;
    }
    DG_CHECK0(pthread_mutex_init(&t->mu, NULL));
    dg_topo_info *in = &t->info;
    in->n_packages = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_PACKAGE);
    in->n_numa = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_NUMANODE);
    in->n_cores = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_CORE);
    in->n_pus = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_PU);
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t->topo);
    set_str(allowed, in->machine_set, sizeof in->machine_set);
    local_rank_size(&in->local_rank, &in->local_size);

    /* 1. The process binding, as the launcher left it. */
    t->rank_set = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(t->topo, t->rank_set, HWLOC_CPUBIND_PROCESS) != 0 ||
        hwloc_bitmap_iszero(t->rank_set))
        hwloc_bitmap_copy(t->rank_set, allowed);
    hwloc_bitmap_and(t->rank_set, t->rank_set, allowed);

    /* 2. Bound to a strict subset: mpirun chose for us. Bound to everything
     * while sharing the node: take our block of cores by local rank. */
    int n_mach_cores = in->n_cores > 0 ? in->n_cores : 1;
    if (!hwloc_bitmap_isequal(t->rank_set, allowed)) {
        in->source = DG_TOPO_BOUND;
    } else if (in->local_size > 1 && in->n_cores > 0) {
        in->source = DG_TOPO_SPLIT;
        int64_t b, e;
        if (in->local_size <= n_mach_cores) {
            dg_team_split(n_mach_cores, in->local_size, in->local_rank % in->local_size, &b, &e);
        } else { /* more ranks than cores: share, round robin */
            b = in->local_rank % n_mach_cores;
            e = b + 1;
        }
        hwloc_bitmap_zero(t->rank_set);
        for (int64_t c = b; c < e; c++) {
            hwloc_obj_t core = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_CORE, (unsigned)c);
            if (core && core->cpuset) hwloc_bitmap_or(t->rank_set, t->rank_set, core->cpuset);
        }
        hwloc_bitmap_and(t->rank_set, t->rank_set, allowed);
        if (hwloc_bitmap_iszero(t->rank_set)) hwloc_bitmap_copy(t->rank_set, allowed);
    } else {
        in->source = DG_TOPO_WHOLE;
    }
    set_str(t->rank_set, in->rank_set, sizeof in->rank_set);

    /* 3. The rank's cores, in logical order, each with its usable PUs. */
    t->core_sets = dg_calloc((size_t)n_mach_cores + 1, sizeof *t->core_sets);
    t->core_index = dg_calloc((size_t)n_mach_cores + 1, sizeof *t->core_index);
    for (int c = 0; c < in->n_cores; c++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_CORE, (unsigned)c);
        if (!core || !core->cpuset || !hwloc_bitmap_intersects(core->cpuset, t->rank_set)) continue;
        hwloc_bitmap_t s = hwloc_bitmap_alloc();
        hwloc_bitmap_and(s, core->cpuset, t->rank_set);
        t->core_sets[in->rank_cores] = s;
        t->core_index[in->rank_cores] = c;
        in->rank_cores++;
    }
    if (in->rank_cores == 0) { /* no core objects (odd VMs): one pseudo-core */
        t->core_sets[0] = hwloc_bitmap_dup(t->rank_set);
        t->core_index[0] = -1;
        in->rank_cores = 1;
    }
    return t;
}

void dg_topo_free(dg_topo *t) {
    if (!t) return;
    for (int i = 0; i < t->info.rank_cores; i++) hwloc_bitmap_free(t->core_sets[i]);
    dg_free(t->core_sets);
    dg_free(t->core_index);
    hwloc_bitmap_free(t->rank_set);
    hwloc_topology_destroy(t->topo);
    pthread_mutex_destroy(&t->mu);
    dg_free(t);
}

void dg_topo_get_info(const dg_topo *t, dg_topo_info *info) { *info = t->info; }

void dg_topo_bind_self(dg_topo *t, int slot, const char *name) {
    dg_topo_place p;
    memset(&p, 0, sizeof p);
    snprintf(p.thread, sizeof p.thread, "%s", name ? name : "?");
    p.slot = slot;
    hwloc_const_bitmap_t set;
    if (slot >= 0) {
        int k = slot % t->info.rank_cores;
        set = t->core_sets[k];
        p.core = t->core_index[k];
    } else {
        set = t->rank_set;
        p.core = t->info.rank_cores == 1 ? t->core_index[0] : -1;
    }
    p.core_os = hwloc_bitmap_first(set);
    set_str(set, p.set, sizeof p.set);
    /* Why not fatal: some containers forbid sched_setaffinity; the run is
     * still correct, only unpinned, and the log says where it ended up. */
    int rc = hwloc_set_cpubind(t->topo, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_t where = hwloc_bitmap_alloc();
    p.pu_os = hwloc_get_last_cpu_location(t->topo, where, HWLOC_CPUBIND_THREAD) == 0
                  ? hwloc_bitmap_first(where)
                  : -1;
    hwloc_bitmap_free(where);
    if (rc != 0) snprintf(p.set, sizeof p.set, "unbound");
    pthread_mutex_lock(&t->mu);
    if (t->n_places < DG_TOPO_MAX_PLACES) t->places[t->n_places++] = p;
    pthread_mutex_unlock(&t->mu);
}

int dg_topo_n_places(const dg_topo *t) {
    pthread_mutex_lock((pthread_mutex_t *)&t->mu);
    int n = t->n_places;
    pthread_mutex_unlock((pthread_mutex_t *)&t->mu);
    return n;
}

void dg_topo_place_get(const dg_topo *t, int i, dg_topo_place *out) {
    pthread_mutex_lock((pthread_mutex_t *)&t->mu);
    *out = t->places[i];
    pthread_mutex_unlock((pthread_mutex_t *)&t->mu);
}

void dg_topo_print(const dg_topo *t, FILE *f, const char *prefix) {
    static const char *src[] = {"whole machine", "bound by the launcher", "split by local rank"};
    const dg_topo_info *in = &t->info;
    if (!prefix) prefix = "";
    fprintf(f, "%smachine: %d package(s), %d NUMA node(s), %d core(s), %d PU(s), allowed cpuset %s\n",
            prefix, in->n_packages, in->n_numa, in->n_cores, in->n_pus, in->machine_set);
    for (int p = 0; p < in->n_packages; p++) {
        hwloc_obj_t pkg = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_PACKAGE, (unsigned)p);
        char s[64];
        set_str(pkg->cpuset, s, sizeof s);
        fprintf(f, "%s  package %d: cpuset %s, %d core(s)\n", prefix, p, s,
                hwloc_get_nbobjs_inside_cpuset_by_type(t->topo, pkg->cpuset, HWLOC_OBJ_CORE));
    }
    for (int m = 0; m < in->n_numa; m++) {
        hwloc_obj_t nn = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, (unsigned)m);
        char s[64];
        set_str(nn->cpuset, s, sizeof s);
        fprintf(f, "%s  numa %d: cpuset %s, %llu MiB\n", prefix, m, s,
                (unsigned long long)(nn->attr ? nn->attr->numanode.local_memory >> 20 : 0));
    }
    for (int c = 0; c < in->n_cores; c++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_CORE, (unsigned)c);
        char s[64];
        set_str(core->cpuset, s, sizeof s);
        fprintf(f, "%s  core %d: PUs %s\n", prefix, c, s);
    }
    fprintf(f, "%srank: local rank %d of %d, cpuset %s (%s), %d core(s)\n", prefix,
            in->local_rank, in->local_size, in->rank_set, src[in->source], in->rank_cores);
    int n = dg_topo_n_places(t);
    for (int i = 0; i < n; i++) {
        dg_topo_place p;
        dg_topo_place_get(t, i, &p);
        fprintf(f, "%splace thread=%s slot=%d core=%d core_os=%d pu=%d set=%s\n", prefix, p.thread,
                p.slot, p.core, p.core_os, p.pu_os, p.set);
    }
}
