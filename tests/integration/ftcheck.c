/* phx-ftcheck: failure-handling checks through the public API, with fault
 * tolerance on (PHX_FT=1). It registers phx_on_failure: it handles failures
 * itself, so a run that lost nodes and printed its lines exits 0.
 *
 *   phx-ftcheck ack
 *     One acknowledged-failures state. Every node agrees
 *     once; the last rank dies; every survivor waits for its notice,
 *     acknowledges it with phx_failure_ack and agrees again: the agreement
 *     must see the acknowledgement, and so must a shrink and an agreement on
 *     the shrunk group. One line per survivor:
 *       ftcheck rank R: unacked=1 acked=1 after=0 agree=0 failed=0 shrink=0 failed=0 size=S
 *
 *   phx-ftcheck lose FIRST COUNT PHASE
 *     Ranks FIRST..FIRST+COUNT-1 die together at agreement 1, PHASE before
 *     (never contribute), sent (right after their contribution left) or
 *     decided (on learning the decision). Every survivor then waits until
 *     its own detector has noticed all of them (the job ends only after
 *     that: a detector that never converges hangs the run, which the test's
 *     timeout reports), agrees once more and prints
 *       ftcheck rank R: dead=[sorted ranks] agree=RC failed=K value=0x...
 *     (identical at every survivor but for R).
 * Each mode ends with one more agreement, whose code is the exit code. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/phx_err.h"
#include "core/phalanx.h"

static int node_type;
static int lose_first = -1, lose_count, lose_before;

static void on_failure(void *arg, int node, uint32_t inc, uint64_t when_ns)
{
    (void)arg; (void)node; (void)inc; (void)when_ns;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void wait_dead(int k)
{
    int dead[64];
    struct timespec ms = { 0, 1000000 };
    while (phx_failed_nodes(dead, 64) < k)   /* the test's timeout bounds this */
        nanosleep(&ms, NULL);
}

/* Returns the group the last agreement runs on. */
static phx_group_t *check_ack(phx_ctx_t *c, phx_group_t *w)
{
    int me = phx_rank(c), dead[64];
    phx_group_t *ng = NULL;
    if (me == phx_size(c) - 1)
        raise(SIGKILL);
    wait_dead(1);
    int unacked = phx_failures_unacked(), acked = phx_failure_ack(), after = phx_failures_unacked();
    uint64_t v = 1ull << me;
    int rc = phx_agree(c, w, &v, PHX_OP_OR);
    int nf = phx_agree_failed(c, w, dead, 64);
    int src = phx_shrink(c, w, &ng);
    int nf2 = phx_agree_failed(c, w, dead, 64);
    printf("ftcheck rank %d: unacked=%d acked=%d after=%d agree=%d failed=%d shrink=%d "
           "failed=%d size=%d\n", me, unacked, acked, after, rc, nf, src, nf2,
           ng ? phx_group_size(ng) : -1);
    return ng;
}

static phx_group_t *check_lose(phx_ctx_t *c, phx_group_t *w)
{
    int me = phx_rank(c), dead[64];
    int mine = me >= lose_first && me < lose_first + lose_count;
    if (mine && lose_before)
        raise(SIGKILL);
    uint64_t v = 1ull << me;
    (void)phx_agree(c, w, &v, PHX_OP_OR);   /* agreement 1: the dying ones die in it */
    wait_dead(lose_count);
    int k = phx_failed_nodes(dead, 64);
    qsort(dead, (size_t)(k < 64 ? k : 64), sizeof *dead, cmp_int);
    char list[512];
    size_t off = 0;
    for (int i = 0; i < k && i < 64; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? "," : "", dead[i]);
    list[off] = 0;
    v = 1ull << me;
    int rc = phx_agree(c, w, &v, PHX_OP_OR);
    int nf = phx_agree_failed(c, w, dead, 64);
    printf("ftcheck rank %d: dead=[%s] agree=%d failed=%d value=0x%llx\n", me, list, rc, nf,
           (unsigned long long)v);
    return w;
}

static void run_node(phx_ctx_t *c)
{
    phx_group_t *w = phx_group_world();
    uint64_t v = 1ull << phx_rank(c);
    if (phx_agree(c, w, &v, PHX_OP_OR) != 0) {
        fprintf(stderr, "ftcheck: rank %d: the failure-free agreement failed\n", phx_rank(c));
        phx_exit(c, 1);
        return;
    }
    phx_group_t *g = lose_first < 0 ? check_ack(c, w) : check_lose(c, w);
    fflush(stdout);
    v = 1;
    int rc = g ? phx_agree(c, g, &v, PHX_OP_AND) : -1;
    phx_exit(c, rc == 0 || rc == PHX_EPROCFAIL ? 0 : 1);
}

static void node_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    run_node(c);
}

/* Rank 0's main task is its node task too. */
static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    for (int r = 1; r < phx_size(c); r++)
        if (phx_spawn_on(c, node_type, r, NULL, 0) == PHX_TID_NONE) {
            fprintf(stderr, "ftcheck: cannot spawn on rank %d\n", r);
            phx_exit(c, 1);
            return;
        }
    run_node(c);
}

static int usage(void)
{
    fprintf(stderr, "usage: phx-ftcheck ack | lose FIRST COUNT before|sent|decided\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!strcmp(argv[1], "lose")) {
        char *e1, *e2;
        if (argc < 5)
            return usage();
        lose_first = (int)strtol(argv[2], &e1, 10);
        lose_count = (int)strtol(argv[3], &e2, 10);
        if (*e1 || *e2 || lose_first < 1 || lose_count < 1 || lose_first + lose_count > 64)
            return usage();   /* rank 0 runs the job's main task: it must live */
        const char *rs = getenv("PHX_RANK");
        int me = rs ? atoi(rs) : 0, point = 0;
        if (!strcmp(argv[4], "before"))
            lose_before = 1;
        else if (!strcmp(argv[4], "sent"))
            point = PHX_AGREE_DIE_SENT;
        else if (!strcmp(argv[4], "decided"))
            point = PHX_AGREE_DIE_DECIDED;
        else
            return usage();
        if (point && me >= lose_first && me < lose_first + lose_count &&
            phx_agree_debug_die(1, point))
            return usage();
    } else if (strcmp(argv[1], "ack") != 0) {
        return usage();
    }
    if (phx_on_failure(on_failure, NULL)) {
        fprintf(stderr, "ftcheck: cannot register the failure callback\n");
        return 1;
    }
    phx_type_t types[2] = { { .name = "ftcheck", .init = node_init },
                            { .name = "ftcheck.main", .init = main_init } };
    node_type = phx_register_type(&types[0]);
    int main_type = phx_register_type(&types[1]);
    if (node_type < 0 || main_type < 0)
        return 1;
    return phx_main(argc, argv, main_type, NULL, 0);
}
