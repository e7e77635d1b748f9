/* Worker threads: run tasks, one message at a time per task. */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/inline.h"
#include "core/node.h"
#include "core/recovery.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

extern phx_type_t phx_types[PHX_MAX_TYPES];
extern int phx_ntypes;

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

/* A unit of work finished; the last one wakes the comm thread to look at
 * idleness (termination detection). */
static void work_done(phx_node_t *n, int64_t k)
{
    if (atomic_fetch_sub_explicit(&n->work, k, memory_order_acq_rel) == k && !n->cfg.busy_poll &&
        !n->inline_mode)   /* inline: the comm thread looks right after the batch */
        uv_async_send(&n->async);
}

/* m cannot be kept (out of memory, or a spawn that makes no sense): its
 * work is lost, so the job must not end as if it were complete. m itself
 * becomes the exit request, so this path needs no memory. */
static void lose(phx_worker_t *w, phx_msg_t *m, const char *what)
{
    PHX_ERROR("task", "%s for task %#llx: its work is lost; ending the job with %d", what,
              (unsigned long long)m->hdr.dst, PHX_EXIT_WORK_LOST);
    m->kind = PHX_MK_EXIT;
    m->hdr.tag = PHX_EXIT_WORK_LOST;
    m->hdr.len = 0;
    phx_node_enqueue_out(w->node, m);
}

void phx_task_free(phx_task_t *t)
{
    const phx_type_t *ty = &phx_types[t->type];
    if (ty->fini)
        ty->fini(t->state);
    phx_map_free(&t->out_ssn);
    phx_map_free(&t->in_ssn);
    phx_held_free(&t->held);
    free(t);
}

static void task_destroy(phx_worker_t *w, phx_task_t *t)
{
    phx_map_del(&w->tasks, t->id);
    phx_map_put(&w->gone, t->id);
    phx_task_free(t);
}

/* Runs m's handler on t. Returns 1 if the task was destroyed. */
static int run(phx_worker_t *w, phx_task_t *t, phx_msg_t *m)
{
    phx_node_t *n = w->node;
    uint64_t rsn = ++t->rsn;
    PHX_CNT_ADD(w->n_deliveries, 1);
    const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
    if (rh && rh->delivered) {
        rh->delivered(n->rec_st, w->id, t->id, m->hdr.src, m->hdr.ssn, rsn, m->hdr.inc);
        PHX_CNT_ADD(w->n_hook, 1);
    }
    phx_handler_fn h = m->hdr.tag < PHX_MAX_TAGS ? phx_types[t->type].handlers[m->hdr.tag] : NULL;
    if (!h) {
        PHX_WARN("task", "task %#llx (%s) has no handler for tag %u; message dropped",
                 (unsigned long long)t->id, phx_types[t->type].name, m->hdr.tag);
        return 0;
    }
    w->ctx.task = t;
    w->ctx.done = 0;
    h(&w->ctx, t->state, m->hdr.src, m->data, m->hdr.len);
    w->ctx.task = NULL;
    if (w->ctx.done) {
        task_destroy(w, t);
        return 1;
    }
    return 0;
}

/* The recovery mode holds messages back (it has an admission hook). */
static int admits(const phx_node_t *n)
{
    const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
    return rh && rh->admit;
}

static int admitted(phx_worker_t *w, const phx_task_t *t, const phx_msg_t *m)
{
    phx_node_t *n = w->node;
    const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
    return !rh || !rh->admit || !rh->admit(n->rec_st, w->id, t, m->hdr.src, m->hdr.ssn);
}

/* Drops t's held copy of <src, ssn>, which is being delivered: under
 * mlog-team a rolled-back task may hold one copy of a message (its old
 * run's frame, or the hand-back's) while another is admitted. */
static void drop_held_copy(phx_worker_t *w, phx_task_t *t, phx_tid_t src, uint64_t ssn)
{
    phx_msg_t *x = phx_held_len(&t->held) ? phx_held_take(&t->held, src, ssn) : NULL;
    if (x) {
        PHX_CNT_ADD(w->n_dups, 1);
        phx_msg_free(x);
    }
}

/* Delivers held x (taken from t->held, next in its sender's stream).
 * Returns 1 if t was destroyed, -1 if the job is ending. */
static int run_held(phx_worker_t *w, phx_task_t *t, phx_msg_t *x)
{
    uint64_t *last = phx_map_put(&t->in_ssn, x->hdr.src);
    if (!last) {
        lose(w, x, "out of memory tracking a sender's stream");
        return -1;
    }
    *last = x->hdr.ssn;
    int gone = run(w, t, x);
    phx_msg_free(x);
    return gone;
}

/* Takes the held message that continues src's stream, if it may go now. */
static phx_msg_t *take_next(phx_worker_t *w, phx_task_t *t, phx_tid_t src)
{
    const uint64_t *last = phx_map_get(&t->in_ssn, src);
    uint64_t ssn = (last ? *last : 0) + 1;
    phx_msg_t *x = phx_held_take(&t->held, src, ssn);
    if (x && !admitted(w, t, x)) {
        if (phx_held_put(&t->held, x) < 0) {   /* it was just there: cannot fail */
            lose(w, x, "out of memory holding a message back");
            return NULL;
        }
        x = NULL;
    }
    return x;
}

/* With an admission hook any held message may have become deliverable.
 * A replay names the one it delivers next (admit_next): O(1) per delivery,
 * where scanning what a whole checkpoint interval left waiting made a
 * replay quadratic in it. Otherwise every sender's next message is offered,
 * following each stream as far as it goes, until none is taken (survivors
 * never hold). Handlers never touch t->held. */
static void retry_held(phx_worker_t *w, phx_tid_t id)
{
    phx_node_t *n = w->node;
    for (int progressed = 1; progressed;) {
        progressed = 0;
        uint64_t *v = phx_map_get(&w->tasks, id);
        if (!v || !phx_held_len(&((phx_task_t *)(uintptr_t)*v)->held))
            return;
        phx_task_t *t = (phx_task_t *)(uintptr_t)*v;
        phx_tid_t src;
        uint64_t ssn;
        const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
        if (rh && rh->admit_next && rh->admit_next(n->rec_st, w->id, t, &src, &ssn)) {
            /* src's next message, if that is <src, ssn> (admit decides). */
            phx_msg_t *x = take_next(w, t, src);
            progressed = x && !run_held(w, t, x);
            continue;
        }
        /* A delivery changes the index under the walk: restart it then. */
        size_t i = 0;
        for (phx_msg_t *x; !progressed && (x = phx_held_next(&t->held, &i));) {
            src = x->hdr.src;
            for (phx_msg_t *y; (y = take_next(w, t, src)); progressed = 1)
                if (run_held(w, t, y))
                    return;
        }
    }
}

/* Delivers in SSN order per sender; early messages wait in t->held. */
static void deliver(phx_worker_t *w, phx_task_t *t, phx_msg_t *m)
{
    phx_tid_t src = m->hdr.src;
    if (src == PHX_TID_NONE || m->hdr.ssn == 0) {
        run(w, t, m);
        phx_msg_free(m);
        return;
    }
    uint64_t *last = phx_map_put(&t->in_ssn, src);
    if (!last) {
        lose(w, m, "out of memory tracking a sender's stream");
        return;
    }
    if (m->hdr.ssn <= *last) {
        PHX_DEBUG("task", "duplicate ssn %llu from %#llx dropped", (unsigned long long)m->hdr.ssn,
                  (unsigned long long)src);
        PHX_CNT_ADD(w->n_dups, 1);
        phx_msg_free(m);
        return;
    }
    if (m->hdr.ssn > *last + 1 || !admitted(w, t, m)) {
        int rc = phx_held_put(&t->held, m);
        if (rc == PHX_EEXIST) {   /* a second copy of a re-sent message */
            PHX_CNT_ADD(w->n_dups, 1);
            phx_msg_free(m);
        } else if (rc < 0)
            lose(w, m, "out of memory holding a message back");
        else
            PHX_CNT_ADD(w->n_reordered, 1);
        return;
    }
    *last = m->hdr.ssn;
    drop_held_copy(w, t, src, m->hdr.ssn);
    phx_tid_t id = t->id;
    int gone = run(w, t, m);
    phx_msg_free(m);
    if (gone)
        return;
    if (admits(w->node)) {
        retry_held(w, id);
        return;
    }
    /* The gap may have been the only thing holding later messages back. */
    for (;;) {
        uint64_t *v = phx_map_get(&w->tasks, id);
        if (!v)
            return;
        t = (phx_task_t *)(uintptr_t)*v;
        phx_msg_t *x = phx_held_len(&t->held) ? take_next(w, t, src) : NULL;
        if (!x || run_held(w, t, x))
            return;
    }
}

/* PHX_MK_KICK: task id's held messages (0: every task of this worker's). */
static void kick(phx_worker_t *w, phx_tid_t id)
{
    if (id) {
        if (phx_map_get(&w->tasks, id))
            retry_held(w, id);
        return;
    }
    size_t k = 0;
    uint64_t *ids = malloc((w->tasks.len + 1) * sizeof *ids);
    if (!ids) {
        PHX_ERROR("worker", "out of memory offering held messages again");
        return;
    }
    for (size_t i = 0; i < w->tasks.cap; i++)
        if (w->tasks.keys[i])
            ids[k++] = w->tasks.keys[i];
    for (size_t i = 0; i < k; i++)
        if (phx_map_get(&w->tasks, ids[i]))
            retry_held(w, ids[i]);
    free(ids);
}

static void spawn(phx_worker_t *w, phx_msg_t *m)
{
    phx_tid_t id = m->hdr.dst;
    if (admits(w->node) && m->type_id < phx_ntypes && (phx_map_get(&w->tasks, id) || phx_map_get(&w->gone, id))) {
        /* Message logging re-sends a spawn the restored state already
         * holds: a duplicate, like a message under its SSN. */
        PHX_CNT_ADD(w->n_dups, 1);
        phx_msg_free(m);
        return;
    }
    if (m->type_id >= phx_ntypes || phx_map_get(&w->tasks, id)) {
        PHX_ERROR("task", "spawn of type %u names an unknown type or a task that exists", m->type_id);
        lose(w, m, "bad spawn");
        return;
    }
    const phx_type_t *ty = &phx_types[m->type_id];
    phx_task_t *t = calloc(1, sizeof *t + ty->state_size);
    uint64_t *slot = t ? phx_map_put(&w->tasks, id) : NULL;
    if (!slot) {
        free(t);
        lose(w, m, "out of memory creating the task");
        return;
    }
    t->id = id;
    t->type = m->type_id;
    *slot = (uint64_t)(uintptr_t)t;
    PHX_CNT_ADD(w->n_tasks, 1);
    if (ty->init) {
        w->ctx.task = t;
        w->ctx.done = 0;
        ty->init(&w->ctx, t->state, m->data, m->hdr.len);
        w->ctx.task = NULL;
        if (w->ctx.done) {
            task_destroy(w, t);
            t = NULL;
        }
    }
    phx_msg_free(m);
    /* Messages that raced ahead of the spawn, oldest first. */
    uint64_t *pv = phx_map_get(&w->pending, id);
    if (!pv)
        return;
    phx_msg_t *chain = (phx_msg_t *)(uintptr_t)*pv;
    phx_map_del(&w->pending, id);
    while (chain) {
        phx_msg_t *x = chain;
        chain = (phx_msg_t *)x->qn.next;
        uint64_t *tv = phx_map_get(&w->tasks, id);
        if (tv)
            deliver(w, (phx_task_t *)(uintptr_t)*tv, x);
        else
            phx_msg_free(x);
    }
}

static void app(phx_worker_t *w, phx_msg_t *m)
{
    uint64_t *v = phx_map_get(&w->tasks, m->hdr.dst);
    if (v) {
        deliver(w, (phx_task_t *)(uintptr_t)*v, m);
        return;
    }
    if (phx_map_get(&w->gone, m->hdr.dst)) {
        PHX_DEBUG("task", "message for finished task %#llx dropped", (unsigned long long)m->hdr.dst);
        phx_msg_free(m);
        return;
    }
    /* Keep arrival order: append at the tail of the pending chain. */
    uint64_t *slot = phx_map_put(&w->pending, m->hdr.dst);
    if (!slot) {
        lose(w, m, "out of memory holding a message until its task is spawned");
        return;
    }
    m->qn.next = NULL;
    phx_msg_t *tail = (phx_msg_t *)(uintptr_t)*slot;
    if (!tail) {
        *slot = (uint64_t)(uintptr_t)m;
        return;
    }
    while (tail->qn.next)
        tail = (phx_msg_t *)tail->qn.next;
    tail->qn.next = &m->qn;
}

int phx_worker_step(phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt, long budget)
{
    phx_node_t *n = w->node;
    __cds_wfcq_splice_blocking(lh, lt, &w->ih, &w->it);
    /* Counters are settled once per batch: one atomic each instead of
     * one per message keeps the cache lines from bouncing. Finishing the
     * batch before decrementing `work` only delays idleness. */
    int64_t handled = 0, inbound = 0;
    struct cds_wfcq_node *qn;
    while (handled < budget && !atomic_load_explicit(&n->rec_pause, memory_order_relaxed) &&
           (qn = __cds_wfcq_dequeue_blocking(lh, lt))) {
        phx_msg_t *m = caa_container_of(qn, phx_msg_t, qn);
        PHX_HANDOFF_ACQUIRE(m);
        int src_node = m->peer;
        int64_t len = m->hdr.len;
        switch (m->kind) {
        case PHX_MK_STOP:
            phx_msg_free(m);
            /* The job is over: whatever is still queued is discarded. */
            while ((qn = __cds_wfcq_dequeue_blocking(lh, lt)))
                phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
            phx_pool_flush();
            return 1;
        case PHX_MK_SPAWN:
            spawn(w, m);
            break;
        case PHX_MK_APP:
            app(w, m);
            break;
        case PHX_MK_KICK:
            kick(w, m->hdr.dst);
            phx_msg_free(m);
            break;
        default:
            PHX_ERROR("worker", "unexpected message kind %u", m->kind);
            phx_msg_free(m);
        }
        if (src_node >= 0 && src_node != n->rank) {
            inbound += len;
            if (!w->processed[src_node]++)
                w->touched[w->ntouched++] = src_node;
        }
        handled++;
    }
    for (int i = 0; i < w->ntouched; i++) {
        int s = w->touched[i];
        atomic_fetch_add_explicit(&n->processed[s], w->processed[s], memory_order_release);
        w->processed[s] = 0;
    }
    w->ntouched = 0;
    phx_pool_flush();
    if (inbound) {
        int64_t q = atomic_fetch_sub(&n->inbound, inbound) - inbound;
        if (q <= n->cfg.recv_buffer / 2 && atomic_load(&n->reads_paused) && !n->cfg.busy_poll && !n->inline_mode)
            uv_async_send(&n->async);   /* the comm thread resumes reading */
    }
    work_done(n, handled);
    return 0;
}

void *phx_worker_main(void *arg)
{
    phx_worker_t *w = arg;
    phx_node_t *n = w->node;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* signals belong to the comm thread */
    w->pool = phx_pool_create();
    w->processed = calloc((size_t)n->size, sizeof *w->processed);
    w->touched = calloc((size_t)n->size, sizeof *w->touched);
    if (!w->pool || !w->processed || !w->touched) {
        PHX_ERROR("worker", "out of memory");
        abort();
    }
    struct cds_wfcq_head lh;
    struct cds_wfcq_tail lt;
    cds_wfcq_init(&lh, &lt);
    int spins = 0;
    uint64_t idle_since = 0;
    for (;;) {
        if (atomic_load_explicit(&n->rec_pause, memory_order_acquire)) {
            const phx_recovery_ops_t *rh = phx_node_rec_hooks(n);
            if (rh && rh->worker_pause)
                rh->worker_pause(n->rec_st, w, &lh, &lt);   /* checkpoint or rollback */
        }
        if (cds_wfcq_empty(&lh, &lt) && cds_wfcq_empty(&w->ih, &w->it)) {
            if (++spins < 64) {
                caa_cpu_relax();
                continue;
            }
            if (n->cfg.busy_poll) {
                /* Spin, but hand the core over whenever another thread is
                 * runnable: on an oversubscribed box a pure spinner would
                 * make every hand-off wait for a scheduler tick. */
                sched_yield();
                continue;
            }
            /* A reply often follows within microseconds: linger briefly,
             * yielding so a lingering worker never holds a core that the
             * comm thread needs, then park. */
            if (!idle_since)
                idle_since = phx_now_ns();
            if (phx_now_ns() - idle_since < (uint64_t)n->cfg.linger_us * 1000) {
                sched_yield();
                continue;
            }
            atomic_store(&w->sleeping, 1);
            atomic_thread_fence(memory_order_seq_cst);
            if (cds_wfcq_empty(&w->ih, &w->it) && !atomic_load(&n->rec_pause))
                futex_wait(&w->sleeping, 1);
            atomic_store(&w->sleeping, 0);
            continue;
        }
        spins = 0;
        idle_since = 0;
        if (phx_worker_step(w, &lh, &lt, LONG_MAX))
            return NULL;
    }
}
