/* recovery=cr with restart-on=respawn: a lost rank's new incarnation (the
 * newcomer) taken back in, and the move home of the slices a partial round
 * left on helpers, as a pure state machine per node.
 *
 *   survivor                           coordinator                      newcomer
 *   on_peer_up(x, inc): REPORT  --->   on_join: TRY_DECIDE (a global
 *                                      round waits for it), or
 *                                      CHECKPOINT (message logging:
 *                                      taken in at that commit)
 *   DECIDE / COMMIT with the join tail (phx_ck_eset_t), to the newcomers first:
 *   take_in: TAKE_IN(x), VIEW                                           mine, take_in: TAKE_IN, VIEW
 *                                                                       restore (DECIDE, at ROLLBACK):
 *                                                                         ADOPT(copy), MARK, RESTORE
 *                                                                       at_commit (COMMIT): ADOPT(empty), JOINED
 *   the next checkpoint (home_plan: BEGIN carries the table that puts every
 *   live rank's slices back), at every node: home_begin at its BEGIN,
 *   home_cut at its snapshot: SHIP_OUT(r) what leaves, KEEP what stays,
 *   SWITCH tables, TAKE(x) what x shipped here, SETTLED; home_over at its
 *   commit or abort.
 *
 * The newcomer's early markers: links are FIFO per pair only, so a
 * newcomer's rollback marker (sent once its buddy's copy is restored) may
 * reach a survivor before the coordinator's DECIDE taking it in, and its
 * marker of the checkpoint that follows a commit taking it in may reach a
 * member before that COMMIT. The transport delivers nothing of a dead
 * incarnation after its notice, so a marker from a rank still counted dead
 * is its newcomer's: phx_ck_rj_accept keeps it (dropped, the survivor
 * would drop the newcomer's frames for ever, or wait for its checkpoint
 * marker for ever).
 *
 * Events append actions to a list the caller owns; the caller carries them
 * out in order, stopping at the first that fails (then it ends the job).
 * The dead set is the caller's (every other machine reads it too): TAKE_IN
 * tells it to clear a flag. No sockets, threads or clock. Threading: one
 * thread (the comm thread) per instance; arrays passed in are read during
 * the call only. Tests: test_ft_rejoin.c, an explorer of every schedule.
 *
 * PHX_CK_RJ_MUTANT (tests only, never in the library): 1 drops a
 * checkpoint marker from a rank counted dead (the newcomer's early marker
 * race, as before its fix), 2 drops its rollback marker too;
 * test_ft_rejoin_mutant1/2 check that the explorer finds each. */
#ifndef PHX_FT_CKPT_REJOIN_H
#define PHX_FT_CKPT_REJOIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"
#include "ft/ckpt/ckpt_msg.h"

typedef struct phx_ck_rj phx_ck_rj_t;

/* The node's view at the event. */
typedef struct phx_ck_rj_view {
    const uint8_t *dead;        /* n flags */
    int coord;                  /* the coordinator: lowest live rank not taken in since the last commit */
    int idle;                   /* neither a checkpoint nor a recovery round is open here */
    int at_commit;              /* message logging: newcomers are taken in at a commit, slices go home */
} phx_ck_rj_view_t;

/* Control frames as the marker rule sorts them (phx_ck_rj_accept). */
enum { PHX_CK_RJ_F_OTHER = 0, PHX_CK_RJ_F_RB_MARK, PHX_CK_RJ_F_CK_MARK };

enum phx_ck_rj_kind {
    PHX_CK_RJ_REPORT = 1,       /* JOIN(x, inc) to dst, the coordinator */
    PHX_CK_RJ_TRY_DECIDE,       /* coordinator: judge the recovery round again (x connected everywhere) */
    PHX_CK_RJ_CHECKPOINT,       /* coordinator, idle, at_commit: begin a checkpoint; its commit takes x in */
    PHX_CK_RJ_TAKE_IN,          /* incarnation inc of x is a member again: clear x's dead flag */
    PHX_CK_RJ_VIEW,             /* every TAKE_IN of the frame done: the detector's new view (round) */
    PHX_CK_RJ_ADOPT,            /* newcomer: keep its state as its own copy of epoch under the tables
                                 * taken in with (phx_ck_rj_loc, _buddy); flags PHX_CK_RJ_COPY: the
                                 * copy its buddy shipped, PHX_CK_RJ_EMPTY: no task */
    PHX_CK_RJ_MARK,             /* newcomer: discard what runs, RB_MARK(round) to every live rank, stale
                                 * frames dropped from round on */
    PHX_CK_RJ_RESTORE,          /* newcomer: rebuild from the adopted state; restored (the recovery
                                 * round's phx_ck_rec_restored) */
    PHX_CK_RJ_JOINED,           /* newcomer taken in at the commit of epoch: a member, resume */
    PHX_CK_RJ_SHIP_OUT,         /* move home: snapshot what the home table moves to dst, ship it */
    PHX_CK_RJ_KEEP,             /* move home: rebuild this node from a snapshot of what stays */
    PHX_CK_RJ_SWITCH,           /* move home: route by the home table from now on */
    PHX_CK_RJ_TAKE,             /* move home: rebuild what x shipped here */
    PHX_CK_RJ_SETTLED,          /* move home: every slice moving here is rebuilt */
};

enum { PHX_CK_RJ_COPY = 1, PHX_CK_RJ_EMPTY = 2 };

typedef struct phx_ck_rj_act {
    int kind;
    int dst;                    /* REPORT, SHIP_OUT */
    int x;                      /* REPORT, TAKE_IN, TAKE */
    uint32_t inc;               /* REPORT, TAKE_IN */
    int round;                  /* MARK, VIEW (the view) */
    uint64_t epoch;             /* ADOPT, JOINED */
    int flags;                  /* ADOPT */
} phx_ck_rj_act_t;

/* Actions of one call, in order; the caller's (zero it, free it). */
typedef struct phx_ck_rj_out {
    phx_ck_rj_act_t *a;
    int len, cap;
    int err;                    /* PHX_ENOMEM: actions were dropped */
} phx_ck_rj_out_t;
void phx_ck_rj_out_free(phx_ck_rj_out_t *o);

/* n ranks, this node self; nloc table entries of `slices` per home rank;
 * respawn: restart-on=respawn; joining: this process is a newcomer not
 * taken in yet. 0, PHX_EINVAL or PHX_ENOMEM. */
int phx_ck_rj_create(int n, int self, int nloc, int slices, int respawn, int joining, phx_ck_rj_t **out);
void phx_ck_rj_destroy(phx_ck_rj_t *m);
/* A copy (tests explore schedules from a state); 0 or PHX_ENOMEM. */
int phx_ck_rj_clone(const phx_ck_rj_t *m, phx_ck_rj_t **out);
/* The state as bytes, equal for equal states: the length; written only
 * when it fits in cap. */
size_t phx_ck_rj_key(const phx_ck_rj_t *m, uint8_t *buf, size_t cap);

/* The marker rule: 1 when a control frame (PHX_CK_RJ_F_*) from peer is
 * taken. A rank counted dead sends only its newcomer's markers. */
int phx_ck_rj_accept(const phx_ck_rj_t *m, int peer, int frame, const uint8_t *dead);

/* ---- state ----------------------------------------------------------------- */

int phx_ck_rj_respawn(const phx_ck_rj_t *m);
/* This process is a newcomer not taken in yet. */
int phx_ck_rj_joining(const phx_ck_rj_t *m);
/* r was taken in since the last commit (or the round's GO): it does not
 * coordinate yet. */
int phx_ck_rj_fresh(const phx_ck_rj_t *m, int r);
/* The incarnation of x's newcomer connected here (0: none). */
uint32_t phx_ck_rj_connected(const phx_ck_rj_t *m, int x);
/* Coordinator: some newcomer is connected to every rank live in dead. */
int phx_ck_rj_ready(const phx_ck_rj_t *m, const uint8_t *dead);
/* Coordinator: a global round waits (respawn) for some lost rank that is
 * not connected everywhere yet. */
int phx_ck_rj_waits(const phx_ck_rj_t *m, const uint8_t *dead);
/* Coordinator: the incarnation of x's newcomer when it is connected to
 * every rank live in dead (the join tail names it), else 0. */
uint32_t phx_ck_rj_ready_inc(const phx_ck_rj_t *m, int x, const uint8_t *dead);
/* The detector view the last take-in set (the next join tail names +1). */
uint16_t phx_ck_rj_view_of(const phx_ck_rj_t *m);
/* A clean leave (a drain) at a commit every member passes: the next view,
 * counted here as a take-in's is, so the two never reuse a number. */
uint16_t phx_ck_rj_next_view(phx_ck_rj_t *m);
/* The tables the last take-in carried (nloc, n), and the incarnations it
 * took in (n, 0: none). */
const int *phx_ck_rj_loc(const phx_ck_rj_t *m);
const int *phx_ck_rj_buddy(const phx_ck_rj_t *m);
const uint32_t *phx_ck_rj_taken(const phx_ck_rj_t *m);

/* ---- survivors and the coordinator --------------------------------------- */

/* Incarnation inc of dead rank x connected here: REPORT it (respawn, not
 * a newcomer itself). */
void phx_ck_rj_on_peer_up(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int x, uint32_t inc, phx_ck_rj_out_t *o);
/* rank was declared dead (v: after it): its newcomer connected here, if
 * any, is gone; every newcomer still connected is REPORTed again (the
 * coordinator may have changed). */
void phx_ck_rj_on_failure(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int rank, phx_ck_rj_out_t *o);
/* Coordinator: JOIN(x, inc) from rank `from`. TRY_DECIDE when recorded;
 * CHECKPOINT too when idle, at_commit and some newcomer is ready. */
void phx_ck_rj_on_join(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, int from, int x, uint32_t inc,
                       phx_ck_rj_out_t *o);

/* ---- taking in --------------------------------------------------------------- */

/* Newcomer: 1 when the join tail of e takes incarnation inc of this rank
 * in (then the caller adopts e's dead set and round before take_in). */
int phx_ck_rj_mine(const phx_ck_rj_t *m, const phx_ck_eset_t *e, uint32_t inc);
/* A DECIDE or COMMIT with a join tail (e->joins): TAKE_IN for each rank it
 * takes in, then VIEW. Every node, the newcomers too. */
void phx_ck_rj_take_in(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, const phx_ck_eset_t *e, phx_ck_rj_out_t *o);
/* Newcomer, at the decided round's ROLLBACK (asked again when a copy
 * arrives): have, the copy of this rank its buddy ships for epoch is
 * here. Once per round: ADOPT, MARK(round), RESTORE, as soon as what it
 * restores is here (nothing when it hosts no slice). */
void phx_ck_rj_restore(phx_ck_rj_t *m, int round, uint64_t epoch, int have, phx_ck_rj_out_t *o);
/* Newcomer, after take_in of the COMMIT of epoch: ADOPT(EMPTY), JOINED. */
void phx_ck_rj_at_commit(phx_ck_rj_t *m, uint64_t epoch, phx_ck_rj_out_t *o);
/* The recovery round ended here (GO), or a commit: fresh ranks coordinate
 * again; after a round a newcomer is no longer joining. */
void phx_ck_rj_round_over(phx_ck_rj_t *m);
void phx_ck_rj_committed(phx_ck_rj_t *m);

/* ---- the move home ---------------------------------------------------------- */

/* Coordinator, starting a checkpoint from table loc (nloc): 1 when it
 * moves some live rank's slice home (at_commit only); the table is then
 * phx_ck_rj_home_loc. */
int phx_ck_rj_home_plan(phx_ck_rj_t *m, const phx_ck_rj_view_t *v, const int *loc);
/* The home table: planned here, or carried by the BEGIN taken. */
const int *phx_ck_rj_home_loc(const phx_ck_rj_t *m);
/* A BEGIN accepted with a table (nloc entries) moving slices from loc. */
void phx_ck_rj_home_begin(phx_ck_rj_t *m, phx_wire_a32_t table, const int *loc);
/* 1 from home_begin until home_over. */
int phx_ck_rj_moving(const phx_ck_rj_t *m);
/* At the cut (every marker in, workers paused), asked again while it
 * returns 0: the first time SHIP_OUT to each rank taking some of this
 * node's slices, KEEP if any left, SWITCH; then TAKE(x) for each rank x
 * moving slices here once its snapshot is in (have[x]), once each;
 * SETTLED and 1 once every one is rebuilt. */
int phx_ck_rj_home_cut(phx_ck_rj_t *m, const uint8_t *have, phx_ck_rj_out_t *o);
/* The moving checkpoint ended (committed or aborted): 1 when one was. */
int phx_ck_rj_home_over(phx_ck_rj_t *m);

#endif
