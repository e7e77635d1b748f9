/* The partial recovery round of message logging, per node: which ranks a
 * checkpoint period lost and recovers partially, the round's begin, the
 * hand-back (ML_RDONE to every live rank), the release of the replays once
 * every live rank handed back, the end of the replays (ML_RFIN), the hold
 * on cr's checkpoints from the hand-back until every live rank's replays
 * ended, the global fallback voiding a replay under way, and the period's
 * end at the first commit after its recovery. Rules: ft/mlog/README.md
 * ("The partial round as a state machine").
 *
 * A pure state machine: no sockets, threads or clock. The runtime feeds
 * events and carries out the actions they queue, in order (core/mlog*.c):
 * replay records, the hand-back's dets and messages and the workers'
 * admission stay there; this machine says when.
 *
 * Threading: one instance per node, driven from one thread (the comm
 * thread); nothing here is thread-safe, but for phx_ml_rec_rb's array,
 * which workers read while a replay is under way: a failure only sets
 * bytes of it, and only the period's end (a commit: workers paused, no
 * replay) clears it. */
#ifndef PHX_FT_MLOG_REC_H
#define PHX_FT_MLOG_REC_H

#include <stddef.h>
#include <stdint.h>

#include "ft/mlog/multi.h"

typedef struct phx_ml_rec phx_ml_rec_t;

typedef struct {
    int n;                  /* ranks of the job, 1..PHX_ML_REC_MAX_RANKS */
    int rank;               /* this node */
    phx_mld_mode_t mode;    /* FAST: no dets, so no replay order, RDONE, RFIN or hold */
    int team;               /* mlog-team's team size (> 1: the first failure rolls its team back) */
    /* Optional gate of the release (tests hold it open while they act):
     * gate(ctx) == 0 keeps the release back until phx_ml_rec_retry finds
     * it 1. Read only inside the calls that may release. */
    void *ctx;
    int (*gate)(void *ctx);
} phx_ml_rec_cfg_t;

#define PHX_ML_REC_MAX_RANKS 65536

/* What the runtime does, in the order queued. */
typedef enum {
    PHX_ML_REC_SEND_ALL = 1,  /* .kind (RDONE or RFIN) naming .round to every rank but this one that
                               * phx_ml_rec_dead names live when the action is taken (the caller takes
                               * the actions right after their event, so: the view at the event).
                               * One action, not one per rank: the queue stays a few actions deep
                               * whatever n is (a simulator holding thousands of these machines
                               * pays n of them per node otherwise) */
    PHX_ML_REC_SNAP_HOSTS,    /* the period's first failure: record where every task is (before cr moves any) */
    PHX_ML_REC_BEGIN,         /* a partial round .round restores here: rel = 0 (tasks without a record hold
                               * again); .guard: add a guard to the count of unfinished replays, taken back at
                               * the release; .nfail > 1: several failures (.seq: a sequential round) */
    PHX_ML_REC_PHASE,         /* the replay phase begins: workers check the lost tasks */
    PHX_ML_REC_HOLD,          /* .on: cr starts no checkpoint (1), or may again (0) */
    PHX_ML_REC_HANDBACK,      /* hand back dets (.dets) and logged messages bound to the recovered ranks'
                               * tasks; .own: this node is a rolled-back team-mate, replaying its own record */
    PHX_ML_REC_RELEASE_HELD,  /* the gate keeps round .round's release back (once a round) */
    PHX_ML_REC_RELEASE,       /* every live rank handed back round .round: release the replay records */
    PHX_ML_REC_DROP,          /* a global rollback voids the replays under way: open the gate, drop the records */
    PHX_ML_REC_FALLBACK,      /* the rollback is the global fallback of .nfail failures (.seq: after a partial
                               * round) */
    PHX_ML_REC_PERIOD,        /* a commit ends the period (.nfail failures, .global: it rolled back): records,
                               * counts and the release start afresh */
    PHX_ML_REC_PERIOD_KEPT,   /* a commit while a replay is under way (the hold forbids it): the period goes on */
    PHX_ML_REC_WORK_LOST,     /* end the job (76): .why, with .nfail and .seq (the round's losses) */
} phx_ml_rec_act_kind_t;

enum { PHX_ML_REC_RDONE = 1, PHX_ML_REC_RFIN = 2 };
/* PHX_ML_REC_WORK_LOST's why. */
enum {
    PHX_ML_REC_DISAGREE = 1,  /* the round's losses are not this node's of the period (a missed commit) */
    PHX_ML_REC_NO_BEGIN = 2,  /* a hand-back without the round's begin here */
};

typedef struct {
    phx_ml_rec_act_kind_t what;
    int kind, on, dets, own, guard, why, nfail, seq, global;
    uint32_t round;
} phx_ml_rec_act_t;

/* Returns 0, PHX_EINVAL or PHX_ENOMEM. */
int phx_ml_rec_create(const phx_ml_rec_cfg_t *cfg, phx_ml_rec_t **out);
void phx_ml_rec_destroy(phx_ml_rec_t *m);
/* A copy with the same state and queued actions (explorers). */
int phx_ml_rec_clone(const phx_ml_rec_t *m, phx_ml_rec_t **out);

/* The action queue's size: no event queues more than 5 actions (the
 * hand-back: PHASE, HOLD, HANDBACK, SEND_ALL, RELEASE), whatever n is. */
#define PHX_ML_REC_QMAX 8

/* ---- events: each queues actions and returns 0, or PHX_ENOSPC when the
 * action queue is full (the caller drains it after every event, so at most
 * 5 are queued) -------------------------------------------------------------- */

/* Rank failed (once per rank; repeats and bad ranks queue nothing new). */
int phx_ml_rec_on_failure(phx_ml_rec_t *m, int rank);
/* cr's view of rank r at a commit, rollback or join (1: dead). */
void phx_ml_rec_set_dead(phx_ml_rec_t *m, int r, int dead);
/* cr's partial round restores here: since (n bytes, NULL if unknown) are
 * the ranks it recovers, dead since its epoch. */
int phx_ml_rec_partial_begin(phx_ml_rec_t *m, const uint8_t *since);
/* The partial round's end here (workers paused): hand back. */
int phx_ml_rec_handback(phx_ml_rec_t *m);
/* ML_RDONE / ML_RFIN from rank from naming round (0: undecodable). */
int phx_ml_rec_on_rdone(phx_ml_rec_t *m, int from, uint32_t round);
int phx_ml_rec_on_rfin(phx_ml_rec_t *m, int from, uint32_t round);
/* Every replay record here finished (the phase ended); round: this
 * machine's round (phx_ml_rec_round) as the phase's end saw it (the
 * runtime's workers: the round of the last BEGIN). An end of an earlier
 * round is stale and queues nothing: its call was overtaken by the next
 * round's begin, whose own phase ends later (counting it for the new round
 * would send that round's RFIN before its replays ended). */
int phx_ml_rec_replay_done(phx_ml_rec_t *m, uint32_t round);
/* The gate may have opened: release if it did. */
int phx_ml_rec_retry(phx_ml_rec_t *m);
/* cr committed an epoch; busy: a replay is still under way here. */
int phx_ml_rec_on_commit(phx_ml_rec_t *m, int busy);
/* cr rolled every rank back to its last epoch. */
int phx_ml_rec_on_rollback(phx_ml_rec_t *m);

/* Takes the oldest queued action into *a: 1, or 0 when none is left. */
int phx_ml_rec_next(phx_ml_rec_t *m, phx_ml_rec_act_t *a);

/* ---- queries ---------------------------------------------------------------- */

/* cr's coordinator: are the losses (lost within dead, n bytes each) with
 * replayed (PHX_MLD_REPLAYED_*) recovered partially? 1 or 0. */
int phx_ml_rec_decide(const phx_ml_rec_t *m, const uint8_t *dead, const uint8_t *lost, int replayed);
/* mlog-team: does live rank r reload its own copy in this round? */
int phx_ml_rec_rolls(const phx_ml_rec_t *m, int r);
/* A partial recovery of this period is under way or done here, and no
 * global rollback voided it: restored tasks get replay records. */
int phx_ml_rec_replays(const phx_ml_rec_t *m);
int phx_ml_rec_released(const phx_ml_rec_t *m);
uint32_t phx_ml_rec_round(const phx_ml_rec_t *m);
/* n bytes each: the ranks dead now; those the period's recovery restores. */
const uint8_t *phx_ml_rec_dead(const phx_ml_rec_t *m);
const uint8_t *phx_ml_rec_rb(const phx_ml_rec_t *m);
/* The state as bytes, equal iff the states are (queued actions included);
 * returns the length, writing at most cap bytes (explorers). */
size_t phx_ml_rec_state(const phx_ml_rec_t *m, uint8_t *buf, size_t cap);

#endif
