/* The node: communication thread, startup, shutdown and the public API. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/node.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/ft.h"
#include "core/agree.h"
#include "core/recovery.h"
#include "net/auth.h"
#include "phx_err.h"
#include "phx_log.h"

phx_type_t phx_types[PHX_MAX_TYPES];
int phx_ntypes;
phx_node_t *phx_node_current;
static struct { phx_failure_fn fn; void *arg; } phx_fail_cbs[8];
static int phx_nfail_cbs;

int phx_on_failure(phx_failure_fn fn, void *arg)
{
    if (!fn)
        return PHX_EINVAL;
    if (phx_nfail_cbs == 8)
        return PHX_ENOSPC;
    phx_fail_cbs[phx_nfail_cbs].fn = fn;
    phx_fail_cbs[phx_nfail_cbs++].arg = arg;
    return 0;
}

int phx_failed_nodes(int *out, int cap)
{
    phx_node_t *n = phx_node_current;
    if (!n)
        return 0;
    pthread_mutex_lock(&n->dead_lock);
    int k = n->ndead;
    for (int i = 0; i < k && i < cap; i++)
        out[i] = n->dead[i];
    pthread_mutex_unlock(&n->dead_lock);
    return k;
}

/* The dead list now, malloc'd into *out (NULL when empty); count or
 * PHX_ENOMEM. */
static int dead_snapshot(phx_node_t *n, int **out)
{
    pthread_mutex_lock(&n->dead_lock);
    int k = n->ndead;
    int *l = k ? malloc((size_t)k * sizeof *l) : NULL;
    if (l)
        memcpy(l, n->dead, (size_t)k * sizeof *l);
    pthread_mutex_unlock(&n->dead_lock);
    *out = l;
    return k && !l ? PHX_ENOMEM : k;
}

/* Acknowledged failures live in ONE state, core/agree.c's, which also
 * feeds every agreement and group. ack: acknowledge the dead known now and
 * return their number; else return how many of them are not acknowledged. */
static int dead_ack(int ack)
{
    phx_node_t *n = phx_node_current;
    int *l;
    int k = n ? dead_snapshot(n, &l) : 0;
    if (k <= 0)
        return k;
    int rc = ack ? phx_agree_ack(n, l, k) : phx_agree_count_acked(n, l, k);
    free(l);
    return rc < 0 ? rc : ack ? k : k - rc;
}

int phx_failure_ack(void) { return dead_ack(1); }
int phx_failures_unacked(void) { return dead_ack(0); }
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

/* ---- termination detector glue (comm thread) --------------------------- */

typedef struct td_self {
    struct td_self *next;
    size_t len;
    uint8_t data[];
} td_self_t;

static void td_send(void *ctx, int dst, const void *msg, size_t len)
{
    phx_node_t *n = ctx;
    phx_frame_hdr_t h = { .type = PHX_FT_TD, .src = (uint64_t)n->rank, .dst = (uint64_t)dst };
    PHX_CNT_ADD(n->td_ctrl_sent, 1);
    if (dst == n->rank) {
        /* Deferred: re-entering the state machine from its own callback
         * would break its invariants. td_flush_self delivers these. */
        td_self_t *x = malloc(sizeof *x + len);
        if (!x) {
            PHX_ERROR("td", "out of memory for a self-addressed control message");
            phx_node_exit(n, 1, 1);
            return;
        }
        x->next = NULL;
        x->len = len;
        memcpy(x->data, msg, len);
        *n->td_self_tail = x;
        n->td_self_tail = &x->next;
        return;
    }
    int rc = phx_net_send(n->net, dst, &h, NULL, 0, msg, len, 0);
    if (rc == PHX_EDEAD) {   /* its death reaches the detector through on_failure */
        PHX_DEBUG("td", "control message to rank %d not sent: %s", dst, phx_strerror(rc));
    } else if (rc) {         /* lost between live nodes: the detector's counts are wrong */
        PHX_ERROR("td", "cannot send a control message to rank %d: %s", dst, phx_strerror(rc));
        phx_node_exit(n, 1, 1);
    }
}

/* Delivers the detector's messages to itself, in order, after the call that
 * produced them has returned. */
static void td_flush_self(phx_node_t *n)
{
    while (n->td_self && !atomic_load(&n->stopping)) {
        td_self_t *x = n->td_self;
        n->td_self = x->next;
        if (!n->td_self)
            n->td_self_tail = &n->td_self;
        int rc = n->td->on_ctrl(n->td_st, n->rank, x->data, x->len);
        free(x);
        if (rc < 0) {   /* its own message: a detector bug, state now unknown */
            PHX_ERROR("td", "%s rejected its own control message: %s", n->td->name,
                      phx_strerror(rc));
            phx_node_exit(n, 1, 1);
        }
    }
}

static void td_declare(void *ctx)
{
    phx_node_t *n = ctx;
    PHX_INFO("td", "%s: global termination detected", n->td->name);
    phx_evlog("td_declare", "\"td\":\"%s\"", n->td->name);
    phx_node_exit(n, n->exit_code, 0);
}

static void td_fatal(void *ctx, int code, const char *why)
{
    phx_node_t *n = ctx;
    PHX_ERROR("td", "%s cannot decide termination: %s (%s)", n->td->name, why, phx_strerror(code));
    phx_evlog("td_fatal", "\"td\":\"%s\"", n->td->name);
    phx_node_exit(n, 1, 1);
}

static void send_primary(phx_node_t *n, phx_msg_t *m, const uint8_t *pb);
static void maybe_start_job(phx_node_t *n);

static void td_release(void *ctx, uint64_t token, const uint8_t *pb)
{
    phx_node_t *n = ctx;
    uint64_t *v = phx_map_get(&n->td_held, token);
    if (!v) {   /* a detector bug: a message it never held, or twice */
        PHX_ERROR("td", "%s released an unknown message (token %llx)", n->td->name,
                  (unsigned long long)token);
        phx_node_exit(n, 1, 1);
        return;
    }
    phx_msg_t *m = (phx_msg_t *)(uintptr_t)*v;
    phx_map_del(&n->td_held, token);
    send_primary(n, m, pb);
}

/* Reports remote messages the workers finished, then idleness. */
/* Reports every remote message the workers finished since the last call;
 * returns whether there was any. */
static int td_harvest(phx_node_t *n)
{
    int ended = 0;
    for (int s = 0; s < n->size; s++) {
        uint64_t k = atomic_exchange_explicit(&n->processed[s], 0, memory_order_acquire);
        ended |= k != 0;
        while (k--)
            n->td->on_processed(n->td_st, s);
    }
    return ended;
}

static void td_poll(phx_node_t *n)
{
    if (!n->td || atomic_load(&n->stopping))
        return;
    td_flush_self(n);
    int ended = td_harvest(n);
    /* Messages gathered in this read but not yet handed over are work too. */
    if (n->td_busy && n->batch_pending == 0 && atomic_load(&n->work) == 0) {
        /* Zero work is stable here (only this thread raises it), but a
         * worker may have counted a message between the harvest and the
         * load: harvest once more so on_processed precedes on_idle. */
        td_harvest(n);
        n->td_busy = 0;
        n->td_held_new = 0;
        n->td->on_idle(n->td_st);
    } else if ((ended || n->td_held_new) && n->td->on_task_done) {
        /* Work ended but the node is still busy: a detector that batches a
         * task's sends (CDA) releases them here. */
        n->td_held_new = 0;
        n->td->on_task_done(n->td_st);
    }
    td_flush_self(n);
}

/* ---- outgoing ---------------------------------------------------------- */

static void msg_release(void *m) { phx_msg_free(m); }

/* Sends m and frees it: a large payload is written from m itself, which
 * the transport frees once the peer acknowledged it. */
static void send_primary(phx_node_t *n, phx_msg_t *m, const uint8_t *pb)
{
    size_t pbsz = n->td ? n->td->pb_size : 0;
    uint64_t charge = (uint64_t)m->hdr.len + PHX_FRAME_HDR;
    int peer = m->peer;
    phx_recovery_on_send(n, m);
    int rc = phx_net_send_ref(n->net, peer, &m->hdr, pb, pbsz, m->data, m->hdr.len, charge, msg_release, m);
    if (rc) {
        PHX_WARN("node", "message to rank %d dropped: %s", peer, phx_strerror(rc));
        atomic_fetch_sub(&n->peer_out[peer], (int64_t)charge);
    }
}

static void drain_outbox(phx_node_t *n)
{
    struct cds_wfcq_head lh;
    struct cds_wfcq_tail lt;
    cds_wfcq_init(&lh, &lt);
    if (cds_wfcq_empty(&n->oh, &n->ot))
        return;
    __cds_wfcq_splice_blocking(&lh, &lt, &n->oh, &n->ot);
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(&lh, &lt))) {
        phx_msg_t *m = caa_container_of(qn, phx_msg_t, qn);
        PHX_HANDOFF_ACQUIRE(m);
        int held = 0;
        if (m->kind == PHX_MK_CALL) {
            atomic_fetch_sub(&n->work, 1);
            m->call(n, m);
            continue;
        }
        if (m->kind == PHX_MK_EXIT) {
            phx_node_exit(n, (int)m->hdr.tag, 1);
        } else if (atomic_load(&n->stopping)) {
            /* job over: drop */
        } else {
            m->hdr.type = m->kind == PHX_MK_SPAWN ? PHX_FT_SPAWN : PHX_FT_APP;
            uint8_t pb[PHX_TD_PB_MAX] = {0};
            int rc = 0;
            if (n->td) {
                uint64_t token = (uint64_t)(uintptr_t)m;
                uint64_t *slot = phx_map_put(&n->td_held, token);
                if (slot) {
                    *slot = token;
                    rc = n->td->on_send(n->td_st, m->peer, token, pb);
                } else {
                    rc = PHX_ENOMEM;
                }
                if (rc == PHX_TD_DELAY) {
                    /* The detector owns it now (a send fence, a credit
                     * batch) and releases it through td_release; it no
                     * longer counts as local work. */
                    held = 1;
                    n->td_held_new = 1;
                    atomic_fetch_sub(&n->work, 1);
                } else if (slot) {
                    phx_map_del(&n->td_held, token);
                }
                if (rc < 0) {
                    /* Sending it anyway would carry no piggyback (CDA: no
                     * credit) or escape the detector's count: termination
                     * could be declared early. */
                    PHX_ERROR("td", "%s cannot account a message to rank %d: %s; ending the job",
                              n->td->name, m->peer, phx_strerror(rc));
                    phx_node_exit(n, 1, 1);
                }
            }
            if (!held && rc >= 0) {
                send_primary(n, m, pb);
                m = NULL;
            }
        }
        if (!held) {
            phx_msg_free(m);
            atomic_fetch_sub(&n->work, 1);
        }
    }
    if (n->td)
        td_flush_self(n);
    phx_pool_flush();
}

void phx_node_drain_outbox(phx_node_t *n) { drain_outbox(n); }

/* ---- incoming ---------------------------------------------------------- */

/* An application frame from peer. m: NULL, or the message a zero-copy
 * receive filled (all but the first PHX_NET_ZC_HEAD payload bytes, which
 * are at payload). */
static void deliver_app(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload, phx_msg_t *m)
{
    size_t pbsz = n->td ? n->td->pb_size : 0;
    if (phx_recovery_on_deliver(n, peer, h)) {
        phx_msg_free(m);
        return;   /* stale: sent before a rollback */
    }
    if (h->len < pbsz || phx_node_host_of(n, h->dst) != n->rank ||
        (h->type == PHX_FT_SPAWN && h->tag >= (uint32_t)phx_ntypes)) {
        phx_msg_free(m);
        phx_net_reject(n->net, peer, "malformed application frame");
        return;
    }
    size_t len = h->len - pbsz;
    if (m) {
        memcpy(m->data, payload + pbsz, PHX_NET_ZC_HEAD - pbsz);
    } else {
        if (!(m = phx_msg_alloc(len))) {
            PHX_ERROR("node", "out of memory for an inbound message from rank %d", peer);
            phx_node_exit(n, 1, 1);
            return;
        }
        if (len)
            memcpy(m->data, payload + pbsz, len);
    }
    m->hdr = *h;
    m->hdr.len = (uint32_t)len;
    m->kind = h->type == PHX_FT_SPAWN ? PHX_MK_SPAWN : PHX_MK_APP;
    m->type_id = (uint16_t)h->tag;
    m->peer = peer;
    PHX_CNT_ADD(n->msgs_recv, 1);
    PHX_CNT_ADD(n->bytes_recv, len);
    if (n->td) {
        n->td_busy = 1;
        n->td->on_recv(n->td_st, peer, payload);
    }
    phx_node_batch_add(n, m);
}

/* Zero-copy receive (phx_net_cb_t.on_claim): a large application message
 * lands in its message buffer; recovery frames go to the mode. */
static uint8_t *on_claim(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok)
{
    phx_node_t *n = ctx;
    size_t pbsz = n->td ? n->td->pb_size : 0;
    if (h->type == PHX_FT_CTRL)
        return phx_recovery_net_claim(ctx, peer, h, head, tok);
    if (atomic_load(&n->stopping) || h->len < PHX_NET_ZC_HEAD || pbsz > PHX_NET_ZC_HEAD)
        return NULL;
    phx_msg_t *m = phx_msg_alloc(h->len - pbsz);
    *tok = m;
    return m ? m->data + (PHX_NET_ZC_HEAD - pbsz) : NULL;
}

static void on_claimed(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok)
{
    phx_node_t *n = ctx;
    if (h->type == PHX_FT_CTRL)
        phx_recovery_net_claimed(ctx, peer, h, head, tok, ok);
    else if (!ok || atomic_load(&n->stopping))
        phx_msg_free(tok);
    else
        deliver_app(n, peer, h, head, tok);
}

static void on_frame(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    phx_node_t *n = ctx;
    if (atomic_load(&n->stopping))
        return;
    switch (h->type) {
    case PHX_FT_APP:
    case PHX_FT_SPAWN:
        deliver_app(n, peer, h, payload, NULL);
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
        if (n->td) {
            if (n->td->on_ctrl(n->td_st, peer, payload, h->len) < 0)
                phx_net_reject(n->net, peer, "malformed termination-detection message");
            td_poll(n);   /* also flushes self-sends */
            return;
        }
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
    if (n->td)
        td_flush_self(n);
}

static void on_drain(void *ctx, int peer, uint64_t charge)
{
    phx_node_t *n = ctx;
    atomic_fetch_sub(&n->peer_out[peer], (int64_t)charge);
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
    PHX_INFO("node", "all %d nodes ready: starting the job (%d workers here)", n->size, n->nworkers);
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

/* ---- failures ---------------------------------------------------------- */

void phx_node_notify_dead(phx_node_t *n, int rank, uint32_t inc, uint64_t when_ns)
{
    if (atomic_load(&n->stopping))
        return;
    /* Order matters: the connection goes first, so nothing from the dead
     * incarnation is delivered after its notice (fail-flush for the
     * detectors below). */
    phx_net_close_inc(n->net, rank, inc, "declared dead");
    pthread_mutex_lock(&n->dead_lock);
    if (n->ndead < n->size)
        n->dead[n->ndead++] = rank;
    pthread_mutex_unlock(&n->dead_lock);
    if (n->td && n->td->on_failure) {
        n->td->on_failure(n->td_st, rank);
        td_flush_self(n);
    }
    phx_agree_on_failure(n, rank);
    /* A recovery mode that takes the loss over makes the job's result whole
     * again (or ends it itself with its own code): exit 0 stays honest. */
    int rc = phx_recovery_on_failure(n, rank);
    if (rc < 0) {
        PHX_ERROR("node", "recovery cannot handle the loss of rank %d: %s", rank, phx_strerror(rc));
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    } else if (rc > 0) {
        atomic_store(&n->failures_covered, 1);
    }
    for (int i = 0; i < phx_nfail_cbs; i++)
        phx_fail_cbs[i].fn(phx_fail_cbs[i].arg, rank, inc, when_ns);
    td_poll(n);
}

/* ---- loop -------------------------------------------------------------- */

static void resume_reads(phx_node_t *n)
{
    if (atomic_load(&n->reads_paused) && atomic_load(&n->inbound) <= n->cfg.recv_buffer / 2 &&
        !atomic_load(&n->stopping)) {
        atomic_store(&n->reads_paused, 0);
        phx_net_pause_reads(n->net, 0);
    }
}

static void on_async(uv_async_t *a)
{
    phx_node_t *n = a->data;
    n->activity++;
    drain_outbox(n);
    td_poll(n);
    resume_reads(n);
}

/* ---- ending for sure ---------------------------------------------------- */

static void *watchdog(void *arg)
{
    phx_node_t *n = arg;
    uint64_t ms = (uint64_t)n->cfg.hb_timeout_ms + PHX_STOP_SLACK_MS;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
    fprintf(stderr, "phalanx: rank %d: still stopping after %llu ms (a task handler that does not "
                    "return?); exiting with %d now\n", n->rank, (unsigned long long)ms, n->exit_code);
    _exit(n->exit_code);
}

/* Ends the job here for a reason outside it (a signal, the launcher gone):
 * the orderly stop, bounded by a watchdog, since a handler stuck in user
 * code would otherwise keep the process alive for as long as it runs. */
static void stop_bounded(phx_node_t *n, int code)
{
    phx_node_exit(n, code, 0);
    pthread_t th;
    pthread_attr_t at;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);   /* signals stay with this thread */
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, watchdog, n))
        PHX_WARN("node", "cannot start the shutdown watchdog; stopping without a bound");
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_signal(uv_signal_t *s, int sig)
{
    phx_node_t *n = s->data;
    if (atomic_load(&n->stopping)) {
        /* Already on the way out (the signal handles close as it goes):
         * a signal now means do not wait any longer. */
        fprintf(stderr, "phalanx: rank %d: signal %d while stopping; exiting now\n", n->rank, sig);
        _exit(128 + sig);
    }
    PHX_INFO("node", "signal %d: stopping", sig);
    stop_bounded(n, 128 + sig);
}

static void lifeline_alloc(uv_handle_t *h, size_t size, uv_buf_t *b)
{
    static char sink[64];   /* nothing is expected on it; whatever comes is dropped */
    (void)h; (void)size;
    *b = uv_buf_init(sink, sizeof sink);
}

static void lifeline_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    phx_node_t *n = st->data;
    (void)b;
    if (nread >= 0 || atomic_load(&n->stopping))
        return;
    PHX_ERROR("node", "launcher gone (%s on stdin, the launcher's lifeline): stopping",
              nread == UV_EOF ? "end of file" : uv_strerror((int)nread));
    phx_evlog("launcher_lost", NULL);
    stop_bounded(n, 128 + SIGHUP);
}

/* With PHX_LIFELINE set (phx run does), stdin is a pipe from the launcher
 * (locally) or the ssh session (remotely) that nobody writes to: its end of
 * file means the launcher or the session is gone, and so must this node be. */
static int lifeline_open(phx_node_t *n)
{
    const char *v = getenv("PHX_LIFELINE");
    struct stat st;
    if (!v || strcmp(v, "1") != 0)
        return 0;
    if (fstat(0, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
        PHX_WARN("node", "PHX_LIFELINE is set but stdin is not a pipe: not watching for the launcher");
        return 0;
    }
    int rc = uv_pipe_init(&n->loop, &n->lifeline, 0);
    if (rc)
        goto fail;
    n->lifeline.data = n;
    n->lifeline_open = 1;
    if ((rc = uv_pipe_open(&n->lifeline, 0)) || (rc = uv_read_start((uv_stream_t *)&n->lifeline,
                                                                      lifeline_alloc, lifeline_read)))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "phalanx: rank %d: cannot watch stdin for the launcher's end: %s\n", n->rank,
            uv_strerror(rc));
    return PHX_EIO;
}

/* Exit code 0 is a claim that the job's result is complete. Work on a node
 * that died is gone unless something covered it (failures_covered). */
static int honest_code(phx_node_t *n, int code)
{
    if (code != 0 || atomic_load(&n->failures_covered))
        return code;
    char list[256];
    size_t off = 0;
    int k, first_live = -1;
    uint8_t *dead = calloc((size_t)n->size, 1);   /* NULL: every survivor says it */
    pthread_mutex_lock(&n->dead_lock);
    k = n->ndead;
    for (int i = 0; i < k; i++) {
        if (off < sizeof list - 16)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? "," : "", n->dead[i]);
        if (dead)
            dead[n->dead[i]] = 1;
    }
    pthread_mutex_unlock(&n->dead_lock);
    for (int r = 0; dead && r < n->size && first_live < 0; r++)
        if (!dead[r])
            first_live = r;
    free(dead);
    if (k == 0)
        return 0;
    /* Said once per job: by the lowest surviving rank (all agree on D). */
    if (first_live == n->rank || first_live < 0)
        PHX_ERROR("node", "rank(s) %s died and no recovery mode covers their work: it is lost; "
                          "exiting %d (work lost) instead of 0", list, PHX_EXIT_WORK_LOST);
    else
        PHX_INFO("node", "rank(s) %s died uncovered: exiting %d", list, PHX_EXIT_WORK_LOST);
    return PHX_EXIT_WORK_LOST;
}

static void closed_one(uv_handle_t *h) { (void)h; }

static void net_done(void *ctx)
{
    phx_node_t *n = ctx;
    n->net_stopped = 1;
}

void phx_node_exit(phx_node_t *n, int code, int propagate)
{
    if (atomic_exchange(&n->stopping, 1))
        return;
    code = honest_code(n, code);
    n->exit_code = code;
    phx_evlog("exit", "\"code\":%d", code);
    if (propagate && n->net) {
        for (int r = 0; r < n->size; r++) {
            if (r == n->rank || !phx_net_peer_up(n->net, r))
                continue;
            phx_frame_hdr_t h = { .type = PHX_FT_CTRL, .tag = PHX_CTRL_EXIT, .src = (uint64_t)n->rank,
                                  .dst = (uint64_t)r, .ssn = (uint64_t)(uint32_t)code };
            phx_net_send(n->net, r, &h, NULL, 0, NULL, 0, 0);
        }
    }
    for (int i = 0; i < n->nworkers; i++) {
        phx_msg_t *m = phx_msg_alloc(0);
        if (!m)
            abort();   /* cannot stop workers cleanly without it */
        m->kind = PHX_MK_STOP;
        m->hdr.dst = 0;
        phx_worker_t *w = &n->workers[i];
        PHX_HANDOFF_RELEASE(m);
        cds_wfcq_enqueue(&w->ih, &w->it, &m->qn);
        phx_worker_wake(w);
    }
    pthread_mutex_lock(&n->bp_lock);
    pthread_cond_broadcast(&n->bp_cond);   /* blocked senders see stopping */
    pthread_mutex_unlock(&n->bp_lock);
    phx_ft_stop(n);
    phx_agree_stop(n);
    phx_recovery_stop(n);
    phx_metrics_stop(n);
    if (n->net)
        phx_net_stop(n->net, net_done, n);
    uv_close((uv_handle_t *)&n->async, closed_one);
    uv_close((uv_handle_t *)&n->sigterm, closed_one);
    uv_close((uv_handle_t *)&n->sigint, closed_one);
    if (n->lifeline_open) {
        n->lifeline_open = 0;
        uv_close((uv_handle_t *)&n->lifeline, closed_one);
    }
}

static void free_worker_state(phx_worker_t *w)
{
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(&w->ih, &w->it)))
        phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
    for (size_t i = 0; i < w->tasks.cap; i++) {
        if (!w->tasks.keys[i])
            continue;
        phx_task_free((phx_task_t *)(uintptr_t)w->tasks.vals[i]);
    }
    for (size_t i = 0; i < w->pending.cap; i++) {
        phx_msg_t *m = w->pending.keys[i] ? (phx_msg_t *)(uintptr_t)w->pending.vals[i] : NULL;
        while (m) {
            phx_msg_t *x = m;
            m = (phx_msg_t *)m->qn.next;
            phx_msg_free(x);
        }
    }
    phx_map_free(&w->tasks);
    phx_map_free(&w->pending);
    phx_map_free(&w->gone);
}

static void print_stats(phx_node_t *n)
{
    phx_stats_t s;
    phx_get_stats(NULL, &s);
    char td[512] = "";
    size_t off = 0;
    if (n->td) {
        phx_td_stat_t st[PHX_TD_MAX_STATS];
        int k = n->td->stats(n->td_st, st, PHX_TD_MAX_STATS);
        for (int i = 0; i < k && off < sizeof td - 64; i++)
            off += (size_t)snprintf(td + off, sizeof td - off, "%s\"%s\":%llu", i ? "," : "",
                                    st[i].name, (unsigned long long)st[i].count);
    }
    fprintf(stderr,
            "{\"stats\":{\"rank\":%d,\"msgs_sent\":%llu,\"msgs_recv\":%llu,\"bytes_sent\":%llu,"
            "\"bytes_recv\":%llu,\"tasks\":%llu,\"deliveries\":%llu,\"reordered\":%llu,"
            "\"td\":\"%s\",\"td_ctrl\":{%s}}}\n",
            n->rank, (unsigned long long)s.msgs_sent, (unsigned long long)s.msgs_recv,
            (unsigned long long)s.bytes_sent, (unsigned long long)s.bytes_recv,
            (unsigned long long)s.tasks_created, (unsigned long long)s.deliveries,
            (unsigned long long)s.reordered, n->td ? n->td->name : "none", td);
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
    if (phx_recovery_configure(n))
        return 2;
    if (strcmp(n->cfg.td, "none") != 0) {
        n->td = phx_td_find(n->cfg.td);
        if (!n->td) {
            fprintf(stderr, "phalanx: bad value '%s' for option td: expected none, 4c, edod, hcda, cda, "
                            "indep, rellazy or releager\n", n->cfg.td);
            return 2;
        }
        phx_td_env_t env = { .rank = n->rank, .size = n->size, .ctx = n, .send = td_send,
                             .declare = td_declare, .fatal = td_fatal, .release = td_release };
        if ((rc = n->td->create(&env, &n->td_st))) {
            fprintf(stderr, "phalanx: cannot create detector %s: %s\n", n->cfg.td, phx_strerror(rc));
            return 2;
        }
    }

    n->pool = phx_pool_create();
    n->processed = calloc((size_t)n->size, sizeof *n->processed);
    n->peer_out = calloc((size_t)n->size, sizeof *n->peer_out);
    n->nworkers = n->cfg.workers;
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
    pthread_mutex_init(&n->dead_lock, NULL);
    n->dead = calloc((size_t)n->size, sizeof *n->dead);
    if (!n->dead)
        return 1;
    pthread_cond_init(&n->bp_cond, NULL);
    cds_wfcq_init(&n->oh, &n->ot);
    phx_map_init(&n->td_held);
    n->td_self_tail = &n->td_self;

    uv_loop_init(&n->loop);
    uv_async_init(&n->loop, &n->async, on_async);
    n->async.data = n;
    uv_signal_init(&n->loop, &n->sigterm);
    uv_signal_init(&n->loop, &n->sigint);
    n->sigterm.data = n->sigint.data = n;
    uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    uv_signal_start(&n->sigint, on_signal, SIGINT);
    if (phx_nfail_cbs)
        atomic_store(&n->failures_covered, 1);   /* the program handles failures itself */

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
        if (pthread_create(&w->th, NULL, phx_worker_main, w)) {
            fprintf(stderr, "phalanx: cannot start worker thread %d\n", i);
            return 1;
        }
    }

    signal(SIGPIPE, SIG_IGN);   /* a peer that exits first must not kill us */

    phx_net_cb_t cb = { .ctx = n, .on_frame = on_frame, .on_peer_down = on_peer_down,
                        .on_all_up = on_all_up, .on_drain = on_drain, .on_read_end = on_read_end, .on_fatal = on_fatal,
                        .on_claim = on_claim, .on_claimed = on_claimed,
                        .on_link_failed = on_link_failed, .on_peer_up = on_peer_up };
    const char *step = "cannot watch for the launcher";
    n->starting = 1;
    rc = lifeline_open(n);
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
    if (!rc && n->td) {
        n->td->start(n->td_st, n->rank == 0);
        n->td_busy = n->rank == 0;
    }
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
            drain_outbox(n);
            td_poll(n);
            resume_reads(n);
            sched_yield();   /* see the worker's busy-poll loop */
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

    for (int i = 0; i < n->nworkers; i++)
        pthread_join(n->workers[i].th, NULL);
    if (getenv("PHX_STATS"))
        print_stats(n);
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(&n->oh, &n->ot)))
        phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
    for (size_t i = 0; i < n->td_held.cap; i++)
        if (n->td_held.keys[i])
            phx_msg_free((phx_msg_t *)(uintptr_t)n->td_held.vals[i]);
    phx_map_free(&n->td_held);
    while (n->td_self) {
        td_self_t *x = n->td_self;
        n->td_self = x->next;
        free(x);
    }
    for (int i = 0; i < n->nworkers; i++) {
        while ((qn = __cds_wfcq_dequeue_blocking(&n->batch_h[i], &n->batch_t[i])))
            phx_msg_free(caa_container_of(qn, phx_msg_t, qn));
        free_worker_state(&n->workers[i]);
    }
    /* Frames kept for resend may still reference workers' messages
     * (zero-copy sends): released before their pools go. */
    phx_net_free(n->net);
    n->net = NULL;
    for (int i = 0; i < n->nworkers; i++)
        phx_pool_destroy(n->workers[i].pool);
    phx_metrics_free(n);
    phx_ft_free(n);
    phx_agree_free(n);
    phx_recovery_free(n);
    if (n->td)
        n->td->destroy(n->td_st);
    uv_loop_close(&n->loop);
    phx_pool_destroy(n->pool);
    for (int i = 0; i < n->nworkers; i++) {
        free(n->workers[i].processed);
        free(n->workers[i].touched);
    }
    free(n->workers);
    free(n->batch_h);
    free(n->batch_t);
    free(n->batch_n);
    free(n->batch_touched);
    free(n->processed);
    free(n->peer_out);
    free(n->dead);
    phx_config_free(&n->cfg);
    phx_evlog_close();
    phx_node_current = NULL;
    return n->exit_code;
}

/* ---- public API used from handlers -------------------------------------- */

static void backpressure(phx_node_t *n, int peer, int64_t charge)
{
    int64_t q = atomic_fetch_add(&n->peer_out[peer], charge);
    if (q <= n->cfg.send_buffer)
        return;
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
    backpressure(n, home, (int64_t)m->hdr.len + PHX_FRAME_HDR);
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
    phx_tid_t id = make_tid(node, n->rank, seq);
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
