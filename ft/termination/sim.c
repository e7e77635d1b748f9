/* Step simulator: see sim.h. */
#include "ft/termination/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"

#define SIM_MAX_TASKS (1 << 23)   /* guard against a runaway refinement */

static uint64_t mix(uint64_t *s)   /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return (double)(mix(s) >> 11) / 9007199254740992.0; }

/* ---- tree generation ------------------------------------------------------- */

typedef struct {
    int n, cap, *lvl, *kid;       /* kid: first of two consecutive children, -1 */
    int *stack, sn, scap;
} gen_t;

static int gen_add(gen_t *g, int level)
{
    if (g->n == g->cap) {
        int nc = g->cap ? g->cap * 2 : 1024;
        if (nc > SIM_MAX_TASKS)
            return PHX_ERANGE;
        int *a = realloc(g->lvl, (size_t)nc * sizeof *a);
        if (!a)
            return PHX_ENOMEM;
        g->lvl = a;
        int *b = realloc(g->kid, (size_t)nc * sizeof *b);
        if (!b)
            return PHX_ENOMEM;
        g->kid = b;
        g->cap = nc;
    }
    g->lvl[g->n] = level;
    g->kid[g->n] = -1;
    return g->n++;
}

static int gen_push(gen_t *g, int x)
{
    if (g->sn == g->scap) {
        int nc = g->scap ? g->scap * 2 : 1024;
        int *a = realloc(g->stack, (size_t)nc * sizeof *a);
        if (!a)
            return PHX_ENOMEM;
        g->stack = a;
        g->scap = nc;
    }
    g->stack[g->sn++] = x;
    return 0;
}

/* Grows a complete subtree of h levels under leaf x; its leaves become
 * refinement candidates. Levels >= lmax are cropped. */
static int gen_expand(gen_t *g, int x, int h, int lmax)
{
    if (h <= 1 || g->lvl[x] + 1 >= lmax)
        return gen_push(g, x);
    int a = gen_add(g, g->lvl[x] + 1);
    if (a < 0)
        return a;
    int b = gen_add(g, g->lvl[x] + 1);
    if (b < 0)
        return b;
    g->kid[x] = a;
    int rc = gen_expand(g, a, h - 1, lmax);
    return rc < 0 ? rc : gen_expand(g, b, h - 1, lmax);
}

void phx_tdsim_tree_free(phx_tdsim_tree_t *t)
{
    free(t->level);
    free(t->first);
    free(t->nchild);
    memset(t, 0, sizeof *t);
}

int phx_tdsim_tree_gen(phx_tdsim_tree_t *t, double lambda, int lmax, uint64_t seed)
{
    if (!t || lambda < 0 || lambda > 1 || lmax < 1)
        return PHX_EINVAL;
    memset(t, 0, sizeof *t);
    gen_t g = { 0 };
    uint64_t rs = seed;
    int rc = gen_add(&g, 0);
    if (rc >= 0)
        rc = gen_expand(&g, 0, 3, lmax);   /* L_min = 3 levels [R] */
    while (rc >= 0 && g.sn) {
        int x = g.stack[--g.sn];
        if (unif(&rs) < pow(lambda, g.lvl[x]))
            rc = gen_expand(&g, x, 2 + (int)(mix(&rs) % 4), lmax);
    }
    if (rc >= 0) {
        /* breadth-first relabelling: task 0 at level 0, then 1-2, ... */
        int *order = malloc((size_t)g.n * sizeof *order);
        t->level = malloc((size_t)g.n * sizeof *t->level);
        t->first = malloc((size_t)g.n * sizeof *t->first);
        t->nchild = malloc((size_t)g.n);
        if (!order || !t->level || !t->first || !t->nchild) {
            rc = PHX_ENOMEM;
        } else {
            int head = 0, tail = 0;
            order[tail++] = 0;
            while (head < tail) {
                int x = order[head], id = head++;
                t->level[id] = g.lvl[x];
                if (g.lvl[x] + 1 > t->height)
                    t->height = g.lvl[x] + 1;
                t->nchild[id] = g.kid[x] >= 0 ? 2 : 0;
                t->first[id] = g.kid[x] >= 0 ? tail : -1;
                if (g.kid[x] >= 0) {
                    order[tail++] = g.kid[x];
                    order[tail++] = g.kid[x] + 1;
                }
            }
            t->ntask = g.n;
        }
        free(order);
    }
    free(g.lvl);
    free(g.kid);
    free(g.stack);
    if (rc < 0)
        phx_tdsim_tree_free(t);
    return rc < 0 ? rc : 0;
}

/* ---- engine ------------------------------------------------------------------- */

typedef struct {
    int src, dst;
    uint8_t len;
    uint8_t data[32];
} ctl_t;

typedef struct {
    int src, dst, ready, delivered;
    uint8_t pb[PHX_TD_PB_MAX];
} prim_t;

typedef struct sim sim_t;
typedef struct {
    sim_t *sim;
    int rank, declared, fatal;
    void *st;
} snode_t;

struct sim {
    const phx_td_ops_t *ops;
    int P;
    snode_t *node;
    ctl_t *q;                  /* global control FIFO (ring) */
    size_t qh, qn, qcap;
    prim_t *pm;                /* primaries of the current phase */
    size_t pn, pcap, pending;  /* pending: emitted, not yet delivered */
    int rounds;                /* control rounds per phase: about one 4C wave */
    uint64_t work_left;        /* tasks not yet executed: safety check */
    int err;
    phx_tdsim_result_t res;
};

static void s_send(void *ctx, int dst, const void *msg, size_t len)
{
    snode_t *nd = ctx;
    sim_t *s = nd->sim;
    if (len > sizeof s->q[0].data || dst < 0 || dst >= s->P) {
        s->err = PHX_EINVAL;
        return;
    }
    if (s->qn == s->qcap) {
        size_t nc = s->qcap ? s->qcap * 2 : 1024;
        ctl_t *q = malloc(nc * sizeof *q);
        if (!q) {
            s->err = PHX_ENOMEM;
            return;
        }
        for (size_t i = 0; i < s->qn; i++)
            q[i] = s->q[(s->qh + i) % s->qcap];
        free(s->q);
        s->q = q;
        s->qh = 0;
        s->qcap = nc;
    }
    ctl_t *c = &s->q[(s->qh + s->qn++) % s->qcap];
    c->src = nd->rank;
    c->dst = dst;
    c->len = (uint8_t)len;
    memcpy(c->data, msg, len);
    s->res.ctrl++;
}

static void s_declare(void *ctx)
{
    snode_t *nd = ctx;
    sim_t *s = nd->sim;
    nd->declared++;
    s->res.declared++;
    if (s->work_left || s->pending)
        s->res.premature = 1;
}

static void s_fatal(void *ctx, int code, const char *why)
{
    snode_t *nd = ctx;
    nd->fatal = 1;
    nd->sim->res.fatal++;
}

static void s_release(void *ctx, uint64_t token, const uint8_t *pb)
{
    snode_t *nd = ctx;
    sim_t *s = nd->sim;
    if (token >= s->pn || s->pm[token].ready || s->pm[token].src != nd->rank) {
        s->err = PHX_EPROTO;
        return;
    }
    memcpy(s->pm[token].pb, pb, s->ops->pb_size);
    s->pm[token].ready = 1;
}

/* Delivers control traffic in rounds (a round = what is queued when it
 * starts). max_rounds < 0: until quiet. A bound is needed while primaries
 * are in transit: 4C would otherwise repeat failing waves forever, where a
 * real network delivers the primaries meanwhile. */
static void settle(sim_t *s, int max_rounds)
{
    for (int round = 0; s->qn && !s->err && (max_rounds < 0 || round < max_rounds); round++)
        for (size_t k = s->qn; k && !s->err; k--) {
            ctl_t c = s->q[s->qh];
            s->qh = (s->qh + 1) % s->qcap;
            s->qn--;
            int rc = s->ops->on_ctrl(s->node[c.dst].st, c.src, c.data, c.len);
            if (rc < 0)
                s->err = rc;
        }
}

static void emit(sim_t *s, int src, int dst)
{
    if (s->pn == s->pcap) {
        size_t nc = s->pcap ? s->pcap * 2 : 1024;
        prim_t *p = realloc(s->pm, nc * sizeof *p);
        if (!p) {
            s->err = PHX_ENOMEM;
            return;
        }
        s->pm = p;
        s->pcap = nc;
    }
    prim_t *m = &s->pm[s->pn];
    memset(m, 0, sizeof *m);
    m->src = src;
    m->dst = dst;
    uint64_t tok = s->pn++;
    int rc = s->ops->on_send(s->node[src].st, dst, tok, m->pb);
    s->pending++;
    if (rc == 0)
        m->ready = 1;
    else if (rc != PHX_TD_DELAY)
        s->err = rc < 0 ? rc : PHX_EPROTO;
    s->res.primary++;
}

/* One step's communication: released primaries arrive (a send still held
 * for credit waits for its GRANT), then control traffic gets its rounds. */
static void deliver(sim_t *s)
{
    for (;;) {
        for (size_t i = 0; i < s->pn && !s->err; i++) {
            prim_t *m = &s->pm[i];
            if (!m->ready || m->delivered)
                continue;
            m->delivered = 1;
            s->pending--;
            s->ops->on_recv(s->node[m->dst].st, m->src, m->pb);
        }
        if (!s->pending || s->err)
            break;
        /* a task may not run before its message arrived: wait for GRANTs */
        if (!s->qn) {
            s->err = PHX_EAGAIN;
            break;
        }
        settle(s, s->rounds);
    }
    s->pn = 0;
    settle(s, s->rounds);
}

static int sim_init(sim_t *s, const phx_td_ops_t *ops, int P)
{
    memset(s, 0, sizeof *s);
    s->ops = ops;
    s->P = P;
    s->rounds = 4;
    for (int p = 1; p < P; p *= 2)
        s->rounds += 2;
    s->node = calloc((size_t)P, sizeof *s->node);
    if (!s->node)
        return PHX_ENOMEM;
    for (int r = 0; r < P; r++) {
        snode_t *nd = &s->node[r];
        nd->sim = s;
        nd->rank = r;
        phx_td_env_t env = { .rank = r, .size = P, .ctx = nd, .send = s_send,
                             .declare = s_declare, .fatal = s_fatal, .release = s_release };
        int rc = ops->create(&env, &nd->st);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int sim_done(sim_t *s, phx_tdsim_result_t *res)
{
    int rc = s->err;
    if (s->node)
        for (int r = 0; r < s->P; r++)
            if (s->node[r].st)
                s->ops->destroy(s->node[r].st);
    free(s->node);
    free(s->q);
    free(s->pm);
    *res = s->res;
    return rc;
}

static void task_end(sim_t *s, int p, int idle)
{
    if (idle)
        s->ops->on_idle(s->node[p].st);
    else if (s->ops->on_task_done)
        s->ops->on_task_done(s->node[p].st);
}

int phx_tdsim_run_tree(const phx_td_ops_t *ops, const phx_tdsim_tree_t *t, int P,
                       int random_map, phx_tdsim_model_t model, uint64_t seed,
                       phx_tdsim_result_t *res)
{
    if (!ops || !t || !res || P < 1 || t->ntask < 1 || model >= PHX_TDSIM_NMODEL)
        return PHX_EINVAL;
    int n = t->ntask;
    int *map = malloc((size_t)n * sizeof *map), *parent = malloc((size_t)n * sizeof *parent);
    int *cnt = calloc((size_t)P, sizeof *cnt), *load = calloc((size_t)P, sizeof *load);
    int *minsrc = malloc((size_t)P * sizeof *minsrc), *order = malloc((size_t)n * sizeof *order);
    int *pos = malloc(((size_t)P + 1) * sizeof *pos);
    uint8_t *self_next = calloc((size_t)P, 1), *has_next = calloc((size_t)P, 1);
    sim_t s;
    int rc = sim_init(&s, ops, P);
    if (!map || !parent || !cnt || !load || !minsrc || !order || !pos || !self_next ||
        !has_next) {
        rc = PHX_ENOMEM;
        goto out;
    }
    if (rc < 0)
        goto out;
    uint64_t rs = seed;
    for (int x = 0; x < n; x++) {
        map[x] = random_map ? (int)(mix(&rs) % (uint64_t)P) : x % P;
        parent[x] = -1;
    }
    for (int x = 0; x < n; x++)
        for (int c = 0; c < t->nchild[x]; c++)
            parent[t->first[x] + c] = x;
    s.work_left = (uint64_t)n;
    for (int r = 0; r < P; r++)
        ops->start(s.node[r].st, r == map[0]);
    settle(&s, -1);
    int lo = 0;
    while (lo < n && !s.err) {
        int l = t->level[lo], hi = lo;
        while (hi < n && t->level[hi] == l)
            hi++;
        /* group this level's tasks by process (stable) */
        memset(pos, 0, ((size_t)P + 1) * sizeof *pos);
        for (int x = lo; x < hi; x++)
            pos[map[x] + 1]++;
        for (int p = 0; p < P; p++)
            pos[p + 1] += pos[p];
        memcpy(cnt, pos, (size_t)P * sizeof *cnt);
        for (int x = lo; x < hi; x++)
            order[cnt[map[x]]++] = x;
        memset(self_next, 0, (size_t)P);
        memset(has_next, 0, (size_t)P);
        for (int p = 0; p < P; p++)
            minsrc[p] = INT32_MAX;
        for (int x = lo; x < hi; x++)
            for (int c = 0; c < t->nchild[x]; c++) {
                int d = map[t->first[x] + c];
                has_next[d] = 1;
                if (d == map[x])
                    self_next[d] = 1;
                else if (load[map[x]] < minsrc[d])
                    minsrc[d] = load[map[x]];
            }
        s.res.steps++;
        for (int p = 0; p < P && !s.err; p++) {
            for (int i = pos[p]; i < pos[p + 1] && !s.err; i++) {
                int x = order[i];
                for (int c = 0; c < t->nchild[x]; c++)
                    if (map[t->first[x] + c] != p)
                        emit(&s, p, map[t->first[x] + c]);
                s.work_left--;
                if (parent[x] >= 0 && map[parent[x]] != p)
                    ops->on_processed(s.node[p].st, map[parent[x]]);
                if (i + 1 < pos[p + 1]) {
                    task_end(&s, p, 0);
                    continue;
                }
                int idle;
                switch (model) {
                case PHX_TDSIM_INSTANT: idle = !has_next[p]; break;
                case PHX_TDSIM_LOCAL:   idle = !self_next[p]; break;
                default:                idle = !self_next[p] && load[p] < minsrc[p]; break;
                }
                task_end(&s, p, idle);
            }
        }
        /* load of the next step = primary messages received now */
        memset(load, 0, (size_t)P * sizeof *load);
        for (size_t i = 0; i < s.pn; i++)
            load[s.pm[i].dst] += !s.pm[i].delivered;
        deliver(&s);
        lo = hi;
    }
    settle(&s, -1);
out:
    free(map);
    free(parent);
    free(cnt);
    free(load);
    free(minsrc);
    free(order);
    free(pos);
    free(self_next);
    free(has_next);
    int rc2 = sim_done(&s, res);
    return rc < 0 ? rc : rc2;
}

int phx_tdsim_run_ring(const phx_td_ops_t *ops, int P, int k, double qb, uint64_t seed,
                       phx_tdsim_result_t *res)
{
    if (!ops || !res || P < 1 || k < 1 || qb < 0 || qb > 1)
        return PHX_EINVAL;
    sim_t s;
    int rc = sim_init(&s, ops, P);
    if (rc >= 0) {
        uint64_t rs = seed;
        int owner = 0, from = -1;
        s.work_left = (uint64_t)k;
        for (int r = 0; r < P; r++)
            ops->start(s.node[r].st, r == 0);
        settle(&s, -1);
        for (int i = 0; i < k && !s.err; i++) {
            s.res.steps++;
            int leaf = unif(&rs) < qb;
            int next = i + 1 < k ? (int)(mix(&rs) % (uint64_t)P) : -1;
            if (next >= 0 && next != owner)
                emit(&s, owner, next);
            s.work_left--;
            if (from >= 0)
                ops->on_processed(s.node[owner].st, from);
            if (leaf)     /* the side leaf runs after the token task */
                task_end(&s, owner, 0);
            task_end(&s, owner, next != owner);
            deliver(&s);
            from = next == owner ? -1 : owner;
            owner = next;
        }
        settle(&s, -1);
    }
    int rc2 = sim_done(&s, res);
    return rc < 0 ? rc : rc2;
}
