/* The node's shared state and the public API used from handlers: task
 * types and ids, the hand-offs between threads (inboxes, the outbox, the
 * inbound batch), sends and spawns, stats, the clock. phx_main, the
 * transport callbacks and the service table are core/main.c, the top of
 * the runtime; separate jobs live beside it: term.c (termination detector
 * glue), outbox.c, inbound.c (application frames in, zero-copy claims),
 * failures.c (the dead list and failure notices), lifeline.c (signals,
 * launcher lifeline, watchdog), ending.c (phx_node_exit) and shutdown.c
 * (the teardown). */
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/inline.h"
#include "core/node.h"
#include "core/recovery.h"
#include "net/crc32c.h"
#include "base/phx_err.h"

phx_type_t phx_types[PHX_MAX_TYPES];
int phx_ntypes;
phx_node_t *phx_node_current;

uint64_t phx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int phx_register_type(const phx_type_t *type)
{
    if (!type || !type->name)
        return PHX_EINVAL;
    if (phx_ntypes == PHX_MAX_TYPES)
        return PHX_ENOSPC;
    phx_types[phx_ntypes] = *type;
    return phx_ntypes++;
}

/* ---- task ids ---------------------------------------------------------- */

int phx_tid_home(phx_tid_t tid) { return (int)(tid >> 48) - 1; }

/* ---- hand-offs between threads (core/node.h) ----------------------------- */

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void phx_worker_wake(phx_worker_t *w)
{
    if (w->node->inline_mode) {   /* the comm thread is the worker */
        phx_inline_wake(w->node);
        return;
    }
    /* Dekker pairing with the worker's sleeping=1 then re-check: one of us
     * sees the other's write. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&w->sleeping, memory_order_relaxed) &&
        atomic_exchange(&w->sleeping, 0))
        futex_wake(&w->sleeping);
}

void phx_node_enqueue_local(phx_node_t *n, phx_msg_t *m)
{
    phx_worker_t *w = &n->workers[phx_worker_of(n, m->hdr.dst)];
    atomic_fetch_add_explicit(&n->work, 1, memory_order_relaxed);
    PHX_HANDOFF_RELEASE(m);
    cds_wfcq_enqueue(&w->ih, &w->it, &m->qn);
    phx_worker_wake(w);
}

int phx_node_kick(phx_node_t *n, phx_tid_t id)
{
    phx_msg_t *m = phx_msg_alloc(0);
    if (!m)
        return PHX_ENOMEM;
    m->kind = PHX_MK_KICK;
    m->peer = -1;
    m->hdr.dst = id;
    phx_node_enqueue_local(n, m);
    return 0;
}

void phx_node_batch_add(phx_node_t *n, phx_msg_t *m)
{
    int i = phx_worker_of(n, m->hdr.dst);
    if (!n->batch_n[i]++)
        n->batch_touched[n->batch_ntouched++] = i;
    n->batch_pending++;
    n->batch_bytes += m->hdr.len;
    PHX_HANDOFF_RELEASE(m);
    cds_wfcq_enqueue(&n->batch_h[i], &n->batch_t[i], &m->qn);
}

void phx_node_batch_flush(phx_node_t *n)
{
    for (int k = 0; k < n->batch_ntouched; k++) {
        int i = n->batch_touched[k];
        phx_worker_t *w = &n->workers[i];
        atomic_fetch_add_explicit(&n->work, n->batch_n[i], memory_order_relaxed);
        __cds_wfcq_splice_blocking(&w->ih, &w->it, &n->batch_h[i], &n->batch_t[i]);
        n->batch_n[i] = 0;
        phx_worker_wake(w);
    }
    n->batch_ntouched = 0;
    n->batch_pending = 0;
    if (n->batch_bytes) {
        int64_t q = atomic_fetch_add(&n->inbound, n->batch_bytes) + n->batch_bytes;
        n->batch_bytes = 0;
        if (q > n->cfg.recv_buffer && !atomic_load(&n->reads_paused)) {
            atomic_store(&n->reads_paused, 1);
            phx_net_pause_reads(n->net, 1);
        }
    }
}

void phx_node_enqueue_out(phx_node_t *n, phx_msg_t *m)
{
    atomic_fetch_add_explicit(&n->work, 1, memory_order_relaxed);
    if (m->kind == PHX_MK_APP || m->kind == PHX_MK_SPAWN)
        atomic_fetch_add_explicit(&n->outq, phx_msg_charge(m->hdr.len), memory_order_relaxed);
    PHX_HANDOFF_RELEASE(m);
    cds_wfcq_enqueue(&n->oh, &n->ot, &m->qn);
    if (n->inline_mode)
        phx_inline_wake(n);   /* drained after the handler, no wake-up */
    else if (!n->cfg.busy_poll)
        uv_async_send(&n->async);
}

/* ---- public API used from handlers -------------------------------------- */

static void backpressure(phx_node_t *n, int peer, int64_t charge)
{
    int64_t q = atomic_fetch_add(&n->peer_out[peer], charge);
    if (q <= n->cfg.send_buffer)
        return;
    if (n->inline_mode) {   /* on the comm thread: acks cannot come while we wait */
        n->inl_held = 1;
        return;
    }
    pthread_mutex_lock(&n->bp_lock);
    atomic_fetch_add(&n->bp_waiters, 1);
    while (atomic_load(&n->peer_out[peer]) - charge > n->cfg.send_buffer && !atomic_load(&n->stopping))
        pthread_cond_wait(&n->bp_cond, &n->bp_lock);
    atomic_fetch_sub(&n->bp_waiters, 1);
    pthread_mutex_unlock(&n->bp_lock);
}

/* A worker that sends faster than the comm thread frames its messages
 * waits while the outbox holds PHX_OUTBOX_MAX of charge (one message of
 * any size always goes in). send-buffer alone let it queue some 390,000
 * 8-byte messages (64 MiB of charge) before blocking: every one a fresh
 * buffer from malloc, all of them cold by the time the comm thread read
 * them and freed at exit (a sixth of the sender's instructions in a
 * 200,000-message run, and its cache). The comm thread drains the whole
 * outbox each turn and wakes the waiters (phx_node_drain_outbox); it never
 * waits here itself (it drains what it sends). */
static void outbox_room(phx_node_t *n)
{
    if (atomic_load_explicit(&n->outq, memory_order_relaxed) < PHX_OUTBOX_MAX || n->inline_mode ||
        pthread_equal(pthread_self(), n->comm_th))
        return;
    pthread_mutex_lock(&n->bp_lock);
    atomic_fetch_add(&n->bp_waiters, 1);
    while (atomic_load(&n->outq) >= PHX_OUTBOX_MAX && !atomic_load(&n->stopping))
        pthread_cond_wait(&n->bp_cond, &n->bp_lock);
    atomic_fetch_sub(&n->bp_waiters, 1);
    pthread_mutex_unlock(&n->bp_lock);
}

static int route(phx_ctx_t *c, phx_msg_t *m, phx_tid_t dst)
{
    phx_node_t *n = c->w->node;
    m->hdr.inc = n->inc;
    int home = phx_node_host_of(n, dst);
    if (home == n->rank) {
        m->peer = n->rank;
        phx_node_enqueue_local(n, m);
        return 0;
    }
    m->peer = home;
    const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
    if (rh && rh->send)
        rh->send(n->rec_st, c->w->id);
    backpressure(n, home, phx_msg_charge(m->hdr.len));
    outbox_room(n);
    phx_node_enqueue_out(n, m);
    return 0;
}

int phx_send(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len)
{
    phx_node_t *n = c->w->node;
    int home = phx_tid_home(dst);
    int host = home < 0 ? -1 : phx_node_host_of(n, dst);
    if (tag < 0 || tag >= PHX_MAX_TAGS || home < 0 || host >= n->size || (len && !buf))
        return PHX_EINVAL;
    if ((int64_t)len > n->cfg.max_frame - PHX_TD_PB_MAX)
        return PHX_ERANGE;
    phx_msg_t *m = phx_msg_alloc(len);
    if (!m)
        return PHX_ENOMEM;
    m->kind = PHX_MK_APP;
    m->hdr.dst = dst;
    m->hdr.tag = (uint32_t)tag;
    if (c->task) {
        uint64_t *ssn = phx_map_put(&c->task->out_ssn, dst);
        if (!ssn) {
            phx_msg_free(m);
            return PHX_ENOMEM;
        }
        m->hdr.src = c->task->id;
        m->hdr.ssn = ++*ssn;
    }
    /* A payload bound for the zero-copy path to another node is summed as it
     * is copied (the transport would read it once more, cold, on the comm
     * thread). */
    if (len >= PHX_NET_ZC_MIN && host != n->rank)
        m->pcrc = phx_crc32c_copy(m->data, buf, len, 0);
    else if (len)
        memcpy(m->data, buf, len);
    phx_worker_t *w = c->w;
    PHX_CNT_ADD(w->n_sent, 1);
    PHX_CNT_ADD(w->n_bytes_sent, len);
    return route(c, m, dst);
}

phx_tid_t phx_spawn_on(phx_ctx_t *c, int type, int node, const void *arg, size_t len)
{
    phx_node_t *n = c->w->node;
    if (type < 0 || type >= phx_ntypes || node < 0 || node >= n->app_size || (len && !arg))
        return PHX_TID_NONE;
    phx_msg_t *m = phx_msg_alloc(len);
    if (!m)
        return PHX_TID_NONE;
    uint32_t seq = atomic_fetch_add_explicit(&n->next_seq, 1, memory_order_relaxed);
    phx_tid_t id = phx_tid_make(node, atomic_load_explicit(&n->creator, memory_order_relaxed), seq);
    const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
    if (c->task && rh && rh->spawn)
        id = rh->spawn(n->rec_st, c->w->id, c->task, id);
    m->kind = PHX_MK_SPAWN;
    m->type_id = (uint16_t)type;
    m->hdr.dst = id;
    m->hdr.tag = (uint32_t)type;
    m->hdr.src = c->task ? c->task->id : PHX_TID_NONE;
    if (len)
        memcpy(m->data, arg, len);
    route(c, m, id);
    return id;
}

phx_tid_t phx_spawn(phx_ctx_t *c, int type, const void *arg, size_t len)
{
    phx_node_t *n = c->w->node;
    /* Spread by a hash of (creator, sequence): deterministic, no lookups. */
    uint64_t h = ((uint64_t)n->rank << 32 | atomic_load_explicit(&n->next_seq, memory_order_relaxed))
                 * 0x9e3779b97f4a7c15ULL;
    return phx_spawn_on(c, type, (int)((h >> 33) % (uint64_t)n->app_size), arg, len);
}

void phx_exit(phx_ctx_t *c, int code)
{
    phx_node_t *n = c->w->node;
    phx_msg_t *m = phx_msg_alloc(0);
    if (!m)
        abort();   /* cannot even report the exit: nothing sane left */
    m->kind = PHX_MK_EXIT;
    m->hdr.tag = (uint32_t)code;
    phx_node_enqueue_out(n, m);
}

void phx_task_done(phx_ctx_t *c) { c->done = 1; }
phx_tid_t phx_self(const phx_ctx_t *c) { return c->task ? c->task->id : PHX_TID_NONE; }
int phx_rank(const phx_ctx_t *c) { return c->w->node->rank; }
int phx_size(const phx_ctx_t *c) { return c->w->node->app_size; }
int phx_worker(const phx_ctx_t *c) { return c->w->id; }

void phx_get_stats(phx_ctx_t *c, phx_stats_t *s)
{
    (void)c;
    phx_node_t *n = phx_node_current;
    memset(s, 0, sizeof *s);
    if (!n)
        return;
    for (int i = 0; i < n->nworkers; i++) {
        phx_worker_t *w = &n->workers[i];
        s->msgs_sent += PHX_CNT_GET(w->n_sent);
        s->bytes_sent += PHX_CNT_GET(w->n_bytes_sent);
        s->tasks_created += PHX_CNT_GET(w->n_tasks);
        s->deliveries += PHX_CNT_GET(w->n_deliveries);
        s->reordered += PHX_CNT_GET(w->n_reordered);
    }
    s->msgs_recv = PHX_CNT_GET(n->msgs_recv);
    s->bytes_recv = PHX_CNT_GET(n->bytes_recv);
    s->td_ctrl_msgs = PHX_CNT_GET(n->td_ctrl_sent);
}
