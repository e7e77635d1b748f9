/* The node: startup, the comm thread's loop and frame dispatch, and the
 * public API. Separate jobs live beside it: term.c (termination detector
 * glue), outbox.c, inbound.c (application frames in, zero-copy claims),
 * failures.c (the dead list), lifeline.c (signals, launcher lifeline,
 * watchdog) and shutdown.c (phx_node_exit and the teardown). */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/node.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/ft.h"
#include "core/agree.h"
#include "core/recovery.h"
#include "core/failures.h"
#include "core/inbound.h"
#include "core/inline.h"
#include "core/lifeline.h"
#include "core/shutdown.h"
#include "core/term.h"
#include "net/auth.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

phx_type_t phx_types[PHX_MAX_TYPES];
int phx_ntypes;
phx_node_t *phx_node_current;
static int g_argc;
static char **g_argv;

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

int phx_argc(void) { return g_argc; }
char **phx_argv(void) { return g_argv; }

/* ---- task ids ---------------------------------------------------------- */

static phx_tid_t make_tid(int home, int creator, uint32_t seq)
{
    return ((uint64_t)(home + 1) << 48) | ((uint64_t)creator << 32) | seq;
}

int phx_tid_home(phx_tid_t tid) { return (int)(tid >> 48) - 1; }

/* ---- transport callbacks ------------------------------------------------ */

static void maybe_start_job(phx_node_t *n);

static void on_frame(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    phx_node_t *n = ctx;
    if (atomic_load(&n->stopping))
        return;
    switch (h->type) {
    case PHX_FT_APP:
    case PHX_FT_SPAWN:
        phx_inbound_app(n, peer, h, payload);
        return;
    case PHX_FT_CTRL:
        if (phx_recovery_on_ctrl(n, peer, h, payload))
            return;
        if (h->tag == PHX_CTRL_READY && n->rank == 0 && n->nready >= 0) {
            n->nready++;
            maybe_start_job(n);
            return;
        }
        if (h->tag == PHX_CTRL_EXIT) {
            PHX_INFO("node", "rank %d ended the job with code %u", peer, (unsigned)h->ssn);
            phx_node_exit(n, (int)h->ssn, 0);
            return;
        }
        break;
    case PHX_FT_HB:
    case PHX_FT_BCAST:
        if (n->cfg.ft) {
            phx_ft_on_frame(n, peer, h, payload);
            return;
        }
        break;
    case PHX_FT_ERA:
        phx_agree_on_frame(n, peer, h, payload);
        return;
    case PHX_FT_TD:
        if (phx_term_on_frame(n, peer, h, payload))
            return;
        break;
    default:
        break;
    }
    PHX_WARN("node", "unexpected %s frame (tag %u) from rank %d ignored",
             phx_frame_type_name(h->type), h->tag, peer);
}

static void on_read_end(void *ctx)
{
    phx_node_t *n = ctx;
    n->activity++;
    phx_node_batch_flush(n);
    phx_term_flush(n);
}

static void on_drain(void *ctx, int peer, uint64_t charge)
{
    phx_node_t *n = ctx;
    atomic_fetch_sub(&n->peer_out[peer], (int64_t)charge);
    if (n->inl_held)
        phx_inline_wake(n);   /* handlers held for the send budget may run */
    if (atomic_load(&n->bp_waiters)) {
        pthread_mutex_lock(&n->bp_lock);
        pthread_cond_broadcast(&n->bp_cond);
        pthread_mutex_unlock(&n->bp_lock);
    }
}

static void on_peer_down(void *ctx, int peer, int graceful, const char *why)
{
    phx_node_t *n = ctx;
    if (graceful || atomic_load(&n->stopping))
        return;
    if (n->cfg.ft) {   /* the detector decides, so every survivor agrees */
        phx_ft_on_peer_down(n, peer);
        return;
    }
    PHX_ERROR("node", "lost rank %d (%s:%d): %s; fault tolerance is off, ending the job",
              peer, n->cfg.peers[peer].host, n->cfg.peers[peer].port, why);
    phx_node_exit(n, PHX_EXIT_PEER_LOST, 1);
}

static int on_link_failed(void *ctx, int peer)
{
    phx_node_t *n = ctx;
    /* Without fault tolerance on_peer_down has already ended the job. */
    if (n->cfg.ft && !atomic_load(&n->stopping))
        return phx_ft_on_link_failed(n, peer);
    return 0;
}

static void on_peer_up(void *ctx, int peer, uint32_t inc)
{
    phx_node_t *n = ctx;
    if (n->cfg.ft)
        phx_ft_on_peer_up(n, peer);
    phx_recovery_on_peer_up(ctx, peer, inc);
}

static void on_fatal(void *ctx, int code, const char *why)
{
    phx_node_t *n = ctx;
    PHX_ERROR("node", "startup failed: %s (%s); exiting with %d", why, phx_strerror(code),
              PHX_EXIT_STARTUP);
    phx_node_exit(n, PHX_EXIT_STARTUP, 0);
}

/* Rank 0 starts the job once every node is fully connected: before that a
 * node that dies could leave a peer waiting forever for its first link,
 * and that peer's failure detector would never start. */
static void maybe_start_job(phx_node_t *n)
{
    if (n->rank != 0 || !n->all_up || n->nready < n->size - 1 || atomic_load(&n->stopping))
        return;
    n->nready = -1;   /* once */
    PHX_INFO("node", "all %d nodes ready: starting the job (%d workers here)", n->size,
             n->inline_mode ? 0 : n->nworkers);
    phx_msg_t *m = phx_msg_alloc(n->main_len);
    if (!m) {
        phx_node_exit(n, 1, 1);
        return;
    }
    m->kind = PHX_MK_SPAWN;
    m->type_id = (uint16_t)n->main_type;
    m->hdr.dst = make_tid(0, 0, atomic_fetch_add(&n->next_seq, 1));
    m->peer = 0;
    if (n->main_len)
        memcpy(m->data, n->main_arg, n->main_len);
    phx_node_enqueue_local(n, m);
    /* Drop the placeholder from phx_main. The main task may already have
     * run to its end (work went 2 -> 1 and woke nobody), so if this drop
     * makes the node idle the detector must hear of it now: nothing else
     * would wake the comm thread on a one-node job. */
    if (atomic_fetch_sub(&n->work, 1) == 1)
        uv_async_send(&n->async);
    phx_recovery_start(n);
}

static void on_all_up(void *ctx)
{
    phx_node_t *n = ctx;
    if (n->starting) {
        n->all_up_deferred = 1;
        return;
    }
    PHX_INFO("node", "all %d peers connected", n->size - 1);
    n->all_up = 1;
    if (phx_recovery_rejoining(n))
        return;   /* the job runs already: the recovery round takes us in */
    phx_ft_start(n);
    if (n->rank != 0) {
        phx_frame_hdr_t h = { .type = PHX_FT_CTRL, .tag = PHX_CTRL_READY, .src = (uint64_t)n->rank };
        phx_net_send(n->net, 0, &h, NULL, 0, NULL, 0, 0);
    }
    maybe_start_job(n);
}

/* ---- loop -------------------------------------------------------------- */

static void on_async(uv_async_t *a)
{
    phx_node_t *n = a->data;
    n->activity++;
    phx_node_drain_outbox(n);
    phx_term_poll(n);
    phx_inbound_resume(n);
    if (n->inline_mode)
        phx_inline_wake(n);   /* messages queued from another thread */
}

int phx_main(int argc, char **argv, int main_type, const void *arg, size_t len)
{
    static phx_node_t node;
    phx_node_t *n = &node;
    int rc = phx_config_load(&n->cfg, &argc, argv);
    g_argc = argc;
    g_argv = argv;
    if (rc)
        return 2;
    if (main_type < 0 || main_type >= phx_ntypes) {
        fprintf(stderr, "phalanx: phx_main: unknown main task type %d\n", main_type);
        return 2;
    }
    n->rank = n->cfg.rank;
    atomic_store(&n->creator, (uint16_t)n->rank);
    n->size = n->cfg.size;
    if (n->cfg.spares >= n->size) {
        fprintf(stderr, "phalanx: spares=%d leaves no node for the program (size %d)\n", n->cfg.spares, n->size);
        return 2;
    }
    /* Spares are the last ranks: the program never places work there. */
    n->app_size = n->size - n->cfg.spares;
    n->main_type = main_type;
    n->main_arg = arg;
    n->main_len = len;
    if (phx_recovery_incarnation(n->rank, &n->inc))
        return 2;
    phx_log_set_rank(n->rank);
    phx_node_current = n;
    if (phx_evlog_open(n->cfg.eventlog, n->rank))
        return 2;

    uint8_t secret[1024];
    size_t slen = 0;
    /* phx run sends remote nodes the secret as the first line of stdin
     * (PHX_SECRET_STDIN=1), never on their command line. */
    const char *sin = getenv("PHX_SECRET_STDIN");
    if (n->size > 1)
        rc = sin && !strcmp(sin, "1") ? phx_config_read_secret(0, secret, sizeof secret, &slen)
                                      : phx_auth_load_secret(secret, sizeof secret, &slen);
    if (n->size > 1 && rc) {
        fprintf(stderr, "phalanx: rank %d: no usable cluster secret (set PHX_SECRET or "
                        "PHX_SECRET_FILE, or start the job with phx run): %s\n",
                n->rank, phx_strerror(rc));
        return 2;
    }
    if (n->size == 1) {
        memcpy(secret, "single-node", 11);
        slen = 11;
    }
    if (phx_inline_check(n) || phx_recovery_configure(n))
        return 2;
    if (phx_term_create(n))
        return 2;

    n->pool = phx_pool_create();
    n->processed = calloc((size_t)n->size, sizeof *n->processed);
    n->peer_out = calloc((size_t)n->size, sizeof *n->peer_out);
    n->inline_mode = n->cfg.workers == 0;
    n->nworkers = n->inline_mode ? 1 : n->cfg.workers;
    n->workers = calloc((size_t)n->nworkers, sizeof *n->workers);
    n->batch_h = calloc((size_t)n->nworkers, sizeof *n->batch_h);
    n->batch_t = calloc((size_t)n->nworkers, sizeof *n->batch_t);
    n->batch_n = calloc((size_t)n->nworkers, sizeof *n->batch_n);
    n->batch_touched = calloc((size_t)n->nworkers, sizeof *n->batch_touched);
    if (!n->pool || !n->processed || !n->peer_out || !n->workers || !n->batch_h || !n->batch_t ||
        !n->batch_n || !n->batch_touched) {
        fprintf(stderr, "phalanx: out of memory\n");
        return 1;
    }
    pthread_mutex_init(&n->bp_lock, NULL);
    if (phx_failures_init(n))
        return 1;
    pthread_cond_init(&n->bp_cond, NULL);
    cds_wfcq_init(&n->oh, &n->ot);

    uv_loop_init(&n->loop);
    uv_async_init(&n->loop, &n->async, on_async);
    n->async.data = n;
    phx_lifeline_signals(n);

    for (int i = 0; i < n->nworkers; i++) {
        phx_worker_t *w = &n->workers[i];
        cds_wfcq_init(&n->batch_h[i], &n->batch_t[i]);
        w->node = n;
        w->id = i;
        w->ctx.w = w;
        cds_wfcq_init(&w->ih, &w->it);
        phx_map_init(&w->tasks);
        phx_map_init(&w->pending);
        phx_map_init(&w->gone);
        if (n->inline_mode) {
            if (phx_inline_init(n)) {
                fprintf(stderr, "phalanx: out of memory\n");
                return 1;
            }
            continue;
        }
        if (pthread_create(&w->th, NULL, phx_worker_main, w)) {
            fprintf(stderr, "phalanx: cannot start worker thread %d\n", i);
            return 1;
        }
    }

    signal(SIGPIPE, SIG_IGN);   /* a peer that exits first must not kill us */

    phx_net_cb_t cb = { .ctx = n, .on_frame = on_frame, .on_peer_down = on_peer_down,
                        .on_all_up = on_all_up, .on_drain = on_drain, .on_read_end = on_read_end, .on_fatal = on_fatal,
                        .on_claim = phx_inbound_claim, .on_claimed = phx_inbound_claimed,
                        .on_link_failed = on_link_failed, .on_peer_up = on_peer_up };
    const char *step = "cannot watch for the launcher";
    n->starting = 1;
    rc = phx_lifeline_open(n);
    if (!rc) {
        step = "cannot start the transport";
        rc = phx_net_start(&n->loop, &n->cfg, secret, slen, n->inc, &cb, &n->net);
    }
    memset(secret, 0, sizeof secret);
    if (!rc) {
        step = "cannot set up failure detection";
        rc = phx_ft_init(n);
    }
    if (!rc) {
        step = "cannot set up agreement";
        rc = phx_agree_init(n);
    }
    if (!rc) {
        step = "cannot set up recovery";
        rc = phx_recovery_init(n);
    }
    if (!rc) {
        step = "cannot start metrics";
        rc = phx_metrics_start(n);
    }
    /* The detector starts before the loop runs, i.e. before any frame can
     * arrive: a fully connected peer may send to us before our own last
     * connection is up, and that message must meet a started detector.
     * Rank 0 holds the initial work (the main task) from the start. */
    if (!rc)
        phx_term_start(n);
    /* Until on_all_up spawns it, the main task is rank 0's pending work:
     * the node must not look idle to the detector in the meantime. */
    if (n->rank == 0)
        atomic_store(&n->work, 1);
    n->starting = 0;
    if (!rc && n->all_up_deferred)
        on_all_up(n);
    if (rc) {
        /* The step's own error was logged above; this names the step. The
         * orderly stop also ends the workers and closes every handle, so
         * the loop below returns at once. */
        fprintf(stderr, "phalanx: rank %d: startup failed: %s (%s); exiting with %d\n", n->rank, step,
                phx_strerror(rc), PHX_EXIT_STARTUP);
        phx_node_exit(n, PHX_EXIT_STARTUP, 0);
    }

    if (n->cfg.busy_poll) {
        while (uv_run(&n->loop, UV_RUN_NOWAIT)) {
            phx_node_drain_outbox(n);
            phx_term_poll(n);
            phx_inbound_resume(n);
            /* See the worker's busy-poll loop. Inline there is no hand-off
             * between threads to make way for: the one thread spins as a
             * spinning socket does (a node needs its own core). Yielding
             * cost a scheduler round on round trips under load (1.5-1.9x
             * raw spinning TCP at load 29, against 1.25x without). */
            if (!n->inline_mode)
                sched_yield();
        }
    } else if (n->cfg.linger_us > 0) {
        /* After activity, poll without blocking for linger_us (yielding the
         * core each round): a reply that follows within microseconds is
         * then picked up without an epoll wake-up. */
        uint64_t linger = (uint64_t)n->cfg.linger_us * 1000;
        for (;;) {
            uint64_t seen = n->activity, t0 = phx_now_ns();
            while (phx_now_ns() - t0 < linger) {
                if (!uv_run(&n->loop, UV_RUN_NOWAIT))
                    goto done;
                if (n->activity != seen) {
                    seen = n->activity;
                    t0 = phx_now_ns();
                }
                sched_yield();
            }
            if (!uv_run(&n->loop, UV_RUN_ONCE))
                break;
        }
    done:;
    } else {
        uv_run(&n->loop, UV_RUN_DEFAULT);
    }

    phx_shutdown_free(n);
    return n->exit_code;
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
    backpressure(n, home, phx_msg_charge(m->hdr.len));
    phx_node_enqueue_out(n, m);
    return 0;
}

int phx_send(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len)
{
    phx_node_t *n = c->w->node;
    int home = phx_tid_home(dst);
    if (tag < 0 || tag >= PHX_MAX_TAGS || home < 0 || phx_node_host_of(n, dst) >= n->size || (len && !buf))
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
    if (len)
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
    phx_tid_t id = make_tid(node, atomic_load_explicit(&n->creator, memory_order_relaxed), seq);
    if (c->task && n->spawn_hook)
        id = n->spawn_hook(n->spawn_ctx, c->w->id, c->task, id);
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
