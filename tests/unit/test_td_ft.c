/* Fault-tolerant termination detectors INDEP, RELLAZY, RELEAGER (ft/termination/td_ds.h)
 * on the shared simulator (td_harness): fault-free oracle runs, the
 * digest's survival table (section 3.5), and randomized failure injection.
 *
 * Scenarios that need a particular configuration (an interior child and its
 * parent, an adopted child, ...) are found in a first pass through the
 * harness's per-step check hook, then replayed with the kills scheduled at
 * that step: the harness is deterministic per cfg, and kills consume no
 * randomness before they fire. Most tests keep drop_prob 0; test_fence and
 * test_chaos_drops lose a dead node's messages, which the send fence makes
 * harmless (README "Send fence"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/termination/td_ds.h"
#include "tests/unit/td_harness.h"

enum { OUT_TERM = 1, OUT_FATAL = 2 };
enum { A_INDEP, A_LAZY, A_EAGER, NALG };
static const phx_td_ops_t *alg(int a)
{
    return a == A_INDEP ? &phx_td_indep_ops : a == A_LAZY ? &phx_td_rellazy_ops
                                                          : &phx_td_releager_ops;
}

static uint64_t rng_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rng_n(uint64_t *x, int n) { return (int)(rng_next(x) % (uint64_t)n); }

static void base_cfg(th_cfg_t *c, const phx_td_ops_t *ops, uint64_t seed, int nmin, int nmax)
{
    uint64_t r = seed * 7919 + 17;
    memset(c, 0, sizeof *c);
    c->ops = ops;
    c->seed = seed;
    c->n = nmin + rng_n(&r, nmax - nmin + 1);
    c->wl = (th_workload_t)rng_n(&r, TH_WL_COUNT);
    c->budget = 1 + rng_n(&r, 160);
    c->live_all = 1;
    c->max_steps = 400000;
}

/* ---- one run, classified ------------------------------------------------ */

typedef struct {
    int outcome;               /* OUT_TERM / OUT_FATAL / 0 = violation */
    char why[300];
    uint64_t steps, primary, dropped;
    uint64_t stat[16];         /* control messages by type, all nodes */
    const char *stat_name[16];
    int nstat;
} run_t;

static void run_cfg(const th_cfg_t *cfg, run_t *o)
{
    th_sim_t *sim;
    th_result_t res;
    memset(o, 0, sizeof *o);
    int rc = th_create(cfg, &sim);
    if (rc < 0) {
        snprintf(o->why, sizeof o->why, "th_create: %d", rc);
        return;
    }
    while (th_step(sim))
        ;
    th_finish(sim, &res);
    int live = 0;
    for (int r = 0; r < cfg->n; r++) {
        void *st = th_state(sim, r);
        if (!st)
            continue;
        live++;
        phx_td_stat_t sv[PHX_TD_MAX_STATS];
        int k = cfg->ops->stats(st, sv, PHX_TD_MAX_STATS);
        o->nstat = k;
        for (int i = 0; i < k; i++) {
            o->stat[i] += sv[i].count;
            o->stat_name[i] = sv[i].name;
        }
    }
    o->steps = res.steps;
    o->primary = res.primary;
    o->dropped = res.dropped;
    if (!res.ok)
        snprintf(o->why, sizeof o->why, "oracle: %s", res.why);
    else if (!res.drained)
        snprintf(o->why, sizeof o->why, "did not drain");
    else if (res.declared && res.fatal)
        snprintf(o->why, sizeof o->why, "both declared (%d) and fatal (%d)", res.declared,
                 res.fatal);
    else if (res.fatal && res.fatal < live)
        snprintf(o->why, sizeof o->why, "fatal reached %d of %d live nodes", res.fatal, live);
    else if (res.fatal)
        o->outcome = OUT_FATAL;
    else if (res.declared >= live)   /* may include nodes killed after declaring */
        o->outcome = OUT_TERM;
    else
        snprintf(o->why, sizeof o->why, "hang: %d of %d declared", res.declared, live);
    th_destroy(sim);
}

static uint64_t stat_of(const run_t *o, const char *name)
{
    for (int i = 0; i < o->nstat; i++)
        if (!strcmp(o->stat_name[i], name))
            return o->stat[i];
    return ~0ull;
}

/* ---- fault-free --------------------------------------------------------- */

#define FF_RUNS 5000

static void fault_free(const phx_td_ops_t *ops)
{
    uint64_t tot_primary = 0, tot_ctrl[16] = { 0 };
    run_t o;
    const char *names[16] = { 0 };
    int nst = 0;
    for (uint64_t seed = 1; seed <= FF_RUNS; seed++) {
        th_cfg_t c;
        base_cfg(&c, ops, seed, 2, 12);
        run_cfg(&c, &o);
        if (o.outcome != OUT_TERM) {
            print_error("%s seed %llu n=%d wl=%d: %s\n", ops->name,
                        (unsigned long long)seed, c.n, (int)c.wl, o.why);
            fail();
        }
        /* no recovery traffic without failures; one announcement per peer */
        assert_int_equal(stat_of(&o, "query") + stat_of(&o, "reply") +
                         stat_of(&o, "notify") + stat_of(&o, "answer") + stat_of(&o, "fatal"), 0);
        assert_int_equal(stat_of(&o, "announce"), (uint64_t)c.n - 1);
        assert_true(stat_of(&o, "ack") <= o.primary);
        assert_true(stat_of(&o, "potential_gc") <= o.primary);
        assert_true(stat_of(&o, "exterior") <= stat_of(&o, "interior"));
        assert_true(stat_of(&o, "interior") <= o.primary);
        tot_primary += o.primary;
        for (int i = 0; i < o.nstat; i++) {
            tot_ctrl[i] += o.stat[i];
            names[i] = o.stat_name[i];
        }
        nst = o.nstat;
    }
    printf("[ff] %-8s %d runs terminated exactly once, %llu primaries; ctrl:", ops->name,
           FF_RUNS, (unsigned long long)tot_primary);
    for (int i = 0; i < nst; i++)
        if (tot_ctrl[i])
            printf(" %s=%llu", names[i], (unsigned long long)tot_ctrl[i]);
    printf("\n");
}

static void test_ff_indep(void **st) { (void)st; fault_free(&phx_td_indep_ops); }
static void test_ff_rellazy(void **st) { (void)st; fault_free(&phx_td_rellazy_ops); }
static void test_ff_releager(void **st) { (void)st; fault_free(&phx_td_releager_ops); }
static void test_ff_base(void **st) { (void)st; fault_free(&phx_td_ds_base_ops); }

/* ---- scenario search through the check hook ----------------------------- */

enum { C_INT_CHILD, C_EXT_CHILD, C_SENT_EDGE, C_NO_EDGE, C_OTHER, NCLS };
static const char *const cls_name[NCLS] = {
    "parent+interior child", "parent+exterior child", "sender+recipient (not child)",
    "no communication", "other",
};

typedef struct probe {
    int n;
    uint64_t step, from;       /* steps seen; search starts at from */
    uint8_t sent[TH_MAX_NODES][TH_MAX_NODES];   /* this engagement of src */
    uint8_t ever[TH_MAX_NODES][TH_MAX_NODES];
    uint64_t rng;
    int mode, want;
    /* result */
    int found;
    uint64_t at;
    int a, b, c;
    int expect[NALG];
    uint64_t root_decl;        /* step the root declared, 0 if not yet */
} probe_t;

static void note_msg(void *arg, int src, int dst, int primary, const uint8_t *d, size_t l)
{
    probe_t *p = arg;
    (void)d;
    (void)l;
    if (primary) {
        p->sent[src][dst] = 1;
        p->ever[src][dst] = 1;
    }
}

/* A send the fence holds counts as sent: the detector has recorded it. */
static void note_held(void *arg, int src, int dst)
{
    note_msg(arg, src, dst, 1, NULL, 0);
}

static int view_of(th_sim_t *sim, int r, phx_ds_view_t *v)
{
    void *st = th_state(sim, r);
    if (!st)
        return 0;
    phx_td_ds_view(st, v);
    return 1;
}

static void track(th_sim_t *sim, probe_t *p)
{
    p->step++;
    th_foreach_msg(sim, note_msg, p);
    th_foreach_held(sim, note_held, p);
    for (int r = 0; r < p->n; r++) {
        phx_ds_view_t v;
        if (view_of(sim, r, &v) && !v.engaged)
            memset(p->sent[r], 0, sizeof p->sent[r]);
        if (r == 0 && view_of(sim, r, &v) && v.terminal == 1 && !p->root_decl)
            p->root_decl = p->step;
    }
}

static int classify_pair(th_sim_t *sim, probe_t *p, int a, int b, int exp[NALG])
{
    phx_ds_view_t va, vb;
    if (!view_of(sim, a, &va) || !view_of(sim, b, &vb))
        return -1;
    int b_child = vb.engaged && vb.parent == a, a_child = va.engaged && va.parent == b;
    int rel_fatal = (b_child && vb.interior) || (a_child && va.interior);
    int indep_fatal = (va.engaged && p->sent[a][b]) || (vb.engaged && p->sent[b][a]);
    exp[A_INDEP] = indep_fatal ? OUT_FATAL : OUT_TERM;
    exp[A_LAZY] = exp[A_EAGER] = rel_fatal ? OUT_FATAL : OUT_TERM;
    if (rel_fatal)
        return C_INT_CHILD;
    if (a_child || b_child)
        return C_EXT_CHILD;
    if (indep_fatal)
        return C_SENT_EDGE;
    if (!p->ever[a][b] && !p->ever[b][a])
        return C_NO_EDGE;
    return C_OTHER;
}

/* mode 1: find a pair of class want (the run has had no failure yet) */
static int check_pair(th_sim_t *sim, void *arg, char *why, size_t len)
{
    probe_t *p = arg;
    (void)why;
    (void)len;
    track(sim, p);
    if (p->found || p->step < p->from)
        return 0;
    int off = rng_n(&p->rng, p->n * p->n);
    for (int k = 0; k < p->n * p->n; k++) {
        int id = (k + off) % (p->n * p->n), a = id / p->n, b = id % p->n;
        int exp[NALG];
        if (a == 0 || b == 0 || a >= b)
            continue;
        if (classify_pair(sim, p, a, b, exp) == p->want) {
            p->found = 1;
            p->at = p->step;
            p->a = a;
            p->b = b;
            memcpy(p->expect, exp, sizeof exp);
            return 0;
        }
    }
    return 0;
}

/* ---- survival table: simultaneous pairs --------------------------------- */

#define PAIR_RUNS 900

static void test_table_pairs(void **st)
{
    (void)st;
    int seen[NALG][NCLS][3] = { { { 0 } } };   /* [alg][class][outcome] */
    int tries = 0, skipped = 0;
    for (int a = 0; a < NALG; a++)
        for (int i = 0; i < PAIR_RUNS; i++) {
            th_cfg_t c;
            base_cfg(&c, alg(a), 50000 + (uint64_t)i, 4, 10);
            if (c.budget < 20)
                c.budget += 40;
            probe_t p = { .n = c.n, .rng = (uint64_t)i * 31 + 7, .want = i % 4 };
            p.from = (uint64_t)rng_n(&p.rng, 60);
            c.check = check_pair;
            c.check_arg = &p;
            run_t o;
            run_cfg(&c, &o);
            tries++;
            if (!p.found) {
                skipped++;
                continue;
            }
            c.check = NULL;
            c.nkill = 2;
            c.kill[0].rank = p.a;
            c.kill[1].rank = p.b;
            c.kill[0].step = c.kill[1].step = p.at;
            run_cfg(&c, &o);
            if (o.outcome != p.expect[a]) {
                print_error("%s seed %d kill {%d,%d}@%llu class '%s': expected %s, got %s (%s)\n",
                            alg(a)->name, 50000 + i, p.a, p.b, (unsigned long long)p.at,
                            cls_name[p.want], p.expect[a] == OUT_TERM ? "terminated" : "fatal",
                            o.outcome == OUT_TERM ? "terminated"
                            : o.outcome == OUT_FATAL ? "fatal" : "violation",
                            o.why);
                fail();
            }
            seen[a][p.want][o.outcome]++;
        }
    for (int a = 0; a < NALG; a++)
        for (int k = 0; k < 4; k++) {
            printf("[table] %-8s %-30s terminated=%d fatal=%d\n", alg(a)->name, cls_name[k],
                   seen[a][k][OUT_TERM], seen[a][k][OUT_FATAL]);
            assert_true(seen[a][k][OUT_TERM] + seen[a][k][OUT_FATAL] >= 20);
        }
    printf("[table] %d searches, %d without a matching pair\n", tries, skipped);
}

/* ---- single failures, root failure --------------------------------------- */

typedef struct { probe_t p; int victim; uint64_t at; phx_ds_view_t v; int got; } single_t;

static int check_single(th_sim_t *sim, void *arg, char *why, size_t len)
{
    single_t *s = arg;
    (void)why;
    (void)len;
    track(sim, &s->p);
    if (s->p.step == s->at && view_of(sim, s->victim, &s->v))
        s->got = 1;
    return 0;
}

#define SINGLE_RUNS 1500

static void test_single_failure(void **st)
{
    (void)st;
    static const char *const sname[] = { "passive", "engaged leaf", "interior" };
    for (int a = 0; a < NALG; a++) {
        int by[3] = { 0 }, done = 0;
        for (int i = 0; i < SINGLE_RUNS; i++) {
            th_cfg_t c;
            run_t o;
            base_cfg(&c, alg(a), 90000 + (uint64_t)i, 3, 12);
            run_cfg(&c, &o);                    /* length of the fault-free run */
            uint64_t r = (uint64_t)i * 977 + 1;
            single_t s = { .p = { .n = c.n } };
            s.victim = 1 + rng_n(&r, c.n - 1);
            s.at = (uint64_t)rng_n(&r, (int)o.steps + 1);
            c.check = check_single;
            c.check_arg = &s;
            c.nkill = 1;
            c.kill[0].rank = s.victim;
            c.kill[0].step = s.at;
            run_cfg(&c, &o);
            if (o.outcome != OUT_TERM) {
                print_error("%s seed %d kill %d@%llu: %s\n", alg(a)->name, 90000 + i, s.victim,
                            (unsigned long long)s.at, o.why[0] ? o.why : "fatal");
                fail();
            }
            int k = 0;
            if (s.got && s.v.engaged)
                k = s.v.D > 0 ? 2 : 1;
            by[k]++;
            done++;
        }
        printf("[single] %-8s %d runs all terminated; victim %s=%d %s=%d %s=%d\n",
               alg(a)->name, done, sname[0], by[0], sname[1], by[1], sname[2], by[2]);
        assert_true(by[0] > 0 && by[1] > 0 && by[2] > 0);
    }
}

static void test_root_failure(void **st)
{
    (void)st;
    for (int a = 0; a < NALG; a++) {
        int n = 0;
        for (int i = 0; i < 300; i++) {
            th_cfg_t c;
            run_t o;
            base_cfg(&c, alg(a), 120000 + (uint64_t)i, 2, 10);
            probe_t p = { .n = c.n };
            c.check = check_pair;          /* want = -1: only tracks */
            p.want = -1;
            p.found = 1;
            c.check_arg = &p;
            run_cfg(&c, &o);
            assert_int_equal(o.outcome, OUT_TERM);
            assert_true(p.root_decl > 0);
            uint64_t r = (uint64_t)i * 13 + 5;
            c.check = NULL;
            c.nkill = 1;
            c.kill[0].rank = 0;
            c.kill[0].step = (uint64_t)rng_n(&r, (int)p.root_decl);
            run_cfg(&c, &o);
            if (o.outcome != OUT_FATAL) {
                print_error("%s seed %d root killed @%llu: %s\n", alg(a)->name, 120000 + i,
                            (unsigned long long)c.kill[0].step, o.why[0] ? o.why : "terminated");
                fail();
            }
            n++;
        }
        printf("[root] %-8s %d root failures before detection, all fatal\n", alg(a)->name, n);
    }
}

/* ---- adopted child fails later (table row 6, scenario T10) ---------------- */

typedef struct {
    probe_t p;
    int phase;                 /* 0: find X; 1: X killed, find adopted c */
    uint64_t from;
    int x, cc, d;              /* d: interior child of cc, or -1 */
    uint64_t at1, at2;
    int want_d;
} adopt_t;

static int check_adopt(th_sim_t *sim, void *arg, char *why, size_t len)
{
    adopt_t *s = arg;
    (void)why;
    (void)len;
    track(sim, &s->p);
    int n = s->p.n;
    phx_ds_view_t vx, vc, vp, vd;
    if (s->phase == 0 && s->p.step >= s->from) {
        for (int x = 1; x < n; x++) {
            if (!view_of(sim, x, &vx) || !vx.engaged || vx.D == 0)
                continue;
            for (int c = 1; c < n; c++)
                if (c != x && view_of(sim, c, &vc) && vc.engaged && vc.parent == x) {
                    s->x = x;
                    s->at1 = s->p.step;
                    s->phase = 1;   /* replay kills x here; keep searching in that replay */
                    return 0;
                }
        }
        return 0;
    }
    if (s->phase == 2) {   /* replay with x dead */
        for (int c = 1; c < n; c++) {
            if (!view_of(sim, c, &vc) || !vc.engaged || !vc.adopted || vc.recovering ||
                vc.orphan || !view_of(sim, vc.parent, &vp) || vp.recovering)
                continue;
            int d = -1;
            if (s->want_d == 2) {
                if (!vc.interior || vc.parent == 0)
                    continue;
                d = vc.parent;   /* gap scenario: new parent and interior adoptee */
            } else if (s->want_d) {
                for (int k = 1; k < n && d < 0; k++)
                    if (k != c && view_of(sim, k, &vd) && vd.engaged && vd.parent == c &&
                        vd.interior)
                        d = k;
                if (d < 0)
                    continue;
            }
            s->cc = c;
            s->d = d;
            s->at2 = s->p.step;
            s->phase = 3;
            return 0;
        }
    }
    return 0;
}

#define ADOPT_RUNS 2000

static void test_adopted_child_fails(void **st)
{
    (void)st;
    /* expected[alg][with interior child d] */
    static const int expected[NALG][3] = {
        { OUT_TERM, OUT_FATAL, OUT_FATAL }, { OUT_FATAL, OUT_FATAL, OUT_FATAL },
        { OUT_TERM, OUT_FATAL, OUT_FATAL },
    };
    for (int a = 0; a < NALG; a++) {
        int cnt[3] = { 0, 0, 0 }, searched = 0;
        for (int i = 0; i < ADOPT_RUNS; i++) {
            th_cfg_t c;
            run_t o;
            base_cfg(&c, alg(a), 150000 + (uint64_t)i, 4, 10);
            c.wl = i % 2 ? TH_WL_TREE : TH_WL_FANOUT;
            c.budget = 60 + (i % 100);
            adopt_t s = { .p = { .n = c.n }, .want_d = i % 3 };
            uint64_t r = (uint64_t)i * 101 + 3;
            s.from = (uint64_t)rng_n(&r, 80);
            c.check = check_adopt;
            c.check_arg = &s;
            run_cfg(&c, &o);
            searched++;
            if (s.phase != 1)
                continue;
            /* replay: kill x, then look for an adopted child past its window */
            int x = s.x;
            uint64_t at1 = s.at1;
            memset(&s, 0, sizeof s);
            s.p.n = c.n;
            s.phase = 2;
            s.want_d = i % 3;
            s.x = x;
            c.nkill = 1;
            c.kill[0].rank = x;
            c.kill[0].step = at1;
            run_cfg(&c, &o);
            if (o.outcome != OUT_TERM) {
                print_error("%s seed %d single kill %d: %s\n", alg(a)->name, 150000 + i, x,
                            o.why[0] ? o.why : "fatal");
                fail();
            }
            if (s.phase != 3)
                continue;
            c.check = NULL;
            c.nkill = s.d >= 0 ? 3 : 2;
            c.kill[1].rank = s.cc;
            c.kill[1].step = s.at2;
            if (s.d >= 0) {
                c.kill[2].rank = s.d;
                c.kill[2].step = s.at2;
            }
            run_cfg(&c, &o);
            int mode = s.d < 0 ? 0 : s.want_d;
            int want = expected[a][mode];
            if (o.outcome != want) {
                print_error("%s seed %d kill %d@%llu then adopted %d (+child %d)@%llu: "
                            "expected %s, got %s\n",
                            alg(a)->name, 150000 + i, x, (unsigned long long)at1, s.cc, s.d,
                            (unsigned long long)s.at2, want == OUT_TERM ? "terminated" : "fatal",
                            o.outcome == OUT_TERM ? "terminated"
                            : o.outcome == OUT_FATAL ? "fatal" : o.why);
                fail();
            }
            cnt[mode]++;
        }
        printf("[adopted] %-8s %d searches: adopted c alone -> %s x%d; c + interior child -> "
               "fatal x%d; interior c + its new parent (gap fix) -> fatal x%d\n",
               alg(a)->name, searched, expected[a][0] == OUT_TERM ? "terminated" : "fatal",
               cnt[0], cnt[1], cnt[2]);
        assert_true(cnt[0] >= 10 && cnt[1] >= 5 && cnt[2] >= 5);
    }
}

/* ---- randomized failure injection ------------------------------------------ */

#define CHAOS_RUNS 2000

static void test_chaos(void **st)
{
    (void)st;
    for (int a = 0; a < NALG; a++) {
        int out[3][3] = { { 0 } };   /* [kills][outcome] */
        for (int i = 0; i < CHAOS_RUNS; i++) {
            th_cfg_t c;
            run_t o;
            base_cfg(&c, alg(a), 200000 + (uint64_t)i, 3, 14);
            run_cfg(&c, &o);
            uint64_t r = (uint64_t)i * 7 + 11;
            c.nkill = 1 + rng_n(&r, 2);
            for (int k = 0; k < c.nkill; k++) {
                c.kill[k].rank = 1 + rng_n(&r, c.n - 1);
                c.kill[k].step = (uint64_t)rng_n(&r, (int)o.steps + 1);
            }
            int distinct = c.nkill == 1 || c.kill[0].rank != c.kill[1].rank ? c.nkill : 1;
            run_cfg(&c, &o);
            if (!o.outcome || (distinct == 1 && o.outcome != OUT_TERM)) {
                print_error("%s seed %d kills %d: %s\n", alg(a)->name, 200000 + i, c.nkill,
                            o.why[0] ? o.why : "fatal on a single failure");
                fail();
            }
            out[distinct][o.outcome]++;
        }
        printf("[chaos] %-8s %d runs: 1 kill -> terminated %d; 2 kills -> terminated %d, "
               "fatal %d; premature 0, hang 0\n",
               alg(a)->name, CHAOS_RUNS, out[1][OUT_TERM], out[2][OUT_TERM], out[2][OUT_FATAL]);
    }
}

/* ---- send fence (the adoption paper's sendFence, ft/termination/td_ds.c) -- */

enum { WIRE_PGC = 2 };   /* td_ds.c's potential_gc type byte */

typedef struct { probe_t p; int x; uint64_t at; } fence_t;

static void find_pgc(void *arg, int src, int dst, int primary, const uint8_t *d, size_t l)
{
    fence_t *f = arg;
    (void)dst;
    if (!primary && l && d[0] == WIRE_PGC && src != 0 && f->x < 0) {
        f->x = src;
        f->at = f->p.step;
    }
}

/* The notice to the parent has left, the first message to the new recipient
 * has not (fence) or has (no fence). */
static int check_fence(th_sim_t *sim, void *arg, char *why, size_t len)
{
    fence_t *f = arg;
    (void)why;
    (void)len;
    track(sim, &f->p);
    if (f->x < 0 && f->p.step >= f->p.from)
        th_foreach_msg(sim, find_pgc, f);
    return 0;
}

#define FENCE_RUNS 400

/* Kill a sender between its potential_gc notice and its first message to a
 * new recipient, losing every control message it had in flight (a TCP RST
 * discards the notice while the message on another socket gets through).
 * Without the fence the recipient works on unseen by anyone, and the root
 * declares while it is busy. Returns the runs that went wrong. */
static int fence_kills(const phx_td_ops_t *ops, const char *tag, int *tried)
{
    int bad = 0;
    *tried = 0;
    for (int i = 0; i < FENCE_RUNS; i++) {
        th_cfg_t c;
        run_t o;
        base_cfg(&c, ops, 300000 + (uint64_t)i, 3, 10);
        c.wl = i % 3 == 0 ? TH_WL_TREE : i % 3 == 1 ? TH_WL_FANOUT : TH_WL_WALK;
        c.qb = 0.3;
        c.budget = 40 + (i % 120);
        fence_t f = { .p = { .n = c.n }, .x = -1 };
        uint64_t r = (uint64_t)i * 53 + 9;
        f.p.from = (uint64_t)rng_n(&r, 40);
        c.check = check_fence;
        c.check_arg = &f;
        run_cfg(&c, &o);
        if (f.x < 0)
            continue;
        c.check = NULL;
        c.nkill = 1;
        c.kill[0].rank = f.x;
        c.kill[0].step = f.at;
        c.drop_ctl = 1;
        run_cfg(&c, &o);
        (*tried)++;
        if (o.outcome != OUT_TERM) {
            if (!bad)
                printf("[fence] %s%s, first wrong run: seed %d kill %d@%llu: %s\n", ops->name,
                       tag, 300000 + i, f.x, (unsigned long long)f.at, o.why[0] ? o.why : "fatal");
            bad++;
        }
    }
    return bad;
}

/* The same protocols without the fence (PHX_DS_NOFENCE), to show the test
 * sees the hole: each must go wrong at least once. */
static int indep_nf(const phx_td_env_t *e, void **o)
{
    return phx_td_ds_create(e, PHX_DS_INDEP | PHX_DS_NOFENCE, o);
}
static int lazy_nf(const phx_td_env_t *e, void **o)
{
    return phx_td_ds_create(e, PHX_DS_RELLAZY | PHX_DS_NOFENCE, o);
}
static int eager_nf(const phx_td_env_t *e, void **o)
{
    return phx_td_ds_create(e, PHX_DS_RELEAGER | PHX_DS_NOFENCE, o);
}

static void test_fence(void **st)
{
    (void)st;
    int (*const nf[NALG])(const phx_td_env_t *, void **) = { indep_nf, lazy_nf, eager_nf };
    for (int a = 0; a < NALG; a++) {
        int tried, bad = fence_kills(alg(a), "", &tried);
        phx_td_ops_t old = *alg(a);
        old.create = nf[a];
        int tried_nf, bad_nf = fence_kills(&old, " without the fence", &tried_nf);
        printf("[fence] %-8s %d kills between notice and first message: %d wrong "
               "(without the fence: %d of %d)\n", alg(a)->name, tried, bad, bad_nf, tried_nf);
        assert_true(tried >= FENCE_RUNS / 2);
        assert_int_equal(bad, 0);
        assert_true(bad_nf > 0);
    }
}

static void nop_decl(void *c);
static void nop_fatal(void *c, int code, const char *w);

/* The fence on one node, driven by hand: rank 1 of 4, engaged by the root. */
typedef struct {
    int nsent, dst[16];
    uint8_t msg[16][16];
    size_t len[16];
    int nrel;
    uint64_t rel[16];
    uint8_t relpb[16][PHX_TD_PB_MAX];
} rec_t;

static void rec_send(void *c, int d, const void *m, size_t l)
{
    rec_t *r = c;
    assert_true(r->nsent < 16 && l <= 16);
    r->dst[r->nsent] = d;
    memcpy(r->msg[r->nsent], m, l);
    r->len[r->nsent++] = l;
}
static void rec_release(void *c, uint64_t t, const uint8_t *pb)
{
    rec_t *r = c;
    memcpy(r->relpb[r->nrel], pb, PHX_TD_PB_MAX);
    r->rel[r->nrel++] = t;
}

/* Acks notice k as its receiver would. */
static void ack_notice(const phx_td_ops_t *ops, void *s, rec_t *r, int k)
{
    uint8_t ack[9] = { 11 };   /* td_ds.c's fence type byte */
    assert_true(r->len[k] == 13);
    memcpy(ack + 1, r->msg[k] + 5, 8);
    assert_int_equal(ops->on_ctrl(s, r->dst[k], ack, sizeof ack), 0);
}

static void test_fence_fast_path(void **st)
{
    (void)st;
    for (int a = 0; a < NALG; a++) {
        const phx_td_ops_t *ops = alg(a);
        rec_t r = { 0 };
        phx_td_env_t env = { .rank = 1, .size = 4, .ctx = &r, .send = rec_send,
                             .declare = nop_decl, .fatal = nop_fatal, .release = rec_release };
        void *s;
        uint8_t pb[PHX_TD_PB_MAX] = { 0 }, ppb[PHX_TD_PB_MAX];
        memset(ppb, 0xff, sizeof ppb);            /* grandparent unknown: -1 */
        assert_int_equal(ops->create(&env, &s), 0);
        ops->start(s, 0);
        ops->on_recv(s, 2, ppb);                  /* engaged by 2 */
        /* first send to 3: potential_gc to 2, held */
        assert_int_equal(ops->on_send(s, 3, 100, pb), PHX_TD_DELAY);
        assert_int_equal(r.nsent, 1);
        assert_int_equal(r.dst[0], 2);
        assert_int_equal(r.msg[0][0], WIRE_PGC);
        /* a second one to 3 queues behind it, with no second notice */
        assert_int_equal(ops->on_send(s, 3, 101, pb), PHX_TD_DELAY);
        assert_int_equal(r.nsent, 1);
        ack_notice(ops, s, &r, 0);
        assert_int_equal(r.nrel, 2);
        assert_true(r.rel[0] == 100 && r.rel[1] == 101);
        if (ops->pb_size)   /* Rel piggyback: our parent */
            assert_int_equal(r.relpb[0][0], 2);
        /* known recipient, nothing held: leaves at once, no traffic */
        assert_int_equal(ops->on_send(s, 3, 102, pb), 0);
        assert_int_equal(r.nsent, 1);
        /* a new recipient waits again; the known one still does not */
        assert_int_equal(ops->on_send(s, 0, 103, pb), PHX_TD_DELAY);
        assert_int_equal(ops->on_send(s, 3, 104, pb), 0);
        assert_int_equal(r.nsent, 2);
        /* the parent dies: its notice is moot, the send goes */
        ops->on_failure(s, 2);
        assert_int_equal(r.nrel, 3);
        assert_true(r.rel[2] == 103);
        ops->destroy(s);

        /* the root has nobody to notify: never waits */
        rec_t q = { 0 };
        env.rank = 0;
        env.ctx = &q;
        assert_int_equal(ops->create(&env, &s), 0);
        ops->start(s, 1);
        for (int d = 1; d < 4; d++)
            assert_int_equal(ops->on_send(s, d, (uint64_t)d, pb), 0);
        assert_int_equal(q.nsent, 0);
        ops->destroy(s);
        if (!ops->pb_size)
            continue;

        /* Rel: the interior signal to the grandparent is fenced as well */
        rec_t g = { 0 };
        uint8_t gpb[PHX_TD_PB_MAX] = { 0 };       /* 2's parent is 0 */
        env.rank = 1;
        env.ctx = &g;
        assert_int_equal(ops->create(&env, &s), 0);
        ops->start(s, 0);
        ops->on_recv(s, 2, gpb);
        assert_int_equal(ops->on_send(s, 3, 200, pb), PHX_TD_DELAY);
        assert_int_equal(g.nsent, 2);
        int k_int = g.dst[0] == 0 ? 0 : 1;
        assert_int_equal(g.dst[k_int], 0);
        ack_notice(ops, s, &g, 1 - k_int);       /* the parent's alone is not enough */
        assert_int_equal(g.nrel, 0);
        ack_notice(ops, s, &g, k_int);
        assert_int_equal(g.nrel, 1);
        ops->destroy(s);
    }
    printf("[fence] first send to a new recipient held until the parent's (Rel: and the "
           "grandparent's) ack, in order; known recipients and the root never wait\n");
}

/* ---- chaos with message loss ----------------------------------------------
 * As test_chaos, but a dead node's undelivered messages are lost, each with
 * probability drop_prob (or every control message, drop_ctl), as a TCP RST
 * loses unread bytes on some sockets and not on others. Messages between
 * live nodes are never lost; delivery order across distinct pairs is random,
 * FIFO per pair. With the fence, loss cannot separate a notice from the
 * send it covers, so safety and liveness hold in every schedule. */

#define DROP_RUNS 2500
#define DROP_KILLS 4

/* Run i of a series starting at seed base: up to kmax kills at random steps
 * of the fault-free run, loss rate and mode from i. Returns the number of
 * distinct victims; the outcome is in *o. */
static int drops_run(const phx_td_ops_t *ops, uint64_t base, int i, int nmax, int kmax, run_t *o)
{
    static const double probs[] = { 0.1, 0.3, 0.5, 0.9, 1.0 };
    th_cfg_t c;
    base_cfg(&c, ops, base + (uint64_t)i, 3, nmax);
    run_cfg(&c, o);
    uint64_t r = (uint64_t)i * 131 + 5;
    c.nkill = 1 + rng_n(&r, kmax);
    int distinct = 0;
    for (int k = 0; k < c.nkill; k++) {
        c.kill[k].rank = 1 + rng_n(&r, c.n - 1);
        c.kill[k].step = (uint64_t)rng_n(&r, (int)o->steps + 1);
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= c.kill[j].rank == c.kill[k].rank;
        distinct += !dup;
    }
    c.drop_prob = probs[i % 5];
    c.drop_ctl = i % 7 == 0;
    run_cfg(&c, o);
    if (!o->outcome || (distinct == 1 && o->outcome != OUT_TERM))
        print_error("%s seed %llu kills %d drop %.1f/%d: %s\n", ops->name,
                    (unsigned long long)(base + (uint64_t)i), c.nkill, c.drop_prob, c.drop_ctl,
                    o->why[0] ? o->why : "fatal on a single failure");
    return distinct;
}

static void test_chaos_drops(void **st)
{
    (void)st;
    for (int a = 0; a < NALG; a++) {
        int out[DROP_KILLS + 1][3] = { { 0 } };   /* [distinct kills][outcome] */
        uint64_t dropped = 0;
        for (int i = 0; i < DROP_RUNS; i++) {
            run_t o;
            int distinct = drops_run(alg(a), 400000, i, 16, DROP_KILLS, &o);
            if (!o.outcome || (distinct == 1 && o.outcome != OUT_TERM))
                fail();
            dropped += o.dropped;
            out[distinct][o.outcome]++;
        }
        int mt = 0, mf = 0;
        for (int k = 2; k <= DROP_KILLS; k++) {
            mt += out[k][OUT_TERM];
            mf += out[k][OUT_FATAL];
        }
        printf("[drops] %-8s %d runs, %llu messages of dead nodes lost: 1 kill -> terminated "
               "%d; 2-%d kills -> terminated %d, fatal %d; premature 0, hang 0\n",
               alg(a)->name, DROP_RUNS, (unsigned long long)dropped, out[1][OUT_TERM],
               DROP_KILLS, mt, mf);
    }
    /* Regression (found at 30,000 runs, n <= 20): the node that found the run
     * undecidable died with its fatal broadcast half out; the survivors that
     * got it must relay it, or the others hang. */
    run_t o;
    drops_run(&phx_td_indep_ops, 900000, 5104, 20, 4, &o);
    assert_int_equal(o.outcome, OUT_FATAL);
}

/* ---- malformed control messages ------------------------------------------- */

static void nop_send(void *c, int d, const void *m, size_t l) { (void)c; (void)d; (void)m; (void)l; }
static void nop_decl(void *c) { (void)c; }
static void nop_fatal(void *c, int code, const char *w) { (void)c; (void)code; (void)w; }
static void nop_release(void *c, uint64_t t, const uint8_t *pb) { (void)c; (void)t; (void)pb; }

static void test_malformed(void **st)
{
    (void)st;
    phx_td_env_t env = { .rank = 1, .size = 4, .send = nop_send, .declare = nop_decl,
                         .fatal = nop_fatal, .release = nop_release };
    for (int a = 0; a < NALG; a++) {
        void *s;
        assert_int_equal(alg(a)->create(&env, &s), 0);
        alg(a)->start(s, 0);
        const uint8_t bad[][10] = {
            { 0 }, { 99 }, { 1, 0, 1, 0, 0, 0 }, { 1, 2, 1, 0, 0, 0 }, { 2, 9, 0, 0, 0 },
            { 4, 2, 0, 0, 0, 1, 0, 0, 0, 0 }, { 8, 2, 0, 0, 0, 1, 0, 0, 0 },
        };
        const size_t blen[] = { 1, 1, 6, 6, 5, 10, 9 };
        for (size_t i = 0; i < sizeof blen / sizeof blen[0]; i++)
            assert_int_equal(alg(a)->on_ctrl(s, 2, bad[i], blen[i]), PHX_EPROTO);
        uint8_t pb[PHX_TD_PB_MAX] = { 0 };
        assert_int_equal(alg(a)->on_send(s, 2, 0, pb), PHX_EINVAL);   /* not engaged */
        alg(a)->destroy(s);
    }
    printf("[malformed] 7 malformed control messages rejected per algorithm\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_ff_base),
        cmocka_unit_test(test_ff_indep),
        cmocka_unit_test(test_ff_rellazy),
        cmocka_unit_test(test_ff_releager),
        cmocka_unit_test(test_single_failure),
        cmocka_unit_test(test_root_failure),
        cmocka_unit_test(test_table_pairs),
        cmocka_unit_test(test_adopted_child_fails),
        cmocka_unit_test(test_chaos),
        cmocka_unit_test(test_fence),
        cmocka_unit_test(test_fence_fast_path),
        cmocka_unit_test(test_chaos_drops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
