/* test_cuda_nccl.c — the NCCL comm backend against the MPI one (needs one
 * GPU per rank; run under mpirun with as many ranks as GPUs).
 *
 * Each collective of dg_comm.h runs on the same random data through both
 * backends: MPI on host buffers, NCCL on device buffers copied back. Sums
 * (all-reduce, reduce-scatter) must agree within 1e-5 relative (the two
 * libraries may add in different orders); moves (all-gather, all-to-all(v)
 * with uneven counts, a ring of send/recv) must agree exactly. The NCCL
 * communicator is bootstrapped from MPI_COMM_WORLD (ncclUniqueId broadcast). */
#include <cuda_runtime.h>
#include <math.h>
#include <mpi.h>
#include <string.h>

#include "dg_comm_mpi.h"
#include "dg_cuda.h"
#include "dg_cuda_nccl.h"
#include "dg_test_mpi.h"

static int rank, size, failures;

static float *rnd(int64_t n, uint64_t seed) {
    float *x = dg_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) x[i] = (float)((dg_splitmix64(&s) >> 11) * 0x1.0p-53) - 0.5f;
    return x;
}

static void *up(const float *h, int64_t n) {
    void *d = NULL;
    CHECK(cudaMalloc(&d, sizeof(float) * (size_t)(n > 0 ? n : 1)) == cudaSuccess);
    if (n > 0) CHECK(cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice) == cudaSuccess);
    return d;
}

static void down(float *h, const void *d, int64_t n) {
    if (n > 0) CHECK(cudaMemcpy(h, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost) == cudaSuccess);
}

static void same(const float *a, const float *b, int64_t n, double rtol, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= rtol * fmax(fabs(b[i]), 1e-3))) {
            fprintf(stderr, "rank %d: %s [%lld]: nccl %.9g mpi %.9g\n", rank, what, (long long)i, a[i], b[i]);
            failures++;
            return;
        }
}

/* Run op `k` on both backends; n elements per rank-block. */
static void collective(dg_comm *mpi, dg_comm *nccl, int k, int64_t n) {
    dg_err err = {{0}};
    int64_t in_n = k == 0 ? n : k == 1 ? n : n * size, out_n = k == 0 ? n : k == 1 ? n * size : n;
    float *x = rnd(in_n, 100 + (uint64_t)rank * 7 + (uint64_t)k);
    float *want = dg_calloc((size_t)out_n + 1, sizeof(float)), *got = dg_calloc((size_t)out_n + 1, sizeof(float));
    void *dx = up(x, in_n), *dy = up(got, out_n);
    dg_comm_req r1 = {0}, r2 = {0};
    const char *names[] = {"all_reduce", "all_gather", "reduce_scatter"};
    int s1 = k == 0   ? mpi->ops->all_reduce(mpi, x, want, n, DG_F32, &r1, &err)
             : k == 1 ? mpi->ops->all_gather(mpi, x, want, n, DG_F32, &r1, &err)
                      : mpi->ops->reduce_scatter(mpi, x, want, n, DG_F32, &r1, &err);
    CHECK(s1 == DG_OK && mpi->ops->wait(mpi, &r1, &err) == DG_OK);
    int s2 = k == 0   ? nccl->ops->all_reduce(nccl, dx, dy, n, DG_F32, &r2, &err)
             : k == 1 ? nccl->ops->all_gather(nccl, dx, dy, n, DG_F32, &r2, &err)
                      : nccl->ops->reduce_scatter(nccl, dx, dy, n, DG_F32, &r2, &err);
    if (s2 != DG_OK) fprintf(stderr, "rank %d: %s\n", rank, err.msg);
    CHECK(s2 == DG_OK && nccl->ops->wait(nccl, &r2, &err) == DG_OK);
    down(got, dy, out_n);
    same(got, want, out_n, k == 1 ? 0 : 1e-5, names[k]);
    cudaFree(dx);
    cudaFree(dy);
    dg_free(x);
    dg_free(want);
    dg_free(got);
}

/* all-to-allv with uneven blocks: rank r sends (r + p + 1) * 3 elements to p. */
static void all_to_allv(dg_comm *mpi, dg_comm *nccl) {
    dg_err err = {{0}};
    int64_t *sc = dg_calloc((size_t)size * 4, sizeof(int64_t)), *sd = sc + size, *rc = sd + size, *rd = rc + size;
    int64_t ns = 0, nr = 0;
    for (int p = 0; p < size; p++) {
        sc[p] = (rank + p + 1) * 3;
        rc[p] = (p + rank + 1) * 3;
        sd[p] = ns;
        rd[p] = nr;
        ns += sc[p];
        nr += rc[p];
    }
    float *x = rnd(ns, 500 + (uint64_t)rank);
    float *want = dg_calloc((size_t)nr + 1, sizeof(float)), *got = dg_calloc((size_t)nr + 1, sizeof(float));
    void *dx = up(x, ns), *dy = up(got, nr);
    dg_comm_req r1 = {0}, r2 = {0};
    CHECK(mpi->ops->all_to_allv(mpi, x, sc, sd, want, rc, rd, DG_F32, &r1, &err) == DG_OK);
    CHECK(mpi->ops->wait(mpi, &r1, &err) == DG_OK);
    CHECK(nccl->ops->all_to_allv(nccl, dx, sc, sd, dy, rc, rd, DG_F32, &r2, &err) == DG_OK);
    CHECK(nccl->ops->wait(nccl, &r2, &err) == DG_OK);
    down(got, dy, nr);
    same(got, want, nr, 0, "all_to_allv");
    cudaFree(dx);
    cudaFree(dy);
    dg_free(x);
    dg_free(want);
    dg_free(got);
    dg_free(sc);
}

/* A ring: each rank sends to rank + 1 and receives from rank - 1. */
static void ring(dg_comm *nccl) {
    if (size < 2) return;
    dg_err err = {{0}};
    int64_t n = 1000;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    float *x = rnd(n, 900 + (uint64_t)rank), *want = rnd(n, 900 + (uint64_t)prev);
    float *got = dg_calloc((size_t)n, sizeof(float));
    void *dx = up(x, n), *dy = up(got, n);
    dg_comm_req rs = {0}, rr = {0};
    /* NCCL runs one rank's point-to-point calls in issue order on its
     * stream: even ranks send first, odd ranks receive first, or the ring
     * would wait on itself */
    if (rank % 2 == 0) CHECK(nccl->ops->send(nccl, dx, n, DG_F32, next, 0, &rs, &err) == DG_OK);
    CHECK(nccl->ops->recv(nccl, dy, n, DG_F32, prev, 0, &rr, &err) == DG_OK);
    if (rank % 2 == 1) CHECK(nccl->ops->send(nccl, dx, n, DG_F32, next, 0, &rs, &err) == DG_OK);
    CHECK(nccl->ops->wait(nccl, &rs, &err) == DG_OK);
    CHECK(nccl->ops->wait(nccl, &rr, &err) == DG_OK);
    down(got, dy, n);
    same(got, want, n, 0, "send/recv ring");
    cudaFree(dx);
    cudaFree(dy);
    dg_free(x);
    dg_free(want);
    dg_free(got);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dg_err err = {{0}};
    int gpus = 0;
    if (dg_cuda_device_count(&gpus, &err) != DG_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        failures++; /* a GPU test never skips */
    } else {
        CHECK(cudaSetDevice(rank % gpus) == cudaSuccess);
        dg_comm *mpi = dg_comm_mpi_new(MPI_COMM_WORLD, &err), *nccl = NULL;
        MPI_Comm world = MPI_COMM_WORLD;
        int st = dg_comm_nccl_new(mpi, &world, &nccl, &err);
        if (st != DG_OK) fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        CHECK(st == DG_OK && nccl && !strcmp(nccl->ops->name, "nccl"));
        if (nccl) {
            for (int k = 0; k < 3; k++) {
                collective(mpi, nccl, k, 1000);
                collective(mpi, nccl, k, 1 << 18);
            }
            all_to_allv(mpi, nccl);
            ring(nccl);
            CHECK(nccl->ops->barrier(nccl, &err) == DG_OK);
            dg_comm_free(nccl);
        }
        dg_comm_free(mpi);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_cuda_nccl: %d ranks, %d failures\n", size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
