/* 4C: Mattern's four-counter waves over the binary-heap tree (001 §3.2).
 * Zero piggyback, never delays a send, at most one wave in flight. */
#include <stdlib.h>

#include "base/phx_err.h"
#include "ft/termination/td.h"
#include "ft/termination/td_ff_util.h"
#include "ft/termination/msg.h"

/* STOP(σs, σr) up; DOWN(terminate) down: phx_4c_msg_t (msg.h) */
enum { ST_STOP, ST_DOWN, ST_NSTAT };

typedef struct {
    phx_td_env_t env;
    int nchild, busy, waiting_parent, done, dead;
    int child_left;
    uint64_t sent, recvd;          /* cumulative primary counters */
    uint64_t acc_s, acc_r;         /* this wave, own subtree */
    int have_prev;                 /* root: a previous wave exists */
    uint64_t prev_s, prev_r;
    uint64_t waves, stat[ST_NSTAT];
} fc_t;

static void send_down(fc_t *f, int term)
{
    uint8_t m[PHX_4C_MSG_MAX];
    long len = phx_4c_msg_enc(&(phx_4c_msg_t){ .type = PHX_4C_M_DOWN, .term = (uint8_t)term }, m, sizeof m);
    for (int c = 2 * f->env.rank + 1; c <= 2 * f->env.rank + 2 && c < f->env.size; c++) {
        f->env.send(f->env.ctx, c, m, (size_t)len);
        f->stat[ST_DOWN]++;
    }
}

static void try_contribute(fc_t *f)
{
    if (f->done || f->dead || f->waiting_parent || f->busy || f->child_left)
        return;
    f->acc_s += f->sent;
    f->acc_r += f->recvd;
    f->child_left = f->nchild;
    if (f->env.rank == 0) {
        f->waves++;
        int term = f->env.size == 1 ||
                   (f->have_prev && f->acc_s == f->acc_r && f->acc_s == f->prev_s &&
                    f->acc_r == f->prev_r);
        f->prev_s = f->acc_s;
        f->prev_r = f->acc_r;
        f->have_prev = 1;
        f->acc_s = f->acc_r = 0;   /* before DOWN: the next wave's STOPs may race it */
        send_down(f, term);
        if (term) {
            f->done = 1;
            f->env.declare(f->env.ctx);
        }
        return;
    }
    uint8_t m[PHX_4C_MSG_MAX];
    long len = phx_4c_msg_enc(&(phx_4c_msg_t){ .type = PHX_4C_M_STOP, .sent = f->acc_s, .recvd = f->acc_r }, m,
                              sizeof m);
    f->waiting_parent = 1;
    f->env.send(f->env.ctx, tdff_parent(f->env.rank), m, (size_t)len);
    f->stat[ST_STOP]++;
}

static int fc_create(const phx_td_env_t *env, void **out)
{
    if (!env || !out || env->size < 1 || env->rank < 0 || env->rank >= env->size)
        return PHX_EINVAL;
    fc_t *f = calloc(1, sizeof *f);
    if (!f)
        return PHX_ENOMEM;
    f->env = *env;
    f->nchild = tdff_nchildren(env->rank, env->size);
    f->child_left = f->nchild;
    *out = f;
    return 0;
}

static void fc_destroy(void *st) { free(st); }

static void fc_start(void *st, int has_work)
{
    fc_t *f = st;
    f->busy = has_work;
    try_contribute(f);
}

static int fc_on_send(void *st, int dst, uint64_t token, uint8_t *pb)
{
    fc_t *f = st;
    f->sent++;
    return 0;
}

static void fc_on_recv(void *st, int src, const uint8_t *pb)
{
    fc_t *f = st;
    f->recvd++;
    f->busy = 1;
}

static void fc_on_processed(void *st, int src) { (void)st; }

static void fc_on_idle(void *st)
{
    fc_t *f = st;
    f->busy = 0;
    try_contribute(f);
}

static void fc_on_busy(void *st) { ((fc_t *)st)->busy = 1; }

static int fc_on_ctrl(void *st, int src, const void *msg, size_t len)
{
    fc_t *f = st;
    if (f->dead)
        return 0;   /* after fatal nothing may lead to a declaration */
    phx_4c_msg_t m;
    if (phx_4c_msg_dec(msg, len, &m))
        return PHX_EPROTO;
    if (m.type == PHX_4C_M_STOP && tdff_parent(src) == f->env.rank) {
        if (f->child_left == 0 || f->done)
            return PHX_EPROTO;
        f->acc_s += m.sent;
        f->acc_r += m.recvd;
        f->child_left--;
        try_contribute(f);
        return 0;
    }
    if (m.type == PHX_4C_M_DOWN && src == tdff_parent(f->env.rank)) {
        if (!f->waiting_parent || f->done)
            return PHX_EPROTO;
        f->waiting_parent = 0;
        send_down(f, m.term);
        if (m.term) {
            f->done = 1;
            f->env.declare(f->env.ctx);
            return 0;
        }
        f->acc_s = f->acc_r = 0;
        try_contribute(f);
        return 0;
    }
    return PHX_EPROTO;
}

static void fc_on_failure(void *st, int rank)
{
    fc_t *f = st;
    if (f->dead || f->done)
        return;
    f->dead = 1;   /* a lost tree node can never contribute again */
    f->env.fatal(f->env.ctx, PHX_EUNRECOVERABLE, "4c: fault-free detector saw a failure");
}

static int fc_stats(void *st, phx_td_stat_t *out, int max)
{
    fc_t *f = st;
    const phx_td_stat_t all[] = { { "STOP", f->stat[ST_STOP] }, { "DOWN", f->stat[ST_DOWN] },
                                  { "waves", f->waves } };
    int n = 0;
    for (; n < 3 && n < max; n++)
        out[n] = all[n];
    return n;
}

const phx_td_ops_t phx_td_4c_ops = {
    .name = "4c", .fault_tolerant = 0, .pb_size = 0,
    .create = fc_create, .destroy = fc_destroy, .start = fc_start,
    .on_send = fc_on_send, .on_recv = fc_on_recv, .on_processed = fc_on_processed,
    .on_idle = fc_on_idle, .on_busy = fc_on_busy, .on_ctrl = fc_on_ctrl,
    .on_failure = fc_on_failure, .stats = fc_stats,
};
