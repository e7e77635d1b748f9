/* Node internals shared by the core sources. Not part of the public API.
 *
 * Threads: the communication thread (the one that called phx_main) runs the
 * libuv loop and owns every handle, the transport and the fault-tolerance
 * state machines. Worker threads run tasks. They meet only through:
 *   - the outbox, a wfcqueue (many producers: workers; one consumer: comm),
 *     signalled with uv_async_send;
 *   - one inbox per worker, a wfcqueue (producers: comm and other workers;
 *     consumer: the worker), signalled through a futex when it sleeps;
 *   - atomics documented at each field.
 *
 * A task is pinned to worker hash(tid) % T, so all of its messages are
 * handled by one thread, one at a time, without locks. */
#ifndef PHX_NODE_H
#define PHX_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "core/config.h"
#include "core/held.h"
#include "core/map.h"
#include "core/msg.h"
#include "core/phalanx.h"
#include "ft/termination/td.h"
#include "net/transport.h"

#define PHX_EXIT_PEER_LOST 70   /* a peer died and fault tolerance is off */
#define PHX_EXIT_FENCED 75      /* declared dead by the others */
#define PHX_EXIT_WORK_LOST 76   /* a node died holding work and nothing covered it */
#define PHX_EXIT_STARTUP 1      /* this node could not start (message logged) */
/* A node stopped by a signal or by losing its launcher ends within
 * hb-timeout + this, even with a task handler stuck in user code. */
#define PHX_STOP_SLACK_MS 2000
/* Charge of messages bound for other nodes a node's outbox holds before
 * its senders wait (node.c, outbox_room): about 6,000 8-byte messages,
 * whose buffers stay in cache from phx_send to the framing. */
#define PHX_OUTBOX_MAX ((int64_t)1 << 20)

/* PHX_FT_CTRL tags used by the node (the transport owns tags below 16). */
enum { PHX_CTRL_EXIT = 16, PHX_CTRL_READY = 17 };

typedef struct phx_node phx_node_t;
typedef struct phx_worker phx_worker_t;

typedef struct phx_task {
    phx_tid_t id;
    uint16_t type;
    uint64_t rsn;               /* receive sequence number of the last delivery */
    phx_map_t out_ssn;          /* dst tid -> last SSN sent */
    phx_map_t in_ssn;           /* src tid -> last SSN delivered */
    phx_held_t held;            /* early or not yet admitted messages, by <src, ssn> */
    /* The spawn hook's count: spawn_k spawns made while handling delivery
     * spawn_rsn (worker only; not packed: a restored task spawns nothing
     * before its next delivery, which starts a new count). */
    uint64_t spawn_rsn;
    uint32_t spawn_k;
    _Alignas(16) uint8_t state[];
} phx_task_t;

struct phx_ctx {
    phx_worker_t *w;
    phx_task_t *task;           /* NULL outside a task */
    int done;                   /* phx_task_done was called */
};

struct phx_worker {
    phx_node_t *node;
    int id;
    pthread_t th;
    struct cds_wfcq_head ih;    /* inbox */
    struct cds_wfcq_tail it;
    _Atomic uint32_t sleeping;  /* futex word: 1 while parked on an empty inbox */
    phx_pool_t *pool;
    phx_map_t tasks;            /* tid -> phx_task_t * */
    phx_map_t pending;          /* tid -> chain of messages that beat the spawn */
    phx_map_t gone;             /* tids of finished tasks: late messages drop */
    struct phx_ctx ctx;
    uint64_t *processed;        /* per source node, this batch (worker only) */
    int *touched, ntouched;
    /* counters: written by this worker, read by anyone (relaxed) */
    _Atomic uint64_t n_deliveries, n_tasks, n_reordered, n_sent, n_bytes_sent, n_hook;
    _Atomic uint64_t n_dups;    /* messages dropped as already delivered (SSN) */
};

struct phx_node {
    phx_config_t cfg;
    int rank, size;
    int app_size;               /* ranks the program sees: size less the spares (cfg.spares) */
    uint32_t inc;               /* incarnation (epoch) of this node */
    uv_loop_t loop;
    uv_async_t async;
    uv_signal_t sigterm, sigint;
    uv_pipe_t lifeline;         /* stdin from the launcher: EOF = launcher gone */
    int lifeline_open;
    phx_net_t *net;
    phx_pool_t *pool;           /* comm thread's */

    phx_worker_t *workers;
    int nworkers;
    /* Inline mode (workers=0, core/inline.h): one worker, no thread; the
     * comm thread (comm_th) runs it from inl_idle, its batch under way in
     * inl_h/inl_t; inl_held: a peer is over send-buffer, no handler runs.
     * inl_turn: inl_idle's callback, main.c's loop turn (phx_inline_init).
     * Comm thread only. */
    int inline_mode, inl_open, inl_held;
    uv_idle_t inl_idle;
    uv_idle_cb inl_turn;
    struct cds_wfcq_head inl_h;
    struct cds_wfcq_tail inl_t;
    pthread_t comm_th;
    struct cds_wfcq_head oh;    /* outbox */
    struct cds_wfcq_tail ot;

    /* Local work in progress: messages in inboxes, handlers running and
     * messages in the outbox. Zero means idle; only the comm thread can raise
     * it from zero (by delivering a remote message), so zero is stable
     * until the comm thread acts. */
    _Atomic int64_t work;
    _Atomic uint64_t *processed;/* per source node: remote messages handled */
    _Atomic int64_t *peer_out;  /* per peer: bytes charged and not yet written */
    /* Charge (phx_msg_charge) of the APP and SPAWN messages in the outbox:
     * added by phx_node_enqueue_out, taken off by the drain; senders wait
     * while it is at PHX_OUTBOX_MAX (node.c, outbox_room). */
    _Atomic int64_t outq;
    pthread_mutex_t bp_lock;
    pthread_cond_t bp_cond;
    _Atomic int bp_waiters;
    _Atomic uint32_t next_seq;  /* task id sequence */
    /* Task ids' creator field: the rank, or for a new incarnation taken in
     * without its checkpoint (message logging, restart-on=respawn) one no
     * earlier incarnation used, since ids its predecessor drew after its
     * last checkpoint may live on elsewhere. Comm thread writes it while
     * workers are paused; workers read it. */
    _Atomic uint16_t creator;
    _Atomic int stopping;

    const phx_td_ops_t *td;     /* comm thread only */
    void *td_st;
    int td_busy, td_held_new;
    phx_map_t td_held;          /* token -> msg delayed by the detector */
    struct td_self *td_self, **td_self_tail;  /* self-addressed control messages */
    /* Inbound messages gathered during one read, handed to each worker with
     * one splice (comm thread only). */
    struct cds_wfcq_head *batch_h;
    struct cds_wfcq_tail *batch_t;
    int64_t *batch_n;
    int *batch_touched, batch_ntouched;
    int64_t batch_pending, batch_bytes;
    /* Inbound payload bytes handed to workers and not yet handled; reads
     * pause above cfg.recv_buffer and resume at half (comm thread decides). */
    _Atomic int64_t inbound;
    _Atomic int reads_paused;
    /* written by the comm thread only, read by anyone (relaxed) */
    _Atomic uint64_t td_ctrl_sent, msgs_recv, bytes_recv;

    /* The services in notice and stop order (core/service.h); set by
     * phx_main before anything can fail. */
    const struct phx_service *svc;
    int nsvc;
    /* Failure detection (core/ft.c) and agreement (core/agree.c): comm thread. */
    struct phx_ft *ft;
    struct phx_agree *agree;
    /* Dead nodes in notice order; read by any thread under dead_lock. */
    pthread_mutex_t dead_lock;
    int *dead, ndead;

    /* Recovery mode (core/recovery.h): its hooks and state (comm thread). */
    const struct phx_recovery_ops *rec;
    void *rec_st;
    /* Set by the mode: workers stop at their next handler boundary. */
    _Atomic int rec_pause;
    /* NULL, or (home rank, slice) -> rank hosting those tasks after a
     * recovery (entry home * PHX_LOC_SLICES + phx_loc_slice(tid)), so a lost
     * node's tasks spread over the survivors; changed only while every
     * worker is paused. */
    int *loc;
    int loc_n;                  /* home ranks covered by loc (those of a restarted job may exceed size) */

    uint64_t activity;          /* comm thread: bumped by I/O callbacks (linger) */
    int nready, all_up;         /* startup barrier (rank 0 counts READY) */
    /* phx_main's startup chain is running: the transport may report "all
     * up" from inside phx_net_start (a one-node job), before the detector,
     * the work placeholder and the rest exist; it is replayed after. */
    int starting, all_up_deferred;
    int exit_code;
    /* The single switch saying that a failure does not lose work: set when
     * the program registered phx_on_failure (it handles failures itself) or
     * when a recovery mode (checkpoint/restart, message logging, resilient
     * work stealing) is on; that mode sets it at its init, before the job
     * starts. Without it, a job that saw any node die ends with
     * PHX_EXIT_WORK_LOST instead of 0 (phx_node_exit). */
    _Atomic int failures_covered;
    int net_stopped, closing;
    int main_type;
    const void *main_arg;
    size_t main_len;
};

extern phx_node_t *phx_node_current;

/* Any thread: hands m to the worker that owns its destination task. */
void phx_node_enqueue_local(phx_node_t *n, phx_msg_t *m);
/* Any thread: the worker owning task id offers its held messages again
 * (PHX_MK_KICK). 0 or PHX_ENOMEM. */
int phx_node_kick(phx_node_t *n, phx_tid_t id);
/* Comm thread: queue an inbound message for its worker; flush hands every
 * queued message over (one splice and at most one wake-up per worker). */
void phx_node_batch_add(phx_node_t *n, phx_msg_t *m);
void phx_node_batch_flush(phx_node_t *n);
/* Worker thread: hands m to the comm thread. */
void phx_node_enqueue_out(phx_node_t *n, phx_msg_t *m);
/* Comm thread: rank (incarnation inc) is dead for good. Closes its
 * connection, then tells the services (core/service.h) and the registered
 * failure callbacks. Called by the failure detector (core/failures.c). */
void phx_node_notify_dead(phx_node_t *n, int rank, uint32_t inc, uint64_t when_ns);
/* Any thread, after enqueueing into w's inbox: unparks w if it sleeps. */
void phx_worker_wake(phx_worker_t *w);
/* Runs the type's fini and frees the task and its held messages. */
void phx_task_free(phx_task_t *t);
/* Worker entry point. */
void *phx_worker_main(void *arg);
/* w's thread (or the comm thread in inline mode): handles what w's inbox
 * holds, appended to the batch lh/lt, until the batch is empty, a pause
 * begins or budget messages were handled; settles the counters. Returns 1
 * once it handled PHX_MK_STOP (the batch is then freed), else 0. */
int phx_worker_step(phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt, long budget);
/* Comm thread: begin the end of the job with code (PHX_EXIT_WORK_LOST in
 * place of 0 when a node died and nothing covered its work); propagate
 * tells peers. Stops the services through their table (core/ending.c). */
void phx_node_exit(phx_node_t *n, int code, int propagate);

/* Comm thread: hands every queued outgoing message to the transport. */
void phx_node_drain_outbox(phx_node_t *n);

/* A task id: home rank, creator (the creating node's, see creator above)
 * and sequence number. */
static inline phx_tid_t phx_tid_make(int home, int creator, uint32_t seq)
{
    return ((uint64_t)(home + 1) << 48) | ((uint64_t)creator << 32) | seq;
}

/* Relocation granularity: a home rank's tasks fall into this many slices
 * by id hash; each slice moves on its own. */
#define PHX_LOC_SLICES 32
static inline int phx_loc_slice(phx_tid_t tid)
{
    return (int)((tid * 0xff51afd7ed558ccdULL) >> 59);
}

/* The rank that hosts task tid (relocation after a loss). */
static inline int phx_node_host_of(const phx_node_t *n, phx_tid_t tid)
{
    int home = phx_tid_home(tid);
    return n->loc && home >= 0 && home < n->loc_n ? n->loc[home * PHX_LOC_SLICES + phx_loc_slice(tid)] : home;
}

/* Worker threads: the recovery mode's ops for its worker hooks (delivered,
 * admit, admit_next, spawn: core/recovery.h), or NULL before its state
 * exists and without a mode. The state is made before any task runs. */
static inline const struct phx_recovery_ops *phx_node_rec_hooks(const phx_node_t *n)
{
    return n->rec_st ? n->rec : NULL;
}

/* Single-writer counter bump: no locked instruction on the hot path. */
#define PHX_CNT_ADD(c, v) \
    atomic_store_explicit(&(c), atomic_load_explicit(&(c), memory_order_relaxed) + (v), memory_order_relaxed)
#define PHX_CNT_GET(c) atomic_load_explicit(&(c), memory_order_relaxed)

/* Multiplicative hashing, scaled from the product's top bits (its best
 * mixed): a node's tasks often have ids in an arithmetic progression with a
 * power-of-two stride (phx_spawn_on round-robin over the nodes), and the
 * product's low half taken modulo nworkers put all of such a node's tasks on
 * one worker, so a replay of a dead node's tasks, or a node's own blocks, ran
 * on one core of two. The fraction of pi spreads those strides evenly. */
static inline int phx_worker_of(const phx_node_t *n, phx_tid_t tid)
{
    uint64_t h = tid * 0x243f6a8885a308d3ULL;
    return (int)(((h >> 32) * (uint64_t)n->nworkers) >> 32);
}

#endif
