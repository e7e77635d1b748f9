/* tdk walk HOPS QB SEED: random walk with branching (the termination
 * detection comparison paper, see tdk.h, §4.2, Fig. 6).
 *
 * A walker carries a hop budget. Each hop is a task on a uniformly random
 * node (a self-hop stays local); it spends one unit, then with probability
 * QB forks into two walkers that split what is left, otherwise it moves on.
 * Budgets are conserved, so the walk makes exactly HOPS hops however it
 * forks: a checkable total that does not depend on timing.
 *
 * A hop that forks stays alive as the walkers' meeting point: each walker
 * chain, once out of budget, sends (hops, walkers) to the nearest fork
 * above it, and forks pass sums up to the main task, which is therefore the
 * last task to run and prints the result. The random streams live in the
 * walkers (not the nodes), so the fork pattern and the walker count are a
 * function of HOPS, QB and SEED only, whatever the placement or detector. */
#include <inttypes.h>
#include <stdio.h>

#include "apps/tdk/tdk.h"

typedef struct walker {
    phx_tid_t parent;          /* nearest fork above, or the main task */
    uint64_t budget;           /* hops left, this one included */
    uint64_t chain;            /* hops this chain made since its fork */
    uint64_t rng;
} walker_t;

typedef struct walk_sum { uint64_t hops, walkers; } walk_sum_t;
typedef struct fork_st { phx_tid_t parent; walk_sum_t acc; int pending; } fork_st_t;

static int walker_type;

static void spawn_walker(phx_ctx_t *c, walker_t *w)
{
    int p = phx_size(c);
    int node = (int)(tdk_next(&w->rng) % (uint64_t)p);
    tdk_spawn_on(c, walker_type, tdk_live(node, p), w, sizeof *w, NULL);
}

static void walker_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    fork_st_t *f = st;
    walker_t w = *(const walker_t *)arg;
    (void)len;
    tdk_spin();
    atomic_fetch_add(&tdk_cnt.hops, 1);
    w.budget--;
    w.chain++;
    if (w.budget == 0) {
        walk_sum_t s = { w.chain, 1 };
        tdk_send(c, w.parent, TDK_T_RESULT, &s, sizeof s);
        phx_task_done(c);
    } else if (tdk_unit(tdk_next(&w.rng)) < tdk_opt.qb && w.budget >= 2) {
        /* Fork: this task waits for both halves. */
        f->parent = w.parent;
        f->acc.hops = w.chain;
        f->pending = 2;
        walker_t a = { phx_self(c), w.budget / 2, 0, tdk_mix(w.rng ^ 0xa5a5a5a5a5a5a5a5ULL) };
        walker_t b = { phx_self(c), w.budget - w.budget / 2, 0, tdk_mix(w.rng ^ 0x5a5a5a5a5a5a5a5aULL) };
        spawn_walker(c, &a);
        spawn_walker(c, &b);
    } else {
        spawn_walker(c, &w);
        phx_task_done(c);
    }
    tdk_task_end(NULL, NULL);
}

static void fork_result(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    fork_st_t *f = st;
    const walk_sum_t *s = m;
    (void)src; (void)n;
    f->acc.hops += s->hops;
    f->acc.walkers += s->walkers;
    if (--f->pending == 0) {
        tdk_send(c, f->parent, TDK_T_RESULT, &f->acc, sizeof f->acc);
        phx_task_done(c);
    }
    tdk_task_end(NULL, NULL);
}

int tdk_walk_register(void)
{
    phx_type_t t = { .name = "tdk-walker", .state_size = sizeof(fork_st_t), .init = walker_init,
                     .handlers = { [TDK_T_RESULT] = fork_result } };
    return walker_type = phx_register_type(&t);
}

void tdk_walk_start(phx_ctx_t *c, phx_tid_t main)
{
    walker_t w = { main, tdk_opt.hops, 0, tdk_mix(tdk_opt.seed) };
    spawn_walker(c, &w);
}

void tdk_walk_result(phx_ctx_t *c, const void *m, size_t n)
{
    const walk_sum_t *s = m;
    (void)n;
    int ok = s->hops == tdk_opt.hops;
    uint64_t mono, rt;
    tdk_task_end(&mono, &rt);
    printf("tdk walk: nodes=%d hops=%" PRIu64 " walkers=%" PRIu64 " qb=%g seed=%" PRIu64
           " %s last_task_ns=%" PRIu64 " last_task_rt_ns=%" PRIu64 "\n",
           phx_size(c), s->hops, s->walkers, tdk_opt.qb, tdk_opt.seed, ok ? "OK" : "WRONG", mono, rt);
    fflush(stdout);
    if (!ok)
        phx_exit(c, 1);   /* a wrong total is an error, not a quiescent end */
}
