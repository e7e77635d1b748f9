/* HCDA: Huang's credit distribution as the paper benchmarks it (001 §3.4,
 * integer form [R]): each send halves the local credit, every busy->idle
 * transition FLUSHes the whole stash, and a node whose credit cannot be
 * halved delays its sends and BORROWs C_init from the agent (rank 0).
 * Kept as the baseline CDA improves on (terminal emission, multi-regime
 * split, prefetch). */
#include <stdlib.h>

#include "base/phx_err.h"
#include "ft/termination/td.h"
#include "ft/termination/td_credit.h"
#include "ft/termination/msg.h"
#include "ft/termination/td_ff_util.h"

enum { ST_FLUSH, ST_BORROW, ST_GRANT, ST_TERM, ST_DELAYED, ST_CLAMP, ST_NSTAT };

typedef struct {
    uint64_t token;
    int dst;
} hc_held_t;

typedef struct {
    phx_td_env_t env;
    phx_td_credit_cfg_t cfg;
    uint64_t credit;
    int active, borrow_pending, done, dead;
    hc_held_t *held;
    size_t head, n, cap;
    unsigned __int128 created, returned;
    uint64_t stat[ST_NSTAT];
} hc_t;

static void send_msg(hc_t *h, int dst, int type, uint64_t credit)
{
    uint8_t m[PHX_TDC_MSG_MAX];
    long len = phx_tdc_msg_enc(&(phx_tdc_msg_t){ .type = (uint8_t)type, .credit = credit }, m, sizeof m);
    h->env.send(h->env.ctx, dst, m, (size_t)len);
}

static void agent_check(hc_t *h)
{
    if (h->done || h->dead || h->returned != h->created)
        return;
    h->done = 1;
    for (int r = 1; r < h->env.size; r++) {
        send_msg(h, r, PHX_TDC_TERM, 0);
        h->stat[ST_TERM]++;
    }
    h->env.declare(h->env.ctx);
}

static void flush(hc_t *h, uint64_t v)
{
    if (!v)
        return;
    if (h->env.rank == 0) {
        h->returned += v;
        agent_check(h);
        return;
    }
    send_msg(h, 0, PHX_TDC_FLUSH, v);
    h->stat[ST_FLUSH]++;
}

static void add_credit(hc_t *h, uint64_t w)
{
    if (w > h->cfg.c_max - h->credit) {
        flush(h, h->credit + w - h->cfg.c_max);
        h->credit = h->cfg.c_max;
        h->stat[ST_CLAMP]++;
    } else {
        h->credit += w;
    }
}

static void granted(hc_t *h, uint64_t w);

static void borrow(hc_t *h)
{
    if (h->borrow_pending)
        return;
    h->borrow_pending = 1;
    h->stat[ST_BORROW]++;
    if (h->env.rank == 0) {
        h->created += h->cfg.c_init;
        granted(h, h->cfg.c_init);
        return;
    }
    send_msg(h, 0, PHX_TDC_BORROW, 0);
}

/* Sends held messages while credit halves; borrows again if it runs dry. */
static void drain(hc_t *h)
{
    while (h->head < h->n && h->credit / 2) {
        uint8_t pb[8];
        uint64_t w = h->credit / 2;
        h->credit -= w;
        phx_tdc_pb_enc(pb, w);
        hc_held_t m = h->held[h->head++];
        h->env.release(h->env.ctx, m.token, pb);
    }
    if (h->head < h->n) {
        borrow(h);
        return;
    }
    h->head = h->n = 0;
    if (!h->active && h->credit) {
        flush(h, h->credit);
        h->credit = 0;
    }
}

static void granted(hc_t *h, uint64_t w)
{
    h->borrow_pending = 0;
    add_credit(h, w);
    drain(h);
}

static int hc_create(const phx_td_env_t *env, void **out)
{
    if (!env || !out || env->size < 1 || env->rank < 0 || env->rank >= env->size)
        return PHX_EINVAL;
    hc_t *h = calloc(1, sizeof *h);
    if (!h)
        return PHX_ENOMEM;
    h->env = *env;
    phx_td_credit_get(&h->cfg);
    h->credit = h->cfg.c_init;
    if (env->rank == 0)
        h->created = (unsigned __int128)h->cfg.c_init * (unsigned)env->size;
    *out = h;
    return 0;
}

static void hc_destroy(void *st)
{
    hc_t *h = st;
    if (h)
        free(h->held);
    free(h);
}

static void hc_start(void *st, int has_work)
{
    hc_t *h = st;
    h->active = has_work;
    if (!has_work) {
        flush(h, h->credit);
        h->credit = 0;
    }
}

static int hc_on_send(void *st, int dst, uint64_t token, uint8_t *pb)
{
    hc_t *h = st;
    if (h->head == h->n && h->credit / 2 == 0 && h->env.rank == 0) {
        /* the agent mints for itself at once: no release from inside
         * on_send, and no reason to delay */
        h->stat[ST_BORROW]++;
        h->created += h->cfg.c_init;
        add_credit(h, h->cfg.c_init);
    }
    if (h->head == h->n && h->credit / 2) {
        uint64_t w = h->credit / 2;
        h->credit -= w;
        phx_tdc_pb_enc(pb, w);
        return 0;
    }
    if (h->head == h->n)
        h->head = h->n = 0;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 16;
        hc_held_t *q = realloc(h->held, nc * sizeof *q);
        if (!q)
            return PHX_ENOMEM;
        h->held = q;
        h->cap = nc;
    }
    h->held[h->n++] = (hc_held_t){ token, dst };
    h->stat[ST_DELAYED]++;
    borrow(h);
    return PHX_TD_DELAY;
}

static void hc_on_recv(void *st, int src, const uint8_t *pb)
{
    hc_t *h = st;
    h->active = 1;
    add_credit(h, phx_tdc_pb_dec(pb));
    if (h->head < h->n && !h->borrow_pending)
        drain(h);
}

static void hc_on_processed(void *st, int src) { (void)st; }

static void hc_on_idle(void *st)
{
    hc_t *h = st;
    h->active = 0;
    if (h->head == h->n && h->credit) {
        flush(h, h->credit);
        h->credit = 0;
    }
}

static void hc_on_busy(void *st) { ((hc_t *)st)->active = 1; }

static int hc_on_ctrl(void *st, int src, const void *msg, size_t len)
{
    hc_t *h = st;
    int agent = h->env.rank == 0;
    if (h->dead)
        return 0;
    phx_tdc_msg_t m;
    if (phx_tdc_msg_dec(msg, len, &m))
        return PHX_EPROTO;
    if (m.type == PHX_TDC_FLUSH && agent) {
        uint64_t v = m.credit;
        if (!v || h->returned + v > h->created)
            return PHX_EPROTO;
        h->returned += v;
        agent_check(h);
        return 0;
    }
    if (m.type == PHX_TDC_BORROW && agent) {
        if (h->done)
            return 0;   /* a prefetch from a node that then went idle: moot */
        h->created += h->cfg.c_init;
        send_msg(h, src, PHX_TDC_GRANT, h->cfg.c_init);
        h->stat[ST_GRANT]++;
        return 0;
    }
    if (m.type == PHX_TDC_GRANT && src == 0 && !agent) {
        uint64_t v = m.credit;
        if (!h->borrow_pending || !v || v > h->cfg.c_max)
            return PHX_EPROTO;
        granted(h, v);
        return 0;
    }
    if (m.type == PHX_TDC_TERM && src == 0 && !agent) {
        if (h->done)
            return PHX_EPROTO;
        h->done = 1;
        h->env.declare(h->env.ctx);
        return 0;
    }
    return PHX_EPROTO;
}

static void hc_on_failure(void *st, int rank)
{
    hc_t *h = st;
    if (h->dead || h->done)
        return;
    h->dead = 1;
    h->env.fatal(h->env.ctx, PHX_EUNRECOVERABLE, "hcda: fault-free detector saw a failure");
}

static int hc_stats(void *st, phx_td_stat_t *out, int max)
{
    hc_t *h = st;
    static const char *nm[ST_NSTAT] = { "FLUSH", "BORROW", "GRANT", "TERMINATE",
                                        "delayed", "clamped" };
    int n = 0;
    for (; n < ST_NSTAT && n < max; n++)
        out[n] = (phx_td_stat_t){ nm[n], h->stat[n] };
    return n;
}

void phx_td_hcda_debug(const void *st, phx_td_credit_dbg_t *out)
{
    const hc_t *h = st;
    *out = (phx_td_credit_dbg_t){ .credit = h->credit, .held = h->n - h->head,
                                  .is_agent = h->env.rank == 0,
                                  .borrow_pending = h->borrow_pending,
                                  .created = h->created, .returned = h->returned };
}

const phx_td_ops_t phx_td_hcda_ops = {
    .name = "hcda", .fault_tolerant = 0, .pb_size = 8,
    .create = hc_create, .destroy = hc_destroy, .start = hc_start,
    .on_send = hc_on_send, .on_recv = hc_on_recv, .on_processed = hc_on_processed,
    .on_idle = hc_on_idle, .on_busy = hc_on_busy, .on_ctrl = hc_on_ctrl,
    .on_failure = hc_on_failure, .stats = hc_stats,
};
