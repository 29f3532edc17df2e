/* link_probe -- measures the link between ranks 0 and 1 (MPI, 2 ranks) and checks
 * it against what tests/two-nodes.sh was asked for.
 *
 *   link_probe DELAY_US RATE_MBIT      (RATE_MBIT 0: unshaped)
 *
 * Round trip: the median of 50 one-byte ping-pongs must be at least twice the
 * one-way delay and at most that plus 20 ms (a loaded 2-core machine).
 * Rate: 8 MiB sent one way (then a one-byte reply) must not arrive faster than
 * the rate allows (5 % slack), and not below a tenth of it. Prints the figures
 * and a verdict line before MPI_Finalize; exits 1 when a check fails.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PINGS 50
#define BULK (8u << 20)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rank, size, fail = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: link_probe DELAY_US RATE_MBIT (on exactly 2 ranks, got %d)\n", size);
        MPI_Finalize();
        return 2;
    }
    const double delay_us = atof(argv[1]), rate_mbit = atof(argv[2]);
    const int peer = 1 - rank;
    char byte = 0;
    char *bulk = calloc(BULK, 1);
    double rtt[PINGS];
    if (!bulk) {
        fprintf(stderr, "link_probe: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Warm the connection (Open MPI's TCP BTL connects lazily). */
    MPI_Sendrecv_replace(bulk, 1 << 16, MPI_CHAR, peer, 0, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < PINGS; i++) {
        double t = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(&byte, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(&byte, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&byte, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&byte, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
        rtt[i] = (MPI_Wtime() - t) * 1e6;
    }
    double t = MPI_Wtime();
    if (rank == 0) {
        MPI_Send(bulk, BULK, MPI_CHAR, 1, 2, MPI_COMM_WORLD);
        MPI_Recv(&byte, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(bulk, BULK, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&byte, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    }
    double bulk_s = MPI_Wtime() - t;

    if (rank == 0) {
        qsort(rtt, PINGS, sizeof rtt[0], cmp_double);
        const double med = rtt[PINGS / 2];
        const double mbit = BULK * 8.0 / bulk_s / 1e6;
        printf("link_probe: round trip median %.0f us (min %.0f, max %.0f), asked 2 x %.0f us\n",
               med, rtt[0], rtt[PINGS - 1], delay_us);
        printf("link_probe: 8 MiB one way at %.0f Mbit/s, asked %s%.0f\n", mbit,
               rate_mbit > 0 ? "" : "unshaped: ", rate_mbit);
        if (med < 2 * delay_us) {
            printf("link_probe: FAIL: round trip %.0f us is below the 2 x %.0f us asked\n", med, delay_us);
            fail = 1;
        }
        if (med > 2 * delay_us + 20000) {
            printf("link_probe: FAIL: round trip %.0f us is far above the 2 x %.0f us asked\n", med, delay_us);
            fail = 1;
        }
        if (rate_mbit > 0 && mbit > 1.05 * rate_mbit) {
            printf("link_probe: FAIL: %.0f Mbit/s is above the rate asked (%.0f)\n", mbit, rate_mbit);
            fail = 1;
        }
        if (rate_mbit > 0 && mbit < rate_mbit / 10) {
            printf("link_probe: FAIL: %.0f Mbit/s is below a tenth of the rate asked (%.0f)\n", mbit, rate_mbit);
            fail = 1;
        }
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* Before MPI_Finalize, which MPICH 4.0 over UCX/TCP sometimes never
     * leaves (tests/two_nodes_link.sh reads this line). */
    if (rank == 0) printf("link_probe: verdict: %s\n", fail ? "FAIL" : "PASS"), fflush(stdout);
    free(bulk);
    MPI_Finalize();
    return fail;
}
