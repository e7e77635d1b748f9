/* agree: back-to-back fault-tolerant agreements (ERA) on every node, for
 * tests/integration/test_agree.sh and tools/bench/bench_agree.sh.
 *
 * Usage: agree [-k K] [--op and|or|min|max] [--die RANK:K:PHASE]...
 *              [--shrink] [--bench N] [--bench-fail RANK]
 *   -k K          agreements to run (default 5)
 *   --die R:K:P   rank R kills itself (SIGKILL) at agreement K (0-based
 *                 world agreement id), phase P: before (never contributes),
 *                 sent (right after its contribution left), decided (on
 *                 learning the decision, before forwarding or returning it)
 *   --revoke R:K  rank R revokes the world group before agreement K; from
 *                 then on agreements return EREVOKED (unless they report
 *                 failures) and an allreduce on it fails with EREVOKED
 *   --shrink      after the agreements: shrink the world group, print the
 *                 members, then allreduce (OR of 1<<rank) over the new group
 *   --bench N     N timed agreements and N timed allreduces, alternating
 *   --bench-fail R  after the bench rank R dies; the others time the first
 *                 agreement once the failure is known, and the next one
 *
 * One task per node does all the calls (the collectives' rule). Output, one
 * line per agreement per node:
 *   agree k=K value=0x... failed=[r,...] rc=RC
 * The job ends after a last agreement that every live node joins once it has
 * printed everything: whoever returns from it calls phx_exit(0). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/phx_err.h"
#include "core/phalanx.h"
#include "apps/common/phx_args.h"

#define MAX_DIE 16

typedef struct opts {
    int k, op, shrink, bench, bench_fail, revoke_rank, revoke_k;
    int ndie;
    struct { int rank, k; char phase[16]; } die[MAX_DIE];
} opts_t;

static opts_t O = { .k = 5, .op = PHX_OP_AND, .bench_fail = -1, .revoke_rank = -1 };
static int node_type, main_type;

#define AGREE_USAGE "agree [-k K] [--op and|or|min|max] [--die RANK:K:before|sent|decided]... " \
                    "[--revoke RANK:K] [--shrink] [--bench N] [--bench-fail RANK]"
static const phx_args_t ARGS = {
    "agree", AGREE_USAGE,
    "  -k K            agreements to run (default 5);  --op  how values combine\n"
    "  --die R:K:PHASE rank R dies in agreement K, before it sends, once sent, or once decided\n"
    "  --revoke R:K    rank R revokes agreement K;  --shrink  survivors shrink and go on\n"
    "  --bench N       N timed agreements;  --bench-fail R  rank R dies during them\n"
};
#define BAD(...) phx_args_bad(&ARGS, __VA_ARGS__)

/* A whole number from 0 to 1,000,000 (counts, ranks and agreement ids). */
static int num(const char *a, const char *v, int *out)
{
    return phx_args_int(&ARGS, a, v, 0, 1000000, out);
}

/* "A:B" or "A:B:WORD" with whole numbers A and B. */
static int pair(const char *a, const char *v, int *x, int *y, char *word, size_t wn)
{
    char buf[64], *c1, *c2;
    if (strlen(v) >= sizeof buf)
        return BAD("bad %s '%s'", a, v);
    strcpy(buf, v);
    c1 = strchr(buf, ':');
    c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c1 || (word != NULL) != (c2 != NULL))
        return BAD("bad %s '%s' (%s)", a, v, word ? "RANK:K:PHASE" : "RANK:K");
    *c1 = 0;
    if (c2) {
        *c2 = 0;
        if (strlen(c2 + 1) >= wn)
            return BAD("bad phase in %s '%s'", a, v);
        strcpy(word, c2 + 1);
    }
    return num(a, buf, x) || num(a, c1 + 1, y) ? 2 : 0;
}

static int parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {   /* the runtime's; phx_main removes them */
            i += rt - 1;
            continue;
        }
        if (!strcmp(a, "--shrink")) {
            O.shrink = 1;
        } else if (!v) {
            return BAD("%s needs a value", a);
        } else if (!strcmp(a, "-k")) {
            if (num(a, v, &O.k))
                return 2;
            i++;
        } else if (!strcmp(a, "--bench")) {
            if (num(a, v, &O.bench))
                return 2;
            i++;
        } else if (!strcmp(a, "--bench-fail")) {
            if (num(a, v, &O.bench_fail))
                return 2;
            i++;
        } else if (!strcmp(a, "--op")) {
            static const char *ops[] = { "and", "or", "min", "max" };
            O.op = -1;
            for (int j = 0; j < 4; j++)
                if (!strcmp(v, ops[j]))
                    O.op = j;
            if (O.op < 0)
                return BAD("unknown op '%s' (and, or, min or max)", v);
            i++;
        } else if (!strcmp(a, "--revoke")) {
            if (pair(a, v, &O.revoke_rank, &O.revoke_k, NULL, 0))
                return 2;
            i++;
        } else if (!strcmp(a, "--die")) {
            if (O.ndie == MAX_DIE)
                return BAD("at most %d --die", MAX_DIE);
            if (pair(a, v, &O.die[O.ndie].rank, &O.die[O.ndie].k, O.die[O.ndie].phase,
                     sizeof O.die[O.ndie].phase))
                return 2;
            const char *ph = O.die[O.ndie].phase;
            if (strcmp(ph, "before") && strcmp(ph, "sent") && strcmp(ph, "after") && strcmp(ph, "decided"))
                return BAD("unknown phase '%s' (before, sent or decided)", ph);
            O.ndie++, i++;
        } else {
            return BAD("unknown option '%s'", a);
        }
    }
    return 0;
}

/* Failures are this program's subject: it reports them itself, so a job
 * that lost nodes still ends with 0 when every survivor agrees. */
static void on_failure(void *arg, int node, uint32_t inc, uint64_t when_ns)
{
    (void)arg; (void)node; (void)inc; (void)when_ns;
}

static int dies_before(int rank, int k)
{
    for (int i = 0; i < O.ndie; i++)
        if (O.die[i].rank == rank && O.die[i].k == k && !strcmp(O.die[i].phase, "before"))
            return 1;
    return 0;
}

/* A contribution the result can be checked against: each rank owns one bit
 * per iteration (AND clears it, OR sets it); MIN/MAX take a rank-derived
 * number. */
static uint64_t contribution(int rank, int k)
{
    uint64_t bit = 1ull << ((unsigned)(rank + k) % 64);
    switch (O.op) {
    case PHX_OP_AND: return ~bit;
    case PHX_OP_OR: return bit;
    default: return ((uint64_t)k << 32) | (uint64_t)(rank + 1);
    }
}

static const char *rc_name(int rc)
{
    switch (rc) {
    case 0: return "0";
    case PHX_EPROCFAIL: return "EPROCFAIL";
    case PHX_EREVOKED: return "EREVOKED";
    default: return phx_strerror(rc);
    }
}

static void print_list(char *buf, size_t cap, const int *v, int n)
{
    size_t off = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%d", i ? "," : "", v[i]);
    if (off < cap)
        snprintf(buf + off, cap - off, "]");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return (n % 2 ? (double)v[n / 2] : (double)(v[n / 2 - 1] + v[n / 2]) / 2) / 1e3;
}

static void bench(phx_ctx_t *c, phx_group_t *w, int me, int *aid)
{
    uint64_t *ta = malloc((size_t)O.bench * sizeof *ta), *tr = malloc((size_t)O.bench * sizeof *tr);
    if (!ta || !tr)
        abort();
    int bad = 0;
    for (int i = 0; i < O.bench; i++) {
        uint64_t v = contribution(me, i), t0 = phx_now_ns();
        bad |= phx_agree(c, w, &v, O.op) != 0;
        uint64_t t1 = phx_now_ns();
        (*aid)++;
        v = contribution(me, i);
        bad |= phx_allreduce(c, w, &v, O.op) != 0;
        uint64_t t2 = phx_now_ns();
        ta[i] = t1 - t0;
        tr[i] = t2 - t1;
    }
    double ma = median_us(ta, O.bench), mr = median_us(tr, O.bench);
    printf("bench n=%d iters=%d agree_us=%.1f allreduce_us=%.1f ratio=%.2f %s\n", phx_size(c),
           O.bench, ma, mr, ma / mr, bad ? "ERRORS" : "OK");
    fflush(stdout);
    free(ta);
    free(tr);
    if (O.bench_fail < 0)
        return;
    if (me == O.bench_fail)
        raise(SIGKILL);
    /* Wait for the notice, so the timed agreement measures the mended tree
     * and not the detector (the test bounds this wait). */
    int dead[64];
    struct timespec ms = { 0, 1000000 };
    while (phx_failed_nodes(dead, 64) < 1)
        nanosleep(&ms, NULL);
    uint64_t v = contribution(me, 0), t0 = phx_now_ns();
    int rc1 = phx_agree(c, w, &v, O.op);
    uint64_t t1 = phx_now_ns();
    v = contribution(me, 1);
    int rc2 = phx_agree(c, w, &v, O.op);
    uint64_t t2 = phx_now_ns();
    *aid += 2;
    printf("bench_fail n=%d first_us=%.1f rc=%s next_us=%.1f rc=%s\n", phx_size(c),
           (double)(t1 - t0) / 1e3, rc_name(rc1), (double)(t2 - t1) / 1e3, rc_name(rc2));
    fflush(stdout);
}

static void node_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    phx_group_t *w = phx_group_world();
    int me = phx_rank(c), n = phx_size(c);
    int *failed = malloc((size_t)n * sizeof *failed);
    char list[4096];
    int aid = 0, wrong = 0;
    if (!failed)
        abort();
    for (int k = 0; k < O.k; k++, aid++) {
        if (dies_before(me, aid))
            raise(SIGKILL);
        if (me == O.revoke_rank && k == O.revoke_k) {
            int rc = phx_revoke(c, w);
            printf("revoke rc=%d\n", rc);
        }
        uint64_t mine = contribution(me, k), v = mine;
        int rc = phx_agree(c, w, &v, O.op);
        int nf = phx_agree_failed(c, w, failed, n);
        print_list(list, sizeof list, failed, nf < 0 ? 0 : nf);
        /* Participation: our own contribution is in the result. */
        int ok = O.op == PHX_OP_AND ? (v & ~mine) == 0 : O.op == PHX_OP_OR ? (v & mine) == mine
               : O.op == PHX_OP_MIN ? v <= mine : v >= mine;
        wrong |= !ok;
        printf("agree k=%d value=0x%016" PRIx64 " failed=%s rc=%s%s\n", k, v, list, rc_name(rc),
               ok ? "" : " WRONG");
        fflush(stdout);
    }
    if (O.revoke_rank >= 0) {
        uint64_t v = 1;
        int rc = phx_allreduce(c, w, &v, PHX_OP_OR);
        printf("allreduce-revoked rc=%s revoked=%d\n", rc_name(rc), phx_group_revoked(w));
        fflush(stdout);
    }
    if (O.shrink) {
        phx_group_t *ng = NULL;
        int rc = phx_shrink(c, w, &ng);
        aid++;
        if (rc) {
            printf("shrink rc=%d\n", rc);
        } else {
            int m = phx_group_members(ng, failed, n);
            print_list(list, sizeof list, failed, m);
            printf("shrink size=%d members=%s\n", m, list);
            uint64_t v = 1ull << (me % 64), want = 0;
            for (int i = 0; i < m; i++)
                want |= 1ull << (failed[i] % 64);
            rc = phx_allreduce(c, ng, &v, PHX_OP_OR);
            printf("allreduce group=%s value=0x%016" PRIx64 " rc=%d %s\n", list, v, rc,
                   rc == 0 && v == want ? "OK" : "WRONG");
        }
        fflush(stdout);
    }
    if (O.bench)
        bench(c, w, me, &aid);
    free(failed);
    /* Everyone alive printed everything before contributing to this one. */
    uint64_t v = 0;
    int rc = phx_agree(c, w, &v, PHX_OP_AND);
    if (rc == 0 || rc == PHX_EPROCFAIL || rc == PHX_EREVOKED)
        phx_exit(c, wrong);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    for (int r = 0; r < phx_size(c); r++)
        phx_spawn_on(c, node_type, r, NULL, 0);
    phx_task_done(c);
}

int main(int argc, char **argv)
{
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    int rc = parse(argc, argv);
    if (rc)
        return rc;
    if ((rc = phx_on_failure(on_failure, NULL))) {
        fprintf(stderr, "agree: cannot register the failure callback: %s\n", phx_strerror(rc));
        return 1;
    }
    const char *rs = getenv("PHX_RANK");
    int me = rs ? atoi(rs) : 0;
    for (int i = 0; i < O.ndie; i++) {
        if (O.die[i].rank != me)
            continue;
        const char *p = O.die[i].phase;
        if (!strcmp(p, "sent") || !strcmp(p, "after"))
            phx_agree_debug_die((uint64_t)O.die[i].k, PHX_AGREE_DIE_SENT);
        else if (!strcmp(p, "decided"))
            phx_agree_debug_die((uint64_t)O.die[i].k, PHX_AGREE_DIE_DECIDED);
        /* "before": the agreement loop kills the node itself */
    }
    phx_type_t nt = { .name = "agree", .init = node_init };
    phx_type_t mt = { .name = "main", .init = main_init };
    node_type = phx_register_type(&nt);
    main_type = phx_register_type(&mt);
    return phx_main(argc, argv, main_type, NULL, 0);
}
