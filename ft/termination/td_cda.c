/* CDA: the paper's integer credit-distribution detector (001 §4).
 *
 * Every node starts with C_init credit (so C_total = P*C_init costs no
 * message); rank 0 is also the agent and counts created credit in 128 bits
 * so it can always grant. Invariant: a node that is active or holds sends
 * keeps >= 1 credit, and every primary message carries >= 1.
 *
 * Sends are held (PHX_TD_DELAY) until the task that made them ends, so one
 * task's remote successors form the paper's "simultaneous" batch: at
 * on_task_done() the node keeps a share, at on_idle() the batch is terminal
 * and takes all credit, so a token moving around costs no FLUSH at all. */
#include <stdlib.h>

#include "base/phx_err.h"
#include "ft/termination/td.h"
#include "ft/termination/td_credit.h"
#include "ft/termination/msg.h"
#include "ft/termination/td_ff_util.h"

enum { ST_FLUSH, ST_BORROW, ST_GRANT, ST_TERM, ST_DELAYED, ST_CLAMP, ST_IDLE, ST_NSTAT };

typedef struct {
    uint64_t token;
    int dst;
} cda_held_t;

typedef struct {
    phx_td_env_t env;
    phx_td_credit_cfg_t cfg;
    uint64_t credit;
    int active, borrow_pending, starved, done, dead;
    cda_held_t *held;              /* FIFO of held sends [head, n) */
    size_t head, n, cap;
    unsigned __int128 created, returned;   /* agent (rank 0) only */
    uint64_t stat[ST_NSTAT];
} cda_t;

static void send_msg(cda_t *c, int dst, int type, uint64_t credit)
{
    uint8_t m[PHX_TDC_MSG_MAX];
    long len = phx_tdc_msg_enc(&(phx_tdc_msg_t){ .type = (uint8_t)type, .credit = credit }, m, sizeof m);
    c->env.send(c->env.ctx, dst, m, (size_t)len);
}

static void agent_check(cda_t *c)
{
    if (c->done || c->dead || c->returned != c->created)
        return;
    c->done = 1;
    for (int r = 1; r < c->env.size; r++) {
        send_msg(c, r, PHX_TDC_TERM, 0);
        c->stat[ST_TERM]++;
    }
    c->env.declare(c->env.ctx);
}

/* Gives credit back to the agent; the agent's own return is a local add. */
static void flush(cda_t *c, uint64_t v)
{
    if (!v)
        return;
    if (c->env.rank == 0) {
        c->returned += v;
        agent_check(c);
        return;
    }
    send_msg(c, 0, PHX_TDC_FLUSH, v);
    c->stat[ST_FLUSH]++;
}

static void add_credit(cda_t *c, uint64_t w)
{
    if (w > c->cfg.c_max - c->credit) {   /* clamp, return the excess now */
        flush(c, c->credit + w - c->cfg.c_max);
        c->credit = c->cfg.c_max;
        c->stat[ST_CLAMP]++;
    } else {
        c->credit += w;
    }
}

static void grant_arrived(cda_t *c, uint64_t w);

static void borrow(cda_t *c)
{
    if (c->borrow_pending)
        return;
    c->borrow_pending = 1;
    c->stat[ST_BORROW]++;
    if (c->env.rank == 0) {   /* the agent lends to itself without a message */
        c->created += c->cfg.c_init;
        grant_arrived(c, c->cfg.c_init);
        return;
    }
    send_msg(c, 0, PHX_TDC_BORROW, 0);
}

static void release_one(cda_t *c, uint64_t w)
{
    uint8_t pb[8];
    cda_held_t h = c->held[c->head++];
    phx_tdc_pb_enc(pb, w);
    c->env.release(c->env.ctx, h.token, pb);
}

/* Sends the held batch; remains: the node keeps working (keeps a share). */
static void send_batch(cda_t *c, int remains)
{
    size_t k = c->n - c->head;
    if (k) {
        uint64_t shares = k + (remains ? 1 : 0);
        uint64_t w = c->credit / shares;
        if (c->credit <= c->cfg.c_con && w > c->cfg.w_con)
            w = c->cfg.w_con;
        if (w == 0) {
            /* out of divisible credit: send what we can with 1 each, keep
             * 1 because held sends make us active, and borrow for the rest */
            uint64_t can = c->credit ? c->credit - 1 : 0;
            for (; can && c->head < c->n; can--) {
                release_one(c, 1);
                c->credit--;
            }
            if (!c->starved)
                c->stat[ST_DELAYED] += c->n - c->head;
            c->starved = 1;
            borrow(c);
            return;
        }
        c->starved = 0;
        while (c->head < c->n) {
            uint64_t give = w;
            if (!remains && c->head + 1 == c->n)
                give = c->credit;   /* terminal emission: all of it */
            c->credit -= give;
            release_one(c, give);
        }
        c->head = c->n = 0;
    }
    if (remains && c->credit && c->credit < c->cfg.c_borrow)
        borrow(c);                  /* prefetch: BORROW is on the critical path */
}

/* After credit arrived: retry starved sends; an idle node returns the rest. */
static void settle(cda_t *c)
{
    if (c->starved)
        send_batch(c, c->active);
    if (!c->active && c->head == c->n && c->credit) {
        flush(c, c->credit);
        c->credit = 0;
    }
}

static void grant_arrived(cda_t *c, uint64_t w)
{
    c->borrow_pending = 0;
    add_credit(c, w);
    settle(c);
}

static int cda_create(const phx_td_env_t *env, void **out)
{
    if (!env || !out || env->size < 1 || env->rank < 0 || env->rank >= env->size)
        return PHX_EINVAL;
    cda_t *c = calloc(1, sizeof *c);
    if (!c)
        return PHX_ENOMEM;
    c->env = *env;
    phx_td_credit_get(&c->cfg);
    c->credit = c->cfg.c_init;
    if (env->rank == 0)
        c->created = (unsigned __int128)c->cfg.c_init * (unsigned)env->size;
    *out = c;
    return 0;
}

static void cda_destroy(void *st)
{
    cda_t *c = st;
    if (c)
        free(c->held);
    free(c);
}

static void cda_start(void *st, int has_work)
{
    cda_t *c = st;
    c->active = has_work;
    if (!has_work) {
        c->stat[ST_IDLE]++;
        flush(c, c->credit);
        c->credit = 0;
    }
}

static int cda_on_send(void *st, int dst, uint64_t token, uint8_t *pb)
{
    cda_t *c = st;
    if (c->head == c->n)
        c->head = c->n = 0;
    if (c->n == c->cap) {   /* amortised growth, not one allocation per send */
        size_t nc = c->cap ? c->cap * 2 : 16;
        cda_held_t *h = realloc(c->held, nc * sizeof *h);
        if (!h)
            return PHX_ENOMEM;
        c->held = h;
        c->cap = nc;
    }
    c->held[c->n++] = (cda_held_t){ token, dst };
    return PHX_TD_DELAY;
}

static void cda_on_recv(void *st, int src, const uint8_t *pb)
{
    cda_t *c = st;
    c->active = 1;
    add_credit(c, phx_tdc_pb_dec(pb));
    if (c->starved)
        send_batch(c, 1);
}

static void cda_on_processed(void *st, int src) { (void)st; }

static void cda_on_task_done(void *st)
{
    cda_t *c = st;
    send_batch(c, 1);
}

static void cda_on_idle(void *st)
{
    cda_t *c = st;
    c->active = 0;
    c->stat[ST_IDLE]++;
    send_batch(c, 0);
    settle(c);
}

static void cda_on_busy(void *st) { ((cda_t *)st)->active = 1; }

static int cda_on_ctrl(void *st, int src, const void *msg, size_t len)
{
    cda_t *c = st;
    int agent = c->env.rank == 0;
    if (c->dead)
        return 0;
    phx_tdc_msg_t m;
    if (phx_tdc_msg_dec(msg, len, &m))
        return PHX_EPROTO;
    if (m.type == PHX_TDC_FLUSH && agent) {
        uint64_t v = m.credit;
        if (!v || c->returned + v > c->created)
            return PHX_EPROTO;
        c->returned += v;
        agent_check(c);
        return 0;
    }
    if (m.type == PHX_TDC_BORROW && agent) {
        if (c->done)
            return 0;   /* a prefetch from a node that then went idle: moot */
        c->created += c->cfg.c_init;
        send_msg(c, src, PHX_TDC_GRANT, c->cfg.c_init);
        c->stat[ST_GRANT]++;
        return 0;
    }
    if (m.type == PHX_TDC_GRANT && src == 0 && !agent) {
        uint64_t v = m.credit;
        if (!c->borrow_pending || !v || v > c->cfg.c_max)
            return PHX_EPROTO;
        grant_arrived(c, v);
        return 0;
    }
    if (m.type == PHX_TDC_TERM && src == 0 && !agent) {
        if (c->done)
            return PHX_EPROTO;
        c->done = 1;
        c->env.declare(c->env.ctx);
        return 0;
    }
    return PHX_EPROTO;
}

static void cda_on_failure(void *st, int rank)
{
    cda_t *c = st;
    if (c->dead || c->done)
        return;
    c->dead = 1;   /* the dead node's credit is lost: returned never == created */
    c->env.fatal(c->env.ctx, PHX_EUNRECOVERABLE, "cda: fault-free detector saw a failure");
}

static int cda_stats(void *st, phx_td_stat_t *out, int max)
{
    cda_t *c = st;
    static const char *nm[ST_NSTAT] = { "FLUSH", "BORROW", "GRANT", "TERMINATE",
                                        "delayed", "clamped", "busy_to_idle" };
    int n = 0;
    for (; n < ST_NSTAT && n < max; n++)
        out[n] = (phx_td_stat_t){ nm[n], c->stat[n] };
    return n;
}

void phx_td_cda_debug(const void *st, phx_td_credit_dbg_t *out)
{
    const cda_t *c = st;
    *out = (phx_td_credit_dbg_t){ .credit = c->credit, .held = c->n - c->head,
                                  .is_agent = c->env.rank == 0,
                                  .borrow_pending = c->borrow_pending,
                                  .created = c->created, .returned = c->returned };
}

const phx_td_ops_t phx_td_cda_ops = {
    .name = "cda", .fault_tolerant = 0, .pb_size = 8,
    .create = cda_create, .destroy = cda_destroy, .start = cda_start,
    .on_send = cda_on_send, .on_recv = cda_on_recv, .on_processed = cda_on_processed,
    .on_idle = cda_on_idle, .on_busy = cda_on_busy, .on_ctrl = cda_on_ctrl,
    .on_failure = cda_on_failure, .stats = cda_stats, .on_task_done = cda_on_task_done,
};
