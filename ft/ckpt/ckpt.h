/* Coordinated checkpoint/restart: the pure decisions (buddy checkpoints
 * as in "Scalable Message-Logging Techniques for Effective Fault Tolerance in HPC Applications" (Meneses),
 * section 2.3). No sockets, no threads, no clocks: the
 * glue (core/cr*.c) feeds events and acts on the results, so every rule
 * below is unit-tested deterministically (tests/unit/test_ft_ckpt.c).
 *
 * Vocabulary. Epoch e is the e-th global checkpoint (0: none). A node's
 * tasks of home rank h live on loc[h] (the relocation table; identity until
 * a node is lost). buddy[r] keeps the second copy of r's state. Dead sets
 * are byte arrays of n flags. A recovery round is named by the number of
 * dead nodes it covers (dead sets only grow), plus the set itself.
 *
 * Ownership: every struct is owned by one thread (the comm thread); arrays
 * passed in are the caller's and are read only during the call. */
#ifndef PHX_FT_CKPT_H
#define PHX_FT_CKPT_H

#include <stddef.h>
#include <stdint.h>

/* The buddy of rank r: the next live rank after r in ring order (ring:
 * position -> rank, from ft/hb/ring.c, so buddies sit on other hosts where
 * the hostfile allows). -1 when r is the only live rank. */
int phx_ck_buddy(int n, const int *ring, const uint8_t *dead, int r);

/* The ranks dead since an epoch whose table is loc_e (nloc entries; NULL:
 * no such epoch, none): since[r] = 1 for each dead rank r that hosts a slice
 * in it (a rank dead before the epoch hosts none: relocated). Every node's
 * copy of an epoch has the same table, so every node finds the same set.
 * Fills since[0..n); returns its size. */
int phx_ck_dead_since(int n, int nloc, const int *loc_e, const uint8_t *dead, uint8_t *since);

/* The move home: the table that puts every slice (slices per home rank)
 * whose home rank is live back on it, from loc (nloc entries) into t; home
 * ranks of a restarted job beyond n, and dead ones, keep their host.
 * Returns 1 when some slice moves. */
int phx_ck_home_table(int n, int nloc, int slices, const int *loc, const uint8_t *dead, int *t);

/* Relocation after losing the ranks flagged in dead, starting from the
 * table loc_e (nloc entries: slices of home ranks -> hosting rank) and the
 * buddies buddy_e of the epoch being restored: the slices on dead nodes
 * spread round-robin over the live ranks, starting at the dead node's buddy
 * (which holds their copy and ships it to the others). Fills loc[0..nloc).
 * Returns 0, PHX_ENOMEM, or PHX_EUNRECOVERABLE when some dead node's buddy
 * is dead too (both copies lost): *lost and *lost_buddy name the pair. */
int phx_ck_relocate(int n, int nloc, const int *loc_e, const int *buddy_e, const uint8_t *dead, int *loc,
                    int *lost, int *lost_buddy);
/* The same with at most `helpers` hosts per dead rank (recovery-helpers,
 * parallel recovery, as in the same thesis, section 2.5): dead rank x's slices (those it
 * hosted at the epoch) are dealt round-robin, in slice order, over its
 * buddy and the next helpers-1 live ranks after the buddy in rank order
 * (wrapping), so fewer nodes take part and the buddy gets the first one.
 * Each dead rank deals from its own buddy. helpers <= 0: phx_ck_relocate
 * (one round robin over every live rank); helpers >= live ranks: each dead
 * rank's slices over every live rank, from its buddy on. */
int phx_ck_relocate_p(int n, int nloc, const int *loc_e, const int *buddy_e, const uint8_t *dead, int helpers,
                      int *loc, int *lost, int *lost_buddy);

/* ---- two-phase commit at the coordinator (the lowest live rank) --------
 * Phase 1: BEGIN(e) to every live node; each stores its own copy and its
 * buddy's, then reports READY(e). Phase 2: once every live node is ready,
 * COMMIT(e). The decision is this reduction at the coordinator; a failure
 * aborts the epoch (the nodes keep e-1 until a commit of e). */
typedef struct phx_ck_commit {
    int n;
    uint64_t epoch;             /* in progress; 0: none */
    uint8_t *ready;             /* n flags */
} phx_ck_commit_t;

int phx_ck_commit_init(phx_ck_commit_t *c, int n);
void phx_ck_commit_free(phx_ck_commit_t *c);
/* Starts epoch e (any earlier one is forgotten). */
void phx_ck_commit_begin(phx_ck_commit_t *c, uint64_t e);
/* READY(e) from rank `from`. Returns 1 exactly once: when every rank not in
 * dead is ready for the current epoch (then the caller sends COMMIT(e));
 * 0 otherwise (stale epochs are ignored). */
int phx_ck_commit_ready(phx_ck_commit_t *c, int from, uint64_t e, const uint8_t *dead);
/* Re-evaluates after a failure: 1 if the ranks still live are all ready.
 * The glue aborts instead; kept for a coordinator that rides out failures. */
int phx_ck_commit_check(phx_ck_commit_t *c, const uint8_t *dead);
void phx_ck_commit_abort(phx_ck_commit_t *c);

/* ---- recovery agreement at the coordinator -----------------------------
 * Each survivor reports STATE(dead set, last committed epoch). The round is
 * decided once every rank live in the coordinator's set has reported that
 * same set: the epoch is the maximum committed one reported (a node commits
 * e only after every node stored both copies of e, so all survivors hold
 * it, committed or not). Every survivor then gets the same decision. */
typedef struct phx_ck_round {
    int n;
    uint8_t *seen;              /* n: reported for the current set */
    uint8_t *set;               /* n x n: the set each one reported */
    uint64_t *epoch;            /* n: its committed epoch */
} phx_ck_round_t;

int phx_ck_round_init(phx_ck_round_t *r, int n);
void phx_ck_round_free(phx_ck_round_t *r);
/* Records STATE from rank `from`. */
void phx_ck_round_report(phx_ck_round_t *r, int from, const uint8_t *dead, uint64_t committed);
/* 1 and *epoch when every rank live in `dead` (the coordinator's set)
 * reported exactly that set; 0 otherwise. */
int phx_ck_round_decide(const phx_ck_round_t *r, const uint8_t *dead, uint64_t *epoch);

/* ---- stale-frame filter (every node) ------------------------------------
 * After a rollback of round k, a peer's application frames are stale until
 * that peer's rollback marker of round >= k arrives (links are FIFO: the
 * marker follows the last frame of the lost future and precedes the first
 * of the new one). Checkpoint markers work the same way per epoch. */
typedef struct phx_ck_filter {
    int n;
    uint64_t round;             /* last restored round */
    uint64_t *rb_mark;          /* n: highest rollback marker per peer */
    uint64_t *ck_mark;          /* n: highest checkpoint marker per peer */
    uint64_t dropped;           /* stale frames discarded */
} phx_ck_filter_t;

int phx_ck_filter_init(phx_ck_filter_t *f, int n);
void phx_ck_filter_free(phx_ck_filter_t *f);
/* 1 (and counts it) when an application frame from peer is stale. */
int phx_ck_filter_drop(phx_ck_filter_t *f, int peer);
/* 1 when every peer live in dead (self excluded) sent the marker of e. */
int phx_ck_filter_marked(const phx_ck_filter_t *f, int self, uint64_t e, const uint8_t *dead);

/* ---- copies kept per node -----------------------------------------------
 * Two slots: epochs e-1 (committed) and e (in progress or committed). A
 * slot holds this node's own state and the buddy copies it keeps for other
 * ranks. Blobs are malloc'd; the store owns them once put. */
typedef struct phx_ck_copy {
    uint64_t epoch;             /* 0: empty */
    void *own;
    size_t own_len;
    void **held;                /* n: copies kept for rank r, or NULL */
    size_t *held_len;
    int *loc, *buddy;           /* nloc / n: relocation table and buddies of the epoch */
} phx_ck_copy_t;

#define PHX_CK_POOL 4
typedef struct phx_ck_store {
    int n;
    uint64_t committed;         /* last epoch known committed here */
    phx_ck_copy_t slot[2];
    void *pool[PHX_CK_POOL];    /* buffers of dropped copies, for reuse */
    size_t pool_cap[PHX_CK_POOL];
    /* Optional (set after init): asked before a dropped blob is pooled or
     * freed; returning 1 takes it over (it is still being read: a zero-copy
     * send in flight), and the store forgets it. */
    int (*keep)(void *ctx, void *blob);
    void *keep_ctx;
} phx_ck_store_t;

int phx_ck_store_init(phx_ck_store_t *s, int n, int nloc);
void phx_ck_store_free(phx_ck_store_t *s);
/* The slot for epoch e, emptied first if it held another epoch, or NULL if
 * that other epoch is the committed one (never overwrite the recovery line). */
phx_ck_copy_t *phx_ck_store_open(phx_ck_store_t *s, uint64_t e);
/* The slot holding e, or NULL. */
phx_ck_copy_t *phx_ck_store_get(phx_ck_store_t *s, uint64_t e);
/* Takes ownership of blob (opens e's slot first: a buddy's copy may come
 * before this node's own BEGIN). PHX_ENOENT if the slot cannot be opened. */
int phx_ck_store_put_own(phx_ck_store_t *s, uint64_t e, void *blob, size_t len);
int phx_ck_store_put_held(phx_ck_store_t *s, uint64_t e, int rank, void *blob, size_t len);
/* A buffer of at least need bytes for a blob to put later: a dropped copy's
 * when one is large enough (no page faults), else malloc'd. *cap: its size.
 * Blobs dropped by the store (a reused slot, a replaced copy) go back to a
 * pool of PHX_CK_POOL buffers. */
void *phx_ck_store_buf(phx_ck_store_t *s, size_t need, size_t *cap);
/* Marks e committed; older copies stay until the slot is reused. */
void phx_ck_store_commit(phx_ck_store_t *s, uint64_t e);

/* Room for one more element in a machine's action list (*a: cap elements
 * of size bytes, len in use): doubles it from 8 when full. Returns 0 or
 * PHX_ENOMEM (the list is left as it was). The caller owns *a. */
int phx_ck_act_reserve(void **a, int len, int *cap, size_t size);

#endif
