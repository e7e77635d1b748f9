/* tdk project THRESH [SEED]: adaptive refinement of a 1-D binary tree, the
 * projection workload of the comparison paper (tdk.h, §4.2, Table 2, Figs. 7-8).
 *
 * The paper projects e^-2x on [-10, 10] and refines until a local error
 * estimate falls below a precision (1e-7 ... 1e-13). Its estimator is not
 * in the text; ours [R] is the adaptive-Simpson one: on [a, b] with midpoint
 * m, err = |S(a,m) + S(m,b) - S(a,b)| / 15, an estimate of the integral's
 * local error. It decays like h^5, so the paper's thresholds give trees our
 * one host can run: 1e-7 -> 2,053 tasks, 1e-9 -> 5,035, 1e-13 -> 38,257.
 *
 * A task whose estimate is above THRESH (and depth < 60) spawns its two
 * halves and waits for their results; a leaf sends (tasks, leaves, depth,
 * integral) to its parent at once. Results meet at the main task, which
 * compares them with the same tree computed sequentially. Each node sums
 * exactly its two children, and IEEE addition is commutative, so even the
 * integral must match bit for bit whatever the arrival order.
 *
 * Placement (--map): spawn = the runtime's hash; rr = heap index mod P;
 * random = hash(SEED, heap index); subtree = the digest's mapping: random
 * above depth ceil(log2 P), below it the node of the ancestor at that depth. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "apps/tdk/tdk.h"

#define MAX_DEPTH 60                 /* heap indices stay below 2^61 */
#define MAX_REF_TASKS 4000000ULL     /* bound on the sequential reference */

typedef struct cell { phx_tid_t parent; double a, b; uint64_t idx; uint32_t depth; } cell_t;
typedef struct proj_sum { uint64_t tasks, leaves; uint64_t depth; double integral; } proj_sum_t;
typedef struct cell_st { phx_tid_t parent; proj_sum_t acc; int pending; } cell_st_t;

enum { T_RETRY = 1 };   /* a leaf whose result found no gate yet (hold.c) */

static int cell_type;

static double f(double x) { return exp(-2.0 * x); }
static double simpson(double a, double b) { return (b - a) / 6.0 * (f(a) + 4.0 * f(0.5 * (a + b)) + f(b)); }

/* Returns 1 if [a, b] must be refined; *fine is the refined integral. */
static int needs_refine(double a, double b, uint32_t depth, double *fine)
{
    double m = 0.5 * (a + b);
    *fine = simpson(a, m) + simpson(m, b);
    return depth < MAX_DEPTH && fabs(*fine - simpson(a, b)) / 15.0 > tdk_opt.thresh;
}

/* The same tree, sequentially, as the reference. Stops counting past
 * MAX_REF_TASKS (returns 0 then) so a silly THRESH cannot hang rank 0. */
static int reference(double a, double b, uint32_t depth, proj_sum_t *out)
{
    double fine;
    if (++out->tasks > MAX_REF_TASKS)
        return 0;
    if (!needs_refine(a, b, depth, &fine)) {
        out->leaves++;
        out->integral = fine;
        if (depth > out->depth)
            out->depth = depth;
        return 1;
    }
    double m = 0.5 * (a + b);
    proj_sum_t l = {0}, r = {0};
    if (!reference(a, m, depth + 1, &l) || !reference(m, b, depth + 1, &r))
        return 0;
    out->tasks += l.tasks + r.tasks;
    if (out->tasks > MAX_REF_TASKS)
        return 0;
    out->leaves += l.leaves + r.leaves;
    out->depth = l.depth > r.depth ? l.depth : r.depth;
    out->integral = l.integral + r.integral;
    return 1;
}

static int place(uint64_t idx, uint32_t depth, int p)
{
    uint64_t key;
    switch (tdk_opt.map) {
    case TDK_MAP_SPAWN: return -1;
    case TDK_MAP_RR: return tdk_live((int)(idx % (uint64_t)p), p);
    case TDK_MAP_RANDOM: key = idx; break;
    default: {
        uint32_t k = 0;
        while ((1 << k) < p)
            k++;
        key = depth < k ? idx : idx >> (depth - k);
        break;
    }
    }
    return tdk_live((int)(tdk_mix(tdk_opt.seed ^ tdk_mix(key)) % (uint64_t)p), p);
}

static void spawn_cell(phx_ctx_t *c, const cell_t *x)
{
    tdk_spawn_on(c, cell_type, place(x->idx, x->depth, phx_size(c)), x, sizeof *x, NULL);
}

static void cell_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    cell_st_t *s = st;
    const cell_t *x = arg;
    (void)len;
    tdk_spin();
    double fine;
    if (!needs_refine(x->a, x->b, x->depth, &fine)) {
        atomic_fetch_add(&tdk_cnt.leaves, 1);
        proj_sum_t r = { 1, 1, x->depth, fine };
        if (tdk_result(c, x->parent, TDK_T_RESULT, &r, sizeof r) == 1) {
            s->parent = x->parent;
            s->acc = r;
            tdk_send(c, phx_self(c), T_RETRY, NULL, 0);
        } else {
            phx_task_done(c);
        }
    } else {
        s->parent = x->parent;
        s->acc.tasks = 1;
        s->pending = 2;
        double m = 0.5 * (x->a + x->b);
        cell_t l = { phx_self(c), x->a, m, 2 * x->idx, x->depth + 1 };
        cell_t r = { phx_self(c), m, x->b, 2 * x->idx + 1, x->depth + 1 };
        spawn_cell(c, &l);
        spawn_cell(c, &r);
        tdk_hold_pending(x->idx);
    }
    tdk_task_end(NULL, NULL);
}

static void cell_result(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    cell_st_t *s = st;
    const proj_sum_t *r = m;
    (void)src; (void)n;
    s->acc.tasks += r->tasks;
    s->acc.leaves += r->leaves;
    if (r->depth > s->acc.depth)
        s->acc.depth = r->depth;
    s->acc.integral += r->integral;   /* 0 + x, then x + y: order-free */
    if (--s->pending == 0) {
        tdk_send(c, s->parent, TDK_T_RESULT, &s->acc, sizeof s->acc);
        phx_task_done(c);
    }
    tdk_task_end(NULL, NULL);
}

static void cell_retry(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    cell_st_t *s = st;
    (void)src; (void)m; (void)n;
    if (tdk_result(c, s->parent, TDK_T_RESULT, &s->acc, sizeof s->acc) == 1)
        tdk_send(c, phx_self(c), T_RETRY, NULL, 0);
    else
        phx_task_done(c);
}

int tdk_project_register(void)
{
    phx_type_t t = { .name = "tdk-cell", .state_size = sizeof(cell_st_t), .init = cell_init,
                     .handlers = { [TDK_T_RESULT] = cell_result, [T_RETRY] = cell_retry } };
    return cell_type = phx_register_type(&t);
}

static proj_sum_t expected;

void tdk_project_start(phx_ctx_t *c, phx_tid_t main)
{
    if (!reference(-10.0, 10.0, 0, &expected)) {
        fprintf(stderr, "tdk project: THRESH %g makes a tree of more than %llu tasks; refusing\n",
                tdk_opt.thresh, (unsigned long long)MAX_REF_TASKS);
        phx_exit(c, 2);
        return;
    }
    cell_t root = { main, -10.0, 10.0, 1, 0 };
    spawn_cell(c, &root);
}

void tdk_project_result(phx_ctx_t *c, const void *m, size_t n)
{
    const proj_sum_t *r = m;
    (void)n;
    /* The main task may have been restored on another node (recovery=cr)
     * than the one whose start computed the reference. */
    if (!expected.tasks)
        reference(-10.0, 10.0, 0, &expected);
    int ok = r->tasks == expected.tasks && r->leaves == expected.leaves && r->depth == expected.depth &&
             r->integral == expected.integral;
    double exact = (exp(20.0) - exp(-20.0)) / 2.0;
    static const char *maps[] = { "spawn", "rr", "random", "subtree" };
    uint64_t mono, rt;
    tdk_task_end(&mono, &rt);
    printf("tdk project: nodes=%d thresh=%g map=%s tasks=%" PRIu64 " leaves=%" PRIu64 " depth=%" PRIu64
           " integral=%.17g relerr=%.3g expected_tasks=%" PRIu64 " %s last_task_ns=%" PRIu64
           " last_task_rt_ns=%" PRIu64 "\n",
           phx_size(c), tdk_opt.thresh, maps[tdk_opt.map], r->tasks, r->leaves, r->depth, r->integral,
           fabs(r->integral - exact) / exact, expected.tasks, ok ? "OK" : "WRONG", mono, rt);
    fflush(stdout);
    if (!ok)
        phx_exit(c, 1);
}
