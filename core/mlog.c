/* Message-logging recovery modes (issue 11): mlog-causal and
 * mlog-pessimistic, layered on recovery=cr (core/ckpt.c), whose
 * coordinated checkpoints bound the logs. The protocol is ft/mlog's state
 * machine; this file feeds it from the runtime's hooks.
 *
 * Forward path (what runs today):
 *   - on_send (comm thread, before a frame to another node is written): the
 *     message is kept in the sender log; under mlog-causal the dets this
 *     link has not carried yet go first, as an ML_DETS control frame on the
 *     same FIFO link (the trailer of Alg. 1, sent just ahead of its frame:
 *     nothing can overtake it, so causality is the same);
 *   - the delivery hook (worker, after the RSN is assigned, before the
 *     handler) puts <src, ssn, dst, rsn> into the worker's lock-free queue;
 *     under mlog-pessimistic the worker then waits until the next live rank
 *     stored it (ML_DETS flush + ML_ACK), so no message the handler sends
 *     can leave before its cause is safe;
 *   - ML_DETS at a receiver: stored (detLog), acknowledged with ML_ACK;
 *   - cr's commit of an epoch empties the logs (Alg. 4).
 * Recovery (what does NOT run yet): restoring only the dead node's tasks
 * and replaying them from the survivors' logs and dets (ft/mlog has it,
 * tested on simulated jobs). Until the runtime part lands, every failure
 * takes the fallback the protocol prescribes when determinants cannot be
 * trusted: cr's global rollback, which is correct, only slower. Startup
 * says so on rank 0.
 *
 * Threads: everything on the comm thread except hook() and the pessimistic
 * wait (workers), which touch only their own queue and atomics. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/eventlog.h"
#include "core/node.h"
#include "core/recovery.h"
#include "ft/mlog/scml.h"
#include "phx_err.h"
#include "phx_log.h"

enum { ML_DETS = PHX_CTRL_CR_LAST + 1, ML_ACK, ML_FLUSH_REQ };

#define QCAP (1u << 16)

typedef struct mlog {
    phx_node_t *n;
    void *cr;                   /* cr's state: checkpoints and the fallback */
    phx_ml_t *ml;
    int pess;
    uint8_t *dead;
    uint8_t *buf;               /* trailer scratch (comm thread) */
    size_t cap;
    _Atomic int flush_asked;    /* pessimistic: a worker waits for a flush */
    uint64_t ctrl_frames;
    uint64_t trailers;          /* det frames sent ahead of an app frame */
} mlog_t;

static const phx_recovery_ops_t *CR = &phx_recovery_cr;

static int is_pess(const phx_node_t *n)
{
    return !strcmp(n->cfg.recovery, "mlog-pessimistic");
}

static int ml_configure(phx_node_t *n)
{
    int rc = CR->configure(n);
    if (rc)
        return rc;
    if (n->rank == 0)
        fprintf(stderr, "phalanx: recovery=%s: messages and determinants are logged, but failures are "
                        "still recovered by the global rollback of recovery=cr (parallel recovery from the logs "
                        "is not implemented yet)\n", n->cfg.recovery);
    return 0;
}

static void ctl(mlog_t *g, int peer, int tag, const void *buf, size_t len)
{
    phx_frame_hdr_t h = { .type = PHX_FT_CTRL, .tag = (uint32_t)tag, .src = (uint64_t)g->n->rank,
                          .dst = (uint64_t)peer, .len = (uint32_t)len };
    int rc = phx_net_send(g->n->net, peer, &h, NULL, 0, buf, len, 0);
    if (rc)
        PHX_DEBUG("mlog", "control %d to rank %d not sent: %s", tag, peer, phx_strerror(rc));
    else
        g->ctrl_frames++;
}

/* Encodes for peer (or, peer < 0, every unacked det) into g->buf. Workers
 * keep publishing while we size the buffer: grow and retry on ENOSPC. */
static long trailer(mlog_t *g, int peer)
{
    for (;;) {
        size_t need = phx_ml_pb_size(g->ml) + 64 * 32;
        if (need > g->cap) {
            uint8_t *b = realloc(g->buf, 2 * need);
            if (!b)
                return PHX_ENOMEM;
            g->buf = b;
            g->cap = 2 * need;
        }
        long k = peer >= 0 ? phx_ml_pb_encode_to(g->ml, peer, g->buf, g->cap)
                           : phx_ml_pb_encode(g->ml, g->buf, g->cap);
        if (k != PHX_ENOSPC)
            return k;
        need = g->cap + 1;
        uint8_t *b = realloc(g->buf, 2 * need);
        if (!b)
            return PHX_ENOMEM;
        g->buf = b;
        g->cap = 2 * need;
    }
}

static int next_live(const mlog_t *g)
{
    for (int k = 1; k < g->n->size; k++) {
        int r = (g->n->rank + k) % g->n->size;
        if (!g->dead[r])
            return r;
    }
    return -1;
}

/* Pessimistic: every unacked det to the next live rank. */
static void flush(mlog_t *g)
{
    atomic_store(&g->flush_asked, 0);
    int b = next_live(g);
    if (b < 0)
        return;
    long k = trailer(g, -1);
    if (k > 0)
        ctl(g, b, ML_DETS, g->buf, (size_t)k);
    else if (k < 0)
        PHX_ERROR("mlog", "determinant flush failed: %s", phx_strerror((int)k));
}

static void call_flush(phx_node_t *n, phx_msg_t *m)
{
    phx_msg_free(m);
    mlog_t *g = n->rec_st;
    if (g)
        flush(g);
}

/* Worker: the delivery hook. */
static void hook(void *ctx, int worker, phx_tid_t dst, phx_tid_t src, uint64_t ssn, uint64_t rsn, uint32_t inc)
{
    (void)inc;
    mlog_t *g = ctx;
    phx_detq_t *q = phx_ml_queue(g->ml, worker);
    phx_det_t d = { .sender = src, .receiver = dst, .ssn = ssn, .rsn = rsn };
    int64_t k = phx_detq_add(q, &d);
    if (k < 0 || !g->pess)
        return;   /* closed: the job is ending */
    /* Pessimistic: the det must be stored elsewhere before the handler's
     * messages can exist. One flush request at a time is enough: a flush
     * carries every det published before it. */
    if (!atomic_exchange(&g->flush_asked, 1)) {
        phx_msg_t *m = phx_msg_alloc(0);
        if (m) {
            m->kind = PHX_MK_CALL;
            m->call = call_flush;
            phx_node_enqueue_out(g->n, m);
        }
    }
    unsigned spins = 0;
    for (;;) {
        phx_detq_stat_t s;
        phx_detq_stat(q, &s);
        if (s.start > (uint64_t)k || atomic_load(&g->n->stopping))
            return;
        if (++spins < 64)
            sched_yield();
        else {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
            if (spins % 5000 == 0)   /* a flush lost with a dead rank: ask again */
                atomic_store(&g->flush_asked, 0);
            if (!atomic_exchange(&g->flush_asked, 1)) {
                phx_msg_t *m = phx_msg_alloc(0);
                if (m) {
                    m->kind = PHX_MK_CALL;
                    m->call = call_flush;
                    phx_node_enqueue_out(g->n, m);
                }
            }
        }
    }
}

static void ml_listen(void *arg, int what, uint64_t epoch)
{
    mlog_t *g = arg;
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    /* A commit makes every logged message and det useless (Alg. 4); a
     * rollback undoes what they describe. Workers are paused either way. */
    phx_ml_checkpoint(g->ml);
    phx_evlog(what == PHX_CR_COMMIT ? "mlog_gc" : "mlog_reset", "\"epoch\":%llu,\"log_len\":%llu,\"detlog_len\":%llu",
              (unsigned long long)epoch, (unsigned long long)s.log_len, (unsigned long long)s.detlog_len);
}

static int ml_init(phx_node_t *n, void **out)
{
    mlog_t *g = calloc(1, sizeof *g);
    if (!g)
        return PHX_ENOMEM;
    g->n = n;
    g->pess = is_pess(n);
    g->dead = calloc((size_t)n->size, 1);
    phx_ml_cfg_t c = { .rank = n->rank, .n = n->size, .inc = n->inc, .nq = n->nworkers, .qcap = QCAP,
                       .pessimistic = g->pess };
    g->ml = g->dead ? phx_ml_create(&c) : NULL;
    int rc = g->ml ? CR->init(n, &g->cr) : PHX_ENOMEM;
    if (rc) {
        phx_ml_destroy(g->ml);
        free(g->dead);
        free(g);
        return rc;
    }
    phx_cr_listen(g->cr, ml_listen, g);
    n->hook = hook;
    n->hook_ctx = g;
    *out = g;
    return 0;
}

static void ml_on_start(void *st)
{
    CR->on_start(((mlog_t *)st)->cr);
}

static void ml_on_send(void *st, const phx_msg_t *m)
{
    mlog_t *g = st;
    int rc = phx_ml_log(g->ml, m->peer, m->hdr.src, m->hdr.dst, m->hdr.ssn, m->hdr.tag, m->data, m->hdr.len);
    if (rc) {
        PHX_ERROR("mlog", "message to rank %d cannot be logged (%s): ending the job", m->peer, phx_strerror(rc));
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    if (g->pess)
        return;   /* its causes are on the next live rank already */
    long k = trailer(g, m->peer);
    if (k > 0) {
        ctl(g, m->peer, ML_DETS, g->buf, (size_t)k);
        g->trailers++;
    }
    else if (k < 0) {
        PHX_ERROR("mlog", "determinants for rank %d not encoded (%s): ending the job", m->peer, phx_strerror((int)k));
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
    }
}

static int ml_on_deliver(void *st, int peer, const phx_frame_hdr_t *h)
{
    return CR->on_deliver(((mlog_t *)st)->cr, peer, h);
}

static void ml_on_ctrl(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    mlog_t *g = st;
    if (h->tag <= PHX_CTRL_CR_LAST) {
        CR->on_ctrl(g->cr, peer, h, p);
        return;
    }
    if (h->tag == ML_DETS) {
        uint8_t ack[PHX_ML_ACK_MAX];
        long k = phx_ml_pb_store(g->ml, peer, p, h->len, ack);
        if (k > 0)
            ctl(g, peer, ML_ACK, ack, (size_t)k);
        else if (k < 0)
            PHX_WARN("mlog", "bad determinant frame from rank %d: %s", peer, phx_strerror((int)k));
    } else if (h->tag == ML_ACK) {
        if (phx_ml_on_ack(g->ml, p, h->len))
            PHX_WARN("mlog", "bad ack from rank %d", peer);
    } else
        PHX_WARN("mlog", "unknown control tag %u from rank %d", h->tag, peer);
}

static int ml_on_failure(void *st, int rank)
{
    mlog_t *g = st;
    if (rank >= 0 && rank < g->n->size)
        g->dead[rank] = 1;
    /* k = 1 and no replay in the runtime yet: the global rollback. */
    phx_evlog("mlog_fallback", "\"dead\":%d,\"reason\":\"parallel recovery not implemented\"", rank);
    int rc = CR->on_failure(g->cr, rank);
    if (g->pess)
        flush(g);   /* a worker may wait on a flush the dead rank never acked */
    return rc;
}

static void ml_on_checkpoint(void *st)
{
    CR->on_checkpoint(((mlog_t *)st)->cr);
}

static void ml_worker_pause(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt)
{
    CR->worker_pause(((mlog_t *)st)->cr, w, lh, lt);
}

static void ml_stop(void *st)
{
    mlog_t *g = st;
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    /* Thesis Table 3.1's figures for this node. */
    phx_evlog("mlog_stats",
              "\"dets\":%llu,\"logged\":%llu,\"logged_bytes\":%llu,\"local\":%llu,\"frames_pb\":%llu,"
              "\"dets_pb\":%llu,\"pb_bytes\":%llu,\"dets_stored\":%llu,\"ctrl_frames\":%llu,"
              "\"piggybacked_on_app\":%llu",
              (unsigned long long)s.dets, (unsigned long long)s.logged, (unsigned long long)s.logged_bytes,
              (unsigned long long)s.local, (unsigned long long)s.frames_pb, (unsigned long long)s.dets_pb,
              (unsigned long long)s.pb_bytes, (unsigned long long)s.dets_stored,
              (unsigned long long)g->ctrl_frames, (unsigned long long)g->trailers);
    if (getenv("PHX_STATS"))
        fprintf(stderr, "{\"rank\":%d,\"mlog_dets\":%llu,\"mlog_logged\":%llu,\"mlog_dets_pb\":%llu,"
                        "\"mlog_pb_bytes\":%llu}\n", g->n->rank, (unsigned long long)s.dets,
                (unsigned long long)s.logged, (unsigned long long)s.dets_pb, (unsigned long long)s.pb_bytes);
    for (int i = 0; i < g->n->nworkers; i++)
        phx_detq_close(phx_ml_queue(g->ml, i));   /* workers blocked on a full queue leave */
    CR->stop(g->cr);
}

static void ml_destroy(void *st)
{
    mlog_t *g = st;
    if (g->n->hook_ctx == g) {
        g->n->hook = NULL;
        g->n->hook_ctx = NULL;
    }
    CR->destroy(g->cr);
    phx_ml_destroy(g->ml);
    free(g->dead);
    free(g->buf);
    free(g);
}

#define OPS(nm, hlp)                                                                                         \
    {                                                                                                          \
        .name = nm, .help = hlp, .configure = ml_configure, .init = ml_init, .on_start = ml_on_start,          \
        .on_send = ml_on_send, .on_deliver = ml_on_deliver, .on_ctrl = ml_on_ctrl,                             \
        .on_failure = ml_on_failure, .on_checkpoint = ml_on_checkpoint, .worker_pause = ml_worker_pause,      \
        .stop = ml_stop, .destroy = ml_destroy,                                                                \
    }

const phx_recovery_ops_t phx_recovery_mlog_causal =
    OPS("mlog-causal", "causal message logging (SCML) over cr's checkpoints; failures: cr's global rollback for now");
const phx_recovery_ops_t phx_recovery_mlog_pessimistic =
    OPS("mlog-pessimistic", "pessimistic message logging over cr's checkpoints; failures: cr's global rollback for now");
