/* The top of the runtime: phx_main (startup, the comm thread's loop), the
 * transport callbacks and their frame dispatch, and the service table
 * (core/service.h). Nothing below calls up into this file: services reach
 * the node through phx_node_exit and phx_node_notify_dead. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/ft.h"
#include "core/agree.h"
#include "core/ctl_msg.h"
#include "core/recovery.h"
#include "core/failures.h"
#include "core/inbound.h"
#include "core/inline.h"
#include "core/lifeline.h"
#include "core/service.h"
#include "core/shutdown.h"
#include "core/term.h"
#include "net/auth.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

extern int phx_ntypes;

static int g_argc;
static char **g_argv;

int phx_argc(void) { return g_argc; }
char **phx_argv(void) { return g_argv; }

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
        int32_t code;
        if (h->tag == PHX_CTRL_EXIT && !phx_ctl_exit_dec(payload, h->len, &code)) {
            PHX_INFO("node", "rank %d ended the job with code %u", peer, (unsigned)code);
            phx_node_exit(n, code, 0);
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
    m->hdr.dst = phx_tid_make(0, 0, atomic_fetch_add(&n->next_seq, 1));
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
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, PHX_CTRL_READY, (uint64_t)n->rank, 0, 0);
        phx_net_send(n->net, 0, &h, NULL, 0, NULL, 0, 0);
    }
    maybe_start_job(n);
}

/* ---- services ----------------------------------------------------------- */

static int term_failure(phx_node_t *n, int rank)
{
    phx_term_on_failure(n, rank);
    return 0;
}

/* Detection latency (the time since the dead rank was last heard) is read
 * first, before any other service acts on the notice. */
static int metrics_failure(phx_node_t *n, int rank)
{
    phx_metrics_on_failure(n, rank);
    return 0;
}

static int agree_failure(phx_node_t *n, int rank)
{
    phx_agree_on_failure(n, rank);
    return 0;
}

/* Notice order (core/service.h): metrics, termination detection,
 * agreement, then recovery; stop order: detection, agreement, recovery,
 * metrics, then the lifeline's handles. */
static const phx_service_t services[] = {
    { .name = "metrics", .on_failure = metrics_failure },
    { .name = "failure detection", .stop = phx_ft_stop },
    { .name = "termination detection", .on_failure = term_failure, .after_failure = phx_term_poll },
    { .name = "agreement", .on_failure = agree_failure, .stop = phx_agree_stop },
    { .name = "recovery", .on_failure = phx_recovery_on_failure, .stop = phx_recovery_stop },
    { .name = "metrics", .stop = phx_metrics_stop },
    { .name = "lifeline", .stop = phx_lifeline_close },
};

/* The recovery modes, found by the name in the configuration key recovery
 * (none, the default, is no mode); a new mode adds a line here. */
static const phx_recovery_ops_t *const modes[] = { &phx_recovery_cr, &phx_recovery_mlog_causal,
                                                   &phx_recovery_mlog_pessimistic, &phx_recovery_mlog_fast,
                                                   &phx_recovery_mlog_team };

/* ---- loop -------------------------------------------------------------- */

/* Inline mode (core/inline.h): handlers run per turn of the loop before
 * the sockets are polled again: large enough that a burst of local
 * messages costs few turns, small enough that acknowledgements and
 * heartbeats are not held up behind it. */
#define INLINE_BUDGET 256

/* A peer holds more than send-buffer unacknowledged bytes. */
static int over_budget(phx_node_t *n)
{
    for (int r = 0; r < n->size; r++)
        if (atomic_load_explicit(&n->peer_out[r], memory_order_relaxed) > n->cfg.send_buffer)
            return 1;
    return 0;
}

/* One turn of inline mode's handlers (inl_idle's callback). */
static void inline_turn(uv_idle_t *h)
{
    phx_node_t *n = h->data;
    phx_worker_t *w = &n->workers[0];
    n->activity++;
    if (n->inl_held && !over_budget(n))
        n->inl_held = 0;
    if (!n->inl_held)
        phx_worker_step(w, &n->inl_h, &n->inl_t, INLINE_BUDGET);
    /* What the handlers sent leaves in this turn (the transport writes at
     * the loop's prepare phase, right after), and idleness is looked at. */
    phx_node_drain_outbox(n);
    phx_term_poll(n);
    phx_inbound_resume(n);
    if (n->inl_held || (cds_wfcq_empty(&n->inl_h, &n->inl_t) && cds_wfcq_empty(&w->ih, &w->it)))
        uv_idle_stop(h);   /* woken by new messages, or by acks (on_drain) */
}

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
    n->svc = services;
    n->nsvc = (int)(sizeof services / sizeof services[0]);
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
    if (phx_inline_check(n) || phx_recovery_configure(n, modes, sizeof modes / sizeof modes[0]))
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

    n->comm_th = pthread_self();   /* this thread runs the loop */
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
            if (phx_inline_init(n, inline_turn)) {
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
        phx_net_cfg_t nc = { .rank = n->cfg.rank, .size = n->cfg.size, .job_id = n->cfg.job_id,
                             .peers = n->cfg.peers, .listen_fd = n->cfg.listen_fd,
                             .startup_timeout_ms = n->cfg.startup_timeout_ms,
                             .hb_timeout_ms = n->cfg.hb_timeout_ms, .max_frame = n->cfg.max_frame,
                             .rejoin = phx_config_respawns(&n->cfg) };
        rc = phx_net_start(&n->loop, &nc, secret, slen, n->inc, &cb, &n->net);
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
