/* Message-logging recovery modes: mlog-causal, mlog-pessimistic,
 * mlog-fast and mlog-team, layered on recovery=cr (core/ckpt.c, core/cr.h), whose
 * coordinated checkpoints bound the logs and whose recovery round
 * (agreement, relocation, buddy copies) restores the dead node's tasks.
 * The protocol is ft/mlog's state machine; this file feeds it.
 *
 * Forward path:
 *   - on_send (comm thread, before a frame to another node is written): the
 *     message is kept in the sender log; under mlog-causal the dets this
 *     link has not carried yet go first, as an ML_DETS control frame on the
 *     same FIFO link (the trailer of Alg. 1, sent just ahead of its frame:
 *     nothing can overtake it, so causality is the same);
 *   - the delivery hook (worker, after the RSN is assigned, before the
 *     handler) puts <src, ssn, dst, rsn> into the worker's lock-free queue;
 *     under mlog-pessimistic it asks for a flush to the next live rank
 *     (ML_DETS, answered by ML_ACK), and the send hook (worker, before a
 *     message leaves the node) waits until every det made so far on this
 *     node is stored there, so no message leaves before its causes are
 *     safe. The wait is at the send, not at the delivery: a task that
 *     takes k messages and then sends waits one round trip, not k, and
 *     often none (the flush asked at delivery came back meanwhile);
 *   - ML_DETS at a receiver: stored (detLog), acknowledged with ML_ACK;
 *   - cr's commit of an epoch empties the logs (Alg. 4).
 * Recovery ("partial recovery" below): the first failure of a checkpoint
 * period restores only the dead node's tasks, survivors hand back dets and
 * logged messages and keep running; so do two failures where
 * ft/mlog/multi.h's rule says their dets survived (in one round: mlog-fast,
 * mlog-pessimistic when neither stored the other's; the second after the
 * first's round ended everywhere: mlog-pessimistic by the same pairs); any
 * other failure in the period falls back to cr's global rollback. A period
 * ends at the first commit after its
 * recovery ended everywhere (period_reset): the logs and dets were dropped
 * and the moved tasks are stored twice again.
 *
 * Threads: everything on the comm thread except hook(), ml_admit() and the
 * pessimistic wait (workers), which touch only their own queue, atomics,
 * the replay records under their mutex and (the wait) reads of every
 * queue's indices. */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/node.h"
#include "core/cr.h"
#include "core/recovery.h"
#include "ft/mlog/msg.h"
#include "ft/mlog/multi.h"
#include "ft/mlog/scml.h"
#include "ft/mlog/team.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

/* ML_ACKDETS: u16 ack length, the ack, then a det trailer (causal: the
 * batched ack and the dets for one app frame in one control frame). */
enum { ML_DETS = PHX_CTRL_CR_LAST + 1, ML_ACK, ML_RDETS, ML_RDONE, ML_ACKDETS, ML_RFIN };

#define QCAP (1u << 16)
/* Causal: dets owed an ack before one goes without a frame to carry it
 * (well below QCAP, so an origin's queue never fills for want of acks). */
#define ACK_BATCH (QCAP / 16)
#define ML_SPAWN_BIT (1u << 31)   /* in a logged tag: the entry is a spawn */

typedef struct mlog {
    phx_node_t *n;
    void *cr;                   /* cr's state: checkpoints and the fallback */
    phx_ml_t *ml;
    int pess;
    int fast;                   /* mlog-fast: no determinants at all */
    int team;                   /* mlog-team: team size t (0: another mode) */
    uint8_t *dead;
    uint8_t *pdead;             /* ranks dead in this checkpoint period */
    /* n->loc at the period's first failure (comm thread writes it before
     * phase is set; workers read it only while phase is set): a task was
     * lost iff its host then is in rb. Ranks of earlier periods host nothing
     * (relocated), so rb needs no history. */
    int *hloc;
    int hloc_n;
    /* Ranks whose tasks the partial recovery restores: the dead node, and
     * under mlog-team its live team-mates (rolled back from their own copy). */
    uint8_t *rb;
    /* mlog-team (t > 1): each worker's record of its own dets since the
     * commit (rule 1), kept until the first failure's round; and the
     * sends a rolled-back team-mate logged already (rule 2). */
    phx_team_own_t *own;
    _Atomic int own_on;
    phx_team_relog_t relog;
    /* mlog-team: per worker, one past the highest spawn counter value its
     * tasks drew (written by that worker, read while workers are paused).
     * A team-mate's reload brings its counter back to the checkpoint's, but
     * ids drawn since live on outside nodes (and are recorded in spawn
     * dets the replay reuses): the counter must not hand them out again. */
    uint32_t *seq_hw;
    uint64_t team_unlogged, relogs_skipped;
    uint8_t *buf;               /* trailer scratch (comm thread) */
    size_t cap;
    _Atomic int flush_asked;    /* pessimistic: a flush request is queued */
    /* Pessimistic send waits: acks counts ML_ACKs handled (a futex word,
     * bumped by the comm thread), waiters the workers sleeping on it;
     * snap holds one gate snapshot per worker (nworkers x nworkers). */
    _Atomic uint32_t acks;
    _Atomic int waiters;
    uint64_t *snap;
    _Atomic uint64_t gate_waits;   /* sends that had to wait for an ack */
    uint64_t ctrl_frames;
    uint64_t trailers;          /* det frames sent ahead of an app frame */
    /* Partial recovery (the first failure of a checkpoint period). */
    int nfail, full_rb;         /* failures this period; a global rollback happened in it */
    int part;                   /* this node took part in a partial round of the period */
    int pround;                 /* partial rounds of the period begun here (1, or 2: sequential) */
    phx_map_t rep;              /* task id of the dead node -> rep_t *, under rep_lock */
    pthread_rwlock_t rep_lock;  /* workers read, the comm thread adds records */
    _Atomic int nrep;           /* records in rep */
    _Atomic int phase;          /* a partial recovery began: lost tasks are checked */
    _Atomic int left;           /* records still replaying after the release */
    _Atomic int rel;            /* ... and every live rank handed back */
    /* Per rank, the last partial round of the period whose hand-back
     * (RDONE) / end of replays (RFIN) arrived: a sequential round's must
     * not count an earlier round's frame, which may still be in flight. */
    uint8_t *done;
    uint8_t *fin;
    int released;
    int ck_held;                /* cr's checkpoints held until every live rank sent RFIN */
    uint64_t resent, dets_back, installed;
    _Atomic uint64_t spawns_reused;   /* replayed spawns given their recorded id */
    _Atomic uint64_t spawns_waited;   /* ... that waited for the release first */
    uint64_t log_bytes;         /* payload bytes in the sender log now */
    /* PHX_MLOG_TEST_HOLD_RELEASE=FILE (tests only): the release waits until
     * FILE exists, polled by hold_timer (comm thread), so a test acts while
     * a replay is under way by construction. */
    const char *hold_file;
    uv_timer_t hold_timer;
    int hold_timer_on, hold_logged;
} mlog_t;

/* The /metrics gauges of the logs' current sizes (comm thread). */
static void log_gauges(mlog_t *g)
{
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    phx_metrics_set(PHX_M_LOG_BYTES, g->log_bytes);
    phx_metrics_set(PHX_M_LOG_ENTRIES, s.log_len + s.detlog_len);
    phx_metrics_set(PHX_M_DETS, s.dets);
    phx_metrics_set(PHX_M_LOGGED_BYTES, s.logged_bytes);
    phx_metrics_set(PHX_M_LOGGED_MSGS, s.logged);
}

/* Replay state of a task restored here (a worker reads it, the comm thread
 * installs dets and releases: the mutex orders them). */
typedef struct rep {
    pthread_mutex_t mu;
    phx_ml_task_t mt;
    int finished;               /* counted out of `left` */
} rep_t;

static const phx_recovery_ops_t *CR = &phx_recovery_cr;

static int is_pess(const phx_node_t *n)
{
    return n->rec == &phx_recovery_mlog_pessimistic;
}

static int is_fast(const phx_node_t *n)
{
    return n->rec == &phx_recovery_mlog_fast;
}

static int is_team(const phx_node_t *n)
{
    return n->rec == &phx_recovery_mlog_team;
}

extern phx_type_t phx_types[PHX_MAX_TYPES];
extern int phx_ntypes;

static int ml_configure(phx_node_t *n)
{
    if (is_team(n) && n->cfg.mlog_team_size < 1) {
        fprintf(stderr, "phalanx: bad value '%d' for option mlog-team-size: expected a team size of 1 or more "
                        "nodes (1 is mlog-causal)\n", n->cfg.mlog_team_size);
        return PHX_EINVAL;
    }
    /* Without determinants a replay may deliver in another order: only a
     * receive-deterministic task gets the same state from it. Refused
     * here, before anything runs, rather than a wrong answer later. */
    for (int i = 0; is_fast(n) && i < phx_ntypes; i++)
        if (!(phx_types[i].flags & PHX_TYPE_RECV_DET)) {
            fprintf(stderr, "phalanx: recovery=mlog-fast needs receive-deterministic task types; type '%s' "
                            "is not declared so (PHX_TYPE_RECV_DET): use mlog-causal\n",
                    phx_types[i].name ? phx_types[i].name : "?");
            return PHX_EINVAL;
        }
    return CR->configure(n);
}

static void ctl2(mlog_t *g, int peer, int tag, const void *pre, size_t plen, const void *buf, size_t len)
{
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, (uint32_t)tag, (uint64_t)g->n->rank, (uint64_t)peer,
                                      (uint32_t)(plen + len));
    int rc = phx_net_send(g->n->net, peer, &h, pre, plen, buf, len, 0);
    if (rc)
        PHX_DEBUG("mlog", "control %d to rank %d not sent: %s", tag, peer, phx_strerror(rc));
    else
        g->ctrl_frames++;
}

static void ctl(mlog_t *g, int peer, int tag, const void *buf, size_t len)
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

/* Any thread: queues a flush unless one is queued already (a flush
 * carries every det published before it, so one at a time is enough). */
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
static void record(mlog_t *g, int worker, const phx_det_t *d)
{
    phx_detq_t *q = phx_ml_queue(g->ml, worker);
    int64_t k = phx_detq_add(q, d);
    if (atomic_load_explicit(&g->own_on, memory_order_relaxed))
        phx_team_own_add(&g->own[worker], d);   /* this worker's alone; read while paused */
    /* Pessimistic: start storing it now, so that by the handler's first
     * send (send_gate) the ack is often back already. */
    if (k >= 0 && g->pess)
        ask_flush(g);
}

/* Comm thread: an ack moved the queues; wake the workers in send_gate. */
static void acked(mlog_t *g)
{
    atomic_fetch_add_explicit(&g->acks, 1, memory_order_release);
    if (atomic_load(&g->waiters))
        syscall(SYS_futex, &g->acks, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Worker, the send hook (mlog-pessimistic): a message is about to leave
 * the node; it waits until every det published so far, on any worker's
 * queue, is stored on the next live rank. Every queue, not only this
 * worker's: a local message may have carried another worker's delivery
 * into this handler's state. */
static void send_gate(void *ctx, int worker)
{
    mlog_t *g = ctx;
    uint64_t *snap = g->snap + (size_t)worker * (size_t)g->n->nworkers;
    phx_ml_gate_snap(g->ml, snap);
    if (phx_ml_gate_open(g->ml, snap))
        return;
    atomic_fetch_add_explicit(&g->gate_waits, 1, memory_order_relaxed);
    ask_flush(g);
    for (unsigned sleeps = 0; !atomic_load(&g->n->stopping);) {
        uint32_t seen = atomic_load_explicit(&g->acks, memory_order_acquire);
        if (phx_ml_gate_open(g->ml, snap))
            return;
        /* The futex returns at once if an ack came since `seen`. The
         * timeout only bounds a wakeup lost to the waiters race; a flush
         * lost with a dead rank is sent again by the failure notice. */
        atomic_fetch_add(&g->waiters, 1);
        struct timespec ts = { 0, 1000000 };
        syscall(SYS_futex, &g->acks, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
        atomic_fetch_sub(&g->waiters, 1);
        if (++sleeps % 100 == 0) {   /* 100 ms without the ack: ask again */
            atomic_store(&g->flush_asked, 0);
            ask_flush(g);
        }
    }
}

/* Worker: the delivery hook. */
static void hook(void *ctx, int worker, phx_tid_t dst, phx_tid_t src, uint64_t ssn, uint64_t rsn, uint32_t inc)
{
    (void)inc;
    phx_det_t d = { .sender = src, .receiver = dst, .ssn = ssn, .rsn = rsn };
    record(ctx, worker, &d);
}

static int lost_home(const mlog_t *g, uint64_t tid);
static rep_t *rep_of(mlog_t *g, uint64_t tid);
static phx_tid_t replay_spawn_id(mlog_t *g, const phx_task_t *p, uint32_t k, phx_tid_t id);

/* Worker: the spawn hook. p's k-th spawn while handling delivery p->rsn
 * (0: its init) is the event <p, rsn, k> -> child id. A replaying p gets
 * the recorded id back; the det goes into the worker's queue before the
 * spawn leaves either way (a replayed one again, as replayed deliveries'
 * dets are), so the spawn frame, and any later frame of this node, carries
 * it (causal) or it is stored on the next rank first (pessimistic). */
static phx_tid_t spawn_hook(void *ctx, int worker, phx_task_t *p, phx_tid_t id)
{
    mlog_t *g = ctx;
    if (p->spawn_rsn != p->rsn) {
        p->spawn_rsn = p->rsn;
        p->spawn_k = 0;
    }
    uint32_t k = p->spawn_k++;
    if (g->seq_hw && (uint32_t)id + 1 > g->seq_hw[worker])
        g->seq_hw[worker] = (uint32_t)id + 1;   /* the fresh id's low half is the counter */
    /* Records, not phase: a record is counted finished when its last det
     * is admitted, before that delivery's handler (which may spawn) runs,
     * and a task the replay spawns again with no det to replay runs its
     * init whenever its spawn comes. Records live until the period's
     * commit (nrep 0 then, and hloc stays put while records exist). */
    if (atomic_load_explicit(&g->nrep, memory_order_acquire) && lost_home(g, p->id))
        id = replay_spawn_id(g, p, k, id);
    phx_det_t d = phx_ml_spawn_det(p->id, p->rsn, k, id);
    record(g, worker, &d);
    return id;
}

static void partial_handback(mlog_t *g);

/* Comm thread, workers paused (or gone): empties every worker's own-det
 * record. */
static void own_clear(mlog_t *g)
{
    for (int i = 0; g->own && i < g->n->nworkers; i++)
        phx_team_own_clear(&g->own[i]);
}

/* ... and stops recording until period_reset: no partial recovery of this
 * period needs them any more. */
static void own_stop(mlog_t *g)
{
    atomic_store(&g->own_on, 0);
    own_clear(g);
}

static void period_reset(mlog_t *g, uint64_t epoch);
static void partial_begin(mlog_t *g);
static void drop_replays(mlog_t *g);

static void ml_listen(void *arg, int what, uint64_t epoch)
{
    mlog_t *g = arg;
    /* Ranks cr took back in (a respawn's round, or a commit after a
     * partial one) are live again: they store dets, hand back and finish
     * replays like any other. */
    if (what == PHX_CR_COMMIT || what == PHX_CR_ROLLBACK || what == PHX_CR_JOINED)
        for (int r = 0; r < g->n->size; r++)
            g->dead[r] = (uint8_t)phx_cr_dead(g->cr, r);
    if (what == PHX_CR_JOINED) {
        /* A newcomer's trailers carry the epoch it joined at (survivors
         * committed it just before: nothing changes there). */
        phx_ml_checkpoint(g->ml, epoch);
        return;
    }
    if (what == PHX_CR_COMMIT && g->nfail)
        period_reset(g, epoch);
    if (what == PHX_CR_PARTIAL_BEGIN) {
        partial_begin(g);
        return;
    }
    if (what == PHX_CR_PARTIAL) {
        partial_handback(g);
        return;
    }
    if (what == PHX_CR_ROLLBACK) {
        if (g->nfail > 1 && !g->full_rb)
            phx_evlog("mlog_fallback", "\"failures\":%d,\"reason\":\"%s\"", g->nfail,
                      g->part ? "after a partial round" : "rule");
        if (g->part) {
            /* A partial recovery still under way is void: its records would
             * hold the restored tasks' deliveries for ever (no hand-back
             * follows), and its hold would keep every checkpoint back (cr is
             * in its round: nothing begins at the release). */
            drop_replays(g);
            if (g->ck_held) {
                g->ck_held = 0;
                phx_cr_hold(g->cr, 0);
            }
        }
        g->full_rb = 1;
        atomic_store(&g->own_on, 0);   /* no partial recovery follows a global rollback */
        phx_team_relog_clear(&g->relog);
    }
    /* Records restart at every commit or rollback. The relog filter
     * outlives commits: a replay may still re-send after the checkpoint
     * that follows its round, and those sends are old. */
    own_clear(g);
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    /* A commit makes the logged messages and the dets it holds useless
     * (Alg. 4; dets sent after their origin's commit stay); a rollback
     * undoes what they all describe. Workers are paused either way. */
    if (what == PHX_CR_COMMIT)
        phx_ml_checkpoint(g->ml, epoch);
    else
        phx_ml_rollback(g->ml, epoch);
    g->log_bytes = 0;
    log_gauges(g);
    phx_evlog(what == PHX_CR_COMMIT ? "mlog_gc" : "mlog_reset", "\"epoch\":%llu,\"log_len\":%llu,\"detlog_len\":%llu",
              (unsigned long long)epoch, (unsigned long long)s.log_len, (unsigned long long)s.detlog_len);
}


/* ---- partial recovery ----------------------------------------------------
 * The job's first failure under mlog-causal: cr restores only the dead
 * node's tasks, spread over the survivors (on_restore below makes a replay
 * record for each); at the end of that round (PHX_CR_PARTIAL, workers still
 * paused) every node hands back what it holds for them (Alg. 5): the dets
 * whose receiver is one of them (ML_RDETS to its new host), then the logged
 * messages bound to them (app frames, same link: after the dets), then
 * ML_RDONE to every live rank. A new host releases its restored tasks once
 * every live rank's RDONE arrived: until then they deliver only what the
 * installed dets name, in rsn order, and hold the rest. Survivors keep
 * running; what the restored tasks send again is dropped by SSN. */

/* Was tid on a rank this period's recovery restores (its host at the
 * period's first failure)? Either thread, see hloc. */
static int lost_home(const mlog_t *g, uint64_t tid)
{
    int h = phx_tid_home((phx_tid_t)tid);
    if (g->hloc && h >= 0 && h < g->hloc_n)
        h = g->hloc[h * PHX_LOC_SLICES + phx_loc_slice((phx_tid_t)tid)];
    return h >= 0 && h < g->n->size && g->rb[h];
}

/* cr asks, in a partial round: does live rank r roll back too? */
static int ml_rolls(void *arg, int r)
{
    mlog_t *g = arg;
    return g->team > 1 && g->nfail == 1 && !g->full_rb && r >= 0 && r < g->n->size && g->rb[r] && !g->dead[r];
}

/* Under rep_lock (either side). */
static rep_t *rep_of(mlog_t *g, uint64_t tid)
{
    uint64_t *v = phx_map_get(&g->rep, tid);
    return v ? (rep_t *)(uintptr_t)*v : NULL;
}

/* Comm thread: the record of tid, made if absent with base rsn (a task
 * restored from the checkpoint: its rsn there; one the replay spawns
 * again: 0). NULL when out of memory. */
static rep_t *rep_make(mlog_t *g, uint64_t tid, uint64_t rsn)
{
    pthread_rwlock_wrlock(&g->rep_lock);
    rep_t *r = rep_of(g, tid);
    if (!r && (r = calloc(1, sizeof *r))) {
        uint64_t *slot = phx_map_put(&g->rep, tid);
        if (!slot) {
            free(r);
            r = NULL;
        } else {
            pthread_mutex_init(&r->mu, NULL);
            phx_ml_task_restore(&r->mt, rsn);
            *slot = (uint64_t)(uintptr_t)r;
            atomic_fetch_add(&g->nrep, 1);
        }
    }
    pthread_rwlock_unlock(&g->rep_lock);
    return r;
}

static void kick(mlog_t *g, uint64_t tid);
static void call_rfin(phx_node_t *n, phx_msg_t *m);

/* cr restored task tid here (comm thread, workers paused). st is cr's. */
static void ml_on_restore(void *st, phx_tid_t tid)
{
    (void)st;
    phx_node_t *n = phx_node_current;
    mlog_t *g = n ? n->rec_st : NULL;
    if (!g || g->fast)
        return;
    phx_worker_t *w = &n->workers[phx_worker_of(n, tid)];
    uint64_t *tv = phx_map_get(&w->tasks, tid);
    if (g->full_rb || !g->part) {
        /* No replay follows a global rollback: what the checkpoint kept
         * held back may go now, but nothing would offer it again (the
         * KICK of a release is not packed). */
        if (tv && phx_held_len(&((phx_task_t *)(uintptr_t)*tv)->held))
            kick(g, tid);
        return;
    }
    if (!lost_home(g, tid))
        return;
    atomic_store(&g->phase, 1);
    if (!tv || !rep_make(g, tid, ((phx_task_t *)(uintptr_t)*tv)->rsn)) {
        PHX_ERROR("mlog", "no replay record for task %#llx: ending the job", (unsigned long long)tid);
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
}

/* Under r->mu, either side: once released, a record that stopped replaying
 * is counted out; the last one ends the phase, so the rest of the job's
 * deliveries skip the lookup and locks below (as under cr). No record can
 * be made after the release: every RDETS precedes its sender's RDONE.
 * The comm thread then tells every live rank (RFIN, hold_check). */
static void end_phase(mlog_t *g)
{
    atomic_store_explicit(&g->phase, 0, memory_order_release);
    phx_evlog("mlog_replay_done", "\"tasks\":%d", atomic_load(&g->nrep));
    phx_metrics_replay_done();
    phx_msg_t *m = phx_msg_alloc(0);
    if (!m) {   /* cr's checkpoints would stay held for ever */
        PHX_ERROR("mlog", "out of memory ending a replay: ending the job");
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    m->kind = PHX_MK_CALL;
    m->call = call_rfin;
    phx_node_enqueue_out(g->n, m);
}

static void rep_finish(mlog_t *g, rep_t *r)
{
    if (r->finished || !r->mt.released || r->mt.replaying)
        return;
    r->finished = 1;
    if (atomic_fetch_sub(&g->left, 1) == 1)
        end_phase(g);
}

/* Worker: takes rep_lock for reading and returns tid's replay record with
 * its mutex held, or NULL (none). rep_leave releases both. */
static rep_t *rep_lock(mlog_t *g, uint64_t tid)
{
    pthread_rwlock_rdlock(&g->rep_lock);
    rep_t *r = rep_of(g, tid);
    if (r)
        pthread_mutex_lock(&r->mu);
    return r;
}

/* Worker: 0 if t is no lost task of a partial recovery under way (no
 * lock taken); else 1 and *r = rep_lock(t's id). */
static int rep_enter(mlog_t *g, const phx_task_t *t, rep_t **r)
{
    if (!atomic_load_explicit(&g->phase, memory_order_acquire) || !lost_home(g, t->id))
        return 0;
    *r = rep_lock(g, t->id);
    return 1;
}

static void rep_leave(mlog_t *g, rep_t *r)
{
    if (r)
        pthread_mutex_unlock(&r->mu);
    pthread_rwlock_unlock(&g->rep_lock);
}

/* Worker: may <src, ssn> be delivered to t now? Survivors' own tasks
 * always; a dead node's task (restored, or spawned again by the replay)
 * in the order its installed dets give, and nothing else before every
 * live rank handed back (a det naming this message may still come). */
static int ml_admit(void *ctx, int worker, const phx_task_t *t, phx_tid_t src, uint64_t ssn)
{
    (void)worker;
    mlog_t *g = ctx;
    rep_t *r;
    if (!rep_enter(g, t, &r))
        return 0;
    int hold;
    if (!r)
        hold = !atomic_load(&g->rel);
    else {
        hold = phx_ml_task_check(&r->mt, t->rsn, src, ssn) == PHX_ML_HOLD;
        rep_finish(g, r);
    }
    rep_leave(g, r);
    return hold;
}

/* Worker: the one message t may take next, where its replay says. */
static int ml_admit_next(void *ctx, int worker, const phx_task_t *t, phx_tid_t *src, uint64_t *ssn)
{
    (void)worker;
    mlog_t *g = ctx;
    rep_t *r;
    if (!rep_enter(g, t, &r))
        return 0;
    int known = r && phx_ml_task_next(&r->mt, t->rsn, src, ssn);
    rep_leave(g, r);
    return known;
}

/* Worker: the id of replaying task p's k-th spawn in delivery p->rsn:
 * the recorded one, or the fresh id once every live rank handed back and
 * none recorded it (no survivor holds the det, so none heard of that
 * child: the det precedes every frame that could tell of it). Until then
 * a det may still come, so the worker waits: the release comes from the
 * comm threads' hand-backs, which need no worker, and a second failure
 * voids the replay first (drop_replays sets rel and frees the records). */
static phx_tid_t replay_spawn_id(mlog_t *g, const phx_task_t *p, uint32_t k, phx_tid_t id)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t child = 0;
        rep_t *r = rep_lock(g, p->id);
        int rc = !r ? (atomic_load(&g->rel) ? PHX_ML_SPAWN_NEW : PHX_ML_SPAWN_WAIT)
                    : phx_ml_task_spawn(&r->mt, p->rsn, k, &child);
        rep_leave(g, r);
        if (rc == PHX_ML_SPAWN_FOUND) {
            atomic_fetch_add_explicit(&g->spawns_reused, 1, memory_order_relaxed);
            return (phx_tid_t)child;
        }
        if (rc == PHX_ML_SPAWN_NEW || atomic_load(&g->n->stopping))
            return id;
        if (!spins)
            atomic_fetch_add_explicit(&g->spawns_waited, 1, memory_order_relaxed);
        if (spins < 64)
            sched_yield();
        else {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
}

static void kick(mlog_t *g, uint64_t tid)
{
    if (phx_node_kick(g->n, (phx_tid_t)tid)) {
        PHX_ERROR("mlog", "out of memory releasing a replay: ending the job");
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
    }
}

/* Comm thread: a checkpoint committed while a replay is under way is no
 * state to roll back to (the logs and dets the rest of the replay needs go
 * at its commit, and survivors hold messages the restored tasks have not
 * sent again yet), so cr's checkpoints wait until every live rank's
 * replays finished. */
static void hold_check(mlog_t *g)
{
    if (!g->ck_held)
        return;
    for (int r = 0; r < g->n->size; r++)
        if (!g->dead[r] && g->fin[r] < g->pround)
            return;
    g->ck_held = 0;
    phx_cr_hold(g->cr, 0);
}

static void call_rfin(phx_node_t *n, phx_msg_t *m)
{
    phx_msg_free(m);
    mlog_t *g = n->rec_st;
    if (!g || g->fin[n->rank] >= g->pround)
        return;
    g->fin[n->rank] = (uint8_t)g->pround;
    uint8_t b[PHX_ML_ROUND_LEN];
    phx_ml_round_enc(b, (uint32_t)g->pround);
    for (int r = 0; r < n->size; r++)
        if (r != n->rank && !g->dead[r])
            ctl(g, r, ML_RFIN, b, sizeof b);
    hold_check(g);
}

static void on_hold_timer(uv_timer_t *t);

static void try_release(mlog_t *g)
{
    if (g->released)
        return;
    for (int r = 0; r < g->n->size; r++)
        if (!g->dead[r] && g->done[r] < g->pround)
            return;
    if (g->hold_file && access(g->hold_file, F_OK)) {
        if (!g->hold_logged) {
            g->hold_logged = 1;
            phx_evlog("mlog_release_held", "\"tasks\":%d", atomic_load(&g->nrep));
            uv_timer_start(&g->hold_timer, on_hold_timer, 1, 1);
        }
        return;
    }
    g->released = 1;
    atomic_store(&g->rel, 1);
    int bad = 0;
    pthread_rwlock_rdlock(&g->rep_lock);
    /* left counts released records still replaying (an earlier round's
     * among them) plus the guard partial_begin added: each record this
     * release releases is counted under its mutex just before (so it cannot
     * finish uncounted), and the guard is taken back below, so the phase
     * cannot end while records are still being released. */
    for (size_t i = 0; i < g->rep.cap; i++) {
        if (!g->rep.keys[i])
            continue;
        rep_t *r = (rep_t *)(uintptr_t)g->rep.vals[i];
        pthread_mutex_lock(&r->mu);
        if (r->mt.released) {   /* an earlier round's: replays on, counted already */
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        atomic_fetch_add(&g->left, 1);
        int rc = phx_ml_task_release(&r->mt);
        if (!rc)
            rep_finish(g, r);
        pthread_mutex_unlock(&r->mu);
        if (rc)
            bad = 1;
        kick(g, g->rep.keys[i]);
    }
    pthread_rwlock_unlock(&g->rep_lock);
    if (!bad && atomic_fetch_sub(&g->left, 1) == 1)
        end_phase(g);
    /* Tasks held for want of a record (spawned again, no det) may go now:
     * every worker offers all its held messages again. */
    for (int i = 0; i < g->n->nworkers; i++) {
        phx_msg_t *m = phx_msg_alloc(0);
        if (!m)
            break;
        m->kind = PHX_MK_KICK;
        m->peer = -1;
        m->hdr.dst = 0;
        phx_worker_t *w = &g->n->workers[i];
        atomic_fetch_add_explicit(&g->n->work, 1, memory_order_relaxed);
        PHX_HANDOFF_RELEASE(m);
        cds_wfcq_enqueue(&w->ih, &w->it, &m->qn);
        phx_worker_wake(w);
    }
    phx_evlog("mlog_replay", "\"tasks\":%llu,\"dets_installed\":%llu",
              (unsigned long long)atomic_load(&g->nrep), (unsigned long long)g->installed);
    if (bad) {
        fprintf(stderr, "phalanx: rank %d: message logging lost determinants of a restored task; the result "
                        "would be wrong, ending the job\n", g->n->rank);
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
    }
}

static void on_hold_timer(uv_timer_t *t)
{
    mlog_t *g = t->data;
    if (g->released || !access(g->hold_file, F_OK))
        uv_timer_stop(t);
    try_release(g);
}

static void install(mlog_t *g, const phx_det_t *d)
{
    if (phx_node_host_of(g->n, (phx_tid_t)d->receiver) != g->n->rank)
        return;   /* restored elsewhere: not ours */
    /* No record yet: a task created after the checkpoint, which the replay
     * spawns again (its rsns start at 0). */
    rep_t *r = rep_make(g, d->receiver, 0);
    if (!r) {
        PHX_ERROR("mlog", "out of memory installing a determinant: ending the job");
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    pthread_mutex_lock(&r->mu);
    int rc = phx_ml_task_install(&r->mt, d);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        PHX_ERROR("mlog", "determinant not installed (%s): ending the job", phx_strerror(rc));
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    g->installed++;
}

typedef struct hb_ctx {
    mlog_t *g;
    uint8_t **dbuf;             /* per host: encoded dets */
    size_t *dlen, *dcap;
    int err;
} hb_ctx_t;

static int hb_lost(void *arg, uint64_t tid)
{
    return lost_home(((hb_ctx_t *)arg)->g, tid);
}

static void hb_det(void *arg, const phx_det_t *d)
{
    hb_ctx_t *h = arg;
    mlog_t *g = h->g;
    int host = phx_node_host_of(g->n, (phx_tid_t)d->receiver);
    g->dets_back++;
    if (host == g->n->rank) {
        install(g, d);
        return;
    }
    if (h->dlen[host] + PHX_ML_DET_LEN > h->dcap[host]) {
        size_t cap = h->dcap[host] ? 2 * h->dcap[host] : 4096;
        uint8_t *b = realloc(h->dbuf[host], cap);
        if (!b) {
            h->err = PHX_ENOMEM;
            return;
        }
        h->dbuf[host] = b;
        h->dcap[host] = cap;
    }
    phx_wenc_t e;
    phx_wenc_init(&e, h->dbuf[host] + h->dlen[host], PHX_ML_DET_LEN);
    phx_ml_det_enc(&e, d);
    h->dlen[host] += PHX_ML_DET_LEN;
}

static void hb_msg(void *arg, const phx_ml_entry_t *e)
{
    hb_ctx_t *h = arg;
    mlog_t *g = h->g;
    phx_node_t *n = g->n;
    int host = phx_node_host_of(n, (phx_tid_t)e->dst);
    g->resent++;
    phx_metrics_add(PHX_M_MSGS_REPLAYED, 1);
    if (host == n->rank) {
        phx_msg_t *m = phx_msg_alloc(e->len);
        if (!m) {
            h->err = PHX_ENOMEM;
            return;
        }
        int spawn = !!(e->tag & ML_SPAWN_BIT);
        m->kind = spawn ? PHX_MK_SPAWN : PHX_MK_APP;
        m->type_id = (uint16_t)(e->tag & ~ML_SPAWN_BIT);
        m->peer = n->rank;
        m->hdr.type = spawn ? PHX_FT_SPAWN : PHX_FT_APP;
        m->hdr.src = e->src;
        m->hdr.dst = e->dst;
        m->hdr.ssn = e->ssn;
        m->hdr.tag = e->tag & ~ML_SPAWN_BIT;
        m->hdr.inc = n->inc;
        memcpy(m->data, e->payload, e->len);
        phx_node_enqueue_local(n, m);
        return;
    }
    /* Re-logged there is not needed: this log keeps it until the commit. */
    phx_frame_hdr_t fh = phx_frame_hdr((e->tag & ML_SPAWN_BIT) ? PHX_FT_SPAWN : PHX_FT_APP, e->tag & ~ML_SPAWN_BIT,
                                       e->src, e->dst, e->len);
    fh.ssn = e->ssn;
    fh.inc = n->inc;
    int rc = phx_net_send(n->net, host, &fh, NULL, 0, e->payload, e->len, 0);
    if (rc)
        PHX_WARN("mlog", "re-send to rank %d failed: %s", host, phx_strerror(rc));
}

static int relog_all(void *arg, uint64_t tid)
{
    (void)arg;
    (void)tid;
    return 1;
}

static void relog_add(void *arg, const phx_ml_entry_t *e)
{
    hb_ctx_t *h = arg;
    if (!h->err && lost_home(h->g, e->src))
        h->err = phx_team_relog_add(&h->g->relog, e->src, e->dst, e->ssn);
}

/* This node is a team-mate of the dead one and reloaded its own copy
 * (workers paused): its tasks replay its own record of their deliveries
 * (rule 1: complete, unlike what other nodes hold, which may have died
 * with the failed node), and what they send again is not logged twice
 * (rule 2). */
static int team_rollback(mlog_t *g)
{
    uint64_t n0 = g->installed;
    for (int i = 0; i < g->n->nworkers; i++)   /* the reload took the counter back */
        if (atomic_load(&g->n->next_seq) < g->seq_hw[i])
            atomic_store(&g->n->next_seq, g->seq_hw[i]);
    for (int i = 0; i < g->n->nworkers; i++) {
        if (g->own[i].err)
            return PHX_ENOMEM;   /* a hole: the replay could diverge */
        for (size_t k = 0; k < g->own[i].n; k++)
            install(g, &g->own[i].d[k]);
    }
    hb_ctx_t h = { .g = g };
    phx_ml_restart_cb_t cb = { &h, relog_all, NULL, relog_add };
    phx_ml_restart_msgs(g->ml, &cb);
    phx_team_relog_seal(&g->relog);
    phx_evlog("mlog_team_rollback", "\"own_dets\":%llu,\"relog\":%llu", (unsigned long long)(g->installed - n0),
              (unsigned long long)g->relog.n);
    return h.err;
}

/* cr's partial round restores here (workers paused), before any task. */
static void partial_begin(mlog_t *g)
{
    phx_node_t *n = g->n;
    uint8_t *since = calloc((size_t)n->size, 1);
    int k = since ? phx_cr_lost_since(g->cr, since) : -1;
    int same = since && !memcmp(since, g->pdead, (size_t)n->size);
    free(since);
    /* A sequential round follows one this node ended (handed back). */
    int seq = g->part && g->pround == 1 && g->done[n->rank] >= 1;
    if (g->full_rb || (g->part && !seq) || !same) {
        /* This node's period disagrees with the round cr decided: it missed
         * the commit that began a new period (a failure raced the COMMIT
         * frame), or took part in a round the decision did not count.
         * Ending beats a replay without records (never seen in tests). */
        fprintf(stderr, "phalanx: rank %d: message logging: this node's failures of the period (%d) disagree "
                        "with the partial recovery decided (%d); ending the job rather than replay without "
                        "determinants\n", n->rank, g->nfail, k);
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    /* A new release for this round (workers paused): tasks without a
     * record hold again until it. The guard keeps the phase from ending
     * while an earlier round's replays finish before it; try_release takes
     * it back (an earlier round not released yet still holds its own). */
    if (!g->pround || g->released)
        atomic_fetch_add(&g->left, 1);
    g->part = 1;
    g->pround++;
    g->released = 0;
    g->hold_logged = 0;
    atomic_store(&g->rel, 0);
    if (g->nfail > 1)
        phx_evlog("mlog_partial_multi", "\"failures\":%d,\"sequential\":%d", g->nfail, seq);
}

static void partial_handback(mlog_t *g)
{
    phx_node_t *n = g->n;
    if (g->full_rb || !g->part) {
        fprintf(stderr, "phalanx: rank %d: message logging: a partial recovery ended here without its start; "
                        "ending the job rather than replay without determinants\n", n->rank);
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    if (!g->fast) {
        atomic_store(&g->phase, 1);
        /* Before on_go's re-doubling checkpoint. No RFIN can be in yet:
         * every rank's replay waits for this node's RDONE, below. */
        g->ck_held = 1;
        phx_cr_hold(g->cr, 1);
    }
    int sz = n->size;
    hb_ctx_t h = { .g = g };
    h.dbuf = calloc((size_t)sz, sizeof *h.dbuf);
    h.dlen = calloc((size_t)sz, sizeof *h.dlen);
    h.dcap = calloc((size_t)sz, sizeof *h.dcap);
    if (!h.dbuf || !h.dlen || !h.dcap)
        h.err = PHX_ENOMEM;
    /* Dets first (those other nodes' trailers left here; this node's own
     * name only its own tasks), each host's in one frame. */
    phx_ml_restart_cb_t dcb = { &h, hb_lost, hb_det, NULL };
    /* PHX_MLOG_TEST_NO_DETS=1 (tests only): hand back no dets, so replays
     * take arrival order; the negative control of tests/integration. */
    const char *nd = getenv("PHX_MLOG_TEST_NO_DETS");
    if (!h.err && !g->fast && !(nd && nd[0] == '1'))
        phx_ml_restart_dets(g->ml, &dcb);
    for (int r = 0; r < sz && !h.err; r++)
        if (h.dlen[r])
            ctl(g, r, ML_RDETS, h.dbuf[r], h.dlen[r]);
    if (!h.err && g->team > 1 && g->rb[n->rank])
        h.err = team_rollback(g);
    phx_ml_restart_cb_t mcb = { &h, hb_lost, NULL, hb_msg };
    if (!h.err)
        phx_ml_restart_msgs(g->ml, &mcb);
    if (h.err) {
        PHX_ERROR("mlog", "hand-back failed (%s): ending the job", phx_strerror(h.err));
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
    for (int r = 0; r < sz; r++)
        free(h.dbuf ? h.dbuf[r] : NULL);
    free(h.dbuf);
    free(h.dlen);
    free(h.dcap);
    own_stop(g);
    phx_evlog("mlog_handback", "\"dets\":%llu,\"msgs\":%llu", (unsigned long long)g->dets_back,
              (unsigned long long)g->resent);
    if (g->fast)
        return;   /* nothing is held: restored tasks take messages in any order */
    uint8_t b[PHX_ML_ROUND_LEN];
    phx_ml_round_enc(b, (uint32_t)g->pround);
    for (int r = 0; r < sz; r++)
        if (r != n->rank && !g->dead[r])
            ctl(g, r, ML_RDONE, b, sizeof b);
    g->done[n->rank] = (uint8_t)g->pround;
    try_release(g);
}

/* cr's coordinator: may the losses of this period be recovered partially? */
static int ml_when(void *arg, const uint8_t *dead, const uint8_t *since, int replayed)
{
    mlog_t *g = arg;
    phx_mld_mode_t m = g->fast ? PHX_MLD_FAST : g->pess ? PHX_MLD_PESSIMISTIC : g->team ? PHX_MLD_TEAM
                                                                                       : PHX_MLD_CAUSAL;
    int rp = replayed == PHX_CR_REPLAYED_NONE    ? PHX_MLD_REPLAYED_NONE
           : replayed == PHX_CR_REPLAYED_ENDED ? PHX_MLD_REPLAYED_ENDED
                                               : PHX_MLD_REPLAYED_OTHER;
    return phx_mld_partial(m, g->n->size, dead, since, rp) == PHX_MLD_PARTIAL;
}

static int ml_init(phx_node_t *n, void **out)
{
    mlog_t *g = calloc(1, sizeof *g);
    if (!g)
        return PHX_ENOMEM;
    g->n = n;
    g->pess = is_pess(n);
    g->fast = is_fast(n);
    g->team = is_team(n) ? n->cfg.mlog_team_size : 0;
    g->dead = calloc((size_t)n->size, 1);
    g->pdead = calloc((size_t)n->size, 1);
    g->rb = calloc((size_t)n->size, 1);
    if (g->team > 1) {
        g->own = calloc((size_t)n->nworkers, sizeof *g->own);
        g->seq_hw = calloc((size_t)n->nworkers, sizeof *g->seq_hw);
        atomic_store(&g->own_on, g->own != NULL);
    }
    g->done = calloc((size_t)n->size, 1);
    g->fin = calloc((size_t)n->size, 1);
    if (g->pess)
        g->snap = calloc((size_t)n->nworkers * (size_t)n->nworkers, sizeof *g->snap);
    phx_ml_cfg_t c = { .rank = n->rank, .n = n->size, .inc = n->inc, .nq = n->nworkers, .qcap = QCAP,
                       .pessimistic = g->pess };
    phx_map_init(&g->rep);
    pthread_rwlock_init(&g->rep_lock, NULL);
    g->ml = g->dead && g->pdead && g->done && g->fin && g->rb && (g->team <= 1 || (g->own && g->seq_hw)) &&
                    (!g->pess || g->snap)
                ? phx_ml_create(&c) : NULL;
    /* Published before cr's init, which pauses the workers of a respawned
     * rank: they find this state (and g->cr, set before the pause) there. */
    *out = g;
    int rc = g->ml ? CR->init(n, &g->cr) : PHX_ENOMEM;
    if (rc) {
        *out = NULL;   /* no worker paused: cr pauses them last */
        phx_ml_destroy(g->ml);
        phx_map_free(&g->rep);
        free(g->dead);
        free(g->pdead);
        free(g->rb);
        free(g->own);
        free(g->seq_hw);
        free(g->done);
        free(g->fin);
        free(g->snap);
        free(g);
        return rc;
    }
    phx_cr_listen(g->cr, ml_listen, g, 1);
    phx_cr_partial_when(g->cr, ml_when);
    if (g->team > 1)
        phx_cr_partial_rolls(g->cr, ml_rolls);
    const char *hf = getenv("PHX_MLOG_TEST_HOLD_RELEASE");
    if (hf && hf[0] && !g->fast) {
        g->hold_file = hf;
        uv_timer_init(&n->loop, &g->hold_timer);
        g->hold_timer.data = g;
        g->hold_timer_on = 1;
    }
    return 0;
}

static void ml_on_start(void *st)
{
    CR->on_start(((mlog_t *)st)->cr);
}

static void ml_on_send(void *st, const phx_msg_t *m)
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
        log_gauges(g);
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
        ctl(g, m->peer, ML_ACK, a_body, (size_t)a);
    else if (k > 0)
        ctl(g, m->peer, ML_DETS, g->buf, (size_t)k);
    if (k > 0)
        g->trailers++;
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
    if (h->tag == ML_ACKDETS) {
        phx_ml_ackdets_t ad;
        if (phx_ml_ackdets_dec(p, h->len, &ad) || phx_ml_on_ack(g->ml, ad.ack, ad.ack_len)) {
            PHX_WARN("mlog", "bad ack and determinant frame from rank %d", peer);
            return;
        }
        phx_frame_hdr_t d = *h;   /* the rest is an ML_DETS frame */
        d.tag = ML_DETS;
        d.len = (uint32_t)ad.dets_len;
        ml_on_ctrl(st, peer, &d, ad.dets);
    } else if (h->tag == ML_DETS) {
        /* Pessimistic: a worker waits for this ack. Causal: the ack only
         * stops re-piggybacking, so it rides with the next frame to peer
         * (ml_on_send), unless much is owed (peer's queue must not fill). */
        uint8_t ack[PHX_ML_ACK_MAX];
        long k = phx_ml_pb_store(g->ml, peer, p, h->len, g->pess ? ack : NULL);
        if (k >= 0 && !g->pess && phx_ml_ack_owed(g->ml, peer) >= ACK_BATCH)
            k = phx_ml_ack_take(g->ml, peer, ack);
        if (k > 0)
            ctl(g, peer, ML_ACK, ack, (size_t)k);
        else if (k < 0)
            PHX_WARN("mlog", "bad determinant frame from rank %d: %s", peer, phx_strerror((int)k));
    } else if (h->tag == ML_RDETS) {
        phx_wdec_t dc;
        phx_wdec_init(&dc, p, h->len);
        phx_det_t d;
        while (phx_wdec_left(&dc) >= PHX_ML_DET_LEN && !phx_ml_det_dec(&dc, &d))
            install(g, &d);
    } else if (h->tag == ML_RDONE || h->tag == ML_RFIN) {
        uint8_t *v = h->tag == ML_RDONE ? g->done : g->fin;
        uint32_t k;
        if (phx_ml_round_dec(p, h->len, &k))
            k = 0;
        if (peer >= 0 && peer < g->n->size && k > v[peer] && k < 256)
            v[peer] = (uint8_t)k;
        if (h->tag == ML_RDONE)
            try_release(g);
        else
            hold_check(g);
    } else if (h->tag == ML_ACK) {
        if (phx_ml_on_ack(g->ml, p, h->len))
            PHX_WARN("mlog", "bad ack from rank %d", peer);
        else if (g->pess)
            acked(g);
    } else
        PHX_WARN("mlog", "unknown control tag %u from rank %d", h->tag, peer);
}

/* Frees every replay record and leaves rep empty. Caller holds rep_lock
 * for writing, or no other thread can reach g. */
static void free_replays(mlog_t *g)
{
    for (size_t i = 0; i < g->rep.cap; i++)
        if (g->rep.keys[i]) {
            rep_t *r = (rep_t *)(uintptr_t)g->rep.vals[i];
            phx_ml_task_free(&r->mt);
            pthread_mutex_destroy(&r->mu);
            free(r);
        }
    phx_map_free(&g->rep);
    phx_map_init(&g->rep);
}

/* Comm thread, on a second failure: the global rollback that follows
 * restores every task from the checkpoint, so a partial recovery still
 * under way is void. Its records would otherwise hold the restored tasks'
 * deliveries for ever (no hand-back follows a global rollback). Open the
 * gate first (rel, then phase: ml_admit reads phase before the lock), then
 * free the records under the write lock. */
static void drop_replays(mlog_t *g)
{
    g->released = 1;
    atomic_store(&g->rel, 1);
    atomic_store_explicit(&g->phase, 0, memory_order_release);
    pthread_rwlock_wrlock(&g->rep_lock);
    free_replays(g);
    atomic_store(&g->nrep, 0);
    pthread_rwlock_unlock(&g->rep_lock);
}

static void try_release_if_started(mlog_t *g)
{
    if (g->pround && g->done[g->n->rank] >= g->pround)
        try_release(g);
}

/* Comm thread, at the period's first failure: where every task was. */
static void snap_hosts(mlog_t *g)
{
    phx_node_t *n = g->n;
    size_t k = n->loc ? (size_t)n->loc_n * PHX_LOC_SLICES : 0;
    int *h = k ? realloc(g->hloc, k * sizeof *h) : NULL;
    if (k && !h) {
        PHX_ERROR("mlog", "out of memory recording task hosts at a failure: ending the job");
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    if (h)
        memcpy(h, n->loc, k * sizeof *h);
    else
        free(g->hloc);
    g->hloc = h;
    g->hloc_n = h ? n->loc_n : 0;
}

/* Comm thread, at a commit (workers paused) after failures: a new
 * checkpoint period begins. cr begins no checkpoint while a replay is under
 * way anywhere (hold_check), and none during a round, so this commit
 * follows the end of this period's recovery on every node; its logs, dets
 * and the dead node's moved tasks are in this epoch, stored twice. The next
 * failure is a first one again (cr counts the ranks dead since the commit
 * the same way: core/ckpt.c's rb_try_decide). */
static void period_reset(mlog_t *g, uint64_t epoch)
{
    if (atomic_load(&g->phase)) {   /* cannot happen (the hold); keep the fallback */
        PHX_WARN("mlog", "epoch %llu committed during a replay: the next failure rolls back globally",
                 (unsigned long long)epoch);
        return;
    }
    phx_evlog("mlog_period", "\"epoch\":%llu,\"failures\":%d,\"global\":%d", (unsigned long long)epoch, g->nfail,
              g->full_rb);
    g->nfail = 0;
    g->full_rb = 0;
    g->part = 0;
    g->pround = 0;
    memset(g->pdead, 0, (size_t)g->n->size);
    memset(g->rb, 0, (size_t)g->n->size);
    memset(g->done, 0, (size_t)g->n->size);
    memset(g->fin, 0, (size_t)g->n->size);
    g->released = 0;
    g->hold_logged = 0;
    atomic_store(&g->rel, 0);
    atomic_store(&g->left, 0);
    pthread_rwlock_wrlock(&g->rep_lock);
    free_replays(g);
    atomic_store(&g->nrep, 0);
    pthread_rwlock_unlock(&g->rep_lock);
    if (g->team > 1 && g->own)   /* rule 1 again, from this commit (ml_listen clears the records) */
        atomic_store(&g->own_on, 1);
}

static int ml_on_failure(void *st, int rank)
{
    mlog_t *g = st;
    if (rank >= 0 && rank < g->n->size && !g->dead[rank]) {
        g->dead[rank] = 1;
        g->pdead[rank] = 1;
        g->nfail++;
        if (g->nfail == 1)
            snap_hosts(g);   /* before cr relocates anything */
        /* The first failure under mlog-team rolls its whole team back;
         * a team of every live rank marks them all, so cr decides the
         * global rollback (ml_rolls leaves no live rank running). Ranks of
         * earlier periods count as live here: cr's own check (some live
         * rank keeps running) sees them dead. */
        if (g->team > 1 && g->nfail == 1)
            (void)phx_team_rollback_set(g->n->size, g->team, g->pdead, g->rb);
        g->rb[rank] = 1;
    }
    /* Whether this failure is recovered partially (two in one round, or
     * one after the period's partial round ended everywhere) is cr's
     * coordinator's decision by ft/mlog/multi.h's rule; workers stay paused
     * until it. A global rollback voids a replay under way (ml_listen). */
    try_release_if_started(g);   /* a release waits for every live rank's hand-back: one fewer now */
    int rc = CR->on_failure(g->cr, rank);
    if (g->pess)
        flush(g);   /* a worker may wait on a flush the dead rank never acked */
    return rc;
}

static void ml_on_peer_up(void *st, int peer, uint32_t inc)
{
    CR->on_peer_up(((mlog_t *)st)->cr, peer, inc);   /* a respawned rank, taken in by cr */
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
    uint64_t dups = 0;
    for (int i = 0; i < g->n->nworkers; i++)
        dups += PHX_CNT_GET(g->n->workers[i].n_dups);
    phx_evlog("mlog_recovery", "\"restored\":%d,\"resent\":%llu,\"dets_back\":%llu,\"installed\":%llu,\"dups\":%llu,"
              "\"spawn_ids_reused\":%llu,\"spawns_waited\":%llu",
              atomic_load(&g->nrep), (unsigned long long)g->resent, (unsigned long long)g->dets_back,
              (unsigned long long)g->installed, (unsigned long long)dups,
              (unsigned long long)atomic_load(&g->spawns_reused), (unsigned long long)atomic_load(&g->spawns_waited));
    /* PHX_MLOG_DEBUG=1: messages still held when the job ends (read racily
     * from the workers' maps: a diagnosis aid, never on by default). */
    const char *dbg = getenv("PHX_MLOG_DEBUG");
    for (int i = 0; dbg && dbg[0] == '1' && i < g->n->nworkers; i++) {
        phx_worker_t *w = &g->n->workers[i];
        for (size_t k = 0; k < w->tasks.cap; k++) {
            if (!w->tasks.keys[k])
                continue;
            phx_task_t *t = (phx_task_t *)(uintptr_t)w->tasks.vals[k];
            size_t j = 0;
            for (const phx_msg_t *x; (x = phx_held_next(&t->held, &j));) {
                uint64_t *l = phx_map_get(&t->in_ssn, x->hdr.src);
                phx_evlog("mlog_held", "\"task\":\"%#llx\",\"rsn\":%llu,\"src\":\"%#llx\",\"ssn\":%llu,\"last\":%llu",
                          (unsigned long long)t->id, (unsigned long long)t->rsn, (unsigned long long)x->hdr.src,
                          (unsigned long long)x->hdr.ssn, (unsigned long long)(l ? *l : 0));
            }
        }
        for (size_t k = 0; k < w->pending.cap; k++)
            if (w->pending.keys[k])
                phx_evlog("mlog_pending", "\"task\":\"%#llx\"", (unsigned long long)w->pending.keys[k]);
    }
    /* Replays still under way when the job ends (a diagnosis aid). */
    pthread_rwlock_rdlock(&g->rep_lock);
    for (size_t i = 0; i < g->rep.cap; i++)
        if (g->rep.keys[i]) {
            rep_t *r = (rep_t *)(uintptr_t)g->rep.vals[i];
            pthread_mutex_lock(&r->mu);
            if (r->mt.replaying)
                phx_evlog("mlog_replaying", "\"task\":\"%#llx\",\"base\":%llu,\"dets\":%llu,\"released\":%d",
                          (unsigned long long)g->rep.keys[i], (unsigned long long)r->mt.rep_base,
                          (unsigned long long)r->mt.rep_n, r->mt.released);
            pthread_mutex_unlock(&r->mu);
        }
    pthread_rwlock_unlock(&g->rep_lock);
    /* Thesis Table 3.1's figures for this node. */
    phx_evlog("mlog_stats",
              "\"dets\":%llu,\"logged\":%llu,\"logged_bytes\":%llu,\"local\":%llu,\"frames_pb\":%llu,"
              "\"dets_pb\":%llu,\"pb_bytes\":%llu,\"dets_stored\":%llu,\"ctrl_frames\":%llu,"
              "\"piggybacked_on_app\":%llu,\"team\":%d,\"unlogged_team\":%llu,\"relogs_skipped\":%llu,"
              "\"gate_waits\":%llu",
              (unsigned long long)s.dets, (unsigned long long)s.logged, (unsigned long long)s.logged_bytes,
              (unsigned long long)s.local, (unsigned long long)s.frames_pb, (unsigned long long)s.dets_pb,
              (unsigned long long)s.pb_bytes, (unsigned long long)s.dets_stored,
              (unsigned long long)g->ctrl_frames, (unsigned long long)g->trailers, g->team,
              (unsigned long long)g->team_unlogged, (unsigned long long)g->relogs_skipped,
              (unsigned long long)atomic_load(&g->gate_waits));
    if (getenv("PHX_STATS"))
        fprintf(stderr, "{\"rank\":%d,\"mlog_dets\":%llu,\"mlog_logged\":%llu,\"mlog_dets_pb\":%llu,"
                        "\"mlog_pb_bytes\":%llu}\n", g->n->rank, (unsigned long long)s.dets,
                (unsigned long long)s.logged, (unsigned long long)s.dets_pb, (unsigned long long)s.pb_bytes);
    for (int i = 0; i < g->n->nworkers; i++)
        phx_detq_close(phx_ml_queue(g->ml, i));   /* workers blocked on a full queue leave */
    if (g->hold_timer_on) {
        g->hold_timer_on = 0;
        uv_timer_stop(&g->hold_timer);
        uv_close((uv_handle_t *)&g->hold_timer, NULL);
    }
    CR->stop(g->cr);
}

static void ml_destroy(void *st)
{
    mlog_t *g = st;
    free(g->snap);
    free_replays(g);
    pthread_rwlock_destroy(&g->rep_lock);
    free(g->done);
    own_clear(g);
    free(g->own);
    free(g->seq_hw);
    phx_team_relog_clear(&g->relog);
    free(g->rb);
    free(g->fin);
    free(g->pdead);
    free(g->hloc);
    CR->destroy(g->cr);
    phx_ml_destroy(g->ml);
    free(g->dead);
    free(g->buf);
    free(g);
}

/* The worker hooks record and replay determinants; mlog-fast makes none
 * and holds nothing back, so it has none. */
#define WORKER_HOOKS .delivered = hook, .admit = ml_admit, .admit_next = ml_admit_next, .spawn = spawn_hook
#define NO_WORKER_HOOKS .delivered = NULL
/* Pessimistic: a message leaves the node only once the determinants made
 * so far are stored on another node. */
#define PESS_WORKER_HOOKS WORKER_HOOKS, .send = send_gate
#define OPS(nm, hlp, hooks)                                                                                  \
    {                                                                                                          \
        .name = nm, .help = hlp, .configure = ml_configure, .init = ml_init, .on_start = ml_on_start,          \
        .on_send = ml_on_send, .on_deliver = ml_on_deliver, .on_ctrl = ml_on_ctrl,                             \
        .on_failure = ml_on_failure, .on_checkpoint = ml_on_checkpoint, .on_restore = ml_on_restore,           \
        .worker_pause = ml_worker_pause, .on_peer_up = ml_on_peer_up,                                          \
        .stop = ml_stop, .destroy = ml_destroy, hooks,                                                         \
    }

const phx_recovery_ops_t phx_recovery_mlog_causal =
    OPS("mlog-causal", "causal message logging (SCML) over cr's checkpoints: the first failure restores only the dead node's tasks", WORKER_HOOKS);
const phx_recovery_ops_t phx_recovery_mlog_fast =
    OPS("mlog-fast", "message logging without determinants for receive-deterministic task types (PHX_TYPE_RECV_DET): the first failure restores only the dead node's tasks",
        NO_WORKER_HOOKS);
const phx_recovery_ops_t phx_recovery_mlog_team =
    OPS("mlog-team", "team-based causal message logging (teams of mlog-team-size consecutive ranks): only messages "
                     "between teams are logged; the first failure rolls back exactly the dead node's team",
        WORKER_HOOKS);
const phx_recovery_ops_t phx_recovery_mlog_pessimistic =
    OPS("mlog-pessimistic", "pessimistic message logging over cr's checkpoints: the first failure restores only the dead node's tasks",
        PESS_WORKER_HOOKS);
