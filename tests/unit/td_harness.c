/* Discrete-event simulator and oracle for termination detectors; the model
 * and the oracle are documented in td_harness.h. */
#include "td_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "ft/termination/td_util.h"

typedef struct th_msg {
    struct th_msg *next;
    int primary;
    int depth;                 /* workload payload of a primary message */
    size_t len;
    uint8_t data[];            /* control bytes or piggyback */
} th_msg_t;

typedef struct th_chan {
    th_msg_t *head, *tail;
    int ready_idx;             /* position in sim->ready, -1 if empty */
} th_chan_t;

typedef struct th_held {
    uint64_t token;
    int dst, depth;
} th_held_t;

typedef struct th_node {
    struct th_sim *sim;
    int rank, alive, declared, fatal;
    void *st;
    int running;               /* a task or handler is executing */
    int nwait;                 /* received primaries waiting for a handler */
    int wait_cap;
    struct { int src, depth; } *wait;
    int nlocal, local_cap;
    int *local;                /* depths of local tasks */
    int nheld, held_cap;
    th_held_t *held;
    uint8_t *notice;           /* notice[r]: on_failure(r) still owed */
} th_node_t;

struct th_sim {
    th_cfg_t cfg;
    uint64_t rng;
    int n;
    th_node_t *node;
    th_chan_t *ch;             /* ch[src * n + dst] */
    int *ready, nready;
    uint64_t next_token;
    int budget;
    int failed;
    int trace;                 /* TH_TRACE set: log every event to stderr */
    int owed;                  /* failure notices not yet delivered */
    int *kill_done;
    th_result_t res;
};

static uint64_t rnd(th_sim_t *s)   /* splitmix64 */
{
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rndn(th_sim_t *s, int n) { return (int)(rnd(s) % (uint64_t)n); }
static double rndf(th_sim_t *s) { return (double)(rnd(s) >> 11) / 9007199254740992.0; }

static void fail(th_sim_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(th_sim_t *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = 1;
    s->res.ok = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->res.why, sizeof s->res.why, fmt, ap);
    va_end(ap);
}

static void chan_push(th_sim_t *s, int src, int dst, th_msg_t *m)
{
    th_chan_t *c = &s->ch[src * s->n + dst];
    m->next = NULL;
    if (c->tail)
        c->tail->next = m;
    else
        c->head = m;
    c->tail = m;
    if (c->ready_idx < 0) {
        c->ready_idx = s->nready;
        s->ready[s->nready++] = src * s->n + dst;
    }
}

static th_msg_t *chan_pop(th_sim_t *s, int id)
{
    th_chan_t *c = &s->ch[id];
    th_msg_t *m = c->head;
    c->head = m->next;
    if (!c->head) {
        c->tail = NULL;
        int last = s->ready[--s->nready];
        s->ready[c->ready_idx] = last;
        s->ch[last].ready_idx = c->ready_idx;
        c->ready_idx = -1;
    }
    return m;
}

static th_msg_t *msg_new(th_sim_t *s, int primary, int depth, const void *d, size_t len)
{
    th_msg_t *m = malloc(sizeof *m + len);
    if (!m) {
        fail(s, "out of memory");
        return NULL;
    }
    m->primary = primary;
    m->depth = depth;
    m->len = len;
    if (len)
        memcpy(m->data, d, len);
    return m;
}

/* ---- env callbacks ---------------------------------------------------- */

static void env_send(void *ctx, int dst, const void *msg, size_t len)
{
    th_node_t *nd = ctx;
    th_sim_t *s = nd->sim;
    if (!nd->alive)
        return fail(s, "rank %d sent control after death", nd->rank);
    if (dst < 0 || dst >= s->n || dst == nd->rank)
        return fail(s, "rank %d sent control to bad rank %d", nd->rank, dst);
    th_msg_t *m = msg_new(s, 0, 0, msg, len);
    if (!m)
        return;
    chan_push(s, nd->rank, dst, m);
    s->res.ctrl++;
    s->res.ctrl_bytes += len;
    s->res.ctrl_by_node[nd->rank]++;
}

/* True termination over live nodes, held sends included. */
static int quiescent(th_sim_t *s, int *who)
{
    for (int i = 0; i < s->n; i++) {
        th_node_t *nd = &s->node[i];
        if (nd->alive && (nd->running || nd->nwait || nd->nlocal || nd->nheld)) {
            *who = i;
            return 0;
        }
    }
    for (int k = 0; k < s->nready; k++) {
        int id = s->ready[k];
        if (!s->node[id % s->n].alive)
            continue;
        for (th_msg_t *m = s->ch[id].head; m; m = m->next)
            if (m->primary) {
                *who = -1 - id;
                return 0;
            }
    }
    return 1;
}

static void env_declare(void *ctx)
{
    th_node_t *nd = ctx;
    th_sim_t *s = nd->sim;
    int who;
    if (nd->declared)
        return fail(s, "rank %d declared twice", nd->rank);
    if (nd->fatal)
        return fail(s, "rank %d declared after fatal", nd->rank);
    nd->declared = 1;
    s->res.declared++;
    if (s->res.first_decl < 0)
        s->res.first_decl = nd->rank;
    if (!quiescent(s, &who)) {
        if (who >= 0)
            fail(s, "rank %d declared while rank %d is active", nd->rank, who);
        else
            fail(s, "rank %d declared with a primary in transit on channel %d",
                 nd->rank, -1 - who);
    }
}

static void env_fatal(void *ctx, int code, const char *why)
{
    th_node_t *nd = ctx;
    (void)code;
    (void)why;
    if (!nd->fatal)
        nd->sim->res.fatal++;
    nd->fatal = 1;
}

static void env_release(void *ctx, uint64_t token, const uint8_t *pb)
{
    th_node_t *nd = ctx;
    th_sim_t *s = nd->sim;
    for (int i = 0; i < nd->nheld; i++) {
        if (nd->held[i].token != token)
            continue;
        th_held_t h = nd->held[i];
        if (s->trace)
            fprintf(stderr, "  rank %d releases its send to %d\n", nd->rank, h.dst);
        memmove(&nd->held[i], &nd->held[i + 1], (size_t)(nd->nheld - i - 1) * sizeof h);
        nd->nheld--;
        th_msg_t *m = msg_new(s, 1, h.depth, pb, s->cfg.ops->pb_size);
        if (m)
            chan_push(s, nd->rank, h.dst, m);
        return;
    }
    fail(s, "rank %d released unknown token %d", nd->rank, (int)token);
}

/* ---- workload ----------------------------------------------------------- */

static void emit(th_sim_t *s, th_node_t *nd, int dst, int depth)
{
    if (s->failed)
        return;
    s->res.tasks++;
    if (dst == nd->rank) {   /* node-local successor: not a primary message */
        if (phx_td_grow((void **)&nd->local, &nd->local_cap, nd->nlocal + 1, sizeof(int)))
            return fail(s, "out of memory");
        nd->local[nd->nlocal++] = depth;
        s->res.local++;
        return;
    }
    uint8_t pb[PHX_TD_PB_MAX];
    memset(pb, 0, sizeof pb);
    uint64_t tok = s->next_token++;
    int rc = s->cfg.ops->on_send(nd->st, dst, tok, pb);
    s->res.primary++;
    if (s->trace)
        fprintf(stderr, "  rank %d sends to %d%s\n", nd->rank, dst,
                rc == PHX_TD_DELAY ? " (held)" : "");
    if (rc == PHX_TD_DELAY) {
        if (phx_td_grow((void **)&nd->held, &nd->held_cap, nd->nheld + 1, sizeof(th_held_t)))
            return fail(s, "out of memory");
        nd->held[nd->nheld++] = (th_held_t){ tok, dst, depth };
        s->res.delayed++;
        return;
    }
    if (rc < 0)
        return fail(s, "on_send at rank %d returned %d", nd->rank, rc);
    th_msg_t *m = msg_new(s, 1, depth, pb, s->cfg.ops->pb_size);
    if (m)
        chan_push(s, nd->rank, dst, m);
}

static int take(th_sim_t *s)
{
    if (s->budget <= 0)
        return 0;
    s->budget--;
    return 1;
}

/* Successors of one task of the given depth at node nd. */
static void run_task(th_sim_t *s, th_node_t *nd, int depth)
{
    int n = s->n, r = nd->rank;
    switch (s->cfg.wl) {
    case TH_WL_TREE: {
        static const int cum[] = { 30, 60, 85, 100 };
        int x = rndn(s, 100), k = 0;
        while (x >= cum[k])
            k++;
        if (depth == 0 && k == 0)
            k = 2;
        for (int i = 0; i < k && take(s); i++)
            emit(s, nd, rndn(s, n), depth + 1);
        break;
    }
    case TH_WL_CHAIN:
        if (take(s))
            emit(s, nd, rndn(s, 8) == 0 ? r : rndn(s, n), depth + 1);
        break;
    case TH_WL_FANOUT:
        if (depth == 0 || rndn(s, 5) == 0)
            for (int i = 0; i < n && take(s); i++)
                emit(s, nd, (r + 1 + i) % n, depth + 1);
        break;
    case TH_WL_RING:
    case TH_WL_WALK:
        if (depth < 0)       /* a side leaf spawned by the token */
            break;
        if (rndf(s) < s->cfg.qb && take(s))
            emit(s, nd, r, -1);
        if (take(s))
            emit(s, nd, s->cfg.wl == TH_WL_RING ? (r + 1) % n : rndn(s, n), depth + 1);
        break;
    default:
        break;
    }
}

static void after_task(th_sim_t *s, th_node_t *nd)
{
    if (s->failed || !nd->alive)
        return;
    if (!nd->nwait && !nd->nlocal) {
        if (s->trace)
            fprintf(stderr, "  rank %d idle\n", nd->rank);
        s->cfg.ops->on_idle(nd->st);
    }
    else if (s->cfg.ops->on_task_done)
        s->cfg.ops->on_task_done(nd->st);
}

/* ---- failures ------------------------------------------------------------ */

static void kill_node(th_sim_t *s, int r)
{
    th_node_t *nd = &s->node[r];
    if (!nd->alive)
        return;
    if (s->trace)
        fprintf(stderr, "  rank %d killed\n", r);
    nd->alive = 0;
    nd->nwait = nd->nlocal = nd->nheld = 0;
    for (int x = 0; x < s->n; x++)
        if (nd->notice[x]) {
            nd->notice[x] = 0;
            s->owed--;
        }
    for (int d = 0; d < s->n; d++) {
        th_chan_t *c = &s->ch[r * s->n + d];
        th_msg_t **pp = &c->head, *last = NULL;
        while (*pp) {
            th_msg_t *m = *pp;
            int drop = rndf(s) < s->cfg.drop_prob;
            if (drop || (s->cfg.drop_ctl && !m->primary)) {
                *pp = m->next;
                free(m);
                s->res.dropped++;
            } else {
                last = m;
                pp = &m->next;
            }
        }
        c->tail = last;
        if (!c->head && c->ready_idx >= 0) {
            int lastid = s->ready[--s->nready];
            s->ready[c->ready_idx] = lastid;
            s->ch[lastid].ready_idx = c->ready_idx;
            c->ready_idx = -1;
        }
        if (d != r && s->node[d].alive && !s->node[d].notice[r]) {
            s->node[d].notice[r] = 1;
            s->owed++;
        }
    }
}

/* ---- main loop ----------------------------------------------------------- */

int th_create(const th_cfg_t *cfg, th_sim_t **out)
{
    if (!cfg || !out || !cfg->ops || cfg->n < 1 || cfg->n > TH_MAX_NODES ||
        cfg->budget < 1 || cfg->nkill < 0 || cfg->nkill > TH_MAX_KILLS ||
        cfg->ops->pb_size > PHX_TD_PB_MAX)
        return PHX_EINVAL;
    th_sim_t *s = calloc(1, sizeof *s);
    if (!s)
        return PHX_ENOMEM;
    int n = cfg->n;
    s->cfg = *cfg;
    if (!s->cfg.max_steps)
        s->cfg.max_steps = 2000000;
    s->n = n;
    s->rng = cfg->seed * 0x2545F4914F6CDD1Dull + 1;
    s->budget = cfg->budget;
    s->trace = getenv("TH_TRACE") != NULL;
    s->res.ok = 1;
    s->res.first_decl = -1;
    s->node = calloc((size_t)n, sizeof *s->node);
    s->ch = calloc((size_t)n * (size_t)n, sizeof *s->ch);
    s->ready = calloc((size_t)n * (size_t)n, sizeof *s->ready);
    s->kill_done = calloc(TH_MAX_KILLS, sizeof(int));
    if (!s->node || !s->ch || !s->ready || !s->kill_done) {
        th_destroy(s);
        return PHX_ENOMEM;
    }
    for (int i = 0; i < n * n; i++)
        s->ch[i].ready_idx = -1;
    for (int i = 0; i < n; i++) {
        th_node_t *nd = &s->node[i];
        nd->sim = s;
        nd->rank = i;
        nd->alive = 1;
        nd->notice = calloc((size_t)n, 1);
        if (!nd->notice) {
            th_destroy(s);
            return PHX_ENOMEM;
        }
        phx_td_env_t env = { .rank = i, .size = n, .ctx = nd, .send = env_send,
                             .declare = env_declare, .fatal = env_fatal,
                             .release = env_release };
        int rc = cfg->ops->create(&env, &nd->st);
        if (rc < 0) {
            th_destroy(s);
            return rc;
        }
    }
    /* the initial task is a local task of rank 0 */
    s->node[0].local = malloc(8 * sizeof(int));
    if (!s->node[0].local) {
        th_destroy(s);
        return PHX_ENOMEM;
    }
    s->node[0].local_cap = 8;
    s->node[0].local[s->node[0].nlocal++] = 0;
    s->res.tasks = 1;
    for (int i = 0; i < n; i++)
        cfg->ops->start(s->node[i].st, i == 0);
    *out = s;
    return 0;
}

int th_step(th_sim_t *s)
{
    if (s->failed)
        return 0;
    for (int k = 0; k < s->cfg.nkill; k++)
        if (!s->kill_done[k] && s->res.steps >= s->cfg.kill[k].step) {
            s->kill_done[k] = 1;
            kill_node(s, s->cfg.kill[k].rank);
        }
    /* Enabled actions: channels, nodes with work, owed failure notices. */
    int n = s->n, nwork = 0, nnot = 0;
    for (int i = 0; i < n; i++) {
        th_node_t *nd = &s->node[i];
        if (!nd->alive)
            continue;
        nwork += (nd->nwait > 0) + (nd->nlocal > 0);
        for (int r = 0; s->owed && r < n; r++)
            nnot += nd->notice[r] && !s->ch[r * n + i].head;
    }
    int total = s->nready + nwork + nnot;
    if (total == 0) {
        s->res.drained = 1;
        return 0;
    }
    if (s->res.steps >= s->cfg.max_steps) {
        fail(s, "no drain after %d steps", (int)s->res.steps);
        return 0;
    }
    s->res.steps++;
    int pick = rndn(s, total);
    const phx_td_ops_t *ops = s->cfg.ops;
    if (pick < s->nready) {
        int id = s->ready[pick], src = id / n, dst = id % n;
        th_msg_t *m = chan_pop(s, id);
        if (s->trace)
            fprintf(stderr, "step %llu: %d->%d %s type %d len %zu\n",
                    (unsigned long long)s->res.steps, src, dst, m->primary ? "PRIMARY" : "ctrl",
                    m->len ? m->data[0] : -1, m->len);
        th_node_t *nd = &s->node[dst];
        if (nd->alive) {
            if (m->primary) {
                if (phx_td_grow((void **)&nd->wait, &nd->wait_cap, nd->nwait + 1,
                                sizeof *nd->wait)) {
                    free(m);
                    fail(s, "out of memory");
                    return 0;
                }
                nd->wait[nd->nwait].src = src;
                nd->wait[nd->nwait].depth = m->depth;
                nd->nwait++;
                ops->on_recv(nd->st, src, m->data);
            } else {
                int rc = ops->on_ctrl(nd->st, src, m->data, m->len);
                if (rc != 0)
                    fail(s, "on_ctrl rejected a message at rank %d: %d", dst, rc);
            }
        }
        free(m);
    } else if ((pick -= s->nready) < nwork) {
        for (int i = 0; i < n; i++) {
            th_node_t *nd = &s->node[i];
            if (!nd->alive)
                continue;
            if (nd->nwait > 0 && pick-- == 0) {
                int j = rndn(s, nd->nwait);   /* workers pick any waiting message */
                int src = nd->wait[j].src, depth = nd->wait[j].depth;
                if (s->trace)
                    fprintf(stderr, "step %llu: rank %d handles msg from %d\n",
                            (unsigned long long)s->res.steps, i, src);
                nd->wait[j] = nd->wait[--nd->nwait];
                nd->running = 1;
                run_task(s, nd, depth);
                nd->running = 0;
                if (!s->failed)
                    ops->on_processed(nd->st, src);
                after_task(s, nd);
                break;
            }
            if (nd->nlocal > 0 && pick-- == 0) {
                int depth = nd->local[--nd->nlocal];
                if (s->trace)
                    fprintf(stderr, "step %llu: rank %d runs a local task\n",
                            (unsigned long long)s->res.steps, i);
                nd->running = 1;
                run_task(s, nd, depth);
                nd->running = 0;
                after_task(s, nd);
                break;
            }
        }
    } else {
        pick -= nwork;
        for (int i = 0; i < n; i++) {
            th_node_t *nd = &s->node[i];
            if (!nd->alive)
                continue;
            for (int r = 0; r < n; r++)
                if (nd->notice[r] && !s->ch[r * n + i].head && pick-- == 0) {
                    nd->notice[r] = 0;
                    s->owed--;
                    if (s->trace)
                        fprintf(stderr, "step %llu: rank %d learns %d failed\n",
                                (unsigned long long)s->res.steps, i, r);
                    ops->on_failure(nd->st, r);
                    goto done;
                }
        }
    }
done:
    if (!s->failed && s->cfg.check) {
        char why[200] = "";
        if (s->cfg.check(s, s->cfg.check_arg, why, sizeof why))
            fail(s, "check: %s", why);
    }
    return !s->failed;
}

void th_finish(th_sim_t *s, th_result_t *res)
{
    if (!s->failed && s->res.drained && !s->res.fatal) {
        int live = 0, decl = 0;
        for (int i = 0; i < s->n; i++)
            if (s->node[i].alive) {
                live++;
                decl += s->node[i].declared;
            }
        if (decl == 0 && live > 0)
            fail(s, "drained without detection (%d live nodes)", live);
        else if (s->cfg.live_all && decl < live)
            fail(s, "only %d of %d live nodes learnt of termination", decl, live);
    }
    *res = s->res;
}

void th_destroy(th_sim_t *s)
{
    if (!s)
        return;
    if (s->node) {
        for (int i = 0; i < s->n; i++) {
            th_node_t *nd = &s->node[i];
            if (nd->st)
                s->cfg.ops->destroy(nd->st);
            free(nd->wait);
            free(nd->local);
            free(nd->held);
            free(nd->notice);
        }
    }
    if (s->ch)
        for (int i = 0; i < s->n * s->n; i++)
            for (th_msg_t *m = s->ch[i].head, *nx; m; m = nx) {
                nx = m->next;
                free(m);
            }
    free(s->node);
    free(s->ch);
    free(s->ready);
    free(s->kill_done);
    free(s);
}

int th_run(const th_cfg_t *cfg, th_result_t *res)
{
    th_sim_t *s;
    int rc = th_create(cfg, &s);
    if (rc < 0)
        return rc;
    while (th_step(s))
        ;
    th_finish(s, res);
    th_destroy(s);
    return 0;
}

void *th_state(th_sim_t *s, int rank)
{
    return rank >= 0 && rank < s->n && s->node[rank].alive ? s->node[rank].st : NULL;
}
int th_alive(th_sim_t *s, int rank) { return rank >= 0 && rank < s->n && s->node[rank].alive; }
int th_size(th_sim_t *s) { return s->n; }
int th_held(th_sim_t *s, int rank) { return s->node[rank].nheld; }

void th_foreach_msg(th_sim_t *s,
                    void (*fn)(void *arg, int src, int dst, int primary,
                               const uint8_t *data, size_t len),
                    void *arg)
{
    for (int k = 0; k < s->nready; k++) {
        int id = s->ready[k];
        for (th_msg_t *m = s->ch[id].head; m; m = m->next)
            fn(arg, id / s->n, id % s->n, m->primary, m->data, m->len);
    }
}

void th_foreach_held(th_sim_t *s, void (*fn)(void *arg, int src, int dst), void *arg)
{
    for (int r = 0; r < s->n; r++)
        for (int i = 0; s->node[r].alive && i < s->node[r].nheld; i++)
            fn(arg, r, s->node[r].held[i].dst);
}
