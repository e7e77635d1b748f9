/* EDOD: Mahapatra & Dutt's efficient delay-optimal detector (001 §3.3) on
 * the binary-heap tree. A node reports STOP only when it is idle, all its
 * primary sends are ACKed and all children stopped; so an idle root means
 * global termination. Zero piggyback; one ACK per primary message. */
#include <stdlib.h>

#include "base/phx_err.h"
#include "ft/termination/td.h"
#include "ft/termination/td_ff_util.h"
#include "ft/termination/msg.h"

/* The messages: phx_ed_msg_t (msg.h). */
enum { M_STOP = PHX_ED_M_STOP, M_RESUME = PHX_ED_M_RESUME, M_ACKT = PHX_ED_M_ACKT, M_ACK = PHX_ED_M_ACK,
       M_TERM = PHX_ED_M_TERM };
enum { ST_STOP, ST_RESUME, ST_ACKT, ST_ACK, ST_TERM, ST_NSTAT };

typedef struct {
    phx_td_env_t env;
    int busy, sent_stop, done, dead;
    int nchild, stopped[2];
    uint64_t unacked;
    /* RESUMEs sent or forwarded up whose ACK_T has not come back: until it
     * does, the parent may still count us stopped, so we are not yet the
     * "active ancestor" that may turn a child's RESUME back [R]. */
    uint64_t resume_up;
    uint64_t stat[ST_NSTAT];
} ed_t;

static void send_msg(ed_t *e, int dst, int type, int s, int r)
{
    uint8_t m[PHX_ED_MSG_MAX];
    long len = phx_ed_msg_enc(&(phx_ed_msg_t){ .type = (uint8_t)type, .s = s, .r = r }, m, sizeof m);
    e->env.send(e->env.ctx, dst, m, (size_t)len);
}

static void send_sr(ed_t *e, int type, int dst, int s, int r)
{
    send_msg(e, dst, type, s, r);
    e->stat[type - 1]++;
}

static void send_term(ed_t *e)
{
    for (int i = 0; i < e->nchild; i++) {
        send_msg(e, 2 * e->env.rank + 1 + i, M_TERM, 0, 0);
        e->stat[ST_TERM]++;
    }
}

static void check(ed_t *e)
{
    if (e->sent_stop || e->done || e->dead || e->busy || e->unacked)
        return;
    for (int i = 0; i < e->nchild; i++)
        if (!e->stopped[i])
            return;
    if (e->env.rank == 0) {
        e->done = 1;
        send_term(e);
        e->env.declare(e->env.ctx);
        return;
    }
    e->sent_stop = 1;
    send_msg(e, tdff_parent(e->env.rank), M_STOP, 0, 0);
    e->stat[ST_STOP]++;
}

static int ed_create(const phx_td_env_t *env, void **out)
{
    if (!env || !out || env->size < 1 || env->rank < 0 || env->rank >= env->size)
        return PHX_EINVAL;
    ed_t *e = calloc(1, sizeof *e);
    if (!e)
        return PHX_ENOMEM;
    e->env = *env;
    e->nchild = tdff_nchildren(env->rank, env->size);
    *out = e;
    return 0;
}

static void ed_destroy(void *st) { free(st); }

static void ed_start(void *st, int has_work)
{
    ed_t *e = st;
    e->busy = has_work;
    check(e);
}

static int ed_on_send(void *st, int dst, uint64_t token, uint8_t *pb)
{
    ((ed_t *)st)->unacked++;
    return 0;
}

static void ed_on_recv(void *st, int src, const uint8_t *pb)
{
    ed_t *e = st;
    if (e->dead)
        return;
    e->busy = 1;
    if (e->sent_stop) {
        /* our ancestors believe us idle: climb until one that is active
         * answers, so the sender stays un-ACKed (active) meanwhile */
        e->sent_stop = 0;
        e->resume_up++;
        send_sr(e, M_RESUME, tdff_parent(e->env.rank), src, e->env.rank);
    } else {
        send_sr(e, M_ACK, src, src, e->env.rank);
    }
}

static void ed_on_processed(void *st, int src) { (void)st; }

static void ed_on_idle(void *st)
{
    ed_t *e = st;
    e->busy = 0;
    check(e);
}

static void ed_on_busy(void *st) { ((ed_t *)st)->busy = 1; }

static int ed_on_ctrl(void *st, int src, const void *msg, size_t len)
{
    ed_t *e = st;
    int me = e->env.rank, P = e->env.size;
    phx_ed_msg_t m;
    if (len < 1)
        return PHX_EPROTO;
    if (e->dead)
        return 0;
    if (phx_ed_msg_dec(msg, len, &m))
        return PHX_EPROTO;
    int child = tdff_parent(src) == me ? src - (2 * me + 1) : -1;
    if (m.type == M_STOP) {
        if (child < 0 || e->stopped[child])
            return PHX_EPROTO;
        e->stopped[child] = 1;
        check(e);
        return 0;
    }
    if (m.type == M_TERM) {
        if (src != tdff_parent(me) || e->done)
            return PHX_EPROTO;
        e->done = 1;
        send_term(e);
        e->env.declare(e->env.ctx);
        return 0;
    }
    int s = m.s, r = m.r;
    if (s < 0 || s >= P || r < 0 || r >= P || s == r)
        return PHX_EPROTO;
    switch (m.type) {
    case M_RESUME:
        if (child < 0 || !tdff_is_ancestor(src, r))
            return PHX_EPROTO;
        e->stopped[child] = 0;
        if (e->sent_stop || e->resume_up) {
            e->sent_stop = 0;
            e->resume_up++;
            send_sr(e, M_RESUME, tdff_parent(me), s, r);
        } else {
            send_sr(e, M_ACKT, src, s, r);
        }
        return 0;
    case M_ACKT:
        if (src != tdff_parent(me) || !tdff_is_ancestor(me, r) || !e->resume_up)
            return PHX_EPROTO;
        e->resume_up--;
        /* r relays the ACK even if it stopped again meanwhile */
        if (r == me)
            send_sr(e, M_ACK, s, s, r);
        else
            send_sr(e, M_ACKT, tdff_child_toward(me, r), s, r);
        return 0;
    case M_ACK:
        if (s != me || src != r || e->unacked == 0)
            return PHX_EPROTO;
        e->unacked--;
        check(e);
        return 0;
    default:
        return PHX_EPROTO;
    }
}

static void ed_on_failure(void *st, int rank)
{
    ed_t *e = st;
    if (e->dead || e->done)
        return;
    e->dead = 1;
    e->env.fatal(e->env.ctx, PHX_EUNRECOVERABLE, "edod: fault-free detector saw a failure");
}

static int ed_stats(void *st, phx_td_stat_t *out, int max)
{
    ed_t *e = st;
    static const char *nm[ST_NSTAT] = { "STOP", "RESUME", "ACK_T", "ACK", "TERMINATE" };
    int n = 0;
    for (; n < ST_NSTAT && n < max; n++)
        out[n] = (phx_td_stat_t){ nm[n], e->stat[n] };
    return n;
}

const phx_td_ops_t phx_td_edod_ops = {
    .name = "edod", .fault_tolerant = 0, .pb_size = 0,
    .create = ed_create, .destroy = ed_destroy, .start = ed_start,
    .on_send = ed_on_send, .on_recv = ed_on_recv, .on_processed = ed_on_processed,
    .on_idle = ed_on_idle, .on_busy = ed_on_busy, .on_ctrl = ed_on_ctrl,
    .on_failure = ed_on_failure, .stats = ed_stats,
};
