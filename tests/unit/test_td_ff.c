/* Fault-free detectors 4C, EDOD, HCDA, CDA ("Comparing Distributed Termination Detection Algorithms for
 * Task-Based Runtime Systems on HPC platforms") under thousands of
 * seeded random schedules checked by the td_harness oracle, plus CDA/HCDA
 * credit conservation, Theorem 1 token-ring costs and failure handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/termination/td.h"
#include "ft/termination/td_credit.h"
#include "td_harness.h"

#define SCHEDULES 5000

static uint64_t rng = 0x1234567ull;
static uint64_t rnd(void)   /* splitmix64 */
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void set_credit(uint64_t c_init, uint64_t c_max, uint64_t c_con, uint64_t w_con,
                       uint64_t c_borrow)
{
    phx_td_credit_cfg_t c = { c_init, c_max, c_con, w_con, c_borrow };
    assert_int_equal(phx_td_credit_set(&c), 0);
}
static void credit_defaults(void)
{
    phx_td_credit_cfg_t c;
    phx_td_credit_defaults(&c);
    assert_int_equal(phx_td_credit_set(&c), 0);
}

/* ---- credit conservation (R5) ------------------------------------------ */

typedef struct {
    void (*dbg)(const void *, phx_td_credit_dbg_t *);
    unsigned __int128 inflight;
    int bad_pb;
    uint64_t checks;
} cons_t;

static void count_msg(void *arg, int src, int dst, int primary, const uint8_t *d, size_t len)
{
    cons_t *c = arg;
    uint64_t v = 0;
    if (primary || (len == 9 && (d[0] == PHX_TDC_FLUSH || d[0] == PHX_TDC_GRANT)))
        for (int i = 0; i < 8; i++)
            v |= (uint64_t)d[(primary ? 0 : 1) + i] << (8 * i);
    if (primary && v == 0)
        c->bad_pb++;
    c->inflight += v;
}

static int conserve(th_sim_t *sim, void *arg, char *why, size_t len)
{
    cons_t *c = arg;
    c->inflight = 0;
    c->bad_pb = 0;
    c->checks++;
    th_foreach_msg(sim, count_msg, c);
    unsigned __int128 sum = c->inflight, created = 0, returned = 0;
    for (int r = 0; r < th_size(sim); r++) {
        phx_td_credit_dbg_t d;
        c->dbg(th_state(sim, r), &d);
        sum += d.credit;
        if (d.is_agent) {
            created = d.created;
            returned = d.returned;
        }
        if (d.held && !d.credit) {
            snprintf(why, len, "rank %d holds sends with no credit", r);
            return 1;
        }
    }
    if (c->bad_pb) {
        snprintf(why, len, "%d primary messages carry no credit", c->bad_pb);
        return 1;
    }
    if (sum + returned != created) {
        snprintf(why, len, "credit not conserved: held+flight %llu returned %llu created %llu",
                 (unsigned long long)sum, (unsigned long long)returned,
                 (unsigned long long)created);
        return 1;
    }
    return 0;
}

/* ---- random schedules ---------------------------------------------------- */

static const char *wl_name[TH_WL_COUNT] = { "tree", "chain", "fanout", "ring", "walk" };

static void random_schedules(const phx_td_ops_t *ops, int n_sched, int credit_mode)
{
    uint64_t primary = 0, ctrl = 0, steps = 0, delayed = 0, runs_by_wl[TH_WL_COUNT] = { 0 };
    uint64_t max_steps = 0;
    cons_t cons = { 0 };
    if (credit_mode)
        cons.dbg = ops == &phx_td_cda_ops ? phx_td_cda_debug : phx_td_hcda_debug;
    rng = 0xC0FFEEull ^ (uint64_t)ops->pb_size ^ (uint64_t)(uintptr_t)ops->name[0];
    for (int i = 0; i < n_sched; i++) {
        th_cfg_t cfg = { .ops = ops, .live_all = 1 };
        cfg.n = 1 + (int)(rnd() % 16);
        cfg.seed = rnd();
        cfg.wl = (th_workload_t)(rnd() % TH_WL_COUNT);
        cfg.budget = 1 + (int)(rnd() % 200);
        cfg.qb = 0.1;
        if (credit_mode) {
            /* half the runs with tiny credit: borrows, delays, partial sends,
             * clamps and late prefetched grants all happen */
            switch (rnd() % 6) {
            case 0: set_credit(1, 4, 2, 1, 0); break;
            case 1: set_credit(2, 8, 4, 1, 4); break;
            case 2: set_credit(16, 64, 8, 2, 32); break;
            case 3: set_credit(1ull << 10, 1ull << 11, 1ull << 6, 4, 1ull << 4); break;
            default: credit_defaults(); break;
            }
            cfg.check = conserve;
            cfg.check_arg = &cons;
        }
        th_result_t res;
        assert_int_equal(th_run(&cfg, &res), 0);
        if (!res.ok || !res.drained || res.declared != cfg.n) {
            phx_td_credit_cfg_t cc;
            phx_td_credit_get(&cc);
            fail_msg("%s: run %d (n=%d seed=%llu wl=%s budget=%d c_init=%llu): %s", ops->name,
                     i, cfg.n, (unsigned long long)cfg.seed, wl_name[cfg.wl], cfg.budget,
                     (unsigned long long)cc.c_init, res.why);
        }
        primary += res.primary;
        ctrl += res.ctrl;
        steps += res.steps;
        delayed += res.delayed;
        runs_by_wl[cfg.wl]++;
        if (res.steps > max_steps)
            max_steps = res.steps;
    }
    credit_defaults();
    printf("[ %-4s ] %d schedules (tree %llu chain %llu fanout %llu ring %llu walk %llu): "
           "%llu primary, %llu control, %llu held sends, %llu events (max %llu)%s%llu checks\n",
           ops->name, n_sched, (unsigned long long)runs_by_wl[0],
           (unsigned long long)runs_by_wl[1], (unsigned long long)runs_by_wl[2],
           (unsigned long long)runs_by_wl[3], (unsigned long long)runs_by_wl[4],
           (unsigned long long)primary, (unsigned long long)ctrl, (unsigned long long)delayed,
           (unsigned long long)steps, (unsigned long long)max_steps,
           credit_mode ? ", conservation " : ", ", (unsigned long long)cons.checks);
}

static void t_4c(void **s) { random_schedules(&phx_td_4c_ops, SCHEDULES, 0); }
static void t_edod(void **s) { random_schedules(&phx_td_edod_ops, SCHEDULES, 0); }
static void t_hcda(void **s) { random_schedules(&phx_td_hcda_ops, SCHEDULES, 1); }
static void t_cda(void **s) { random_schedules(&phx_td_cda_ops, SCHEDULES, 1); }

/* ---- Theorem 1 token ring (R4) ------------------------------------------- */

static th_result_t ring(const phx_td_ops_t *ops, int n, int hops)
{
    th_cfg_t cfg = { .ops = ops, .n = n, .seed = 7, .wl = TH_WL_WALK, .budget = hops,
                     .live_all = 1 };
    th_result_t res;
    assert_int_equal(th_run(&cfg, &res), 0);
    if (!res.ok)
        fail_msg("%s ring: %s", ops->name, res.why);
    return res;
}

static void t_theorem1(void **s)
{
    const int P = 16, K = 2000;
    credit_defaults();
    th_result_t cda = ring(&phx_td_cda_ops, P, K), hcda = ring(&phx_td_hcda_ops, P, K);
    th_result_t fc = ring(&phx_td_4c_ops, P, K), ed = ring(&phx_td_edod_ops, P, K);
    printf("[ thm1 ] P=%d K=%d random walk: cda %llu (<= 2P), hcda %llu (~K+P), "
           "4c %llu, edod %llu\n", P, K, (unsigned long long)cda.ctrl,
           (unsigned long long)hcda.ctrl, (unsigned long long)fc.ctrl,
           (unsigned long long)ed.ctrl);
    /* CDA: P-1 initial FLUSHes, one final FLUSH, P-1 TERMINATE */
    assert_true(cda.ctrl <= 2u * P);
    /* HCDA: one FLUSH per hop off-agent plus a BORROW/GRANT every 32 hops */
    assert_true(hcda.ctrl >= (uint64_t)K * 8 / 10 && hcda.ctrl <= (uint64_t)K * 12 / 10 + 2 * P);
    /* EDOD: at least one ACK per primary message */
    assert_true(ed.ctrl >= ed.primary);
    assert_true(cda.ctrl * 10 < fc.ctrl && cda.ctrl * 10 < ed.ctrl);
}

/* ---- exact small scenarios ------------------------------------------------ */

static void t_single_node(void **s)
{
    const phx_td_ops_t *all[] = { &phx_td_4c_ops, &phx_td_edod_ops, &phx_td_hcda_ops,
                                  &phx_td_cda_ops };
    for (int a = 0; a < 4; a++) {
        th_cfg_t cfg = { .ops = all[a], .n = 1, .seed = 1, .wl = TH_WL_TREE, .budget = 50,
                         .live_all = 1 };
        th_result_t res;
        assert_int_equal(th_run(&cfg, &res), 0);
        assert_true(res.ok);
        assert_int_equal(res.declared, 1);
        assert_int_equal(res.ctrl, 0);   /* P = 1 needs no control message */
    }
    printf("[ p=1  ] 4 algorithms declare alone with 0 control messages\n");
}

static void t_failure_fatal(void **s)
{
    const phx_td_ops_t *all[] = { &phx_td_4c_ops, &phx_td_edod_ops, &phx_td_hcda_ops,
                                  &phx_td_cda_ops };
    int fatal_runs = 0;
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < 50; i++) {
            th_cfg_t cfg = { .ops = all[a], .n = 2 + i % 7, .seed = 100u + (unsigned)i,
                             .wl = TH_WL_TREE, .budget = 100, .live_all = 1, .nkill = 1,
                             .drop_prob = 0.5 };
            cfg.kill[0].rank = 1 + i % (cfg.n - 1);
            cfg.kill[0].step = (uint64_t)(i * 3);
            th_result_t res;
            assert_int_equal(th_run(&cfg, &res), 0);
            if (!res.ok)   /* safety on the live nodes still holds */
                fail_msg("%s kill run %d: %s", all[a]->name, i, res.why);
            /* a notified survivor gives up; a node may have declared first */
            assert_true(res.fatal > 0 || res.declared > 0);
            fatal_runs += res.fatal > 0;
        }
    printf("[ kill ] 200 runs with one crash: %d ended in fatal, none unsafe\n", fatal_runs);
    assert_true(fatal_runs > 100);
}

static void t_registry(void **s)
{
    assert_ptr_equal(phx_td_find("4c"), &phx_td_4c_ops);
    assert_ptr_equal(phx_td_find("edod"), &phx_td_edod_ops);
    assert_ptr_equal(phx_td_find("hcda"), &phx_td_hcda_ops);
    assert_ptr_equal(phx_td_find("cda"), &phx_td_cda_ops);
    assert_null(phx_td_find("nope"));
    assert_null(phx_td_find(NULL));
}

static void t_malformed(void **s)
{
    const phx_td_ops_t *all[] = { &phx_td_4c_ops, &phx_td_edod_ops, &phx_td_hcda_ops,
                                  &phx_td_cda_ops };
    int rejected = 0;
    for (int a = 0; a < 4; a++) {
        phx_td_env_t env = { .rank = 1, .size = 4 };
        void *st;
        assert_int_equal(all[a]->create(&env, &st), 0);
        /* no start(): nothing is sent, so env callbacks stay unused */
        uint8_t junk[32] = { 0 };
        for (size_t len = 0; len < sizeof junk; len++) {
            junk[0] = (uint8_t)(len * 37);
            int rc = all[a]->on_ctrl(st, 3, junk, len);
            assert_true(rc == 0 || rc == PHX_EPROTO);
            rejected += rc == PHX_EPROTO;
        }
        all[a]->destroy(st);
        phx_td_env_t bad = { .rank = 4, .size = 4 };
        assert_int_equal(all[a]->create(&bad, &st), PHX_EINVAL);
    }
    printf("[ wire ] %d malformed control messages rejected with PHX_EPROTO\n", rejected);
    assert_true(rejected > 100);
}

/* ---- the oracle itself must be able to fail ------------------------------ */

typedef struct { phx_td_env_t env; int mode, done; } naive_t;
static int nv_create(const phx_td_env_t *env, void **out)
{
    naive_t *n = calloc(1, sizeof *n);
    if (!n)
        return PHX_ENOMEM;
    n->env = *env;
    *out = n;
    return 0;
}
static int nv_mode;
static void nv_destroy(void *st) { free(st); }
static void nv_start(void *st, int w) { ((naive_t *)st)->mode = nv_mode; }
static int nv_send(void *st, int d, uint64_t t, uint8_t *pb) { return 0; }
static void nv_recv(void *st, int s, const uint8_t *pb) {}
static void nv_proc(void *st, int s) {}
static void nv_idle(void *st)
{
    naive_t *n = st;
    /* mode 0: rank 0 trusts its own idleness; mode 1: never declares */
    if (n->mode == 0 && n->env.rank == 0 && !n->done) {
        n->done = 1;
        n->env.declare(n->env.ctx);
    }
}
static void nv_busy(void *st) {}
static int nv_ctrl(void *st, int s, const void *m, size_t l) { return 0; }
static void nv_fail(void *st, int r) {}
static int nv_stats(void *st, phx_td_stat_t *o, int m) { return 0; }
static const phx_td_ops_t naive_ops = {
    .name = "naive", .create = nv_create, .destroy = nv_destroy, .start = nv_start,
    .on_send = nv_send, .on_recv = nv_recv, .on_processed = nv_proc, .on_idle = nv_idle,
    .on_busy = nv_busy, .on_ctrl = nv_ctrl, .on_failure = nv_fail, .stats = nv_stats,
};

static void t_oracle_catches(void **s)
{
    int unsafe = 0, hang = 0;
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < 100; i++) {
            nv_mode = mode;
            th_cfg_t cfg = { .ops = &naive_ops, .n = 2 + i % 8, .seed = (uint64_t)i,
                             .wl = TH_WL_TREE, .budget = 60, .live_all = 1 };
            th_result_t res;
            assert_int_equal(th_run(&cfg, &res), 0);
            if (!res.ok && mode == 0 && strstr(res.why, "declared"))
                unsafe++;
            if (!res.ok && mode == 1 && strstr(res.why, "without detection"))
                hang++;
        }
    printf("[oracle] naive detector: %d/100 premature declarations caught, "
           "%d/100 missing detections caught\n", unsafe, hang);
    assert_true(unsafe > 50);
    assert_int_equal(hang, 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_registry),    cmocka_unit_test(t_malformed),
        cmocka_unit_test(t_single_node), cmocka_unit_test(t_4c),
        cmocka_unit_test(t_edod),        cmocka_unit_test(t_hcda),
        cmocka_unit_test(t_cda),         cmocka_unit_test(t_theorem1),
        cmocka_unit_test(t_failure_fatal), cmocka_unit_test(t_oracle_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
