/*
 * osu.c: the Open MPI side of `cohort bench p2p|bw|allreduce`, the loops of
 * the OSU micro-benchmarks (osu_latency, osu_bw, osu_allreduce) in one
 * small program, so that cohort's figures and Open MPI's come from the same
 * loops with the same warm-up and iteration counts.
 *
 * usage: osu latency|bw|allreduce LOOP SKIP LOOP_LARGE SKIP_LARGE WINDOW SIZE...
 *
 * Sizes above 8192 bytes use LOOP_LARGE and SKIP_LARGE (OSU's
 * LARGE_MESSAGE_SIZE). Rank 0 prints one line per size: the size in bytes
 * and the one-way latency in µs (latency), the bandwidth in MB/s, 10^6
 * bytes per second (bw), or the mean time of one Allreduce of float64 in µs,
 * averaged over the ranks (allreduce).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_MESSAGE_SIZE 8192

static void fail(const char *msg) {
    fprintf(stderr, "osu: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 8) fail("usage: osu latency|bw|allreduce LOOP SKIP LOOP_LARGE SKIP_LARGE WINDOW SIZE...");
    const char *mode = argv[1];
    int loop_small = atoi(argv[2]), skip_small = atoi(argv[3]);
    int loop_large = atoi(argv[4]), skip_large = atoi(argv[5]);
    int window = atoi(argv[6]);
    if (window < 1 || window > 1024) fail("bad window");
    long max = 0;
    for (int a = 7; a < argc; a++) if (atol(argv[a]) > max) max = atol(argv[a]);
    char *sbuf = malloc(max + 8), *rbuf = malloc(max + 8);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * window);
    if (!sbuf || !rbuf || !reqs) fail("out of memory");
    memset(sbuf, 'a', max + 8);
    memset(rbuf, 'b', max + 8);
    int is_lat = !strcmp(mode, "latency"), is_bw = !strcmp(mode, "bw"), is_ar = !strcmp(mode, "allreduce");
    if (!is_lat && !is_bw && !is_ar) fail("unknown mode");
    if ((is_lat || is_bw) && size != 2) fail("latency and bw need exactly 2 ranks");
    for (int a = 7; a < argc; a++) {
        long n = atol(argv[a]);
        int loop = loop_small, skip = skip_small;
        if (n > LARGE_MESSAGE_SIZE) { loop = loop_large; skip = skip_large; }
        MPI_Barrier(MPI_COMM_WORLD);
        double start = 0, total = 0;
        for (int i = 0; i < loop + skip; i++) {
            if (i == skip) { MPI_Barrier(MPI_COMM_WORLD); start = MPI_Wtime(); }
            if (is_lat) {
                if (rank == 0) {
                    MPI_Send(sbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
                }
            } else if (is_bw) {
                if (rank == 0) {
                    for (int j = 0; j < window; j++) MPI_Isend(sbuf, n, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &reqs[j]);
                    MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(rbuf, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int j = 0; j < window; j++) MPI_Irecv(rbuf, n, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &reqs[j]);
                    MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(sbuf, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
                }
            } else {
                double t0 = MPI_Wtime();
                MPI_Allreduce(sbuf, rbuf, n / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                if (i >= skip) total += MPI_Wtime() - t0;
            }
        }
        double elapsed = MPI_Wtime() - start;
        if (is_ar) {
            double mine = total * 1e6 / loop, sum = 0;
            MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) printf("%ld %.3f\n", n, sum / size);
        } else if (rank == 0) {
            if (is_lat) printf("%ld %.3f\n", n, elapsed * 1e6 / (2.0 * loop));
            else printf("%ld %.3f\n", n, (double)n / 1e6 * loop * window / elapsed);
        }
        fflush(stdout);
    }
    free(sbuf); free(rbuf); free(reqs);
    MPI_Finalize();
    return 0;
}
