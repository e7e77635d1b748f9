/* recovery=cr: state and functions shared by its files, private to them
 * (modes built on cr use core/cr.h). One concern per file:
 *   cr.c          configuration, init/stop, the mode's hooks, sending, the
 *                 control dispatch;
 *   cr_pause.c    pausing the workers at handler boundaries;
 *   cr_bulk.c     chunked transfer of blobs (zero-copy, acknowledged);
 *   cr_snap.c     the snapshot codec: tasks, queues, finished ids; restore;
 *   cr_round.c    the commit round (BEGIN/MARK/READY/COMMIT), the disk copy
 *                 of a committed epoch, idle probes (td=cut);
 *   cr_home.c     the move home of slices a partial round left on helpers;
 *   cr_recover.c  the recovery round's glue (its state machine:
 *                 ft/ckpt/recover.h): judgement, relocation, restores;
 *   cr_rejoin.c   restart-on=respawn: a new incarnation taken back in;
 *   cr_drain.c    a node told to stop hands its slices over at a cut and
 *                 leaves (its machine: ft/ckpt/drain.h);
 *   ckpt_disk.c   the checkpoint files.
 * The decisions are ft/ckpt's. Comm thread unless stated otherwise. */
#ifndef PHX_CORE_CR_INT_H
#define PHX_CORE_CR_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/node.h"
#include "core/cr.h"
#include "core/recovery.h"
#include "ft/ckpt/ckpt.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/commit.h"
#include "ft/ckpt/member.h"
#include "ft/ckpt/quiet.h"
#include "ft/ckpt/recover.h"
#include "ft/ckpt/rejoin.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

enum {
    CK_REQ = PHX_CTRL_REC_FIRST, CK_BEGIN, CK_MARK, RB_JOIN, CK_ACK, CK_READY, CK_COMMIT,
    RB_STATE, RB_DECIDE, RB_MARK, RB_DONE, RB_GO, RB_ABORT, CK_DISK, CK_CHUNK, CK_CACK, CK_IDLE,
};

enum phase { PH_IDLE, PH_CK, PH_REC };

/* The drain's control tag (cr_drain.c): past the tags message logging
 * takes from PHX_CTRL_CR_LAST + 1 (core/mlog_int.h), inside the recovery
 * range. */
enum { CR_DRAIN = PHX_CTRL_CR_DRAIN };
typedef struct cr_drain cr_drain_t;

/* A blob whose chunks the transport still references (zero-copy sends):
 * the store must neither reuse nor free it until the last one is released,
 * so a blob it drops meanwhile is orphaned here and freed then. Pins hold
 * no pointer to cr_t: the transport outlives it at shutdown. */
typedef struct pin {
    void *blob;
    int refs, orphan, detached;   /* detached: cr_t is gone, the last release frees the pin */
    struct pin *next;
} pin_t;

/* One blob in transit in chunks (core/cr_bulk.c). */
enum { BK_COPY, BK_XFER, BK_MIG };
typedef struct bulk {
    int peer, kind, key;        /* key: the rank whose state it is */
    uint64_t id, epoch;
    const uint8_t *src;         /* sender: the blob (owned by the store) */
    uint8_t *dst;               /* receiver: the buffer being filled (owned) */
    size_t total, off, acked;   /* receiver: off = bytes received */
    int claimed;                /* receiver: the transport is writing a chunk into dst */
    phx_net_t *net;             /* with claimed: whom to tell before dst goes */
} bulk_t;

/* Worker pause (cr_pause.c): the barrier the workers park at. */
typedef struct cr_pause {
    uv_async_t async;           /* workers -> comm: everyone paused */
    pthread_mutex_t mu;         /* pause barrier */
    pthread_cond_t cv;
    uint64_t gen;               /* pause generation: bumped by every resume */
    uint64_t *wgen;             /* per worker: generation it is paused in, or 0 */
    struct cds_wfcq_head **lh;  /* each paused worker's unhandled batch */
    struct cds_wfcq_tail **lt;
    int paused;                 /* comm's view: all workers parked */
} cr_pause_t;

/* Bulk transfer (cr_bulk.c), comm thread. */
typedef struct cr_bulk {
    bulk_t *tx, *rx;            /* transfers in progress */
    pin_t *pins;                /* blobs referenced by zero-copy chunks */
    int ntx, nrx, captx, caprx;
} cr_bulk_t;

/* Disk checkpoints (core/ckpt_disk.h). */
typedef struct cr_disk {
    const char *dir;            /* NULL: memory only */
    uint64_t tag;               /* program tag: foreign checkpoints are refused */
    uint64_t epoch;             /* coordinator: epoch whose files are being written */
    uint8_t *ok;
} cr_disk_t;

/* A dead node's copy shipped by its buddy to the other hosts of its
 * slices (RB_XFER), per dead rank: the epoch it belongs to and the blob. */
typedef struct cr_xfer {
    void **blob;
    size_t *len;
    uint64_t *epoch;
} cr_xfer_t;

/* restart-on=respawn (cr_rejoin.c): a lost rank comes back as a new
 * incarnation and the recovery round takes it in (its old incarnation
 * stays dead); message logging takes it in at a commit instead, and the
 * next checkpoint moves slices home (cr_home.c). The state and the
 * decisions are the machine's (ft/ckpt/rejoin.h). */
typedef struct cr_rejoin {
    phx_ck_rj_t *m;
    uv_timer_t timer;           /* a lost rank must be back within startup-timeout */
} cr_rejoin_t;

/* Going home (cr_home.c): message logging with restart-on=respawn recovers
 * a loss on helpers without waiting for the lost rank; its new incarnation
 * is taken in at a later commit (hosting nothing), and the next
 * checkpoint's BEGIN carries the table that puts its slices back
 * (phx_ck_rj_home_plan). At that checkpoint's cut, with every marker in and
 * workers paused, each node ships the tasks that leave it and rebuilds the
 * rest (cr_migrate): the table changes between two consistent states, so
 * no frame can reach a task's old host afterwards (nothing to forward). A
 * failure before the commit rolls back globally (pr bit 2). The machine
 * holds the tables and what is rebuilt; here the transfers. */
typedef struct cr_home {
    void **out;                 /* per taker: the snapshot shipped (read until the commit) */
    void **in;                  /* per sender: its snapshot, to rebuild what it ships here */
    size_t *in_len;
    uint64_t *in_id;
    int migrating;              /* restore_blob runs for a move, not a restore */
} cr_home_t;

/* Termination by quiescence at the cut (ft/ckpt/quiet.h); cut = 0:
 * td=none, the job ends by phx_exit. */
typedef struct cr_probe {
    int cut;
    uint64_t queued;            /* messages queued here at this checkpoint's cut */
    phx_ck_quiet_t quiet;       /* coordinator */
    int on;                     /* coordinator: this checkpoint is a probe */
    int idle_sent;              /* last idle report sent (-1: none since a failure) */
    uv_timer_t timer;
} cr_probe_t;

typedef struct cr {
    phx_node_t *n;
    int self, size;
    uv_timer_t timer;           /* ckpt-interval */
    int open;
    cr_pause_t pause;
    int *ring, *loc, *buddy;
    uint8_t *dead;
    int ndead;
    enum phase phase;
    /* checkpoint in progress: the commit round's state (ft/ckpt/commit.h) */
    phx_ck_cm_t *cm;
    uint64_t ck_epoch;          /* phx_ck_cm_epoch at its BEGIN, for cr_recover.c's log line */
    uint64_t t_begin;
    uint64_t t_paused, t_marked, t_stored, t_acked;   /* phases of this checkpoint (events) */
    size_t ck_bytes;
    /* coordinator */
    /* the recovery round (ft/ckpt/recover.h): reports, decision, restore order */
    phx_ck_rec_t *rec;
    uint64_t t_fail;
    uint64_t t_decide;          /* the rollback decided (phx_metrics_recovered's phases) */
    phx_ck_filter_t filt;
    phx_ck_store_t store;
    /* Fault injection for tests (PHX_CKPT_DIE=RANK:EPOCH:POINT): this rank
     * raises SIGKILL at a protocol point, so a kill lands there by
     * construction; for rejoin, shipped and moved EPOCH is the
     * incarnation that dies; drain: when it stores its copy of a
     * checkpoint that carries a drain (EPOCH unused). */
    int die_point;              /* DIE_* */
    uint64_t die_epoch;
    cr_disk_t disk;
    int nhome;                  /* home ranks in loc: max(size, ranks of a restarted job) */
    int nloc;                   /* entries of loc: nhome * PHX_LOC_SLICES */
    cr_xfer_t xfer;
    cr_bulk_t bulk;
    int restarting;             /* started with restart=DIR, not restored yet */
    cr_rejoin_t rj;
    /* A mode layered on cr (message logging) hears of commits and
     * rollbacks, with the workers paused (phx_cr_listen). */
    phx_cr_listen_fn lis;
    void *lis_arg;
    /* Message logging: the first failure restores only the dead node's
     * tasks (survivors keep their state: the logs replay what it lost). */
    int partial_ok;             /* set by the layered mode */
    phx_cr_partial_fn when;     /* which losses a partial round recovers (NULL: one) */
    /* Since the last commit: bit 0, a round restored here and is not over
     * (or was global); bit 1, a partial round ended here (GO); bit 2, a
     * checkpoint moving slices home began here (mig). */
    int pr;
    phx_cr_rolls_fn rolls;      /* team logging: live ranks that roll back too */
    cr_home_t home;
    const int *enc_loc;         /* snapshot: NULL, or only what this table puts on enc_to */
    int enc_to;
    int ck_hold, ck_deferred;   /* phx_cr_hold; a checkpoint asked for meanwhile */
    cr_probe_t probe;
    cr_drain_t *dr;             /* the drain (cr_drain.c) */
} cr_t;

enum { DIE_NONE, DIE_STORED, DIE_ROLLBACK, DIE_REJOIN, DIE_SHIPPED, DIE_MOVED, DIE_COMMIT, DIE_DRAIN };

enum { BK_TX = 1, BK_RX = 2 };

/* cr.c: configuration, hooks, control dispatch, sending */
int cr_dead_since(const cr_t *c, const phx_ck_copy_t *slot, uint8_t *since);
int cr_rolls_back(const cr_t *c, int r);
int cr_coord(const cr_t *c);
void cr_ctl(cr_t *c, int peer, int tag, uint64_t id, const void *buf, size_t len);
/* Test hook (PHX_CKPT_DIE=RANK:EPOCH:commit): the coordinator sends the
 * COMMIT of checkpoint id to every live member but the highest, then dies
 * once those frames are written. Returns 1 when it did (the caller sends
 * nothing more), 0 otherwise. */
int cr_die_mid_commit(cr_t *c, uint64_t id);
void cr_ctl_all(cr_t *c, int tag, uint64_t id, const void *buf, size_t len, int with_self);
void cr_fatal(cr_t *c, int code, const char *fmt, const char *what);
void cr_progress(cr_t *c);

/* cr_pause.c: worker pause */
void cr_pause_workers(cr_t *c);
void cr_resume_workers(cr_t *c);
void cr_worker_pause(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt);
void cr_on_async(uv_async_t *a);

/* cr_bulk.c: chunked transfer */
int cr_pin_keep(void *ctx, void *blob);
int cr_bulk_send(cr_t *c, int kind, int peer, int key, uint64_t id, uint64_t epoch, const void *blob,
                 size_t len);
void cr_bulk_drop(cr_t *c, int kind, int which);
void cr_on_cack(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len);
uint8_t *cr_rx_claim(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p, void **tok);
void cr_rx_claimed(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p, void *tok, int ok);
void cr_on_chunk(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len);

/* cr_snap.c: snapshot codec and restore */
uint16_t cr_blob_creator(const void *blob, size_t len);
int cr_snapshot(cr_t *c, void **out, size_t *len);
void cr_discard_all(cr_t *c, int moving);
uint32_t cr_blob_seq(const void *blob, size_t len);
void cr_seq_at_least(phx_node_t *n, uint32_t seq);
int cr_restore_blob(cr_t *c, const void *blob, size_t len, int own, const int *keep, uint32_t *ntasks);
void *cr_empty_blob(cr_t *c, uint64_t e, size_t *len);

/* cr_round.c: the commit round, disk copy, idle probes */
void cr_begin_checkpoint(cr_t *c);
void cr_on_begin(cr_t *c, uint64_t id, const uint8_t *p, size_t len);
void cr_ck_progress(cr_t *c);
void cr_on_ready(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len);
void cr_on_ack(cr_t *c, uint64_t id);
int cr_ck_failure(void *st, int rank);
void cr_maybe_probe(cr_t *c);
void cr_on_idle_timer(uv_timer_t *t);
void cr_write_disk(cr_t *c, uint64_t e);
void cr_on_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len);
void cr_on_disk_ok(cr_t *c, int peer, uint64_t e);

/* cr_home.c: the move home */
int cr_migrate(cr_t *c);
void cr_mig_reset(cr_t *c);

/* cr_recover.c: the recovery round */
int cr_adopt_epoch(cr_t *c, uint64_t e, void *blob, size_t len);
void cr_xfer_clear(cr_t *c);
void cr_rb_progress(cr_t *c);
void cr_rb_try_decide(cr_t *c);
void cr_ctl_eset(cr_t *c, int tag, uint64_t id, uint64_t e, int flags, int joins, const int *loc,
                 const int *buddy);
void cr_send_decision(cr_t *c, uint64_t e, int disk);
int cr_on_failure(void *st, int rank);
void cr_on_decide(cr_t *c, uint64_t round, const uint8_t *p, size_t len);
void cr_on_go(cr_t *c, uint64_t round);
void cr_on_state(cr_t *c, int peer, const uint8_t *p, size_t len);
void cr_on_done(cr_t *c, int peer, uint64_t round);
void cr_rb_restored(cr_t *c);
/* The decided rollback: its epoch, and whether it is a partial round. */
static inline uint64_t cr_rb_epoch(const cr_t *c) { return phx_ck_rec_epoch(c->rec); }
static inline int cr_rb_partial(const cr_t *c) { return !!(phx_ck_rec_flags(c->rec) & PHX_CK_D_PARTIAL); }

/* cr_rejoin.c: rejoin (the machine: ft/ckpt/rejoin.h) */
phx_ck_rj_view_t cr_rj_view(const cr_t *c);
void cr_rj_run(cr_t *c, phx_ck_rj_out_t *o);
void cr_rejoin_restore(cr_t *c);
int cr_joins_ready(const cr_t *c);
void cr_on_peer_up(void *st, int peer, uint32_t inc);
void cr_rj_failure(cr_t *c, int rank);
void cr_on_rj_timer(uv_timer_t *t);
void cr_on_join(cr_t *c, int peer, uint64_t x, const uint8_t *p, size_t len);
int cr_take_in(cr_t *c, const phx_ck_eset_t *m);
void cr_join_at_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len);

/* cr_drain.c: a node told to stop leaves at a cut */
int cr_drain_init(cr_t *c);
void cr_drain_stop(cr_t *c);   /* closes its handle (cr_stop) */
void cr_drain_free(cr_t *c);
int cr_drain_request(void *st, int why);
void cr_drain_ctl(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len);
int cr_drain_plan(cr_t *c, uint64_t id, int32_t *b, const int **table);
int cr_drain_commit(cr_t *c, uint64_t id);
void cr_drain_failure(cr_t *c, int rank);
void cr_drain_idle(cr_t *c);
int cr_drain_defer_begin(cr_t *c, uint64_t id, const uint8_t *p, size_t len);
/* Whether checkpoint id carries a drain plan here. */
int cr_drain_planned(const cr_t *c, uint64_t id);

#endif
