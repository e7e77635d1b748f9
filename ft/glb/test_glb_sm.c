/* Deterministic simulation of P GLB state machines in one process: a toy
 * bag (a binary tree of depth D, 2^(D+1)-1 nodes, on rank 0, plus a 7-node
 * subtree statically on every other rank), per-pair FIFO delivery in
 * a seeded random interleaving, failure notices reaching each survivor at
 * its own random time, and deaths at random steps or at labelled protocol
 * points. Oracle: the root reports exactly that count, or the run aborts
 * where an abort is allowed (a rank and its backup lost together). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/glb/glb_sm.h"
#include "ft/glb/glb_vec.h"

/* ---- toy bag: a stack of node depths ------------------------------------ */
static int D = 12;
static int CURP;                   /* ranks in the current run */

static void *t_new(void *app) { (void)app; return phx_glb_vec_new(1); }
static void t_free(void *app, void *b) { (void)app; phx_glb_vec_free(b); }
/* Rank 0 the root; every other rank a static share (a subtree of depth 2):
 * restores must rebuild initial states too. */
static void t_init(void *app, void *b, int rank, int size)
{
    uint8_t v = rank ? (uint8_t)(D - 2) : 0;
    (void)app; (void)size;
    phx_glb_vec_push(b, &v);
}
static int t_process(void *app, void *bb, int n, uint64_t *res)
{
    phx_glb_vec_t *b = bb;
    (void)app;
    while (n-- > 0 && b->n) {
        uint8_t v = *(uint8_t *)phx_glb_vec_at(b, --b->n);
        res[0]++;
        if (v++ < D) {
            phx_glb_vec_push(b, &v);
            phx_glb_vec_push(b, &v);
        }
    }
    return b->n > 0;
}
static void *t_split(void *app, void *bb)
{
    phx_glb_vec_t *b = bb;
    (void)app;
    return b->n < 2 ? NULL : phx_glb_vec_take_front(b, b->n / 2);
}
static void t_merge(void *app, void *bb, void *ll) { (void)app; phx_glb_vec_merge(bb, ll); }
static int t_empty(void *app, const void *b) { (void)app; return ((const phx_glb_vec_t *)b)->n == 0; }
static size_t t_psize(void *app, const void *b) { (void)app; return 4 + ((const phx_glb_vec_t *)b)->n; }
static void t_enc(const void *item, phx_wenc_t *e) { phx_wenc_u8(e, *(const uint8_t *)item); }
static int t_dec(void *item, phx_wdec_t *d) { *(uint8_t *)item = phx_wdec_u8(d); return 0; }
static void t_pack(void *app, const void *b, phx_wenc_t *e) { (void)app; phx_glb_vec_pack(b, e, t_enc); }
static void *t_unpack(void *app, phx_wdec_t *d) { (void)app; return phx_glb_vec_unpack(d, 1, 1, t_dec); }
static void t_reduce(void *app, uint64_t *acc, const uint64_t *r) { (void)app; acc[0] += r[0]; }

static const phx_glb_ops_t OPS = {
    .result_words = 1, .bag_new = t_new, .bag_free = t_free, .bag_init = t_init, .process = t_process,
    .split = t_split, .merge = t_merge, .is_empty = t_empty, .pack_size = t_psize, .pack = t_pack,
    .unpack = t_unpack, .reduce = t_reduce,
};

/* ---- the simulated network ---------------------------------------------- */
#define MAXN 16
typedef struct smsg { int src, dst; size_t len; uint8_t *b; struct smsg *next; } smsg_t;
typedef struct sim {
    int p, dead[MAXN], noticed[MAXN][MAXN], finished, aborted, finisher;
    int root_replies;           /* wave replies taken in by rank 0 ("WR") */
    uint64_t result, rng, now;
    phx_glb_sm_t *n[MAXN];
    smsg_t *q;                  /* all messages in flight, send order */
    int nq;
    /* death at a labelled point */
    const char *die_label; int die_rank, die_nth, die_count;
    int die_pair;               /* also kill this rank at the same moment (-1 none) */
    int chain_max;              /* R5 at any rank 2..chain_max kills it (sequential kills) */
    int kill_root_finish;       /* rank 0 dies right after its finish (its report got out) */
    uint64_t root_result;       /* what that finish reported */
    uint64_t leave_at[MAXN];    /* step at which rank r is told to drain (0 = never) */
    int left[MAXN];             /* r drained and exited (no tail lost: a clean exit) */
    char why[200];
} sim_t;

typedef struct ioctx { sim_t *s; int rank; } ioctx_t;
static ioctx_t IOC[MAXN];
static phx_glb_sm_stats_t TOT;     /* summed over runs: proves the paths ran */

static uint64_t srnd(sim_t *s)
{
    s->rng ^= s->rng << 13; s->rng ^= s->rng >> 7; s->rng ^= s->rng << 17;
    return s->rng;
}

/* A death loses a random tail of what the node sent to each peer (its
 * outbox and socket buffers), keeping per-pair FIFO order. */
static uint64_t srnd(sim_t *s);
static void kill_node(sim_t *s, int r)
{
    if (s->dead[r])
        return;
    s->dead[r] = 1;
    if (getenv("SIMDBG"))
        fprintf(stderr, "kill %d at %llu\n", r, (unsigned long long)s->now);
    int cut[MAXN] = { 0 }, keep[MAXN];
    for (int d = 0; d < MAXN; d++)
        keep[d] = (int)(srnd(s) % 4);   /* messages to d that still get out */
    for (smsg_t **pp = &s->q; *pp;) {
        smsg_t *m = *pp;
        if (m->src == r && (cut[m->dst] || keep[m->dst]-- <= 0)) {
            cut[m->dst] = 1;
            *pp = m->next;
            s->nq--;
            free(m->b);
            free(m);
        } else {
            pp = &m->next;
        }
    }
}

static void io_send(void *c, int dst, const uint8_t *buf, size_t len)
{
    ioctx_t *x = c;
    sim_t *s = x->s;
    if (s->dead[x->rank])
        return;                 /* a dead node sends nothing */
    smsg_t *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->src = x->rank, m->dst = dst, m->len = len;
    m->b = malloc(len);
    memcpy(m->b, buf, len);
    smsg_t **pp = &s->q;
    while (*pp)
        pp = &(*pp)->next;
    *pp = m;
    s->nq++;
}
static void io_point(void *c, const char *label)
{
    ioctx_t *x = c;
    sim_t *s = x->s;
    if (x->rank == 0 && !strcmp(label, "WR"))
        s->root_replies++;
    if (s->chain_max && !strcmp(label, "R5") && x->rank >= 2 && x->rank <= s->chain_max) {
        kill_node(s, x->rank);
        return;
    }
    if (!s->die_label || strcmp(label, s->die_label) || x->rank != s->die_rank || s->dead[x->rank])
        return;
    if (++s->die_count == s->die_nth) {
        kill_node(s, x->rank);
        if (s->die_pair >= 0)
            kill_node(s, s->die_pair);
    }
}
static void io_finish(void *c, const uint64_t *r)
{
    ioctx_t *x = c;
    if (x->s->dead[x->rank])
        return;                 /* killed at a point inside this call */
    if (x->s->kill_root_finish && x->rank == 0) {
        x->s->root_result = r[0];
        kill_node(x->s, 0);     /* before the job's end reached anyone */
        return;
    }
    x->s->finished = 1;
    x->s->finisher = x->rank;
    x->s->result = r[0];
}
static void io_abort(void *c, const char *why)
{
    ioctx_t *x = c;
    if (x->s->dead[x->rank])
        return;
    x->s->aborted = 1;
    snprintf(x->s->why, sizeof x->s->why, "%s", why);
}

/* Delivers one message: a random pair's oldest (per-pair FIFO). */
static void deliver(sim_t *s)
{
    int k = (int)(srnd(s) % (uint64_t)s->nq);
    smsg_t **pp = &s->q;
    for (int i = 0; i < k; i++)
        pp = &(*pp)->next;
    int src = (*pp)->src, dst = (*pp)->dst;
    pp = &s->q;             /* the oldest message of that pair */
    while ((*pp)->src != src || (*pp)->dst != dst)
        pp = &(*pp)->next;
    smsg_t *m = *pp;
    *pp = m->next;
    s->nq--;
    if (!s->dead[m->dst])
        phx_glb_sm_recv(s->n[m->dst], m->src, m->b, m->len, s->now);
    free(m->b);
    free(m);
}

static void sim_init(sim_t *s, int p, uint64_t seed, int ft)
{
    phx_glb_cfg_t cfg = { .ft = ft, .n = 7, .k = 3, .timeout_ms = 1 << 30 };
    s->p = p;
    CURP = p;
    s->rng = seed * 2654435761u + 1;
    for (int r = 0; r < p; r++) {
        IOC[r] = (ioctx_t){ s, r };
        phx_glb_io_t io = { &IOC[r], io_send, io_point, io_finish, io_abort };
        s->n[r] = phx_glb_sm_new(&cfg, &OPS, NULL, r, p, &io, seed);
        assert_non_null(s->n[r]);
    }
    for (int r = 0; r < p; r++)
        phx_glb_sm_start(s->n[r], 0);
}

/* Runs until finish/abort. kill_at[r] = step at which r dies (0 = never). */
static void sim_loop(sim_t *s, const uint64_t *kill_at)
{
    int p = s->p;
    for (uint64_t it = 1; !s->finished && !s->aborted; it++) {
        assert_true(it < 20000000);
        s->now = it * 1000;
        for (int r = 0; r < p; r++) {
            if (kill_at && kill_at[r] == it)
                kill_node(s, r);
            if (s->leave_at[r] == it && !s->dead[r]) {
                int rc = phx_glb_sm_leave(s->n[r], s->now);
                assert_true(rc == 0 || rc == PHX_EAGAIN || rc == PHX_EINVAL);
            }
        }
        uint64_t c = srnd(s) % 8;
        if (c < 4 && s->nq) {
            deliver(s);
        } else if (c < 7) {
            int r = (int)(srnd(s) % (uint64_t)p);
            if (!s->dead[r])
                phx_glb_sm_step(s->n[r], s->now);
            if (!s->dead[r] && phx_glb_sm_left(s->n[r])) {
                s->dead[r] = s->left[r] = 1;    /* exits; what it sent still arrives */
                if (getenv("SIMDBG"))
                    fprintf(stderr, "left %d at %llu\n", r, (unsigned long long)s->now);
            }
        } else {
            /* a notice of some dead rank reaches some live rank */
            int d = (int)(srnd(s) % (uint64_t)p), r = (int)(srnd(s) % (uint64_t)p);
            if (s->dead[d] && !s->dead[r] && !s->noticed[r][d]) {
                s->noticed[r][d] = 1;
                phx_glb_sm_dead(s->n[r], d, s->now);
            }
        }
    }
}

static void sim_end(sim_t *s)
{
    int p = s->p;
    while (s->q) {
        smsg_t *m = s->q;
        s->q = m->next;
        free(m->b);
        free(m);
    }
    for (int r = 0; r < p; r++) {
        phx_glb_sm_stats_t x;
        phx_glb_sm_get_stats(s->n[r], &x);
        TOT.handovers += x.handovers;
        TOT.adoptions += x.adoptions, TOT.readopted += x.readopted, TOT.queries += x.queries;
        TOT.orphans += x.orphans, TOT.steals_ok += x.steals_ok, TOT.steal_backups += x.steal_backups;
        phx_glb_sm_free(s->n[r]);
    }
}

static void run(sim_t *s, int p, uint64_t seed, int ft, const uint64_t *kill_at)
{
    sim_init(s, p, seed, ft);
    sim_loop(s, kill_at);
    sim_end(s);
}

static uint64_t expect(void) { return (2ull << D) - 1 + (uint64_t)(CURP - 1) * 7; }

/* Runs and requires the exact count (no abort allowed). */
static void run_exact(sim_t *s, int p, uint64_t seed, int ft, const uint64_t *k, const char *what)
{
    run(s, p, seed, ft, k);
    if (s->aborted)
        fail_msg("%s seed %d: aborted: %s", what, (int)seed, s->why);
    assert_int_equal(s->result, expect());
}

static void test_no_failure(void **st)
{
    (void)st;
    for (int ft = 0; ft <= 1; ft++)
        for (int p = 1; p <= 8; p++)
            for (uint64_t seed = 1; seed <= 4; seed++) {
                sim_t s = { .die_pair = -1 };
                run_exact(&s, p, seed, ft, NULL, __func__);
            }
}

static void test_one_random_kill(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        int p = 2 + (int)(seed % 7);
        k[1 + seed % (uint64_t)(p - 1)] = 50 + (seed * 7919) % 3000;
        run_exact(&s, p, seed, 1, k, __func__);
    }
    fprintf(stderr, "adoptions %llu readopted %llu queries %llu orphans %llu steals %llu stlbk %llu\n",
            (unsigned long long)TOT.adoptions, (unsigned long long)TOT.readopted,
            (unsigned long long)TOT.queries, (unsigned long long)TOT.orphans,
            (unsigned long long)TOT.steals_ok, (unsigned long long)TOT.steal_backups);
    assert_true(TOT.adoptions > 200 && TOT.readopted > 0 && TOT.queries > 0 && TOT.orphans > 0);
}

/* Deaths in the first steps, before the first backup may have landed. */
static void test_early_kill(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        int p = 2 + (int)(seed % 7);
        k[1 + seed % (uint64_t)(p - 1)] = 1 + seed % 40;
        run_exact(&s, p, seed, 1, k, __func__);
    }
}

static void test_two_nonadjacent(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        int p = 6 + (int)(seed % 3);
        uint64_t t = 50 + (seed * 104729) % 3000;
        k[1 + seed % 2] = t;                        /* 1 or 2 */
        k[4] = t + (seed % 3) * 300;                /* never adjacent to 1 or 2 */
        run_exact(&s, p, seed, 1, k, __func__);
    }
}

static void test_rank_and_backup(void **st)
{
    (void)st;
    int aborts = 0;
    for (uint64_t seed = 1; seed <= 100; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        k[2] = k[3] = 200 + (seed * 7919) % 2000;
        run(&s, 5, seed, 1, k);
        if (s.aborted) {
            aborts++;
            assert_non_null(strstr(s.why, "unrecoverable: lost rank 2 and its backup at 3"));
        } else {
            assert_int_equal(s.result, expect());   /* rank 2 already idle and empty, say */
        }
    }
    assert_true(aborts > 50);
}

static void test_sequential_kills(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        /* N-2 of 7 one after another: 1 dies, then each next rank dies once
         * it has adopted its predecessor and backed that up (R5). */
        sim_t s = { .die_pair = -1, .chain_max = 5 };
        uint64_t k[MAXN] = { 0 };
        k[1] = 100 + seed * 13;
        run_exact(&s, 7, seed, 1, k, __func__);
    }
}

/* A death at each labelled point of the steal and backup protocols: exact.
 * Deaths at restore points (R1, R2) are a second failure next to the first
 * (the adopter dies before its state is backed up): exact or a clean abort. */
static void test_points(void **st)
{
    (void)st;
    static const char *single[] = { "V1", "V2", "T1", "T3", "B1", "W", "P" };
    for (size_t l = 0; l < sizeof single / sizeof *single; l++)
        for (uint64_t seed = 1; seed <= 40; seed++) {
            sim_t s = { .die_pair = -1, .die_label = single[l] };
            s.die_rank = 1 + (int)(seed % 5);
            s.die_nth = 1 + (int)(seed % 3);
            run_exact(&s, 6, seed, 1, NULL, single[l]);
        }
    static const char *restore[] = { "R1", "R2" };
    for (size_t l = 0; l < 2; l++)
        for (uint64_t seed = 1; seed <= 40; seed++) {
            sim_t s = { .die_pair = -1, .die_label = restore[l], .die_nth = 1 };
            uint64_t k[MAXN] = { 0 };
            k[2] = 300 + seed * 37;
            s.die_rank = 3;
            run(&s, 6, seed, 1, k);
            if (s.aborted)
                assert_non_null(strstr(s.why, "unrecoverable: lost rank"));
            else
                assert_int_equal(s.result, expect());
        }
}

/* ---- scripted schedules -------------------------------------------------- */

/* Delivers the oldest message from src to dst (one must be queued). */
static void deliver_pair(sim_t *s, int src, int dst)
{
    smsg_t **pp = &s->q;
    while (*pp && ((*pp)->src != src || (*pp)->dst != dst))
        pp = &(*pp)->next;
    assert_non_null(*pp);
    smsg_t *m = *pp;
    *pp = m->next;
    s->nq--;
    if (!s->dead[m->dst])
        phx_glb_sm_recv(s->n[m->dst], m->src, m->b, m->len, s->now);
    free(m->b);
    free(m);
}

static void deliver_all(sim_t *s)
{
    while (s->q)
        deliver_pair(s, s->q->src, s->q->dst);
}

/* A steal request as the thief's machine would send it (wire: M_STEAL = 1,
 * then 1 for a lifeline request). */
static void steal_from(sim_t *s, int victim, int thief, int lifeline)
{
    uint8_t m[2] = { 1, (uint8_t)lifeline };
    phx_glb_sm_recv(s->n[victim], thief, m, sizeof m, s->now);
}

/* The endphase wrong result (it_uts, --glb-die=W): two gifts from one victim
 * to one thief left in the reverse of their tan order, so the thief's got
 * row (max tan per victim) claimed the older gift before it arrived. The
 * thief died with only the newer one backed up; the victim asked the
 * adopter about the older one, heard "got it" and dropped it: work counted
 * zero times. Here: victim 0 makes gift A for 2, then B and C (random and
 * lifeline request) for 3, both waiting on the same backup; A's Tend drops
 * it, which reorders the open list; the backup ack releases B and C
 * together. Thief 3 merges the first to arrive, backs up at 4, merges the
 * second and dies. The result must stay exact. */
static void test_gift_order(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        sim_t s = { .die_pair = -1 };
        sim_init(&s, 5, seed, 1);
        deliver_all(&s);                        /* initial backups, acks */
        for (int i = 0; i < 3; i++) {           /* grow 0's bag */
            phx_glb_sm_step(s.n[0], 0);
            deliver_all(&s);
        }
        steal_from(&s, 0, 2, 0);                /* A: steal backup in flight */
        steal_from(&s, 0, 3, 0);                /* B, C wait for the next one */
        steal_from(&s, 0, 3, 1);
        deliver_pair(&s, 0, 1);                 /* backup; ack releases A */
        deliver_pair(&s, 1, 0);
        deliver_pair(&s, 0, 2);                 /* 2 merges A, backs up at 3 */
        deliver_pair(&s, 2, 3);
        deliver_pair(&s, 3, 2);                 /* ... then Tends A */
        deliver_pair(&s, 2, 0);
        phx_glb_sm_step(s.n[0], 0);             /* the backup covering B and C */
        deliver_pair(&s, 0, 1);
        deliver_pair(&s, 1, 0);                 /* releases B and C at once */
        deliver_pair(&s, 0, 3);                 /* 3 merges the first gift */
        deliver_pair(&s, 3, 4);                 /* its backup lands at 4 */
        deliver_pair(&s, 0, 3);                 /* the second, not backed up */
        phx_glb_sm_stats_t x;
        phx_glb_sm_get_stats(s.n[3], &x);
        assert_int_equal(x.steals_ok, 2);
        kill_node(&s, 3);
        sim_loop(&s, NULL);
        sim_end(&s);
        if (s.aborted)
            fail_msg("seed %d: aborted: %s", (int)seed, s.why);
        assert_int_equal(s.result, expect());
    }
}

/* Deaths at every labelled point on 8 ranks, the size of it_uts. */
static void test_points_p8(void **st)
{
    (void)st;
    static const char *single[] = { "V1", "V2", "T1", "T3", "B1", "W", "P" };
    for (size_t l = 0; l < sizeof single / sizeof *single; l++)
        for (uint64_t seed = 1; seed <= 150; seed++) {
            sim_t s = { .die_pair = -1, .die_label = single[l] };
            s.die_rank = 1 + (int)(seed % 7);
            s.die_nth = 1 + (int)(seed / 7 % 3);
            run_exact(&s, 8, seed, 1, NULL, single[l]);
        }
}

/* Rank 0 holds the whole tree at the start and is the first reduction
 * root; its loss must cost nothing but time: its state is backed up like
 * any node's, and the root role moves to the lowest live rank. Deaths
 * before its initial backup landed (restored from bag_init), in the first
 * steps, mid-run, at every labelled point of a steal as victim and thief,
 * as a Back, and during the final termination wave; then the new root
 * lost too. Always exact, reported by a survivor. */
static void run_root_exact(sim_t *s, int p, uint64_t seed, const uint64_t *k, const char *what)
{
    run_exact(s, p, seed, 1, k, what);
    assert_true(s->dead[0]);
    assert_int_not_equal(s->finisher, 0);
}

static void test_root_loss(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        k[0] = 1 + seed % 40;               /* before its first steal or backup */
        run_root_exact(&s, 2 + (int)(seed % 7), seed, k, "root early");
    }
    for (uint64_t seed = 1; seed <= 200; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        k[0] = 50 + (seed * 7919) % 3000;   /* mid-run */
        run_root_exact(&s, 2 + (int)(seed % 7), seed, k, "root mid-run");
    }
    static const char *pts[] = { "V1", "V2", "T1", "T3", "B1", "P" };
    for (size_t l = 0; l < sizeof pts / sizeof *pts; l++)
        for (uint64_t seed = 1; seed <= 60; seed++) {
            sim_t s = { .die_pair = -1, .die_label = pts[l], .die_rank = 0 };
            s.die_nth = 1 + (int)(seed % 3);
            int p = seed % 2 ? 8 : 4;
            run(&s, p, seed, 1, NULL);
            if (s.aborted)
                fail_msg("%s seed %d: aborted: %s", pts[l], (int)seed, s.why);
            assert_int_equal(s.result, expect());
            if (s.dead[0])      /* the point was reached (P: not always 3 times) */
                assert_int_not_equal(s.finisher, 0);
        }
}

/* Rank 0 dies while its final wave is being answered: a fault-free run
 * counts rank 0's wave replies (the simulation is deterministic per seed),
 * then the same seed again kills it at the first and at the last reply of
 * its final wave. The next root starts its waves from scratch. */
static void test_root_final_wave(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        int p = 2 + (int)(seed % 7);
        sim_t f = { .die_pair = -1 };
        run_exact(&f, p, seed, 1, NULL, "root wave fault-free");
        assert_int_equal(f.finisher, 0);
        assert_true(f.root_replies >= p - 1);
        int nth[2] = { f.root_replies - (p - 1) + 1, f.root_replies };
        for (int i = 0; i < 2; i++) {
            sim_t s = { .die_pair = -1, .die_label = "WR", .die_rank = 0, .die_nth = nth[i] };
            run_root_exact(&s, p, seed, NULL, "root final wave");
        }
    }
}

/* The new root lost too: rank 0 dies, rank 1 adopts it (its backup, or
 * its initial state when rank 0 died before its first backup landed) and
 * backs that up (R5), then dies; rank 2 adopts both and reduces. */
static void test_root_chain(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        sim_t s = { .die_pair = -1, .die_label = "R5", .die_rank = 1, .die_nth = 1 };
        uint64_t k[MAXN] = { 0 };
        k[0] = seed % 2 ? 1 + seed % 5 : 20 + (seed * 7919) % 2000;
        run_root_exact(&s, 4 + (int)(seed % 5), seed, k, "root chain");
        assert_true(s.dead[1]);
        assert_true(s.finisher >= 2);
    }
}

/* Rank 0 dies right after its finish (it printed the result, the job's
 * end had not left it): the survivors adopt its backed-up state and the
 * next root decides again, with the same count. */
static void test_root_after_finish(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        sim_t s = { .die_pair = -1, .kill_root_finish = 1 };
        run_root_exact(&s, 2 + (int)(seed % 7), seed, NULL, "root after finish");
        assert_int_equal(s.root_result, expect());
    }
}

/* Rank 0 lost together with its Back (rank 1): nobody holds rank 0's
 * state, so the job must end naming that loss (or be exact, when it had
 * already finished). At rank 0's P points both die in the same step
 * (rank 0 holds counted work then: an abort is the only honest end);
 * at a random step, as often as the root's loss alone is survived. */
static void test_root_and_backup(void **st)
{
    (void)st;
    int aborts = 0;
    for (uint64_t seed = 1; seed <= 100; seed++) {
        sim_t s = { .die_pair = -1 };
        uint64_t k[MAXN] = { 0 };
        k[0] = k[1] = 1 + (seed * 7919) % 2000;
        run(&s, 3 + (int)(seed % 6), seed, 1, k);
        if (s.aborted) {
            aborts++;
            assert_non_null(strstr(s.why, "unrecoverable: lost rank 0 and its backup at 1"));
        } else {
            assert_int_equal(s.result, expect());
            assert_true(!s.dead[0] || s.finisher >= 2);
        }
    }
    assert_true(aborts > 50);
    int landed = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        sim_t s = { .die_pair = 1, .die_label = "P", .die_rank = 0, .die_nth = 1 + (int)(seed % 2) };
        run(&s, 3 + (int)(seed % 6), seed, 1, NULL);
        if (!s.dead[0]) {       /* finished before its P point came round */
            assert_int_equal(s.result, expect());
            continue;
        }
        landed++;
        if (!s.aborted)
            fail_msg("root+back seed %d: finished (%llu) without rank 0's state", (int)seed,
                     (unsigned long long)s.result);
        assert_non_null(strstr(s.why, "unrecoverable: lost rank 0 and its backup at 1"));
    }
    assert_true(landed > 40);
}

/* Drain: one node is told to leave at a random step; it hands its whole
 * state over in a final backup and exits, and the others take it over at
 * its notice. Exact, one handover, no adoption (nothing recomputed), on
 * 2..8 ranks, rank 0 included (the root role moves on), with the leaver's
 * messages racing steals, gifts and waves under random interleavings. */
static void test_drain(void **st)
{
    (void)st;
    int lefts = 0, lefts_taken = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        int p = 2 + (int)(seed % 7);
        sim_t s = { .die_pair = -1 };
        int r = (int)(seed % (uint64_t)p);
        s.leave_at[r] = 1 + (seed * 7919) % 4000;
        phx_glb_sm_stats_t before = TOT;
        run_exact(&s, p, seed, 1, NULL, __func__);
        assert_int_equal(TOT.adoptions, before.adoptions);
        assert_true(TOT.handovers - before.handovers <= (uint64_t)s.left[r]);
        lefts_taken += TOT.handovers > before.handovers;
        lefts += s.left[r];
    }
    assert_true(lefts > 200 && lefts_taken > 150);   /* most runs drain before the end */
}

/* Two neighbours drained at once (r and its Back r+1, told a few steps
 * apart, either first): the Back waits for r's BYE, takes r's final state
 * over and hands both on. Exact, no adoption, two handovers. */
static void test_drain_two(void **st)
{
    (void)st;
    int both = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        int p = 3 + (int)(seed % 6);
        sim_t s = { .die_pair = -1 };
        int r = (int)(seed % (uint64_t)p), b = (r + 1) % p;
        uint64_t at = 1 + (seed * 7919) % 3000, d = seed % 50;
        s.leave_at[r] = seed % 2 ? at : at + d;
        s.leave_at[b] = seed % 2 ? at + d : at;
        phx_glb_sm_stats_t before = TOT;
        run_exact(&s, p, seed, 1, NULL, __func__);
        assert_int_equal(TOT.adoptions, before.adoptions);
        both += s.left[r] && s.left[b] && TOT.handovers - before.handovers == 2;
    }
    assert_true(both > 100);
}

/* Drain with a failure of another node during the leave: a node that is
 * neither the leaver's Back nor the node whose backup the leaver holds
 * dies a few steps after the request: exact (one handover, one adoption).
 * The leaver's Back dies then: exact, or the clean abort when it had acked
 * the final backup before dying (the leaver and its backup are both gone).
 * The node backed up at the leaver dies then: exact, or the clean abort
 * when it died after the leaver left and before it had re-made its backup
 * at its next Back (the backups a leaver holds are not re-homed before it
 * leaves: the same double loss as a crash of the leaver). */
static void test_drain_and_failure(void **st)
{
    (void)st;
    int exact_back = 0, exact_other = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        int p = 4 + (int)(seed % 5);
        int r = (int)(seed % (uint64_t)p), back = (r + 1) % p;
        uint64_t at = 1 + (seed * 7919) % 3000;
        int victim = seed % 3 == 0 ? back : (r + 2 + (int)(seed % (uint64_t)(p - 2))) % p;
        sim_t s = { .die_pair = -1 };
        s.leave_at[r] = at;
        uint64_t k[MAXN] = { 0 };
        k[victim] = at + 1 + seed % 40;
        run(&s, p, seed, 1, k);
        int pred = (r + p - 1) % p;
        if ((victim == back || victim == pred) && s.aborted) {
            if (!strstr(s.why, "unrecoverable: lost rank"))
                fail_msg("%s seed %d: %s", __func__, (int)seed, s.why);
            continue;
        }
        if (s.aborted)
            fail_msg("%s seed %d: aborted: %s", __func__, (int)seed, s.why);
        assert_int_equal(s.result, expect());
        exact_back += victim == back;
        exact_other += victim != back && victim != pred;
    }
    assert_true(exact_back > 30 && exact_other > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_failure),
        cmocka_unit_test(test_one_random_kill),
        cmocka_unit_test(test_early_kill),
        cmocka_unit_test(test_two_nonadjacent),
        cmocka_unit_test(test_rank_and_backup),
        cmocka_unit_test(test_sequential_kills),
        cmocka_unit_test(test_points),
        cmocka_unit_test(test_gift_order),
        cmocka_unit_test(test_points_p8),
        cmocka_unit_test(test_root_loss),
        cmocka_unit_test(test_root_final_wave),
        cmocka_unit_test(test_root_chain),
        cmocka_unit_test(test_root_and_backup),
        cmocka_unit_test(test_root_after_finish),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_drain_and_failure),
        cmocka_unit_test(test_drain_two),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
