/* recovery=cr: coordinated blocking checkpoints kept in memory twice (own
 * copy + buddy copy), two-phase commit, rollback onto the survivors.
 * The decisions (buddies, relocation, commit, round agreement, stale-frame
 * filter, copy retention) are ft/ckpt's pure state machine; this file is the
 * glue: control frames, worker pause, task (de)serialisation, events.
 *
 * Checkpoint of epoch e (coordinator = lowest live rank):
 *   BEGIN(e)  every node pauses its workers at handler boundaries, pushes its
 *             outbox to the transport and sends MARK(e) on every link;
 *   MARK(e)   from every live peer: links are FIFO and paused workers send
 *             nothing, so every message sent before the cut has arrived and
 *             sits in an inbox: the node serialises tasks + queued messages
 *             (a consistent global state), keeps it and sends a copy to
 *             its buddy in chunks (CK_CHUNK, acked by CK_CACK), which ACKs
 *             once it holds the whole;
 *   READY(e)  to the coordinator once both copies exist;
 *   COMMIT(e) when every live node is READY (reduction at the coordinator);
 *             workers resume. e-1 is kept until then.
 * Failure: every survivor pauses and reports STATE(dead set, committed) to
 * the coordinator, which decides (epoch E = max committed) once all report
 * the same set; DECIDE -> every node discards its state, sends a rollback
 * MARK on every link (earlier frames from that peer are stale and dropped),
 * restores E; the dead node's slices of tasks spread over the survivors
 * (relocation table (home, slice) -> host): its buddy restores its share and
 * ships the copy (RB_XFER) to the other new hosts; DONE -> GO. A new failure at any point
 * restarts the round. Then a fresh checkpoint re-doubles the moved state. */
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt_disk.h"
#include "core/ft.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/node.h"
#include "core/cr.h"
#include "core/recovery.h"
#include "ft/ckpt/ckpt.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/member.h"
#include "ft/ckpt/quiet.h"
#include "ft/hb/ring.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

extern phx_type_t phx_types[PHX_MAX_TYPES];
extern int phx_ntypes;

enum {
    CK_REQ = PHX_CTRL_REC_FIRST, CK_BEGIN, CK_MARK, RB_JOIN, CK_ACK, CK_READY, CK_COMMIT,
    RB_STATE, RB_DECIDE, RB_MARK, RB_DONE, RB_GO, RB_ABORT, CK_DISK, CK_CHUNK, CK_CACK, CK_IDLE,
};

enum phase { PH_IDLE, PH_CK, PH_REC };

/* A blob whose chunks the transport still references (zero-copy sends):
 * the store must neither reuse nor free it until the last one is released,
 * so a blob it drops meanwhile is orphaned here and freed then. Pins hold
 * no pointer to cr_t: the transport outlives it at shutdown. */
typedef struct pin {
    void *blob;
    int refs, orphan, detached;   /* detached: cr_t is gone, the last release frees the pin */
    struct pin *next;
} pin_t;

/* One blob in transit in chunks (see "bulk transfer" below). */
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

typedef struct cr {
    phx_node_t *n;
    int self, size;
    uv_async_t async;           /* workers -> comm: everyone paused */
    uv_timer_t timer;           /* ckpt-interval */
    int open;
    pthread_mutex_t mu;         /* pause barrier */
    pthread_cond_t cv;
    uint64_t gen;               /* pause generation: bumped by every resume */
    uint64_t *wgen;             /* per worker: generation it is paused in, or 0 */
    struct cds_wfcq_head **lh;  /* each paused worker's unhandled batch */
    struct cds_wfcq_tail **lt;
    int paused;                 /* comm's view: all workers parked */
    int *ring, *loc, *buddy;
    uint8_t *dead;
    int ndead;
    enum phase phase;
    /* checkpoint in progress */
    uint64_t ck_id, ck_epoch, t_begin;
    uint64_t t_paused, t_marked, t_stored, t_acked;   /* phases of this checkpoint (events) */
    int marks_sent, snapped, acked, ready_sent;
    size_t ck_bytes;
    /* coordinator */
    phx_ck_commit_t commit;
    uint64_t commit_id;
    phx_ck_round_t round;
    int decided_ndead;          /* round already decided (-1: none) */
    uint8_t *done;              /* DONE flags of the decided round */
    /* rollback at this node */
    int state_sent, have_decision, restored;
    uint64_t rb_epoch;
    uint64_t t_fail;
    uint64_t t_decide;          /* the rollback decided (phx_metrics_recovered's phases) */
    phx_ck_filter_t filt;
    phx_ck_store_t store;
    /* Fault injection for tests (PHX_CKPT_DIE=RANK:EPOCH:POINT): this rank
     * raises SIGKILL at a protocol point, so a kill lands there by
     * construction; for rejoin, shipped and moved EPOCH is the
     * incarnation that dies. */
    int die_point;              /* DIE_* */
    uint64_t die_epoch;
    /* disk checkpoints (core/ckpt_disk.h) */
    const char *dir;            /* NULL: memory only */
    uint64_t tag;               /* program tag: foreign checkpoints are refused */
    int nhome;                  /* home ranks in loc: max(size, ranks of a restarted job) */
    int nloc;                   /* entries of loc: nhome * PHX_LOC_SLICES */
    /* a dead node's copy shipped by its buddy to the other hosts of its
     * slices (RB_XFER), per dead rank: the epoch it belongs to and the blob */
    void **xfer;
    size_t *xfer_len;
    uint64_t *xfer_epoch;
    uint8_t *xfer_done;         /* this round: restored from xfer[x] */
    bulk_t *tx, *rx;            /* transfers in progress (comm thread) */
    pin_t *pins;                /* blobs referenced by zero-copy chunks (comm thread) */
    int ntx, nrx, captx, caprx;
    int restored_own;           /* this round: own + buddy share restored, copies shipped */
    int restarting;             /* started with restart=DIR, not restored yet */
    uint64_t disk_epoch;        /* coordinator: epoch whose files are being written */
    uint8_t *disk_ok;
    int rb_disk;                /* the decided rollback restores from disk */
    /* restart-on=respawn: a lost rank comes back as a new incarnation and
     * the recovery round takes it in (its old incarnation stays dead). */
    int respawn;
    int joining;                /* this process is such a newcomer, not taken in yet */
    uint16_t view;              /* membership view of the detector (ft/hb) */
    phx_ck_join_t join;         /* coordinator: newcomers, who has them connected */
    uint32_t *rj_inc;           /* per rank: its newcomer's incarnation, connected here */
    uint32_t *rj_new;           /* take_in: per rank, the incarnation taken in (0: none) */
    uint8_t *lost;              /* this round: ranks whose state comes from the buddy copy */
    uint8_t *fresh;             /* taken in this round: not coordinator before GO */
    int *rj_loc, *rj_buddy;     /* joining: the epoch's tables, from DECIDE */
    uv_timer_t rj_timer;        /* a lost rank must be back within startup-timeout */
    /* A mode layered on cr (message logging) hears of commits and
     * rollbacks, with the workers paused (phx_cr_listen). */
    phx_cr_listen_fn lis;
    void *lis_arg;
    /* Message logging: the first failure restores only the dead node's
     * tasks (survivors keep their state: the logs replay what it lost). */
    int partial_ok;             /* set by the layered mode */
    int rb_partial;             /* the decided round is partial */
    int rb_seq;                 /* ... and sequential: only what the dead ranks host now moves */
    phx_cr_partial_fn when;     /* which losses a partial round recovers (NULL: one) */
    /* Since the last commit: bit 0, a round restored here and is not over
     * (or was global); bit 1, a partial round ended here (GO); bit 2, a
     * checkpoint moving slices home began here (mig). */
    int pr;
    uint8_t *rep_pr;            /* coordinator: each reporter's pr (RB_STATE) */
    phx_cr_rolls_fn rolls;      /* team logging: live ranks that roll back too */
    /* Going home: message logging with restart-on=respawn recovers a loss
     * on helpers without waiting for the lost rank; its new incarnation is
     * taken in at a later commit (hosting nothing), and the next checkpoint's
     * BEGIN carries the table that puts its slices back (home_table). At that
     * checkpoint's cut, with every marker in and workers paused, each node
     * ships the tasks that leave it and rebuilds the rest (migrate): the
     * table changes between two consistent states, so no frame can reach a
     * task's old host afterwards (nothing to forward). A failure before the
     * commit rolls back globally (pr bit 2). */
    int mig;                    /* 1: this checkpoint moves slices, 2: shipped here */
    int *mig_loc, *mig_from;    /* the table after and before it */
    void **mig_out;             /* per taker: the snapshot shipped (read until the commit) */
    void **mig_in;              /* per sender: its snapshot, to rebuild what it ships here */
    size_t *mig_in_len;
    uint64_t *mig_in_id;
    uint8_t *mig_in_done;
    int migrating;              /* restore_blob runs for a move, not a restore */
    const int *enc_loc;         /* snapshot: NULL, or only what this table puts on enc_to */
    int enc_to;
    int ck_hold, ck_deferred;   /* phx_cr_hold; a checkpoint asked for meanwhile */
    /* Termination by quiescence at the cut (ft/ckpt/quiet.h); cut = 0:
     * td=none, the job ends by phx_exit. */
    int cut;
    uint64_t ck_queued;         /* messages queued here at this checkpoint's cut */
    phx_ck_quiet_t quiet;       /* coordinator */
    int probe;                  /* coordinator: this checkpoint is a probe */
    int idle_sent;              /* last idle report sent (-1: none since a failure) */
    uv_timer_t idle_timer;
} cr_t;

void phx_cr_listen(void *st, phx_cr_listen_fn fn, void *arg, int partial)
{
    cr_t *c = st;
    c->lis = fn;
    c->lis_arg = arg;
    c->partial_ok = partial;
}

int phx_cr_dead(void *st, int r)
{
    const cr_t *c = st;
    return r >= 0 && r < c->size && c->dead[r];
}

void phx_cr_partial_rolls(void *st, phx_cr_rolls_fn fn)
{
    ((cr_t *)st)->rolls = fn;
}

void phx_cr_partial_when(void *st, phx_cr_partial_fn fn)
{
    ((cr_t *)st)->when = fn;
}

/* since[r] = 1 for each rank dead since epoch e: a rank dead before e hosts
 * no slice in e's table (relocated), so these are the ranks still in it;
 * every node's copy of e has the same table. Returns their number. */
static int dead_since(const cr_t *c, const phx_ck_copy_t *slot, uint8_t *since)
{
    int k = 0;
    for (int r = 0; r < c->size; r++) {
        since[r] = 0;
        for (int i = 0; slot && c->dead[r] && i < c->nloc && !since[r]; i++)
            since[r] = slot->loc[i] == r;
        k += since[r];
    }
    return k;
}

int phx_cr_lost_since(void *st, uint8_t *since)
{
    cr_t *c = st;
    return dead_since(c, phx_ck_store_get(&c->store, c->rb_epoch), since);
}

/* In a partial round: does live rank r roll its own tasks back too? */
static int rolls_back(const cr_t *c, int r)
{
    return c->rolls && c->rolls(c->lis_arg, r);
}

static void begin_checkpoint(cr_t *c);

void phx_cr_hold(void *st, int hold)
{
    cr_t *c = st;
    c->ck_hold = hold;
    if (!hold && c->ck_deferred) {
        c->ck_deferred = 0;
        begin_checkpoint(c);
    }
}

enum { DIE_NONE, DIE_STORED, DIE_ROLLBACK, DIE_REJOIN, DIE_SHIPPED, DIE_MOVED };

static int coord(const cr_t *c)
{
    for (int r = 0; r < c->size; r++)
        if (!c->dead[r] && !c->fresh[r])
            return r;
    return -1;
}

/* ---- sending ------------------------------------------------------------- */

static void dispatch(cr_t *c, int peer, uint32_t tag, uint64_t id, const uint8_t *p, size_t len);
static void fatal(cr_t *c, int code, const char *fmt, const char *what);

/* A control message: its argument id (ckpt_msg.h, control head) and body. */
static void ctl(cr_t *c, int peer, int tag, uint64_t id, const void *buf, size_t len)
{
    if (peer == c->self) {
        dispatch(c, c->self, (uint32_t)tag, id, buf, len);
        return;
    }
    uint8_t head[PHX_CK_CTL_HEAD];
    phx_ck_ctl_enc(head, id);
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, (uint32_t)tag, (uint64_t)c->self, (uint64_t)peer,
                                      (uint32_t)(sizeof head + len));
    int rc = phx_net_send(c->n->net, peer, &h, head, sizeof head, buf, len, 0);
    if (rc)
        PHX_DEBUG("ckpt", "control %d to rank %d not sent: %s", tag, peer, phx_strerror(rc));
}

/* To every live rank; self last, so local handling sees the others queued. */
static void ctl_all(cr_t *c, int tag, uint64_t id, const void *buf, size_t len, int with_self)
{
    for (int r = 0; r < c->size; r++)
        if (r != c->self && !c->dead[r])
            ctl(c, r, tag, id, buf, len);
    if (with_self)
        ctl(c, c->self, tag, id, buf, len);
}

/* ---- worker pause -------------------------------------------------------- */

static void pause_workers(cr_t *c)
{
    phx_node_t *n = c->n;
    if (atomic_load(&n->rec_pause))
        return;
    c->paused = 0;
    atomic_store(&n->rec_pause, 1);
    for (int i = 0; i < n->nworkers; i++)
        phx_worker_wake(&n->workers[i]);
}

static void resume_workers(cr_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->gen++;
    atomic_store(&c->n->rec_pause, 0);
    c->paused = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Under mu: every worker is parked in the current generation. */
static int all_paused(const cr_t *c)
{
    for (int i = 0; i < c->n->nworkers; i++)
        if (c->wgen[i] != c->gen)
            return 0;
    return atomic_load(&c->n->rec_pause);
}

static void cr_worker_pause(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt)
{
    cr_t *c = st;
    pthread_mutex_lock(&c->mu);
    uint64_t g = c->gen;
    c->lh[w->id] = lh;
    c->lt[w->id] = lt;
    c->wgen[w->id] = g;
    if (all_paused(c))
        uv_async_send(&c->async);
    /* Released by a resume (new generation), even if another pause
     * follows at once: then the worker comes back here for it. */
    while (c->gen == g && !atomic_load(&c->n->stopping))
        pthread_cond_wait(&c->cv, &c->mu);
    c->wgen[w->id] = 0;
    pthread_mutex_unlock(&c->mu);
}

static void progress(cr_t *c);

static void on_async(uv_async_t *a)
{
    cr_t *c = a->data;
    pthread_mutex_lock(&c->mu);
    int all = all_paused(c);
    pthread_mutex_unlock(&c->mu);
    if (all && !c->paused) {
        c->paused = 1;
        progress(c);
    }
}

/* ---- bulk transfer --------------------------------------------------------
 * A blob (a buddy copy: BK_COPY; a dead node's copy shipped to a new host of
 * its tasks: BK_XFER) travels in chunks of at most CHUNK bytes with at most
 * WINDOW bytes unacknowledged: the transport queues a bounded amount whatever
 * the blob's size, so a node's state need not fit in max-frame, and the
 * receiver copies each chunk straight into the final buffer. Links are FIFO:
 * chunks arrive in order; one starting at offset 0 restarts a transfer.
 * CK_CHUNK: the transfer id (control head), a phx_ck_chunk_t, data.
 * CK_CACK: the id, a phx_ck_cack_t. CHUNK_HDR: a chunk frame's payload
 * ahead of its data. */
#define CHUNK_HDR (PHX_CK_CTL_HEAD + PHX_CK_CHUNK_HDR)
#define CHUNK ((size_t)1 << 20)
/* Chunks are zero-copy, so the window costs no memory beyond the kernel's
 * socket buffers: a wide one saves round trips (each a wake-up of both
 * comm threads, milliseconds on a loaded host). 16 against 4 chunks,
 * interleaved pairs, 2 cores at load average 28: commit 1.37x faster at
 * 32 MiB per node (7 pairs), 1.06x at 8 MiB (8 pairs). */
#define WINDOW (16 * CHUNK)

static size_t chunk_size(const cr_t *c)
{
    size_t lim = (size_t)c->n->cfg.max_frame - CHUNK_HDR;
    return lim < CHUNK ? lim : CHUNK;
}

static bulk_t *bulk_find(bulk_t *v, int nv, int peer, int kind, int key)
{
    for (int i = 0; i < nv; i++)
        if (v[i].peer == peer && v[i].kind == kind && v[i].key == key)
            return &v[i];
    return NULL;
}

static bulk_t *bulk_add(bulk_t **v, int *nv, int *cap)
{
    if (*nv == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        bulk_t *g = realloc(*v, (size_t)nc * sizeof *g);
        if (!g)
            return NULL;
        *v = g;
        *cap = nc;
    }
    bulk_t *b = &(*v)[(*nv)++];
    memset(b, 0, sizeof *b);
    return b;
}

static void bulk_del(bulk_t *v, int *nv, bulk_t *b)
{
    if (b->claimed)
        phx_net_unclaim(b->net, b->peer);   /* before dst goes */
    free(b->dst);
    *b = v[--*nv];
}

static void pin_release(void *arg)
{
    pin_t *p = arg;
    if (--p->refs)
        return;
    if (p->orphan)
        free(p->blob);
    p->orphan = 0;
    p->blob = NULL;
    if (p->detached)
        free(p);
}

static pin_t *pin_get(cr_t *c, void *blob)
{
    pin_t *free_one = NULL;
    for (pin_t *p = c->pins; p; p = p->next) {
        if (p->refs && p->blob == blob)
            return p;
        if (!p->refs)
            free_one = p;
    }
    if (!free_one) {
        if (!(free_one = calloc(1, sizeof *free_one)))
            return NULL;
        free_one->next = c->pins;
        c->pins = free_one;
    }
    free_one->blob = blob;
    return free_one;
}

/* Store hook: a blob still referenced by the transport is not pooled. */
static int pin_keep(void *ctx, void *blob)
{
    for (pin_t *p = ((cr_t *)ctx)->pins; p; p = p->next)
        if (p->refs && p->blob == blob) {
            p->orphan = 1;
            return 1;
        }
    return 0;
}

/* Bytes queued at the transport for the peer, not yet written, beyond
 * which no more chunks are queued. A chunk is read twice there (its
 * checksum when queued, the kernel's copy when written): queued just ahead
 * of its write, the second read finds it in cache. A transfer with nothing
 * in flight always queues one, so its ack pumps again. */
#define AHEAD (2 * CHUNK)

static void bulk_pump(cr_t *c, bulk_t *t)
{
    size_t cs = chunk_size(c);
    while (t->off < t->total && t->off - t->acked < WINDOW &&
           (t->off == t->acked || phx_net_queued(c->n->net, t->peer) < AHEAD)) {
        size_t k = t->total - t->off < cs ? t->total - t->off : cs;
        uint8_t pre[CHUNK_HDR];
        phx_ck_ctl_enc(pre, t->id);
        phx_ck_chunk_enc(pre + PHX_CK_CTL_HEAD, &(phx_ck_chunk_t){ .kind = (uint8_t)t->kind, .key = t->key,
                                                                   .epoch = t->epoch, .total = t->total,
                                                                   .off = t->off });
        phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_CTRL, CK_CHUNK, (uint64_t)c->self, (uint64_t)t->peer,
                                          (uint32_t)(CHUNK_HDR + k));
        /* A buddy copy is the store's own blob, which the pins keep alive:
         * written from where it is. A shipped copy is copied. */
        pin_t *pn = t->kind == BK_COPY ? pin_get(c, (void *)(uintptr_t)t->src) : NULL;
        int rc;
        if (pn) {
            pn->refs++;
            rc = phx_net_send_ref(c->n->net, t->peer, &h, pre, sizeof pre, t->src + t->off, k, 0, pin_release, pn);
        } else {
            rc = phx_net_send(c->n->net, t->peer, &h, pre, sizeof pre, t->src + t->off, k, 0);
        }
        if (rc) {
            PHX_DEBUG("ckpt", "chunk to rank %d not sent: %s", t->peer, phx_strerror(rc));
            return;   /* the peer is dead: its failure notice ends the transfer */
        }
        t->off += k;
    }
}

/* Sends blob (kept alive by the caller until the transfer ends) to peer. */
static int bulk_send(cr_t *c, int kind, int peer, int key, uint64_t id, uint64_t epoch, const void *blob,
                     size_t len)
{
    bulk_t *t = bulk_find(c->tx, c->ntx, peer, kind, key);
    if (!t && !(t = bulk_add(&c->tx, &c->ntx, &c->captx)))
        return PHX_ENOMEM;
    *t = (bulk_t){ .peer = peer, .kind = kind, .key = key, .id = id, .epoch = epoch, .src = blob, .total = len };
    bulk_pump(c, t);
    return 0;
}

enum { BK_TX = 1, BK_RX = 2 };

/* Ends the transfers (which: BK_TX | BK_RX) of one kind (any: -1). */
static void bulk_drop(cr_t *c, int kind, int which)
{
    for (int i = c->ntx - 1; i >= 0 && (which & BK_TX); i--)
        if (kind < 0 || c->tx[i].kind == kind)
            bulk_del(c->tx, &c->ntx, &c->tx[i]);
    for (int i = c->nrx - 1; i >= 0 && (which & BK_RX); i--)
        if (kind < 0 || c->rx[i].kind == kind)
            bulk_del(c->rx, &c->nrx, &c->rx[i]);
}

static void on_cack(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_cack_t a;
    if (phx_ck_cack_dec(p, len, &a))
        return;
    bulk_t *t = bulk_find(c->tx, c->ntx, peer, a.kind, a.key);
    uint64_t got = a.got;
    if (!t || t->id != id || got > t->off || got < t->acked)
        return;   /* an ended or restarted transfer */
    t->acked = got;
    if (t->acked == t->total)
        bulk_del(c->tx, &c->ntx, t);
    else
        bulk_pump(c, t);
}

static void on_bulk_done(cr_t *c, bulk_t *r);

static void chunk_in(cr_t *c, int peer, bulk_t *r, size_t k);

/* Zero-copy receive (phx_net_cb_t.on_claim): a chunk that continues a
 * transfer in progress lands straight in the copy being filled. Only
 * those: a claim must change nothing, as the frame may yet fail its
 * checksum (a first chunk, which may restart a transfer, is copied). */
static uint8_t *cr_rx_claim(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p, void **tok)
{
    cr_t *c = st;
    (void)tok;
    phx_ck_ctl_t m;
    phx_ck_chunk_t ch;
    /* Only the head is in: the decoders read no further than it. */
    if (h->tag != CK_CHUNK || h->len < PHX_NET_ZC_HEAD || phx_ck_ctl_dec(p, h->len, &m) ||
        phx_ck_chunk_dec(m.body, m.len, &ch))
        return NULL;
    uint64_t total = ch.total, off = ch.off;
    bulk_t *r = bulk_find(c->rx, c->nrx, peer, ch.kind, ch.key);
    if (!r || !off || r->claimed || r->id != m.arg || r->off != off || r->total != total)
        return NULL;
    r->claimed = 1;
    r->net = c->n->net;
    return r->dst + off + (PHX_NET_ZC_HEAD - CHUNK_HDR);
}

static void cr_rx_claimed(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p, void *tok, int ok)
{
    cr_t *c = st;
    (void)tok;
    /* Still there: dropping a claimed transfer unclaims it first. */
    phx_ck_ctl_t m;
    phx_ck_chunk_t ch;
    if (phx_ck_ctl_dec(p, h->len, &m) || phx_ck_chunk_dec(m.body, m.len, &ch))
        return;
    bulk_t *r = bulk_find(c->rx, c->nrx, peer, ch.kind, ch.key);
    if (!r || !r->claimed)
        return;
    r->claimed = 0;
    if (!ok)
        return;   /* resent later */
    memcpy(r->dst + r->off, p + CHUNK_HDR, PHX_NET_ZC_HEAD - CHUNK_HDR);
    chunk_in(c, peer, r, h->len - CHUNK_HDR);
}

static void on_chunk(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_chunk_t ch;
    if (phx_ck_chunk_dec(p, len, &ch))
        return;
    int kind = ch.kind, key = ch.key;
    uint64_t epoch = ch.epoch, total = ch.total, off = ch.off;
    size_t k = len - PHX_CK_CHUNK_HDR;
    if ((kind != BK_COPY && kind != BK_XFER && kind != BK_MIG) || key < 0 || key >= c->size)
        return;
    bulk_t *r = bulk_find(c->rx, c->nrx, peer, kind, key);
    if (off == 0) {
        if (r)
            bulk_del(c->rx, &c->nrx, r);
        size_t cap;
        uint8_t *buf = kind == BK_COPY && phx_ck_store_open(&c->store, epoch)
                           ? phx_ck_store_buf(&c->store, total, &cap) : kind != BK_COPY ? malloc(total ? total : 1) : NULL;
        if (!buf) {
            PHX_WARN("ckpt", "copy of rank %d's epoch %llu not kept (no slot or no memory)", key,
                     (unsigned long long)epoch);
            return;
        }
        if (!(r = bulk_add(&c->rx, &c->nrx, &c->caprx))) {
            free(buf);
            fatal(c, 1, "%s", "out of memory receiving a checkpoint");
            return;
        }
        *r = (bulk_t){ .peer = peer, .kind = kind, .key = key, .id = id, .epoch = epoch, .dst = buf, .total = total };
    }
    if (!r || r->id != id || r->off != off || r->total != total || r->claimed)
        return;   /* the rest of a transfer whose start was refused or restarted */
    memcpy(r->dst + off, p + PHX_CK_CHUNK_HDR, k);
    chunk_in(c, peer, r, k);
}

/* k more bytes of r are in its buffer: acknowledged, and the copy is done
 * when whole. */
static void chunk_in(cr_t *c, int peer, bulk_t *r, size_t k)
{
    uint64_t id = r->id;
    int kind = r->kind, key = r->key;
    r->off += k;
    uint8_t ack[PHX_CK_CACK_LEN];
    phx_ck_cack_enc(ack, &(phx_ck_cack_t){ .kind = (uint8_t)kind, .key = key, .got = r->off });
    ctl(c, peer, CK_CACK, id, ack, sizeof ack);
    if (r->off == r->total)
        on_bulk_done(c, r);
}

/* ---- serialisation ------------------------------------------------------- */

static void enc_msg(phx_wenc_t *e, const phx_msg_t *m)
{
    phx_ck_msgrec_enc(e, &(phx_ck_msgrec_t){ .kind = m->kind, .type = m->type_id, .src = m->hdr.src,
                                             .dst = m->hdr.dst, .ssn = m->hdr.ssn, .tag = m->hdr.tag,
                                             .len = m->hdr.len, .data = m->data });
}

static phx_msg_t *dec_msg(phx_wdec_t *d)
{
    phx_ck_msgrec_t r;
    if (phx_ck_msgrec_dec(d, &r) || (r.kind != PHX_MK_APP && r.kind != PHX_MK_SPAWN))
        return NULL;
    phx_msg_t *m = phx_msg_alloc(r.len);
    if (!m)
        return NULL;
    m->kind = r.kind;
    m->type_id = r.type;
    m->hdr = (phx_frame_hdr_t){ .src = r.src, .dst = r.dst, .ssn = r.ssn, .tag = r.tag, .len = r.len };
    m->peer = -1;   /* restored: not a remote arrival for the inbound counters */
    memcpy(m->data, r.data, r.len);
    return m;
}

static void enc_map(phx_wenc_t *e, const phx_map_t *m)
{
    phx_wenc_u32(e, (uint32_t)m->len);
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            phx_wenc_u64(e, m->keys[i]);
            phx_wenc_u64(e, m->vals[i]);
        }
}

static int dec_map(phx_wdec_t *d, phx_map_t *m)
{
    uint32_t k = phx_wdec_u32(d);
    for (uint32_t i = 0; i < k && !d->err; i++) {
        uint64_t key = phx_wdec_u64(d), v = phx_wdec_u64(d);
        uint64_t *s = key ? phx_map_put(m, key) : NULL;
        if (!s)
            return PHX_ENOMEM;
        *s = v;
    }
    return d->err;
}

static int host_in(const cr_t *c, const int *loc, phx_tid_t id);

/* Whether the snapshot being taken holds what belongs to task id. */
static int enc_keep(const cr_t *c, phx_tid_t id)
{
    return !c->enc_loc || host_in(c, c->enc_loc, id) == c->enc_to;
}

/* Only application messages: a PHX_MK_KICK (message logging's "offer the
 * held messages again") is no state, and dec_msg refuses it. */
static void enc_queue(const cr_t *c, phx_wenc_t *e, struct cds_wfcq_head *h, struct cds_wfcq_tail *t, uint32_t *k)
{
    struct cds_wfcq_node *qn;
    __cds_wfcq_for_each_blocking(h, t, qn) {
        const phx_msg_t *m = caa_container_of(qn, phx_msg_t, qn);
        if ((m->kind != PHX_MK_APP && m->kind != PHX_MK_SPAWN) || !enc_keep(c, m->hdr.dst))
            continue;
        enc_msg(e, m);
        (*k)++;
    }
}

static void enc_task(phx_wenc_t *e, const phx_task_t *t)
{
    const phx_type_t *ty = &phx_types[t->type];
    phx_ck_task_head_enc(e, &(phx_ck_task_head_t){ .id = t->id, .type = t->type, .rsn = t->rsn });
    enc_map(e, &t->out_ssn);
    enc_map(e, &t->in_ssn);
    uint8_t *lenp = phx_wenc_reserve(e, 4);
    if (!lenp)
        return;
    int k;
    if (ty->pack) {
        k = ty->pack(t->state, e->p, (size_t)(e->end - e->p));
    } else {
        k = (int)ty->state_size;
        if ((size_t)(e->end - e->p) < ty->state_size)
            k = PHX_ENOSPC;
        else
            memcpy(e->p, t->state, ty->state_size);
    }
    if (k < 0) {
        e->err = k == PHX_ENOSPC || k == PHX_ERANGE ? PHX_ENOSPC : k;
        return;
    }
    phx_wenc_patch_u32(lenp, (uint32_t)k);
    e->p += k;
    phx_wenc_u32(e, phx_held_len(&t->held));
    size_t i = 0;
    for (const phx_msg_t *x; (x = phx_held_next(&t->held, &i));)
        enc_msg(e, x);
}

/* Runs one section of the blob; when the buffer is too small, grows it
 * (realloc keeps what is encoded: no page is written twice) to twice its
 * size or to want bytes, whichever is more, and runs that section again,
 * so a first large checkpoint re-encodes one task at most per growth. */
typedef void (*enc_fn)(cr_t *c, phx_wenc_t *e, const void *arg);

static int enc_grow(cr_t *c, phx_wenc_t *e, enc_fn f, const void *arg, size_t want)
{
    size_t pos = (size_t)(e->p - e->start);
    for (;;) {
        f(c, e, arg);
        if (e->err != PHX_ENOSPC)
            return e->err;
        size_t cap = 2 * (size_t)(e->end - e->start);
        if (cap < want)
            cap = want;
        uint8_t *b = realloc(e->start, cap);
        if (!b)
            return PHX_ENOMEM;
        e->start = b;
        e->p = b + pos;
        e->end = b + cap;
        e->err = 0;
    }
}

static void sec_task(cr_t *c, phx_wenc_t *e, const void *t)
{
    (void)c;
    enc_task(e, t);
}

/* Queued messages, in arrival order per worker: batch remnants, inboxes,
 * early arrivals that beat a spawn. */
static void sec_queued(cr_t *c, phx_wenc_t *e, const void *unused)
{
    (void)unused;
    phx_node_t *n = c->n;
    uint8_t *cnt = phx_wenc_reserve(e, 4);
    uint32_t q = 0;
    for (int i = 0; i < n->nworkers && cnt; i++) {
        phx_worker_t *w = &n->workers[i];
        if (c->lh[i])
            enc_queue(c, e, c->lh[i], c->lt[i], &q);
        enc_queue(c, e, &w->ih, &w->it, &q);
        for (size_t k = 0; k < w->pending.cap; k++)
            if (w->pending.keys[k] && enc_keep(c, w->pending.keys[k]))
                for (phx_msg_t *x = (phx_msg_t *)(uintptr_t)w->pending.vals[k]; x; x = (phx_msg_t *)x->qn.next) {
                    enc_msg(e, x);
                    q++;
                }
    }
    if (!e->err)
        phx_wenc_patch_u32(cnt, q);
    c->ck_queued = q;
}

static void sec_gone(cr_t *c, phx_wenc_t *e, const void *unused)
{
    (void)unused;
    phx_node_t *n = c->n;
    uint8_t *cnt = phx_wenc_reserve(e, 4);
    uint32_t g = 0;
    for (int i = 0; i < n->nworkers && cnt; i++) {
        phx_map_t *m = &n->workers[i].gone;
        for (size_t k = 0; k < m->cap; k++)
            if (m->keys[k] && enc_keep(c, m->keys[k])) {
                phx_wenc_u64(e, m->keys[k]);
                g++;
            }
    }
    if (!e->err)
        phx_wenc_patch_u32(cnt, g);
}

/* A blob's head (ckpt_msg.h): rank, the creator its ids carry (node.h,
 * creator), spawn counter, task count; then the tasks, queued messages and
 * finished ids, each section led by its count. */
static void enc_head(phx_wenc_t *e, phx_node_t *n, uint32_t ntasks)
{
    phx_ck_blob_head_enc(e, &(phx_ck_blob_head_t){ .rank = (uint16_t)n->rank,
                                                   .creator = (uint16_t)atomic_load(&n->creator),
                                                   .seq = atomic_load(&n->next_seq), .ntasks = ntasks });
}

/* The creator a blob's ids carry. */
static uint16_t blob_creator(const void *blob, size_t len)
{
    phx_ck_blob_head_t h;
    return phx_ck_blob_head_get(blob, len, &h) ? 0 : h.creator;
}

/* Everything on this node that belongs to the application: tasks (with
 * their held-back messages), queued messages, finished ids, the spawn
 * counter. Workers are paused; the comm thread reads their structures.
 * e's buffer is malloc'd and may be replaced (grown). */
static int encode_node(cr_t *c, phx_wenc_t *e)
{
    phx_node_t *n = c->n;
    uint32_t nt = 0, done = 0;
    for (int i = 0; i < n->nworkers; i++) {
        const phx_map_t *m = &n->workers[i].tasks;
        for (size_t k = 0; k < m->cap; k++)
            nt += m->keys[k] && enc_keep(c, m->keys[k]);
    }
    enc_head(e, n, nt);
    int rc = e->err;
    for (int i = 0; i < n->nworkers && !rc; i++) {
        phx_map_t *m = &n->workers[i].tasks;
        for (size_t k = 0; k < m->cap && !rc; k++)
            if (m->keys[k] && enc_keep(c, m->keys[k])) {
                /* A first checkpoint has no earlier size to go by: doubling
                 * from 64 KiB copied and faulted in about twice the blob
                 * again (the buffers it outgrew). The tasks encoded so far
                 * extrapolate the whole, with the snapshot's margin. */
                size_t at = (size_t)(e->p - e->start), want = done ? at / done * nt : 0;
                rc = enc_grow(c, e, sec_task, (const phx_task_t *)(uintptr_t)m->vals[k], want + want / 4 + (1 << 16));
                done++;
            }
    }
    if (!rc)
        rc = enc_grow(c, e, sec_queued, NULL, 0);
    if (!rc)
        rc = enc_grow(c, e, sec_gone, NULL, 0);
    /* Held-back messages wait for a gap to fill: work still to do. */
    for (int i = 0; i < n->nworkers; i++) {
        phx_map_t *m = &n->workers[i].tasks;
        for (size_t k = 0; k < m->cap; k++)
            if (m->keys[k])
                c->ck_queued += phx_held_len(&((const phx_task_t *)(uintptr_t)m->vals[k])->held);
    }
    return rc;
}

static int snapshot(cr_t *c, void **out, size_t *len)
{
    /* Sized from the last snapshot (plus room for the header). */
    size_t cap = c->ck_bytes + c->ck_bytes / 4 + (1 << 16);
    uint8_t *buf = phx_ck_store_buf(&c->store, cap, &cap);
    if (!buf)
        return PHX_ENOMEM;
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    int rc = encode_node(c, &e);
    if (rc) {
        free(e.start);
        return rc;
    }
    *out = e.start;
    *len = (size_t)phx_wenc_end(&e);
    return 0;
}

/* ---- restore ------------------------------------------------------------- */

static void free_msg_counted(phx_node_t *n, phx_msg_t *m, int64_t *work, int64_t *inbound)
{
    (*work)++;
    if (m->peer >= 0 && m->peer != n->rank)
        *inbound += m->hdr.len;
    phx_msg_free(m);
}

static void drain_queue(phx_node_t *n, struct cds_wfcq_head *h, struct cds_wfcq_tail *t, int64_t *work,
                        int64_t *inbound)
{
    struct cds_wfcq_node *qn;
    while ((qn = __cds_wfcq_dequeue_blocking(h, t)))
        free_msg_counted(n, caa_container_of(qn, phx_msg_t, qn), work, inbound);
}

/* Drops every task and queued message of this node (the lost future);
 * moving: only the application's state, which a snapshot just took (the
 * outbox holds the comm thread's own calls then: they stay). */
static void discard_all(cr_t *c, int moving)
{
    phx_node_t *n = c->n;
    if (c->lis && !c->rb_partial && !moving)   /* a team-mate's rollback keeps its logs */
        c->lis(c->lis_arg, PHX_CR_ROLLBACK, c->rb_epoch);
    int64_t work = 0, inbound = 0, outw = 0, unused = 0;
    phx_node_batch_flush(n);
    if (!moving)
        drain_queue(n, &n->oh, &n->ot, &outw, &unused);
    for (int i = 0; i < n->nworkers; i++) {
        phx_worker_t *w = &n->workers[i];
        if (c->lh[i])
            drain_queue(n, c->lh[i], c->lt[i], &work, &inbound);
        drain_queue(n, &w->ih, &w->it, &work, &inbound);
        for (size_t k = 0; k < w->pending.cap; k++) {
            if (!w->pending.keys[k])
                continue;
            phx_msg_t *x = (phx_msg_t *)(uintptr_t)w->pending.vals[k];
            while (x) {
                phx_msg_t *nx = (phx_msg_t *)x->qn.next;
                int64_t dummy = 0;   /* pending messages were counted as handled already */
                free_msg_counted(n, x, &dummy, &dummy);
                x = nx;
            }
        }
        for (size_t k = 0; k < w->tasks.cap; k++)
            if (w->tasks.keys[k])
                phx_task_free((phx_task_t *)(uintptr_t)w->tasks.vals[k]);
        phx_map_free(&w->tasks);
        phx_map_free(&w->pending);
        phx_map_free(&w->gone);
    }
    atomic_fetch_sub(&n->work, work + outw);
    atomic_fetch_sub(&n->inbound, inbound);
}

/* The rank hosting task id under the table loc (nhome * slices entries). */
static int host_in(const cr_t *c, const int *loc, phx_tid_t id)
{
    int h = phx_tid_home(id);
    return h < 0 || h >= c->nhome ? -1 : loc[h * PHX_LOC_SLICES + phx_loc_slice(id)];
}

/* Rebuilds one task, or skips it when loc puts it on another rank. */
static int restore_task(cr_t *c, phx_wdec_t *d, const int *keep, uint32_t *nt)
{
    phx_node_t *n = c->n;
    phx_ck_task_head_t th;
    if (phx_ck_task_head_dec(d, &th))
        return PHX_EPROTO;
    phx_tid_t id = th.id;
    if (keep && host_in(c, keep, id) != c->self)
        return phx_ck_task_skip(d);   /* another rank hosts it (loc) */
    (*nt)++;
    uint16_t type = th.type;
    uint64_t rsn = th.rsn;
    if (type >= phx_ntypes || !id)
        return PHX_EPROTO;
    const phx_type_t *ty = &phx_types[type];
    phx_task_t *t = calloc(1, sizeof *t + ty->state_size);
    if (!t)
        return PHX_ENOMEM;
    t->id = id;
    t->type = type;
    t->rsn = rsn;
    int rc = dec_map(d, &t->out_ssn);
    if (!rc)
        rc = dec_map(d, &t->in_ssn);
    uint32_t sl = phx_wdec_u32(d);
    const uint8_t *sb = phx_wdec_take(d, sl);
    if (!rc && !sb)
        rc = PHX_EPROTO;
    if (!rc) {
        if (ty->unpack)
            rc = ty->unpack(t->state, sb, sl);
        else if (sl != ty->state_size)
            rc = PHX_EPROTO;
        else
            memcpy(t->state, sb, sl);
    }
    uint32_t nh = phx_wdec_u32(d);
    for (uint32_t i = 0; i < nh && !rc; i++) {
        phx_msg_t *m = dec_msg(d);
        if (!m) {
            rc = PHX_EPROTO;
            break;
        }
        if ((rc = phx_held_put(&t->held, m)) < 0)
            phx_msg_free(m);   /* PHX_EEXIST: a packed index never repeats a key */
    }
    phx_worker_t *w = &n->workers[phx_worker_of(n, id)];
    uint64_t *slot = rc ? NULL : phx_map_put(&w->tasks, id);
    if (!slot) {
        phx_task_free(t);   /* fini sees a zeroed or partly unpacked state */
        return rc ? rc : PHX_ENOMEM;
    }
    *slot = (uint64_t)(uintptr_t)t;
    /* A moved task's held messages are offered again: nothing else would
     * (the KICK that releases a replay is not packed). */
    if (c->migrating)
        return phx_held_len(&t->held) ? phx_node_kick(n, id) : 0;
    if (c->n->rec->on_restore)
        c->n->rec->on_restore(c, id);
    return 0;
}

/* Rebuilds the tasks and queued messages of one blob on this node.
 * own: the blob is this node's (its spawn counter comes back too). */
static uint32_t blob_seq(const void *blob, size_t len)
{
    phx_ck_blob_head_t h;
    return phx_ck_blob_head_get(blob, len, &h) ? 0 : h.seq;
}

/* Keeps the spawn counter ahead of every id this rank ever made. */
static void seq_at_least(phx_node_t *n, uint32_t seq)
{
    if (atomic_load(&n->next_seq) < seq)
        atomic_store(&n->next_seq, seq);
}

/* keep: NULL (every task of the blob), or a relocation table: only the
 * tasks and messages it places on this rank. */
static int restore_blob(cr_t *c, const void *blob, size_t len, int own, const int *keep, uint32_t *ntasks)
{
    phx_node_t *n = c->n;
    phx_wdec_t d;
    phx_wdec_init(&d, blob, len);
    phx_ck_blob_head_t head;
    if (phx_ck_blob_head_dec(&d, &head))
        return PHX_EPROTO;
    if (own) {
        atomic_store(&n->next_seq, head.seq);
        atomic_store(&n->creator, head.creator);
    }
    uint32_t nt = head.ntasks;
    for (uint32_t i = 0; i < nt; i++) {
        int rc = restore_task(c, &d, keep, ntasks);
        if (rc)
            return rc;
    }
    uint32_t nq = phx_wdec_u32(&d);
    for (uint32_t i = 0; i < nq; i++) {
        phx_msg_t *m = dec_msg(&d);
        if (!m)
            return PHX_EPROTO;
        if (keep && host_in(c, keep, m->hdr.dst) != c->self)
            phx_msg_free(m);
        else
            phx_node_enqueue_local(n, m);
    }
    uint32_t ng = phx_wdec_u32(&d);
    for (uint32_t i = 0; i < ng && !d.err; i++) {
        uint64_t id = phx_wdec_u64(&d);
        if (id && (!keep || host_in(c, keep, id) == c->self) && !phx_map_put(&n->workers[phx_worker_of(n, id)].gone, id))
            return PHX_ENOMEM;
    }
    return phx_wdec_end(&d, 1);
}

/* ---- checkpoint ------------------------------------------------------------ */

static void fatal(cr_t *c, int code, const char *fmt, const char *what)
{
    PHX_ERROR("ckpt", fmt, what);
    phx_node_exit(c->n, code, 1);
}

static void on_all_ready(cr_t *c, uint64_t id);
static void maybe_probe(cr_t *c);
static void ctl_eset(cr_t *c, int tag, uint64_t id, uint64_t e, int flags, int joins, const int *loc,
                     const int *buddy);
static int joins_ready(const cr_t *c);

/* The table that puts every slice whose home rank is live back on it
 * (from c->loc into t); 1 when some slice moves. Only where a partial round
 * can leave a live rank's slices elsewhere (message logging: see mig). */
static int home_table(const cr_t *c, int *t)
{
    int moves = 0;
    for (int i = 0; c->partial_ok && i < c->nloc; i++) {
        int h = i / PHX_LOC_SLICES;
        t[i] = c->loc[i];
        if (h < c->size && !c->dead[h] && t[i] != h) {
            t[i] = h;
            moves = 1;
        }
    }
    return moves;
}

static void begin_checkpoint(cr_t *c)
{
    if (c->phase != PH_IDLE || coord(c) != c->self || atomic_load(&c->n->stopping))
        return;
    uint64_t e = c->store.committed + 1;
    if (c->ck_hold) {   /* taken when the layered mode lets go (phx_cr_hold) */
        if (!c->ck_deferred)
            phx_evlog("ckpt_held", "\"epoch\":%llu", (unsigned long long)e);
        c->ck_deferred = 1;
        return;
    }
    uint64_t id = phx_ck_id((uint32_t)c->ndead, (uint32_t)e);
    int32_t *b = malloc((size_t)c->size * sizeof *b);
    if (!b) {
        fatal(c, 1, "%s", "out of memory starting a checkpoint");
        return;
    }
    for (int r = 0; r < c->size; r++)
        b[r] = c->dead[r] ? -1 : phx_ck_buddy(c->size, c->ring, c->dead, r);
    /* BEGIN: the buddies, then the table when slices go home. */
    size_t cap = ((size_t)c->size + (size_t)c->nloc) * 4;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        free(b);
        fatal(c, 1, "%s", "out of memory starting a checkpoint");
        return;
    }
    phx_ck_begin_t bm = { .buddy = b, .loc = home_table(c, c->mig_loc) ? c->mig_loc : NULL };
    long len = phx_ck_begin_enc(&bm, c->size, c->nloc, buf, cap);
    phx_ck_commit_begin(&c->commit, e);
    c->commit_id = id;
    phx_ck_quiet_begin(&c->quiet, id);
    ctl_all(c, CK_BEGIN, id, buf, (size_t)len, 1);
    free(buf);
    free(b);
}

static void on_begin(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_begin_t m;
    if (c->phase != PH_IDLE || (int)phx_ck_id_round(id) != c->ndead || phx_ck_begin_dec(p, len, c->size, c->nloc, &m))
        return;   /* a failure is being handled, or a stale round */
    for (size_t i = 0; i < m.table.n; i++) {
        int r = phx_wire_a32_i32(m.table, i);
        if (r < 0 || r >= c->size || c->dead[r]) {
            PHX_WARN("ckpt", "checkpoint %llu: BEGIN moves a slice to rank %d, not a live rank; ignored",
                     (unsigned long long)phx_ck_id_epoch(id), r);
            return;
        }
    }
    uint64_t e = phx_ck_id_epoch(id);
    phx_ck_copy_t *slot = phx_ck_store_open(&c->store, e);
    if (!slot) {
        fatal(c, 1, "%s", "checkpoint slot busy (internal error)");
        return;
    }
    for (int r = 0; r < c->size; r++) {
        c->buddy[r] = phx_wire_a32_i32(m.buddies, (size_t)r);
        slot->buddy[r] = c->buddy[r];
    }
    memcpy(slot->loc, c->loc, (size_t)c->nloc * sizeof *c->loc);
    if (m.table.n) {   /* slices go home at this cut: the epoch holds them there */
        for (int i = 0; i < c->nloc; i++)
            c->mig_loc[i] = phx_wire_a32_i32(m.table, (size_t)i);
        memcpy(c->mig_from, c->loc, (size_t)c->nloc * sizeof *c->loc);
        memcpy(slot->loc, c->mig_loc, (size_t)c->nloc * sizeof *c->loc);
        memset(c->mig_in_done, 0, (size_t)c->size);
        c->mig = 1;
        c->pr |= 4;
    }
    bulk_drop(c, BK_COPY, BK_TX);   /* an aborted attempt's, whose blob the store may drop */
    c->phase = PH_CK;
    c->ck_id = id;
    c->ck_epoch = e;
    c->marks_sent = c->snapped = c->acked = c->ready_sent = 0;
    c->t_begin = phx_now_ns();
    phx_evlog("ckpt_begin", "\"epoch\":%llu", (unsigned long long)e);
    pause_workers(c);
    progress(c);
}

/* Whether some slice moves from rank a to rank b at this cut. */
static int mig_moves(const cr_t *c, int a, int b)
{
    for (int i = 0; i < c->nloc; i++)
        if (c->mig_from[i] == a && c->mig_loc[i] == b)
            return 1;
    return 0;
}

/* At a moving checkpoint's cut (every marker in, workers paused): ships a
 * snapshot to each rank that takes some of this node's slices, rebuilds
 * what stays from it, switches the table, and rebuilds what the others
 * ship here. 1 once this node holds exactly its slices under mig_loc. */
static int migrate(cr_t *c)
{
    phx_node_t *n = c->n;
    int rc = 0;
    if (c->mig == 1) {
        c->mig = 2;
        /* One snapshot per taker, of what it takes; then, if any left, one
         * of what stays, from which this node is rebuilt. */
        size_t len = 0;
        uint32_t kept = 0, sent = 0;
        int leaves = 0;
        c->enc_loc = c->mig_loc;
        for (int r = 0; r < c->size && !rc; r++) {
            if (r == c->self || !mig_moves(c, c->self, r))
                continue;
            leaves = 1;
            c->enc_to = r;
            void *b = NULL;
            if (!(rc = snapshot(c, &b, &len))) {
                free(c->mig_out[r]);
                c->mig_out[r] = b;
                rc = bulk_send(c, BK_MIG, r, c->self, c->ck_id, c->ck_epoch, b, len);
            }
            phx_ck_blob_head_t bh;
            sent += b && !phx_ck_blob_head_get(b, len, &bh) ? bh.ntasks : 0;
        }
        if (leaves && !rc) {
            void *own = NULL;
            c->enc_to = c->self;
            rc = snapshot(c, &own, &len);
            if (!rc && c->die_point == DIE_SHIPPED && c->die_epoch == n->inc) {
                phx_net_flush(n->net);
                raise(SIGKILL);   /* test: its tasks on their way home, not yet rebuilt here */
            }
            if (!rc) {
                discard_all(c, 1);
                c->migrating = 1;
                rc = restore_blob(c, own, len, 1, NULL, &kept);
                c->migrating = 0;
                phx_evlog("migrate_out", "\"epoch\":%llu,\"tasks\":%u,\"kept\":%u", (unsigned long long)c->ck_epoch,
                          sent, kept);
            }
            free(own);
        }
        c->enc_loc = NULL;
        memcpy(c->loc, c->mig_loc, (size_t)c->nloc * sizeof *c->loc);
        n->loc_n = c->nhome;
        n->loc = c->loc;
    }
    int wait = 0, takes = 0;
    for (int s = 0; s < c->size && !rc; s++) {
        if (s == c->self || !mig_moves(c, s, c->self))
            continue;
        takes = 1;
        if (c->mig_in_done[s])
            continue;
        if (!c->mig_in[s] || c->mig_in_id[s] != c->ck_id) {
            wait = 1;   /* on its way */
            continue;
        }
        uint32_t k = 0;
        c->migrating = 1;
        rc = restore_blob(c, c->mig_in[s], c->mig_in_len[s], 0, c->mig_loc, &k);
        c->migrating = 0;
        c->mig_in_done[s] = 1;
        free(c->mig_in[s]);
        c->mig_in[s] = NULL;
        phx_evlog("migrate_in", "\"epoch\":%llu,\"tasks\":%u,\"from\":%d", (unsigned long long)c->ck_epoch, k, s);
    }
    if (rc) {
        fatal(c, 1, "moving tasks home failed: %s", phx_strerror(rc));
        return 0;
    }
    if (!wait && takes && c->die_point == DIE_MOVED && c->die_epoch == n->inc)
        raise(SIGKILL);   /* test: its slices rebuilt here, the epoch not stored */
    return !wait;
}

/* Ends a moving checkpoint (committed or aborted; its transfers dropped). */
static void mig_reset(cr_t *c)
{
    c->mig = 0;
    for (int s = 0; s < c->size; s++) {
        free(c->mig_out[s]);
        c->mig_out[s] = NULL;
        free(c->mig_in[s]);
        c->mig_in[s] = NULL;
        c->mig_in_done[s] = 0;
    }
}

static void ck_progress(cr_t *c)
{
    phx_node_t *n = c->n;
    if (!c->paused)
        return;
    if (!c->marks_sent) {
        c->t_paused = phx_now_ns();
        /* Everything the paused workers sent goes onto the links before
         * the marker. */
        phx_node_drain_outbox(n);
        ctl_all(c, CK_MARK, c->ck_id, NULL, 0, 0);
        c->marks_sent = 1;
    }
    if (!c->snapped && phx_ck_filter_marked(&c->filt, c->self, c->ck_id, c->dead)) {
        c->t_marked = phx_now_ns();
        /* The serialisation holds this thread: what is queued for the links
         * (markers, chunk acks) leaves first, or the peers wait for it. */
        phx_net_flush(n->net);
        phx_node_batch_flush(n);
        if (c->mig && !migrate(c))
            return;
        void *blob;
        size_t len;
        int rc = snapshot(c, &blob, &len);
        if (rc) {
            PHX_ERROR("ckpt", "cannot serialise this node's state: %s", phx_strerror(rc));
            phx_node_exit(n, 1, 1);
            return;
        }
        c->ck_bytes = len;
        c->snapped = 1;
        if ((rc = phx_ck_store_put_own(&c->store, c->ck_epoch, blob, len))) {
            free(blob);
            fatal(c, 1, "%s", "checkpoint slot busy (internal error)");
            return;
        }
        int b = c->buddy[c->self];
        if (b < 0) {
            c->acked = 1;   /* a job of one node has no second copy */
            c->t_acked = c->t_stored;
        }
        else if ((rc = bulk_send(c, BK_COPY, b, c->self, c->ck_id, c->ck_epoch, blob, len))) {
            fatal(c, 1, "%s", "out of memory sending the buddy copy");
            return;
        }
        c->t_stored = phx_now_ns();
        /* ms since BEGIN: workers paused, every marker in, state serialised */
        phx_evlog("ckpt_stored", "\"epoch\":%llu,\"bytes\":%zu,\"paused\":%.3f,\"marked\":%.3f,\"ms\":%.3f,"
                  "\"queued\":%llu",
                  (unsigned long long)c->ck_epoch, len, (double)(c->t_paused - c->t_begin) / 1e6,
                  (double)(c->t_marked - c->t_begin) / 1e6, (double)(c->t_stored - c->t_begin) / 1e6,
                  (unsigned long long)c->ck_queued);
        if (c->die_point == DIE_STORED && c->die_epoch == c->ck_epoch)
            raise(SIGKILL);   /* test: between the local store and the commit */
    }
    if (c->acked && !c->ready_sent) {
        c->ready_sent = 1;
        uint8_t q[PHX_CK_READY_LEN];
        phx_ck_ready_enc(q, c->ck_queued);
        ctl(c, coord(c), CK_READY, c->ck_id, q, sizeof q);
    }
}

/* Coordinator: every live rank holds both copies of the checkpoint. If no
 * rank had a message queued at its cut, the job is over: commit it (so a
 * failure from here rolls back to a finished state, which ends again at
 * once) and end the job everywhere, as phx_exit does. */
static void on_all_ready(cr_t *c, uint64_t id)
{
    int probe = c->probe;
    c->probe = 0;
    int done = c->cut && phx_ck_quiet_decide(&c->quiet, id, c->dead, probe, phx_now_ns() / 1000000);
    /* Message logging recovered a lost rank without its respawn (see mig):
     * the newcomer is taken in here, hosting nothing in this epoch. */
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, phx_ck_id_epoch(id));
    if (c->partial_ok && slot && !done && joins_ready(c)) {
        ctl_eset(c, CK_COMMIT, id, phx_ck_id_epoch(id), 0, 1, slot->loc, slot->buddy);
        return;
    }
    ctl_all(c, CK_COMMIT, id, NULL, 0, 1);
    if (done && !atomic_load(&c->n->stopping)) {
        PHX_INFO("td", "cut: global termination detected at epoch %llu", (unsigned long long)phx_ck_id_epoch(id));
        phx_evlog("td_declare", "\"td\":\"cut\",\"epoch\":%llu", (unsigned long long)phx_ck_id_epoch(id));
        phx_node_exit(c->n, c->n->exit_code, 1);
    }
}

/* Coordinator: a probe when every live rank last said it was idle. */
static void maybe_probe(cr_t *c)
{
    if (!c->cut || c->phase != PH_IDLE || coord(c) != c->self ||
        !phx_ck_quiet_want(&c->quiet, c->dead, phx_now_ns() / 1000000))
        return;
    begin_checkpoint(c);
    c->probe = c->phase == PH_CK;
}

/* Every hb-period: this node's idleness (no message queued or running),
 * sent to the coordinator when it changed. Sampled, so a report may be
 * stale; the probe's cut decides, the reports only say when to look. */
static void on_idle_timer(uv_timer_t *t)
{
    cr_t *c = t->data;
    if (c->phase != PH_IDLE || c->joining || atomic_load(&c->n->stopping))
        return;
    int idle = atomic_load(&c->n->work) == 0 && c->n->batch_pending == 0;
    int k = coord(c);
    if (idle != c->idle_sent && k >= 0) {
        c->idle_sent = idle;
        ctl(c, k, CK_IDLE, (uint64_t)idle, NULL, 0);
    }
    maybe_probe(c);   /* the coordinator: a gap may have passed since the last report */
}

static int take_in(cr_t *c, const phx_ck_eset_t *m);
static void join_at_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len);

/* With ckpt-dir: this node's file of committed epoch e. */
static void write_disk(cr_t *c, uint64_t e)
{
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    if (!c->dir || !slot || !slot->own)
        return;
    int rc = phx_ckd_write_rank(c->dir, c->tag, e, c->self, slot->own, slot->own_len);
    if (rc)
        PHX_ERROR("ckpt", "disk checkpoint of epoch %llu not written: %s", (unsigned long long)e, phx_strerror(rc));
    else
        ctl(c, coord(c), CK_DISK, e, NULL, 0);
}

static void on_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    if (c->joining) {
        join_at_commit(c, id, p, len);
        return;
    }
    if (c->phase != PH_CK || id != c->ck_id)
        return;
    phx_ck_store_commit(&c->store, c->ck_epoch);
    /* A rank taken in at the last commit may coordinate from here on. */
    memset(c->fresh, 0, (size_t)c->size);
    phx_ck_eset_t m;
    int joins = len && !phx_ck_eset_dec(p, len, c->size, c->nloc, &m) && m.joins;
    int rc = joins ? take_in(c, &m) : 0;
    if (rc) {
        fatal(c, 1, "taking a rank back in failed: %s", phx_strerror(rc));
        return;
    }
    if (c->mig) {
        bulk_drop(c, BK_MIG, BK_TX | BK_RX);
        mig_reset(c);
        phx_evlog("home", "\"epoch\":%llu", (unsigned long long)c->ck_epoch);
    }
    double ms = (double)(phx_now_ns() - c->t_begin) / 1e6;
    phx_metrics_add(PHX_M_CKPT_COUNT, 1);
    phx_metrics_add(PHX_M_CKPT_BYTES, c->ck_bytes);
    phx_metrics_set(PHX_M_CKPT_LAST_NS, phx_now_ns() - c->t_begin);
    phx_metrics_observe(PHX_H_CKPT_COMMIT, phx_now_ns() - c->t_begin);
    phx_metrics_set(PHX_M_EPOCH, c->ck_epoch);
    phx_evlog("ckpt_commit", "\"epoch\":%llu,\"bytes\":%zu,\"ms\":%.3f,\"copied\":%.3f",
              (unsigned long long)c->ck_epoch, c->ck_bytes, ms, (double)(c->t_acked - c->t_begin) / 1e6);
    PHX_INFO("ckpt", "epoch %llu committed (%zu bytes here, %.1f ms)", (unsigned long long)c->ck_epoch,
             c->ck_bytes, ms);
    c->phase = PH_IDLE;
    c->pr = 0;
    if (c->lis)
        c->lis(c->lis_arg, PHX_CR_COMMIT, c->ck_epoch);
    if (c->lis && joins)
        c->lis(c->lis_arg, PHX_CR_JOINED, c->ck_epoch);
    resume_workers(c);
    write_disk(c, c->ck_epoch);
    if (joins)
        begin_checkpoint(c);   /* the newcomers' slices go home at once (home_table) */
}

/* Coordinator: every live rank wrote its file of e: the manifest makes the
 * epoch usable, and epochs before e-1 go. */
static void on_disk_ok(cr_t *c, int peer, uint64_t e)
{
    if (!c->dir || e != c->disk_epoch)
        return;
    c->disk_ok[peer] = 1;
    int nfiles = 0;
    for (int r = 0; r < c->size; r++) {
        if (c->dead[r])
            continue;
        if (!c->disk_ok[r])
            return;
        nfiles++;
    }
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    int *ranks = malloc((size_t)nfiles * sizeof *ranks);
    if (!slot || !ranks) {
        free(ranks);
        PHX_ERROR("ckpt", "manifest of epoch %llu not written", (unsigned long long)e);
        return;
    }
    nfiles = 0;
    for (int r = 0; r < c->size; r++)
        if (!c->dead[r])
            ranks[nfiles++] = r;
    phx_ckd_manifest_t m = { .epoch = e, .size = c->size, .nhome = c->nhome, .slices = PHX_LOC_SLICES, .loc = slot->loc,
                             .nfiles = nfiles, .ranks = ranks };
    int rc = phx_ckd_write_manifest(c->dir, c->tag, &m);
    free(ranks);
    c->disk_epoch = 0;
    if (rc) {
        PHX_ERROR("ckpt", "manifest of epoch %llu not written: %s", (unsigned long long)e, phx_strerror(rc));
        return;
    }
    phx_evlog("ckpt_disk", "\"epoch\":%llu", (unsigned long long)e);
    if (e > 1)
        phx_ckd_prune(c->dir, e - 1);
}

/* ---- recovery -------------------------------------------------------------- */

/* STATE, DECIDE and COMMIT-with-joins payloads (phx_ck_eset_t): epoch e,
 * this node's dead set, flags; with joins the newcomers' tail (loc,
 * buddy: the tables they take; buddy NULL: none). malloc'd; NULL after
 * ending the job. */
static uint8_t *enc_eset(cr_t *c, uint64_t e, int flags, int joins, const int *loc, const int *buddy, size_t *len)
{
    size_t cap = phx_ck_eset_len(c->size, c->nloc, joins);
    uint8_t *buf = malloc(cap);
    uint32_t *incs = joins ? calloc((size_t)c->size, sizeof *incs) : NULL;
    if (!buf || (joins && !incs)) {
        free(buf);
        free(incs);
        fatal(c, 1, "%s", "out of memory in the recovery protocol");
        return NULL;
    }
    for (int x = 0; joins && x < c->size; x++) {
        uint32_t inc = 0;
        incs[x] = c->dead[x] && phx_ck_join_ready(&c->join, x, c->dead, &inc) ? inc : 0;
    }
    phx_ck_eset_t m = { .epoch = e, .dead = c->dead, .flags = (uint8_t)flags, .joins = joins,
                        .view = (uint16_t)(c->view + 1), .incs = incs, .loc = loc, .buddy = buddy };
    *len = (size_t)phx_ck_eset_enc(&m, c->size, c->nloc, buf, cap);
    free(incs);
    return buf;
}

static void rb_send_state(cr_t *c)
{
    size_t len;
    uint8_t *buf = enc_eset(c, c->store.committed, c->pr, 0, NULL, NULL, &len);
    if (!buf)
        return;
    ctl(c, coord(c), RB_STATE, (uint64_t)c->ndead, buf, len);
    free(buf);
}

/* Restores epoch rb_epoch from DIR: file i goes to the i-th live rank
 * (round robin), so a job restarted on fewer or more nodes re-places them. */
static void do_rollback_disk(cr_t *c)
{
    phx_node_t *n = c->n;
    phx_ckd_manifest_t m;
    if (phx_ckd_find(c->dir, c->tag, c->rb_epoch, &m) || m.epoch != c->rb_epoch || m.nhome > c->nhome ||
        m.slices != PHX_LOC_SLICES) {
        fprintf(stderr, "phalanx: recovery=cr: disk checkpoint of epoch %llu in %s is not usable\n",
                (unsigned long long)c->rb_epoch, c->dir);
        phx_node_exit(n, PHX_EXIT_CKPT_LOST, 1);
        return;
    }
    int nlive = 0, *live = malloc((size_t)c->size * sizeof *live);
    int *loc = malloc((size_t)c->nloc * sizeof *loc);
    int rc = live && loc ? 0 : PHX_ENOMEM;
    for (int r = 0; live && r < c->size; r++)
        if (!c->dead[r])
            live[nlive++] = r;
    for (int j = 0; !rc && j < c->nloc; j++) {
        int h = j / PHX_LOC_SLICES;
        loc[j] = h < c->size ? h : live[h % nlive];
        if (h >= m.nhome)
            continue;
        int i = 0;
        while (i < m.nfiles && m.ranks[i] != m.loc[j])
            i++;
        if (i == m.nfiles)
            rc = PHX_EPROTO;
        else
            loc[j] = live[i % nlive];
    }
    if (!rc) {
        discard_all(c, 0);
        ctl_all(c, RB_MARK, (uint64_t)c->ndead, NULL, 0, 0);
        c->filt.round = (uint64_t)c->ndead;
    }
    uint32_t nt = 0;
    for (int i = 0; i < m.nfiles && !rc; i++) {
        int mine = live[i % nlive] == c->self;
        if (!mine && m.ranks[i] != c->self)
            continue;
        void *blob;
        size_t len;
        if ((rc = phx_ckd_read_rank(c->dir, c->tag, m.epoch, m.ranks[i], &blob, &len)))
            break;
        if (mine)
            rc = restore_blob(c, blob, len, 0, NULL, &nt);
        seq_at_least(n, blob_seq(blob, len) + (m.ranks[i] == c->self));
        if (m.ranks[i] == c->self)
            atomic_store(&n->creator, blob_creator(blob, len));
        free(blob);
    }
    if (!rc) {
        memcpy(c->loc, loc, (size_t)c->nloc * sizeof *loc);
        n->loc_n = c->nhome;
        n->loc = c->loc;
        phx_ck_store_commit(&c->store, m.epoch);
        phx_evlog("rollback", "\"epoch\":%llu,\"round\":%d,\"disk\":1", (unsigned long long)m.epoch, c->ndead);
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"disk\"", nt);
        phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    }
    free(live);
    free(loc);
    phx_ckd_manifest_free(&m);
    if (rc) {
        fatal(c, PHX_EXIT_CKPT_LOST, "restoring the disk checkpoint failed: %s", phx_strerror(rc));
        return;
    }
    c->restarting = 0;
    c->restored = 1;
    ctl(c, coord(c), RB_DONE, (uint64_t)c->ndead, NULL, 0);
}

/* Whether some slice hosted by x at the epoch (loc_e) moves to rank r. In
 * a sequential partial round only slices whose host before the round
 * (c->loc, until do_rollback replaces it) died move: the others were moved
 * by the period's earlier round and keep running. */
static int moving(const cr_t *c, int i)
{
    return !c->rb_seq || c->dead[c->loc[i]];
}

static int moves_to(const cr_t *c, const int *loc_e, const int *loc, int x, int r)
{
    for (int i = 0; i < c->nloc; i++)
        if (loc_e[i] == x && loc[i] == r && moving(c, i))
            return 1;
    return 0;
}

/* The table after the losses in c->dead, by restart-on (spare: a spare
 * stands in for each lost rank while spares last). recovery-helpers bounds
 * the survivors taking each lost rank's slices, in partial (mlog) rounds
 * and cr's global ones alike: one rule, so a fallback from a partial round
 * places tasks as the partial round would have. */
static int relocate(cr_t *c, const phx_ck_copy_t *slot, int *loc, int *lost, int *lost_buddy)
{
    if (c->n->cfg.spares && c->n->cfg.restart_mode == PHX_RESTART_SPARE)
        return phx_ck_relocate_spare(c->size, c->nloc, slot->loc, slot->buddy, c->dead, c->n->app_size,
                                     PHX_LOC_SLICES, loc, lost, lost_buddy, NULL);
    return phx_ck_relocate_p(c->size, c->nloc, slot->loc, slot->buddy, c->dead, c->n->cfg.recovery_helpers, loc, lost,
                             lost_buddy);
}

/* Restores this node's copy and, as a buddy, its share of each dead node's
 * copy, which it ships to the other new hosts of that node's slices. */
static int restore_own(cr_t *c, phx_ck_copy_t *slot, const int *loc, const int *keep)
{
    int rc = 0;
    /* mlog-team: the dead node's team-mates reload their own copy too. */
    int team = c->rb_partial && rolls_back(c, c->self);
    if (c->rb_partial) {
        /* Survivors keep running state, queues and links: nothing is stale. */
        phx_evlog("partial_restore", "\"epoch\":%llu,\"round\":%d", (unsigned long long)c->rb_epoch, c->ndead);
        if (c->lis)   /* before on_restore of any task of this round */
            c->lis(c->lis_arg, PHX_CR_PARTIAL_BEGIN, c->rb_epoch);
    }
    if (!c->rb_partial || team) {
        discard_all(c, 0);
        /* The marker closes the lost future on every link. A team-mate
         * sends none: the others keep running, and what its old run sent
         * them equals what its replay sends again (dropped by SSN). */
        if (!team) {
            ctl_all(c, RB_MARK, (uint64_t)c->ndead, NULL, 0, 0);
            c->filt.round = (uint64_t)c->ndead;
        }
        uint32_t nt = 0;
        rc = restore_blob(c, slot->own, slot->own_len, 1, NULL, &nt);
        phx_evlog(team ? "team_rollback" : "rollback", "\"epoch\":%llu,\"round\":%d",
                  (unsigned long long)c->rb_epoch, c->ndead);
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"local\"", nt);
        phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    }
    for (int x = 0; x < c->size && !rc; x++) {
        if (!c->lost[x] || slot->buddy[x] != c->self)
            continue;
        if (!slot->held[x])
            return PHX_ENOENT;
        for (int r = 0; r < c->size && !rc; r++)
            if (r != c->self && !c->dead[r] && moves_to(c, slot->loc, loc, x, r))
                rc = bulk_send(c, BK_XFER, r, x, (uint64_t)c->ndead, c->rb_epoch, slot->held[x], slot->held_len[x]);
        uint32_t k = 0;
        rc = restore_blob(c, slot->held[x], slot->held_len[x], 0, keep, &k);
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d", k, x, c->self);
        phx_metrics_add(PHX_M_TASKS_RESTORED, k);
    }
    return rc;
}

/* The state of a newcomer that hosts no slice in the epoch it is taken in
 * at (its predecessor's tasks were recovered on helpers: mig): no tasks,
 * and a fresh task-id creator. Ids its predecessor drew after its last
 * checkpoint may live on (replayed spawns reuse them) and no counter of
 * theirs survived, so this incarnation's ids carry a creator that neither
 * a rank of a job of up to 32768 ranks nor an earlier incarnation uses.
 * malloc'd; NULL after ending the job. */
static void *empty_blob(cr_t *c, uint64_t e, size_t *len)
{
    phx_node_t *n = c->n;
    long cr = 0xffffL - (n->rank + (long)(n->inc - 1) * n->size);
    if (n->inc < 1 || cr < 0x8000) {
        fprintf(stderr, "phalanx: rank %d: incarnation %u cannot be taken back in: no task-id creator left "
                        "(rank + (incarnation - 1) x ranks must stay below 32768)\n", n->rank, n->inc);
        phx_node_exit(n, PHX_EXIT_CKPT_LOST, 1);
        return NULL;
    }
    size_t bl = PHX_CK_BLOB_HEAD + 8;
    uint8_t *blob = malloc(bl);
    if (!blob) {
        fatal(c, 1, "%s", "out of memory taking this rank back in");
        return NULL;
    }
    atomic_store(&n->creator, (uint16_t)cr);
    atomic_store(&n->next_seq, 0);
    phx_wenc_t en;
    phx_wenc_init(&en, blob, bl);
    enc_head(&en, n, 0);    /* no tasks */
    phx_wenc_u32(&en, 0);   /* queued */
    phx_wenc_u32(&en, 0);   /* finished */
    *len = bl;
    phx_evlog("rejoin_empty", "\"epoch\":%llu,\"creator\":%ld", (unsigned long long)e, cr);
    return blob;
}

/* A newcomer keeps blob as its own copy of epoch e, under the tables it
 * was taken in with (the store owns blob from here; not on failure, when
 * the job ends), and routes by that table from now on. */
static int adopt_epoch(cr_t *c, uint64_t e, void *blob, size_t len)
{
    phx_ck_copy_t *slot = phx_ck_store_open(&c->store, e);
    if (!slot || phx_ck_store_put_own(&c->store, e, blob, len)) {
        fatal(c, 1, "%s", "no checkpoint slot for the rejoin (internal error)");
        return PHX_EINVAL;
    }
    memcpy(slot->loc, c->rj_loc, (size_t)c->nloc * sizeof *c->loc);
    memcpy(slot->buddy, c->rj_buddy, (size_t)c->size * sizeof *c->buddy);
    phx_ck_store_commit(&c->store, e);
    memcpy(c->loc, c->rj_loc, (size_t)c->nloc * sizeof *c->loc);
    c->n->loc_n = c->nhome;
    c->n->loc = c->loc;
    return 0;
}

/* A newcomer taken in (restart-on=respawn): its state is the copy its
 * buddy ships; it keeps that copy as its own of the epoch, so it can roll
 * back again before the next checkpoint. */
static void rejoin_restore(cr_t *c)
{
    int self = c->self, hosts = 0;
    for (int i = 0; i < c->nloc; i++)
        hosts |= c->rj_loc[i] == self;
    if (hosts && (!c->xfer[self] || c->xfer_epoch[self] != c->rb_epoch))
        return;   /* the buddy's copy is on its way */
    size_t len = c->xfer_len[self];
    void *blob = hosts ? c->xfer[self] : empty_blob(c, c->rb_epoch, &len);
    if (!blob)
        return;
    if (adopt_epoch(c, c->rb_epoch, blob, len)) {
        if (!hosts)
            free(blob);
        return;
    }
    if (hosts)
        c->xfer[self] = NULL;   /* the store owns it */
    discard_all(c, 0);
    ctl_all(c, RB_MARK, (uint64_t)c->ndead, NULL, 0, 0);
    c->filt.round = (uint64_t)c->ndead;
    uint32_t nt = 0;
    int rc = restore_blob(c, blob, len, 1, c->loc, &nt);
    if (rc) {
        fatal(c, 1, "restoring the rejoined rank's checkpoint failed: %s", phx_strerror(rc));
        return;
    }
    phx_evlog("rollback", "\"epoch\":%llu,\"round\":%d", (unsigned long long)c->rb_epoch, c->ndead);
    phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d,\"via\":%d", nt, self, self,
              c->rj_buddy[self]);
    phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    c->restored = 1;
    ctl(c, coord(c), RB_DONE, (uint64_t)c->ndead, NULL, 0);
}

static void do_rollback(cr_t *c)
{
    phx_node_t *n = c->n;
    /* Reported in later rounds of this period (multi.h: `replayed`). */
    c->pr |= 1;
    if (c->rb_disk) {
        do_rollback_disk(c);
        return;
    }
    if (c->joining) {
        rejoin_restore(c);
        return;
    }
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, c->rb_epoch);
    if (!slot || !slot->own) {
        char what[64];
        snprintf(what, sizeof what, "%llu", (unsigned long long)c->rb_epoch);
        fatal(c, 1, "no local copy of epoch %s to roll back to", what);
        return;
    }
    int lost = -1, lost_buddy = -1;
    int *loc = malloc((size_t)c->nloc * sizeof *loc);
    if (!loc) {
        fatal(c, 1, "%s", "out of memory in recovery");
        return;
    }
    /* Sequential: from the table the period's first round made (the same
     * on every node: each ended it), moving only what the dead host now. */
    int rc = c->rb_seq ? phx_ck_relocate_p(c->size, c->nloc, c->loc, slot->buddy, c->dead,
                                           c->n->cfg.recovery_helpers, loc, &lost, &lost_buddy)
                       : relocate(c, slot, loc, &lost, &lost_buddy);
    if (rc == PHX_EUNRECOVERABLE) {
        free(loc);
        return;   /* the coordinator reports it and ends the job */
    }
    /* What a buddy copy may restore here: only moving slices (the rest of
     * a dead rank's tasks already run on their earlier round's hosts). */
    int *keep = loc;
    if (!rc && c->rb_seq) {
        keep = malloc((size_t)c->nloc * sizeof *keep);
        for (int i = 0; keep && i < c->nloc; i++)
            keep[i] = moving(c, i) ? loc[i] : -1;
        if (!keep) {
            free(loc);
            fatal(c, 1, "%s", "out of memory in recovery");
            return;
        }
    }
    if (!rc && !c->restored_own) {
        rc = restore_own(c, slot, loc, keep);
        c->restored_own = 1;
    }
    /* The other buddies ship their share of the dead nodes' copies here. */
    int waiting = 0;
    for (int x = 0; x < c->size && !rc; x++) {
        if (!c->lost[x] || slot->buddy[x] == c->self || c->xfer_done[x] || !moves_to(c, slot->loc, loc, x, c->self))
            continue;
        if (!c->xfer[x] || c->xfer_epoch[x] != c->rb_epoch) {
            waiting = 1;
            continue;
        }
        uint32_t k = 0;
        rc = restore_blob(c, c->xfer[x], c->xfer_len[x], 0, keep, &k);
        c->xfer_done[x] = 1;
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d,\"via\":%d", k, x,
                  c->self, slot->buddy[x]);
        phx_metrics_add(PHX_M_TASKS_RESTORED, k);
    }
    if (keep != loc)
        free(keep);
    if (rc) {
        free(loc);
        fatal(c, 1, "restoring a checkpoint failed: %s", phx_strerror(rc));
        return;
    }
    if (!waiting) {
        memcpy(c->loc, loc, (size_t)c->nloc * sizeof *loc);
        n->loc_n = c->nhome;
        n->loc = c->loc;   /* routing follows the table from now on */
        c->restored = 1;
        ctl(c, coord(c), RB_DONE, (uint64_t)c->ndead, NULL, 0);
    }
    free(loc);
}

/* Drops the shipped copies (after a recovery, or at the end). */
static void xfer_clear(cr_t *c)
{
    for (int x = 0; x < c->size; x++) {
        free(c->xfer[x]);
        c->xfer[x] = NULL;
        c->xfer_epoch[x] = 0;
    }
}

static void rb_progress(cr_t *c)
{
    if (!c->paused)
        return;
    if (!c->state_sent) {
        c->state_sent = 1;
        rb_send_state(c);
    }
    if (c->have_decision && !c->restored)
        do_rollback(c);
}

static void progress(cr_t *c)
{
    if (atomic_load(&c->n->stopping))
        return;
    if (c->phase == PH_CK)
        ck_progress(c);
    else if (c->phase == PH_REC)
        rb_progress(c);
}

static void send_decision(cr_t *c, uint64_t e, int disk);

/* Coordinator: decide the round once everyone reported the same set. */
static void rb_try_decide(cr_t *c)
{
    uint64_t e;
    if (coord(c) != c->self || c->decided_ndead == c->ndead || !phx_ck_round_decide(&c->round, c->dead, &e))
        return;
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    int lost = -1, lost_buddy = -1;
    int *loc = malloc((size_t)c->nloc * sizeof *loc);
    int bad = !e || !slot || !loc, disk = 0;
    if (!bad && relocate(c, slot, loc, &lost, &lost_buddy))
        bad = 2;
    free(loc);
    phx_ckd_manifest_t m;
    if (bad && c->dir && !phx_ckd_find(c->dir, c->tag, UINT64_MAX, &m)) {
        /* Both memory copies of some node are gone: the disk has them. */
        PHX_WARN("ckpt", "memory copies lost; restoring disk epoch %llu", (unsigned long long)m.epoch);
        e = m.epoch;
        phx_ckd_manifest_free(&m);
        bad = 0;
        disk = 1;
    }
    if (bad) {
        c->decided_ndead = c->ndead;
        uint8_t buf[PHX_CK_ABORT_LEN];
        phx_ck_abort_enc(buf, &(phx_ck_abort_t){ .lost = lost, .buddy = lost_buddy });
        for (int x = 0; x < c->size; x++)   /* newcomers connected here wait for nothing more */
            if (c->dead[x] && c->rj_inc[x])
                ctl(c, x, RB_ABORT, e, buf, sizeof buf);
        ctl_all(c, RB_ABORT, e, buf, sizeof buf, 1);
        return;
    }
    /* Message logging recovers the failures of one checkpoint period
     * partially where the mode's rule says every determinant they need
     * survives (ft/mlog/multi.h; without a rule: one failure). The rule
     * sees the ranks dead since e (dead_since) and whether a live rank
     * restored in a round since e already (its report's pr: a later failure
     * would need a partial round's moved tasks rolled back alone, and after
     * a global one the lost tasks run elsewhere already). The reports
     * of this round's dead set all arrived, so any coordinator decides
     * alike (core/mlog.c resets its period at the same commit). */
    uint8_t *since = calloc((size_t)c->size, 1);
    int nsince = since ? dead_since(c, slot, since) : 0, replayed = 0, ended = 0, live = 0, moved = 0;
    for (int r = 0; r < c->size; r++) {
        if (c->dead[r])
            continue;
        live++;
        ended += (c->rep_pr[r] & 3) == 2;
        replayed |= c->rep_pr[r] & 3 ? PHX_CR_REPLAYED_OTHER : 0;
        moved |= c->rep_pr[r] & 4;
    }
    if (replayed && ended == live)   /* every live rank ended one partial round, nothing else */
        replayed = PHX_CR_REPLAYED_ENDED;
    int rule = !since ? 0 : c->when ? c->when(c->lis_arg, c->dead, since, replayed) : nsince == 1 && !replayed;
    free(since);
    /* ... and only where the dead node's tasks go to the survivors (a spare
     * starts from the buddy copy alone; a respawned rank is taken in at a
     * later commit and gets its tasks back at the checkpoint after), and
     * no live rank may have moved tasks home since the epoch (its table
     * is no longer the epoch's). */
    int partial = c->partial_ok && rule && !disk && !moved && (c->n->cfg.restart_mode == PHX_RESTART_SURVIVORS || c->respawn);
    /* ... and only where some live rank keeps running (mlog-team). */
    int keeps = !c->rolls;
    for (int r = 0; !keeps && r < c->size; r++)
        keeps = !c->dead[r] && !rolls_back(c, r);
    partial &= keeps;
    int seq = partial && replayed == PHX_CR_REPLAYED_ENDED;
    uint32_t inc;
    for (int x = 0; c->respawn && !partial && x < c->size; x++)
        if (c->dead[x] && !phx_ck_join_ready(&c->join, x, c->dead, &inc))
            return;   /* every lost rank comes back first (or rj_timer ends the job) */
    send_decision(c, e, disk | (partial ? 2 : 0) | (seq ? 4 : 0));
}

/* Whether some lost rank's newcomer is connected to every live rank. */
static int joins_ready(const cr_t *c)
{
    uint32_t inc;
    for (int x = 0; c->respawn && x < c->size; x++)
        if (c->dead[x] && phx_ck_join_ready(&c->join, x, c->dead, &inc))
            return 1;
    return 0;
}

/* Sends an epoch set to every live rank, with the join tail when
 * newcomers are ready: they get it first, as they are not members yet.
 * loc, buddy: the tables they take (NULL buddy: none). */
static void ctl_eset(cr_t *c, int tag, uint64_t id, uint64_t e, int flags, int joins, const int *loc,
                     const int *buddy)
{
    size_t len;
    uint8_t *buf = enc_eset(c, e, flags, joins, loc, buddy, &len);
    if (!buf)
        return;
    if (joins) {
        uint32_t inc = 0;
        for (int x = 0; x < c->size; x++)
            if (c->dead[x] && phx_ck_join_ready(&c->join, x, c->dead, &inc))
                ctl(c, x, tag, id, buf, len);
    }
    ctl_all(c, tag, id, buf, len, 1);
    free(buf);
}

static void send_decision(cr_t *c, uint64_t e, int disk)
{
    c->decided_ndead = c->ndead;
    memset(c->done, 0, (size_t)c->size);
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    int use = slot && !disk;
    /* A partial round takes nobody in (on_all_ready does, at a commit). */
    ctl_eset(c, RB_DECIDE, (uint64_t)c->ndead, e, disk, !(disk & PHX_CK_D_PARTIAL) && joins_ready(c),
             use ? slot->loc : c->loc, use ? slot->buddy : NULL);
}

/* Reports a newcomer connected here to the coordinator (again after the
 * coordinator changed). */
static void rj_report(cr_t *c, int x)
{
    uint8_t b[PHX_CK_JOIN_LEN];
    phx_ck_join_enc(b, c->rj_inc[x]);
    ctl(c, coord(c), RB_JOIN, (uint64_t)x, b, sizeof b);
}

static void cr_on_peer_up(void *st, int peer, uint32_t inc)
{
    cr_t *c = st;
    if (!c->respawn || c->joining || peer < 0 || peer >= c->size || !c->dead[peer])
        return;
    PHX_INFO("ckpt", "rank %d is back (incarnation %u)", peer, inc);
    phx_evlog("peer_back", "\"peer\":%d,\"inc\":%u", peer, inc);
    c->rj_inc[peer] = inc;
    rj_report(c, peer);
}

/* A round of restart-on=respawn must end within startup-timeout of the
 * last failure (a newcomer: within twice that of its start). Past it the
 * lost rank is not coming back, or the round cannot complete (the newcomer
 * died before it was taken in, or a survivor during the round): every node
 * ends the job on its own timer with exit 78, never a hang. */
static void on_rj_timer(uv_timer_t *t)
{
    cr_t *c = t->data;
    int ms = c->n->cfg.startup_timeout_ms, x = 0;
    if (c->joining) {
        /* Checked every hb-timeout: the job may have ended without this
         * incarnation (an abort, or its partial round needed no respawn):
         * no peer is connected and one that was has closed its listener. */
        int up = 0, gone = 0;
        for (int r = 0; r < c->size; r++) {
            up |= r != c->self && phx_net_peer_up(c->n->net, r);
            gone |= r != c->self && phx_net_peer_gone(c->n->net, r);
        }
        if (!up && gone)
            fprintf(stderr, "phalanx: recovery=cr: rank %d (incarnation %u): the job's other ranks are gone; it "
                            "ended before this incarnation was taken back in\n", c->self, c->n->inc);
        else if (phx_now_ns() - c->t_fail >= 2 * (uint64_t)ms * 1000000)
            fprintf(stderr, "phalanx: recovery=cr: rank %d (incarnation %u) was not taken back into the job within "
                            "%d ms; giving up\n", c->self, c->n->inc, 2 * ms);
        else
            return;
        uv_timer_stop(t);
        phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 1);
        return;
    }
    if (c->phase != PH_REC)
        return;
    while (x < c->size && !(c->dead[x] && !c->rj_inc[x]))
        x++;
    if (x < c->size)
        fprintf(stderr, "phalanx: recovery=cr: rank %d did not come back within %d ms (restart-on=respawn needs it "
                        "restarted: by phx run, or a container restart policy); the job cannot be recovered\n", x, ms);
    else
        fprintf(stderr, "phalanx: recovery=cr: the recovery round taking lost ranks back in did not complete "
                        "within %d ms; the job cannot be recovered\n", ms);
    phx_evlog("ckpt_lost", "\"rank\":%d,\"respawn\":0", x < c->size ? x : -1);
    phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 0);
}

static void on_join(cr_t *c, int peer, uint64_t x, const uint8_t *p, size_t len)
{
    uint32_t inc;
    if (!phx_ck_join_dec(p, len, &inc) && x < (uint64_t)c->size && coord(c) == c->self &&
        phx_ck_join_seen(&c->join, peer, (int)x, inc)) {
        rb_try_decide(c);
        if (c->partial_ok && c->phase == PH_IDLE && joins_ready(c))
            begin_checkpoint(c);   /* taken in at its commit (on_all_ready) */
    }
}

/* Takes the newcomers of a DECIDE in: members again, with a new detector
 * view (their old incarnations stay dead: the transport refuses them). */
static int take_in(cr_t *c, const phx_ck_eset_t *m)
{
    c->view = m->view;
    for (int x = 0; x < c->size; x++) {
        uint32_t inc = c->rj_new[x] = phx_wire_a32_u32(m->inc, (size_t)x);
        if (!inc)
            continue;
        c->dead[x] = 0;
        c->fresh[x] = 1;
        c->rj_inc[x] = 0;
        phx_ck_join_clear(&c->join, x);
        phx_evlog("rejoin", "\"rank\":%d,\"inc\":%u,\"view\":%u", x, inc, (unsigned)c->view);
    }
    for (int i = 0; i < c->nloc; i++)
        c->rj_loc[i] = phx_wire_a32_i32(m->table, (size_t)i);
    for (int r = 0; r < c->size; r++)
        c->rj_buddy[r] = phx_wire_a32_i32(m->buddies, (size_t)r);
    for (int r = 0; c->joining && r < c->size; r++)
        if (c->dead[r])
            phx_net_close_peer(c->n->net, r, "dead before this rank rejoined");
    /* A newcomer has no detector yet: another rank lost meanwhile is still
     * alive to its transport, which would refuse that rank's newcomer for
     * good (and drop what is sent to a rank it closed). */
    for (int x = 0; x < c->size; x++)
        if (x != c->self && c->rj_new[x])
            phx_net_take_inc(c->n->net, x, c->rj_new[x]);
    if (c->joining)
        phx_net_rejoined(c->n->net);
    return phx_ft_new_view(c->n, c->view, c->dead, c->rj_new);
}

/* This newcomer is taken in at the commit of epoch id (on_all_ready): a
 * member from here, hosting nothing, its copy of the epoch its empty
 * state. Its predecessor's tasks run on the helpers that replayed them
 * until the next checkpoint moves them here (home_table). */
static void join_at_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    phx_node_t *n = c->n;
    phx_ck_eset_t m;
    if (phx_ck_eset_dec(p, len, c->size, c->nloc, &m) || !m.joins ||
        phx_wire_a32_u32(m.inc, (size_t)c->self) != n->inc)
        return;
    uint64_t e = phx_ck_id_epoch(id);
    c->ndead = (int)phx_ck_id_round(id);
    memcpy(c->dead, m.dead, (size_t)c->size);
    int rc = take_in(c, &m);
    if (rc) {
        fatal(c, 1, "taking this rank back in failed: %s", phx_strerror(rc));
        return;
    }
    size_t bl = 0;
    void *blob = empty_blob(c, e, &bl);
    if (!blob)
        return;
    if (adopt_epoch(c, e, blob, bl)) {
        free(blob);
        return;
    }
    memcpy(c->buddy, c->rj_buddy, (size_t)c->size * sizeof *c->buddy);
    c->joining = 0;
    c->phase = PH_IDLE;
    c->state_sent = c->have_decision = c->restored = 0;
    c->idle_sent = -1;
    uv_timer_stop(&c->rj_timer);
    PHX_INFO("ckpt", "taken back in at epoch %llu; this rank's tasks come home at the next checkpoint",
             (unsigned long long)e);
    if (c->lis)
        c->lis(c->lis_arg, PHX_CR_JOINED, e);
    resume_workers(c);
    write_disk(c, e);
}

static int cr_on_failure(void *st, int rank)
{
    cr_t *c = st;
    if (rank < 0 || rank >= c->size || c->dead[rank])
        return 1;
    c->dead[rank] = 1;
    c->ndead++;
    c->probe = 0;
    c->idle_sent = -1;
    phx_ck_quiet_reset(&c->quiet);
    if (c->phase != PH_REC) {
        c->t_fail = phx_now_ns();
        if (c->phase == PH_CK)
            PHX_INFO("ckpt", "rank %d died during checkpoint %llu: aborted", rank, (unsigned long long)c->ck_epoch);
        phx_ck_commit_abort(&c->commit);
        c->phase = PH_REC;
    }
    c->state_sent = c->have_decision = c->restored = c->restored_own = 0;
    memset(c->xfer_done, 0, (size_t)c->size);
    bulk_drop(c, -1, BK_TX | BK_RX);   /* an aborted checkpoint's copies; a new round re-ships */
    mig_reset(c);
    if (c->respawn) {
        c->rj_inc[rank] = 0;
        uv_timer_start(&c->rj_timer, on_rj_timer, (uint64_t)c->n->cfg.startup_timeout_ms, 0);
        for (int x = 0; x < c->size; x++)   /* the coordinator may have changed */
            if (c->dead[x] && c->rj_inc[x])
                rj_report(c, x);
    }
    pause_workers(c);
    progress(c);
    rb_try_decide(c);   /* a new coordinator may already hold every report */
    return 1;
}

static void on_decide(cr_t *c, uint64_t round, const uint8_t *p, size_t len)
{
    phx_ck_eset_t m;
    if (phx_ck_eset_dec(p, len, c->size, c->nloc, &m))
        return;
    int joins = m.joins;
    if (c->joining) {   /* ours only if it takes this incarnation in */
        if (!joins || phx_wire_a32_u32(m.inc, (size_t)c->self) != c->n->inc)
            return;
        c->ndead = (int)round;
        memcpy(c->dead, m.dead, (size_t)c->size);
    } else if ((int)round != c->ndead || c->phase != PH_REC || memcmp(m.dead, c->dead, (size_t)c->size)) {
        return;   /* stale: a newer failure is known here */
    }
    c->rb_epoch = m.epoch;
    c->rb_disk = !!(m.flags & PHX_CK_D_DISK);
    c->rb_partial = !!(m.flags & PHX_CK_D_PARTIAL);
    c->rb_seq = !!(m.flags & PHX_CK_D_SEQ);
    if (c->rb_partial) {
        uv_timer_stop(&c->rj_timer);   /* nobody waits for a respawn: it is taken in at a later commit */
        for (int r = 0; r < c->size; r++)   /* an aborted checkpoint's markers must not count for its redo */
            if (c->filt.ck_mark[r] > c->store.committed)
                c->filt.ck_mark[r] = c->store.committed;
    }
    memcpy(c->lost, c->dead, (size_t)c->size);
    int rc = joins ? take_in(c, &m) : 0;
    if (rc) {
        fatal(c, 1, "taking a rank back in failed: %s", phx_strerror(rc));
        return;
    }
    if (c->die_point == DIE_ROLLBACK)
        raise(SIGKILL);   /* test: a failure during a recovery */
    c->have_decision = 1;
    c->t_decide = phx_now_ns();
    c->restored = c->restored_own = 0;
    memset(c->xfer_done, 0, (size_t)c->size);
    progress(c);
}

static void on_go(cr_t *c, uint64_t round)
{
    if ((int)round != c->ndead || c->phase != PH_REC || !c->restored)
        return;
    c->phase = PH_IDLE;
    if (c->rb_partial)   /* ended: a later loss may be recovered from this table */
        c->pr = (c->pr & ~1) | 2;
    xfer_clear(c);
    bulk_drop(c, BK_XFER, BK_TX | BK_RX);
    if (c->respawn) {
        uv_timer_stop(&c->rj_timer);
        memset(c->fresh, 0, (size_t)c->size);   /* the lowest live rank coordinates again */
        c->joining = 0;
    }
    double ms = (double)(phx_now_ns() - c->t_fail) / 1e6;
    phx_evlog("recovery_done", "\"epoch\":%llu,\"round\":%d,\"ms\":%.3f,\"stale_dropped\":%llu,\"stale_frames\":%llu",
              (unsigned long long)c->rb_epoch, c->ndead, ms, (unsigned long long)c->filt.dropped,
              (unsigned long long)phx_net_stale_frames(c->n->net));
    PHX_INFO("ckpt", "recovered from epoch %llu in %.1f ms", (unsigned long long)c->rb_epoch, ms);
    uint64_t now = phx_now_ns(), dec = c->t_decide > c->t_fail ? c->t_decide : c->t_fail;
    phx_metrics_recovered(&(phx_metrics_rec_t){ .epoch = c->rb_epoch, .round = c->ndead, .partial = c->rb_partial,
                                                 .replay = c->rb_partial && c->lis, .agree_ns = dec - c->t_fail,
                                                 .transfer_ns = now - dec, .dead = c->lost, .size = c->size });
    if (c->lis && c->rb_partial)
        c->lis(c->lis_arg, PHX_CR_PARTIAL, c->rb_epoch);
    resume_workers(c);
    /* The lost node's tasks now have a single copy (at their new host):
     * double it at once. */
    begin_checkpoint(c);
}

/* A transfer arrived whole: a buddy copy is kept (and ACKed), a shipped
 * copy waits for the rollback that restores it. */
static void on_bulk_done(cr_t *c, bulk_t *r)
{
    int peer = r->peer, key = r->key;
    uint64_t id = r->id;
    if (r->kind == BK_COPY) {
        int rc = phx_ck_store_put_held(&c->store, r->epoch, peer, r->dst, r->total);
        if (rc)
            PHX_WARN("ckpt", "buddy copy of rank %d not kept: %s", peer, phx_strerror(rc));
        else
            r->dst = NULL;
        bulk_del(c->rx, &c->nrx, r);
        if (!rc)
            ctl(c, peer, CK_ACK, id, NULL, 0);
        return;
    }
    if (r->kind == BK_MIG) {   /* rebuilt at this checkpoint's cut (migrate) */
        free(c->mig_in[peer]);
        c->mig_in[peer] = r->dst;
        c->mig_in_len[peer] = r->total;
        c->mig_in_id[peer] = id;
        r->dst = NULL;
        bulk_del(c->rx, &c->nrx, r);
        progress(c);
        return;
    }
    if ((int)id >= c->ndead) {   /* else shipped for an older round */
        free(c->xfer[key]);
        c->xfer[key] = r->dst;
        c->xfer_len[key] = r->total;
        c->xfer_epoch[key] = r->epoch;
        r->dst = NULL;
    }
    bulk_del(c->rx, &c->nrx, r);
    progress(c);
}

static void handle_ctrl(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    phx_ck_ctl_t m;
    if (phx_ck_ctl_dec(p, h->len, &m)) {
        PHX_WARN("ckpt", "recovery control tag %u from rank %d without its head; ignored", h->tag, peer);
        return;
    }
    dispatch(st, peer, h->tag, m.arg, m.body, m.len);
}

/* One control message, from the wire or from this node itself. */
static void dispatch(cr_t *c, int peer, uint32_t tag, uint64_t id, const uint8_t *p, size_t len)
{
    /* The transport delivers nothing of a dead incarnation after its
     * notice: a newcomer's rollback marker may come before this node took
     * it in, and so may its marker of the checkpoint that follows a commit
     * taking it in (links are FIFO per pair only: the coordinator's COMMIT
     * may still be on its way here; it_mlog_home's order case hung on it). */
    if (peer < 0 || peer >= c->size ||
        (c->dead[peer] && peer != c->self && tag != RB_MARK && tag != CK_MARK))
        return;
    switch (tag) {
    case CK_REQ:
        begin_checkpoint(c);
        break;
    case CK_BEGIN:
        /* A rank taken in may coordinate the next checkpoint: its BEGIN
         * can overtake the GO sent by the round's coordinator. */
        if (c->phase == PH_REC && c->restored && (int)phx_ck_id_round(id) == c->ndead)
            on_go(c, (uint64_t)c->ndead);
        on_begin(c, id, p, len);
        break;
    case RB_JOIN:
        on_join(c, peer, id, p, len);
        break;
    case CK_MARK:
        if (id > c->filt.ck_mark[peer])
            c->filt.ck_mark[peer] = id;
        progress(c);
        break;
    case CK_CHUNK:
        on_chunk(c, peer, id, p, len);
        break;
    case CK_CACK:
        on_cack(c, peer, id, p, len);
        break;
    case CK_ACK:
        if (c->phase == PH_CK && id == c->ck_id) {
            c->acked = 1;
            c->t_acked = phx_now_ns();
            progress(c);
        }
        break;
    case CK_READY: {
        uint64_t queued;
        if (!phx_ck_ready_dec(p, len, &queued))
            phx_ck_quiet_count(&c->quiet, peer, id, queued);
        if (id == c->commit_id && phx_ck_commit_ready(&c->commit, peer, phx_ck_id_epoch(id), c->dead))
            on_all_ready(c, id);
        break;
    }
    case CK_IDLE:
        phx_ck_quiet_idle(&c->quiet, peer, (int)id);
        maybe_probe(c);
        break;
    case CK_COMMIT:
        if (c->dir && id == c->ck_id && coord(c) == c->self) {
            c->disk_epoch = c->ck_epoch;
            memset(c->disk_ok, 0, (size_t)c->size);
        }
        on_commit(c, id, p, len);
        break;
    case RB_STATE: {
        phx_ck_eset_t m;
        if (!phx_ck_eset_dec(p, len, c->size, c->nloc, &m) && !m.joins) {
            c->rep_pr[peer] = m.flags;
            phx_ck_round_report(&c->round, peer, m.dead, m.epoch);
            rb_try_decide(c);
        }
        break;
    }
    case RB_DECIDE:
        on_decide(c, id, p, len);
        break;
    case RB_MARK:
        if (id > c->filt.rb_mark[peer])
            c->filt.rb_mark[peer] = id;
        break;
    case RB_DONE:
        if ((int)id == c->ndead && c->decided_ndead == c->ndead) {
            c->done[peer] = 1;
            int all = 1;
            for (int r = 0; r < c->size; r++)
                all &= c->dead[r] || c->done[r];
            if (all)
                ctl_all(c, RB_GO, id, NULL, 0, 1);
        }
        break;
    case RB_GO:
        on_go(c, id);
        break;
    case CK_DISK:
        on_disk_ok(c, peer, id);
        break;
    case RB_ABORT: {
        phx_ck_abort_t a;
        if (phx_ck_abort_dec(p, len, &a))
            a = (phx_ck_abort_t){ -1, -1 };
        int lost = a.lost, lb = a.buddy;
        if (!id) {
            PHX_ERROR("ckpt", "work lost: a node died before the first checkpoint was committed%s", "");
            fprintf(stderr, "phalanx: recovery=cr: work lost: no committed checkpoint to roll back to\n");
            phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 0);
        } else {
            fprintf(stderr, "phalanx: recovery=cr: checkpoint lost: rank %d and its buddy rank %d both died "
                            "(no disk checkpoint); the job cannot be recovered\n", lost, lb);
            phx_evlog("ckpt_lost", "\"rank\":%d,\"buddy\":%d", lost, lb);
            phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 0);
        }
        break;
    }
    default:
        PHX_WARN("ckpt", "unknown recovery control tag %u from rank %d", tag, peer);
    }
}

/* ---- hooks ----------------------------------------------------------------- */

static int cr_configure(phx_node_t *n)
{
    if (!n->cfg.ft) {
        fprintf(stderr, "phalanx: recovery=cr needs fault tolerance (--phx-ft=1)\n");
        return PHX_EINVAL;
    }
    if (n->cfg.restart_mode == PHX_RESTART_SPARE && !n->cfg.spares) {
        fprintf(stderr, "phalanx: restart-on=spare needs spare nodes (phx run --spares K)\n");
        return PHX_EINVAL;
    }
    if (n->cfg.restart_mode == PHX_RESTART_UNKNOWN) {
        fprintf(stderr, "phalanx: unknown restart-on=%s (survivors, spare or respawn)\n", n->cfg.restart_on);
        return PHX_EINVAL;
    }
    /* Which detector runs beside cr (td=cut: cr's own check on its cuts,
     * ft/ckpt/quiet.h) was derived with the configuration (core/config.c). */
    int cut_ok = n->cfg.rec_family == PHX_REC_CR;
    if (n->cfg.td_mode == PHX_TD_UNSUPPORTED) {
        fprintf(stderr, "phalanx: recovery=%s detects termination %s; td=%s is not supported with it\n",
                n->cfg.recovery, cut_ok ? "on its checkpoints (td=cut) or not at all (td=none)"
                                        : "not at all (td=none): its jobs end by phx_exit", n->cfg.td);
        return PHX_EINVAL;
    }
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    begin_checkpoint(t->data);
}

static int cr_init(phx_node_t *n, void **out)
{
    cr_t *c = calloc(1, sizeof *c);
    if (!c)
        return PHX_ENOMEM;
    c->n = n;
    c->self = n->rank;
    c->size = n->size;
    c->decided_ndead = -1;
    c->gen = 1;
    c->nhome = n->size;
    c->tag = phx_ckd_tag();
    c->dir = n->cfg.ckpt_dir[0] ? n->cfg.ckpt_dir : n->cfg.restart[0] ? n->cfg.restart : NULL;
    if (n->cfg.ckpt_dir[0] && mkdir(n->cfg.ckpt_dir, 0700) && errno != EEXIST) {
        fprintf(stderr, "phalanx: cannot create ckpt-dir %s: %s\n", n->cfg.ckpt_dir, strerror(errno));
        free(c);
        return PHX_EIO;
    }
    if (n->cfg.restart[0]) {
        phx_ckd_manifest_t m;
        if (phx_ckd_find(n->cfg.restart, c->tag, UINT64_MAX, &m)) {
            fprintf(stderr, "phalanx: restart: no usable checkpoint in %s\n", n->cfg.restart);
            free(c);
            return PHX_ENOENT;
        }
        if (m.nhome > c->nhome)
            c->nhome = m.nhome;   /* home ranks of the old job, beyond this one's size */
        phx_ckd_manifest_free(&m);
        c->restarting = 1;
        c->t_fail = phx_now_ns();
    }
    size_t sz = (size_t)n->size;
    c->ring = calloc(sz, sizeof *c->ring);
    c->nloc = c->nhome * PHX_LOC_SLICES;
    c->loc = calloc((size_t)c->nloc, sizeof *c->loc);
    c->xfer = calloc(sz, sizeof *c->xfer);
    c->xfer_len = calloc(sz, sizeof *c->xfer_len);
    c->xfer_epoch = calloc(sz, sizeof *c->xfer_epoch);
    c->xfer_done = calloc(sz, 1);
    c->disk_ok = calloc(sz, 1);
    c->buddy = calloc(sz, sizeof *c->buddy);
    c->rj_inc = calloc(sz, sizeof *c->rj_inc);
    c->rj_new = calloc(sz, sizeof *c->rj_new);
    c->lost = calloc(sz, 1);
    c->rep_pr = calloc(sz, 1);
    c->fresh = calloc(sz, 1);
    c->rj_loc = calloc((size_t)c->nloc, sizeof *c->rj_loc);
    c->rj_buddy = calloc(sz, sizeof *c->rj_buddy);
    c->mig_loc = calloc((size_t)c->nloc, sizeof *c->mig_loc);
    c->mig_from = calloc((size_t)c->nloc, sizeof *c->mig_from);
    c->mig_in = calloc(sz, sizeof *c->mig_in);
    c->mig_out = calloc(sz, sizeof *c->mig_out);
    c->mig_in_len = calloc(sz, sizeof *c->mig_in_len);
    c->mig_in_id = calloc(sz, sizeof *c->mig_in_id);
    c->mig_in_done = calloc(sz, 1);
    c->dead = calloc(sz, 1);
    c->done = calloc(sz, 1);
    c->lh = calloc((size_t)n->nworkers, sizeof *c->lh);
    c->lt = calloc((size_t)n->nworkers, sizeof *c->lt);
    c->wgen = calloc((size_t)n->nworkers, sizeof *c->wgen);
    uint32_t *host = calloc(sz, sizeof *host);
    *out = c;
    if (!c->ring || !c->loc || !c->buddy || !c->dead || !c->done || !c->lh || !c->lt || !c->wgen || !c->disk_ok || !host ||
        !c->xfer || !c->xfer_len || !c->xfer_epoch || !c->xfer_done || !c->rj_inc || !c->rj_new || !c->lost || !c->rep_pr || !c->fresh ||
        !c->rj_loc || !c->rj_buddy || !c->mig_loc || !c->mig_from || !c->mig_in || !c->mig_out || !c->mig_in_len || !c->mig_in_id ||
        !c->mig_in_done || phx_ck_join_init(&c->join, n->size) ||
        phx_ck_commit_init(&c->commit, n->size) || phx_ck_round_init(&c->round, n->size) ||
        phx_ck_filter_init(&c->filt, n->size) || phx_ck_store_init(&c->store, c->nhome, c->nloc) ||
        phx_ck_quiet_init(&c->quiet, n->size, (uint64_t)n->cfg.hb_period_ms, (uint64_t)n->cfg.hb_timeout_ms)) {
        free(host);
        return PHX_ENOMEM;
    }
    c->store.keep = pin_keep;
    c->store.keep_ctx = c;
    /* Buddies follow the heartbeat ring, which puts neighbours on other
     * hosts wherever the hostfile allows. */
    for (int r = 0; r < n->size; r++) {
        uint32_t hsh = 2166136261u;
        for (const char *s = n->cfg.peers[r].host; *s; s++)
            hsh = (hsh ^ (uint8_t)*s) * 16777619u;
        host[r] = hsh;
    }
    for (int i = 0; i < c->nloc; i++)
        c->loc[i] = i / PHX_LOC_SLICES % n->size;
    int rc = phx_ft_ring_build(n->size, host, c->ring);
    free(host);
    if (rc)
        return rc;
    const char *die = getenv("PHX_CKPT_DIE");
    int dr;
    unsigned long long de;
    char pt[16];
    if (die && sscanf(die, "%d:%llu:%15s", &dr, &de, pt) == 3 && dr == n->rank) {
        c->die_epoch = de;
        c->die_point = !strcmp(pt, "stored") ? DIE_STORED : !strcmp(pt, "rollback") ? DIE_ROLLBACK
                     : !strcmp(pt, "rejoin") ? DIE_REJOIN : !strcmp(pt, "shipped") ? DIE_SHIPPED
                     : !strcmp(pt, "moved") ? DIE_MOVED : DIE_NONE;
        if (c->die_point == DIE_NONE) {
            fprintf(stderr, "phalanx: PHX_CKPT_DIE: unknown point '%s' (stored|rollback|rejoin|shipped|moved)\n", pt);
            return PHX_EINVAL;
        }
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    uv_async_init(&n->loop, &c->async, on_async);
    c->async.data = c;
    uv_timer_init(&n->loop, &c->timer);
    c->timer.data = c;
    uv_timer_init(&n->loop, &c->rj_timer);
    c->rj_timer.data = c;
    uv_timer_init(&n->loop, &c->idle_timer);
    c->idle_timer.data = c;
    c->open = 1;
    c->respawn = n->cfg.restart_mode == PHX_RESTART_RESPAWN;
    if (phx_recovery_rejoining(n)) {
        /* A new incarnation of a lost rank: nothing runs until the round
         * that takes it in restores its state from its buddy's copy. */
        PHX_INFO("ckpt", "incarnation %u of rank %d: waiting to be taken back in", n->inc, n->rank);
        if (c->die_point == DIE_REJOIN && c->die_epoch == n->inc)
            raise(SIGKILL);   /* test: a respawn that dies before it connects (EPOCH = incarnation) */
        c->joining = 1;
        c->t_fail = phx_now_ns();   /* recovery_done counts from this process's start */
        c->phase = PH_REC;
        c->state_sent = 1;
        pause_workers(c);
        uint64_t hb = (uint64_t)n->cfg.hb_timeout_ms;
        uv_timer_start(&c->rj_timer, on_rj_timer, hb, hb);
    }
    if (c->restarting) {
        /* Nothing runs before the restore: the main task rank 0 creates
         * at job start is dropped by it. */
        c->phase = PH_REC;
        c->state_sent = 1;   /* the coordinator decides at job start */
        pause_workers(c);
    }
    if (n->cfg.ckpt_interval > 0) {
        uint64_t ms = (uint64_t)n->cfg.ckpt_interval * 1000;
        uv_timer_start(&c->timer, on_timer, ms, ms);
    }
    c->cut = n->cfg.td_mode == PHX_TD_CUT;
    c->idle_sent = -1;
    if (c->cut)
        uv_timer_start(&c->idle_timer, on_idle_timer, (uint64_t)n->cfg.hb_period_ms, (uint64_t)n->cfg.hb_period_ms);
    return 0;
}

static void cr_on_start(void *st)
{
    cr_t *c = st;
    if (c->restarting) {
        /* Every node is connected and paused since init: restore the
         * newest usable disk epoch everywhere (a round with no failure). */
        phx_ckd_manifest_t m;
        if (phx_ckd_find(c->dir, c->tag, UINT64_MAX, &m)) {
            fprintf(stderr, "phalanx: restart: no usable checkpoint in %s\n", c->dir);
            phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 1);
            return;
        }
        PHX_INFO("ckpt", "restarting from epoch %llu of %s", (unsigned long long)m.epoch, c->dir);
        uint64_t e = m.epoch;
        phx_ckd_manifest_free(&m);
        send_decision(c, e, 1);
        return;
    }
    /* Epoch 1 holds the main task's creation: a failure before any
     * application checkpoint restarts the job from its beginning. */
    begin_checkpoint(st);
}

static int cr_on_deliver(void *st, int peer, const phx_frame_hdr_t *h)
{
    (void)h;
    return phx_ck_filter_drop(&((cr_t *)st)->filt, peer);
}

static void cr_on_checkpoint(void *st)
{
    cr_t *c = st;
    int k = coord(c);
    if (k == c->self)
        begin_checkpoint(c);
    else if (k >= 0)
        ctl(c, k, CK_REQ, 0, NULL, 0);
}

static void closed(uv_handle_t *h) { (void)h; }

static void cr_stop(void *st)
{
    cr_t *c = st;
    if (!c->open)
        return;
    c->open = 0;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, closed);
    uv_timer_stop(&c->rj_timer);
    uv_close((uv_handle_t *)&c->rj_timer, closed);
    uv_timer_stop(&c->idle_timer);
    uv_close((uv_handle_t *)&c->idle_timer, closed);
    uv_close((uv_handle_t *)&c->async, closed);
    /* Paused workers leave for good: they must reach their STOP message. */
    pthread_mutex_lock(&c->mu);
    c->gen++;
    atomic_store(&c->n->rec_pause, 0);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void cr_destroy(void *st)
{
    cr_t *c = st;
    phx_ck_commit_free(&c->commit);
    phx_ck_round_free(&c->round);
    phx_ck_filter_free(&c->filt);
    phx_ck_store_free(&c->store);   /* orphans the blobs still referenced */
    while (c->pins) {
        pin_t *p = c->pins;
        c->pins = p->next;
        if (p->refs)
            p->detached = 1;   /* freed by its last release (phx_net_free) */
        else
            free(p);
    }
    phx_ck_join_free(&c->join);
    phx_ck_quiet_free(&c->quiet);
    free(c->rj_inc);
    free(c->rj_new);
    free(c->lost);
    free(c->rep_pr);
    free(c->fresh);
    free(c->rj_loc);
    free(c->rj_buddy);
    if (c->n->loc == c->loc)
        c->n->loc = NULL;
    free(c->ring);
    free(c->loc);
    free(c->buddy);
    free(c->dead);
    free(c->done);
    free(c->lh);
    free(c->lt);
    free(c->wgen);
    free(c->disk_ok);
    if (c->xfer)
        xfer_clear(c);
    free(c->xfer);
    free(c->xfer_len);
    free(c->xfer_epoch);
    free(c->xfer_done);
    bulk_drop(c, -1, BK_TX | BK_RX);
    if (c->mig_in && c->mig_out)
        mig_reset(c);
    free(c->mig_in);
    free(c->mig_out);
    free(c->mig_in_len);
    free(c->mig_in_id);
    free(c->mig_in_done);
    free(c->mig_loc);
    free(c->mig_from);
    free(c->tx);
    free(c->rx);
    free(c);
}

const phx_recovery_ops_t phx_recovery_cr = {
    .name = "cr",
    .help = "coordinated checkpoints in memory (own + buddy copy), rollback onto the survivors",
    .configure = cr_configure,
    .init = cr_init,
    .on_start = cr_on_start,
    .on_deliver = cr_on_deliver,
    .on_ctrl = handle_ctrl,
    .rx_claim = cr_rx_claim,
    .rx_claimed = cr_rx_claimed,
    .on_failure = cr_on_failure,
    .on_peer_up = cr_on_peer_up,
    .on_checkpoint = cr_on_checkpoint,
    .worker_pause = cr_worker_pause,
    .stop = cr_stop,
    .destroy = cr_destroy,
};
