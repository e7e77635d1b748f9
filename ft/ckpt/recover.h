/* recovery=cr: the recovery round at one node, as a pure state machine.
 * After a failure every survivor pauses and reports its committed epoch to
 * the coordinator, which decides the epoch to roll back to once every rank
 * live in its view reported the same dead set (phx_ck_round_*); each node
 * then restores its own copy, ships and restores the dead ranks' copies it
 * keeps as their buddy, waits for the copies other buddies ship to it,
 * reports DONE, and resumes at GO. A newer failure restarts the round.
 *
 * The machine takes events and appends actions to an output list; the glue
 * (core/cr_recover.c) carries them out in order, stopping at the first that
 * fails (the node then ends the job). What it cannot decide alone comes in
 * as arguments: the node's view (dead set, round, coordinator), the
 * relocation tables, which shipped copies are here. At JUDGE the glue
 * asks the judgement (ft/ckpt/judge.h: disk copies, partial rounds,
 * newcomers) and calls phx_ck_rec_decide or phx_ck_rec_abort, or waits and
 * asks again with phx_ck_rec_try_decide. No sockets, threads or clock.
 *
 * Threading: one instance per node, driven from one thread (the comm
 * thread). Calls may nest (the glue's own messages are dispatched at once):
 * each call appends to the list it is given and leaves the machine
 * consistent before it returns. Arrays passed in are read during the call
 * only. Tests: test_ft_recover.c. */
#ifndef PHX_FT_CKPT_RECOVER_H
#define PHX_FT_CKPT_RECOVER_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_ck_rec phx_ck_rec_t;

/* The node's view at the event. */
typedef struct phx_ck_rec_view {
    const uint8_t *dead;        /* n flags */
    int round;                  /* failures handled so far: names the round */
    int coord;                  /* the coordinator (lowest live rank not taken in this round) */
    int rec;                    /* a recovery round is open here */
} phx_ck_rec_view_t;

enum phx_ck_rec_kind {
    PHX_CK_REC_PAUSE = 1,       /* pause the workers; progress once all are parked */
    PHX_CK_REC_STATE,           /* STATE(round, committed epoch, dead set) to dst */
    PHX_CK_REC_JUDGE,           /* coordinator: every report is in, epoch the highest committed:
                                 * decide (flags), abort, or wait */
    PHX_CK_REC_DECIDE,          /* DECIDE(round, epoch, flags) to every live rank, self last */
    PHX_CK_REC_ABORT,           /* ABORT(epoch, lost, buddy) to every live rank: the work is lost */
    PHX_CK_REC_ROLLBACK,        /* roll back to epoch: from disk, as a newcomer (then
                                 * phx_ck_rec_restored), or phx_ck_rec_restore with the tables */
    PHX_CK_REC_OWN,             /* discard the running state, mark every link, restore own copy */
    PHX_CK_REC_SHIP,            /* ship the copy of x kept here (buddy) to dst */
    PHX_CK_REC_HELD,            /* restore the slices of x's kept copy that move here */
    PHX_CK_REC_XFER,            /* restore the slices of x's copy shipped by via that move here */
    PHX_CK_REC_TABLE,           /* route by the table passed to phx_ck_rec_restore from now on */
    PHX_CK_REC_DONE,            /* DONE(round) to dst, the coordinator */
    PHX_CK_REC_GO,              /* GO(round) to every live rank, self last */
    PHX_CK_REC_RESUME,          /* the round is over here: resume the workers */
};

/* JUDGE's summary of the reports' partial-round bits (STATE flags: bit 0
 * a round restored there since the commit, bit 1 a partial round ended
 * there, bit 2 slices moved home there). */
enum { PHX_CK_REC_J_REPLAYED = 1, PHX_CK_REC_J_ENDED = 2, PHX_CK_REC_J_MOVED = 4 };

typedef struct phx_ck_rec_act {
    int kind;
    int dst;                    /* STATE, DONE, SHIP */
    int x, via;                 /* SHIP, HELD, XFER */
    int round;
    uint64_t epoch;             /* JUDGE, DECIDE, ABORT, ROLLBACK, OWN */
    int flags;                  /* DECIDE, ROLLBACK, OWN: PHX_CK_D_*; JUDGE: PHX_CK_REC_J_* */
    int lost, buddy;            /* ABORT: a rank and its buddy both dead */
} phx_ck_rec_act_t;

/* Actions of one call, in order; the caller's (zero it, free it). */
typedef struct phx_ck_rec_out {
    phx_ck_rec_act_t *a;
    int len, cap;
    int err;                    /* PHX_ENOMEM: actions were dropped */
} phx_ck_rec_out_t;
void phx_ck_rec_out_free(phx_ck_rec_out_t *o);

int phx_ck_rec_create(int n, int self, phx_ck_rec_t **out);
void phx_ck_rec_destroy(phx_ck_rec_t *m);
/* A copy (tests explore schedules from a state); 0 or PHX_ENOMEM. */
int phx_ck_rec_clone(const phx_ck_rec_t *m, phx_ck_rec_t **out);
/* The state as bytes, equal for equal states: the length; written only
 * when it fits in cap. */
size_t phx_ck_rec_key(const phx_ck_rec_t *m, uint8_t *buf, size_t cap);

/* ---- member side ---------------------------------------------------------- */

/* A failure opened a new round (view: after it). PAUSE. */
void phx_ck_rec_on_failure(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o);
/* This node reports nothing (a newcomer, a job restarted from disk): the
 * coordinator decides without it. */
void phx_ck_rec_no_report(phx_ck_rec_t *m);
/* Taken in at a commit: no round is open here any more. */
void phx_ck_rec_reset(phx_ck_rec_t *m);
/* Something changed (paused: every worker is parked): STATE once per
 * round, then ROLLBACK once decided until restored. */
void phx_ck_rec_progress(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int paused, phx_ck_rec_out_t *o);
/* DECIDE(round, dead, epoch, flags) arrived. 1: taken (the glue then calls
 * progress); 0: stale (another round or dead set, or no round open). */
int phx_ck_rec_on_decide(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int round, const uint8_t *dead,
                         uint64_t epoch, int flags);

/* The restore in memory, at ROLLBACK. loc_e, buddy_e: the epoch's table
 * (nloc) and buddies (n); keep (nloc): the new host of each slice that
 * moves in this round, -1 for one that stays put; have (n): the copy of x
 * shipped here for this epoch has arrived. OWN once per round, then for
 * each lost rank this node is the buddy of: SHIP to every other live new
 * host of its slices, HELD; then XFER for each shipped copy here not yet
 * restored; once none is missing TABLE and DONE. Call again when a shipped
 * copy arrives. */
typedef struct phx_ck_rec_tables {
    int nloc;
    const int *loc_e, *buddy_e, *keep;
    const uint8_t *have;
} phx_ck_rec_tables_t;
void phx_ck_rec_restore(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, const phx_ck_rec_tables_t *t,
                        phx_ck_rec_out_t *o);
/* The glue restored the rollback itself (disk, newcomer): DONE. */
void phx_ck_rec_restored(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o);
/* GO(round): RESUME if it ends the open round and this node restored. */
void phx_ck_rec_on_go(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int round, phx_ck_rec_out_t *o);

/* The decided rollback (valid from on_decide until the next failure). */
uint64_t phx_ck_rec_epoch(const phx_ck_rec_t *m);
int phx_ck_rec_flags(const phx_ck_rec_t *m);
/* The dead set of the decided round: ranks whose state comes from buddies. */
const uint8_t *phx_ck_rec_lost(const phx_ck_rec_t *m);
int phx_ck_rec_is_restored(const phx_ck_rec_t *m);

/* ---- coordinator side ------------------------------------------------------ */

/* STATE from rank `from`: its dead set, committed epoch and flags. JUDGE
 * when it completes the round (phx_ck_rec_try_decide). */
void phx_ck_rec_on_report(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int from, const uint8_t *dead,
                          uint64_t committed, int flags, phx_ck_rec_out_t *o);
/* JUDGE if this node coordinates, the round is undecided and every rank
 * live in the view reported that same set. */
void phx_ck_rec_try_decide(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, phx_ck_rec_out_t *o);
/* The round is decided: DECIDE(epoch, flags) (also a restart from disk,
 * without a failure). */
void phx_ck_rec_decide(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, uint64_t epoch, int flags,
                       phx_ck_rec_out_t *o);
/* The round cannot be recovered: ABORT. */
void phx_ck_rec_abort(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, uint64_t epoch, int lost, int buddy,
                      phx_ck_rec_out_t *o);
/* DONE(round) from rank `from`: GO once every live rank is done. */
void phx_ck_rec_on_done(phx_ck_rec_t *m, const phx_ck_rec_view_t *v, int from, int round, phx_ck_rec_out_t *o);

#endif
