/* Message logging's recording side (the forward path of the modes in
 * core/mlog.c):
 *   - on_send (comm thread, before a frame to another node is written): the
 *     message is kept in the sender log; under mlog-causal the dets this
 *     link has not carried yet go first, as an ML_DETS control frame on the
 *     same FIFO link (the trailer of Alg. 1, sent just ahead of its frame:
 *     nothing can overtake it, so causality is the same);
 *   - the delivery hook (worker, after the RSN is assigned, before the
 *     handler) puts <src, ssn, dst, rsn> into the worker's lock-free queue;
 *   - mlog-pessimistic: no frame leaves the node before the dets published
 *     so far (on any worker's queue) are stored on the next live rank.
 *     The worker does not wait for that: its app and spawn frames reach
 *     the comm thread as usual, which holds them (out_gate), in order,
 *     sends the dets not yet sent to the next live rank once per outbox
 *     drain (ML_DETS, answered by ML_ACK) and lets the held frames go as
 *     the acks cover the snapshot taken when they reached it. One round
 *     trip then covers every frame of a drain, and the workers go on with
 *     other tasks meanwhile (a worker that slept on every remote send until
 *     its ack made jacobi 3-6x slower than none on 2 cores: two wakeups,
 *     a flush and an ack per send). A worker that pauses for a checkpoint
 *     or a round first waits until no frame is held (pend), so that a
 *     checkpoint's cut finds every frame sent before it on the links;
 *   - ML_DETS at a receiver: stored (detLog), acknowledged with ML_ACK.
 * Threads: the comm thread, except the worker hooks (delivered, record,
 * send_gate, pause_wait), which touch only their own queue and atomics. */
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/metrics.h"
#include "core/outbox.h"
#include "core/term.h"
#include "core/mlog_int.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

/* The /metrics gauges of the logs' current sizes (comm thread). */
void phx_mlog_gauges(mlog_t *g)
{
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    phx_metrics_set(PHX_M_LOG_BYTES, g->log_bytes);
    phx_metrics_set(PHX_M_LOG_ENTRIES, s.log_len + s.detlog_len);
    phx_metrics_set(PHX_M_DETS, s.dets);
    phx_metrics_set(PHX_M_LOGGED_BYTES, s.logged_bytes);
    phx_metrics_set(PHX_M_LOGGED_MSGS, s.logged);
}

static int ctl2(mlog_t *g, int peer, int tag, const void *pre, size_t plen, const void *buf, size_t len)
{
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, (uint32_t)tag, (uint64_t)g->n->rank, (uint64_t)peer,
                                      (uint32_t)(plen + len));
    int rc = phx_net_send(g->n->net, peer, &h, pre, plen, buf, len, 0);
    if (rc)
        PHX_DEBUG("mlog", "control %d to rank %d not sent: %s", tag, peer, phx_strerror(rc));
    else
        g->ctrl_frames++;
    return rc;
}

void phx_mlog_ctl(mlog_t *g, int peer, int tag, const void *buf, size_t len)
{
    ctl2(g, peer, tag, NULL, 0, buf, len);
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
        if (!phx_ml_rec_dead(g->rec)[r])
            return r;
    }
    return -1;
}

/* Pessimistic: every unacked det to the next live rank (after a failure,
 * or a pause that waited long: whatever went to another rank may be lost). */
void phx_mlog_flush(mlog_t *g)
{
    atomic_store(&g->flush_asked, 0);
    int b = next_live(g);
    g->store = b;
    if (b < 0)
        return;
    long k = trailer(g, -1);
    if (k > 0 && ctl2(g, b, ML_DETS, NULL, 0, g->buf, (size_t)k))
        g->store = -1;   /* not sent: the next flush sends all again */
    else if (k < 0)
        PHX_ERROR("mlog", "determinant flush failed: %s", phx_strerror((int)k));
}

/* Pessimistic, comm thread: the dets the next live rank was not sent yet
 * (all unacked ones if it is not the rank of the last flush). */
static void flush_new(mlog_t *g)
{
    int b = next_live(g);
    if (b != g->store) {
        phx_mlog_flush(g);
        return;
    }
    if (b < 0)
        return;
    long k = trailer(g, b);
    if (k > 0 && ctl2(g, b, ML_DETS, NULL, 0, g->buf, (size_t)k))
        g->store = -1;   /* marked as sent to b, but not sent: all again next time */
    else if (k < 0)
        PHX_ERROR("mlog", "determinant flush failed: %s", phx_strerror((int)k));
}

static void call_flush(phx_node_t *n, phx_msg_t *m)
{
    phx_msg_free(m);
    mlog_t *g = n->rec_st;
    if (g)
        phx_mlog_flush(g);
}

/* Any thread: queues a full flush unless one is queued already. */
static void ask_flush(mlog_t *g)
{
    if (atomic_exchange(&g->flush_asked, 1))
        return;
    phx_msg_t *m = phx_msg_alloc(0);
    if (!m) {
        atomic_store(&g->flush_asked, 0);
        return;
    }
    m->kind = PHX_MK_CALL;
    m->call = call_flush;
    phx_node_enqueue_out(g->n, m);
}

/* Worker: records det d in its queue (delivery and spawn dets alike). */
void phx_mlog_record(mlog_t *g, int worker, const phx_det_t *d)
{
    phx_detq_t *q = phx_ml_queue(g->ml, worker);
    int64_t k = phx_detq_add(q, d);
    if (atomic_load_explicit(&g->own_on, memory_order_relaxed))
        phx_team_own_add(&g->own[worker], d);   /* this worker's alone; read while paused */
    (void)k;   /* pessimistic: stored once a frame that depends on it waits (out_drained) */
}

/* Any thread: the acks word moved (an ack, a release); wake the workers
 * waiting in phx_mlog_pause_wait. */
static void wake(mlog_t *g)
{
    atomic_fetch_add_explicit(&g->acks, 1, memory_order_release);
    if (atomic_load(&g->waiters))
        syscall(SYS_futex, &g->acks, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static int remote_frame(const phx_msg_t *m)
{
    return m->kind == PHX_MK_APP || m->kind == PHX_MK_SPAWN;   /* only route() queues these */
}

/* Worker, the send hook (mlog-pessimistic): a frame for another node is
 * about to be queued; the comm thread holds it until its causes are
 * stored (phx_mlog_out_gate). Counted so that a pause can wait for it. */
void phx_mlog_send_gate(void *ctx, int worker)
{
    (void)worker;
    mlog_t *g = ctx;
    atomic_fetch_add_explicit(&g->pend, 1, memory_order_relaxed);
}

static void on_retry(uv_timer_t *t)
{
    mlog_t *g = t->data;
    phx_mlog_hold_release(g);   /* acked otherwise meanwhile (a checkpoint at a join) */
    if (!phx_ml_hold_len(g->hold)) {
        uv_timer_stop(t);
        return;
    }
    if (g->releases == g->releases_seen)
        phx_mlog_flush(g);
    g->releases_seen = g->releases;
}

void phx_mlog_hold_start(mlog_t *g)
{
    if (!g->pess)
        return;
    uv_timer_init(&g->n->loop, &g->retry_timer);
    g->retry_timer.data = g;
    g->retry_on = 1;
}

void phx_mlog_hold_stop(mlog_t *g)
{
    if (!g->retry_on)
        return;
    g->retry_on = 0;
    uv_timer_stop(&g->retry_timer);
    uv_close((uv_handle_t *)&g->retry_timer, NULL);
}

int phx_mlog_out_gate(void *ctx, phx_msg_t *m)
{
    mlog_t *g = ctx;
    int app = remote_frame(m);
    if (!atomic_load(&g->n->stopping)) {
        size_t held = phx_ml_hold_len(g->hold);
        if (app && !g->bsnap_on) {
            /* Taken after the outbox was spliced: it holds every det
             * published before any frame of this drain was queued. */
            phx_ml_gate_snap(g->ml, g->bsnap);
            g->bsnap_on = 1;
        }
        if (held || (app && !phx_ml_gate_open(g->ml, g->bsnap))) {
            int rc = phx_ml_hold_put(g->hold, m, app ? g->bsnap : NULL);
            if (rc) {   /* sending it now would break the protocol */
                PHX_ERROR("mlog", "a frame cannot be held (%s): ending the job", phx_strerror(rc));
                phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
            } else {
                if (!held && g->retry_on && !uv_is_active((uv_handle_t *)&g->retry_timer)) {
                    g->releases_seen = g->releases;
                    uv_timer_start(&g->retry_timer, on_retry, 100, 100);
                }
                if (app)
                    atomic_fetch_add_explicit(&g->gate_waits, 1, memory_order_relaxed);
                return 1;
            }
        }
    }
    if (app && atomic_fetch_sub_explicit(&g->pend, 1, memory_order_release) == 1)
        wake(g);
    return 0;
}

void phx_mlog_out_drained(void *ctx)
{
    mlog_t *g = ctx;
    g->bsnap_on = 0;
    phx_ml_hold_batch_end(g->hold);
    if (phx_ml_hold_len(g->hold))
        flush_new(g);
}

static int stored(void *arg, const uint64_t *snap)
{
    mlog_t *g = arg;
    return phx_ml_gate_open(g->ml, snap);
}

/* Comm thread: lets go, in order, every frame whose snapshot is stored. */
void phx_mlog_hold_release(mlog_t *g)
{
    int64_t freed = 0;
    for (phx_msg_t *m; g->hold && (m = phx_ml_hold_next(g->hold, stored, g));) {
        freed += remote_frame(m);
        phx_outbox_send(g->n, m);
    }
    if (!freed)
        return;
    g->releases++;
    atomic_fetch_sub_explicit(&g->pend, freed, memory_order_release);
    wake(g);
    phx_term_flush(g->n);
    phx_pool_flush();
}

/* Comm thread: the held frames belong to a future a rollback undoes (or
 * the job is over): dropped. */
void phx_mlog_hold_drop(mlog_t *g)
{
    int64_t freed = 0;
    for (phx_msg_t *m; g->hold && (m = phx_ml_hold_pop(g->hold));) {
        freed += remote_frame(m);
        phx_msg_free(m);
        atomic_fetch_sub(&g->n->work, 1);
    }
    if (freed) {
        atomic_fetch_sub(&g->pend, freed);
        wake(g);
    }
}

/* Worker, before it parks (pessimistic): waits until the comm thread let
 * go every frame the workers queued. Every worker waits, and none queues
 * after its wait, so once all are parked nothing is held: the cut sends
 * the outbox before the marker as it does without a mode. */
void phx_mlog_pause_wait(mlog_t *g)
{
    for (unsigned sleeps = 0; !atomic_load(&g->n->stopping);) {
        uint32_t seen = atomic_load_explicit(&g->acks, memory_order_acquire);
        if (atomic_load_explicit(&g->pend, memory_order_acquire) <= 0)
            return;
        /* The futex returns at once if the word moved since `seen`. The
         * timeout only bounds a wakeup lost to the waiters race; a flush
         * lost with a dead rank is sent again by the failure notice. */
        atomic_fetch_add(&g->waiters, 1);
        struct timespec ts = { 0, 1000000 };
        syscall(SYS_futex, &g->acks, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
        atomic_fetch_sub(&g->waiters, 1);
        if (++sleeps % 100 == 0) {   /* 100 ms without the ack: all of them again */
            atomic_store(&g->flush_asked, 0);
            ask_flush(g);
        }
    }
}

/* Worker: the delivery hook. */
void phx_mlog_delivered(void *ctx, int worker, phx_tid_t dst, phx_tid_t src, uint64_t ssn, uint64_t rsn, uint32_t inc)
{
    (void)inc;
    phx_det_t d = { .sender = src, .receiver = dst, .ssn = ssn, .rsn = rsn };
    phx_mlog_record(ctx, worker, &d);
}

/* Comm thread, workers paused (or gone): empties every worker's own-det
 * record. */
void phx_mlog_own_clear(mlog_t *g)
{
    for (int i = 0; g->own && i < g->n->nworkers; i++)
        phx_team_own_clear(&g->own[i]);
}

/* ... and stops recording until the period's end (phx_mlog_commit): no partial recovery of this
 * period needs them any more. */
void phx_mlog_own_stop(mlog_t *g)
{
    atomic_store(&g->own_on, 0);
    phx_mlog_own_clear(g);
}

void phx_mlog_on_send(void *st, const phx_msg_t *m)
{
    mlog_t *g = st;
    /* A spawn is an event too: logged like a message (its tag is the task
     * type), marked so that a hand-back re-sends it as a spawn. */
    uint32_t tag = m->hdr.tag | (m->kind == PHX_MK_SPAWN ? ML_SPAWN_BIT : 0);
    if (g->team && !phx_team_must_log(g->n->rank, m->peer, g->team)) {
        g->team_unlogged++;    /* within the team: a rolled-back sender makes it again */
    } else if (g->team && phx_team_relog_skip(&g->relog, m->hdr.src, m->hdr.dst, m->hdr.ssn)) {
        g->relogs_skipped++;   /* a rolled-back team-mate's re-send: logged the first time */
    } else {
        int rc = phx_ml_log(g->ml, m->peer, m->hdr.src, m->hdr.dst, m->hdr.ssn, tag, m->data, m->hdr.len);
        if (rc) {
            PHX_ERROR("mlog", "message to rank %d cannot be logged (%s): ending the job", m->peer, phx_strerror(rc));
            phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
            return;
        }
        g->log_bytes += m->hdr.len;
        phx_mlog_gauges(g);
    }
    if (g->pess || g->fast)
        return;   /* its causes are on the next live rank already, or it has none to carry */
    /* The batched ack rides along: same write, no extra wakeup at peer. */
    uint8_t ack[PHX_ML_ACKDETS_HEAD + PHX_ML_ACK_MAX];
    uint8_t *a_body = ack + PHX_ML_ACKDETS_HEAD;
    long a = phx_ml_ack_owed(g->ml, m->peer) ? phx_ml_ack_take(g->ml, m->peer, a_body) : 0;
    long k = trailer(g, m->peer);
    if (a > 0 && k > 0) {
        phx_ml_ackdets_head(ack, (size_t)a);
        ctl2(g, m->peer, ML_ACKDETS, ack, PHX_ML_ACKDETS_HEAD + (size_t)a, g->buf, (size_t)k);
    } else if (a > 0)
        phx_mlog_ctl(g, m->peer, ML_ACK, a_body, (size_t)a);
    else if (k > 0)
        phx_mlog_ctl(g, m->peer, ML_DETS, g->buf, (size_t)k);
    if (k > 0)
        g->trailers++;
    else if (k < 0) {
        PHX_ERROR("mlog", "determinants for rank %d not encoded (%s): ending the job", m->peer, phx_strerror((int)k));
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
    }
}

/* Comm thread: the det and ack frames from peer (1), or another (0). */
int phx_mlog_log_ctrl(mlog_t *g, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    if (h->tag == ML_ACKDETS) {
        phx_ml_ackdets_t ad;
        if (phx_ml_ackdets_dec(p, h->len, &ad) || phx_ml_on_ack(g->ml, ad.ack, ad.ack_len)) {
            PHX_WARN("mlog", "bad ack and determinant frame from rank %d", peer);
            return 1;
        }
        phx_frame_hdr_t d = *h;   /* the rest is an ML_DETS frame */
        d.tag = ML_DETS;
        d.len = (uint32_t)ad.dets_len;
        return phx_mlog_log_ctrl(g, peer, &d, ad.dets);
    } else if (h->tag == ML_DETS) {
        /* Pessimistic: a worker waits for this ack. Causal: the ack only
         * stops re-piggybacking, so it rides with the next frame to peer
         * (phx_mlog_on_send), unless much is owed (peer's queue must not fill). */
        uint8_t ack[PHX_ML_ACK_MAX];
        long k = phx_ml_pb_store(g->ml, peer, p, h->len, g->pess ? ack : NULL);
        if (k >= 0 && !g->pess && phx_ml_ack_owed(g->ml, peer) >= ACK_BATCH)
            k = phx_ml_ack_take(g->ml, peer, ack);
        if (k > 0)
            phx_mlog_ctl(g, peer, ML_ACK, ack, (size_t)k);
        else if (k < 0)
            PHX_WARN("mlog", "bad determinant frame from rank %d: %s", peer, phx_strerror((int)k));
    } else if (h->tag == ML_ACK) {
        if (phx_ml_on_ack(g->ml, p, h->len))
            PHX_WARN("mlog", "bad ack from rank %d", peer);
        else if (g->pess) {
            phx_mlog_hold_release(g);
            wake(g);
        }
    } else
        return 0;
    return 1;
}
